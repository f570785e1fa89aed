//! What a VM's config should hold before its first boot, and the difference to what Proxmox
//! reports: the config options to send (`sockets`, `cores`, `memory`, `description`, `netN`,
//! `tags`, `onboot`, CPU and PCI devices, new data disks), the boot-disk resize and the tags still
//! missing. Pure functions, no I/O; the types are the lifecycle's own (an owner maps its spec to
//! them).

use std::collections::BTreeSet;

use crate::proxmox::types::{ConfigUpdate, NetDevice, VmConfig};

pub use super::devices::{Cpu, PciDevice};

/// Bytes per GiB.
const GIB: u64 = 1024 * 1024 * 1024;

/// Bridge used for a NIC the template does not have when the spec names no bridge.
const FALLBACK_BRIDGE: &str = "vmbr0";

/// One NIC as the owner wants it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredNic {
    /// Proxmox slot index (`net<index>`).
    pub index: u32,
    /// NIC model.
    pub model: String,
    /// Bridge (`None`: keep the template's).
    pub bridge: Option<String>,
    /// VLAN tag.
    pub vlan: Option<u16>,
    /// MTU.
    pub mtu: Option<u32>,
    /// Multiqueue count.
    pub queues: Option<u32>,
    /// MAC address (`None`: Proxmox's, or the one the NIC has).
    pub mac: Option<String>,
    /// Proxmox firewall on the NIC (`None`: the template's).
    pub firewall: Option<bool>,
}

/// An additional data disk, created empty before the first boot and destroyed with the VM.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Volume {
    /// Disk slot (`scsi1`, `virtio2`, …): the volume's identity.
    pub disk: String,
    /// Size in GiB.
    pub size_gib: u64,
    /// Storage (`None`: the boot volume's).
    pub storage: Option<String>,
    /// Image format (`raw`, `qcow2`, `vmdk`).
    pub format: Option<String>,
    /// `discard=on`.
    pub discard: bool,
    /// `ssd=1` (SSD emulation).
    pub ssd: bool,
    /// `iothread=1`.
    pub iothread: bool,
    /// Cache mode (`none`, `writeback`, …).
    pub cache: Option<String>,
}

/// The VM options an owner asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredVm {
    /// CPU sockets.
    pub sockets: Option<u32>,
    /// Cores per socket.
    pub cores: Option<u32>,
    /// Memory in MiB (unset: keep the template's).
    pub memory_mib: Option<u64>,
    /// VM description.
    pub description: Option<String>,
    /// NICs, in spec order.
    pub nics: Vec<DesiredNic>,
    /// Extra Proxmox tags.
    pub tags: Vec<String>,
    /// Boot disk key and size in GiB.
    pub boot_disk: Option<(String, u64)>,
    /// Additional data disks, in spec order.
    pub volumes: Vec<Volume>,
    /// CPU model, flags and NUMA.
    pub cpu: Option<Cpu>,
    /// PCI devices by resource mapping, `hostpci<n>` in order.
    pub pci_devices: Vec<PciDevice>,
    /// Start the VM when its Proxmox node boots (`onboot`; unset: keep the template's).
    pub on_boot: Option<bool>,
    /// Further options as Proxmox spells them (`protection`, `ostype`, `agent`, `hotplug`, …),
    /// set when the VM's value differs.
    pub options: Vec<(String, String)>,
}

fn nic_matches(want: &DesiredNic, have: &NetDevice) -> bool {
    have.model.eq_ignore_ascii_case(&want.model)
        && want
            .bridge
            .as_ref()
            .is_none_or(|b| have.bridge.as_ref() == Some(b))
        && have.tag == want.vlan
        && have.mtu == want.mtu
        && have.queues == want.queues
        && want
            .mac
            .as_ref()
            .is_none_or(|m| have.mac.as_ref().is_some_and(|h| h.eq_ignore_ascii_case(m)))
        && want.firewall.is_none_or(|f| have.firewall.unwrap_or(false) == f)
}

fn nic_device(want: &DesiredNic, have: Option<&NetDevice>) -> NetDevice {
    let bridge = want
        .bridge
        .clone()
        .or_else(|| have.and_then(|h| h.bridge.clone()))
        .unwrap_or_else(|| FALLBACK_BRIDGE.to_owned());
    let mut dev = NetDevice::new(want.model.clone(), bridge);
    dev.tag = want.vlan;
    dev.mtu = want.mtu;
    dev.queues = want.queues;
    dev.mac = want.mac.as_ref().map(|m| m.to_ascii_uppercase());
    dev.firewall = want.firewall;
    dev
}

fn has_tag(config: &VmConfig, tag: &str) -> bool {
    config.tags.iter().any(|t| t.eq_ignore_ascii_case(tag))
}

/// The config options that differ from `current` (empty when the VM already matches).
///
/// As capmox does, when any NIC differs every desired NIC is sent without its MAC, so Proxmox gives
/// the clone new MACs; the next comparison then matches.
pub fn config_changes(desired: &DesiredVm, current: &VmConfig) -> ConfigUpdate {
    let mut update = ConfigUpdate::new();
    if let Some(s) = desired.sockets.filter(|s| current.sockets != Some(*s)) {
        update = update.sockets(s);
    }
    if let Some(c) = desired.cores.filter(|c| current.cores != Some(*c)) {
        update = update.cores(c);
    }
    if let Some(m) = desired.memory_mib.filter(|m| current.memory != Some(*m)) {
        update = update.memory_mib(m);
    }
    if let Some(d) = desired
        .description
        .as_ref()
        .filter(|d| current.description.as_ref() != Some(*d))
    {
        update = update.description(d.clone());
    }
    if let Some(on) = desired.on_boot {
        let have = current
            .raw
            .get("onboot")
            .and_then(crate::proxmox::lenient::value_to_bool)
            .unwrap_or(false);
        if have != on {
            update = update.set("onboot", u8::from(on));
        }
    }

    for (key, value) in &desired.options {
        let have = current
            .raw
            .get(key)
            .and_then(crate::proxmox::lenient::value_to_string);
        if have.as_deref() != Some(value.as_str()) {
            update = update.set(key.clone(), value.clone());
        }
    }

    let nic_differs = desired.nics.iter().any(|n| {
        current
            .nets
            .get(&n.index)
            .is_none_or(|have| !nic_matches(n, have))
    });
    if nic_differs {
        for n in &desired.nics {
            update = update.net(n.index, &nic_device(n, current.nets.get(&n.index)));
        }
    }
    let missing = missing_tags(&desired.tags, current);
    if !missing.is_empty() {
        update = update.tags(&merged_tags(current, &missing));
    }
    update.merge(super::devices::device_changes(
        desired.cpu.as_ref(),
        &desired.pci_devices,
        current,
    ))
}

/// The tags of `wanted` the VM does not carry yet (case-insensitive, deduplicated, in order).
pub fn missing_tags(wanted: &[String], current: &VmConfig) -> Vec<String> {
    let mut seen = BTreeSet::new();
    wanted
        .iter()
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty() && !has_tag(current, t) && seen.insert(t.clone()))
        .collect()
}

/// The VM's tags plus `extra`, sorted and deduplicated as Proxmox stores them.
pub fn merged_tags(current: &VmConfig, extra: &[String]) -> Vec<String> {
    let set: BTreeSet<String> = current
        .tags
        .iter()
        .chain(extra)
        .map(|t| t.trim().to_ascii_lowercase())
        .filter(|t| !t.is_empty())
        .collect();
    set.into_iter().collect()
}

/// The VM's tags without `tag` (case-insensitive).
pub fn tags_without(current: &VmConfig, tag: &str) -> Vec<String> {
    current
        .tags
        .iter()
        .filter(|t| !t.eq_ignore_ascii_case(tag))
        .cloned()
        .collect()
}

/// The config value that allocates `v` on `storage`: `<storage>:<GiB>` plus its drive options
/// (PVE's allocation syntax; PVE stores it as `<storage>:vm-<vmid>-disk-<n>,…,size=<n>G`).
pub fn volume_value(v: &Volume, storage: &str) -> String {
    let mut out = format!("{storage}:{}", v.size_gib);
    if let Some(c) = &v.cache {
        out.push_str(&format!(",cache={c}"));
    }
    if v.discard {
        out.push_str(",discard=on");
    }
    if let Some(f) = &v.format {
        out.push_str(&format!(",format={f}"));
    }
    if v.iothread {
        out.push_str(",iothread=1");
    }
    if v.ssd {
        out.push_str(",ssd=1");
    }
    out
}

/// The additional volumes the VM does not have yet, as config options (empty when every slot
/// exists). The slot is a volume's identity: a slot the VM already has — created by an earlier
/// pass whose answer was lost, or brought by the template — is never allocated again (PVE would
/// turn the existing volume into `unusedN` and allocate a second one). When any volume is new,
/// the boot disk is pinned in the boot order if the order names none (see
/// [`super::boot::boot_before_new_disks`]). `Err` names a volume whose storage is unknown.
pub fn new_volumes(desired: &DesiredVm, current: &VmConfig) -> Result<ConfigUpdate, String> {
    let mut update = ConfigUpdate::new();
    if let Some((boot, _)) = &desired.boot_disk
        && desired.volumes.iter().any(|v| v.disk == *boot)
    {
        return Err(format!(
            "additional volume {boot} uses the boot volume's disk slot; choose another slot"
        ));
    }
    let missing: Vec<&Volume> = desired
        .volumes
        .iter()
        .filter(|v| !current.disks.contains_key(&v.disk))
        .collect();
    if missing.is_empty() {
        return Ok(update);
    }
    // The boot volume's storage: the spec's boot volume, else the disk the VM boots from.
    let boot_key = desired
        .boot_disk
        .as_ref()
        .map(|(k, _)| k.clone())
        .or_else(|| super::boot::boot_disk(current));
    let boot_storage = boot_key
        .and_then(|k| current.disks.get(&k))
        .and_then(|d| d.storage())
        .map(str::to_owned);
    for v in missing {
        let storage = v.storage.clone().or_else(|| boot_storage.clone()).ok_or_else(|| {
            format!(
                "additional volume {}: no storage given and the boot volume's storage is unknown; set spec.disks.additionalVolumes[].storage",
                v.disk
            )
        })?;
        update = update.set(v.disk.clone(), volume_value(v, &storage));
    }
    if let Some(boot) = super::boot::boot_before_new_disks(current) {
        update = update.boot(boot);
    }
    // A config changed since it was read (e.g. by a write whose answer was lost) is refused by
    // PVE instead of being written over.
    if let Some(d) = &current.digest {
        update = update.digest(d.clone());
    }
    Ok(update)
}

/// `(disk, GiB)` when the boot disk is smaller than the spec asks (disks only grow).
pub fn boot_disk_resize(desired: &DesiredVm, current: &VmConfig) -> Option<(String, u64)> {
    let (disk, gib) = desired.boot_disk.as_ref()?;
    let want = gib.checked_mul(GIB)?;
    match current.disks.get(disk).and_then(|d| d.size_bytes()) {
        Some(have) if have >= want => None,
        _ => Some((disk.clone(), *gib)),
    }
}

#[cfg(test)]
#[path = "desired_tests.rs"]
mod tests;
