//! `ProxmoxVMRestore` (short `pvmrestore`): rolls a ProxmoxVirtualMachine's VM back to one of its
//! ProxmoxVMSnapshots, once.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::snapshot::{RULE_IMMUTABLE, VmReference};
use crate::v1alpha2::schema;

/// A rollback of a ProxmoxVirtualMachine's VM to a snapshot.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vm.capmox-rs.io",
    version = "v1alpha1",
    kind = "ProxmoxVMRestore",
    doc = "ProxmoxVMRestore rolls a ProxmoxVirtualMachine's VM back to one of its ProxmoxVMSnapshots (once).",
    plural = "proxmoxvmrestores",
    singular = "proxmoxvmrestore",
    namespaced,
    status = "ProxmoxVMRestoreStatus",
    shortname = "pvmrestore",
    category = "proxmox",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Target","type":"string","description":"The ProxmoxVirtualMachine","jsonPath":".spec.target.name"}"#,
    printcolumn = r#"{"name":"Snapshot","type":"string","description":"The ProxmoxVMSnapshot","jsonPath":".spec.snapshotName"}"#,
    printcolumn = r#"{"name":"Complete","type":"boolean","description":"The VM was rolled back","jsonPath":".status.complete"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": RULE_IMMUTABLE, "message": "spec cannot be changed"}
]))]
pub struct ProxmoxVMRestoreSpec {
    /// The ProxmoxVirtualMachine (in this namespace) to roll back.
    pub target: VmReference,

    /// The ProxmoxVMSnapshot (in this namespace, of that ProxmoxVirtualMachine) to roll back to.
    #[schemars(length(min = 1, max = 253))]
    pub snapshot_name: String,
}

/// Observed state of a `ProxmoxVMRestore`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxVMRestoreStatus {
    /// The VM was rolled back.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub complete: Option<bool>,

    /// When the rollback finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::date_time")]
    pub restore_time: Option<Time>,

    /// The restore failed for good (the `Ready` condition says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<bool>,

    /// The VMID of the rolled-back VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<i64>,

    /// The Proxmox node of the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,

    /// The Proxmox snapshot rolled back to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_snapshot: Option<String>,

    /// The VM is started after the rollback (its run strategy wants it running; a snapshot with
    /// memory always resumes it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<bool>,

    /// When the rollback was about to be issued (Unix seconds).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub issued_after: Option<i64>,

    /// The VM's newest rollback task before this restore's (`""`: none): a newer one is this
    /// restore's, found again after a crash lost its answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub previous_rollback: Option<String>,

    /// The Proxmox task in flight (UPID): waited for, never issued twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,

    /// `Ready`: the restore is complete, or why not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,
}
