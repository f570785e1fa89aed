//! Addresses a guest got by DHCP or SLAAC, learnt from the QEMU guest agent
//! (`agent/network-get-interfaces`): which NICs need one and whether the guest has them yet.

use std::net::IpAddr;

use crate::proxmox::types::{GuestNetworkInterface, VmConfig};

/// A NIC whose addresses the guest configures itself, as the owner's spec says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicNicSpec {
    /// Proxmox slot (`net0`, ...).
    pub net: String,
    /// An IPv4 address is expected (DHCPv4).
    pub v4: bool,
    /// An IPv6 address is expected (DHCPv6 or SLAAC).
    pub v6: bool,
}

/// A NIC whose address the guest configures itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DynamicNic {
    /// Proxmox slot (`net0`, ...).
    pub net: String,
    /// MAC address from the VM config (any case).
    pub mac: String,
    /// An IPv4 address is expected (DHCPv4).
    pub v4: bool,
    /// An IPv6 address is expected (DHCPv6 or SLAAC).
    pub v6: bool,
}

/// The dynamic NICs with their MACs from `config`.
pub fn dynamic_nics(specs: &[DynamicNicSpec], config: &VmConfig) -> Vec<DynamicNic> {
    specs
        .iter()
        .map(|n| {
            let mac = n
                .net
                .strip_prefix("net")
                .and_then(|i| i.parse::<u32>().ok())
                .and_then(|i| config.nets.get(&i))
                .and_then(|d| d.mac.clone())
                .unwrap_or_default();
            DynamicNic {
                net: n.net.clone(),
                mac,
                v4: n.v4,
                v6: n.v6,
            }
        })
        .collect()
}

/// An address a node can be reached at: not loopback, unspecified or link-local.
pub fn usable(ip: IpAddr) -> bool {
    match ip {
        IpAddr::V4(v4) => !v4.is_loopback() && !v4.is_unspecified() && !v4.is_link_local(),
        IpAddr::V6(v6) => {
            !v6.is_loopback() && !v6.is_unspecified() && !v6.is_unicast_link_local() && !v6.is_multicast()
        }
    }
}

/// What the guest agent told about the dynamic NICs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Learnt {
    /// Every dynamic NIC has an address of each family it expects: all usable addresses of
    /// those NICs, IPv4 first, in interface order.
    Complete(Vec<IpAddr>),
    /// Still missing, e.g. `net0 has no IPv4 address yet`.
    Missing(String),
}

/// Matches the guest's interfaces to `nics` by MAC.
pub fn learn(nics: &[DynamicNic], ifaces: &[GuestNetworkInterface]) -> Learnt {
    let mut v4 = Vec::new();
    let mut v6 = Vec::new();
    for nic in nics {
        let ips: Vec<IpAddr> = ifaces
            .iter()
            .filter(|i| {
                i.hardware_address
                    .as_deref()
                    .is_some_and(|m| !nic.mac.is_empty() && m.eq_ignore_ascii_case(&nic.mac))
            })
            .flat_map(|i| &i.ip_addresses)
            .filter_map(|a| a.ip_address.parse::<IpAddr>().ok())
            .filter(|ip| usable(*ip))
            .collect();
        let has4 = ips.iter().any(IpAddr::is_ipv4);
        let has6 = ips.iter().any(IpAddr::is_ipv6);
        if nic.v4 && !has4 {
            return Learnt::Missing(format!("{} has no IPv4 address yet", nic.net));
        }
        if nic.v6 && !has6 {
            return Learnt::Missing(format!("{} has no IPv6 address yet", nic.net));
        }
        for ip in ips {
            let list = if ip.is_ipv4() { &mut v4 } else { &mut v6 };
            if !list.contains(&ip) {
                list.push(ip);
            }
        }
    }
    v4.extend(v6);
    Learnt::Complete(v4)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ifaces() -> Vec<GuestNetworkInterface> {
        serde_json::from_value(serde_json::json!([
            {"name": "lo", "hardware-address": "00:00:00:00:00:00", "ip-addresses": [
                {"ip-address-type": "ipv4", "ip-address": "127.0.0.1", "prefix": 8}]},
            {"name": "eth0", "hardware-address": "bc:24:11:00:00:01", "ip-addresses": [
                {"ip-address-type": "ipv4", "ip-address": "10.99.0.100", "prefix": 24},
                {"ip-address-type": "ipv6", "ip-address": "fe80::be24:11ff:fe00:1", "prefix": 64}]},
            {"name": "eth1", "hardware-address": "bc:24:11:00:00:02", "ip-addresses": [
                {"ip-address-type": "ipv6", "ip-address": "fd99::be24:11ff:fe00:2", "prefix": 64}]}
        ]))
        .unwrap()
    }

    fn nic(net: &str, mac: &str, v4: bool, v6: bool) -> DynamicNic {
        DynamicNic {
            net: net.into(),
            mac: mac.into(),
            v4,
            v6,
        }
    }

    #[test]
    fn learns_by_mac_and_skips_link_local() {
        let nics = [
            nic("net0", "BC:24:11:00:00:01", true, false),
            nic("net1", "BC:24:11:00:00:02", false, true),
        ];
        let want: Vec<IpAddr> = vec![
            "10.99.0.100".parse().unwrap(),
            "fd99::be24:11ff:fe00:2".parse().unwrap(),
        ];
        assert_eq!(learn(&nics, &ifaces()), Learnt::Complete(want));
        // Only a link-local IPv6 address on net0: not yet.
        let nics = [nic("net0", "BC:24:11:00:00:01", true, true)];
        assert_eq!(
            learn(&nics, &ifaces()),
            Learnt::Missing("net0 has no IPv6 address yet".into())
        );
        let nics = [nic("net2", "BC:24:11:00:00:09", true, false)];
        assert_eq!(
            learn(&nics, &ifaces()),
            Learnt::Missing("net2 has no IPv4 address yet".into())
        );
    }
}
