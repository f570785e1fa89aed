//! What a created VM's config lacks of the wanted one: the options to write (Proxmox applies
//! what it hot-plugs and keeps the rest pending), the data disks still to allocate, and the disks
//! to grow online. Pure.

use super::LiveFacts;
use crate::proxmox::types::{ConfigUpdate, NetDevice, VmConfig};
use crate::vm::desired::{DesiredVm, boot_disk_resize, config_changes, new_volumes};

/// Bytes per GiB.
const GIB: u64 = 1 << 30;

/// The live facts of `config` against `desired`.
pub fn live_facts(desired: &DesiredVm, config: &VmConfig) -> LiveFacts {
    let mut changes = keep_macs(config_changes(desired, config), desired, config);
    if let Ok(volumes) = new_volumes(desired, config)
        && !volumes.is_empty()
    {
        changes = changes.merge(volumes);
    }
    LiveFacts {
        checked: true,
        changes,
        grow: boot_disk_resize(desired, config).or_else(|| volume_to_grow(desired, config)),
    }
}

/// The first additional volume that is smaller than wanted: `(disk, GiB)`.
fn volume_to_grow(desired: &DesiredVm, config: &VmConfig) -> Option<(String, u64)> {
    desired.volumes.iter().find_map(|v| {
        let have = config.disks.get(&v.disk)?.size_bytes()?;
        (have < v.size_gib.saturating_mul(GIB)).then(|| (v.disk.clone(), v.size_gib))
    })
}

/// `update` with every NIC it sets keeping the MAC it has where the owner names none: a NIC of a
/// running VM is changed, not replaced (a new MAC would break the guest's network config).
fn keep_macs(update: ConfigUpdate, desired: &DesiredVm, config: &VmConfig) -> ConfigUpdate {
    let mut out = update.clone();
    for nic in desired.nics.iter().filter(|n| n.mac.is_none()) {
        let key = format!("net{}", nic.index);
        let (Some(value), Some(have)) = (
            update.params().get(&key).and_then(|v| v.as_str()),
            config.nets.get(&nic.index),
        ) else {
            continue;
        };
        if let (Some(mut dev), Some(mac)) = (NetDevice::parse(value), have.mac.clone()) {
            dev.mac = Some(mac);
            out = out.set(key, dev.to_property_string());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::desired::{DesiredNic, Volume};
    use serde_json::json;

    fn config(v: serde_json::Value) -> VmConfig {
        let raw: std::collections::BTreeMap<String, serde_json::Value> = serde_json::from_value(v).unwrap();
        VmConfig::from(raw)
    }

    #[test]
    fn running_vm_gets_what_differs_and_keeps_its_macs() {
        let c = config(json!({
            "name": "vm", "cores": 2, "sockets": 1, "memory": "2048", "protection": 0,
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
            "scsi0": "local-lvm:vm-200-disk-0,size=20G",
            "scsi1": "local-lvm:vm-200-disk-1,size=5G"
        }));
        let desired = DesiredVm {
            cores: Some(4),
            memory_mib: Some(4096),
            nics: vec![DesiredNic {
                index: 0,
                model: "virtio".into(),
                bridge: Some("vmbr0".into()),
                vlan: Some(20),
                mtu: None,
                queues: None,
                mac: None,
                firewall: Some(true),
            }],
            boot_disk: Some(("scsi0".into(), 30)),
            volumes: vec![Volume {
                disk: "scsi1".into(),
                size_gib: 8,
                ..Volume::default()
            }],
            options: vec![("protection".into(), "1".into())],
            ..DesiredVm::default()
        };
        let f = live_facts(&desired, &c);
        let p = f.changes.params();
        assert_eq!(p["cores"], json!(4));
        assert_eq!(p["protection"], json!("1"));
        assert_eq!(
            p["net0"],
            json!("virtio=BC:24:11:00:00:01,bridge=vmbr0,firewall=1,tag=20"),
            "the NIC keeps its MAC"
        );
        assert_eq!(f.grow, Some(("scsi0".into(), 30)));
        let grown = config(json!({
            "scsi0": "local-lvm:vm-200-disk-0,size=30G", "scsi1": "local-lvm:vm-200-disk-1,size=5G"
        }));
        assert_eq!(volume_to_grow(&desired, &grown), Some(("scsi1".into(), 8)));
        let same = live_facts(&DesiredVm::default(), &c);
        assert!(same.changes.is_empty() && same.grow.is_none() && same.checked);
    }
}
