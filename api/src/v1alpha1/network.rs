//! v1alpha1 machine network configuration.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::TypedLocalObjectReference;
use super::schema::opt_int_no_format;

/// Network configuration of a v1alpha1 machine: one default NIC, optional extra
/// NICs and optional VRF devices.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// The first NIC (`net0`) of the machine, which carries the default route.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub default: Option<NetworkDevice>,
    /// Further NICs (`net1`, `net2`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub additional_devices: Option<Vec<AdditionalNetworkDevice>>,
    /// Linux VRF devices configured inside the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub vrfs: Option<Vec<VrfDevice>>,
}

/// NIC models supported by Proxmox.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema)]
pub enum NetworkModel {
    /// Intel E1000.
    #[serde(rename = "e1000")]
    E1000,
    /// Paravirtualized virtio NIC.
    #[serde(rename = "virtio")]
    Virtio,
    /// Realtek RTL8139.
    #[serde(rename = "rtl8139")]
    Rtl8139,
    /// VMware vmxnet3.
    #[serde(rename = "vmxnet3")]
    Vmxnet3,
}

/// A virtual NIC of the machine (the default NIC has no name: it is `net0`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkDevice {
    /// Proxmox bridge the NIC is attached to, e.g. `vmbr0`.
    #[schemars(length(min = 1))]
    pub bridge: String,
    /// NIC model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "virtio"))]
    pub model: Option<NetworkModel>,
    /// MTU of the Proxmox NIC (`1` inherits the bridge MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_int_no_format")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == 1 || ( self >= 576 && self <= 65520)", "message": "invalid MTU value"}]))]
    pub mtu: Option<u16>,
    /// VLAN tag of the NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_int_no_format", range(min = 1, max = 4094))]
    pub vlan: Option<u16>,
    /// DNS servers for this NIC, overriding the cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub dns_servers: Option<Vec<String>>,
    /// IPAM pool the NIC's IPv4 address is claimed from.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "ipv4PoolRef")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.apiGroup == 'ipam.cluster.x-k8s.io'", "message": "ipv4PoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"},
        {"rule": "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'", "message": "ipv4PoolRef allows either InClusterIPPool or GlobalInClusterIPPool"}
    ]))]
    pub ipv4_pool_ref: Option<TypedLocalObjectReference>,
    /// IPAM pool the NIC's IPv6 address is claimed from.
    #[serde(default, skip_serializing_if = "Option::is_none", rename = "ipv6PoolRef")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self.apiGroup == 'ipam.cluster.x-k8s.io'", "message": "ipv6PoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"},
        {"rule": "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'", "message": "ipv6PoolRef allows either InClusterIPPool or GlobalInClusterIPPool"}
    ]))]
    pub ipv6_pool_ref: Option<TypedLocalObjectReference>,
}

/// An additional NIC (`net1` and up) with its own routing configuration.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [{"rule": "self.ipv4PoolRef != null || self.ipv6PoolRef != null", "message": "at least one pool reference must be set, either ipv4PoolRef or ipv6PoolRef"}]))]
pub struct AdditionalNetworkDevice {
    /// The NIC settings shared with the default NIC.
    #[serde(flatten)]
    pub device: NetworkDevice,
    /// Proxmox NIC slot, e.g. `net1`.
    #[schemars(length(min = 1))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self != 'net0'", "message": "additional network devices doesn't allow net0"}]))]
    pub name: String,
    /// Guest-side interface settings.
    #[serde(flatten)]
    pub interface: InterfaceConfig,
}

/// Guest-side settings of an additional NIC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InterfaceConfig {
    /// Static routes and policy routing for this interface.
    #[serde(flatten)]
    pub routing: Routing,
    /// MTU configured inside the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "opt_int_no_format")]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "self == 1 || ( self >= 576 && self <= 65520)", "message": "invalid MTU value"}]))]
    pub link_mtu: Option<u16>,
}

/// Routes and routing policy rules.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Routing {
    /// Static routes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub routes: Option<Vec<RouteSpec>>,
    /// Policy routing rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub routing_policy: Option<Vec<RoutingPolicySpec>>,
}

/// A static route.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    /// Destination subnet.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Gateway address.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
    /// Route metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub metric: Option<u32>,
    /// Routing table the route is added to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub table: Option<u32>,
}

/// A policy routing rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoutingPolicySpec {
    /// Destination subnet matched by the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
    /// Source subnet matched by the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// Routing table looked up by the rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>")]
    pub table: Option<u32>,
    /// Rule priority.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<i32>", range(max = 4294967295_u32))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "(self > 0 && self < 32765) || (self > 32766)", "message": "Cowardly refusing to insert FIB rule matching kernel rules"}]))]
    pub priority: Option<u32>,
}

/// A Linux VRF device inside the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VrfDevice {
    /// Guest interfaces enslaved to the VRF, e.g. `net1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interfaces: Option<Vec<String>>,
    /// Name of the VRF device.
    #[schemars(length(min = 3))]
    pub name: String,
    /// Routing table bound to the VRF.
    #[schemars(with = "i32", range(max = 4294967295_u32))]
    #[schemars(extend("x-kubernetes-validations" = [{"rule": "(self > 0 && self < 254) || (self > 255)", "message": "Cowardly refusing to insert l3mdev rules into kernel tables"}]))]
    pub table: u32,
    /// Routes and policy rules inside the VRF.
    #[serde(flatten)]
    pub routing: Routing,
}
