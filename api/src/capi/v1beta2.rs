//! Cluster API `cluster.x-k8s.io/v1beta2` Cluster (CAPI v1.11+), reduced to the fields we use.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::ApiEndpoint;

/// The parts of a v1beta2 Cluster's spec the provider reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta2",
    kind = "Cluster",
    plural = "clusters",
    namespaced,
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
    /// The infrastructure cluster object (e.g. a `ProxmoxCluster`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ContractVersionedObjectReference>,
}

/// Reference by group, kind and name (same namespace); the version comes from CRD contract labels.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ContractVersionedObjectReference {
    /// API group of the referenced object.
    pub api_group: String,
    /// Kind of the referenced object.
    pub kind: String,
    /// Name of the referenced object.
    pub name: String,
}
