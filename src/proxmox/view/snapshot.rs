//! One `GET /cluster/resources` answer, indexed by VMID: what the view shares between every VM of
//! a Proxmox cluster (guests with node, status, lock, name, tags, uptime; nodes; storages).

use std::collections::HashMap;

use crate::proxmox::Client;
use crate::proxmox::types::ClusterResource;

/// One `GET /cluster/resources` answer, indexed by VMID.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Every entry (guests, nodes, storages, pools).
    pub resources: Vec<ClusterResource>,
    vms: HashMap<u32, usize>,
}

impl Snapshot {
    /// Reads `GET /cluster/resources` (every type).
    pub async fn fetch(client: &Client) -> Result<Self, crate::proxmox::Error> {
        client.cluster_resources(None).await.map(Self::new)
    }

    /// Indexes a resource list.
    pub fn new(resources: Vec<ClusterResource>) -> Self {
        let vms = resources
            .iter()
            .enumerate()
            .filter(|(_, r)| r.resource_type == "qemu" || r.resource_type == "lxc")
            .filter_map(|(i, r)| Some((r.vmid?, i)))
            .collect();
        Self { resources, vms }
    }

    /// The guest with `vmid`.
    pub fn vm(&self, vmid: u32) -> Option<&ClusterResource> {
        self.vms.get(&vmid).and_then(|i| self.resources.get(*i))
    }

    /// The storages of `node` that hold ISO images and are available, in name order.
    pub fn iso_storages(&self, node: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .resources
            .iter()
            .filter(|r| r.resource_type == "storage" && r.node.as_deref() == Some(node))
            .filter(|r| r.status.as_deref().is_none_or(|s| s == "available"))
            .filter(|r| {
                r.content
                    .as_deref()
                    .is_some_and(|c| c.split(',').any(|t| t.trim() == "iso"))
            })
            .filter_map(|r| r.storage.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn snapshot_indexes_guests_and_iso_storages() {
        let r: Vec<ClusterResource> = serde_json::from_value(json!([
            {"id": "qemu/200", "type": "qemu", "vmid": 200, "node": "pve1", "status": "running"},
            {"id": "storage/pve1/shared", "type": "storage", "storage": "shared", "node": "pve1", "content": "images,iso", "status": "available"},
            {"id": "storage/pve1/local", "type": "storage", "storage": "local", "node": "pve1", "content": "iso,vztmpl", "status": "available"},
            {"id": "storage/pve1/lvm", "type": "storage", "storage": "lvm", "node": "pve1", "content": "images", "status": "available"},
            {"id": "storage/pve2/local", "type": "storage", "storage": "local", "node": "pve2", "content": "iso", "status": "available"}
        ])).unwrap();
        let s = Snapshot::new(r);
        assert_eq!(s.vm(200).and_then(|v| v.status.as_deref()), Some("running"));
        assert!(s.vm(201).is_none());
        assert_eq!(s.iso_storages("pve1"), vec!["local", "shared"]);
    }
}
