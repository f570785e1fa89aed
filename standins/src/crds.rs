//! The CRDs the stand-ins serve, built from `capmox-api`'s reduced Cluster API types (for test
//! control planes without the upstream CRDs).

use capmox_api::capi::ipam_claims::{v1beta1, v1beta2};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::crd::{MergeError, merge_crds};

/// `IPAddressClaim` and `IPAddress` (`ipam.cluster.x-k8s.io`, v1beta1 served, v1beta2 storage).
pub fn ipam_claims() -> Result<Vec<CustomResourceDefinition>, MergeError> {
    Ok(vec![
        merge_crds(
            vec![v1beta1::IPAddressClaim::crd(), v1beta2::IPAddressClaim::crd()],
            "v1beta2",
        )?,
        merge_crds(
            vec![v1beta1::IPAddress::crd(), v1beta2::IPAddress::crd()],
            "v1beta2",
        )?,
    ])
}

/// Everything the stand-ins watch: the CAPI `Cluster` and `Machine`, the `InClusterIPPool` and
/// the `IPAddressClaim`/`IPAddress` CRDs.
pub fn all() -> Result<Vec<CustomResourceDefinition>, MergeError> {
    let mut out = vec![
        capmox_api::capi::cluster_crd()?,
        capmox_api::capi::machine_crd()?,
        capmox_api::capi::in_cluster_ip_pool_crd(),
    ];
    out.extend(ipam_claims()?);
    Ok(out)
}
