//! What a machine's VM should look like before its first boot, and the difference to what Proxmox
//! reports: the config options to send (`sockets`, `cores`, `memory`, `description`, `netN`,
//! `tags`, new data disks), the boot-disk resize and the IP tags still missing. Pure functions, no
//! I/O.

use std::collections::BTreeSet;

use capmox_api::v1alpha2::{AdditionalVolume, CpuSpec, PciDevice, ProxmoxMachineSpec};

use crate::proxmox::types::{ConfigUpdate, NetDevice, VmConfig};

/// Bytes per GiB.
const GIB: u64 = 1024 * 1024 * 1024;

/// Bridge used for a NIC the template does not have when the spec names no bridge.
const FALLBACK_BRIDGE: &str = "vmbr0";

/// One NIC as the spec wants it.
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
}

/// The VM options a machine's spec asks for.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DesiredVm {
    /// CPU sockets.
    pub sockets: Option<u32>,
    /// Cores per socket.
    pub cores: Option<u32>,
    /// Memory in MiB (0 or unset: keep the template's).
    pub memory_mib: Option<u64>,
    /// VM description.
    pub description: Option<String>,
    /// NICs, in spec order.
    pub nics: Vec<DesiredNic>,
    /// Extra Proxmox tags (`spec.tags`).
    pub tags: Vec<String>,
    /// Boot disk key and size in GiB.
    pub boot_disk: Option<(String, u64)>,
    /// Additional data disks (`spec.disks.additionalVolumes`), in spec order.
    pub volumes: Vec<AdditionalVolume>,
    /// CPU model, flags and NUMA (`spec.cpu`).
    pub cpu: Option<CpuSpec>,
    /// PCI devices by resource mapping (`spec.pciDevices`), `hostpci<n>` in order.
    pub pci_devices: Vec<PciDevice>,
}

impl DesiredVm {
    /// The desired VM of a `ProxmoxMachine` spec.
    pub fn from_spec(spec: &ProxmoxMachineSpec) -> Self {
        let positive = |v: Option<i32>| v.and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0);
        let nics = spec
            .network
            .network_devices
            .iter()
            .filter_map(|d| {
                let index = d.name_or_default().strip_prefix("net")?.parse().ok()?;
                Some(DesiredNic {
                    index,
                    model: d.model_or_default().as_str().to_owned(),
                    bridge: d.bridge.clone().filter(|b| !b.is_empty()),
                    vlan: d.vlan.and_then(|v| u16::try_from(v).ok()),
                    mtu: d.mtu.and_then(|v| u32::try_from(v).ok()),
                    queues: d.queues.and_then(|v| u32::try_from(v).ok()),
                })
            })
            .collect();
        Self {
            sockets: positive(spec.num_sockets),
            cores: positive(spec.num_cores),
            memory_mib: positive(spec.memory_mib).map(u64::from),
            description: spec.description.clone(),
            nics,
            tags: spec.tags.clone().unwrap_or_default(),
            boot_disk: spec
                .disks
                .as_ref()
                .and_then(|d| d.boot_volume.as_ref())
                .and_then(|b| Some((b.disk.clone(), u64::try_from(b.size_gb).ok()?))),
            volumes: spec
                .disks
                .as_ref()
                .and_then(|d| d.additional_volumes.clone())
                .unwrap_or_default(),
            cpu: spec.cpu.clone(),
            pci_devices: spec.pci_devices.clone().unwrap_or_default(),
        }
    }
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
pub fn volume_value(v: &AdditionalVolume, storage: &str) -> String {
    let mut out = format!("{storage}:{}", v.size_gb);
    if let Some(c) = v.cache {
        out.push_str(&format!(",cache={}", c.as_str()));
    }
    if v.discard == Some(true) {
        out.push_str(",discard=on");
    }
    if let Some(f) = v.format {
        out.push_str(&format!(",format={}", f.as_str()));
    }
    if v.iothread == Some(true) {
        out.push_str(",iothread=1");
    }
    if v.ssd == Some(true) {
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
    let missing: Vec<&AdditionalVolume> = desired
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
mod tests {
    use super::*;
    use serde_json::json;
    use std::collections::BTreeMap;

    fn config(v: serde_json::Value) -> VmConfig {
        let map: BTreeMap<String, serde_json::Value> = serde_json::from_value(v).unwrap();
        VmConfig::from(map)
    }

    fn spec(v: serde_json::Value) -> ProxmoxMachineSpec {
        serde_json::from_value(v).unwrap()
    }

    fn base_spec() -> ProxmoxMachineSpec {
        spec(json!({
            "numSockets": 2, "numCores": 4, "memoryMiB": 4096,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
            "tags": ["Team-A"],
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio", "vlan": 10}]}
        }))
    }

    #[test]
    fn fresh_clone_needs_every_option_and_a_new_nic() {
        let d = DesiredVm::from_spec(&base_spec());
        let c = config(json!({
            "sockets": 1, "cores": 1, "memory": "2048", "tags": "capmox;template",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
            "scsi0": "local-lvm:base-100-disk-0,size=10G"
        }));
        let u = config_changes(&d, &c);
        let p = u.params();
        assert_eq!(p["sockets"], json!(2));
        assert_eq!(p["cores"], json!(4));
        assert_eq!(p["memory"], json!("4096"));
        assert_eq!(p["net0"], json!("virtio,bridge=vmbr0,tag=10"));
        assert_eq!(p["tags"], json!("capmox;team-a;template"));
        assert_eq!(boot_disk_resize(&d, &c), Some(("scsi0".into(), 20)));
    }

    #[test]
    fn configured_vm_needs_nothing() {
        let d = DesiredVm::from_spec(&base_spec());
        let c = config(json!({
            "sockets": 2, "cores": 4, "memory": 4096, "tags": "capmox;team-a;template",
            "net0": "virtio=BC:24:11:00:00:02,bridge=vmbr0,tag=10",
            "scsi0": "local-lvm:vm-105-disk-0,size=20G"
        }));
        assert!(config_changes(&d, &c).is_empty());
        assert_eq!(boot_disk_resize(&d, &c), None);
    }

    #[test]
    fn disks_never_shrink_and_unset_options_are_left_alone() {
        let d = DesiredVm::from_spec(&spec(json!({
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
            "network": {"networkDevices": [{"name": "net0"}]}
        })));
        let c = config(
            json!({"sockets": 8, "net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr7",
            "scsi0": "local:vm-1-disk-0,size=40G"}),
        );
        assert!(
            config_changes(&d, &c).is_empty(),
            "no bridge in spec keeps the template's"
        );
        assert_eq!(boot_disk_resize(&d, &c), None);
    }

    #[test]
    fn new_volumes_are_allocated_once_per_slot() {
        let d = DesiredVm::from_spec(&spec(json!({
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}, "additionalVolumes": [
                {"disk": "scsi1", "sizeGb": 10, "discard": true, "ssd": true, "iothread": true,
                 "cache": "writeback", "format": "qcow2"},
                {"disk": "virtio2", "sizeGb": 5, "storage": "ceph"}
            ]},
            "network": {"networkDevices": [{"name": "net0"}]}
        })));
        let c = config(json!({
            "scsi0": "local-lvm:vm-105-disk-0,size=20G", "boot": "order=scsi0;net0", "digest": "abc",
            "net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"
        }));
        let u = new_volumes(&d, &c).unwrap();
        let p = u.params();
        assert_eq!(
            p["scsi1"],
            json!("local-lvm:10,cache=writeback,discard=on,format=qcow2,iothread=1,ssd=1")
        );
        assert_eq!(p["virtio2"], json!("ceph:5"));
        assert_eq!(p["digest"], json!("abc"));
        assert!(!p.contains_key("boot"), "the order already names scsi0");
        // Once the slots exist (whatever their volume), nothing is allocated again.
        let c = config(json!({
            "scsi0": "local-lvm:vm-105-disk-0,size=20G", "scsi1": "local-lvm:vm-105-disk-1,size=10G",
            "virtio2": "ceph:vm-105-disk-0,size=5G"
        }));
        assert!(new_volumes(&d, &c).unwrap().is_empty());
    }

    #[test]
    fn new_volumes_need_a_storage_and_pin_the_boot_disk() {
        let d = DesiredVm::from_spec(&spec(json!({
            "disks": {"additionalVolumes": [{"disk": "scsi0", "sizeGb": 10}]},
            "network": {"networkDevices": [{"name": "net0"}]}
        })));
        // The template boots virtio0 by PVE's default; scsi0 would sort before it.
        let c = config(
            json!({"virtio0": "zfs:vm-1-disk-0,size=8G", "net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr0"}),
        );
        let u = new_volumes(&d, &c).unwrap();
        assert_eq!(u.params()["scsi0"], json!("zfs:10"));
        assert_eq!(u.params()["boot"], json!("order=virtio0;net0"));
        let err = new_volumes(&d, &config(json!({}))).unwrap_err();
        assert!(err.contains("scsi0") && err.contains("storage"), "{err}");
        let mut d = d;
        d.boot_disk = Some(("scsi0".into(), 20));
        let err = new_volumes(&d, &c).unwrap_err();
        assert!(err.contains("boot volume"), "{err}");
    }

    #[test]
    fn missing_nic_gets_the_fallback_bridge_and_tags_merge_case_insensitively() {
        let d = DesiredVm::from_spec(&spec(json!({
            "network": {"networkDevices": [{"name": "net0"}, {"name": "net1", "model": "e1000"}]}
        })));
        let c = config(json!({"net0": "virtio=AA:BB:CC:DD:EE:FF,bridge=vmbr1", "tags": "A;b"}));
        let u = config_changes(&d, &c);
        assert_eq!(u.params()["net0"], json!("virtio,bridge=vmbr1"));
        assert_eq!(u.params()["net1"], json!("e1000,bridge=vmbr0"));
        assert_eq!(missing_tags(&["a".into(), "C".into(), "c".into()], &c), vec!["c"]);
        assert_eq!(merged_tags(&c, &["c".into()]), vec!["a", "b", "c"]);
        assert_eq!(tags_without(&c, "B"), vec!["A"]);
    }
}
