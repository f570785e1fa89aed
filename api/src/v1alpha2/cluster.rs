//! `ProxmoxCluster` (v1alpha2): the infrastructure of one workload cluster on Proxmox VE.

use k8s_openapi::api::core::v1::{LocalObjectReference, SecretReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{ApiEndpoint, InitializationStatus};

/// CEL rule on `ProxmoxCluster.spec` (not on the template) requiring an IP configuration —
/// unless the machines all use DHCP, which capmox-rs allows when the control-plane endpoint is
/// static (set, or managed by an external control plane such as Kamaji).
pub const RULE_CLUSTER_IP_CONFIG: &str = "has(self.ipv4Config) || has(self.ipv6Config) || (has(self.controlPlaneEndpoint) && has(self.controlPlaneEndpoint.host) && self.controlPlaneEndpoint.host != '') || (has(self.externalManagedControlPlane) && self.externalManagedControlPlane)";

/// Message of [`RULE_CLUSTER_IP_CONFIG`]: capmox's, plus what a DHCP-only cluster needs.
pub const RULE_CLUSTER_IP_CONFIG_MESSAGE: &str = "at least one ip config must be set, either ipv4Config or ipv6Config (a cluster whose machines all use DHCP needs no IP pool, but a static controlPlaneEndpoint)";

/// Desired state of a `ProxmoxCluster`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "ProxmoxCluster",
    doc = "ProxmoxCluster is the infrastructure of one workload cluster on Proxmox VE (v1alpha2).",
    plural = "proxmoxclusters",
    singular = "proxmoxcluster",
    namespaced,
    status = "ProxmoxClusterStatus",
    category = "cluster-api",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Cluster","type":"string","description":"Cluster","jsonPath":".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"}"#,
    printcolumn = r#"{"name":"Ready","type":"string","description":"Cluster infrastructure is ready","jsonPath":".status.initialization.provisioned"}"#,
    printcolumn = r#"{"name":"Endpoint","type":"string","description":"API Endpoint","jsonPath":".spec.controlPlaneEndpoint"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": RULE_CLUSTER_IP_CONFIG, "message": RULE_CLUSTER_IP_CONFIG_MESSAGE}
]))]
pub struct ProxmoxClusterSpec {
    /// Proxmox nodes that may host this cluster's machines; empty means any node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub allowed_nodes: Option<Vec<String>>,

    /// Endpoint of the cluster's Kubernetes API server (usually a virtual IP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane_endpoint: Option<ApiEndpoint>,

    /// Secret holding Proxmox credentials for this cluster; the namespace defaults to the cluster's.
    /// Only used when the manager has no credentials of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::secret_reference")]
    pub credentials_ref: Option<SecretReference>,

    /// Name servers written into every machine's network configuration.
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Vec<String>,

    /// Lets an external control-plane provider set the control-plane endpoint later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub external_managed_control_plane: Option<bool>,

    /// Publishes every `zoneConfig` zone as a Cluster API failure domain in
    /// `status.failureDomains` (capmox-rs addition; capmox has no failure domains).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains_from_zones: Option<bool>,

    /// IPv4 addresses of the default zone for machine NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.addresses.size() > 0", "message": "IPv4Config addresses must be provided"}
    ]))]
    pub ipv4_config: Option<IpConfigSpec>,

    /// IPv6 addresses of the default zone for machine NICs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.addresses.size() > 0", "message": "IPv6Config addresses must be provided"}
    ]))]
    pub ipv6_config: Option<IpConfigSpec>,

    /// Hints for placing machines on Proxmox nodes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_hints: Option<SchedulerHints>,

    /// Additional zones with their own address pools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["zone"]))]
    pub zone_config: Option<Vec<ZoneConfigSpec>>,
}

/// A pool of node addresses of one IP family.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpConfigSpec {
    /// Addresses in the pool: single IPs, `first-last` ranges or CIDRs.
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub addresses: Vec<String>,

    /// Default gateway for addresses from this pool.
    #[schemars(length(min = 1))]
    pub gateway: String,

    /// Route metric of the default route via the gateway.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0), extend("default" = 100))]
    pub metric: Option<i32>,

    /// Network prefix length of the addresses.
    #[schemars(range(min = 1, max = 128))]
    pub prefix: i32,
}

/// Hints for the machine scheduler.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerHints {
    /// Percentage of a node's memory that may be handed out to VMs (100 when unset, 0 disables the check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub memory_adjustment: Option<i64>,
}

/// Address configuration of an additional zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZoneConfigSpec {
    /// Credentials Secret of the zone's own Proxmox cluster (same shape as the ProxmoxCluster's
    /// `credentialsRef`: `url`, `token`, `secret`, TLS settings). Machines of the zone are created,
    /// managed and deleted through it; unset: the ProxmoxCluster's credentials. capmox-rs addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::secret_reference")]
    pub credentials_ref: Option<SecretReference>,

    /// Name servers of the zone.
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Vec<String>,

    /// IPv4 addresses of the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.addresses.size() > 0", "message": "IPv4Config addresses must be provided"}
    ]))]
    pub ipv4_config: Option<IpConfigSpec>,

    /// IPv6 addresses of the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.addresses.size() > 0", "message": "IPv6Config addresses must be provided"}
    ]))]
    pub ipv6_config: Option<IpConfigSpec>,

    /// Proxmox nodes of the zone. A machine whose CAPI `Machine.spec.failureDomain` names this
    /// zone (with `failureDomainsFromZones`) is placed on one of them. capmox-rs addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(inner(length(min = 1)), extend("x-kubernetes-list-type" = "set"))]
    pub nodes: Option<Vec<String>>,

    /// Name of the zone.
    #[schemars(regex(pattern = super::schema::ZONE_PATTERN))]
    pub zone: String,
}

/// Observed state of a `ProxmoxCluster`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterStatus {
    /// Conditions of the cluster (`Ready`, `ProxmoxAvailable`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// In-cluster IP pools created for this cluster.
    #[serde(
        rename = "inClusterIPPoolRef",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "super::schema::local_object_reference_list")]
    pub in_cluster_ip_pool_ref: Option<Vec<LocalObjectReference>>,

    /// Default IP pools per zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["zone"]))]
    pub in_cluster_zone_ref: Option<Vec<InClusterZoneRef>>,

    /// Failure domains offered to Cluster API (one per zone when
    /// `spec.failureDomainsFromZones` is set; capmox-rs addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        length(min = 1, max = 100),
        extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"])
    )]
    pub failure_domains: Option<Vec<FailureDomain>>,

    /// Initialization state for Cluster API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<InitializationStatus>,

    /// Capacity and usage of the Proxmox nodes the cluster may use, refreshed periodically
    /// (capmox-rs addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["node"]))]
    pub node_inventory: Option<Vec<NodeInventory>>,

    /// Which Proxmox node each machine of the cluster was placed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_locations: Option<NodeLocations>,
}

/// A Cluster API failure domain (v1beta2 list shape).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomain {
    /// Name of the failure domain (the zone).
    #[schemars(length(min = 1, max = 256))]
    pub name: String,
    /// Whether control-plane machines may be placed in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Free-form attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<std::collections::BTreeMap<String, String>>,
}

/// Capacity and usage of one Proxmox node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeInventory {
    /// Node name.
    #[schemars(length(min = 1))]
    pub node: String,
    /// Whether the node is online.
    pub online: bool,
    /// Logical CPUs of the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<i64>,
    /// Total memory in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_total_bytes: Option<i64>,
    /// Used memory in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory_used_bytes: Option<i64>,
    /// Virtual machines on the node (templates excluded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_count: Option<i64>,
}

/// The default IP pools of one zone.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InClusterZoneRef {
    /// The IPv4 pool of the zone.
    #[serde(
        rename = "inClusterIPPoolRefV4",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "super::schema::local_object_reference")]
    pub in_cluster_ip_pool_ref_v4: Option<LocalObjectReference>,

    /// The IPv6 pool of the zone.
    #[serde(
        rename = "inClusterIPPoolRefV6",
        default,
        skip_serializing_if = "Option::is_none"
    )]
    #[schemars(schema_with = "super::schema::local_object_reference")]
    pub in_cluster_ip_pool_ref_v6: Option<LocalObjectReference>,

    /// Name of the zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        regex(pattern = super::schema::ZONE_PATTERN),
        extend("default" = "default")
    )]
    pub zone: Option<String>,
}

/// Placement of the cluster's machines, split by role.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeLocations {
    /// Placement of control-plane machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub control_plane: Option<Vec<NodeLocation>>,

    /// Placement of worker machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub workers: Option<Vec<NodeLocation>>,
}

/// The Proxmox node one machine lives on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeLocation {
    /// The `ProxmoxMachine`.
    #[schemars(schema_with = "super::schema::local_object_reference")]
    pub machine: LocalObjectReference,

    /// The Proxmox node.
    #[schemars(length(min = 1))]
    pub node: String,

    /// Zone of the machine.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = super::schema::ZONE_PATTERN))]
    pub zone: Option<String>,
}
