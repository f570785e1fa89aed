//! `ProxmoxVMSnapshot` (short `pvmsnap`): one Proxmox snapshot of a ProxmoxVirtualMachine's VM,
//! with or without its memory, deleted with the object unless `deletionPolicy: Retain`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::v1alpha2::schema;

/// CEL (transition rule): a field fixed once the object is created.
pub const RULE_IMMUTABLE: &str = "self == oldSelf";

/// A snapshot of a ProxmoxVirtualMachine's VM.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vm.capmox-rs.io",
    version = "v1alpha1",
    kind = "ProxmoxVMSnapshot",
    doc = "ProxmoxVMSnapshot is one Proxmox VE snapshot of a ProxmoxVirtualMachine's VM (its disks, its config and, with includeMemory, its memory).",
    plural = "proxmoxvmsnapshots",
    singular = "proxmoxvmsnapshot",
    namespaced,
    status = "ProxmoxVMSnapshotStatus",
    shortname = "pvmsnap",
    category = "proxmox",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Source","type":"string","description":"The ProxmoxVirtualMachine","jsonPath":".spec.source.name"}"#,
    printcolumn = r#"{"name":"Phase","type":"string","description":"Where the snapshot stands","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Ready","type":"boolean","description":"The snapshot can be restored or cloned","jsonPath":".status.readyToUse"}"#,
    printcolumn = r#"{"name":"Snapshot","type":"string","description":"Name of the snapshot in Proxmox","jsonPath":".status.snapshotName"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxVMSnapshotSpec {
    /// The ProxmoxVirtualMachine (in this namespace) whose VM is snapshotted.
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": RULE_IMMUTABLE, "message": "source cannot be changed"}
    ]))]
    pub source: VmReference,

    /// Description of the snapshot in Proxmox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(max = 8192), extend("x-kubernetes-validations" = [
        {"rule": RULE_IMMUTABLE, "message": "description cannot be changed"}
    ]))]
    pub description: Option<String>,

    /// Save the running VM's memory too (Proxmox `vmstate`): a restore resumes the VM where it
    /// was. Refused for a stopped VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": RULE_IMMUTABLE, "message": "includeMemory cannot be changed"}
    ]))]
    pub include_memory: Option<bool>,

    /// What deleting this object does to the Proxmox snapshot: `Delete` (default) or `Retain`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Delete"))]
    pub deletion_policy: Option<SnapshotDeletionPolicy>,
}

/// A ProxmoxVirtualMachine in the object's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VmReference {
    /// Name of the ProxmoxVirtualMachine.
    #[schemars(length(min = 1, max = 253))]
    pub name: String,
}

/// What deleting a ProxmoxVMSnapshot does to the Proxmox snapshot.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum SnapshotDeletionPolicy {
    /// Delete the Proxmox snapshot.
    #[default]
    Delete,
    /// Leave the Proxmox snapshot.
    Retain,
}

/// Observed state of a `ProxmoxVMSnapshot`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxVMSnapshotStatus {
    /// `Pending`, `InProgress`, `Succeeded` or `Failed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<OperationPhase>,

    /// The snapshot exists and can be restored or cloned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ready_to_use: Option<bool>,

    /// When Proxmox took the snapshot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::date_time")]
    pub creation_time: Option<Time>,

    /// The snapshot's name in Proxmox (chosen before it is taken, never reused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot_name: Option<String>,

    /// The Proxmox snapshot this one was taken on top of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,

    /// The snapshot holds the VM's memory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<bool>,

    /// The VMID of the snapshotted VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<i64>,

    /// The Proxmox node of the VM when the snapshot was taken.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,

    /// The Proxmox task in flight (UPID): waited for, never issued twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,

    /// `Ready`: the snapshot is usable, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}

/// Where a snapshot or clone stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum OperationPhase {
    /// Waiting (for the source, or for the VM to be free).
    Pending,
    /// Proxmox is working on it.
    InProgress,
    /// Done.
    Succeeded,
    /// Failed for good: the `Ready` condition says why.
    Failed,
}

impl OperationPhase {
    /// The spelling in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::InProgress => "InProgress",
            Self::Succeeded => "Succeeded",
            Self::Failed => "Failed",
        }
    }
}

impl ProxmoxVMSnapshotSpec {
    /// The deletion policy (default `Delete`).
    pub fn deletion_policy(&self) -> SnapshotDeletionPolicy {
        self.deletion_policy.unwrap_or_default()
    }
}
