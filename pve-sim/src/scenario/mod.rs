//! Scenario files: the cluster a simulator starts with (YAML, deserialised with serde-saphyr).

mod access;
mod faults;
mod timing;

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

pub use access::{AclSpec, HaGroupSpec};
pub use faults::{EndpointFault, FaultSpec};
pub use timing::{CloudInitResult, GuestSpec, LatencySpec, Profile};

use crate::version::PveVersion;

/// Errors while loading a scenario.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario file {path}: {source}")]
    Read {
        /// Path of the file.
        path: String,
        /// Underlying I/O error.
        source: std::io::Error,
    },
    /// The YAML did not parse into a scenario.
    #[error("invalid scenario YAML: {0}")]
    Parse(String),
    /// The scenario is inconsistent (e.g. a template on an unknown node).
    #[error("invalid scenario: {0}")]
    Invalid(String),
}

/// A complete simulated cluster: nodes, storages, templates, users, timing, guest behaviour, faults.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// The Proxmox VE release played: `"8.4"` (default) or `"9.1"`.
    #[serde(default)]
    pub version: PveVersion,
    /// Cluster name reported by `/cluster/status` (default `sim`).
    #[serde(default = "default_cluster_name")]
    pub cluster_name: String,
    /// Cluster nodes (default `pve1`..`pve3`).
    #[serde(default = "default_nodes")]
    pub nodes: Vec<NodeSpec>,
    /// Storages (default `local`, `local-lvm`, `shared`); shared ones exist once, local ones on every listed node.
    #[serde(default = "default_storages")]
    pub storages: Vec<StorageSpec>,
    /// Templates (and plain VMs) present at start (default none when omitted in a file).
    #[serde(default)]
    pub templates: Vec<VmSpec>,
    /// Resource pools. When empty, any `pool` parameter is accepted; otherwise unknown pools give 403.
    #[serde(default)]
    pub pools: Vec<String>,
    /// HA groups (`/cluster/ha/groups`): names, or `{group, nodes, restricted, nofailback,
    /// comment}`. On 9.x the HA manager migrates them to node-affinity rules (see the README).
    #[serde(default)]
    pub ha_groups: Vec<HaGroupSpec>,
    /// PCI resource mappings (`/cluster/mapping/pci`): id → `map` entries
    /// (`node=pve1,path=0000:01:00.0,id=10de:1eb8`).
    #[serde(default)]
    pub pci_mappings: BTreeMap<String, Vec<String>>,
    /// Users with their passwords and API tokens (default `root@pam` and `capmox@pve!capi`).
    #[serde(default = "default_users")]
    pub users: Vec<UserSpec>,
    /// Task and guest timings.
    #[serde(default)]
    pub latency: LatencySpec,
    /// Simulated guest behaviour.
    #[serde(default)]
    pub guest: GuestSpec,
    /// Fault injection.
    #[serde(default)]
    pub faults: FaultSpec,
    /// The DHCP server and router advertisements of the guests' network.
    #[serde(default)]
    pub dhcp: DhcpSpec,
    /// Custom roles: name → privileges (privileges the version played does not know are ignored,
    /// as PVE ignores them in `user.cfg`).
    #[serde(default)]
    pub roles: BTreeMap<String, Vec<String>>,
    /// ACL entries. When there is at least one, every request is checked against them (as the
    /// version's schema says); without any, every authenticated user may do everything.
    #[serde(default)]
    pub acl: Vec<AclSpec>,
}

/// What guests with DHCP/SLAAC NICs get once booted (reported by `agent/network-get-interfaces`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct DhcpSpec {
    /// First IPv4 address handed out by DHCPv4.
    pub ipv4_first: std::net::Ipv4Addr,
    /// Last IPv4 address handed out by DHCPv4.
    pub ipv4_last: std::net::Ipv4Addr,
    /// Prefix length of DHCPv4 leases.
    pub ipv4_prefix: u8,
    /// The /64 prefix of DHCPv6 leases and SLAAC addresses.
    pub ipv6_prefix: std::net::Ipv6Addr,
}

impl Default for DhcpSpec {
    fn default() -> Self {
        Self {
            ipv4_first: std::net::Ipv4Addr::new(10, 99, 0, 100),
            ipv4_last: std::net::Ipv4Addr::new(10, 99, 0, 250),
            ipv4_prefix: 24,
            ipv6_prefix: std::net::Ipv6Addr::new(0xfd99, 0, 0, 0, 0, 0, 0, 0),
        }
    }
}

/// One cluster node.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct NodeSpec {
    /// Node name, e.g. `pve1`.
    pub name: String,
    /// Number of logical CPUs.
    #[serde(default = "default_cpus")]
    pub cpus: u32,
    /// Total memory in bytes.
    #[serde(default = "default_memory")]
    pub memory: u64,
    /// Whether the node is online.
    #[serde(default = "default_true")]
    pub online: bool,
    /// Linux bridges on the node. When empty, any bridge is accepted; otherwise a VM whose `netN`
    /// names another one fails to start (`bridge '<b>' does not exist`, as on PVE).
    #[serde(default)]
    pub bridges: Vec<String>,
}

/// One storage definition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct StorageSpec {
    /// Storage id, e.g. `local-lvm`.
    pub name: String,
    /// Plugin type, e.g. `dir`, `lvmthin`, `nfs`, `rbd`.
    #[serde(rename = "type", default = "default_storage_type")]
    pub kind: String,
    /// Content types, comma separated (`iso,images`).
    pub content: String,
    /// Shared between all nodes.
    #[serde(default)]
    pub shared: bool,
    /// Nodes the storage exists on (empty = all nodes).
    #[serde(default)]
    pub nodes: Vec<String>,
    /// Capacity in bytes.
    #[serde(default = "default_storage_size")]
    pub total: u64,
}

/// A VM or template present at start.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct VmSpec {
    /// VMID.
    pub vmid: u32,
    /// Node the VM lives on.
    pub node: String,
    /// VM name.
    pub name: String,
    /// Tags joined with `;`.
    #[serde(default)]
    pub tags: String,
    /// Whether it is a template (default true).
    #[serde(default = "default_true")]
    pub template: bool,
    /// Further config keys (`scsi0`, `net0`, `smbios1`, `cores`, `memory`, ...), values as PVE config strings.
    #[serde(default)]
    pub config: BTreeMap<String, String>,
}

/// A user with optional password (ticket auth) and API tokens.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct UserSpec {
    /// `user@realm`.
    pub userid: String,
    /// Password for `/access/ticket` (none = no ticket login).
    #[serde(default)]
    pub password: Option<String>,
    /// API tokens of this user.
    #[serde(default)]
    pub tokens: Vec<TokenSpec>,
}

/// An API token.
#[derive(Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TokenSpec {
    /// Token name (the part after `!`).
    pub name: String,
    /// Secret; generated at start when absent.
    #[serde(default)]
    pub secret: Option<String>,
    /// Privilege separation (PVE's default): the token has the privileges of its own ACL entries
    /// that its user also has. `false`: the token has its user's privileges.
    #[serde(default = "default_true")]
    pub privsep: bool,
}

impl std::fmt::Debug for UserSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UserSpec")
            .field("userid", &self.userid)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .field("tokens", &self.tokens)
            .finish()
    }
}

impl std::fmt::Debug for TokenSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenSpec")
            .field("name", &self.name)
            .field("secret", &self.secret.as_ref().map(|_| "<redacted>"))
            .field("privsep", &self.privsep)
            .finish()
    }
}

fn default_cpus() -> u32 {
    16
}
fn default_memory() -> u64 {
    64 * 1024 * 1024 * 1024
}
fn default_true() -> bool {
    true
}
fn default_storage_type() -> String {
    "dir".to_string()
}
fn default_storage_size() -> u64 {
    1024 * 1024 * 1024 * 1024
}

fn default_cluster_name() -> String {
    "sim".to_string()
}

fn default_nodes() -> Vec<NodeSpec> {
    Scenario::default().nodes
}

fn default_storages() -> Vec<StorageSpec> {
    Scenario::default().storages
}

fn default_users() -> Vec<UserSpec> {
    Scenario::default().users
}

impl Default for Scenario {
    fn default() -> Self {
        let node = |name: &str| NodeSpec {
            name: name.to_string(),
            cpus: 16,
            memory: 64 * 1024 * 1024 * 1024,
            online: true,
            bridges: Vec::new(),
        };
        let storage = |name: &str, kind: &str, content: &str, shared: bool| StorageSpec {
            name: name.to_string(),
            kind: kind.to_string(),
            content: content.to_string(),
            shared,
            nodes: Vec::new(),
            total: default_storage_size(),
        };
        let template =
            |vmid: u32, node: &str, name: &str, tags: &str, uuid: &str, mac: &str, storage: &str| {
                let mut config = BTreeMap::new();
                config.insert("cores".to_string(), "2".to_string());
                config.insert("sockets".to_string(), "1".to_string());
                config.insert("memory".to_string(), "2048".to_string());
                config.insert("agent".to_string(), "1".to_string());
                config.insert("ostype".to_string(), "l26".to_string());
                config.insert("scsihw".to_string(), "virtio-scsi-pci".to_string());
                config.insert(
                    "scsi0".to_string(),
                    format!("{storage}:base-{vmid}-disk-0,size=20G"),
                );
                config.insert("net0".to_string(), format!("virtio={mac},bridge=vmbr0"));
                config.insert("boot".to_string(), "order=scsi0;net0".to_string());
                config.insert("smbios1".to_string(), format!("uuid={uuid}"));
                VmSpec {
                    vmid,
                    node: node.to_string(),
                    name: name.to_string(),
                    tags: tags.to_string(),
                    template: true,
                    config,
                }
            };
        Self {
            cluster_name: "sim".to_string(),
            nodes: vec![node("pve1"), node("pve2"), node("pve3")],
            storages: vec![
                storage("local", "dir", "iso,vztmpl,backup", false),
                storage("local-lvm", "lvmthin", "images,rootdir", false),
                storage("shared", "nfs", "images,iso", true),
            ],
            templates: vec![
                template(
                    100,
                    "pve1",
                    "ubuntu-2404-kube-v1.33",
                    "capmox;template;v1.33.0",
                    "5b0f8a44-3c2e-4d8e-9a51-0f6c2a1b7e10",
                    "BC:24:11:00:01:00",
                    "local-lvm",
                ),
                template(
                    101,
                    "pve2",
                    "ubuntu-2404-kube-v1.32",
                    "capmox;template;v1.32.4",
                    "6c1e9b55-4d3f-4e9f-8b62-1a7d3b2c8f21",
                    "BC:24:11:00:01:01",
                    "shared",
                ),
                template(
                    102,
                    "pve3",
                    "flatcar-kube-v1.33",
                    "capmox;flatcar;template;v1.33.0",
                    "7d2f0c66-5e4a-4fa0-9c73-2b8e4c3d9a32",
                    "BC:24:11:00:01:02",
                    "local-lvm",
                ),
            ],
            pools: Vec::new(),
            ha_groups: Vec::new(),
            pci_mappings: BTreeMap::new(),
            users: vec![
                UserSpec {
                    userid: "root@pam".to_string(),
                    password: Some("pve-sim-password".to_string()),
                    tokens: Vec::new(),
                },
                UserSpec {
                    userid: "capmox@pve".to_string(),
                    password: Some("capmox-password".to_string()),
                    tokens: vec![TokenSpec {
                        name: "capi".to_string(),
                        secret: None,
                        privsep: true,
                    }],
                },
            ],
            latency: LatencySpec::default(),
            guest: GuestSpec::default(),
            faults: FaultSpec::default(),
            dhcp: DhcpSpec::default(),
            roles: BTreeMap::new(),
            acl: Vec::new(),
            version: PveVersion::default(),
        }
    }
}

impl Scenario {
    /// Parses a scenario from YAML text.
    pub fn from_yaml(text: &str) -> Result<Self, ScenarioError> {
        let scenario: Scenario =
            serde_saphyr::from_str(text).map_err(|e| ScenarioError::Parse(e.to_string()))?;
        scenario.check()?;
        Ok(scenario)
    }

    /// Reads and parses a scenario file.
    pub fn from_file(path: &std::path::Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.display().to_string(),
            source,
        })?;
        Self::from_yaml(&text)
    }

    /// Checks internal consistency.
    pub fn check(&self) -> Result<(), ScenarioError> {
        if self.nodes.is_empty() {
            return Err(ScenarioError::Invalid("at least one node is required".into()));
        }
        let known = |n: &str| self.nodes.iter().any(|x| x.name == n);
        for s in &self.storages {
            if let Some(bad) = s.nodes.iter().find(|n| !known(n)) {
                return Err(ScenarioError::Invalid(format!(
                    "storage {} names unknown node {bad}",
                    s.name
                )));
            }
        }
        let mut seen = std::collections::BTreeSet::new();
        for t in &self.templates {
            if !known(&t.node) {
                return Err(ScenarioError::Invalid(format!(
                    "VM {} is on unknown node {}",
                    t.vmid, t.node
                )));
            }
            if t.vmid < 100 || !seen.insert(t.vmid) {
                return Err(ScenarioError::Invalid(format!(
                    "VMID {} is below 100 or duplicated",
                    t.vmid
                )));
            }
        }
        for u in &self.users {
            if !u.userid.contains('@') {
                return Err(ScenarioError::Invalid(format!(
                    "user id {} lacks @realm",
                    u.userid
                )));
            }
        }
        for a in &self.acl {
            if a.user.is_some() == a.token.is_some() {
                return Err(ScenarioError::Invalid(format!(
                    "ACL entry on {} needs exactly one of user and token",
                    a.path
                )));
            }
            if crate::access::normalize_path(&a.path).is_none() {
                return Err(ScenarioError::Invalid(format!(
                    "ACL entry: invalid path '{}'",
                    a.path
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_output_hides_secrets() {
        let mut s = Scenario::default();
        s.users[1].tokens[0].secret = Some("very-secret-value".into());
        let text = format!("{s:?}");
        assert!(!text.contains("very-secret-value"));
        assert!(!text.contains("pve-sim-password"));
        assert!(text.contains("capmox@pve"));
    }

    #[test]
    fn realistic_profile_durations() {
        use std::time::Duration;
        let l = LatencySpec {
            profile: Profile::Realistic,
            ..LatencySpec::default()
        };
        assert_eq!(l.task("qmclone-linked"), Duration::from_secs(2));
        assert_eq!(l.task("qmclone-full"), Duration::from_secs(20));
        assert_eq!(l.task("qmstart"), Duration::from_secs(3));
        assert_eq!(l.agent_ready(), Duration::from_secs(15));
        assert_eq!(LatencySpec::default().task("qmclone-full"), Duration::ZERO);
    }
}
