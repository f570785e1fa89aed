//! The VM's Proxmox HA resource (`spec.ha`, capmox #216): registered after the first start,
//! updated when the spec changes, removed when `spec.ha` goes away and before the VM is stopped
//! for deletion. What was applied is recorded in `status.haResource`, so a pass reads nothing
//! from `/cluster/ha/resources`: whether the VM already is a resource comes from the shared VM
//! list (`hastate`) and from the answer of the write itself (`already defined`, `no such
//! resource`).

use capmox_api::v1alpha2::{self as api, HaResourceStatus, ProxmoxMachine};

use super::error::MachineError;
use super::steps::{Next, StepEnv, StepResult, status};
use crate::proxmox::types::HaResourceRequest;
use crate::proxmox::{Client, Error, ErrorClass};

/// The request that makes the resource `r` (`create`: with its `sid`; an update of a resource
/// without a group removes the one it may have).
pub fn request(r: &HaResourceStatus, create: bool) -> HaResourceRequest {
    HaResourceRequest {
        sid: create.then(|| r.sid.clone()),
        group: r.group.clone(),
        state: Some(r.state.as_str().to_owned()),
        max_restart: u32::try_from(r.max_restart).ok(),
        max_relocate: u32::try_from(r.max_relocate).ok(),
        delete: (!create && r.group.is_none()).then(|| "group".to_owned()),
    }
}

/// Creates or updates the resource `r`: an update when it is known to exist, else a create that
/// turns into an update when Proxmox has it already (and the other way round).
pub async fn put(client: &Client, r: &HaResourceStatus, exists: bool) -> Result<(), Error> {
    let (create, update) = (request(r, true), request(r, false));
    if exists {
        match client.update_ha_resource(&r.sid, &update).await {
            Err(e) if e.class() == ErrorClass::NotFound && !is_group_error(&e) => {
                client.create_ha_resource(&create).await
            }
            other => other,
        }
    } else {
        match client.create_ha_resource(&create).await {
            Err(e) if e.class() == ErrorClass::AlreadyExists => {
                client.update_ha_resource(&r.sid, &update).await
            }
            other => other,
        }
    }
}

/// Whether PVE refused the HA group (`HA group 'x' does not exist`), not the resource.
fn is_group_error(e: &Error) -> bool {
    e.message().to_ascii_lowercase().contains("group")
}

/// Removes the resource `sid`; one that is not there counts as removed.
pub async fn delete(client: &Client, sid: &str) -> Result<(), Error> {
    match client.delete_ha_resource(sid).await {
        Err(e) if e.is_not_found() => Ok(()),
        other => other,
    }
}

/// A failed step's result with a Warning event of the same reason and message.
pub(super) fn warned(mut r: StepResult) -> StepResult {
    if let Some(f) = &r.failure {
        r.warning = Some((f.reason.to_owned(), f.message.clone()));
    }
    r
}

/// `Step::ApplyHa`.
pub(super) async fn apply(
    env: &StepEnv<'_>,
    pm: &mut ProxmoxMachine,
    wanted: &HaResourceStatus,
) -> Result<StepResult, MachineError> {
    let vm = env.vm()?;
    let exists = vm.ha_managed || pm.status.as_ref().is_some_and(|s| s.ha_resource.is_some());
    let result = put(env.view.client(), wanted, exists).await;
    // The VM's `hastate` in the shared list changes.
    env.view.wrote(vm.vmid);
    match result {
        Ok(()) => {
            status(pm).ha_resource = Some(wanted.clone());
            Ok(StepResult::next(Next::Now))
        }
        Err(e) if e.is_retryable() => Err(MachineError::proxmox(format!(
            "registering VM {} as HA resource {}",
            vm.vmid, wanted.sid
        ))(e)),
        Err(e) => Ok(warned(StepResult::failed(
            api::HA_CONFIGURATION_FAILED_REASON,
            format!("registering VM {} as HA resource {}: {e}", vm.vmid, wanted.sid),
            Some(env.settings.retry_delay),
        ))),
    }
}

/// `Step::RemoveHa` (`spec.ha` was removed from a machine whose VM is a resource).
pub(super) async fn remove(
    env: &StepEnv<'_>,
    pm: &mut ProxmoxMachine,
    applied: &HaResourceStatus,
) -> Result<StepResult, MachineError> {
    let vm = env.vm()?;
    let result = delete(env.view.client(), &applied.sid).await;
    env.view.wrote(vm.vmid);
    match result {
        Ok(()) => {
            status(pm).ha_resource = None;
            Ok(StepResult::next(Next::Now))
        }
        Err(e) if e.is_retryable() => Err(MachineError::proxmox(format!(
            "removing HA resource {}",
            applied.sid
        ))(e)),
        Err(e) => Ok(warned(StepResult::failed(
            api::HA_CONFIGURATION_FAILED_REASON,
            format!("removing HA resource {}: {e}", applied.sid),
            Some(env.settings.retry_delay),
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmox_api::v1alpha2::{HaSpec, HaState};

    #[test]
    fn requests_carry_every_setting_and_clear_a_removed_group() {
        let r = HaSpec {
            group: Some("g1".into()),
            state: Some(HaState::Stopped),
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
        let u = request(&HaSpec::default().resource(101), false);
        assert_eq!((u.sid, u.delete.as_deref()), (None, Some("group")));
    }
}
