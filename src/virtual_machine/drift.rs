//! After a restore: the rolled-back VM compared with the spec once, without writing anything.
//! A ProxmoxVMRestore writes `vm.capmox-rs.io/restored` when its rollback is done; the VM's
//! config is then the snapshot's, and what differs from the spec is shown as `SpecDrift` (and in
//! `status.specDrift`) instead of being applied over the restored state. The spec is applied
//! again when it changes (a new generation): the drift is cleared once that is done.

use capmox_api::vm::{self as api, ProxmoxVirtualMachine, RESTORED_ANNOTATION};
use kube::ResourceExt;

use super::reasons;
use crate::conditions::{self, Desired};
use crate::proxmox::types::ConfigUpdate;
use crate::proxmox::view::ProxmoxView;
use crate::vm::VmSpec;

/// The config keys `update` would change (its deletions included).
pub fn changed_keys(update: &ConfigUpdate, grow: Option<&(String, u64)>) -> Vec<String> {
    let mut keys: Vec<String> = Vec::new();
    for (k, v) in update.params() {
        match k.as_str() {
            "digest" => {}
            "delete" => keys.extend(
                v.as_str()
                    .unwrap_or_default()
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(str::to_owned),
            ),
            _ => keys.push(k.clone()),
        }
    }
    if let Some((disk, _)) = grow {
        keys.push(disk.clone());
    }
    keys.sort();
    keys.dedup();
    keys
}

/// The restore token to act on: the annotation, when it differs from the one handled.
fn new_token(pvm: &ProxmoxVirtualMachine) -> Option<String> {
    let token = pvm.annotations().get(RESTORED_ANNOTATION)?.clone();
    let handled = pvm.status.as_ref().and_then(|s| s.restored.as_ref());
    (handled != Some(&token)).then_some(token)
}

/// Shows `SpecDrift` from `keys`, computed for `generation`.
fn show(pvm: &mut ProxmoxVirtualMachine, keys: Vec<String>, generation: Option<i64>) {
    let status = pvm.status.get_or_insert_with(Default::default);
    let desired = if keys.is_empty() {
        Desired::falsy(api::SPEC_DRIFT_CONDITION, reasons::IN_SYNC_REASON, "")
    } else {
        Desired::truthy(
            api::SPEC_DRIFT_CONDITION,
            reasons::RESTORED_STATE_REASON,
            format!(
                "the VM was restored from a snapshot and differs from the spec in: {} (the spec is applied again when it changes)",
                keys.join(", ")
            ),
        )
    };
    status.spec_drift = Some(keys).filter(|k| !k.is_empty());
    conditions::set(
        status.conditions.get_or_insert_with(Vec::new),
        &desired,
        generation,
        &crate::machine::now(),
    );
}

/// After a pass: compares a newly restored VM with `spec` (once per restore), and clears the
/// drift once a newer spec was applied. `Ok(false)`: the VM is busy; look again later.
pub async fn check(
    view: &ProxmoxView,
    pvm: &mut ProxmoxVirtualMachine,
    spec: &VmSpec,
) -> Result<bool, crate::proxmox::view::ViewError> {
    let generation = pvm.metadata.generation;
    let status = pvm.status.clone().unwrap_or_default();
    if status.spec_drift.is_some() {
        let drift_generation = status
            .conditions
            .as_deref()
            .and_then(|c| conditions::get(c, api::SPEC_DRIFT_CONDITION))
            .and_then(|c| c.observed_generation);
        if status
            .applied_generation
            .is_some_and(|a| drift_generation.is_some_and(|d| a > d))
        {
            show(pvm, Vec::new(), status.applied_generation);
        }
    }
    let Some(token) = new_token(pvm) else {
        return Ok(true);
    };
    let (Some(vmid), Some(node), true) = (
        status.vmid.and_then(|v| u32::try_from(v).ok()),
        status.node.clone(),
        status.provisioned == Some(true),
    ) else {
        return Ok(true);
    };
    let Some(config) = view.config(&node, vmid).await? else {
        return Ok(true);
    };
    if config.lock.is_some() {
        return Ok(false);
    }
    let live = crate::vm::operate::live::live_facts(&spec.desired, &config);
    let keys = changed_keys(&live.changes, live.grow.as_ref());
    show(pvm, keys, status.applied_generation.or(generation));
    pvm.status.get_or_insert_with(Default::default).restored = Some(token);
    Ok(true)
}

/// [`check`] after a pass whose next look is `next`: a busy VM is looked at again after `poll`.
pub async fn after_pass(
    view: &ProxmoxView,
    pvm: &mut ProxmoxVirtualMachine,
    spec: &VmSpec,
    next: crate::vm::Next,
    poll: std::time::Duration,
) -> Result<crate::vm::Next, crate::proxmox::view::ViewError> {
    Ok(match check(view, pvm, spec).await? {
        false if next == crate::vm::Next::Watch => crate::vm::Next::After(poll),
        _ => next,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn changed_keys_name_set_and_deleted_options_and_grown_disks() {
        let update = ConfigUpdate::new()
            .set("memory", "4096")
            .set("delete", "net1,tags");
        let keys = changed_keys(&update, Some(&("scsi0".into(), 30)));
        assert_eq!(keys, ["memory", "net1", "scsi0", "tags"]);
        assert!(changed_keys(&ConfigUpdate::new(), None).is_empty());
    }
}
