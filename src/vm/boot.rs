//! The VM's boot order when the NoCloud ISO is attached: PVE's rules for which devices are
//! bootable, and the `boot` value (if any) that keeps the template's disk bootable.
//!
//! On Proxmox VE only the devices a VM's boot order names get a QEMU `bootindex` (the firmware
//! runs with `strict=on`), so a device left out is never booted:
//!
//! * `boot: order=dev1;dev2;…` — exactly those devices, in that order;
//! * no `boot`, or the legacy `boot: [acdn]{1,4}` (`legacy=` allowed) — default `cdn`: `c` is the
//!   one disk named by `bootdisk` (no other disk boots; without `bootdisk` none does), `d` every
//!   CD-ROM (cloud-init drives excluded), `n` every network device.
//!
//! The seed ISO only has to be attached for cloud-init's NoCloud datasource to find it, so it is
//! never added to an `order=` list. The template's boot order is kept unless it reaches no disk
//! once the ISO is attached (a template without `boot` and without `bootdisk`, or a legacy value
//! without `c`): then an `order=` with the boot disk first, followed by what was bootable before
//! (minus the seed ISO), is written, as PVE itself writes for a new VM.

use crate::proxmox::types::{DiskDevice, VmConfig};

/// Letters of the legacy default boot order (PVE's `boot` default).
const LEGACY_DEFAULT: &str = "cdn";

/// The disk buses in the order PVE picks a boot disk from (`valid_drive_names`: "order is
/// important - used to autoselect boot disk").
const BUS_ORDER: [&str; 4] = ["ide", "scsi", "virtio", "sata"];

/// Whether a drive is a cloud-init drive (`<storage>:vm-N-cloudinit`, `…/cloudinit.qcow2`).
fn is_cloud_init_drive(d: &DiskDevice) -> bool {
    let name = d.volume.rsplit(['/', ':']).next().unwrap_or_default();
    let stem = name.split_once('.').map_or(name, |(s, _)| s);
    stem == "cloudinit"
        || stem
            .strip_prefix("vm-")
            .and_then(|r| r.strip_suffix("-cloudinit"))
            .is_some_and(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether a config key names a disk PVE can boot from (`efidisk0`/`tpmstate0` cannot).
fn is_boot_drive_key(key: &str) -> bool {
    BUS_ORDER.iter().any(|bus| {
        key.strip_prefix(bus)
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    })
}

/// `(bus rank, index)` for sorting drive keys the way PVE walks them.
fn drive_rank(key: &str) -> (usize, u32) {
    for (rank, bus) in BUS_ORDER.iter().enumerate() {
        if let Some(n) = key.strip_prefix(bus).and_then(|n| n.parse::<u32>().ok()) {
            return (rank, n);
        }
    }
    (BUS_ORDER.len(), u32::MAX)
}

/// The VM's hard disks (not CD-ROMs, not cloud-init drives) in PVE's order.
fn hard_disks(config: &VmConfig) -> Vec<String> {
    let mut keys: Vec<String> = config
        .disks
        .iter()
        .filter(|(k, d)| is_boot_drive_key(k) && !d.is_cdrom() && !is_cloud_init_drive(d))
        .map(|(k, _)| k.clone())
        .collect();
    keys.sort_by_key(|k| drive_rank(k));
    keys
}

/// The VM's CD-ROM drives (cloud-init drives excluded) in PVE's order.
fn cdroms(config: &VmConfig) -> Vec<String> {
    let mut keys: Vec<String> = config
        .disks
        .iter()
        .filter(|(k, d)| is_boot_drive_key(k) && d.is_cdrom() && !is_cloud_init_drive(d))
        .map(|(k, _)| k.clone())
        .collect();
    keys.sort_by_key(|k| drive_rank(k));
    keys
}

/// The `order=` list of a `boot` value, if it has one.
fn explicit_order(boot: &str) -> Option<Vec<String>> {
    boot.split(',').find_map(|part| {
        part.trim().strip_prefix("order=").map(|o| {
            o.split(';')
                .map(str::trim)
                .filter(|d| !d.is_empty())
                .map(str::to_owned)
                .collect()
        })
    })
}

/// The legacy letters of a `boot` value (`cdn`, `legacy=dc`), or `None` when it is not legacy.
fn legacy_letters(boot: &str) -> Option<String> {
    let value = boot.trim();
    let letters = value.strip_prefix("legacy=").unwrap_or(value);
    (!letters.is_empty() && letters.len() <= 4 && letters.chars().all(|c| "acdn".contains(c)))
        .then(|| letters.to_owned())
}

/// The devices the VM can boot from, in priority order, as PVE derives them from its config.
pub fn effective_order(config: &VmConfig) -> Vec<String> {
    let boot = config.boot.as_deref().map(str::trim).filter(|b| !b.is_empty());
    if let Some(order) = boot.and_then(explicit_order) {
        return order;
    }
    let letters = boot
        .and_then(legacy_letters)
        .unwrap_or_else(|| LEGACY_DEFAULT.to_owned());
    let bootdisk = config
        .raw
        .get("bootdisk")
        .and_then(|v| v.as_str())
        .map(str::trim)
        .filter(|b| !b.is_empty());
    let disks = hard_disks(config);
    let mut out: Vec<String> = Vec::new();
    for letter in letters.chars() {
        match letter {
            'c' => out.extend(
                bootdisk
                    .filter(|b| disks.iter().any(|d| d == b))
                    .map(str::to_owned),
            ),
            'd' => out.extend(cdroms(config)),
            'n' => out.extend(config.nets.keys().map(|i| format!("net{i}"))),
            _ => {}
        }
    }
    out.dedup();
    out
}

/// The `boot` value to write together with attaching the seed ISO as `iso_device` (a CD-ROM), or
/// `None` to leave the VM's boot order as it is (it still reaches a disk with the ISO attached).
pub fn boot_with_seed_iso(config: &VmConfig, iso_device: &str) -> Option<String> {
    let disks = hard_disks(config);
    let before = effective_order(config);
    let mut after = config.clone();
    after.disks.insert(
        iso_device.to_owned(),
        DiskDevice {
            volume: "seed.iso".to_owned(),
            media: Some("cdrom".to_owned()),
            ..DiskDevice::default()
        },
    );
    if effective_order(&after).iter().any(|d| disks.contains(d)) {
        return None;
    }
    // No disk is bootable (or the VM has no disk at all, then nothing we write helps).
    let bootdisk = config
        .raw
        .get("bootdisk")
        .and_then(|v| v.as_str())
        .map(str::trim)
        .filter(|b| disks.iter().any(|d| d == b))
        .map(str::to_owned);
    let first = bootdisk.or_else(|| disks.first().cloned())?;
    let rest = before.into_iter().filter(|d| d != iso_device && *d != first);
    let order: Vec<String> = std::iter::once(first.clone()).chain(rest).collect();
    Some(format!("order={}", order.join(";")))
}

/// The disk the VM boots from: the first hard disk of its effective boot order, else `bootdisk`,
/// else its first hard disk in PVE's order.
pub fn boot_disk(config: &VmConfig) -> Option<String> {
    let disks = hard_disks(config);
    effective_order(config)
        .into_iter()
        .find(|d| disks.contains(d))
        .or_else(|| {
            config
                .raw
                .get("bootdisk")
                .and_then(|v| v.as_str())
                .map(str::trim)
                .filter(|b| disks.iter().any(|d| d == b))
                .map(str::to_owned)
        })
        .or_else(|| disks.first().cloned())
}

/// The `boot` value to write together with new (empty) data disks, or `None` when the VM's boot
/// order already names its boot disk. A VM whose order reaches no disk gets PVE's first disk as
/// boot disk when the seed ISO is attached; a new disk on an earlier bus or slot would take that
/// place, so the current boot disk is pinned first.
pub fn boot_before_new_disks(config: &VmConfig) -> Option<String> {
    let disks = hard_disks(config);
    let before = effective_order(config);
    if before.iter().any(|d| disks.contains(d)) {
        return None;
    }
    let first = boot_disk(config)?;
    let order: Vec<String> = std::iter::once(first.clone())
        .chain(before.into_iter().filter(|d| *d != first))
        .collect();
    Some(format!("order={}", order.join(";")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{Value, json};

    fn config(v: Value) -> VmConfig {
        let raw: std::collections::BTreeMap<String, Value> = serde_json::from_value(v).unwrap();
        VmConfig::from(raw)
    }

    fn base() -> Value {
        json!({
            "scsi0": "local-lvm:vm-101-disk-0,size=20G",
            "ide2": "local-lvm:vm-101-cloudinit,media=cdrom",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
        })
    }

    fn with(extra: Value) -> VmConfig {
        let mut v = base();
        for (k, x) in extra.as_object().unwrap() {
            v[k] = x.clone();
        }
        config(v)
    }

    #[test]
    fn explicit_order_is_kept_and_the_iso_is_not_added() {
        let c = with(json!({"boot": "order=scsi0;net0"}));
        assert_eq!(effective_order(&c), ["scsi0", "net0"]);
        assert_eq!(boot_with_seed_iso(&c, "ide0"), None);
        // Even an order with the disk after the network stays as the template has it.
        let c = with(json!({"boot": "order=net0;scsi0"}));
        assert_eq!(boot_with_seed_iso(&c, "ide0"), None);
    }

    #[test]
    fn no_boot_key_without_bootdisk_boots_no_disk_so_the_disk_is_put_first() {
        let c = with(json!({}));
        // PVE's legacy default `cdn`: no bootdisk, the cloud-init drive is no CD-ROM: only net0.
        assert_eq!(effective_order(&c), ["net0"]);
        assert_eq!(
            boot_with_seed_iso(&c, "ide0").as_deref(),
            Some("order=scsi0;net0")
        );
    }

    #[test]
    fn no_boot_key_with_bootdisk_already_boots_the_disk() {
        let c = with(json!({"bootdisk": "scsi0"}));
        assert_eq!(effective_order(&c), ["scsi0", "net0"]);
        assert_eq!(boot_with_seed_iso(&c, "ide0"), None);
    }

    #[test]
    fn legacy_letters_follow_bootdisk() {
        let c = with(json!({"boot": "cdn", "bootdisk": "scsi0", "ide1": "local:iso/x.iso,media=cdrom"}));
        assert_eq!(effective_order(&c), ["scsi0", "ide1", "net0"]);
        assert_eq!(boot_with_seed_iso(&c, "ide0"), None);
        // CD-ROM first is fine: the seed ISO is not bootable, the firmware goes on to the disk.
        let c = with(json!({"boot": "legacy=dc", "bootdisk": "scsi0"}));
        assert_eq!(effective_order(&c), ["scsi0"].map(String::from).to_vec());
        assert_eq!(boot_with_seed_iso(&c, "ide0"), None);
        // Legacy without `c`, or `c` without bootdisk: no disk; the ISO would be all there is.
        let c = with(json!({"boot": "dn", "bootdisk": "scsi0"}));
        assert_eq!(
            boot_with_seed_iso(&c, "ide0").as_deref(),
            Some("order=scsi0;net0")
        );
        let c = with(json!({"boot": "c"}));
        assert_eq!(effective_order(&c), Vec::<String>::new());
        assert_eq!(boot_with_seed_iso(&c, "ide0").as_deref(), Some("order=scsi0"));
    }

    #[test]
    fn order_without_a_disk_is_respected_only_while_it_reaches_one() {
        // An explicit order that names no disk: the VM would only try the network.
        let c = with(json!({"boot": "order=net0"}));
        assert_eq!(
            boot_with_seed_iso(&c, "ide0").as_deref(),
            Some("order=scsi0;net0")
        );
    }

    #[test]
    fn new_disks_pin_the_boot_disk_only_when_the_order_reaches_none() {
        let c = config(json!({
            "virtio0": "local-lvm:vm-1-disk-0,size=1G",
            "net0": "virtio,bridge=vmbr0",
        }));
        // No boot and no bootdisk: a new scsi1 would sort before virtio0.
        assert_eq!(boot_disk(&c).as_deref(), Some("virtio0"));
        assert_eq!(boot_before_new_disks(&c).as_deref(), Some("order=virtio0;net0"));
        let c = with(json!({"boot": "order=scsi0;net0"}));
        assert_eq!(boot_before_new_disks(&c), None);
        assert_eq!(boot_disk(&c).as_deref(), Some("scsi0"));
        let c = with(json!({"bootdisk": "scsi0"}));
        assert_eq!(boot_before_new_disks(&c), None);
    }

    #[test]
    fn boot_disk_is_bootdisk_else_the_first_disk_in_pve_order() {
        let c = config(json!({
            "virtio0": "local-lvm:vm-1-disk-1,size=1G",
            "scsi1": "local-lvm:vm-1-disk-0,size=1G",
            "sata0": "local-lvm:vm-1-disk-2,size=1G",
            "efidisk0": "local-lvm:vm-1-disk-3,size=4M",
            "boot": "n",
            "net0": "virtio,bridge=vmbr0",
        }));
        assert_eq!(
            boot_with_seed_iso(&c, "ide0").as_deref(),
            Some("order=scsi1;net0")
        );
        let c = config(json!({
            "virtio0": "local-lvm:vm-1-disk-1,size=1G",
            "scsi1": "local-lvm:vm-1-disk-0,size=1G",
            "bootdisk": "virtio0",
            "boot": "d",
        }));
        assert_eq!(boot_with_seed_iso(&c, "ide0").as_deref(), Some("order=virtio0"));
    }

    #[test]
    fn a_vm_without_disks_is_left_alone() {
        let c = config(json!({"net0": "virtio,bridge=vmbr0"}));
        assert_eq!(boot_with_seed_iso(&c, "ide0"), None);
    }

    #[test]
    fn old_seed_iso_in_an_order_stays_but_does_not_count_as_a_disk() {
        let c = with(json!({"boot": "order=ide0", "ide0": "local:iso/user-data-101.iso,media=cdrom"}));
        assert_eq!(boot_with_seed_iso(&c, "ide0").as_deref(), Some("order=scsi0"));
    }

    #[test]
    fn cloud_init_drives_are_recognised() {
        for v in [
            "local-lvm:vm-101-cloudinit",
            "local:101/vm-101-cloudinit.qcow2",
            "x:cloudinit",
        ] {
            assert!(is_cloud_init_drive(&DiskDevice::parse(v).unwrap()), "{v}");
        }
        for v in ["local-lvm:vm-101-disk-0", "local:iso/cloudinit-notes.iso"] {
            assert!(!is_cloud_init_drive(&DiskDevice::parse(v).unwrap()), "{v}");
        }
    }
}
