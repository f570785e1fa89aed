//! Proxmox HA resources (`/cluster/ha/resources`), groups (`/cluster/ha/groups`) and PCI
//! resource mappings (`/cluster/mapping/pci`).

use serde::{Deserialize, Serialize};

/// `POST /cluster/ha/resources` and `PUT /cluster/ha/resources/{sid}` parameters.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HaResourceRequest {
    /// `vm:<vmid>` (create only; the update takes it in the path).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sid: Option<String>,
    /// HA group.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// `started`, `stopped`, `ignored`, …
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<String>,
    /// Restarts on the same node.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_restart: Option<u32>,
    /// Relocations.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_relocate: Option<u32>,
    /// Options to remove (update only), e.g. `group`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub delete: Option<String>,
}

/// One entry of `GET /cluster/ha/resources` (only `sid` is guaranteed).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct HaResource {
    /// `vm:<vmid>`.
    pub sid: String,
    /// Requested state.
    #[serde(default)]
    pub state: Option<String>,
    /// HA group.
    #[serde(default)]
    pub group: Option<String>,
}

/// One entry of `GET /cluster/ha/rules` (PVE 9): a node-affinity or resource-affinity rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct HaRule {
    /// Rule id.
    pub rule: String,
    /// `node-affinity` or `resource-affinity`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The HA resources it applies to (`vm:100,vm:101`).
    #[serde(default)]
    pub resources: String,
    /// Config digest (concurrent changes are refused).
    #[serde(default)]
    pub digest: Option<String>,
}

impl HaRule {
    /// The resource ids the rule names.
    pub fn resource_ids(&self) -> Vec<String> {
        self.resources
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(str::to_owned)
            .collect()
    }
}

/// `POST /cluster/ha/rules` parameters (PVE 9) of a node-affinity rule.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HaRuleCreate {
    /// Rule id.
    pub rule: String,
    /// `node-affinity`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The HA resources it applies to (`vm:100,vm:101`).
    pub resources: String,
    /// The nodes (`pve1,pve2:2`).
    pub nodes: String,
    /// Only the rule's nodes (`1`) or prefer them (`0`).
    #[serde(serialize_with = "crate::proxmox::lenient::ser_bool01")]
    pub strict: bool,
    /// Why the rule exists.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comment: Option<String>,
}

/// `PUT /cluster/ha/rules/{rule}` parameters (PVE 9).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct HaRuleUpdate {
    /// The rule's type (required by PVE on every update).
    #[serde(rename = "type")]
    pub kind: String,
    /// The full new list of resources.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<String>,
    /// The digest the rule had when it was read.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// One entry of `GET /cluster/ha/groups`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct HaGroup {
    /// Group id.
    pub group: String,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn requests_leave_out_what_is_unset() {
        let r = HaResourceRequest {
            sid: Some("vm:101".into()),
            state: Some("started".into()),
            max_restart: Some(1),
            max_relocate: Some(2),
            ..Default::default()
        };
        assert_eq!(
            serde_json::to_value(&r).unwrap(),
            json!({"sid": "vm:101", "state": "started", "max_restart": 1, "max_relocate": 2})
        );
        let e: Vec<HaResource> = serde_json::from_value(
            json!([{"sid": "vm:1", "state": "started", "type": "vm", "max_restart": 1}]),
        )
        .unwrap();
        assert_eq!(e[0].state.as_deref(), Some("started"));
    }
}

/// One entry of `GET /cluster/mapping/pci`: a PCI resource mapping and its per-node entries
/// (`node=<node>,path=<bdf>,id=<vendor:device>,...`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct PciMapping {
    /// The mapping's id (what `hostpci<n>: mapping=` names).
    pub id: String,
    /// One property string per node.
    #[serde(default)]
    pub map: Vec<String>,
}
