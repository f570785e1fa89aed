//! Cluster API `cluster.x-k8s.io/v1beta1` Cluster (CAPI up to v1.10), reduced to the fields we use.

use k8s_openapi::api::core::v1::ObjectReference;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

pub use super::ApiEndpoint;

/// The parts of a v1beta1 Cluster's spec the provider reads.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "cluster.x-k8s.io",
    version = "v1beta1",
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
    /// The infrastructure cluster object (full object reference with apiVersion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub infrastructure_ref: Option<ObjectReference>,
}
