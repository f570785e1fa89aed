//! Cluster-level types: version, status, resources.

use serde::Deserialize;

use crate::proxmox::lenient;

/// `GET /version`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Version {
    /// e.g. `8.4.1`.
    #[serde(default, deserialize_with = "lenient::string")]
    pub version: String,
    /// e.g. `8.4`.
    #[serde(default, deserialize_with = "lenient::string")]
    pub release: String,
    /// Repository commit id.
    #[serde(default)]
    pub repoid: String,
    /// Default console, if configured.
    #[serde(default)]
    pub console: Option<String>,
}

/// One entry of `GET /cluster/status`.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct ClusterStatusEntry {
    /// `cluster` or `node`.
    #[serde(rename = "type", default)]
    pub entry_type: String,
    /// `cluster` or `node/<name>`.
    #[serde(default)]
    pub id: String,
    /// Cluster or node name.
    #[serde(default)]
    pub name: String,
    /// Number of nodes (cluster entry).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub nodes: Option<u64>,
    /// Quorate (cluster entry).
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub quorate: Option<bool>,
    /// Node id (node entry).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub nodeid: Option<u64>,
    /// Node IP (node entry).
    #[serde(default)]
    pub ip: Option<String>,
    /// Whether this is the node answering (node entry).
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub local: Option<bool>,
    /// Online (node entry).
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub online: Option<bool>,
    /// Subscription level.
    #[serde(default)]
    pub level: Option<String>,
}

/// The `type` filter of `GET /cluster/resources`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResourceType {
    /// qemu and lxc guests.
    Vm,
    /// Storages (one entry per node and storage).
    Storage,
    /// Nodes.
    Node,
    /// SDN zones.
    Sdn,
}

impl ResourceType {
    /// The query value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Vm => "vm",
            Self::Storage => "storage",
            Self::Node => "node",
            Self::Sdn => "sdn",
        }
    }
}

/// One entry of `GET /cluster/resources`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct ClusterResource {
    /// e.g. `qemu/100`, `node/pve1`, `storage/pve1/local`.
    #[serde(default)]
    pub id: String,
    /// `qemu`, `lxc`, `node`, `storage`, `pool`, `sdn`.
    #[serde(rename = "type", default)]
    pub resource_type: String,
    /// Guest id.
    #[serde(default, deserialize_with = "lenient::opt_u32")]
    pub vmid: Option<u32>,
    /// Node.
    #[serde(default)]
    pub node: Option<String>,
    /// Status (`running`, `stopped`, `unknown`, `online`, `available`, ...).
    #[serde(default)]
    pub status: Option<String>,
    /// Guest name.
    #[serde(default)]
    pub name: Option<String>,
    /// Whether the guest is a template.
    #[serde(default, deserialize_with = "lenient::bool01")]
    pub template: bool,
    /// Tags as stored (`;`-separated).
    #[serde(default)]
    pub tags: Option<String>,
    /// Lock, if any.
    #[serde(default)]
    pub lock: Option<String>,
    /// Pool.
    #[serde(default)]
    pub pool: Option<String>,
    /// HA state.
    #[serde(default)]
    pub hastate: Option<String>,
    /// CPUs (guest/node).
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub maxcpu: Option<f64>,
    /// CPU usage.
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub cpu: Option<f64>,
    /// Memory size in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    /// Memory used in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub mem: Option<u64>,
    /// Disk size in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxdisk: Option<u64>,
    /// Disk used in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub disk: Option<u64>,
    /// Uptime in seconds.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    /// Storage id (storage entries).
    #[serde(default)]
    pub storage: Option<String>,
    /// Storage plugin type.
    #[serde(default)]
    pub plugintype: Option<String>,
    /// Storage content types (`images,iso`).
    #[serde(default)]
    pub content: Option<String>,
    /// Whether the storage is shared.
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub shared: Option<bool>,
}

impl ClusterResource {
    /// Tags split on `;`, `,` or whitespace.
    pub fn tag_list(&self) -> Vec<String> {
        self.tags
            .as_deref()
            .map(super::config::split_tags)
            .unwrap_or_default()
    }

    /// Whether this is a qemu guest.
    pub fn is_qemu(&self) -> bool {
        self.resource_type == "qemu"
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decodes_resources() {
        let r: Vec<ClusterResource> = serde_json::from_value(json!([
            {"id":"qemu/100","type":"qemu","vmid":100,"node":"pve1","status":"stopped","name":"tpl","template":1,"tags":"capmox;ubuntu","maxmem":4294967296u64},
            {"id":"qemu/101","type":"qemu","vmid":"101","node":"pve2","status":"unknown","lock":"clone"},
            {"id":"storage/pve1/local","type":"storage","storage":"local","node":"pve1","shared":0,"content":"iso,vztmpl","plugintype":"dir"},
            {"id":"/pool/capi","type":"pool","pool":"capi"}
        ]))
        .unwrap();
        assert!(r[0].template && r[0].is_qemu());
        assert_eq!(r[0].tag_list(), vec!["capmox", "ubuntu"]);
        assert_eq!(r[1].vmid, Some(101));
        assert!(!r[1].template);
        assert_eq!(r[2].shared, Some(false));
        assert_eq!(r[3].pool.as_deref(), Some("capi"));
    }

    #[test]
    fn decodes_status() {
        let s: Vec<ClusterStatusEntry> = serde_json::from_value(json!([
            {"type":"cluster","id":"cluster","name":"c","nodes":3,"quorate":1,"version":5},
            {"type":"node","id":"node/pve1","name":"pve1","nodeid":1,"ip":"10.0.0.1","local":1,"online":1,"level":""}
        ]))
        .unwrap();
        assert_eq!(s[0].quorate, Some(true));
        assert_eq!(s[1].online, Some(true));
    }
}
