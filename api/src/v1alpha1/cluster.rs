//! v1alpha1 ProxmoxCluster.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::schema::int_no_format;
use super::{ApiEndpoint, Condition, LocalObjectReference, ProxmoxMachineSpec, SecretReference};

/// Desired state of a v1alpha1 ProxmoxCluster.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ProxmoxCluster",
    plural = "proxmoxclusters",
    singular = "proxmoxcluster",
    namespaced,
    served = true,
    storage = false,
    status = "ProxmoxClusterStatus",
    category = "cluster-api",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name": "Cluster", "type": "string", "description": "Cluster", "jsonPath": ".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']"}"#,
    printcolumn = r#"{"name": "Ready", "type": "string", "description": "Cluster infrastructure is ready", "jsonPath": ".status.ready"}"#,
    printcolumn = r#"{"name": "Endpoint", "type": "string", "description": "API Endpoint", "jsonPath": ".spec.controlPlaneEndpoint"}"#
)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": crate::v1alpha2::RULE_CLUSTER_IP_CONFIG, "message": crate::v1alpha2::RULE_CLUSTER_IP_CONFIG_MESSAGE}
]))]
#[schemars(transform = super::schema::finalize)]
pub struct ProxmoxClusterSpec {
    /// Endpoint of the workload cluster's API server (usually a virtual IP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.port > 0 && self.port < 65536", "message": "port must be within 1-65535"}]))]
    pub control_plane_endpoint: Option<ApiEndpoint>,
    /// Lets an external control plane provider fill in the endpoint later.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_managed_control_plane: Option<bool>,
    /// Proxmox nodes that VMs of this cluster may be placed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub allowed_nodes: Option<Vec<String>>,
    /// Hints for the VM scheduler.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduler_hints: Option<SchedulerHints>,
    /// IPv4 node address pool of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.addresses.size() > 0", "message": "IPv4Config addresses must be provided"}]))]
    pub ipv4_config: Option<IpConfigSpec>,
    /// IPv6 node address pool of the cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self.addresses.size() > 0", "message": "IPv6Config addresses must be provided"}]))]
    pub ipv6_config: Option<IpConfigSpec>,
    /// DNS servers configured on every machine.
    #[schemars(length(min = 1))]
    pub dns_servers: Vec<String>,
    /// Deprecated machine templates kept for compatibility; unused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clone_spec: Option<ProxmoxClusterCloneSpec>,
    /// Secret with the Proxmox credentials of this cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<SecretReference>,
}

/// Hints for the VM scheduler.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SchedulerHints {
    /// Percentage of a node's memory usable for VMs (0 disables the check).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i64>")]
    pub memory_adjustment: Option<u64>,
}

/// An IP address pool.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::schema::ip_config_required)]
pub struct IpConfigSpec {
    /// Addresses, ranges (`a-b`) or CIDRs of the pool.
    pub addresses: Vec<String>,
    /// Prefix length of the network.
    #[schemars(schema_with = "int_no_format", range(max = 128))]
    pub prefix: i64,
    /// Default gateway of the network.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gateway: Option<String>,
    /// Metric of the default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>", extend("default" = 100))]
    pub metric: Option<u32>,
}

/// Deprecated per-cluster machine templates.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterCloneSpec {
    /// Machine specs keyed by machine type.
    #[schemars(transform = super::schema::embedded_machine_spec_map)]
    pub machine_spec: BTreeMap<String, ProxmoxMachineSpec>,
    /// SSH keys for the machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ssh_authorized_keys: Option<Vec<String>>,
    /// Guest interface the control plane virtual IP is bound to.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "virtualIPNetworkInterface"
    )]
    pub virtual_ip_network_interface: Option<String>,
}

/// Observed state of a v1alpha1 ProxmoxCluster.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(transform = super::schema::finalize)]
pub struct ProxmoxClusterStatus {
    /// Whether the cluster infrastructure is ready.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = false))]
    pub ready: Option<bool>,
    /// InClusterIPPools created for the cluster.
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        rename = "inClusterIpPoolRef"
    )]
    pub in_cluster_ip_pool_ref: Option<Vec<LocalObjectReference>>,
    /// Which Proxmox node each machine of the cluster was placed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_locations: Option<NodeLocations>,
    /// Terminal error reason reported to Cluster API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_reason: Option<String>,
    /// Terminal error message reported to Cluster API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_message: Option<String>,
    /// Current service state as CAPI v1beta1 conditions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub conditions: Option<Vec<Condition>>,
    /// Failure domains offered to Cluster API, keyed by name (CAPI v1beta1 map shape;
    /// capmox-rs addition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure_domains: Option<BTreeMap<String, FailureDomainSpec>>,
}

/// A Cluster API v1beta1 failure domain.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FailureDomainSpec {
    /// Whether control-plane machines may be placed in it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<bool>,
    /// Free-form attributes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attributes: Option<BTreeMap<String, String>>,
}

/// Placement of the cluster's machines.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeLocations {
    /// Control plane machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub control_plane: Option<Vec<NodeLocation>>,
    /// Worker machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<Vec<NodeLocation>>,
}

/// The Proxmox node one machine was placed on.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NodeLocation {
    /// The ProxmoxMachine.
    pub machine: LocalObjectReference,
    /// The Proxmox node.
    pub node: String,
}

super::schema::tolerant_serde!(ProxmoxClusterSpec);
