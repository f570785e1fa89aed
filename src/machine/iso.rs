//! The bootstrap ISO on Proxmox storage: which storage it goes to (deterministic, or the
//! `cloudInitStorage` the user chose), whether it is there (from the shared ISO listing of the
//! storage), uploading it once, the config change that attaches it (keeping the VM bootable from
//! its disk, see [`super::boot`]), and finding and deleting it again. Nothing here waits for a
//! task: uploads and deletions are tasks the caller records.

use bytes::Bytes;

use super::desired::DesiredVm;
use super::error::MachineError;
use super::state::{IsoLocation, VmFacts};
use super::view::writes::WriteKind;
use super::view::{Freshness, ProxmoxView, Snapshot};
use crate::bootstrap::{CLOUD_INIT_ISO_DEVICE, CLOUD_INIT_TAG, iso_file_name};
use crate::proxmox::Upid;
use crate::proxmox::types::ConfigUpdate;

/// Volume ID of the machine's ISO on `storage`.
pub fn volid(storage: &str, vmid: u32) -> String {
    format!("{storage}:iso/{}", iso_file_name(u64::from(vmid)))
}

/// The storage for the machine's ISO: `wanted` when set (it must hold ISO images on the node),
/// otherwise the first ISO-capable storage by name, so every pass picks the same one (capmox #782).
pub fn choose_storage(snap: &Snapshot, node: &str, wanted: Option<&str>) -> Result<String, String> {
    let storages = snap.iso_storages(node);
    match wanted {
        Some(w) if storages.iter().any(|s| s == w) => Ok(w.to_owned()),
        Some(w) => Err(format!(
            "cloudInitStorage {w:?} is not an enabled storage with content \"iso\" on node {node}"
        )),
        None => storages
            .first()
            .cloned()
            .ok_or_else(|| format!("node {node} has no enabled storage with content \"iso\"")),
    }
}

/// Whether the machine's ISO is on `storage` of `node` (shared listing, `fresh`).
pub async fn present(
    view: &ProxmoxView,
    node: &str,
    storage: &str,
    vmid: u32,
    fresh: Freshness,
) -> Result<bool, MachineError> {
    // A listing read before this controller's last write to the VM's storage (or before its
    // last ISO task ended) may not show what that did.
    let fresh = fresh.after(view.last_storage_write(vmid));
    Ok(view
        .isos(node, storage, fresh)
        .await?
        .contains(&volid(storage, vmid)))
}

/// Starts the upload of the ISO; the caller checked that it is not there yet (its content is a
/// pure function of the machine, so one left by an interrupted pass is the same file). Returns
/// the import task, which the caller records like any other task: the file only exists once that
/// task ends, so a crash while it runs must not lead to a second upload.
pub async fn upload(
    view: &ProxmoxView,
    node: &str,
    storage: &str,
    vmid: u32,
    image: Vec<u8>,
) -> Result<Upid, MachineError> {
    let upid = view
        .client()
        .upload_iso(node, storage, &iso_file_name(u64::from(vmid)), Bytes::from(image))
        .await
        .map_err(MachineError::proxmox(format!(
            "uploading {}",
            volid(storage, vmid)
        )))?;
    view.started(upid.as_str(), vmid);
    view.iso_is_at(vmid, node, storage);
    Ok(upid)
}

/// The config change that attaches the ISO as `ide0` and sets the VM's tags to its own plus
/// `extra_tags` and `go-proxmox+cloud-init` (the tag capmox keys its ISO bookkeeping on): one
/// write for the bootstrap data and the IP tags. The boot order stays the template's: NoCloud
/// only needs the CD-ROM attached, so the ISO is not made bootable; only when the VM would then
/// boot from no disk at all is an order with its boot disk first written (see [`super::boot`]).
pub fn attach_update(vm: &VmFacts, storage: &str, extra_tags: &[String]) -> ConfigUpdate {
    let mut wanted = extra_tags.to_vec();
    wanted.push(CLOUD_INIT_TAG.to_owned());
    let tags = super::desired::merged_tags(&vm.config, &wanted);
    let mut update = ConfigUpdate::new()
        .ide0(format!("{},media=cdrom", volid(storage, vm.vmid)))
        .tags(&tags);
    if let Some(boot) = super::boot::boot_with_seed_iso(&vm.config, CLOUD_INIT_ISO_DEVICE) {
        update = update.boot(boot);
    }
    update
}

/// The one config write that delivers the bootstrap data: the options of `desired` that still
/// differ (data disks and NICs were written before: [`super::state::decide`]), the tags the spec
/// asks for and `address_tags`, and the ISO on `storage` attached ([`attach_update`]).
pub fn delivery_update(
    desired: &DesiredVm,
    vm: &VmFacts,
    storage: &str,
    address_tags: &[String],
) -> ConfigUpdate {
    let mut tags = super::desired::missing_tags(&desired.tags, &vm.config);
    tags.extend_from_slice(address_tags);
    super::desired::config_changes(desired, &vm.config).merge(attach_update(vm, storage, &tags))
}

/// Finds the machine's ISO on the ISO-capable storages of `node` (shared listings).
pub async fn find(
    view: &ProxmoxView,
    snap: &Snapshot,
    node: &str,
    vmid: u32,
    fresh: Freshness,
) -> Result<Option<IsoLocation>, MachineError> {
    for storage in snap.iso_storages(node) {
        if present(view, node, &storage, vmid, fresh).await? {
            return Ok(Some(IsoLocation {
                node: node.to_owned(),
                volid: volid(&storage, vmid),
                storage,
            }));
        }
    }
    Ok(None)
}

/// Starts deleting the ISO: `Some(task)` to record and wait for, `None` when it is gone already.
pub async fn delete(view: &ProxmoxView, vmid: u32, iso: &IsoLocation) -> Result<Option<Upid>, MachineError> {
    let result = view
        .client()
        .delete_storage_volume(&iso.node, &iso.storage, &iso.volid)
        .await;
    view.wrote_kind(vmid, WriteKind::Storage);
    match result {
        Ok(Some(upid)) => {
            view.started(upid.as_str(), vmid);
            Ok(Some(upid))
        }
        Ok(None) => Ok(None),
        Err(e) if e.is_not_found() => Ok(None),
        Err(e) => Err(MachineError::proxmox(format!("deleting {}", iso.volid))(e)),
    }
}

/// Whether a task of this type imports or deletes an ISO (its effect shows in the listing).
pub fn is_iso_task(task_type: &str) -> bool {
    matches!(task_type, "imgcopy" | "imgdel")
}
