//! v1alpha1 ProxmoxMachine.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::TAG_PATTERN;
use super::{Condition, MachineAddress, NetworkSpec};
use crate::v1alpha2;

/// Desired state of a v1alpha1 ProxmoxMachine: where to clone the VM from and how
/// to size and wire it.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ProxmoxMachine",
    plural = "proxmoxmachines",
    singular = "proxmoxmachine",
    namespaced,
    served = true,
    storage = false,
    status = "ProxmoxMachineStatus",
    shortname = "moxm",
    category = "cluster-api",
    category = "proxmox",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name": "Cluster", "type": "string", "description": "Cluster to which this ProxmoxMachine belongs", "jsonPath": ".metadata.labels.cluster\\.x-k8s\\.io/cluster-name"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "description": "Machine ready status", "jsonPath": ".status.ready"}"#,
    printcolumn = r#"{"name": "Node", "type": "string", "description": "Proxmox Node that the machine was deployed on", "jsonPath": ".status.proxmoxNode"}"#,
    printcolumn = r#"{"name": "Provider_ID", "type": "string", "description": "Provider ID", "jsonPath": ".spec.providerID"}"#,
    printcolumn = r#"{"name": "Machine", "type": "string", "description": "Machine object which owns with this ProxmoxMachine", "jsonPath": ".metadata.ownerReferences[?(@.kind==\"Machine\")].name"}"#
)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": v1alpha2::RULE_MACHINE_SOURCE_NODE_XOR_SELECTOR, "message": "must define either SourceNode with TemplateID, OR TemplateSelector"},
    {"rule": v1alpha2::RULE_MACHINE_TEMPLATE_ID_XOR_SELECTOR, "message": "must define either SourceNode with TemplateID, OR TemplateSelector."},
    {"rule": "self.full || !has(self.format)", "message": "Must set full=true when specifying format"},
    {"rule": "self.full || !has(self.storage)", "message": "Must set full=true when specifying storage"},
    {"rule": v1alpha2::RULE_MACHINE_IMAGE_REF_ALONE, "message": v1alpha2::MESSAGE_MACHINE_IMAGE_REF_ALONE}
]))]
#[schemars(transform = super::schema::finalize)]
pub struct ProxmoxMachineSpec {
    /// Proxmox node that holds the template to clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub source_node: Option<String>,
    /// VMID of the template to clone.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "templateID")]
    pub template_id: Option<i32>,
    /// Selects the template to clone by Proxmox tags instead of by ID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_selector: Option<TemplateSelector>,
    /// A `ProxmoxVMImage` in this namespace whose template to clone (capmox-rs): a template
    /// source of its own, instead of `templateID` with `sourceNode` or `templateSelector`.
    // In v1alpha1 too: CAPI v1.10 creates machines through v1alpha1, and the template-source
    // rules must see the image there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_ref: Option<crate::vm::ImageRef>,
    /// Description set on the cloned VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Disk format of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub format: Option<TargetFileStorageFormat>,
    /// Whether to make a full clone (true) or a linked clone (false).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub full: Option<bool>,
    /// Proxmox resource pool the VM is added to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pool: Option<String>,
    /// Snapshot of the template to clone from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snap_name: Option<String>,
    /// Storage for the disks of a full clone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
    /// Proxmox node the VM is cloned to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// Provider ID of the machine (`proxmox://<uuid>`), set by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "providerID")]
    pub provider_id: Option<String>,
    /// VMID of the cloned VM, set by the controller.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "virtualMachineID")]
    pub virtual_machine_id: Option<i64>,
    /// Number of CPU sockets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_sockets: Option<i32>,
    /// Number of cores per socket.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_cores: Option<i32>,
    /// Memory in MiB, a multiple of 8.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "memoryMiB")]
    #[schemars(extend("multipleOf" = 8))]
    pub memory_mib: Option<i32>,
    /// Disk settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disks: Option<Storage>,
    /// Network settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// Range the VMID of the clone is picked from.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "vmIDRange")]
    pub vm_id_range: Option<VmIdRange>,
    /// Readiness checks the controller performs on the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checks: Option<ProxmoxMachineChecks>,
    /// Extra cloud-init metadata settings.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_settings: Option<MetadataSettings>,
    /// Proxmox nodes this machine may be placed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_nodes: Option<Vec<String>>,
    /// Proxmox tags added to the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), inner(regex(pattern = TAG_PATTERN)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub tags: Option<Vec<String>>,
}

/// Selects a template by its Proxmox tags.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateSelector {
    /// Tags the template must carry.
    #[schemars(length(min = 1), inner(regex(pattern = TAG_PATTERN)))]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub match_tags: Vec<String>,
    /// How the template's tags are compared with `matchTags`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "exact"))]
    pub match_policy: Option<TemplateMatchPolicy>,
}

/// Tag matching policies of a template selector.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TemplateMatchPolicy {
    /// The template's tags equal `matchTags`.
    #[serde(rename = "exact")]
    Exact,
    /// Exactly one template carries all of `matchTags`.
    #[serde(rename = "uniqueSubset")]
    UniqueSubset,
    /// Among the templates that carry all of `matchTags`, the one with the fewest other tags.
    #[serde(rename = "bestSubset")]
    BestSubset,
}

/// Disk formats of a full clone.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum TargetFileStorageFormat {
    /// Raw disk image.
    #[serde(rename = "raw")]
    Raw,
    /// QEMU copy-on-write image.
    #[serde(rename = "qcow2")]
    Qcow2,
    /// VMware disk image.
    #[serde(rename = "vmdk")]
    Vmdk,
}

/// Disk settings of a machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Storage {
    /// Size of the boot disk.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == oldSelf", "message": "Value is immutable"}]))]
    pub boot_volume: Option<DiskSize>,
}

/// A disk and its size.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiskSize {
    /// Disk slot, e.g. `scsi0`.
    pub disk: String,
    /// Size in GiB.
    #[schemars(range(min = 5))]
    pub size_gb: i32,
}

/// Range of VMIDs.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self.end >= self.start", "message": "end should be greater than or equal to start"}]))]
pub struct VmIdRange {
    /// First VMID of the range.
    #[schemars(range(min = 100, max = 999_999_999))]
    pub start: i64,
    /// Last VMID of the range.
    #[schemars(range(min = 100, max = 999_999_999))]
    pub end: i64,
}

/// Readiness checks on the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineChecks {
    /// Skip waiting for cloud-init to finish.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_cloud_init_status: Option<bool>,
    /// Skip waiting for the QEMU guest agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skip_qemu_guest_agent: Option<bool>,
}

/// Cloud-init metadata settings.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MetadataSettings {
    /// Add the provider ID to the cloud-init metadata.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "providerIDInjection"
    )]
    pub provider_id_injection: Option<bool>,
}

/// Observed state of a v1alpha1 ProxmoxMachine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::schema::finalize)]
pub struct ProxmoxMachineStatus {
    /// Whether the VM is provisioned and ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready: Option<bool>,
    /// Addresses of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<MachineAddress>>,
    /// Power/provisioning state of the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_status: Option<String>,
    /// Whether the bootstrap data was injected into the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_provided: Option<bool>,
    /// IP addresses per NIC, keyed by NIC name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_addresses: Option<BTreeMap<String, IpAddress>>,
    /// Network interfaces seen on the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<Vec<NetworkStatus>>,
    /// Proxmox node the VM lives on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_node: Option<String>,
    /// UPID of the Proxmox task in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,
    /// Time before which a failed task is not retried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after: Option<Time>,
    /// Terminal error reason reported to Cluster API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Terminal error message reported to Cluster API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Current service state as CAPI v1beta1 conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
}

/// The IPv4 and IPv6 address of one NIC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpAddress {
    /// IPv4 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<String>,
    /// IPv6 address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<String>,
}

/// A network interface seen on the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// Whether the interface is connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected: Option<bool>,
    /// IP addresses of the interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ip_addrs: Option<Vec<String>>,
    /// MAC address of the interface.
    pub mac_addr: String,
    /// Name of the network the interface is attached to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_name: Option<String>,
}

super::schema::tolerant_serde!(ProxmoxMachineSpec);
