//! `/nodes`, node status and the per-node guest lists.

use crate::proxmox::Client;
use crate::proxmox::error::Error;
use crate::proxmox::path::ApiPath;
use crate::proxmox::types::{NodeListEntry, NodeStatus, VmListEntry};

impl Client {
    /// `GET /nodes`.
    pub async fn nodes(&self) -> Result<Vec<NodeListEntry>, Error> {
        self.get(&ApiPath::root().lit("nodes"), &[]).await
    }

    /// `GET /nodes/{node}/status`.
    pub async fn node_status(&self, node: &str) -> Result<NodeStatus, Error> {
        self.get(&ApiPath::node(node).lit("status"), &[]).await
    }

    /// `GET /nodes/{node}/qemu`.
    pub async fn node_vms(&self, node: &str) -> Result<Vec<VmListEntry>, Error> {
        self.get(&ApiPath::node(node).lit("qemu"), &[]).await
    }

    /// `GET /nodes/{node}/lxc`.
    pub async fn node_containers(&self, node: &str) -> Result<Vec<VmListEntry>, Error> {
        self.get(&ApiPath::node(node).lit("lxc"), &[]).await
    }
}
