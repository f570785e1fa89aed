//! The VM's Proxmox HA resource: registered after the first start, updated when what the owner
//! wants changes, removed when HA is no longer wanted and before the VM is stopped for deletion.
//! What was applied is recorded by the owner ([`super::VmRecord::ha`]), so a pass reads nothing
//! from `/cluster/ha/resources`: whether the VM already is a resource comes from the shared VM
//! list (`hastate`) and from the answer of the write itself (`already defined`, `no such
//! resource`).

use crate::proxmox::types::HaResourceRequest;

/// How often HA restarts or relocates a VM when the owner does not say (Proxmox's default).
pub const DEFAULT_MAX_TRIES: u32 = 1;

/// The HA resource an owner wants its VM to be.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HaWish {
    /// HA group.
    pub group: Option<String>,
    /// Requested state (`started`, `stopped`, `ignored`; `None`: `started`).
    pub state: Option<String>,
    /// Restarts on the same node (`None`: [`DEFAULT_MAX_TRIES`]).
    pub max_restart: Option<u32>,
    /// Relocations to another node (`None`: [`DEFAULT_MAX_TRIES`]).
    pub max_relocate: Option<u32>,
}

impl HaWish {
    /// The resource of VM `vmid`, Proxmox's defaults filled in.
    pub fn resource(&self, vmid: u32) -> HaResource {
        HaResource {
            sid: format!("vm:{vmid}"),
            group: self.group.clone(),
            state: self.state.clone().unwrap_or_else(|| "started".to_owned()),
            max_restart: self.max_restart.unwrap_or(DEFAULT_MAX_TRIES),
            max_relocate: self.max_relocate.unwrap_or(DEFAULT_MAX_TRIES),
        }
    }
}

/// An HA resource as applied.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HaResource {
    /// `vm:<vmid>`.
    pub sid: String,
    /// HA group.
    pub group: Option<String>,
    /// Requested state.
    pub state: String,
    /// Restarts on the same node.
    pub max_restart: u32,
    /// Relocations to another node.
    pub max_relocate: u32,
}

/// The request that makes the resource `r` (`create`: with its `sid`; an update of a resource
/// without a group removes the one it may have).
pub fn request(r: &HaResource, create: bool) -> HaResourceRequest {
    HaResourceRequest {
        sid: create.then(|| r.sid.clone()),
        group: r.group.clone(),
        state: Some(r.state.clone()),
        max_restart: Some(r.max_restart),
        max_relocate: Some(r.max_relocate),
        delete: (!create && r.group.is_none()).then(|| "group".to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_carry_every_setting_and_clear_a_removed_group() {
        let r = HaWish {
            group: Some("g1".into()),
            state: Some("stopped".into()),
            max_restart: Some(2),
            max_relocate: Some(0),
        }
        .resource(101);
        let c = request(&r, true);
        assert_eq!(c.sid.as_deref(), Some("vm:101"));
        assert_eq!(
            (
                c.group.as_deref(),
                c.state.as_deref(),
                c.max_restart,
                c.max_relocate,
                c.delete
            ),
            (Some("g1"), Some("stopped"), Some(2), Some(0), None)
        );
        let u = request(&HaWish::default().resource(101), false);
        assert_eq!((u.sid, u.delete.as_deref()), (None, Some("group")));
        let d = HaWish::default().resource(7);
        assert_eq!(
            (d.state.as_str(), d.max_restart, d.max_relocate),
            ("started", 1, 1)
        );
    }
}
