//! `ProxmoxMachine` (v1alpha2): one Proxmox VE virtual machine backing a Cluster API `Machine`.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::machine_status::ProxmoxMachineStatus;
use super::network::NetworkSpec;

/// CEL rule on `ProxmoxMachine.spec` only: exactly one of `sourceNode` / `templateSelector`
/// (capmox's rule; `imageRef` is a template source of its own, see [`RULE_MACHINE_IMAGE_REF_ALONE`]).
pub const RULE_MACHINE_SOURCE_NODE_XOR_SELECTOR: &str =
    "has(self.imageRef) || [has(self.sourceNode), has(self.templateSelector)].exists_one(c, c)";
/// CEL rule on `ProxmoxMachine.spec` only: exactly one of `templateID` / `templateSelector`
/// (capmox's rule, unless `imageRef` is the source).
pub const RULE_MACHINE_TEMPLATE_ID_XOR_SELECTOR: &str =
    "has(self.imageRef) || [has(self.templateID), has(self.templateSelector)].exists_one(c, c)";
/// CEL rule: a template source is set (capmox's rule, which `imageRef` also satisfies).
pub const RULE_MACHINE_TEMPLATE_SOURCE: &str =
    "has(self.imageRef) || has(self.templateSelector) || (has(self.templateID) && has(self.sourceNode))";
/// CEL rule (capmox-rs): `imageRef` comes without `templateID`, `sourceNode` and
/// `templateSelector`. Without `imageRef` it always holds, and the three rules above are
/// capmox's: a capmox manifest validates exactly as before.
pub const RULE_MACHINE_IMAGE_REF_ALONE: &str =
    "!has(self.imageRef) || !(has(self.templateID) || has(self.sourceNode) || has(self.templateSelector))";
/// The message of [`RULE_MACHINE_IMAGE_REF_ALONE`].
pub const MESSAGE_MACHINE_IMAGE_REF_ALONE: &str = "imageRef is a template source of its own: set exactly one of sourceNode with templateID, templateSelector, or imageRef";

/// Desired state of a `ProxmoxMachine`: where to clone the VM from, how to size it and how to wire its NICs.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "ProxmoxMachine",
    doc = "ProxmoxMachine is one Proxmox VE virtual machine backing a Cluster API Machine (v1alpha2).",
    plural = "proxmoxmachines",
    singular = "proxmoxmachine",
    namespaced,
    status = "ProxmoxMachineStatus",
    shortname = "moxm",
    category = "cluster-api",
    category = "proxmox",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Cluster","type":"string","description":"Cluster to which this ProxmoxMachine belongs","jsonPath":".metadata.labels.cluster\\.x-k8s\\.io/cluster-name"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","description":"Machine ready status","jsonPath":".status.initialization.provisioned"}"#,
    printcolumn = r#"{"name":"Node","type":"string","description":"Proxmox Node that the machine was deployed on","jsonPath":".status.proxmoxNode"}"#,
    printcolumn = r#"{"name":"Provider_ID","type":"string","description":"Provider ID","jsonPath":".spec.providerID"}"#,
    printcolumn = r#"{"name":"Machine","type":"string","description":"Machine object which owns with this ProxmoxMachine","jsonPath":".metadata.ownerReferences[?(@.kind==\"Machine\")].name"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": RULE_MACHINE_SOURCE_NODE_XOR_SELECTOR, "message": "must define either a SourceNode with a TemplateID or a TemplateSelector"},
    {"rule": RULE_MACHINE_TEMPLATE_ID_XOR_SELECTOR, "message": "must define either a SourceNode with a TemplateID or a TemplateSelector"},
    {"rule": "self.full || !has(self.format)", "message": "Must set full=true when specifying format"},
    {"rule": "self.full || !has(self.storage)", "message": "Must set full=true when specifying storage"},
    {"rule": RULE_MACHINE_TEMPLATE_SOURCE, "message": "Must specify either templateID or templateSelector"},
    {"rule": RULE_MACHINE_IMAGE_REF_ALONE, "message": MESSAGE_MACHINE_IMAGE_REF_ALONE}
]))]
pub struct ProxmoxMachineSpec {
    /// Proxmox nodes this machine may be placed on; overrides the cluster's list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub allowed_nodes: Option<Vec<String>>,

    /// Readiness checks to skip while provisioning.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<ProxmoxMachineChecks>,

    /// Proxmox storage the bootstrap (NoCloud) ISO is uploaded to; must allow content `iso` on the
    /// VM's node. When unset, the first enabled storage with `iso` content in name order is used
    /// (capmox #782).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub cloud_init_storage: Option<String>,

    /// CPU model, flags and NUMA of the VM (capmox #899); applied before the first boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<super::devices::CpuSpec>,

    /// Description set on the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Disks of the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Storage>,

    /// Disk format of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TargetFileStorageFormat>,

    /// Register the VM as a Proxmox HA resource after its first start (capmox #216).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha: Option<super::ha::HaSpec>,

    /// Whether to make a full clone (true, the default) or a linked clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub full: Option<bool>,

    /// A `ProxmoxVMImage` in this namespace whose template to clone (capmox-rs): a template
    /// source of its own, instead of `templateID` with `sourceNode` or `templateSelector`. The
    /// machine waits (reason `WaitingForImage`) until the image is `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_ref: Option<crate::vm::ImageRef>,

    /// Memory of the VM in MiB; the template's value when unset.
    #[serde(rename = "memoryMiB", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("multipleOf" = 8))]
    pub memory_mib: Option<i32>,

    /// Settings for the cloud-init meta-data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_settings: Option<MetadataSettings>,

    /// Network devices, routes and VRFs of the VM.
    pub network: NetworkSpec,

    /// `capmox` (default): cloud-init network-config version 2 nested under a top-level `network:`
    /// key, exactly as capmox renders it. `v2`: standard network-config version 2 with
    /// `version: 2` at the top level, the form Talos' nocloud platform reads (capmox #51/#94).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_config_format: Option<NetworkConfigFormat>,

    /// Cores per socket; the template's value when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_cores: Option<i32>,

    /// Number of CPU sockets; the template's value when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_sockets: Option<i32>,

    /// Start the VM when its Proxmox node boots (Proxmox `onboot`); the template's setting when
    /// unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_boot: Option<bool>,

    /// PCI devices passed through by Proxmox PCI resource mappings (`hostpci<n>`, capmox #834);
    /// the VM is placed only on nodes where every mapping has an entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 16), extend("x-kubernetes-list-type" = "atomic"))]
    pub pci_devices: Option<Vec<super::devices::PciDevice>>,

    /// Proxmox resource pool to add the VM to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,

    /// `proxmox://<uuid>`; set by the controller from the VM's SMBIOS UUID.
    #[serde(rename = "providerID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 46, max = 46),
        regex(
            pattern = super::schema::PROVIDER_ID_PATTERN
        )
    )]
    pub provider_id: Option<String>,

    /// Snapshot of the template to clone from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snap_name: Option<String>,

    /// Node holding the template; the clone is started there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub source_node: Option<String>,

    /// Target storage of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,

    /// Extra Proxmox tags for the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1),
        inner(regex(pattern = super::schema::TAG_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub tags: Option<Vec<String>>,

    /// VMID of the template to clone; takes precedence over `templateSelector`.
    #[serde(rename = "templateID", default, skip_serializing_if = "Option::is_none")]
    pub template_id: Option<i32>,

    /// Selects the template by its Proxmox tags.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,

    /// VMID of the created VM; set by the controller.
    #[serde(rename = "virtualMachineID", default, skip_serializing_if = "Option::is_none")]
    pub virtual_machine_id: Option<i64>,

    /// Range to pick the VMID of the new VM from.
    #[serde(rename = "vmIDRange", default, skip_serializing_if = "Option::is_none")]
    pub vm_id_range: Option<VmIdRange>,
}

impl ProxmoxMachineSpec {
    /// Network-config format to render (default [`NetworkConfigFormat::Capmox`]).
    pub fn network_config_format_or_default(&self) -> NetworkConfigFormat {
        self.network_config_format.unwrap_or_default()
    }
}

/// `capmox` (default): cloud-init network-config version 2 nested under a top-level `network:`
/// key, exactly as capmox renders it. `v2`: standard network-config version 2 with `version: 2`
/// at the top level, the form Talos' nocloud platform reads (capmox #51/#94).
// The generated CRD takes this doc as the description of `networkConfigFormat`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum NetworkConfigFormat {
    /// Network-config version 2 nested under a top-level `network:` key, as capmox renders it.
    #[default]
    #[serde(rename = "capmox")]
    Capmox,
    /// Standard network-config version 2 with `version: 2` at the top level (Talos nocloud).
    #[serde(rename = "v2")]
    V2,
}

/// Selects a template VM by its tags.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSelector {
    /// How the tags of a template are compared with `matchTags`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "exact"))]
    pub match_policy: Option<TemplateMatchPolicy>,

    /// Tags the template must carry.
    #[schemars(
        length(min = 1),
        inner(regex(pattern = super::schema::TAG_PATTERN)),
        extend("x-kubernetes-list-type" = "set")
    )]
    pub match_tags: Vec<String>,
}

/// How a template's tags are matched.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum TemplateMatchPolicy {
    /// The template's tags equal `matchTags`.
    #[default]
    Exact,
    /// Exactly one template has all of `matchTags`.
    UniqueSubset,
    /// Of the templates that have all of `matchTags`, the one with the fewest other tags.
    BestSubset,
}

/// Disk format of a full clone.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TargetFileStorageFormat {
    /// Raw disk image.
    Raw,
    /// QEMU copy-on-write image.
    Qcow2,
    /// VMware disk image.
    Vmdk,
}

/// Disks of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// Empty data disks created after the clone, before the first boot (the guest sees them by
    /// bus and slot number, see the README); destroyed with the VM. A slot the VM already has
    /// (the boot volume's, or one the template brings) is refused by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(max = 30),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["disk"])
    )]
    pub additional_volumes: Option<Vec<super::volumes::AdditionalVolume>>,

    /// The boot disk; cannot be changed after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == oldSelf", "message": "Value is immutable"}
    ]))]
    pub boot_volume: Option<DiskSize>,
}

/// A disk and its size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskSize {
    /// Proxmox disk slot, e.g. `scsi0`.
    #[schemars(length(min = 1))]
    pub disk: String,

    /// Size in GiB the disk is grown to (never shrunk).
    #[schemars(range(min = 5))]
    pub size_gb: i32,
}

/// Readiness checks that can be skipped.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineChecks {
    /// Do not wait for `cloud-init status` to report completion.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_cloud_init_status: Option<bool>,

    /// Do not wait for the QEMU guest agent (also skips the cloud-init check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_qemu_guest_agent: Option<bool>,
}

/// Settings for the generated cloud-init meta-data.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataSettings {
    /// Add `provider-id: proxmox://<uuid>` to the meta-data.
    #[serde(rename = "providerIDInjection")]
    pub provider_id_injection: bool,
}

/// Inclusive range of VMIDs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.end >= self.start", "message": "end should be greater than or equal to start"}
]))]
pub struct VmIdRange {
    /// Highest VMID to use.
    #[schemars(range(min = 100, max = 999_999_999))]
    pub end: i64,

    /// Lowest VMID to use.
    #[schemars(range(min = 100, max = 999_999_999))]
    pub start: i64,
}

#[cfg(test)]
#[path = "machine_tests.rs"]
mod tests;
