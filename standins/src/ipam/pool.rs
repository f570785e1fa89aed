//! Pure address arithmetic of an `InClusterIPPool`: parsing `spec.addresses` entries (single IPs,
//! `first-last` ranges, CIDRs) and picking the lowest free address.

use std::collections::HashSet;
use std::net::IpAddr;

use capmox_api::capi::ipam::InClusterIPPoolSpec;
use ipnet::IpNet;

/// A pool entry or setting that cannot be understood.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PoolError {
    /// An entry is neither an IP, a range nor a CIDR.
    #[error("invalid address entry {entry:?}: {reason}")]
    Entry {
        /// The offending entry.
        entry: String,
        /// Why it is invalid.
        reason: &'static str,
    },
    /// The gateway is not an IP address.
    #[error("invalid gateway {0:?}")]
    Gateway(String),
    /// The prefix is outside 0..=32 (IPv4) or 0..=128 (IPv6).
    #[error("invalid prefix {0}")]
    Prefix(i32),
}

/// An inclusive range of addresses of one family, as integers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Span {
    v6: bool,
    first: u128,
    last: u128,
}

fn to_int(ip: IpAddr) -> (bool, u128) {
    match ip {
        IpAddr::V4(v4) => (false, u128::from(u32::from(v4))),
        IpAddr::V6(v6) => (true, u128::from(v6)),
    }
}

fn from_int(v6: bool, n: u128) -> Option<IpAddr> {
    if v6 {
        Some(IpAddr::V6(n.into()))
    } else {
        u32::try_from(n).ok().map(|n| IpAddr::V4(n.into()))
    }
}

/// Parses one `spec.addresses` (or `excludedAddresses`) entry into an inclusive span.
fn parse_entry(entry: &str) -> Result<Span, PoolError> {
    let err = |reason| PoolError::Entry {
        entry: entry.to_owned(),
        reason,
    };
    let e = entry.trim();
    if let Some((a, b)) = e.split_once('-') {
        let a: IpAddr = a.trim().parse().map_err(|_| err("range start is not an IP"))?;
        let b: IpAddr = b.trim().parse().map_err(|_| err("range end is not an IP"))?;
        let ((va, fa), (vb, lb)) = (to_int(a), to_int(b));
        if va != vb {
            return Err(err("range mixes IPv4 and IPv6"));
        }
        if fa > lb {
            return Err(err("range start is after its end"));
        }
        return Ok(Span {
            v6: va,
            first: fa,
            last: lb,
        });
    }
    if e.contains('/') {
        let net: IpNet = e.parse().map_err(|_| err("not a CIDR"))?;
        let (v6, first) = to_int(net.network());
        let (_, last) = to_int(net.broadcast());
        return Ok(Span { v6, first, last });
    }
    let ip: IpAddr = e.parse().map_err(|_| err("not an IP, range or CIDR"))?;
    let (v6, n) = to_int(ip);
    Ok(Span {
        v6,
        first: n,
        last: n,
    })
}

/// Whether `n` is the network or broadcast address of its IPv4 `/prefix` subnet (prefixes up to
/// /30; /31 and /32 have no reserved addresses).
fn reserved_v4(n: u128, prefix: u8) -> bool {
    if prefix >= 31 {
        return false;
    }
    let host_bits = 32 - u32::from(prefix);
    let mask = (1u128 << host_bits) - 1;
    let host = n & mask;
    host == 0 || host == mask
}

/// The lowest address of the pool that is not in `used`, not the gateway, not excluded and (unless
/// `allocateReservedIPAddresses`) not an IPv4 network or broadcast address; `None` when the pool
/// is exhausted.
pub fn lowest_free(spec: &InClusterIPPoolSpec, used: &HashSet<IpAddr>) -> Result<Option<IpAddr>, PoolError> {
    let mut spans = spec
        .addresses
        .iter()
        .map(|a| parse_entry(a))
        .collect::<Result<Vec<_>, _>>()?;
    spans.sort();
    let excluded = spec
        .excluded_addresses
        .iter()
        .flatten()
        .map(|a| parse_entry(a))
        .collect::<Result<Vec<_>, _>>()?;
    let gateway = spec
        .gateway
        .as_deref()
        .filter(|g| !g.is_empty())
        .map(|g| g.parse::<IpAddr>().map_err(|_| PoolError::Gateway(g.to_owned())))
        .transpose()?
        .map(to_int);
    let allocate_reserved = spec.allocate_reserved_ip_addresses.unwrap_or(false);
    let used: HashSet<(bool, u128)> = used.iter().copied().map(to_int).collect();

    for span in spans {
        let max_prefix = if span.v6 { 128 } else { 32 };
        let prefix = u8::try_from(spec.prefix)
            .ok()
            .filter(|p| *p <= max_prefix)
            .ok_or(PoolError::Prefix(spec.prefix))?;
        let mut n = span.first;
        loop {
            // Jump over excluded ranges instead of walking them.
            if let Some(x) = excluded
                .iter()
                .find(|x| x.v6 == span.v6 && x.first <= n && n <= x.last)
            {
                if x.last >= span.last {
                    break;
                }
                n = x.last + 1;
                continue;
            }
            let skip = used.contains(&(span.v6, n))
                || (!allocate_reserved && gateway == Some((span.v6, n)))
                || (!allocate_reserved && !span.v6 && reserved_v4(n, prefix));
            if !skip {
                return Ok(from_int(span.v6, n));
            }
            if n >= span.last {
                break;
            }
            n += 1;
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(addresses: &[&str], prefix: i32, gateway: Option<&str>) -> InClusterIPPoolSpec {
        InClusterIPPoolSpec {
            addresses: addresses.iter().map(|s| (*s).to_owned()).collect(),
            prefix,
            gateway: gateway.map(str::to_owned),
            ..Default::default()
        }
    }

    fn ips(list: &[&str]) -> HashSet<IpAddr> {
        list.iter().map(|s| s.parse().unwrap()).collect()
    }

    fn free(s: &InClusterIPPoolSpec, used: &[&str]) -> Option<String> {
        lowest_free(s, &ips(used)).unwrap().map(|ip| ip.to_string())
    }

    #[test]
    fn ranges_single_ips_and_cidrs() {
        let s = spec(&["10.0.0.20-10.0.0.22", "10.0.0.5"], 24, Some("10.0.0.1"));
        assert_eq!(free(&s, &[]).as_deref(), Some("10.0.0.5"));
        assert_eq!(free(&s, &["10.0.0.5"]).as_deref(), Some("10.0.0.20"));
        assert_eq!(
            free(&s, &["10.0.0.5", "10.0.0.20", "10.0.0.21"]).as_deref(),
            Some("10.0.0.22")
        );
        assert_eq!(
            free(&s, &["10.0.0.5", "10.0.0.20", "10.0.0.21", "10.0.0.22"]),
            None
        );
    }

    #[test]
    fn cidr_skips_network_broadcast_and_gateway() {
        let s = spec(&["192.168.1.0/30"], 30, Some("192.168.1.1"));
        // .0 network, .1 gateway, .2 free, .3 broadcast.
        assert_eq!(free(&s, &[]).as_deref(), Some("192.168.1.2"));
        assert_eq!(free(&s, &["192.168.1.2"]), None);
        let mut all = s.clone();
        all.allocate_reserved_ip_addresses = Some(true);
        assert_eq!(free(&all, &[]).as_deref(), Some("192.168.1.0"));
    }

    #[test]
    fn excluded_addresses_are_skipped() {
        let mut s = spec(&["10.1.0.10-10.1.0.20"], 24, None);
        s.excluded_addresses = Some(vec!["10.1.0.10-10.1.0.15".into(), "10.1.0.17".into()]);
        assert_eq!(free(&s, &[]).as_deref(), Some("10.1.0.16"));
        assert_eq!(free(&s, &["10.1.0.16"]).as_deref(), Some("10.1.0.18"));
        s.excluded_addresses = Some(vec!["10.1.0.0/24".into()]);
        assert_eq!(free(&s, &[]), None);
    }

    #[test]
    fn ipv6_pools() {
        let s = spec(&["fd00::10-fd00::11"], 64, Some("fd00::1"));
        assert_eq!(free(&s, &[]).as_deref(), Some("fd00::10"));
        assert_eq!(free(&s, &["fd00::10"]).as_deref(), Some("fd00::11"));
        assert_eq!(free(&s, &["fd00::10", "fd00::11"]), None);
    }

    #[test]
    fn entries_are_sorted_before_allocation() {
        let s = spec(&["10.0.0.30", "10.0.0.10-10.0.0.11"], 24, None);
        assert_eq!(free(&s, &[]).as_deref(), Some("10.0.0.10"));
    }

    #[test]
    fn invalid_entries_are_errors() {
        for bad in ["10.0.0.9-10.0.0.1", "10.0.0.1-fd00::1", "nope", "10.0.0.0/33"] {
            assert!(
                lowest_free(&spec(&[bad], 24, None), &HashSet::new()).is_err(),
                "{bad} must be rejected"
            );
        }
        assert_eq!(
            lowest_free(&spec(&["10.0.0.1"], 24, Some("x")), &HashSet::new()),
            Err(PoolError::Gateway("x".into()))
        );
        assert_eq!(
            lowest_free(&spec(&["10.0.0.1"], 40, None), &HashSet::new()),
            Err(PoolError::Prefix(40))
        );
    }
}
