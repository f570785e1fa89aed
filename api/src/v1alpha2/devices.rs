//! CPU model and PCI passthrough of a v1alpha2 `ProxmoxMachine` (`spec.cpu`, `spec.pciDevices`,
//! capmox #899/#834): rendered into the VM's config before its first boot as
//! `cpu: <type>[,flags=+a;-b]`, `numa: 1` and `hostpci<n>: mapping=<name>[,pcie=1][,x-vga=1]`.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// CPU flags Proxmox accepts in a VM's `cpu: ...,flags=` (its `supported_cpu_flags`; other
/// flags need a custom CPU model).
pub const PVE_VM_CPU_FLAGS: &[&str] = &[
    "pcid",
    "spec-ctrl",
    "ibpb",
    "ssbd",
    "virt-ssbd",
    "amd-ssbd",
    "amd-no-ssb",
    "pdpe1gb",
    "md-clear",
    "hv-tlbflush",
    "hv-evmcs",
    "aes",
];

/// Pattern of a CPU model: a built-in one (`host`, `x86-64-v2-AES`, `kvm64`, `EPYC-Rome`, ...)
/// or a custom model `custom-<name>`.
pub const CPU_TYPE_PATTERN: &str = r"^(custom-[a-zA-Z][a-zA-Z0-9_\-]*|[a-zA-Z0-9][a-zA-Z0-9_.\-]*)$";

/// Pattern of one CPU flag: `+flag` or `-flag` with a flag Proxmox accepts on a VM.
pub const CPU_FLAG_PATTERN: &str = r"^[+-](pcid|spec-ctrl|ibpb|ssbd|virt-ssbd|amd-ssbd|amd-no-ssb|pdpe1gb|md-clear|hv-tlbflush|hv-evmcs|aes)$";

/// The emulated CPU of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CpuSpec {
    /// CPU model, e.g. `host`, `x86-64-v2-AES`, `kvm64` or a custom model `custom-<name>`;
    /// the template's model when unset.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 64), regex(pattern = CPU_TYPE_PATTERN))]
    pub cpu_type: Option<String>,

    /// CPU flags to turn on (`+aes`) or off (`-pcid`); only the flags Proxmox allows on a VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 12),
        inner(regex(pattern = CPU_FLAG_PATTERN)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub flags: Option<Vec<String>>,

    /// Enable NUMA (`numa: 1`); left as the template has it when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<bool>,
}

impl CpuSpec {
    /// The `cpu` option value, or `None` when neither a type nor flags are set. Flags without a
    /// type use Proxmox's default model (`kvm64`... the option's default key is the type).
    pub fn render(&self, template_cpu: Option<&str>) -> Option<String> {
        let flags = self.flags.as_deref().unwrap_or_default();
        if self.cpu_type.is_none() && flags.is_empty() {
            return None;
        }
        let cpu_type = self.cpu_type.clone().or_else(|| {
            template_cpu.and_then(|c| {
                c.split(',')
                    .next()
                    .map(|t| t.trim_start_matches("cputype=").to_string())
                    .filter(|t| !t.is_empty() && !t.contains('='))
            })
        });
        let mut out = cpu_type.unwrap_or_else(|| "kvm64".to_string());
        if !flags.is_empty() {
            out.push_str(",flags=");
            out.push_str(&flags.join(";"));
        }
        Some(out)
    }
}

/// A PCI device passed through by a Proxmox PCI resource mapping (`/cluster/mapping/pci`);
/// the VM is placed only on nodes where the mapping has an entry.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PciDevice {
    /// Name (id) of the Proxmox PCI resource mapping.
    #[schemars(length(min = 1, max = 128), regex(pattern = super::schema::PVE_CONFIG_ID_PATTERN))]
    pub mapping: String,

    /// Attach as a PCI Express device (`pcie=1`); needs machine type q35 on the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pcie: Option<bool>,

    /// Use the device as the VM's primary GPU (`x-vga=1`).
    #[serde(rename = "xVga", default, skip_serializing_if = "Option::is_none")]
    pub x_vga: Option<bool>,
}

impl PciDevice {
    /// The `hostpci<n>` option value.
    pub fn render(&self) -> String {
        let mut out = format!("mapping={}", self.mapping);
        if self.pcie == Some(true) {
            out.push_str(",pcie=1");
        }
        if self.x_vga == Some(true) {
            out.push_str(",x-vga=1");
        }
        out
    }
}

/// Whether a Proxmox `machine` option value selects the q35 chipset (PCIe needs it).
pub fn machine_is_q35(machine: Option<&str>) -> bool {
    machine
        .and_then(|m| m.split(',').next())
        .map(|t| t.trim_start_matches("type="))
        .is_some_and(|t| t == "q35" || t.starts_with("pc-q35-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_renders_type_and_flags() {
        let cpu = CpuSpec {
            cpu_type: Some("x86-64-v2-AES".into()),
            flags: Some(vec!["+aes".into(), "-pcid".into()]),
            numa: Some(true),
        };
        assert_eq!(
            cpu.render(None).as_deref(),
            Some("x86-64-v2-AES,flags=+aes;-pcid")
        );
        let flags_only = CpuSpec {
            flags: Some(vec!["+aes".into()]),
            ..Default::default()
        };
        assert_eq!(
            flags_only.render(Some("host,hidden=1")).as_deref(),
            Some("host,flags=+aes")
        );
        assert_eq!(flags_only.render(None).as_deref(), Some("kvm64,flags=+aes"));
        assert_eq!(
            CpuSpec {
                numa: Some(true),
                ..Default::default()
            }
            .render(None),
            None
        );
    }

    #[test]
    fn pci_renders_mapping_options() {
        let d = PciDevice {
            mapping: "gpu".into(),
            pcie: Some(true),
            x_vga: Some(true),
        };
        assert_eq!(d.render(), "mapping=gpu,pcie=1,x-vga=1");
        let d = PciDevice {
            mapping: "nic".into(),
            pcie: Some(false),
            x_vga: None,
        };
        assert_eq!(d.render(), "mapping=nic");
    }

    #[test]
    fn q35_detection() {
        assert!(machine_is_q35(Some("q35")));
        assert!(machine_is_q35(Some("pc-q35-8.1,viommu=intel")));
        assert!(machine_is_q35(Some("type=q35")));
        assert!(!machine_is_q35(Some("pc-i440fx-8.1")));
        assert!(!machine_is_q35(None));
    }

    #[test]
    fn patterns_accept_pve_models_and_flags() {
        let ty = regex::Regex::new(CPU_TYPE_PATTERN).unwrap();
        for ok in [
            "host",
            "x86-64-v2-AES",
            "kvm64",
            "EPYC-Rome",
            "custom-my_model",
            "Haswell-noTSX-IBRS",
        ] {
            assert!(ty.is_match(ok), "{ok}");
        }
        for bad in ["", "host,flags=+aes", "-x", "a b"] {
            assert!(!ty.is_match(bad), "{bad}");
        }
        let flag = regex::Regex::new(CPU_FLAG_PATTERN).unwrap();
        for f in PVE_VM_CPU_FLAGS {
            assert!(flag.is_match(&format!("+{f}")) && flag.is_match(&format!("-{f}")));
        }
        assert!(!flag.is_match("aes") && !flag.is_match("+avx2"));
    }
}
