//! `ProxmoxVirtualMachine.spec`: the connection, the source (template or an existing VM), the
//! hardware with `ProxmoxMachine`'s field names and types, the guest configuration, power and
//! deletion.

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::status::ProxmoxVirtualMachineStatus;
use crate::v1alpha2::{
    AdditionalVolume, CpuSpec, DiskSize, HaSpec, NetworkModel, PciDevice, TargetFileStorageFormat,
    TemplateSelector, VmIdRange, schema,
};

/// CEL: at most one template source.
pub const RULE_ONE_TEMPLATE_SOURCE: &str = "[has(self.templateID), has(self.templateSelector), has(self.templateName), has(self.imageRef)].filter(c, c).size() <= 1";
/// CEL: a VM to create needs a template; an adopted one needs its VMID.
pub const RULE_SOURCE_OR_ADOPT: &str = "(has(self.adopt) && self.adopt) ? has(self.vmid) : (has(self.templateID) || has(self.templateSelector) || has(self.templateName) || has(self.imageRef))";
/// CEL: an explicit VMID lies in `vmIDRange`.
pub const RULE_VMID_IN_RANGE: &str = "!has(self.vmid) || !has(self.vmIDRange) || (self.vmid >= self.vmIDRange.start && self.vmid <= self.vmIDRange.end)";
/// CEL: `format` needs a full clone.
pub const RULE_FORMAT_FULL: &str = "!has(self.format) || !has(self.full) || self.full";
/// CEL: `storage` needs a full clone.
pub const RULE_STORAGE_FULL: &str = "!has(self.storage) || !has(self.full) || self.full";
/// CEL on a disk (transition rule): disks only grow.
pub const RULE_NO_SHRINK: &str = "self.sizeGb >= oldSelf.sizeGb";
/// CEL on the boot volume (transition rule): its slot is fixed.
pub const RULE_BOOT_SLOT_FIXED: &str = "self.disk == oldSelf.disk";
/// CEL on the VMID (transition rule): fixed once set.
pub const RULE_VMID_FIXED: &str = "self == oldSelf";
/// Pattern of `spec.shutdownTimeout`: a Go duration (`3m`, `90s`, `1h30m`).
pub const DURATION_PATTERN: &str = r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$";
/// Smallest memory a VM may have (MiB).
pub const MIN_MEMORY_MIB: i32 = 64;

/// A Proxmox VE virtual machine managed as a Kubernetes object.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vm.capmox-rs.io",
    version = "v1alpha1",
    kind = "ProxmoxVirtualMachine",
    doc = "ProxmoxVirtualMachine is one Proxmox VE virtual machine managed as a Kubernetes object, without Cluster API.",
    plural = "proxmoxvirtualmachines",
    singular = "proxmoxvirtualmachine",
    namespaced,
    status = "ProxmoxVirtualMachineStatus",
    shortname = "pvm",
    category = "proxmox",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Phase","type":"string","description":"Where the VM stands","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Node","type":"string","description":"Proxmox node of the VM","jsonPath":".status.node"}"#,
    printcolumn = r#"{"name":"VMID","type":"integer","description":"Proxmox VMID","jsonPath":".status.vmid"}"#,
    printcolumn = r#"{"name":"IP","type":"string","description":"First address the guest agent reports","jsonPath":".status.ipAddresses[0]"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": RULE_ONE_TEMPLATE_SOURCE, "message": "set at most one of templateID, templateSelector, templateName and imageRef"},
    {"rule": RULE_SOURCE_OR_ADOPT, "message": "set templateID, templateSelector, templateName or imageRef (or adopt: true with vmid)"},
    {"rule": RULE_VMID_IN_RANGE, "message": "vmid must lie within vmIDRange"},
    {"rule": RULE_FORMAT_FULL, "message": "format needs full: true"},
    {"rule": RULE_STORAGE_FULL, "message": "storage needs full: true"}
]))]
pub struct ProxmoxVirtualMachineSpec {
    /// A Secret in this namespace with the Proxmox connection in capmox's format (`url`, `token`
    /// and `secret`, or `username` and `password`; optional `root_ca`, `insecure`); the manager's
    /// global credentials (`PROXMOX_URL`, …) when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<CredentialsRef>,

    /// Take over the existing VM `vmid` as it is (tag it, report it, power it) instead of cloning
    /// one. Without it an existing VM at `vmid` is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub adopt: Option<bool>,

    /// Node holding the template (found in the cluster's list when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub source_node: Option<String>,

    /// VMID of the template to clone.
    #[serde(rename = "templateID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100))]
    pub template_id: Option<i32>,

    /// Selects the template by its Proxmox tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,

    /// Name of the template to clone (exactly one template may carry it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub template_name: Option<String>,

    /// A `ProxmoxVMImage` in this namespace whose template to clone (waited for until it is
    /// `Ready`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_ref: Option<super::image::ImageRef>,

    /// Whether to make a full clone (true, the default) or a linked clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub full: Option<bool>,

    /// Target storage of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,

    /// Disk format of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TargetFileStorageFormat>,

    /// Proxmox resource pool to add the VM to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,

    /// Snapshot of the template to clone from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snap_name: Option<String>,

    /// Proxmox nodes the VM may be placed on (the template's node when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub allowed_nodes: Option<Vec<String>>,

    /// Range to pick the VMID from (when `vmid` is unset).
    #[serde(rename = "vmIDRange", default, skip_serializing_if = "Option::is_none")]
    pub vm_id_range: Option<VmIdRange>,

    /// The VMID of the VM: the one to create, or the one to adopt; Proxmox's next free one (or
    /// one of `vmIDRange`) when unset. Fixed once set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 999_999_999), extend("x-kubernetes-validations" = [
        {"rule": RULE_VMID_FIXED, "message": "vmid cannot be changed"}
    ]))]
    pub vmid: Option<i64>,

    /// Number of CPU sockets; the template's value when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_sockets: Option<i32>,

    /// Cores per socket; the template's value when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_cores: Option<i32>,

    /// Memory in MiB (at least 64); the template's value when unset. Raised live when the VM
    /// has memory hot-plug (set at creation for 1024 MiB and more).
    #[serde(rename = "memoryMiB", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 64), extend("multipleOf" = 8))]
    pub memory_mib: Option<i32>,

    /// CPU model, flags and NUMA.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<CpuSpec>,

    /// PCI devices passed through by Proxmox PCI resource mappings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic"))]
    pub pci_devices: Option<Vec<PciDevice>>,

    /// Disks: the boot volume (grown, never shrunk) and additional data disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<VmDisks>,

    /// The VM's NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<VmNetwork>,

    /// Extra Proxmox tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(regex(pattern = schema::TAG_PATTERN)), extend("x-kubernetes-list-type" = "set"))]
    pub tags: Option<Vec<String>>,

    /// Description set on the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Register the VM as a Proxmox HA resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<HaSpec>,

    /// Guest OS type (Proxmox `ostype`), e.g. `l26`, `win11`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<OsType>,

    /// Start the VM when its Proxmox node boots (`onboot`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_boot: Option<bool>,

    /// Proxmox's `protection`: the VM cannot be destroyed, and deleting this object is refused
    /// until it is turned off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protection: Option<bool>,

    /// The QEMU guest agent (default on): addresses and the OS come from it, and a restart is a
    /// guest reboot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub agent: Option<bool>,

    /// The guest's cloud-init user data, delivered on a NoCloud ISO with the meta-data and a
    /// network-config rendered from the NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<CloudInit>,

    /// Storage the NoCloud ISO is uploaded to (the node's first ISO storage when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub cloud_init_storage: Option<String>,

    /// How the VM is powered: `Always` (default), `RerunOnFailure`, `Halted`, `Manual`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Always"))]
    pub run_strategy: Option<RunStrategy>,

    /// How long a shutdown may take before the VM is stopped hard (a Go duration, default `3m`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = DURATION_PATTERN), extend("default" = "3m"))]
    pub shutdown_timeout: Option<String>,

    /// Suspend the running VM (QEMU pause); `false` resumes it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,

    /// Restart the VM by itself when Proxmox keeps changes pending (else `RestartRequired`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restart_on_change: Option<bool>,

    /// What deleting this object does to the VM: `Delete` (default: stop, destroy with purge,
    /// remove the ISO) or `Retain` (untag it and leave it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Delete"))]
    pub deletion_policy: Option<DeletionPolicy>,
}

/// The Secret with the Proxmox connection.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CredentialsRef {
    /// Name of a Secret in the object's namespace.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Disks of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmDisks {
    /// The boot disk: its slot is fixed, its size only grows (online).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": RULE_NO_SHRINK, "message": "disks cannot shrink"},
        {"rule": RULE_BOOT_SLOT_FIXED, "message": "the boot volume's disk slot cannot be changed"}
    ]))]
    pub boot_volume: Option<DiskSize>,

    /// Additional data disks (created empty, grown online, never shrunk).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "additional_volumes")]
    pub additional_volumes: Option<Vec<AdditionalVolume>>,
}

/// The schema of `additionalVolumes`: `ProxmoxMachine`'s volumes, each only growing.
fn additional_volumes(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let mut item = serde_json::to_value(g.subschema_for::<AdditionalVolume>()).unwrap_or_default();
    if let Some(obj) = item.as_object_mut() {
        let rules = obj
            .entry("x-kubernetes-validations")
            .or_insert_with(|| serde_json::json!([]));
        if let Some(list) = rules.as_array_mut() {
            list.push(serde_json::json!({"rule": RULE_NO_SHRINK, "message": "disks cannot shrink"}));
        }
    }
    schemars::Schema::try_from(serde_json::json!({
        "description": "Additional data disks (created empty, grown online, never shrunk).",
        "type": "array",
        "maxItems": 30,
        "items": item,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["disk"]
    }))
    .unwrap_or_default()
}

/// The VM's NICs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmNetwork {
    /// NICs keyed by slot name (`net0`, `net1`, …).
    #[serde(default)]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub network_devices: Vec<VmNetworkDevice>,
}

/// One NIC. Its guest addresses are static (`ipv4Addresses`/`ipv6Addresses`), from an IPAM pool
/// (`ipPoolRef`) or, without either, DHCP.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmNetworkDevice {
    /// Proxmox NIC slot, `net0`, `net1`, …
    #[schemars(regex(pattern = schema::NET_NAME_PATTERN))]
    pub name: String,

    /// Proxmox bridge, e.g. `vmbr0` (the template's when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub bridge: Option<String>,

    /// Emulated NIC model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "virtio"))]
    pub model: Option<NetworkModel>,

    /// MAC address (Proxmox generates one when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = schema::MAC_ADDRESS_PATTERN))]
    pub mac_address: Option<String>,

    /// Proxmox firewall on this NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub firewall: Option<bool>,

    /// VLAN tag.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<i32>,

    /// MTU of the Proxmox NIC (`1` inherits the bridge's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == 1 || (self >= 576 && self <= 65520)", "message": "invalid MTU value"}
    ]))]
    pub mtu: Option<i32>,

    /// Multiqueue queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 64))]
    pub queues: Option<i32>,

    /// Static IPv4 addresses in CIDR notation (`10.0.0.5/24`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(regex(pattern = IPV4_CIDR_PATTERN)), extend("x-kubernetes-list-type" = "atomic"))]
    pub ipv4_addresses: Option<Vec<String>>,

    /// IPv4 default gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = IPV4_PATTERN))]
    pub gateway: Option<String>,

    /// Static IPv6 addresses in CIDR notation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ipv6_addresses: Option<Vec<String>>,

    /// IPv6 default gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway6: Option<String>,

    /// Name servers of this NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub dns_servers: Option<Vec<String>>,

    /// An IPAM pool (`InClusterIPPool` or `GlobalInClusterIPPool`) to claim the NIC's address
    /// from: the controller creates the IPAddressClaim `<name>-<nic>-00-inet` (owned by this
    /// object, released when it is deleted) and renders the address, prefix and gateway into the
    /// network-config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_pool_ref: Option<TypedLocalObjectReference>,
}

/// Pattern of an IPv4 address.
pub const IPV4_PATTERN: &str =
    r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])$";
/// Pattern of an IPv4 address with prefix length.
pub const IPV4_CIDR_PATTERN: &str = r"^((25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])\.){3}(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])/([0-9]|[12][0-9]|3[0-2])$";

/// The guest's cloud-init user data.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "!(has(self.userData) && has(self.userDataSecretRef))", "message": "set userData or userDataSecretRef, not both"}
]))]
pub struct CloudInit {
    /// User data inline (e.g. `#cloud-config …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data: Option<String>,

    /// User data from a key of a Secret in this namespace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user_data_secret_ref: Option<SecretKeyRef>,
}

/// A key of a Secret in the object's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// Secret name.
    #[schemars(length(min = 1))]
    pub name: String,
    /// Key in the Secret (default `userdata`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// How the VM is powered (KubeVirt's run strategies).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum RunStrategy {
    /// Keep it running: start it again whenever it stops.
    #[default]
    Always,
    /// Start it again only after a failure, not after a shutdown.
    RerunOnFailure,
    /// Shut it down (hard stop after `shutdownTimeout`) and keep it stopped.
    Halted,
    /// Powered only by explicit requests (`capmox vm start|stop`).
    Manual,
}

impl RunStrategy {
    /// The spelling in the spec.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Always => "Always",
            Self::RerunOnFailure => "RerunOnFailure",
            Self::Halted => "Halted",
            Self::Manual => "Manual",
        }
    }
}

/// What deleting the object does to the VM.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum DeletionPolicy {
    /// Stop and destroy the VM (with `purge`) and remove its ISO.
    #[default]
    Delete,
    /// Untag the VM and leave it as it is.
    Retain,
}

/// Proxmox `ostype`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum OsType {
    /// Linux 2.6 – 6.x kernel.
    L26,
    /// Linux 2.4 kernel.
    L24,
    /// Windows 11 / Server 2022 / 2025.
    Win11,
    /// Windows 10 / Server 2016 / 2019.
    Win10,
    /// Windows 8 / Server 2012.
    Win8,
    /// Windows 7.
    Win7,
    /// Solaris / OpenSolaris / OpenIndiana.
    Solaris,
    /// Anything else.
    Other,
}

impl OsType {
    /// Proxmox's value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::L26 => "l26",
            Self::L24 => "l24",
            Self::Win11 => "win11",
            Self::Win10 => "win10",
            Self::Win8 => "win8",
            Self::Win7 => "win7",
            Self::Solaris => "solaris",
            Self::Other => "other",
        }
    }
}

impl ProxmoxVirtualMachineSpec {
    /// The run strategy (default `Always`).
    pub fn run_strategy(&self) -> RunStrategy {
        self.run_strategy.unwrap_or_default()
    }

    /// The deletion policy (default `Delete`).
    pub fn deletion_policy(&self) -> DeletionPolicy {
        self.deletion_policy.unwrap_or_default()
    }

    /// Whether the VM is adopted rather than cloned.
    pub fn adopts(&self) -> bool {
        self.adopt == Some(true)
    }

    /// Whether the guest agent is on (default).
    pub fn agent_enabled(&self) -> bool {
        self.agent != Some(false)
    }

    /// The NICs.
    pub fn nics(&self) -> &[VmNetworkDevice] {
        self.network.as_ref().map_or(&[], |n| &n.network_devices)
    }

    /// The boot volume.
    pub fn boot_volume(&self) -> Option<&DiskSize> {
        self.disks.as_ref().and_then(|d| d.boot_volume.as_ref())
    }

    /// The additional volumes.
    pub fn additional_volumes(&self) -> &[AdditionalVolume] {
        self.disks
            .as_ref()
            .and_then(|d| d.additional_volumes.as_deref())
            .unwrap_or_default()
    }
}
