//! Cluster API `cluster.x-k8s.io/v1beta1` Cluster and Machine (CAPI up to v1.10), reduced to the
//! fields we use.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::{ApiEndpoint, MachineAddress, MachineBootstrap};

/// The parts of a v1beta1 Cluster's spec the provider reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Cluster",
    plural = "clusters",
    namespaced,
    status = "ClusterStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSpec {
    /// Pauses reconciliation of the cluster and all its objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paused: Option<bool>,
    /// Endpoint of the workload cluster's API server.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// The infrastructure cluster object (full object reference with apiVersion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectReference>,
}

/// The parts of a v1beta1 Cluster's status tests set; other fields are kept by the API server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct ClusterStatus {
    /// Whether the infrastructure cluster is ready (v1beta1 contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ready: Option<bool>,
    /// Lifecycle phase of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}

/// The parts of a v1beta1 Machine's spec the provider reads; other fields are kept.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
    kind = "Machine",
    plural = "machines",
    namespaced,
    status = "MachineStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineSpec {
    /// Name of the Cluster this machine belongs to.
    pub cluster_name: String,
    /// Where the bootstrap data comes from.
    #[serde(default)]
    pub bootstrap: MachineBootstrap,
    /// The infrastructure machine object (full object reference with apiVersion).
    #[serde(default)]
    pub infrastructure_ref: ObjectReference,
    /// Kubernetes version of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// Provider ID of the node, copied from the infrastructure machine.
    #[serde(rename = "providerID", default, skip_serializing_if = "Option::is_none")]
    pub provider_id: Option<String>,
    /// Failure domain the machine is placed in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domain: Option<String>,
}

/// The parts of a v1beta1 Machine's status tests set; other fields are kept by the API server.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineStatus {
    /// The workload cluster node of this machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_ref: Option<ObjectReference>,
    /// Addresses of the machine, copied from the infrastructure machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub addresses: Option<Vec<MachineAddress>>,
    /// Whether the infrastructure machine is ready (v1beta1 contract).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ready: Option<bool>,
    /// Whether the bootstrap data secret is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_ready: Option<bool>,
    /// Lifecycle phase of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<String>,
}
