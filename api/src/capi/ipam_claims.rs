//! The core Cluster API IPAM kinds `IPAddressClaim` and `IPAddress` (`ipam.cluster.x-k8s.io`), with only
//! the fields the machine controller reads or writes.
//!
//! CAPI ≥ 1.11 serves `v1beta2` (storage) and `v1beta1`; CAPI 1.10 serves `v1beta1` only. The fields we
//! use have the same JSON names in both versions; `v1beta1` merely allows `poolRef.apiGroup` to be absent
//! and types `prefix` as a plain integer. Both versions are defined so a controller can talk to either
//! generation; [`v1beta2`] is the one to prefer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Kind of the claim.
pub const IP_ADDRESS_CLAIM_KIND: &str = "IPAddressClaim";
/// Kind of the address.
pub const IP_ADDRESS_KIND: &str = "IPAddress";

/// Reference to the pool an address is claimed from (`spec.poolRef` of claims and addresses).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpPoolReference {
    /// API group of the pool (required in v1beta2, optional in v1beta1; empty when absent).
    #[serde(default)]
    pub api_group: String,
    /// Kind of the pool, e.g. `InClusterIPPool`.
    pub kind: String,
    /// Name of the pool.
    pub name: String,
}

/// Reference to an object by name (`status.addressRef`, `spec.claimRef`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NameReference {
    /// Name of the object, in the same namespace.
    #[serde(default)]
    pub name: String,
}

/// Observed state of a claim.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressClaimStatus {
    /// The IPAddress allocated for the claim, once the IPAM provider fulfilled it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_ref: Option<NameReference>,
}

/// `ipam.cluster.x-k8s.io/v1beta2` (CAPI ≥ 1.11, storage version).
pub mod v1beta2 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::{IpAddressClaimStatus, IpPoolReference, NameReference};

    /// API version of this module's kinds.
    pub const API_VERSION: &str = "ipam.cluster.x-k8s.io/v1beta2";

    /// Desired state of a claim: the pool to allocate one address from.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
    #[kube(
        group = "ipam.cluster.x-k8s.io",
        version = "v1beta2",
        kind = "IPAddressClaim",
        plural = "ipaddressclaims",
        namespaced,
        status = "IpAddressClaimStatus",
        derive = "Default",
        derive = "PartialEq"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct IPAddressClaimSpec {
        /// Name of the Cluster the claim belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster_name: Option<String>,
        /// The pool to allocate from.
        pub pool_ref: IpPoolReference,
    }

    /// An address allocated by an IPAM provider for one claim.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
    #[kube(
        group = "ipam.cluster.x-k8s.io",
        version = "v1beta2",
        kind = "IPAddress",
        plural = "ipaddresses",
        namespaced,
        derive = "Default",
        derive = "PartialEq"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct IPAddressSpec {
        /// The claim this address was allocated for.
        pub claim_ref: NameReference,
        /// The pool the address came from.
        pub pool_ref: IpPoolReference,
        /// The IP address.
        pub address: String,
        /// Prefix length of the network.
        pub prefix: i32,
        /// Gateway of the network, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub gateway: Option<String>,
    }
}

/// `ipam.cluster.x-k8s.io/v1beta1` (CAPI 1.10 storage version; still served by later releases).
pub mod v1beta1 {
    use kube::CustomResource;
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};

    use super::{IpAddressClaimStatus, IpPoolReference, NameReference};

    /// API version of this module's kinds.
    pub const API_VERSION: &str = "ipam.cluster.x-k8s.io/v1beta1";

    /// Desired state of a claim: the pool to allocate one address from.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
    #[kube(
        group = "ipam.cluster.x-k8s.io",
        version = "v1beta1",
        kind = "IPAddressClaim",
        plural = "ipaddressclaims",
        namespaced,
        status = "IpAddressClaimStatus",
        derive = "Default",
        derive = "PartialEq"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct IPAddressClaimSpec {
        /// Name of the Cluster the claim belongs to.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub cluster_name: Option<String>,
        /// The pool to allocate from.
        pub pool_ref: IpPoolReference,
    }

    /// An address allocated by an IPAM provider for one claim.
    #[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
    #[kube(
        group = "ipam.cluster.x-k8s.io",
        version = "v1beta1",
        kind = "IPAddress",
        plural = "ipaddresses",
        namespaced,
        derive = "Default",
        derive = "PartialEq"
    )]
    #[serde(rename_all = "camelCase")]
    pub struct IPAddressSpec {
        /// The claim this address was allocated for.
        pub claim_ref: NameReference,
        /// The pool the address came from.
        pub pool_ref: IpPoolReference,
        /// The IP address.
        pub address: String,
        /// Prefix length of the network.
        pub prefix: i64,
        /// Gateway of the network, if any.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub gateway: Option<String>,
    }
}

impl From<v1beta1::IPAddressClaim> for v1beta2::IPAddressClaim {
    fn from(c: v1beta1::IPAddressClaim) -> Self {
        Self {
            metadata: c.metadata,
            spec: v1beta2::IPAddressClaimSpec {
                cluster_name: c.spec.cluster_name,
                pool_ref: c.spec.pool_ref,
            },
            status: c.status,
        }
    }
}

impl From<v1beta2::IPAddressClaim> for v1beta1::IPAddressClaim {
    fn from(c: v1beta2::IPAddressClaim) -> Self {
        Self {
            metadata: c.metadata,
            spec: v1beta1::IPAddressClaimSpec {
                cluster_name: c.spec.cluster_name,
                pool_ref: c.spec.pool_ref,
            },
            status: c.status,
        }
    }
}

impl From<v1beta1::IPAddress> for v1beta2::IPAddress {
    fn from(a: v1beta1::IPAddress) -> Self {
        Self {
            metadata: a.metadata,
            spec: v1beta2::IPAddressSpec {
                claim_ref: a.spec.claim_ref,
                pool_ref: a.spec.pool_ref,
                address: a.spec.address,
                // Valid prefixes are 0..=128; a value beyond i32 becomes -1, which readers reject.
                prefix: i32::try_from(a.spec.prefix).unwrap_or(-1),
                gateway: a.spec.gateway,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::{CustomResourceExt, Resource};

    #[test]
    fn names_and_versions() {
        assert_eq!(v1beta2::IPAddressClaim::kind(&()), IP_ADDRESS_CLAIM_KIND);
        assert_eq!(v1beta2::IPAddress::kind(&()), IP_ADDRESS_KIND);
        assert_eq!(v1beta2::IPAddressClaim::api_version(&()), v1beta2::API_VERSION);
        assert_eq!(v1beta1::IPAddress::api_version(&()), v1beta1::API_VERSION);
        assert_eq!(
            v1beta2::IPAddressClaim::crd().metadata.name.as_deref(),
            Some("ipaddressclaims.ipam.cluster.x-k8s.io")
        );
        assert_eq!(
            v1beta1::IPAddress::crd().metadata.name.as_deref(),
            Some("ipaddresses.ipam.cluster.x-k8s.io")
        );
    }

    #[test]
    fn reads_upstream_shapes() {
        let claim: v1beta2::IPAddressClaim = serde_json::from_value(serde_json::json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta2",
            "kind": "IPAddressClaim",
            "metadata": {"name": "m1-net0-00-inet", "namespace": "ns"},
            "spec": {"clusterName": "c1", "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
            "status": {"addressRef": {"name": "m1-net0-00-inet"}, "conditions": [{"type": "Ready"}]}
        }))
        .unwrap();
        assert_eq!(claim.spec.pool_ref.kind, "InClusterIPPool");
        assert_eq!(claim.status.unwrap().address_ref.unwrap().name, "m1-net0-00-inet");

        let old: v1beta1::IPAddress = serde_json::from_value(serde_json::json!({
            "apiVersion": "ipam.cluster.x-k8s.io/v1beta1",
            "kind": "IPAddress",
            "metadata": {"name": "a"},
            "spec": {"claimRef": {"name": "a"}, "poolRef": {"kind": "InClusterIPPool", "name": "p"},
                     "address": "10.0.0.5", "prefix": 24, "gateway": "10.0.0.1"}
        }))
        .unwrap();
        let new: v1beta2::IPAddress = old.into();
        assert_eq!(new.spec.pool_ref.api_group, "");
        assert_eq!(new.spec.prefix, 24);
        assert_eq!(new.spec.gateway.as_deref(), Some("10.0.0.1"));
    }

    #[test]
    fn claim_round_trips_between_versions() {
        let c = v1beta2::IPAddressClaim::new(
            "x",
            v1beta2::IPAddressClaimSpec {
                cluster_name: Some("c".into()),
                pool_ref: IpPoolReference {
                    api_group: "ipam.cluster.x-k8s.io".into(),
                    kind: "InClusterIPPool".into(),
                    name: "p".into(),
                },
            },
        );
        let old: v1beta1::IPAddressClaim = c.clone().into();
        let back: v1beta2::IPAddressClaim = old.into();
        assert_eq!(back, c);
    }
}
