//! CPU model and PCI passthrough: the config options they add to the pre-boot config write
//! (`cpu: <type>[,flags=+a;-b]`, `numa: 1`, `hostpci<n>: mapping=<name>[,pcie=1][,x-vga=1]`), and
//! which nodes can host a VM's PCI resource mappings. Pure functions, no I/O.

use std::collections::BTreeSet;

use crate::proxmox::lenient;
use crate::proxmox::types::{ConfigUpdate, VmConfig};

/// The CPU a VM should have.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Cpu {
    /// CPU type (`host`, `x86-64-v2-AES`, `custom-<name>`; `None`: the template's).
    pub model: Option<String>,
    /// Flags to add (`+aes`) or remove (`-pcid`).
    pub flags: Vec<String>,
    /// NUMA (`None`: the template's).
    pub numa: Option<bool>,
}

impl Cpu {
    /// The `cpu` option: the type (the template's type when none is given, PVE's default `kvm64`
    /// when the template has none) with the flags; `None` when neither type nor flags are given.
    pub fn render(&self, template_cpu: Option<&str>) -> Option<String> {
        if self.model.is_none() && self.flags.is_empty() {
            return None;
        }
        let model = self.model.clone().or_else(|| {
            template_cpu.and_then(|c| {
                c.split(',')
                    .next()
                    .map(|t| t.trim_start_matches("cputype=").to_string())
                    .filter(|t| !t.is_empty() && !t.contains('='))
            })
        });
        let mut out = model.unwrap_or_else(|| "kvm64".to_string());
        if !self.flags.is_empty() {
            out.push_str(",flags=");
            out.push_str(&self.flags.join(";"));
        }
        Some(out)
    }
}

/// A PCI device passed through by resource mapping.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PciDevice {
    /// The cluster-wide resource mapping (`/cluster/mapping/pci`).
    pub mapping: String,
    /// Attach as PCIe (needs machine type q35).
    pub pcie: bool,
    /// Primary GPU (`x-vga=1`).
    pub x_vga: bool,
}

impl PciDevice {
    /// The `hostpci<n>` value.
    pub fn render(&self) -> String {
        let mut out = format!("mapping={}", self.mapping);
        if self.pcie {
            out.push_str(",pcie=1");
        }
        if self.x_vga {
            out.push_str(",x-vga=1");
        }
        out
    }
}

/// Whether the `machine` option is a q35 machine type (`q35`, `pc-q35-<version>`, with options).
pub fn machine_is_q35(machine: Option<&str>) -> bool {
    machine
        .and_then(|m| m.split(',').next())
        .map(|t| t.trim_start_matches("type="))
        .is_some_and(|t| t == "q35" || t.starts_with("pc-q35-"))
}

/// The PCIe-without-q35 refusal: PVE would start the VM but the device would sit on a plain PCI
/// bus, so the spec cannot be what the user meant. The machine type is not changed for the user
/// (the template's chipset decides the guest's device names and firmware layout).
pub fn pcie_needs_q35(devices: &[PciDevice], current: &VmConfig) -> Option<String> {
    let machine = current.raw.get("machine").and_then(lenient::value_to_string);
    (devices.iter().any(|d| d.pcie) && !machine_is_q35(machine.as_deref())).then(|| {
        format!(
            "spec.pciDevices asks for pcie but the template's machine type is {}; PCIe passthrough needs machine type q35 (set machine: q35 on the template or drop pcie)",
            machine.as_deref().unwrap_or("the default i440fx")
        )
    })
}

/// The `cpu`, `numa` and `hostpci<n>` options that differ from `current` (`hostpci<n>` is the
/// n-th entry of `spec.pciDevices`).
pub fn device_changes(cpu: Option<&Cpu>, devices: &[PciDevice], current: &VmConfig) -> ConfigUpdate {
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
            pcie,
            x_vga: true,
        }
    }

    #[test]
    fn renders_cpu_numa_and_hostpci_once() {
        let cpu = Cpu {
            model: Some("host".into()),
            flags: vec!["+aes".into(), "-pcid".into()],
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

    #[test]
    fn cpu_renders_type_and_flags() {
        let cpu = Cpu {
            model: Some("x86-64-v2-AES".into()),
            flags: vec!["+aes".into(), "-pcid".into()],
            numa: Some(true),
        };
        assert_eq!(
            cpu.render(None).as_deref(),
            Some("x86-64-v2-AES,flags=+aes;-pcid")
        );
        let flags_only = Cpu {
            flags: vec!["+aes".into()],
            ..Default::default()
        };
        assert_eq!(
            flags_only.render(Some("host,hidden=1")).as_deref(),
            Some("host,flags=+aes")
        );
        assert_eq!(flags_only.render(None).as_deref(), Some("kvm64,flags=+aes"));
        let numa_only = Cpu {
            numa: Some(true),
            ..Default::default()
        };
        assert_eq!(numa_only.render(None), None);
    }

    #[test]
    fn pci_renders_mapping_options_and_q35_is_recognised() {
        assert_eq!(gpu(true).render(), "mapping=gpu,pcie=1,x-vga=1");
        let d = PciDevice {
            mapping: "nic".into(),
            ..Default::default()
        };
        assert_eq!(d.render(), "mapping=nic");
        assert!(machine_is_q35(Some("q35")));
        assert!(machine_is_q35(Some("pc-q35-8.1,viommu=intel")));
        assert!(machine_is_q35(Some("type=q35")));
        assert!(!machine_is_q35(Some("pc-i440fx-8.1")));
        assert!(!machine_is_q35(None));
    }
}
