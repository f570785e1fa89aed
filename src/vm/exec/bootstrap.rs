//! The bootstrap ISO: delivered once (uploaded unless it is on the storage already, then attached
//! in the one config write that also sets the options that still differ and the address tags),
//! and removed once the owner says its data was consumed.

use std::time::Duration;

use super::{Env, Next, StepResult, record_task, wait_for_task};
use crate::bootstrap::CLOUD_INIT_TAG;
use crate::proxmox::Upid;
use crate::proxmox::types::ConfigUpdate;
use crate::vm::adapter::{Adapter, Image};
use crate::vm::decide::{IsoLocation, Reason};
use crate::vm::desired::tags_without;
use crate::vm::error::VmError;
use crate::vm::iso;
use crate::vm::spec::VmRecord;

/// The bootstrap data: the ISO is uploaded unless it is on the storage already (an upload is a
/// task the next passes wait for); once it is there, one config write attaches it, tags the VM
/// with its address tags and `go-proxmox+cloud-init`, and the data counts as delivered.
pub async fn deliver<A: Adapter>(env: &Env<'_, A>, record: &mut VmRecord) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    let retry = Some(env.settings.retry_delay);
    let (_, snap) = env.view.snapshot(env.fresh).await?;
    let storage = match iso::choose_storage(&snap, &vm.node, env.spec.bootstrap.iso_storage.as_deref()) {
        Ok(s) => s,
        Err(message) => return Ok(StepResult::failed(Reason::VmFailed, message, retry)),
    };
    // The storage is listed unless no ISO of this VM can be there yet (cloned by this process,
    // nothing put since): then the upload goes out at once.
    let there = !env.view.no_iso_put_yet(vm.vmid)
        && iso::present(env.view, &vm.node, &storage, vm.vmid, env.fresh).await?;
    if !there {
        let region = env.view.cluster_name().await?;
        let image = match env.adapter.bootstrap_image(vm, region).await? {
            Image::Ready(i) => i,
            Image::Wait(message) => {
                // What the image needs (a NIC's MAC) is not in the config as read: read it again.
                env.view.config_outdated(vm.vmid);
                return Ok(StepResult::next(Next::After(env.settings.task_poll_max)).with_message(message));
            }
            Image::Failed(f) => return Ok(StepResult::failed(f.reason, f.message, f.retry_after)),
        };
        let upid = env
            .view
            .upload_iso(&vm.node, &storage, vm.vmid, &iso::file_name(vm.vmid), image)
            .await
            .map_err(VmError::proxmox(format!(
                "uploading {}",
                iso::volid(&storage, vm.vmid)
            )))?;
        let at = Some((vm.node.clone(), storage.clone()));
        return Ok(StepResult::next(record_task(record, env, vm.vmid, &upid, at))
            .with_message(format!("uploading {}", iso::volid(&storage, vm.vmid))));
    }
    let tags: Vec<String> = env.addresses.map(|a| a.tags.clone()).unwrap_or_default();
    let update = iso::delivery_update(&env.spec.desired, vm, &storage, &tags);
    env.view
        .configure_now(&vm.node, vm.vmid, &update)
        .await
        .map_err(VmError::proxmox(format!(
            "configuring VM {} and attaching {}",
            vm.vmid,
            iso::volid(&storage, vm.vmid)
        )))?;
    env.view.iso_seen_at(vm.vmid, &vm.node, &storage);
    record.bootstrap_delivered = true;
    Ok(StepResult::next(Next::Now))
}

/// Where the VM's ISO is now: known to the view, named by the attached volume, or looked for on
/// every ISO storage of the node. `remembered`: put or seen there by this process, and no
/// deletion started yet (it is deleted without listing first: a deletion of a file that is gone
/// answers "not found", which counts as done).
async fn locate<A: Adapter>(
    env: &Env<'_, A>,
    attached: Option<&str>,
) -> Result<Option<IsoLocation>, VmError> {
    let vm = env.vm()?;
    let view = env.view;
    let here = view
        .iso_at(vm.vmid)
        .filter(|(node, _)| *node == vm.node)
        .map(|(_, s)| s);
    let known = here.clone().or_else(|| {
        attached
            .and_then(|v| v.split_once(':'))
            .map(|(s, _)| s.to_owned())
    });
    let remembered = here.is_some() && view.iso_deletion_of(vm.vmid).is_none();
    let at = |storage: String| IsoLocation {
        node: vm.node.clone(),
        volid: iso::volid(&storage, vm.vmid),
        storage,
    };
    Ok(match known {
        Some(storage) if remembered => Some(at(storage)),
        Some(storage) if iso::present(view, &vm.node, &storage, vm.vmid, env.fresh).await? => {
            Some(at(storage))
        }
        Some(_) => None,
        None => {
            let (_, snap) = view.snapshot(env.fresh).await?;
            iso::find(view, &snap, &vm.node, vm.vmid, env.fresh).await?
        }
    })
}

/// The bootstrap data was consumed: the ISO is deleted first (a task the view wakes the owner
/// for; it is not recorded: after a crash the ISO is simply deleted again) while the VM keeps its
/// `go-proxmox+cloud-init` tag, so a crash comes back here; then one config write detaches it and
/// drops the tag.
pub async fn remove<A: Adapter>(env: &Env<'_, A>) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    let view = env.view;
    let config = view
        .config(&vm.node, vm.vmid)
        .await?
        .ok_or_else(|| VmError::Invalid(format!("VM {} left node {} while it was read", vm.vmid, vm.node)))?;
    let file = iso::file_name(vm.vmid);
    let attached = config.ide0.as_deref().filter(|v| v.contains(&file));
    if let Some(found) = locate(env, attached).await? {
        view.iso_seen_at(vm.vmid, &found.node, &found.storage);
        let at = Some((found.node.clone(), found.storage.clone()));
        // A deletion of this process still runs: wait for it instead of deleting again.
        if let Some(upid) = view.iso_deletion_of(vm.vmid) {
            let age = Upid::parse(&upid).map_or(Duration::ZERO, |u| view.task_age(&upid, u.starttime));
            if age < (view.timing.estimate("imgdel") * 3).max(env.settings.task_poll_max) {
                let next = wait_for_task(env, Some(vm.vmid), "imgdel", "imgdel", age, at);
                return Ok(StepResult::next(next));
            }
        }
        let deleted = view
            .delete_iso(vm.vmid, &found)
            .await
            .map_err(VmError::proxmox(format!("deleting {}", found.volid)))?;
        if deleted.is_some() {
            let next = wait_for_task(env, Some(vm.vmid), "imgdel", "imgdel", Duration::ZERO, at);
            return Ok(StepResult::next(next));
        }
    }
    view.iso_deletion_done(vm.vmid);
    let mut update = ConfigUpdate::new();
    if attached.is_some() {
        update = update.ide0("none,media=cdrom");
    }
    if config.tags.iter().any(|t| t.eq_ignore_ascii_case(CLOUD_INIT_TAG)) {
        update = update.tags(&tags_without(&config, CLOUD_INIT_TAG));
    }
    if !update.is_empty() {
        view.configure_now(&vm.node, vm.vmid, &update)
            .await
            .map_err(VmError::proxmox(format!(
                "detaching the bootstrap ISO of VM {}",
                vm.vmid
            )))?;
    }
    // Nothing more is configured on this VM; its deletion need not look for the ISO.
    view.iso_removed(vm.vmid);
    Ok(StepResult::next(Next::Now))
}
