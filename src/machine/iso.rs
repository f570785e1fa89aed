//! The bootstrap ISO on Proxmox storage: which storage it goes to (deterministic, or the
//! `cloudInitStorage` the user chose), uploading it once, attaching it as `ide0` (keeping the VM
//! bootable from its disk, see [`super::boot`]), and finding and deleting it again.

use std::time::Duration;

use bytes::Bytes;

use super::error::MachineError;
use super::state::{IsoLocation, VmFacts};
use crate::bootstrap::{CLOUD_INIT_ISO_DEVICE, CLOUD_INIT_TAG, iso_file_name};
use crate::proxmox::error::classify_task_exitstatus;
use crate::proxmox::types::{ConfigUpdate, NodeStorage, StorageListQuery};
use crate::proxmox::{Client, ErrorClass};

/// How long an ISO upload or delete task may take before the step is retried.
const ISO_TASK_TIMEOUT: Duration = Duration::from_secs(120);

/// Volume ID of the machine's ISO on `storage`.
pub fn volid(storage: &str, vmid: u32) -> String {
    format!("{storage}:iso/{}", iso_file_name(u64::from(vmid)))
}

/// The storages of `node` that can hold ISO images, in name order (enabled ones only).
async fn iso_storages(proxmox: &Client, node: &str) -> Result<Vec<NodeStorage>, MachineError> {
    let mut storages: Vec<NodeStorage> = proxmox
        .node_storages(node, &StorageListQuery::default())
        .await
        .map_err(MachineError::proxmox(format!("listing storages of node {node}")))?
        .into_iter()
        .filter(|s| s.is_enabled() && s.supports("iso"))
        .collect();
    storages.sort_by(|a, b| a.storage.cmp(&b.storage));
    Ok(storages)
}

/// The storage for the machine's ISO: `wanted` when set (it must hold ISO images on the node),
/// otherwise the first ISO-capable storage by name, so every pass picks the same one (capmox #782).
pub async fn choose_storage(
    proxmox: &Client,
    node: &str,
    wanted: Option<&str>,
) -> Result<Result<String, String>, MachineError> {
    let storages = iso_storages(proxmox, node).await?;
    Ok(match wanted {
        Some(w) if storages.iter().any(|s| s.storage == w) => Ok(w.to_owned()),
        Some(w) => Err(format!(
            "cloudInitStorage {w:?} is not an enabled storage with content \"iso\" on node {node}"
        )),
        None => storages
            .first()
            .map(|s| s.storage.clone())
            .ok_or_else(|| format!("node {node} has no enabled storage with content \"iso\"")),
    })
}

async fn exists(proxmox: &Client, node: &str, storage: &str, volid: &str) -> Result<bool, MachineError> {
    match proxmox.storage_volume(node, storage, volid).await {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(MachineError::proxmox(format!("looking up {volid}"))(e)),
    }
}

/// Starts the upload of the ISO unless a previous (interrupted) pass already stored it; its content
/// is a pure function of the machine, so an existing file is the same file. Returns the import
/// task, which the caller records like any other task: the file only exists once that task ends,
/// so a crash while it runs must not lead to a second upload.
pub async fn upload_if_missing(
    proxmox: &Client,
    node: &str,
    storage: &str,
    vmid: u32,
    image: Vec<u8>,
) -> Result<Option<crate::proxmox::Upid>, MachineError> {
    let volid = volid(storage, vmid);
    if exists(proxmox, node, storage, &volid).await? {
        return Ok(None);
    }
    proxmox
        .upload_iso(node, storage, &iso_file_name(u64::from(vmid)), Bytes::from(image))
        .await
        .map(Some)
        .map_err(MachineError::proxmox(format!("uploading {volid}")))
}

/// Attaches the ISO as `ide0` and tags the VM with `go-proxmox+cloud-init` (the tag capmox keys
/// its ISO bookkeeping on). The boot order stays the template's: NoCloud only needs the CD-ROM
/// attached, so the ISO is not made bootable; only when the VM would then boot from no disk at all
/// is an order with its boot disk first written (see [`super::boot`]).
pub async fn attach(proxmox: &Client, vm: &VmFacts, storage: &str) -> Result<(), MachineError> {
    let volid = volid(storage, vm.vmid);
    let tags = super::desired::merged_tags(&vm.config, &[CLOUD_INIT_TAG.to_owned()]);
    let mut update = ConfigUpdate::new()
        .ide0(format!("{volid},media=cdrom"))
        .tags(&tags);
    if let Some(boot) = super::boot::boot_with_seed_iso(&vm.config, CLOUD_INIT_ISO_DEVICE) {
        update = update.boot(boot);
    }
    proxmox
        .update_vm_config_sync(&vm.node, vm.vmid, &update)
        .await
        .map_err(MachineError::proxmox(format!(
            "attaching {volid} to VM {}",
            vm.vmid
        )))
}

/// Finds the machine's ISO on any ISO-capable storage of `node`.
pub async fn find(proxmox: &Client, node: &str, vmid: u32) -> Result<Option<IsoLocation>, MachineError> {
    for s in iso_storages(proxmox, node).await? {
        let volid = volid(&s.storage, vmid);
        if exists(proxmox, node, &s.storage, &volid).await? {
            return Ok(Some(IsoLocation {
                node: node.to_owned(),
                storage: s.storage,
                volid,
            }));
        }
    }
    Ok(None)
}

/// Deletes the ISO and waits for the deletion; an already deleted ISO is fine.
pub async fn delete(proxmox: &Client, iso: &IsoLocation) -> Result<(), MachineError> {
    let upid = match proxmox
        .delete_storage_volume(&iso.node, &iso.storage, &iso.volid)
        .await
    {
        Ok(Some(upid)) => upid,
        Ok(None) => return Ok(()),
        Err(e) if e.is_not_found() => return Ok(()),
        Err(e) => return Err(MachineError::proxmox(format!("deleting {}", iso.volid))(e)),
    };
    let status = proxmox
        .wait_for_task(&upid, ISO_TASK_TIMEOUT)
        .await
        .map_err(MachineError::proxmox(format!(
            "waiting for the deletion of {}",
            iso.volid
        )))?;
    let exit = status.exitstatus.clone().unwrap_or_default();
    // A deletion started by an interrupted earlier pass may remove the file first.
    if status.is_success() || classify_task_exitstatus(&exit) == Some(ErrorClass::NotFound) {
        Ok(())
    } else {
        Err(MachineError::Invalid(format!(
            "deletion of {} failed: {exit}",
            iso.volid
        )))
    }
}
