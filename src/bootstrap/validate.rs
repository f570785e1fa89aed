//! capmox's renderer-agnostic network validation, run before any network rendering.
//!
//! Rules: at least one device; at least one default route (or DHCP) somewhere; no two routes with the same
//! effective (table, destination, metric) — a NIC enslaved to a VRF puts its routes in the VRF's table unless
//! a route names its own, unset table is main (254); every route has a destination; every FIB rule matches
//! on `to` and/or `from`, names a table unless it belongs to a VRF, and does not mix address families.
//! Plus ours: MACs, DNS servers and VRF names have a shape that cannot break the documents
//! ([`super::safe::check_network_values`]).

use std::collections::{HashMap, HashSet};

use super::error::BootstrapError;
use super::model::{FibRule, NetworkModel, Route};

/// The Linux main routing table.
const MAIN_TABLE: i64 = 254;

/// Validates `net` the way capmox does before rendering.
pub fn validate_network(net: &NetworkModel) -> Result<(), BootstrapError> {
    if net.devices.is_empty() && net.vrfs.is_empty() {
        return Err(BootstrapError::MissingNetworkConfigData);
    }
    super::safe::check_network_values(net)?;

    let mut vrf_of_member: HashMap<&str, i32> = HashMap::new();
    for vrf in &net.vrfs {
        for child in &vrf.interfaces {
            vrf_of_member.insert(child.as_str(), vrf.table);
        }
    }

    let mut seen = HashSet::new();
    let mut has_gateway = false;

    for dev in &net.devices {
        let name = dev.guest_name();
        if dev.mac.is_empty() {
            return Err(BootstrapError::MissingMacAddress { device: name });
        }
        let table = vrf_of_member.get(name.as_str()).copied();
        check_routes(&name, &dev.effective_routes(), table, &mut has_gateway, &mut seen)?;
        check_rules(&name, &dev.routing_policy, false)?;
        if dev.dhcp4 || dev.dhcp6 || dev.accept_ra {
            has_gateway = true;
        }
    }
    for vrf in &net.vrfs {
        check_routes(
            &vrf.name,
            &vrf.routes,
            Some(vrf.table),
            &mut has_gateway,
            &mut seen,
        )?;
        check_rules(&vrf.name, &vrf.routing_policy, true)?;
    }

    if !has_gateway {
        return Err(BootstrapError::MissingGateway);
    }
    Ok(())
}

fn check_routes(
    device: &str,
    routes: &[Route],
    device_table: Option<i32>,
    has_gateway: &mut bool,
    seen: &mut HashSet<(i64, String, i64)>,
) -> Result<(), BootstrapError> {
    for route in routes {
        let Some(to) = route.to else {
            return Err(BootstrapError::MalformedRoute {
                device: device.to_owned(),
                reason: "route has no destination".to_owned(),
            });
        };
        if to.prefix_len() == 0 && to.addr().is_unspecified() {
            *has_gateway = true;
        }
        let table = route.table.or(device_table).map_or(MAIN_TABLE, i64::from);
        let metric = route.metric.map_or(0, i64::from);
        if !seen.insert((table, to.to_string(), metric)) {
            return Err(BootstrapError::ConflictingRoute {
                device: device.to_owned(),
                table,
                to: to.to_string(),
                metric,
            });
        }
    }
    Ok(())
}

fn check_rules(device: &str, rules: &[FibRule], is_vrf: bool) -> Result<(), BootstrapError> {
    let malformed = |reason: &str| BootstrapError::MalformedFibRule {
        device: device.to_owned(),
        reason: reason.to_owned(),
    };
    for rule in rules {
        if rule.to.is_none() && rule.from.is_none() {
            return Err(malformed("rule matches neither to nor from"));
        }
        if rule.table.unwrap_or(0) == 0 && !is_vrf {
            return Err(malformed("rule outside a VRF needs a table"));
        }
        if let (Some(to), Some(from)) = (rule.to, rule.from)
            && to.addr().is_ipv6() != from.addr().is_ipv6()
        {
            return Err(malformed("rule mixes IPv4 and IPv6"));
        }
    }
    Ok(())
}
