//! CPU model and PCI passthrough of a v1alpha2 `ProxmoxMachine` (`spec.cpu`, `spec.pciDevices`,
//! capmox #899/#834): the provider's VM lifecycle writes them into the VM's config before its
//! first boot as `cpu: <type>[,flags=+a;-b]`, `numa: 1` and
//! `hostpci<n>: mapping=<name>[,pcie=1][,x-vga=1]`.

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

#[cfg(test)]
mod tests {
    use super::*;

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
