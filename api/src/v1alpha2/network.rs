//! Network configuration of a v1alpha2 `ProxmoxMachine`: NICs, routes, routing policies and VRFs.

use k8s_openapi::api::core::v1::TypedLocalObjectReference;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Network devices and VRFs of a VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// The VM's NICs, keyed by slot name (`net0`, `net1`, ...).
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub network_devices: Vec<NetworkDevice>,

    /// Virtual routing and forwarding devices in the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["name"]))]
    pub vrfs: Option<Vec<VrfDevice>>,

    /// Zone whose default IP pools are used (`default` when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = super::schema::ZONE_PATTERN))]
    pub zone: Option<String>,
}

/// One NIC of the VM.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkDevice {
    /// Proxmox bridge the NIC is attached to, e.g. `vmbr0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub bridge: Option<String>,

    /// Attach the cluster's default IPv4 pool to this NIC (its gateway becomes the default route).
    #[serde(rename = "defaultIPv4", default, skip_serializing_if = "Option::is_none")]
    pub default_ipv4: Option<bool>,

    /// Attach the cluster's default IPv6 pool to this NIC.
    #[serde(rename = "defaultIPv6", default, skip_serializing_if = "Option::is_none")]
    pub default_ipv6: Option<bool>,

    /// Name servers for this NIC, overriding the cluster's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "set"))]
    pub dns_servers: Option<Vec<String>>,

    /// Additional IPAM pools, one address per pool.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::ip_pool_refs")]
    pub ip_pool_ref: Option<Vec<TypedLocalObjectReference>>,

    /// How the guest gets this NIC's IPv4 address: `static` (the default: from the IPAM pools)
    /// or `dhcp` (no claim for the default IPv4 pool; the address is read from the QEMU guest
    /// agent). capmox-rs addition (capmox #29).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv4: Option<Ipv4Mode>,

    /// How the guest gets this NIC's IPv6 address: `static` (the default: from the IPAM pools),
    /// `dhcp` (DHCPv6) or `slaac` (router advertisements); with `dhcp` or `slaac` the default
    /// IPv6 pool is not claimed. capmox-rs addition (capmox #29).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ipv6: Option<Ipv6Mode>,

    /// MTU configured inside the guest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == 1 || (self >= 576 && self <= 65520)", "message": "invalid MTU value"}
    ]))]
    pub link_mtu: Option<i32>,

    /// Emulated NIC model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "virtio"))]
    pub model: Option<NetworkModel>,

    /// MTU of the Proxmox NIC (`1` inherits the bridge's MTU).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-validations" = [
        {"rule": "self == 1 || (self >= 576 && self <= 65520)", "message": "invalid MTU value"}
    ]))]
    pub mtu: Option<i32>,

    /// Proxmox NIC slot, `net0`, `net1`, ...
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 4), regex(pattern = super::schema::NET_NAME_PATTERN), extend("default" = "net0"))]
    pub name: Option<String>,

    /// Number of multiqueue queues.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub queues: Option<i32>,

    /// Static routes via this NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routes: Option<Vec<RouteSpec>>,

    /// Policy routing rules for this NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routing_policy: Option<Vec<RoutingPolicySpec>>,

    /// VLAN tag of the NIC.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 4094))]
    pub vlan: Option<i32>,
}

/// IPv4 addressing of a NIC.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Ipv4Mode {
    /// Addresses from the IPAM pools (capmox's behaviour).
    #[default]
    Static,
    /// DHCPv4 in the guest.
    Dhcp,
}

/// IPv6 addressing of a NIC.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Ipv6Mode {
    /// Addresses from the IPAM pools (capmox's behaviour).
    #[default]
    Static,
    /// DHCPv6 in the guest.
    Dhcp,
    /// Stateless autoconfiguration from router advertisements.
    Slaac,
}

/// Emulated NIC model.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum NetworkModel {
    /// Intel E1000.
    E1000,
    /// VirtIO (paravirtualised, the default).
    #[default]
    Virtio,
    /// Realtek RTL8139.
    Rtl8139,
    /// VMware vmxnet3.
    Vmxnet3,
}

/// A static route.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RouteSpec {
    /// Whether this is an IPv6 route (needed for the `default`/`all` placeholders).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is6: Option<bool>,

    /// Route metric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0))]
    pub metric: Option<i32>,

    /// Routing table the route is put in.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<i32>,

    /// Destination: a CIDR, an IP or `default`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,

    /// Next hop.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// A policy routing rule.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RoutingPolicySpec {
    /// Source prefix the rule matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,

    /// Whether this is an IPv6 rule.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is6: Option<bool>,

    /// Rule priority; must not collide with the kernel's own rules.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        range(max = 4_294_967_295_i64),
        extend("x-kubernetes-validations" = [
            {"rule": "(self > 0 && self < 32765) || (self > 32766)", "message": "Cowardly refusing to insert FIB rule matching kernel rules"}
        ])
    )]
    pub priority: Option<i64>,

    /// Routing table to look up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub table: Option<i32>,

    /// Destination prefix the rule matches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

/// A VRF device in the guest.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct VrfDevice {
    /// NICs enslaved to the VRF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        inner(length(min = 4), regex(pattern = super::schema::NET_NAME_PATTERN)),
        extend("x-kubernetes-list-type" = "atomic")
    )]
    pub interfaces: Option<Vec<String>>,

    /// Name of the VRF device.
    #[schemars(length(min = 3))]
    pub name: String,

    /// Static routes in the VRF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routes: Option<Vec<RouteSpec>>,

    /// Policy routing rules of the VRF.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("x-kubernetes-list-type" = "atomic"))]
    pub routing_policy: Option<Vec<RoutingPolicySpec>>,

    /// Routing table of the VRF.
    #[schemars(
        range(min = 1, max = 4_294_967_295_i64),
        extend("x-kubernetes-validations" = [
            {"rule": "(self > 0 && self < 254) || (self > 255)", "message": "Cowardly refusing to insert l3mdev rules into kernel tables"}
        ])
    )]
    pub table: i32,
}
