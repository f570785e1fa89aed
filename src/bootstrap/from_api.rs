//! Pure mapping from the v1alpha2 API (`ProxmoxMachine.spec.network`) plus what the controller resolved
//! (IPAM addresses, MACs from the VM config, the cluster's DNS servers) into the render model.
//!
//! Follows capmox: NIC `i` becomes `eth<i>`; its addresses are sorted by IPAddress object name; every
//! address with a gateway yields a default route with the pool's metric; the NIC's `dnsServers` override
//! the cluster's; route/rule targets accept a CIDR, a bare IP (→ /32, /128) or `default`/`all` (family from
//! `is6`, else from `via` — or for rules from the other of to/from — else IPv4); VRF interfaces may be
//! named `ethN` or `netN`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use capmox_api::v1alpha2::{NetworkSpec, RouteSpec, RoutingPolicySpec};
use ipnet::IpNet;

use super::error::BootstrapError;
use super::model::{Address, Device, FibRule, NetworkModel, Route, Vrf};

/// One IPAM address the controller resolved for a NIC.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedAddress {
    /// Name of the IPAddress object (the sort key capmox uses).
    pub name: String,
    /// `spec.address`.
    pub address: String,
    /// `spec.prefix`.
    pub prefix: u8,
    /// `spec.gateway` (empty or absent: no default route).
    pub gateway: Option<String>,
    /// Metric from the pool's annotations, if any.
    pub metric: Option<i32>,
    /// From a default pool (claim annotation `ipam.capmox.cluster.x-k8s.io/default-gateway: "true"`).
    pub is_default: bool,
}

/// What the controller knows about one NIC besides its spec.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResolvedDevice {
    /// MAC address from the VM's `netN` config.
    pub mac: String,
    /// Its IPAM addresses, in any order.
    pub addresses: Vec<ResolvedAddress>,
}

/// Builds the render model. `resolved` is keyed by Proxmox NIC name (`net0`, ...).
pub fn network_from_api(
    spec: &NetworkSpec,
    resolved: &BTreeMap<String, ResolvedDevice>,
    cluster_dns: &[String],
) -> Result<NetworkModel, BootstrapError> {
    let mut devices = Vec::with_capacity(spec.network_devices.len());
    for (index, nic) in spec.network_devices.iter().enumerate() {
        let proxmox_name = nic.name.clone().unwrap_or_else(|| "net0".to_owned());
        let guest = format!("eth{index}");
        let res = resolved.get(&proxmox_name);
        let mac = res.map(|r| r.mac.clone()).unwrap_or_default();
        if mac.is_empty() {
            return Err(BootstrapError::MissingMacAddress { device: guest });
        }
        let mut resolved_addrs: Vec<&ResolvedAddress> =
            res.map(|r| r.addresses.iter().collect()).unwrap_or_default();
        resolved_addrs.sort_by(|a, b| a.name.cmp(&b.name));
        let mut addresses = Vec::with_capacity(resolved_addrs.len());
        for a in resolved_addrs {
            let ip = parse_ip(&a.address, &proxmox_name, "address")?;
            let gateway = match a.gateway.as_deref().filter(|g| !g.is_empty()) {
                Some(g) => Some(parse_ip(g, &proxmox_name, "gateway")?),
                None => None,
            };
            addresses.push(Address {
                ip,
                prefix: a.prefix,
                gateway,
                metric: a.metric,
                is_default: a.is_default,
            });
        }
        let dns_servers = match nic.dns_servers.as_deref() {
            Some(own) if !own.is_empty() => own.to_vec(),
            _ => cluster_dns.to_vec(),
        };
        devices.push(Device {
            proxmox_name,
            index,
            mac,
            dhcp4: false,
            dhcp6: false,
            addresses,
            dns_servers,
            routes: routes(nic.routes.as_deref().unwrap_or_default(), &guest)?,
            routing_policy: rules(nic.routing_policy.as_deref().unwrap_or_default(), &guest)?,
            link_mtu: nic.link_mtu,
        });
    }

    let mut vrfs = Vec::new();
    for vrf in spec.vrfs.as_deref().unwrap_or_default() {
        let mut interfaces = Vec::new();
        for child in vrf.interfaces.as_deref().unwrap_or_default() {
            let dev = devices
                .iter()
                .find(|d| &d.guest_name() == child || &d.proxmox_name == child)
                .ok_or_else(|| BootstrapError::UnknownVrfInterface {
                    vrf: vrf.name.clone(),
                    child: child.clone(),
                })?;
            interfaces.push(dev.guest_name());
        }
        vrfs.push(Vrf {
            name: vrf.name.clone(),
            table: vrf.table,
            interfaces,
            routes: routes(vrf.routes.as_deref().unwrap_or_default(), &vrf.name)?,
            routing_policy: rules(vrf.routing_policy.as_deref().unwrap_or_default(), &vrf.name)?,
        });
    }
    Ok(NetworkModel { devices, vrfs })
}

fn parse_ip(s: &str, device: &str, what: &'static str) -> Result<IpAddr, BootstrapError> {
    s.parse().map_err(|_| BootstrapError::InvalidAddress {
        device: device.to_owned(),
        what,
        value: s.to_owned(),
    })
}

fn is_placeholder(s: &str) -> bool {
    s.eq_ignore_ascii_case("default") || s.eq_ignore_ascii_case("all")
}

/// The address family of the first hint that is a concrete address, unless `is6` says it.
fn resolve_family(is6: Option<bool>, hints: &[Option<&str>]) -> bool {
    if let Some(is6) = is6 {
        return is6;
    }
    for h in hints.iter().flatten() {
        if h.is_empty() || is_placeholder(h) {
            continue;
        }
        if let Ok(net) = h.parse::<IpNet>() {
            return net.addr().is_ipv6();
        }
        if let Ok(ip) = h.parse::<IpAddr>() {
            return ip.is_ipv6();
        }
    }
    false
}

fn parse_target(
    s: Option<&str>,
    is6: bool,
    device: &str,
    what: &'static str,
) -> Result<Option<IpNet>, BootstrapError> {
    let Some(s) = s.filter(|s| !s.is_empty()) else {
        return Ok(None);
    };
    if is_placeholder(s) {
        let unspecified: IpAddr = if is6 {
            IpAddr::V6(std::net::Ipv6Addr::UNSPECIFIED)
        } else {
            IpAddr::V4(std::net::Ipv4Addr::UNSPECIFIED)
        };
        return Ok(Some(super::model::default_prefix(unspecified)));
    }
    if let Ok(net) = s.parse::<IpNet>() {
        return Ok(Some(net));
    }
    let ip = parse_ip(s, device, what)?;
    Ok(Some(IpNet::from(ip)))
}

fn routes(specs: &[RouteSpec], device: &str) -> Result<Vec<Route>, BootstrapError> {
    specs
        .iter()
        .map(|spec| {
            let is6 = resolve_family(spec.is6, &[spec.via.as_deref()]);
            let via = match spec.via.as_deref().filter(|v| !v.is_empty()) {
                Some(v) => Some(parse_ip(v, device, "via")?),
                None => None,
            };
            Ok(Route {
                to: parse_target(spec.to.as_deref(), is6, device, "route target")?,
                via,
                metric: spec.metric,
                table: spec.table,
            })
        })
        .collect()
}

fn rules(specs: &[RoutingPolicySpec], device: &str) -> Result<Vec<FibRule>, BootstrapError> {
    specs
        .iter()
        .map(|spec| {
            let is6 = resolve_family(spec.is6, &[spec.to.as_deref(), spec.from.as_deref()]);
            Ok(FibRule {
                to: parse_target(spec.to.as_deref(), is6, device, "rule target")?,
                from: parse_target(spec.from.as_deref(), is6, device, "rule source")?,
                table: spec.table,
                priority: spec.priority,
            })
        })
        .collect()
}
