//! Reading NoCloud ISOs (ISO 9660 with Joliet / Rock Ridge) and turning their network-config into the
//! guest agent's `network-get-interfaces` answer (with DHCP leases and SLAAC addresses for NICs
//! that ask for them).
//!
//! The reader is small and self-contained: it walks the volume descriptors, prefers the Joliet
//! supplementary descriptor, falls back to Rock Ridge `NM` names and finally to plain ISO 9660 names,
//! and only looks at the root directory (where NoCloud files live).

use serde_json::{Value, json};

const SECTOR: usize = 2048;

fn u32_le(b: &[u8], off: usize) -> Option<usize> {
    let s = b.get(off..off + 4)?;
    Some(u32::from_le_bytes([s[0], s[1], s[2], s[3]]) as usize)
}

/// A directory entry of the root directory.
struct Entry {
    name: String,
    extent: usize,
    size: usize,
    is_dir: bool,
}

fn decode_name(raw: &[u8], joliet: bool) -> String {
    let name = if joliet {
        let units: Vec<u16> = raw
            .chunks_exact(2)
            .map(|c| u16::from_be_bytes([c[0], c[1]]))
            .collect();
        String::from_utf16_lossy(&units)
    } else {
        String::from_utf8_lossy(raw).into_owned()
    };
    let name = name.split(';').next().unwrap_or("").to_string();
    name.strip_suffix('.').map(str::to_string).unwrap_or(name)
}

/// Rock Ridge alternate name (`NM` entry) in a record's system use area.
fn rock_ridge_name(su: &[u8]) -> Option<String> {
    let mut i = 0;
    let mut name = String::new();
    while i + 4 <= su.len() {
        let len = su[i + 2] as usize;
        if len < 4 || i + len > su.len() {
            break;
        }
        if &su[i..i + 2] == b"NM" && len > 5 {
            name.push_str(&String::from_utf8_lossy(&su[i + 5..i + len]));
        }
        i += len;
    }
    if name.is_empty() { None } else { Some(name) }
}

fn read_dir(iso: &[u8], extent: usize, size: usize, joliet: bool) -> Vec<Entry> {
    let mut out = Vec::new();
    let start = extent * SECTOR;
    let end = (start + size).min(iso.len());
    let mut pos = start;
    while pos < end {
        let len = iso[pos] as usize;
        if len == 0 {
            pos = (pos / SECTOR + 1) * SECTOR;
            continue;
        }
        let Some(rec) = iso.get(pos..pos + len) else { break };
        pos += len;
        if rec.len() < 34 {
            continue;
        }
        let name_len = rec[32] as usize;
        let Some(raw) = rec.get(33..33 + name_len) else {
            continue;
        };
        if raw == [0] || raw == [1] {
            continue;
        }
        let su_start = 33 + name_len + usize::from(name_len.is_multiple_of(2));
        let mut name = decode_name(raw, joliet);
        if !joliet && let Some(rr) = rec.get(su_start..).and_then(rock_ridge_name) {
            name = rr;
        }
        let (Some(extent), Some(size)) = (u32_le(rec, 2), u32_le(rec, 10)) else {
            continue;
        };
        out.push(Entry {
            name,
            extent,
            size,
            is_dir: rec[25] & 2 != 0,
        });
    }
    out
}

fn normalise(name: &str) -> String {
    name.chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .collect::<String>()
        .to_ascii_lowercase()
}

/// Reads a file from the root directory of an ISO image; `None` when absent or the image is not ISO 9660.
pub fn read_file(iso: &[u8], wanted: &str) -> Option<String> {
    let mut roots = Vec::new();
    for sector in 16..64 {
        let d = iso.get(sector * SECTOR..(sector + 1) * SECTOR)?;
        if &d[1..6] != b"CD001" {
            return None;
        }
        let kind = d[0];
        if kind == 255 {
            break;
        }
        let root = &d[156..190];
        let (Some(extent), Some(size)) = (u32_le(root, 2), u32_le(root, 10)) else {
            continue;
        };
        let joliet = kind == 2 && d[88] == b'%' && d[89] == b'/' && matches!(d[90], b'@' | b'C' | b'E');
        if kind == 1 || joliet {
            roots.push((joliet, extent, size));
        }
    }
    // Joliet first (exact names), then the primary tree (Rock Ridge or mangled names).
    roots.sort_by_key(|(joliet, _, _)| !joliet);
    for (joliet, extent, size) in roots {
        let entries = read_dir(iso, extent, size, joliet);
        let hit = entries
            .iter()
            .find(|e| !e.is_dir && e.name == wanted)
            .or_else(|| {
                entries
                    .iter()
                    .find(|e| !e.is_dir && normalise(&e.name) == normalise(wanted))
            });
        if let Some(e) = hit {
            let start = e.extent * SECTOR;
            let data = iso.get(start..start + e.size)?;
            return Some(String::from_utf8_lossy(data).into_owned());
        }
    }
    None
}

fn address(cidr: &str) -> Option<Value> {
    let (ip, prefix) = match cidr.split_once('/') {
        Some((ip, p)) => (ip, p.parse::<u8>().ok()?),
        None => (cidr, if cidr.contains(':') { 128 } else { 32 }),
    };
    let parsed: std::net::IpAddr = ip.parse().ok()?;
    let kind = if parsed.is_ipv4() { "ipv4" } else { "ipv6" };
    Some(json!({"ip-address": parsed.to_string(), "ip-address-type": kind, "prefix": prefix}))
}

fn netmask_prefix(mask: &str) -> Option<u8> {
    let m: std::net::Ipv4Addr = mask.parse().ok()?;
    u8::try_from(u32::from(m).count_ones()).ok()
}

fn link_local(mac: &str) -> Option<Value> {
    let b: Vec<u8> = mac
        .split(':')
        .map(|x| u8::from_str_radix(x, 16))
        .collect::<Result<_, _>>()
        .ok()?;
    if b.len() != 6 {
        return None;
    }
    let ip = format!(
        "fe80::{:x}:{:x}:{:x}:{:x}",
        u16::from_be_bytes([b[0] ^ 2, b[1]]),
        u16::from_be_bytes([b[2], 0xff]),
        u16::from_be_bytes([0xfe, b[3]]),
        u16::from_be_bytes([b[4], b[5]])
    );
    Some(json!({"ip-address": ip, "ip-address-type": "ipv6", "prefix": 64}))
}

fn stats() -> Value {
    json!({"rx-bytes": 123_456, "rx-packets": 1_024, "rx-errs": 0, "rx-dropped": 0, "tx-bytes": 65_432, "tx-packets": 512, "tx-errs": 0, "tx-dropped": 0})
}

fn iface(name: &str, mac: &str, mut addrs: Vec<Value>) -> Value {
    let mac = mac.to_lowercase();
    if let Some(ll) = link_local(&mac) {
        addrs.push(ll);
    }
    json!({"name": name, "hardware-address": mac, "ip-addresses": addrs, "statistics": stats()})
}

fn addresses_of(list: Option<&Value>) -> Vec<Value> {
    let Some(Value::Array(items)) = list else {
        return Vec::new();
    };
    items
        .iter()
        .filter_map(|a| match a {
            Value::String(s) => address(s),
            Value::Object(m) => m.keys().next().and_then(|k| address(k)),
            _ => None,
        })
        .collect()
}

/// Builds the interface list from a NoCloud network-config (netplan v2 or v1) and the VM's MACs
/// (`(netN, MAC)` in index order). Without a network-config, each NIC is reported without addresses.
pub fn interfaces(network_config: Option<&str>, macs: &[(String, String)]) -> Vec<Value> {
    interfaces_with_dhcp(network_config, macs, None)
}

/// [`interfaces`], where a netplan v2 ethernet with `dhcp4`/`dhcp6`/`accept-ra` also gets its
/// lease or SLAAC address from `dhcp` (the guest has booted).
pub fn interfaces_with_dhcp(
    network_config: Option<&str>,
    macs: &[(String, String)],
    mut dhcp: Option<&mut crate::state::dhcp::Dhcp>,
) -> Vec<Value> {
    let mut out = vec![json!({
        "name": "lo",
        "hardware-address": "00:00:00:00:00:00",
        "ip-addresses": [
            {"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8},
            {"ip-address": "::1", "ip-address-type": "ipv6", "prefix": 128},
        ],
        "statistics": stats(),
    })];
    let parsed: Option<Value> = network_config.and_then(|t| serde_saphyr::from_str::<Value>(t).ok());
    let root = parsed.as_ref().map(|v| v.get("network").unwrap_or(v));
    let mut used = Vec::new();
    if let Some(root) = root {
        if let Some(Value::Object(eths)) = root.get("ethernets") {
            for (i, (key, e)) in eths.iter().enumerate() {
                let name = e.get("set-name").and_then(Value::as_str).unwrap_or(key);
                let mac = e
                    .get("match")
                    .and_then(|m| m.get("macaddress"))
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| macs.get(i).map(|(_, m)| m.clone()))
                    .unwrap_or_default();
                used.push(mac.to_lowercase());
                let mut addrs = addresses_of(e.get("addresses"));
                let on = |k: &str| e.get(k).and_then(Value::as_bool) == Some(true);
                if let Some(d) = dhcp.as_deref_mut() {
                    let dynamic = [
                        on("dhcp4").then(|| d.lease_v4(&mac)).flatten(),
                        on("dhcp6").then(|| d.lease_v6(&mac)),
                        on("accept-ra").then(|| d.slaac(&mac)).flatten(),
                    ];
                    addrs.extend(dynamic.iter().flatten().filter_map(|c| address(c)));
                }
                out.push(iface(name, &mac, addrs));
            }
        } else if let Some(Value::Array(items)) = root.get("config") {
            for (i, e) in items
                .iter()
                .filter(|e| e.get("type").and_then(Value::as_str) == Some("physical"))
                .enumerate()
            {
                let name = e.get("name").and_then(Value::as_str).unwrap_or("eth0");
                let mac = e
                    .get("mac_address")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .or_else(|| macs.get(i).map(|(_, m)| m.clone()))
                    .unwrap_or_default();
                let mut addrs = Vec::new();
                if let Some(Value::Array(subnets)) = e.get("subnets") {
                    for s in subnets {
                        let Some(a) = s.get("address").and_then(Value::as_str) else {
                            continue;
                        };
                        let cidr = match (
                            a.contains('/'),
                            s.get("netmask").and_then(Value::as_str).and_then(netmask_prefix),
                        ) {
                            (false, Some(p)) => format!("{a}/{p}"),
                            _ => a.to_string(),
                        };
                        addrs.extend(address(&cidr));
                    }
                }
                used.push(mac.to_lowercase());
                out.push(iface(name, &mac, addrs));
            }
        }
    }
    let mut idx = out.len() - 1;
    for (_, mac) in macs {
        if !used.contains(&mac.to_lowercase()) {
            out.push(iface(&format!("eth{idx}"), mac, Vec::new()));
            idx += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dhcp_and_slaac_nics_get_leases() {
        let v2 = "version: 2\nethernets:\n  eth0:\n    match:\n      macaddress: BC:24:11:00:00:01\n    dhcp4: true\n    dhcp6: false\n    accept-ra: true\n";
        let mut d = crate::state::dhcp::Dhcp::new(crate::scenario::DhcpSpec::default());
        let macs = [("net0".to_owned(), "BC:24:11:00:00:01".to_owned())];
        let ifs = interfaces_with_dhcp(Some(v2), &macs, Some(&mut d));
        let ips: Vec<&str> = ifs[1]["ip-addresses"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["ip-address"].as_str().unwrap())
            .collect();
        assert_eq!(
            ips,
            ["10.99.0.100", "fd99::be24:11ff:fe00:1", "fe80::be24:11ff:fe00:1"]
        );
        assert_eq!(ifs[1]["ip-addresses"][0]["prefix"], 24);
        // Without the DHCP server (e.g. before boot) only the link-local address.
        assert_eq!(
            interfaces(Some(v2), &macs)[1]["ip-addresses"]
                .as_array()
                .unwrap()
                .len(),
            1
        );
    }

    #[test]
    fn netplan_v2_and_v1() {
        let v2 = "network:\n  version: 2\n  ethernets:\n    eth0:\n      match:\n        macaddress: BC:24:11:00:00:01\n      addresses:\n        - 10.0.0.21/24\n        - 2001:db8::5/64\n";
        let ifs = interfaces(Some(v2), &[("net0".into(), "BC:24:11:00:00:01".into())]);
        assert_eq!(ifs.len(), 2);
        assert_eq!(ifs[1]["hardware-address"], "bc:24:11:00:00:01");
        assert_eq!(ifs[1]["ip-addresses"][0]["ip-address"], "10.0.0.21");
        assert_eq!(ifs[1]["ip-addresses"][1]["ip-address-type"], "ipv6");
        let v1 = "version: 1\nconfig:\n  - type: physical\n    name: eth0\n    subnets:\n      - type: static\n        address: 192.168.1.5\n        netmask: 255.255.255.0\n";
        let ifs = interfaces(Some(v1), &[("net0".into(), "BC:24:11:00:00:02".into())]);
        assert_eq!(ifs[1]["ip-addresses"][0]["prefix"], 24);
        assert!(read_file(b"not an iso", "network-config").is_none());
    }
}
