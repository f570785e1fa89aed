//! `ProxmoxVMClone` (short `pvmclone`): a new ProxmoxVirtualMachine made from an existing one (or
//! from a snapshot of it): the source's spec with new name-bound fields, its VM cloned in Proxmox.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::snapshot::{OperationPhase, RULE_IMMUTABLE};
use super::spec::{CloudInit, IPV4_CIDR_PATTERN, IPV4_PATTERN, RunStrategy};
use crate::v1alpha2::schema;

/// CEL: `storage` needs a full clone.
pub const RULE_STORAGE_NEEDS_FULL: &str = "!has(self.storage) || !has(self.linked) || !self.linked";

/// A clone of a ProxmoxVirtualMachine.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vm.capmox-rs.io",
    version = "v1alpha1",
    kind = "ProxmoxVMClone",
    doc = "ProxmoxVMClone makes a new ProxmoxVirtualMachine from an existing one or from a snapshot of it: the source's spec with new name-bound fields, its VM cloned in Proxmox.",
    plural = "proxmoxvmclones",
    singular = "proxmoxvmclone",
    namespaced,
    status = "ProxmoxVMCloneStatus",
    shortname = "pvmclone",
    category = "proxmox",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Source","type":"string","description":"The source","jsonPath":".spec.source.name"}"#,
    printcolumn = r#"{"name":"Target","type":"string","description":"The new ProxmoxVirtualMachine","jsonPath":".spec.target.name"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","description":"Where the clone stands","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"VMID","type":"integer","description":"VMID of the clone","jsonPath":".status.targetVMID"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": RULE_IMMUTABLE, "message": "spec cannot be changed"},
    {"rule": RULE_STORAGE_NEEDS_FULL, "message": "storage needs a full clone (linked: false)"}
]))]
pub struct ProxmoxVMCloneSpec {
    /// What to clone: a ProxmoxVirtualMachine, or a ProxmoxVMSnapshot of one (its VM as it was
    /// then).
    pub source: CloneSource,

    /// The ProxmoxVirtualMachine to create.
    pub target: CloneTarget,

    /// Make a linked clone of the source's template (Proxmox links clones to templates only):
    /// the new VM shares the template's disks and gets the source's hardware; the source must
    /// have been cloned from a template. Default: a full copy of the source's disks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub linked: Option<bool>,

    /// Proxmox node of the new VM (the source's node when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub target_node: Option<String>,

    /// Storage of a full clone's disks (the source's when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub storage: Option<String>,
}

/// The source of a clone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneSource {
    /// `ProxmoxVirtualMachine` (default) or `ProxmoxVMSnapshot`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "ProxmoxVirtualMachine"))]
    pub kind: Option<CloneSourceKind>,

    /// Name of the object in this namespace.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// The kinds a clone is made from.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum CloneSourceKind {
    /// A ProxmoxVirtualMachine, as it is now.
    #[default]
    ProxmoxVirtualMachine,
    /// A ProxmoxVMSnapshot: its VM as it was when the snapshot was taken.
    ProxmoxVMSnapshot,
}

/// The ProxmoxVirtualMachine a clone creates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneTarget {
    /// Name of the new ProxmoxVirtualMachine (in this namespace; it must not exist).
    #[schemars(length(min = 1, max = 63))]
    pub name: String,

    /// Fields of the new VM's spec that differ from the source's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub overrides: Option<CloneOverrides>,
}

/// What the new ProxmoxVirtualMachine gets instead of the source's values. Without overrides
/// the NICs get new MACs from Proxmox, the VMID is Proxmox's next free one, and the guest a new
/// cloud-init instance (the new object's).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CloneOverrides {
    /// VMID of the new VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub vmid: Option<i64>,

    /// Description of the new VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,

    /// Extra Proxmox tags of the new VM (instead of the source's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(regex(pattern = schema::TAG_PATTERN)), extend("x-kubernetes-list-type" = "set"))]
    pub tags: Option<Vec<String>>,

    /// Run strategy of the new VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_strategy: Option<RunStrategy>,

    /// Cloud-init user data of the new VM (instead of the source's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cloud_init: Option<CloudInit>,

    /// Per NIC: its MAC and static addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub network_devices: Option<Vec<NicOverride>>,

    /// Labels of the new ProxmoxVirtualMachine object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// A NIC's name-bound fields.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NicOverride {
    /// NIC slot (`net0`, …).
    #[schemars(regex(pattern = schema::NET_NAME_PATTERN))]
    pub name: String,

    /// MAC address (Proxmox generates one when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = schema::MAC_ADDRESS_PATTERN))]
    pub mac_address: Option<String>,

    /// Static IPv4 addresses in CIDR notation.
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
}

/// Observed state of a `ProxmoxVMClone`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxVMCloneStatus {
    /// `Pending`, `InProgress` (the new ProxmoxVirtualMachine is being created), `Succeeded`
    /// (it runs as its run strategy says) or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<OperationPhase>,

    /// The VMID of the new VM.
    #[serde(rename = "targetVMID", default, skip_serializing_if = "Option::is_none")]
    pub target_vmid: Option<i64>,

    /// `Ready`: the clone is done, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}

impl ProxmoxVMCloneSpec {
    /// Whether a linked clone is asked for.
    pub fn is_linked(&self) -> bool {
        self.linked == Some(true)
    }

    /// The source's kind (default `ProxmoxVirtualMachine`).
    pub fn source_kind(&self) -> CloneSourceKind {
        self.source.kind.unwrap_or_default()
    }
}
