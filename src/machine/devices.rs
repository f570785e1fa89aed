//! CPU model and PCI passthrough (`spec.cpu`, `spec.pciDevices`): the config options they add to
//! the pre-boot config write, and which nodes can host a machine's PCI resource mappings. Pure
//! functions, no I/O.

use std::collections::BTreeSet;

use capmox_api::v1alpha2::{CpuSpec, PciDevice, machine_is_q35};

use crate::proxmox::lenient;
use crate::proxmox::types::{ConfigUpdate, VmConfig};

/// The PCIe-without-q35 refusal: PVE would start the VM but the device would sit on a plain PCI
/// bus, so the spec cannot be what the user meant. The machine type is not changed for the user
/// (the template's chipset decides the guest's device names and firmware layout).
pub fn pcie_needs_q35(devices: &[PciDevice], current: &VmConfig) -> Option<String> {
    let machine = current.raw.get("machine").and_then(lenient::value_to_string);
    (devices.iter().any(|d| d.pcie == Some(true)) && !machine_is_q35(machine.as_deref())).then(|| {
        format!(
            "spec.pciDevices asks for pcie but the template's machine type is {}; PCIe passthrough needs machine type q35 (set machine: q35 on the template or drop pcie)",
            machine.as_deref().unwrap_or("the default i440fx")
        )
    })
}

/// The `cpu`, `numa` and `hostpci<n>` options that differ from `current` (`hostpci<n>` is the
/// n-th entry of `spec.pciDevices`).
pub fn device_changes(cpu: Option<&CpuSpec>, devices: &[PciDevice], current: &VmConfig) -> ConfigUpdate {
    let raw = |k: &str| current.raw.get(k).and_then(lenient::value_to_string);
    let mut update = ConfigUpdate::new();
    if let Some(cpu) = cpu {
        let have = raw("cpu");
        if let Some(want) = cpu.render(have.as_deref()).filter(|w| have.as_deref() != Some(w)) {
            update = update.set("cpu", want);
        }
        if let Some(numa) = cpu.numa {
            let have = current
                .raw
                .get("numa")
                .and_then(lenient::value_to_bool)
                .unwrap_or(false);
            if have != numa {
                update = update.set("numa", u8::from(numa));
            }
        }
    }
    for (n, d) in devices.iter().enumerate() {
        let key = format!("hostpci{n}");
        let want = d.render();
        if raw(&key).as_deref() != Some(want.as_str()) {
            update = update.set(key, want);
        }
    }
    update
}

/// The nodes of a `/cluster/mapping/pci` entry's `map` (`node=pve1,path=...,id=...`).
pub fn mapping_nodes(map: &[String]) -> BTreeSet<String> {
    map.iter()
        .filter_map(|entry| {
            entry
                .split(',')
                .find_map(|p| p.strip_prefix("node="))
                .map(str::to_owned)
        })
        .collect()
}

/// The candidate nodes that have an entry in every mapping named by `devices`; `mappings` is the
/// `/cluster/mapping/pci` listing as `(id, nodes)`. `Err` names the first mapping no candidate has.
pub fn nodes_with_mappings(
    candidates: &[String],
    devices: &[PciDevice],
    mappings: &[(String, BTreeSet<String>)],
) -> Result<Vec<String>, String> {
    let mut nodes: Vec<String> = candidates.to_vec();
    for d in devices {
        let have = mappings
            .iter()
            .find(|(id, _)| *id == d.mapping)
            .map(|(_, n)| n.clone())
            .unwrap_or_default();
        nodes.retain(|n| have.contains(n));
        if nodes.is_empty() {
            return Err(if have.is_empty() {
                format!(
                    "PCI resource mapping {:?} does not exist or has no node entry",
                    d.mapping
                )
            } else {
                format!(
                    "no allowed node has every PCI resource mapping of spec.pciDevices (mapping {:?} exists on {})",
                    d.mapping,
                    have.into_iter().collect::<Vec<_>>().join(", ")
                )
            });
        }
    }
    Ok(nodes)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde_json::{Value, json};

    use super::*;

    fn config(pairs: &[(&str, Value)]) -> VmConfig {
        let raw: BTreeMap<String, Value> = pairs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
        VmConfig::from(raw)
    }

    fn gpu(pcie: bool) -> PciDevice {
        PciDevice {
            mapping: "gpu".into(),
            pcie: Some(pcie),
            x_vga: Some(true),
        }
    }

    #[test]
    fn renders_cpu_numa_and_hostpci_once() {
        let cpu = CpuSpec {
            cpu_type: Some("host".into()),
            flags: Some(vec!["+aes".into(), "-pcid".into()]),
            numa: Some(true),
        };
        let devices = [
            gpu(true),
            PciDevice {
                mapping: "nic".into(),
                ..Default::default()
            },
        ];
        let update = device_changes(Some(&cpu), &devices, &config(&[("cpu", json!("kvm64"))]));
        let v = serde_json::to_value(&update).unwrap();
        assert_eq!(v["cpu"], "host,flags=+aes;-pcid");
        assert_eq!(v["numa"], 1);
        assert_eq!(v["hostpci0"], "mapping=gpu,pcie=1,x-vga=1");
        assert_eq!(v["hostpci1"], "mapping=nic");
        let applied = config(&[
            ("cpu", json!("host,flags=+aes;-pcid")),
            ("numa", json!(1)),
            ("hostpci0", json!("mapping=gpu,pcie=1,x-vga=1")),
            ("hostpci1", json!("mapping=nic")),
        ]);
        assert!(device_changes(Some(&cpu), &devices, &applied).is_empty());
        assert!(device_changes(None, &[], &config(&[])).is_empty());
    }

    #[test]
    fn pcie_needs_q35_machine() {
        assert!(
            pcie_needs_q35(&[gpu(true)], &config(&[]))
                .unwrap()
                .contains("q35")
        );
        assert!(pcie_needs_q35(&[gpu(true)], &config(&[("machine", json!("pc-i440fx-8.1"))])).is_some());
        assert_eq!(
            pcie_needs_q35(&[gpu(true)], &config(&[("machine", json!("q35"))])),
            None
        );
        assert_eq!(pcie_needs_q35(&[gpu(false)], &config(&[])), None);
    }

    #[test]
    fn mapping_filters_candidates() {
        let mappings = vec![
            (
                "gpu".to_owned(),
                mapping_nodes(&["node=pve2,path=0000:01:00.0,id=10de:1eb8".to_owned()]),
            ),
            (
                "nic".to_owned(),
                mapping_nodes(&[
                    "id=8086:1533,node=pve1,path=0000:02:00.0".to_owned(),
                    "node=pve2,path=0000:03:00.0,id=8086:1533".to_owned(),
                ]),
            ),
        ];
        let candidates = vec!["pve1".to_owned(), "pve2".to_owned(), "pve3".to_owned()];
        let nic = PciDevice {
            mapping: "nic".into(),
            ..Default::default()
        };
        assert_eq!(
            nodes_with_mappings(&candidates, std::slice::from_ref(&nic), &mappings).unwrap(),
            ["pve1", "pve2"]
        );
        assert_eq!(
            nodes_with_mappings(&candidates, &[nic, gpu(false)], &mappings).unwrap(),
            ["pve2"]
        );
        let err = nodes_with_mappings(&candidates[..1], &[gpu(false)], &mappings).unwrap_err();
        assert!(err.contains("exists on pve2"), "{err}");
        let missing = PciDevice {
            mapping: "tpu".into(),
            ..Default::default()
        };
        assert!(
            nodes_with_mappings(&candidates, &[missing], &mappings)
                .unwrap_err()
                .contains("does not exist")
        );
    }
}
