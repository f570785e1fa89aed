//! Reads what the decision works on from the view: the VM behind the recorded VMID (classified as
//! ours or someone else's by name), and for ISO tasks, whether the storage listing shows their
//! effect. Everything comes from what the view shares where it can (the list, the listings, the
//! cached config); the task itself is looked at by the view ([`ProxmoxView::look_at_task`]).

use std::time::Instant;

use super::decide::{VmFacts, VmPresence};
use super::error::VmError;
use super::iso;
use crate::proxmox::Upid;
use crate::proxmox::view::{Freshness, ProxmoxView};

/// A VM classified for the owner whose VM is named `name`.
pub fn classify(name: &str, vm: VmFacts) -> VmPresence {
    // A clone still running has a temporary config without a name (its answer may never have
    // been recorded: a crash or a lost response). It is not someone else's VM yet: both flows
    // wait while a VM is locked and classify it again by name once the clone is done.
    let cloning = vm.config.lock.as_deref() == Some("clone") && vm.config.name.is_none();
    if !cloning && (vm.config.template || vm.config.name.as_deref() != Some(name)) {
        VmPresence::Foreign {
            name: vm.config.name.clone(),
        }
    } else {
        VmPresence::Ours(Box::new(vm))
    }
}

/// The VM behind `vmid` for the owner whose VM is named `name`, from the shared list (`fresh`),
/// and when it booted; with its full config when `need_config` (else the fields the list shows:
/// name, lock, tags).
pub async fn look(
    view: &ProxmoxView,
    name: &str,
    vmid: Option<u32>,
    fresh: Freshness,
    need_config: bool,
) -> Result<(VmPresence, Option<Instant>), VmError> {
    let Some(vmid) = vmid else {
        return Ok((VmPresence::NotReserved, None));
    };
    let look = view.look(vmid, fresh, need_config.then_some(name)).await?;
    Ok(match look.vm {
        None => (VmPresence::Missing, None),
        Some(vm) => {
            let node = vm.node.clone();
            let listed = vm.clone();
            match classify(name, vm) {
                // PVE names a VM in `/cluster/resources` from pvestatd's last cycle: a clone that
                // ended since still shows as `VM <vmid>` for up to ten seconds. Before calling
                // the VM someone else's, its config says.
                // A placeholder name (pvestatd has not named it yet) of a VM whose config this
                // process read under the owner's name: ours, without reading it again (when the
                // pass needs only what the list shows).
                VmPresence::Foreign { name: listed_name }
                    if !need_config
                        && !listed.config.template
                        && placeholder(vmid, listed_name.as_deref())
                        && view.known_name(vmid).as_deref() == Some(name) =>
                {
                    let mut vm = listed;
                    vm.config.name = Some(name.to_owned());
                    (VmPresence::Ours(Box::new(vm)), look.booted)
                }
                VmPresence::Foreign { .. } if !listed.config.template => {
                    // (The config is read once and kept: a foreign VM's too, which is cheap.)
                    match view.config(&node, vmid).await? {
                        Some(config) if !config.template && config.name.as_deref() == Some(name) => (
                            VmPresence::Ours(Box::new(VmFacts {
                                config: (*config).clone(),
                                ..listed
                            })),
                            look.booted,
                        ),
                        _ => (classify(name, listed), look.booted),
                    }
                }
                presence => (presence, look.booted),
            }
        }
    })
}

/// Whether `name` is what `/cluster/resources` shows for a VM pvestatd has not named yet (none,
/// or `VM <vmid>`).
fn placeholder(vmid: u32, name: Option<&str>) -> bool {
    name.is_none_or(|n| n == format!("VM {vmid}"))
}

/// Where the ISO an import or deletion recorded in `upid` works on lives: remembered by the
/// view, else (an import) the storage the VM's ISO goes to.
async fn iso_task_location(
    view: &ProxmoxView,
    iso_storage: Option<&str>,
    upid: &Upid,
    vmid: u32,
    fresh: Freshness,
) -> Result<Option<(String, String)>, VmError> {
    if let Some(at) = view.iso_at(vmid) {
        return Ok(Some(at));
    }
    if upid.task_type != "imgcopy" {
        return Ok(None);
    }
    let (_, snap) = view.snapshot(fresh).await?;
    Ok(iso::choose_storage(&snap, &upid.node, iso_storage)
        .ok()
        .map(|s| (upid.node.clone(), s)))
}

/// Whether the ISO task recorded in `task_ref` shows its effect in the storage listing (`None`:
/// not an ISO task), and where its ISO lives.
pub async fn iso_task_effect(
    view: &ProxmoxView,
    iso_storage: Option<&str>,
    task_ref: Option<&str>,
    vmid: Option<u32>,
    fresh: Freshness,
) -> Result<(Option<bool>, Option<(String, String)>), VmError> {
    let (Some(upid), Some(vmid)) = (task_ref.and_then(|t| Upid::parse(t).ok()), vmid) else {
        return Ok((None, None));
    };
    if !iso::is_iso_task(&upid.task_type) {
        return Ok((None, None));
    }
    // The ISO listings are read after the last storage write (`iso::present`).
    let at = iso_task_location(view, iso_storage, &upid, vmid, fresh).await?;
    let seen = match (&at, upid.task_type.as_str()) {
        (Some((node, storage)), "imgcopy") => iso::present(view, node, storage, vmid, fresh).await?,
        (Some((node, storage)), _) => !iso::present(view, node, storage, vmid, fresh).await?,
        (None, _) => {
            let (_, snap) = view.snapshot(fresh).await?;
            iso::find(view, &snap, &upid.node, vmid, fresh).await?.is_none()
        }
    };
    Ok((Some(seen), at))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pvestatds_placeholder_names() {
        assert!(placeholder(105, None));
        assert!(placeholder(105, Some("VM 105")));
        assert!(!placeholder(105, Some("VM 106")));
        assert!(!placeholder(105, Some("m1")));
    }
}
