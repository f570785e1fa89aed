//! Machine network conversion.
//!
//! Up: v1alpha1 `default` becomes the `net0` device (with `defaultIPv4`/`defaultIPv6`),
//! `additionalDevices` follow in order, and each device's `ipv4PoolRef`/`ipv6PoolRef` become its
//! `ipPoolRef` list (v4 first). A machine without `network` gets [`dummy_network`].
//!
//! Down: `net0` (or an unnamed device) becomes `default`, the others `additionalDevices`; the
//! `ipPoolRef` list is split by pool name with [`split_pool_refs`]. The dummy network becomes no
//! network. Hub-only data (`zone`, `queues`, `defaultIPv4/6`, `ipv4`/`ipv6` modes, `is6`, extra pools) is kept by the
//! conversion-data annotation.

use k8s_openapi::api::core::v1::TypedLocalObjectReference;

use super::common::{i32_to_u16, i32_to_u32, typed_ref_down, typed_ref_up, u32_to_i32};
use crate::{v1alpha1, v1alpha2};

/// Name of the first (default) NIC.
pub const NET0: &str = "net0";
/// Bridge of the dummy NIC injected for v1alpha1 machines without network.
pub const DUMMY_BRIDGE: &str = "vmbr0";

/// The network a v1alpha1 machine without `network` gets in v1alpha2.
pub fn dummy_network() -> v1alpha2::NetworkSpec {
    v1alpha2::NetworkSpec {
        network_devices: vec![v1alpha2::NetworkDevice {
            name: Some(NET0.into()),
            bridge: Some(DUMMY_BRIDGE.into()),
            default_ipv4: Some(true),
            default_ipv6: Some(true),
            ..Default::default()
        }],
        ..Default::default()
    }
}

/// Splits a NIC's `ipPoolRef` list into the v1alpha1 IPv4 and IPv6 pool references: the first
/// pool whose name contains `inet6` is the IPv6 pool, the first whose name contains `inet` (but
/// not `inet6`) the IPv4 pool; when neither matches, the first pool is the IPv4 pool.
///
/// capmox takes the first name containing `inet` as the IPv4 pool even when it is an `inet6`
/// pool, so an IPv6-only NIC shows its pool twice; excluding `inet6` names avoids that and keeps
/// every other case identical.
pub fn split_pool_refs(
    refs: &[TypedLocalObjectReference],
) -> (
    Option<&TypedLocalObjectReference>,
    Option<&TypedLocalObjectReference>,
) {
    let v6 = refs.iter().find(|r| r.name.contains("inet6"));
    let v4 = refs
        .iter()
        .find(|r| r.name.contains("inet") && !r.name.contains("inet6"));
    match (v4, v6) {
        (None, None) => (refs.first(), None),
        pair => pair,
    }
}

/// v1alpha1 machine network → v1alpha2.
pub fn network_up(network: &Option<v1alpha1::NetworkSpec>) -> v1alpha2::NetworkSpec {
    let Some(network) = network else {
        return dummy_network();
    };
    let mut devices = Vec::new();
    if let Some(default) = &network.default {
        let mut device = device_up(default);
        device.name = Some(NET0.into());
        device.default_ipv4 = Some(true);
        device.default_ipv6 = Some(true);
        devices.push(device);
    }
    for extra in network.additional_devices.iter().flatten() {
        let mut device = device_up(&extra.device);
        device.name = Some(extra.name.clone());
        device.routes = routes_up(&extra.interface.routing.routes);
        device.routing_policy = policies_up(&extra.interface.routing.routing_policy);
        device.link_mtu = extra.interface.link_mtu.map(i32::from);
        devices.push(device);
    }
    v1alpha2::NetworkSpec {
        network_devices: devices,
        vrfs: network.vrfs.as_ref().map(|v| v.iter().map(vrf_up).collect()),
        zone: None,
    }
}

fn device_up(d: &v1alpha1::NetworkDevice) -> v1alpha2::NetworkDevice {
    let pools: Vec<_> = d
        .ipv4_pool_ref
        .iter()
        .chain(d.ipv6_pool_ref.iter())
        .map(typed_ref_up)
        .collect();
    v1alpha2::NetworkDevice {
        bridge: Some(d.bridge.clone()),
        model: d.model.map(model_up),
        mtu: d.mtu.map(i32::from),
        vlan: d.vlan.map(i32::from),
        dns_servers: d.dns_servers.clone(),
        ip_pool_ref: (!pools.is_empty()).then_some(pools),
        ..Default::default()
    }
}

fn model_up(m: v1alpha1::NetworkModel) -> v1alpha2::NetworkModel {
    use v1alpha1::NetworkModel as S;
    use v1alpha2::NetworkModel as H;
    match m {
        S::E1000 => H::E1000,
        S::Virtio => H::Virtio,
        S::Rtl8139 => H::Rtl8139,
        S::Vmxnet3 => H::Vmxnet3,
    }
}

fn model_down(m: v1alpha2::NetworkModel) -> v1alpha1::NetworkModel {
    use v1alpha1::NetworkModel as S;
    use v1alpha2::NetworkModel as H;
    match m {
        H::E1000 => S::E1000,
        H::Virtio => S::Virtio,
        H::Rtl8139 => S::Rtl8139,
        H::Vmxnet3 => S::Vmxnet3,
    }
}

/// A v1alpha1 unsigned value where `0` means unset → optional signed value.
fn nonzero_up(v: Option<u32>) -> Option<i32> {
    v.filter(|v| *v != 0).map(u32_to_i32)
}

fn routes_up(routes: &Option<Vec<v1alpha1::RouteSpec>>) -> Option<Vec<v1alpha2::RouteSpec>> {
    routes.as_ref().map(|list| {
        list.iter()
            .map(|r| v1alpha2::RouteSpec {
                to: r.to.clone(),
                via: r.via.clone(),
                metric: nonzero_up(r.metric),
                table: nonzero_up(r.table),
                is6: None,
            })
            .collect()
    })
}

fn routes_down(routes: &Option<Vec<v1alpha2::RouteSpec>>) -> Option<Vec<v1alpha1::RouteSpec>> {
    routes.as_ref().map(|list| {
        list.iter()
            .map(|r| v1alpha1::RouteSpec {
                to: r.to.clone(),
                via: r.via.clone(),
                metric: r.metric.map(i32_to_u32),
                table: r.table.map(i32_to_u32),
            })
            .collect()
    })
}

fn policies_up(p: &Option<Vec<v1alpha1::RoutingPolicySpec>>) -> Option<Vec<v1alpha2::RoutingPolicySpec>> {
    p.as_ref().map(|list| {
        list.iter()
            .map(|r| v1alpha2::RoutingPolicySpec {
                to: r.to.clone(),
                from: r.from.clone(),
                table: nonzero_up(r.table),
                priority: r.priority.filter(|v| *v != 0).map(i64::from),
                is6: None,
            })
            .collect()
    })
}

fn policies_down(p: &Option<Vec<v1alpha2::RoutingPolicySpec>>) -> Option<Vec<v1alpha1::RoutingPolicySpec>> {
    p.as_ref().map(|list| {
        list.iter()
            .map(|r| v1alpha1::RoutingPolicySpec {
                to: r.to.clone(),
                from: r.from.clone(),
                table: r.table.map(i32_to_u32),
                priority: r.priority.map(|v| v as u32),
            })
            .collect()
    })
}

fn vrf_up(v: &v1alpha1::VrfDevice) -> v1alpha2::VrfDevice {
    v1alpha2::VrfDevice {
        interfaces: v.interfaces.clone(),
        name: v.name.clone(),
        table: u32_to_i32(v.table),
        routes: routes_up(&v.routing.routes),
        routing_policy: policies_up(&v.routing.routing_policy),
    }
}

fn vrf_down(v: &v1alpha2::VrfDevice) -> v1alpha1::VrfDevice {
    v1alpha1::VrfDevice {
        interfaces: v.interfaces.clone(),
        name: v.name.clone(),
        table: i32_to_u32(v.table),
        routing: v1alpha1::Routing {
            routes: routes_down(&v.routes),
            routing_policy: policies_down(&v.routing_policy),
        },
    }
}

/// v1alpha2 machine network → v1alpha1.
pub fn network_down(network: &v1alpha2::NetworkSpec) -> Option<v1alpha1::NetworkSpec> {
    if *network == dummy_network() {
        return None;
    }
    let mut default = None;
    let mut additional = Vec::new();
    for d in &network.network_devices {
        let name = d.name.as_deref().unwrap_or(NET0);
        let device = device_down(d);
        if name == NET0 && default.is_none() {
            default = Some(device);
        } else {
            additional.push(v1alpha1::AdditionalNetworkDevice {
                device,
                name: name.to_string(),
                interface: v1alpha1::InterfaceConfig {
                    routing: v1alpha1::Routing {
                        routes: routes_down(&d.routes),
                        routing_policy: policies_down(&d.routing_policy),
                    },
                    link_mtu: d.link_mtu.map(i32_to_u16),
                },
            });
        }
    }
    Some(v1alpha1::NetworkSpec {
        default,
        additional_devices: (!additional.is_empty()).then_some(additional),
        vrfs: network.vrfs.as_ref().map(|v| v.iter().map(vrf_down).collect()),
    })
}

fn device_down(d: &v1alpha2::NetworkDevice) -> v1alpha1::NetworkDevice {
    let refs = d.ip_pool_ref.as_deref().unwrap_or_default();
    let (v4, v6) = split_pool_refs(refs);
    v1alpha1::NetworkDevice {
        bridge: d.bridge.clone().unwrap_or_default(),
        model: d.model.map(model_down),
        mtu: d.mtu.map(i32_to_u16),
        vlan: d.vlan.map(i32_to_u16),
        dns_servers: d.dns_servers.clone(),
        ipv4_pool_ref: v4.map(typed_ref_down),
        ipv6_pool_ref: v6.map(typed_ref_down),
    }
}

/// Restores hub-only network data from `restored` into `hub` (capmox restores the same fields):
/// `zone`, and per device (matched by name) `queues`, `defaultIPv4`/`defaultIPv6`, the addressing
/// modes `ipv4`/`ipv6` (capmox-rs: DHCP) and the `is6`
/// flags of routes and policies, and the `is6` flags of VRF routes and policies (matched by VRF
/// name), where the lists line up.
pub fn restore_network(hub: &mut v1alpha2::NetworkSpec, restored: &v1alpha2::NetworkSpec) {
    if hub.zone.is_none() {
        hub.zone = restored.zone.clone();
    }
    for device in &mut hub.network_devices {
        let Some(old) = restored.network_devices.iter().find(|o| o.name == device.name) else {
            continue;
        };
        device.queues = device.queues.or(old.queues);
        device.default_ipv4 = old.default_ipv4;
        device.default_ipv6 = old.default_ipv6;
        device.ipv4 = device.ipv4.or(old.ipv4);
        device.ipv6 = device.ipv6.or(old.ipv6);
        restore_is6(
            &mut device.routes,
            &old.routes,
            &mut device.routing_policy,
            &old.routing_policy,
        );
    }
    for vrf in hub.vrfs.iter_mut().flatten() {
        if let Some(old) = restored.vrfs.iter().flatten().find(|o| o.name == vrf.name) {
            restore_is6(
                &mut vrf.routes,
                &old.routes,
                &mut vrf.routing_policy,
                &old.routing_policy,
            );
        }
    }
}

fn restore_is6(
    routes: &mut Option<Vec<v1alpha2::RouteSpec>>,
    old_routes: &Option<Vec<v1alpha2::RouteSpec>>,
    policies: &mut Option<Vec<v1alpha2::RoutingPolicySpec>>,
    old_policies: &Option<Vec<v1alpha2::RoutingPolicySpec>>,
) {
    if let (Some(routes), Some(old)) = (routes.as_mut(), old_routes.as_ref())
        && routes.len() == old.len()
    {
        for (r, o) in routes.iter_mut().zip(old) {
            r.is6 = r.is6.or(o.is6);
        }
    }
    if let (Some(policies), Some(old)) = (policies.as_mut(), old_policies.as_ref())
        && policies.len() == old.len()
    {
        for (p, o) in policies.iter_mut().zip(old) {
            p.is6 = p.is6.or(o.is6);
        }
    }
}
