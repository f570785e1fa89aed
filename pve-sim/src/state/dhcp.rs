//! The guests' DHCP server and router advertisements: a DHCPv4 lease from the scenario's range
//! (stable per MAC, the lowest free address first), a DHCPv6 lease from the scenario's /64 and a
//! SLAAC (EUI-64) address in the same /64.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, Ipv6Addr};

use crate::scenario::DhcpSpec;

/// Leases by lower-case MAC.
#[derive(Debug, Clone, Default)]
pub struct Dhcp {
    spec: DhcpSpec,
    v4: BTreeMap<String, Ipv4Addr>,
    v6: BTreeMap<String, Ipv6Addr>,
}

impl Dhcp {
    /// A server handing out what `spec` says.
    pub fn new(spec: DhcpSpec) -> Self {
        Self {
            spec,
            v4: BTreeMap::new(),
            v6: BTreeMap::new(),
        }
    }

    /// The DHCPv4 lease of `mac` as `ip/prefix` (`None` when the range is exhausted).
    pub fn lease_v4(&mut self, mac: &str) -> Option<String> {
        let mac = mac.to_lowercase();
        let prefix = self.spec.ipv4_prefix;
        if let Some(ip) = self.v4.get(&mac) {
            return Some(format!("{ip}/{prefix}"));
        }
        let (first, last) = (u32::from(self.spec.ipv4_first), u32::from(self.spec.ipv4_last));
        let ip = (first..=last)
            .map(Ipv4Addr::from)
            .find(|ip| !self.v4.values().any(|l| l == ip))?;
        self.v4.insert(mac, ip);
        Some(format!("{ip}/{prefix}"))
    }

    /// The DHCPv6 lease of `mac` as `ip/128`.
    pub fn lease_v6(&mut self, mac: &str) -> String {
        let mac = mac.to_lowercase();
        let next = u16::try_from(self.v6.len() + 0x100).unwrap_or(u16::MAX);
        let base = self.spec.ipv6_prefix.segments();
        let ip = *self
            .v6
            .entry(mac)
            .or_insert_with(|| Ipv6Addr::new(base[0], base[1], base[2], base[3], 0, 0, 0, next));
        format!("{ip}/128")
    }

    /// The SLAAC (EUI-64) address of `mac` in the scenario's /64 as `ip/64`.
    pub fn slaac(&self, mac: &str) -> Option<String> {
        let b: Vec<u8> = mac
            .split(':')
            .map(|x| u8::from_str_radix(x, 16))
            .collect::<Result<_, _>>()
            .ok()?;
        let [m0, m1, m2, m3, m4, m5] = <[u8; 6]>::try_from(b).ok()?;
        let p = self.spec.ipv6_prefix.segments();
        let ip = Ipv6Addr::new(
            p[0],
            p[1],
            p[2],
            p[3],
            u16::from_be_bytes([m0 ^ 2, m1]),
            u16::from_be_bytes([m2, 0xff]),
            u16::from_be_bytes([0xfe, m3]),
            u16::from_be_bytes([m4, m5]),
        );
        Some(format!("{ip}/64"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_are_stable_per_mac_and_run_out() {
        let mut d = Dhcp::new(DhcpSpec {
            ipv4_first: Ipv4Addr::new(10, 0, 0, 10),
            ipv4_last: Ipv4Addr::new(10, 0, 0, 11),
            ..DhcpSpec::default()
        });
        assert_eq!(d.lease_v4("BC:24:11:00:00:01").as_deref(), Some("10.0.0.10/24"));
        assert_eq!(d.lease_v4("bc:24:11:00:00:01").as_deref(), Some("10.0.0.10/24"));
        assert_eq!(d.lease_v4("BC:24:11:00:00:02").as_deref(), Some("10.0.0.11/24"));
        assert_eq!(d.lease_v4("BC:24:11:00:00:03"), None);
        assert_eq!(d.lease_v6("BC:24:11:00:00:01"), "fd99::100/128");
        assert_eq!(d.lease_v6("BC:24:11:00:00:01"), "fd99::100/128");
        assert_eq!(
            d.slaac("BC:24:11:00:00:01").as_deref(),
            Some("fd99::be24:11ff:fe00:1/64")
        );
    }
}
