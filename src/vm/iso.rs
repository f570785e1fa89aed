//! The bootstrap ISO on Proxmox storage: which storage it goes to (deterministic, or the storage
//! the owner chose), whether it is there (from the shared ISO listing of the storage), the config
//! change that attaches it (keeping the VM bootable from its disk, see [`super::boot`]), and
//! finding it again. Uploads and deletions go through the view's writes; nothing here waits for a
//! task: they are tasks the caller records.

use super::decide::{IsoLocation, VmFacts};
use super::desired::DesiredVm;
use super::error::VmError;
use crate::bootstrap::{CLOUD_INIT_ISO_DEVICE, CLOUD_INIT_TAG, iso_file_name};
use crate::proxmox::types::{ConfigUpdate, VmConfig};
use crate::proxmox::view::{Freshness, ProxmoxView, Snapshot};

/// Volume ID of the VM's ISO on `storage`.
pub fn volid(storage: &str, vmid: u32) -> String {
    format!("{storage}:iso/{}", iso_file_name(u64::from(vmid)))
}

/// The storage for the VM's ISO: `wanted` when set (it must hold ISO images on the node),
/// otherwise the first ISO-capable storage by name, so every pass picks the same one (capmox #782).
pub fn choose_storage(snap: &Snapshot, node: &str, wanted: Option<&str>) -> Result<String, String> {
    let storages = snap.iso_storages(node);
    match wanted {
        Some(w) if storages.iter().any(|s| s == w) => Ok(w.to_owned()),
        Some(w) => Err(format!(
            "cloudInitStorage {w:?} is not an enabled storage with content \"iso\" on node {node}"
        )),
        None => storages.first().cloned().ok_or_else(|| {
            // `/cluster/resources` lists only the storages the token may audit.
            let any_storage = snap
                .resources
                .iter()
                .any(|r| r.resource_type == "storage" && r.node.as_deref() == Some(node));
            if any_storage {
                format!("node {node} has no enabled storage with content \"iso\"")
            } else {
                format!(
                    "node {node} shows no storage at all: the Proxmox token may not see them (listing storages needs Datastore.Audit)"
                )
            }
        }),
    }
}

/// Whether the VM's ISO is on `storage` of `node` (shared listing, `fresh`, read after this
/// process's last write to the VM's storage).
pub async fn present(
    view: &ProxmoxView,
    node: &str,
    storage: &str,
    vmid: u32,
    fresh: Freshness,
) -> Result<bool, VmError> {
    Ok(view
        .iso_present(node, storage, vmid, &volid(storage, vmid), fresh)
        .await?)
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
/// differ (data disks and NICs were written before: [`super::decide::decide`]), the tags the owner
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

/// Finds the VM's ISO on the ISO-capable storages of `node` (shared listings).
pub async fn find(
    view: &ProxmoxView,
    snap: &Snapshot,
    node: &str,
    vmid: u32,
    fresh: Freshness,
) -> Result<Option<IsoLocation>, VmError> {
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

/// Whether a task of this type imports or deletes an ISO (its effect shows in the listing).
pub fn is_iso_task(task_type: &str) -> bool {
    matches!(task_type, "imgcopy" | "imgdel")
}

/// Whether the VM has our bootstrap ISO attached or still carries the tag that says one may exist.
pub fn attached(vmid: u32, config: &VmConfig) -> bool {
    let file = iso_file_name(u64::from(vmid));
    config.ide0.as_deref().is_some_and(|v| v.contains(&file))
        || config.tags.iter().any(|t| t.eq_ignore_ascii_case(CLOUD_INIT_TAG))
}

/// The file name of VM `vmid`'s ISO.
pub fn file_name(vmid: u32) -> String {
    iso_file_name(u64::from(vmid))
}
