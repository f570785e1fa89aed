//! The few Cluster API types the controllers read or write, defined here (compiled against this
//! workspace's kube major) with only the fields we use:
//!
//! * [`v1beta2::Cluster`] and [`v1beta1::Cluster`] (`cluster.x-k8s.io`): `spec.paused`,
//!   `spec.controlPlaneEndpoint`, `spec.infrastructureRef` and the infrastructure readiness in
//!   the status;
//! * [`v1beta2::Machine`] and [`v1beta1::Machine`]: cluster name, bootstrap secret, infrastructure
//!   reference, version, providerID, failure domain and a little status (test support);
//! * [`views`]: lenient read-only views of Clusters and Machines of either version, built from
//!   `DynamicObject`s (what the controllers use to read CAPI objects);
//! * [`ipam::InClusterIPPool`] (`ipam.cluster.x-k8s.io/v1alpha2`) of the in-cluster IPAM provider.
//! * [`ipam_claims`]: the core IPAM `IPAddressClaim` and `IPAddress` (`ipam.cluster.x-k8s.io` v1beta2
//!   and v1beta1).
//!
//! Unknown fields are ignored on read; these types are not meant to write whole CAPI objects back.

pub mod ipam;
pub mod ipam_claims;
pub mod v1beta1;
pub mod v1beta2;
pub mod views;

pub use views::{ClusterView, InfraRef, MachineView};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::crd::{MergeError, merge_crds};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API group of the Cluster API core kinds.
pub const CLUSTER_GROUP: &str = "cluster.x-k8s.io";
/// Kind of the Cluster API cluster.
pub const CLUSTER_KIND: &str = "Cluster";
/// Plural resource name of [`CLUSTER_KIND`].
pub const CLUSTER_PLURAL: &str = "clusters";
/// Kind of the Cluster API machine.
pub const MACHINE_KIND: &str = "Machine";
/// Plural resource name of [`MACHINE_KIND`].
pub const MACHINE_PLURAL: &str = "machines";
/// Label on control-plane Machines (any value).
pub const CONTROL_PLANE_LABEL: &str = "cluster.x-k8s.io/control-plane";
/// API group of the IPAM kinds.
pub const IPAM_GROUP: &str = "ipam.cluster.x-k8s.io";
/// Annotation marking an object as managed by another system (`cluster.x-k8s.io/managed-by`).
pub const MANAGED_BY_ANNOTATION: &str = "cluster.x-k8s.io/managed-by";

/// Host and port of an API server endpoint, as both CAPI generations spell it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    /// DNS name or IP address of the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// TCP port of the endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub port: Option<i32>,
}

/// One address of a machine, as both CAPI generations spell it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineAddress {
    /// Address type: `Hostname`, `ExternalIP`, `InternalIP`, `ExternalDNS` or `InternalDNS`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The address.
    pub address: String,
}

/// Where a Machine's bootstrap data comes from (both CAPI generations).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct MachineBootstrap {
    /// Name of the Secret holding the bootstrap data (key `value`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_secret_name: Option<String>,
}

/// Whether an apiVersion (`group/version`) belongs to `group`.
pub fn api_version_in_group(api_version: &str, group: &str) -> bool {
    api_version.split_once('/').is_some_and(|(g, _)| g == group)
}

/// The Cluster CRD (v1beta1 served, v1beta2 served + storage) built from these types, for tests
/// that run without the upstream CAPI CRDs. Only the fields above are in the schema.
pub fn cluster_crd() -> Result<CustomResourceDefinition, MergeError> {
    merge_crds(vec![v1beta1::Cluster::crd(), v1beta2::Cluster::crd()], "v1beta2")
}

/// The Machine CRD (v1beta1 served, v1beta2 served + storage) built from these types, for tests
/// that run without the upstream CAPI CRDs. Unknown spec and status fields are preserved.
pub fn machine_crd() -> Result<CustomResourceDefinition, MergeError> {
    merge_crds(vec![v1beta1::Machine::crd(), v1beta2::Machine::crd()], "v1beta2")
}

/// The InClusterIPPool CRD (v1alpha2 only) built from [`ipam::InClusterIPPool`].
pub fn in_cluster_ip_pool_crd() -> CustomResourceDefinition {
    ipam::InClusterIPPool::crd()
}

#[cfg(test)]
mod crd_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn group_match_ignores_version() {
        assert!(api_version_in_group("cluster.x-k8s.io/v1beta1", CLUSTER_GROUP));
        assert!(api_version_in_group("cluster.x-k8s.io/v1beta2", CLUSTER_GROUP));
        assert!(!api_version_in_group(
            "ipam.cluster.x-k8s.io/v1beta2",
            CLUSTER_GROUP
        ));
        assert!(!api_version_in_group("v1", CLUSTER_GROUP));
    }

    #[test]
    fn generated_crds_have_expected_names_and_versions() {
        let c = cluster_crd().unwrap();
        assert_eq!(c.metadata.name.as_deref(), Some("clusters.cluster.x-k8s.io"));
        let mut versions: Vec<_> = c
            .spec
            .versions
            .iter()
            .map(|v| (v.name.as_str(), v.storage))
            .collect();
        versions.sort();
        assert_eq!(versions, vec![("v1beta1", false), ("v1beta2", true)]);
        let m = machine_crd().unwrap();
        assert_eq!(m.metadata.name.as_deref(), Some("machines.cluster.x-k8s.io"));
        for v in &m.spec.versions {
            assert!(v.served);
            assert_eq!(v.storage, v.name == "v1beta2");
            assert!(v.subresources.as_ref().is_some_and(|s| s.status.is_some()));
        }
        let p = in_cluster_ip_pool_crd();
        assert_eq!(
            p.metadata.name.as_deref(),
            Some("inclusterippools.ipam.cluster.x-k8s.io")
        );
    }
}
