//! Scenario parts about who may do what (ACL entries) and HA groups.

use serde::{Deserialize, Serialize};

/// One ACL entry (`pveum acl modify <path> --roles <role> --users|--tokens <id>`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct AclSpec {
    /// ACL path: `/`, `/vms/100`, `/storage/local`, `/pool/capi`, `/sdn/zones/localnetwork/vmbr0`,
    /// `/mapping/pci/gpu`, `/nodes/pve1`, ...
    pub path: String,
    /// Role name: a built-in role of the version played (`PVEVMAdmin`, ...) or one of `roles`.
    pub role: String,
    /// The user the entry is for (`capmox@pve`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    /// The API token the entry is for (`capmox@pve!capi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// Whether the role also applies below `path` (PVE's default: yes).
    #[serde(default = "default_true")]
    pub propagate: bool,
}

impl AclSpec {
    /// The user or token id the entry is for.
    pub fn subject(&self) -> Option<&str> {
        self.token.as_deref().or(self.user.as_deref())
    }
}

/// An HA group: just its name (`- prod`, members: every node) or its full definition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(untagged)]
pub enum HaGroupSpec {
    /// Only the name: a group of every node without priorities.
    Name(String),
    /// The group as `POST /cluster/ha/groups` takes it.
    Full(HaGroupDef),
}

/// An HA group definition.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct HaGroupDef {
    /// Group id.
    pub group: String,
    /// `node[:priority]` list (comma separated); empty means every node.
    #[serde(default)]
    pub nodes: String,
    /// Resources may only run on the group's nodes.
    #[serde(default)]
    pub restricted: bool,
    /// Do not migrate back to a higher-priority node.
    #[serde(default)]
    pub nofailback: bool,
    /// Comment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

impl HaGroupSpec {
    /// The group id.
    pub fn name(&self) -> &str {
        match self {
            HaGroupSpec::Name(n) => n,
            HaGroupSpec::Full(d) => &d.group,
        }
    }
}

impl From<&str> for HaGroupSpec {
    fn from(name: &str) -> Self {
        HaGroupSpec::Name(name.to_owned())
    }
}

fn default_true() -> bool {
    true
}
