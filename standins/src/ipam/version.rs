//! The two generations of `IPAddressClaim`/`IPAddress` the stand-in serves: `v1beta2` (CAPI ≥ 1.11)
//! and `v1beta1` (CAPI 1.10, whose CRDs serve nothing newer). The stand-in works on the `v1beta2`
//! shapes; [`IpamVersion`] reads and writes the served version's objects through them.

use std::fmt::Debug;

use capmox_api::capi::IPAM_GROUP;
use capmox_api::capi::ipam_claims::{v1beta1, v1beta2};
use k8s_openapi::NamespaceResourceScope;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;

/// One served version of the claim and address kinds.
pub(crate) trait IpamVersion: Send + Sync + 'static {
    /// The claim kind of this version.
    type Claim: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static;
    /// The address kind of this version.
    type Address: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Serialize
        + Send
        + Sync
        + 'static;
    /// The claim as `v1beta2`.
    fn claim(c: &Self::Claim) -> v1beta2::IPAddressClaim;
    /// The address as `v1beta2`.
    fn address(a: &Self::Address) -> v1beta2::IPAddress;
    /// A `v1beta2` address in this version.
    fn to_address(a: v1beta2::IPAddress) -> Self::Address;
}

/// `ipam.cluster.x-k8s.io/v1beta2`.
pub(crate) struct V1beta2;

impl IpamVersion for V1beta2 {
    type Claim = v1beta2::IPAddressClaim;
    type Address = v1beta2::IPAddress;
    fn claim(c: &Self::Claim) -> v1beta2::IPAddressClaim {
        c.clone()
    }
    fn address(a: &Self::Address) -> v1beta2::IPAddress {
        a.clone()
    }
    fn to_address(a: v1beta2::IPAddress) -> Self::Address {
        a
    }
}

/// `ipam.cluster.x-k8s.io/v1beta1`.
pub(crate) struct V1beta1;

impl IpamVersion for V1beta1 {
    type Claim = v1beta1::IPAddressClaim;
    type Address = v1beta1::IPAddress;
    fn claim(c: &Self::Claim) -> v1beta2::IPAddressClaim {
        c.clone().into()
    }
    fn address(a: &Self::Address) -> v1beta2::IPAddress {
        a.clone().into()
    }
    fn to_address(a: v1beta2::IPAddress) -> Self::Address {
        v1beta1::IPAddress {
            metadata: a.metadata,
            spec: v1beta1::IPAddressSpec {
                claim_ref: a.spec.claim_ref,
                pool_ref: a.spec.pool_ref,
                address: a.spec.address,
                prefix: i64::from(a.spec.prefix),
                gateway: a.spec.gateway,
            },
        }
    }
}

/// Whether the API server serves `ipam.cluster.x-k8s.io/v1beta2`; `false` when it serves only
/// `v1beta1` (CAPI 1.10's CRDs). Discovery errors count as `v1beta2`.
pub(crate) async fn serves_v1beta2(client: &kube::Client) -> bool {
    match client.list_api_groups().await {
        Ok(groups) => {
            let versions: Vec<&str> = groups
                .groups
                .iter()
                .filter(|g| g.name == IPAM_GROUP)
                .flat_map(|g| g.versions.iter().map(|v| v.version.as_str()))
                .collect();
            versions.contains(&"v1beta2") || !versions.contains(&"v1beta1")
        }
        Err(e) => {
            tracing::warn!(error = %e, "API discovery failed; serving ipam.cluster.x-k8s.io/v1beta2 claims");
            true
        }
    }
}
