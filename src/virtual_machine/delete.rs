//! One deletion pass of a ProxmoxVirtualMachine: with `deletionPolicy: Delete` the lifecycle
//! removes the VM's HA resource, stops and destroys it (`purge`) and deletes its NoCloud ISO
//! ([`crate::vm::pass::delete`]); with `Retain` the VM only loses this object's tag and is left as
//! it is (its ISO stays attached, still read by cloud-init on boot).

use std::sync::Arc;

use capmox_api::vm::{self as api, DeletionPolicy, ProxmoxVirtualMachine};
use kube::ResourceExt;

use super::error::VirtualMachineError;
use super::record::{apply, record_of};
use crate::proxmox::types::ConfigUpdate;
use crate::proxmox::view::{Freshness, ProxmoxView};
use crate::vm::desired::tags_without;
use crate::vm::{Next, Settings};

/// What a deletion pass did.
#[derive(Debug)]
pub struct DeleteOutcome {
    /// When to look again (ignored when `finished`).
    pub next: Next,
    /// What is being done (for the `Ready` condition).
    pub message: String,
    /// A stop or destroy task failed (its exit status).
    pub failure: Option<String>,
    /// The VM is gone (or untagged): the finalizer may go.
    pub finished: bool,
}

/// Removes this object's tag from its VM (a synchronous config write; nothing when the VM is
/// gone, someone else's or untagged already).
async fn untag(
    view: &Arc<ProxmoxView>,
    settings: &Settings,
    pvm: &ProxmoxVirtualMachine,
    name: &str,
    vmid: u32,
) -> Result<(), VirtualMachineError> {
    let fresh = Freshness::within(settings.observe_interval).after(None);
    let look = view.look(vmid, fresh, Some(name)).await?;
    let Some(vm) = look.vm.filter(|v| v.config.name.as_deref() == Some(name)) else {
        return Ok(());
    };
    let tag = api::owner_tag(&pvm.namespace().unwrap_or_default(), &pvm.name_any());
    if !vm.config.tags.iter().any(|t| t.eq_ignore_ascii_case(&tag)) {
        return Ok(());
    }
    let rest = tags_without(&vm.config, &tag);
    let update = if rest.is_empty() {
        ConfigUpdate::new().delete(&["tags"])
    } else {
        ConfigUpdate::new().tags(&rest)
    };
    view.configure_now(&vm.node, vmid, &update)
        .await
        .map_err(VirtualMachineError::proxmox(format!("untagging VM {vmid}")))
}

/// Runs one deletion pass on `pvm` (`view`: `None` without usable credentials).
pub async fn delete(
    view: Option<&Arc<ProxmoxView>>,
    settings: &Settings,
    pvm: &mut ProxmoxVirtualMachine,
) -> Result<DeleteOutcome, VirtualMachineError> {
    let before = record_of(pvm);
    let name = pvm
        .status
        .as_ref()
        .and_then(|s| s.vm_name.clone())
        .unwrap_or_else(|| pvm.name_any());
    let (view, vmid) = match (view, before.vmid) {
        (_, None) => {
            return Ok(DeleteOutcome {
                next: Next::Now,
                message: String::new(),
                failure: None,
                finished: true,
            });
        }
        (None, Some(id)) => {
            return Err(VirtualMachineError::Credentials(format!(
                "no Proxmox credentials to delete VM {id}; waiting for them"
            )));
        }
        (Some(v), Some(id)) => (v, id),
    };
    if pvm.spec.deletion_policy() == DeletionPolicy::Retain {
        untag(view, settings, pvm, &name, vmid).await?;
        view.forget_vm(vmid);
        return Ok(DeleteOutcome {
            next: Next::Now,
            message: format!("VM {vmid} retained"),
            failure: None,
            finished: true,
        });
    }
    let owner = super::owner_of(pvm);
    let out = crate::vm::pass::delete(view, &owner, settings, &name, pvm.spec.ha.is_some(), before).await?;
    apply(pvm.status.get_or_insert_with(Default::default), &out.record);
    Ok(DeleteOutcome {
        next: out.next,
        message: out.message,
        failure: out.failure,
        finished: out.finished,
    })
}
