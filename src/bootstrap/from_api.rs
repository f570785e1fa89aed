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
            dhcp4: nic.dhcp4(),
            dhcp6: nic.dhcp6(),
            accept_ra: nic.slaac(),
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

/// Pool annotation holding the default-route metric.
pub const GATEWAY_METRIC_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/gateway-metric";
/// Legacy pool annotation holding the default-route metric (still read; the new one wins).
pub const LEGACY_METRIC_ANNOTATION: &str = "metric";
/// Claim/IPAddress annotation marking an address from a default pool.
pub const DEFAULT_GATEWAY_ANNOTATION: &str = "ipam.capmox.cluster.x-k8s.io/default-gateway";

/// The default-route metric from a pool's annotations, as capmox reads it: legacy `metric`, overridden by
/// `ipam.capmox.cluster.x-k8s.io/gateway-metric`; empty values are ignored; Go integer syntax
/// (`0x`/`0o`/`0b` prefixes, leading-zero octal).
pub fn gateway_metric_from_annotations(
    annotations: &BTreeMap<String, String>,
) -> Result<Option<i32>, BootstrapError> {
    let mut metric = None;
    for key in [LEGACY_METRIC_ANNOTATION, GATEWAY_METRIC_ANNOTATION] {
        if let Some(v) = annotations.get(key).filter(|v| !v.is_empty()) {
            metric = Some(parse_go_int(v).ok_or_else(|| BootstrapError::InvalidAnnotation {
                key: key.to_owned(),
                value: v.clone(),
            })?);
        }
    }
    Ok(metric)
}

/// Whether a `default-gateway` annotation value is true in Go's `strconv.ParseBool` sense.
pub fn is_default_gateway(annotation: Option<&str>) -> bool {
    matches!(annotation, Some("1" | "t" | "T" | "true" | "TRUE" | "True"))
}

fn parse_go_int(s: &str) -> Option<i32> {
    let (neg, body) = match s.as_bytes().first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, s),
    };
    let lower = body.to_ascii_lowercase();
    let (radix, digits) = if let Some(d) = lower.strip_prefix("0x") {
        (16, d)
    } else if let Some(d) = lower.strip_prefix("0o") {
        (8, d)
    } else if let Some(d) = lower.strip_prefix("0b") {
        (2, d)
    } else if lower.len() > 1 && lower.starts_with('0') {
        (8, &lower[1..])
    } else {
        (10, lower.as_str())
    };
    let digits = digits.replace('_', "");
    let v = i64::from_str_radix(&digits, radix).ok()?;
    i32::try_from(if neg { -v } else { v }).ok()
}

/// The MAC address of a Proxmox `netN` config value (`virtio=BC:24:11:5B:22:C2,bridge=vmbr0,...`), as capmox
/// reads it: the value of the first `model=MAC` pair that is followed by `,bridge`.
pub fn mac_from_net_config(net: &str) -> Option<String> {
    let (head, _) = net.split_once(",bridge")?;
    let (_, mac) = head.rsplit_once('=')?;
    (!mac.is_empty() && !mac.contains(',')).then(|| mac.to_owned())
}

/// The instance id capmox derives from a VM's `smbios1` config (`uuid=...,manufacturer=...`): the `uuid`
/// value in canonical lower-case form, or `None` when absent or not a UUID.
pub fn instance_id_from_smbios1(smbios1: &str) -> Option<String> {
    let raw = smbios1.split(',').find_map(|kv| kv.strip_prefix("uuid="))?;
    let hex: String = match raw.len() {
        36 => {
            let dashes_ok = raw
                .char_indices()
                .all(|(i, c)| matches!(i, 8 | 13 | 18 | 23) == (c == '-'));
            if !dashes_ok {
                return None;
            }
            raw.chars().filter(|c| *c != '-').collect()
        }
        32 => raw.to_owned(),
        _ => return None,
    };
    if !hex.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    let h = hex.to_ascii_lowercase();
    Some(format!(
        "{}-{}-{}-{}-{}",
        &h[0..8],
        &h[8..12],
        &h[12..16],
        &h[16..20],
        &h[20..32]
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metric_annotations() {
        let mut a = BTreeMap::new();
        assert_eq!(gateway_metric_from_annotations(&a), Ok(None));
        a.insert(LEGACY_METRIC_ANNOTATION.to_owned(), "0x10".to_owned());
        assert_eq!(gateway_metric_from_annotations(&a), Ok(Some(16)));
        a.insert(GATEWAY_METRIC_ANNOTATION.to_owned(), "200".to_owned());
        assert_eq!(gateway_metric_from_annotations(&a), Ok(Some(200)));
        a.insert(GATEWAY_METRIC_ANNOTATION.to_owned(), "x".to_owned());
        assert!(gateway_metric_from_annotations(&a).is_err());
        assert!(is_default_gateway(Some("true")) && !is_default_gateway(Some("yes")));
    }

    #[test]
    fn mac_from_proxmox_net() {
        assert_eq!(
            mac_from_net_config("virtio=BC:24:11:5B:22:C2,bridge=vmbr0,firewall=1").as_deref(),
            Some("BC:24:11:5B:22:C2")
        );
        assert_eq!(mac_from_net_config("virtio,bridge=vmbr0"), None);
    }

    #[test]
    fn uuid_from_smbios1() {
        assert_eq!(
            instance_id_from_smbios1("manufacturer=x,uuid=1F3B4C5D-6E7F-4A8B-9C0D-1E2F3A4B5C6D").as_deref(),
            Some("1f3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d")
        );
        assert_eq!(
            instance_id_from_smbios1("uuid=1f3b4c5d6e7f4a8b9c0d1e2f3a4b5c6d").as_deref(),
            Some("1f3b4c5d-6e7f-4a8b-9c0d-1e2f3a4b5c6d")
        );
        assert_eq!(instance_id_from_smbios1("uuid=nope"), None);
        assert_eq!(instance_id_from_smbios1("base64=1"), None);
    }
}
