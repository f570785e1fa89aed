//! A ProxmoxMachine's addresses: the state of its IPAM claims (from the watch caches), the claims
//! it creates, and `status.addresses` of a machine whose NICs get addresses by DHCP or SLAAC.

use std::collections::BTreeMap;
use std::net::IpAddr;

use capmox_api::v1alpha2::{MachineAddress, MachineAddressType, ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;

use super::caches::{Caches, Meta};
use super::error::MachineError;
use crate::ipam;
use crate::vm::AddressFacts;

/// The state of the machine's IPAM claims, with the resolution it was derived from (from the
/// watch caches).
pub fn claim_facts(
    cache: &dyn Caches,
    version: ipam::IpamApiVersion,
    pm: &ProxmoxMachine,
    pc: &ProxmoxCluster,
) -> Result<(AddressFacts, ipam::Resolution), MachineError> {
    let ns = pm.namespace().unwrap_or_default();
    let desired = ipam::desired_claims(pm, pc)?;
    let (claims, addresses) = ipam::load_cached(
        version,
        &desired,
        |n| cache.claim(&ns, n),
        |n| cache.address(&ns, n),
    );
    let resolution = ipam::resolve(&desired, &claims, &addresses);
    let facts = if !resolution.missing.is_empty() {
        AddressFacts::Missing
    } else if let Some(message) = resolution.conflict_message() {
        AddressFacts::Conflict(message)
    } else if !resolution.is_complete() {
        AddressFacts::Pending
    } else {
        AddressFacts::Ready
    };
    Ok((facts, resolution))
}

/// Labels and annotations of the InClusterIPPools the claims reference (from the watch cache;
/// unknown pools are skipped).
pub fn pools(caches: &dyn Caches, ns: &str, desired: &[ipam::DesiredClaim]) -> BTreeMap<String, Meta> {
    desired
        .iter()
        .filter(|d| d.pool.kind == "InClusterIPPool")
        .filter_map(|d| Some((d.pool.name.clone(), caches.pool(ns, &d.pool.name)?)))
        .collect()
}

/// `status.addresses` of a machine with dynamic NICs: the host name, then `InternalIP`s — the
/// static default-pool addresses and the learnt ones, IPv4 before IPv6, without duplicates.
pub fn dynamic_addresses(name: &str, static_defaults: &[IpAddr], learnt: &[IpAddr]) -> Vec<MachineAddress> {
    let mut ips: Vec<IpAddr> = Vec::new();
    for ip in static_defaults.iter().chain(learnt) {
        if !ips.contains(ip) {
            ips.push(*ip);
        }
    }
    ips.sort_by_key(|ip| ip.is_ipv6());
    std::iter::once(MachineAddress {
        address: name.to_owned(),
        type_: MachineAddressType::Hostname,
    })
    .chain(ips.into_iter().map(|ip| MachineAddress {
        address: ip.to_string(),
        type_: MachineAddressType::InternalIp,
    }))
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_put_the_host_name_first_and_ipv4_before_ipv6() {
        let a = dynamic_addresses(
            "m1",
            &["fd00::5".parse().unwrap(), "10.0.0.5".parse().unwrap()],
            &["10.99.0.100".parse().unwrap(), "10.0.0.5".parse().unwrap()],
        );
        let shown: Vec<(&str, MachineAddressType)> =
            a.iter().map(|a| (a.address.as_str(), a.type_)).collect();
        assert_eq!(
            shown,
            [
                ("m1", MachineAddressType::Hostname),
                ("10.0.0.5", MachineAddressType::InternalIp),
                ("10.99.0.100", MachineAddressType::InternalIp),
                ("fd00::5", MachineAddressType::InternalIp),
            ]
        );
    }
}
