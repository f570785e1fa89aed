//! Proxmox HA for a v1alpha2 `ProxmoxMachine` (`spec.ha`, capmox #216): the VM is registered as
//! HA resource `vm:<vmid>` after its first start, updated when the spec changes and removed
//! before the VM is destroyed. `status.haResource` records what was applied.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Default of `maxRestart` and `maxRelocate` (Proxmox's).
pub const DEFAULT_HA_MAX_TRIES: i32 = 1;

/// How Proxmox HA should manage the machine's VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HaSpec {
    /// HA group the resource belongs to (must exist in Proxmox: `/cluster/ha/groups`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), regex(pattern = super::schema::PVE_CONFIG_ID_PATTERN))]
    pub group: Option<String>,

    /// Requested state (default `started`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "started"))]
    pub state: Option<HaState>,

    /// Restarts on the same node after a failed start (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_restart: Option<i32>,

    /// Relocations to other nodes after a failed start (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub max_relocate: Option<i32>,
}

/// Requested HA state of the VM.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum HaState {
    /// Keep the VM running; recover it on node failures.
    #[default]
    Started,
    /// Keep the VM stopped (still relocated on node failures).
    Stopped,
    /// Leave the VM alone (HA does not act on it).
    Ignored,
}

impl HaState {
    /// The state as Proxmox spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Started => "started",
            Self::Stopped => "stopped",
            Self::Ignored => "ignored",
        }
    }
}

/// The HA resource as applied to Proxmox (`status.haResource`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HaResourceStatus {
    /// Resource id, `vm:<vmid>`.
    pub sid: String,
    /// HA group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group: Option<String>,
    /// Requested state.
    pub state: HaState,
    /// Restarts on the same node.
    pub max_restart: i32,
    /// Relocations.
    pub max_relocate: i32,
}

impl HaSpec {
    /// The resource this spec asks for on VM `vmid`, with Proxmox's defaults filled in.
    pub fn resource(&self, vmid: u32) -> HaResourceStatus {
        HaResourceStatus {
            sid: format!("vm:{vmid}"),
            group: self.group.clone(),
            state: self.state.unwrap_or_default(),
            max_restart: self.max_restart.unwrap_or(DEFAULT_HA_MAX_TRIES),
            max_relocate: self.max_relocate.unwrap_or(DEFAULT_HA_MAX_TRIES),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resource_fills_proxmox_defaults() {
        let r = HaSpec::default().resource(101);
        assert_eq!(r.sid, "vm:101");
        assert_eq!((r.state, r.max_restart, r.max_relocate), (HaState::Started, 1, 1));
        let spec: HaSpec =
            serde_json::from_value(serde_json::json!({"group": "g1", "state": "ignored", "maxRestart": 3}))
                .unwrap();
        let r = spec.resource(7);
        assert_eq!(
            (r.group.as_deref(), r.state.as_str(), r.max_restart),
            (Some("g1"), "ignored", 3)
        );
    }
}
