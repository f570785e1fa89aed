//! `/version` and `/cluster/*`.

use crate::proxmox::Client;
use crate::proxmox::error::Error;
use crate::proxmox::lenient;
use crate::proxmox::path::ApiPath;
use crate::proxmox::types::{ClusterResource, ClusterStatusEntry, ResourceType, Version};

impl Client {
    /// `GET /version`.
    pub async fn version(&self) -> Result<Version, Error> {
        self.get(&ApiPath::root().lit("version"), &[]).await
    }

    /// `GET /cluster/status`.
    pub async fn cluster_status(&self) -> Result<Vec<ClusterStatusEntry>, Error> {
        self.get(&ApiPath::root().lit("cluster/status"), &[]).await
    }

    /// The Proxmox cluster's name from `GET /cluster/status`: `None` for a node outside any
    /// cluster, and for a token without `Sys.Audit` on `/` (HTTP 403, as capmox tolerates it:
    /// the name is optional, the request still proved that Proxmox answers and knows the token).
    pub async fn cluster_name(&self) -> Result<Option<String>, Error> {
        match self.cluster_status().await {
            Ok(status) => Ok(status
                .into_iter()
                .find(|e| e.entry_type == "cluster")
                .map(|e| e.name)
                .filter(|n| !n.is_empty())),
            Err(Error::Auth { status: 403, .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// `GET /cluster/resources[?type=..]`.
    pub async fn cluster_resources(
        &self,
        filter: Option<ResourceType>,
    ) -> Result<Vec<ClusterResource>, Error> {
        let q: Vec<(String, String)> = filter
            .map(|t| ("type".to_owned(), t.as_str().to_owned()))
            .into_iter()
            .collect();
        self.get(&ApiPath::root().lit("cluster/resources"), &q).await
    }

    /// Finds the node a guest lives on via `GET /cluster/resources?type=vm` (`None` if absent).
    pub async fn locate_vm(&self, vmid: u32) -> Result<Option<String>, Error> {
        let all = self.cluster_resources(Some(ResourceType::Vm)).await?;
        Ok(all
            .into_iter()
            .find(|r| r.vmid == Some(vmid))
            .and_then(|r| r.node))
    }

    /// `GET /cluster/nextid`: the lowest free VMID (PVE sends it as a JSON string). Reserves nothing.
    pub async fn next_id(&self) -> Result<u32, Error> {
        let path = ApiPath::root().lit("cluster/nextid");
        let v: serde_json::Value = self.get(&path, &[]).await?;
        vmid_of(&path, &v)
    }

    /// `GET /cluster/nextid?vmid=N`: `Ok(true)` if the VMID is free, `Ok(false)` if it is taken.
    pub async fn is_vmid_free(&self, vmid: u32) -> Result<bool, Error> {
        let path = ApiPath::root().lit("cluster/nextid");
        match self
            .get::<serde_json::Value>(&path, &[("vmid".to_owned(), vmid.to_string())])
            .await
        {
            Ok(v) => vmid_of(&path, &v).map(|_| true),
            Err(Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e),
        }
    }
}

fn vmid_of(path: &ApiPath, v: &serde_json::Value) -> Result<u32, Error> {
    lenient::value_to_u64(v)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| Error::Decode {
            context: path.template().to_owned(),
            message: format!("expected a VMID, got {v}"),
        })
}
