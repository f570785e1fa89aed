//! The in-cluster IPAM provider's `InClusterIPPool` (`ipam.cluster.x-k8s.io/v1alpha2`).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// API version of [`InClusterIPPool`].
pub const IN_CLUSTER_IP_POOL_API_VERSION: &str = "ipam.cluster.x-k8s.io/v1alpha2";
/// Kind of [`InClusterIPPool`].
pub const IN_CLUSTER_IP_POOL_KIND: &str = "InClusterIPPool";

/// A namespaced pool of IP addresses handed out by the in-cluster IPAM provider.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[kube(
    group = "ipam.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "InClusterIPPool",
    plural = "inclusterippools",
    namespaced,
    status = "InClusterIPPoolStatus",
    derive = "Default",
    derive = "PartialEq"
)]
#[serde(rename_all = "camelCase")]
pub struct InClusterIPPoolSpec {
    /// Addresses of the pool: single IPs, `first-last` ranges or CIDRs.
    pub addresses: Vec<String>,
    /// Network prefix length of the addresses.
    #[schemars(range(min = 0, max = 128))]
    pub prefix: i32,
    /// Gateway of the addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Also hand out the network, gateway and broadcast addresses.
    #[serde(
        rename = "allocateReservedIPAddresses",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    pub allocate_reserved_ip_addresses: Option<bool>,
    /// Addresses never handed out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub excluded_addresses: Option<Vec<String>>,
    /// Seconds a released address stays reserved before it is reused (IPAM provider v1.1+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address_reuse_grace_period_seconds: Option<i32>,
}

/// Address counters of a pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InClusterIPPoolStatus {
    /// Counters of the pool's addresses.
    #[serde(rename = "ipAddresses", default, skip_serializing_if = "Option::is_none")]
    pub ip_addresses: Option<IpAddressCounts>,
}

/// How many addresses a pool has, hands out and has left.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressCounts {
    /// Addresses in the pool.
    pub total: i64,
    /// Addresses still free.
    pub free: i64,
    /// Addresses handed out.
    pub used: i64,
    /// Handed-out addresses no longer inside the pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub out_of_range: Option<i64>,
}
