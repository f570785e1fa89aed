//! Additional data disks of a v1alpha2 `ProxmoxMachine` (`spec.disks.additionalVolumes`, capmox
//! #504): created empty after the clone, before the first boot, and destroyed with the VM.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machine::TargetFileStorageFormat;

/// CEL rule on an additional volume: `ssd` emulation does not exist on VirtIO block devices.
pub const RULE_VOLUME_NO_SSD_ON_VIRTIO: &str =
    "!self.disk.startsWith('virtio') || !has(self.ssd) || !self.ssd";
/// CEL rule on an additional volume: SATA disks have no IO thread.
pub const RULE_VOLUME_NO_IOTHREAD_ON_SATA: &str =
    "!self.disk.startsWith('sata') || !has(self.iothread) || !self.iothread";

/// An additional, empty data disk of the VM. The disk slot is its identity: a slot that already
/// exists in the VM's config (e.g. from the template) is left as it is.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": RULE_VOLUME_NO_SSD_ON_VIRTIO, "message": "ssd emulation is not available on virtio disks"},
    {"rule": RULE_VOLUME_NO_IOTHREAD_ON_SATA, "message": "iothread is not available on sata disks"}
]))]
pub struct AdditionalVolume {
    /// Proxmox disk slot: `scsi0`–`scsi30`, `virtio0`–`virtio15` or `sata0`–`sata5`; must differ
    /// from the boot volume's.
    #[schemars(regex(pattern = super::schema::ADDITIONAL_VOLUME_DISK_PATTERN))]
    pub disk: String,

    /// Size in GiB.
    #[schemars(range(min = 1))]
    pub size_gb: i32,

    /// Proxmox storage the disk is allocated on (content `images`); the boot volume's storage
    /// when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), regex(pattern = super::schema::PVE_CONFIG_ID_PATTERN))]
    pub storage: Option<String>,

    /// Image format (file-based storages only; block storages use `raw`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TargetFileStorageFormat>,

    /// Pass discard/TRIM requests to the storage (`discard=on`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub discard: Option<bool>,

    /// Present the disk as a solid-state drive (`ssd=1`; not on virtio).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssd: Option<bool>,

    /// Give the disk its own IO thread (`iothread=1`; virtio, or scsi with `virtio-scsi-single`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub iothread: Option<bool>,

    /// QEMU cache mode; Proxmox's default (`none`) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache: Option<DiskCache>,
}

/// QEMU cache mode of a disk (Proxmox's `cache` drive option).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum DiskCache {
    /// No host cache (Proxmox's default).
    #[serde(rename = "none")]
    None,
    /// Host page cache, writes reported done once on the storage.
    #[serde(rename = "writethrough")]
    Writethrough,
    /// Host page cache, writes reported done once in the cache.
    #[serde(rename = "writeback")]
    Writeback,
    /// Like `writeback`, flushes ignored.
    #[serde(rename = "unsafe")]
    Unsafe,
    /// No host cache, writes reported done once on the storage.
    #[serde(rename = "directsync")]
    Directsync,
}

impl DiskCache {
    /// The mode as Proxmox spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Writethrough => "writethrough",
            Self::Writeback => "writeback",
            Self::Unsafe => "unsafe",
            Self::Directsync => "directsync",
        }
    }
}
