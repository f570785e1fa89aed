//! NoCloud `network-config`: capmox's netplan v2 document, byte for byte, and a Talos-friendly shape.
//!
//! capmox renders (Go `text/template`) a document with a top-level `network:` key, two-space indentation,
//! single-quoted addresses, name servers and VRF interfaces, and routes/rules as one-line flow mappings
//! (`- { "to": "0.0.0.0/0",  "via": "10.0.0.1",  "metric": 100, }`), without a trailing newline.
//!
//! Talos' nocloud platform (before it learnt to unwrap `network:`) decodes the document straight into
//! `{version, ethernets, ...}`; the wrapped form yields version 0 and fails with
//! `network-config metadata version=0 is not supported` (capmox #51/#94). A document whose top level *is*
//! the netplan v2 mapping (`version: 2`, `ethernets:` ...) is accepted by every Talos version and by
//! cloud-init, so [`NetworkConfigFormat::NetplanV2Bare`] renders exactly that.

use std::fmt::Write as _;

use super::error::BootstrapError;
use super::model::{FibRule, NetworkModel, Route};
use super::validate::validate_network;

/// `network-config` of the Ignition path: an empty v1 document (networkd units carry the network).
pub const EMPTY_NETWORK_V1: &str = "version: 1\nconfig: []";

/// Which shape of netplan v2 `network-config` to render.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum NetworkConfigFormat {
    /// capmox's document: `network:` at the top, the v2 mapping below it.
    #[default]
    CapmoxV2,
    /// The same v2 mapping at the top level (`version: 2` first): accepted by cloud-init and Talos.
    ///
    /// Talos reads `ethernets` (matched by MAC), `addresses`, `routes` (each needs `to` and `via`),
    /// `nameservers` and `mtu`; it ignores `routing-policy` and `vrfs`.
    NetplanV2Bare,
}

/// Validates `net` (see [`validate_network`]) and renders its `network-config`.
pub fn render_network_config(
    net: &NetworkModel,
    format: NetworkConfigFormat,
) -> Result<String, BootstrapError> {
    validate_network(net)?;
    let (mut out, base) = match format {
        NetworkConfigFormat::CapmoxV2 => (String::from("network:\n"), 2),
        NetworkConfigFormat::NetplanV2Bare => (String::new(), 0),
    };
    let i = |n: usize| " ".repeat(base + n);

    let _ = write!(out, "{0}version: 2\n{0}renderer: networkd\n{0}ethernets:", i(0));
    for dev in &net.devices {
        let _ = write!(out, "\n{}{}:", i(2), dev.guest_name());
        let _ = write!(
            out,
            "\n{}match:\n{}macaddress: {}",
            i(4),
            i(6),
            mac_scalar(&dev.mac)
        );
        let _ = write!(out, "\n{0}dhcp4: {1}\n{0}dhcp6: {2}", i(4), dev.dhcp4, dev.dhcp6);
        if dev.accept_ra {
            let _ = write!(out, "\n{}accept-ra: true", i(4));
        }
        if !dev.addresses.is_empty() {
            let _ = write!(out, "\n{}addresses:", i(4));
            for a in &dev.addresses {
                let _ = write!(out, "\n{}- {}", i(6), quoted(&a.cidr()));
            }
        }
        write_routes(&mut out, &dev.effective_routes(), base);
        write_rules(&mut out, &dev.routing_policy, base);
        if !dev.dns_servers.is_empty() {
            let _ = write!(out, "\n{}nameservers:\n{}addresses:", i(4), i(6));
            for dns in &dev.dns_servers {
                let _ = write!(out, "\n{}- {}", i(8), quoted(dns));
            }
        }
        if let Some(mtu) = dev.link_mtu {
            let _ = write!(out, "\n{}mtu: {}", i(4), mtu);
        }
    }
    if !net.vrfs.is_empty() {
        let _ = write!(out, "\n{}vrfs:", i(0));
    }
    for vrf in &net.vrfs {
        let _ = write!(
            out,
            "\n{}{}:\n{}table: {}",
            i(2),
            super::safe::yaml_scalar(&vrf.name),
            i(4),
            vrf.table
        );
        write_routes(&mut out, &vrf.routes, base);
        write_rules(&mut out, &vrf.routing_policy, base);
        if !vrf.interfaces.is_empty() {
            let _ = write!(out, "\n{}interfaces:", i(4));
            for iface in &vrf.interfaces {
                let _ = write!(out, "\n{}- {}", i(6), quoted(iface));
            }
        }
    }
    Ok(out)
}

fn write_routes(out: &mut String, routes: &[Route], base: usize) {
    if routes.is_empty() {
        return;
    }
    let _ = write!(out, "\n{}routes:", " ".repeat(base + 4));
    for r in routes {
        let mut fields = Vec::new();
        if let Some(to) = r.to {
            fields.push(format!("\"to\": \"{to}\""));
        }
        if let Some(via) = r.via {
            fields.push(format!("\"via\": \"{via}\""));
        }
        if let Some(metric) = r.metric {
            fields.push(format!("\"metric\": {metric}"));
        }
        if let Some(table) = r.table {
            fields.push(format!("\"table\": {table}"));
        }
        let _ = write!(out, "\n{}- {}", " ".repeat(base + 6), flow_map(&fields));
    }
}

fn write_rules(out: &mut String, rules: &[FibRule], base: usize) {
    if rules.is_empty() {
        return;
    }
    let _ = write!(out, "\n{}routing-policy:", " ".repeat(base + 4));
    for r in rules {
        let mut fields = Vec::new();
        if let Some(to) = r.to {
            fields.push(format!("\"to\": \"{to}\""));
        }
        if let Some(from) = r.from {
            fields.push(format!("\"from\": \"{from}\""));
        }
        if let Some(priority) = r.priority {
            fields.push(format!("\"priority\": {priority}"));
        }
        if let Some(table) = r.table {
            fields.push(format!("\"table\": {table}"));
        }
        let _ = write!(out, "\n{}- {}", " ".repeat(base + 6), flow_map(&fields));
    }
}

/// capmox's flow mapping: `{ "a": 1,  "b": 2, }` (each field renders as ` "k": v, `).
fn flow_map(fields: &[String]) -> String {
    let mut s = String::from("{");
    for f in fields {
        s.push(' ');
        s.push_str(f);
        s.push_str(", ");
    }
    s.push('}');
    s
}

/// `'value'` with YAML single-quote escaping (capmox does not escape; for addresses it makes no difference).
fn quoted(value: &str) -> String {
    format!("'{}'", value.replace('\'', "''"))
}

/// capmox writes the MAC plain. A MAC of digits only (e.g. `52:54:00:12:34:56`) would read as a YAML 1.1
/// base-60 integer in cloud-init's PyYAML, so that one case is single-quoted; every MAC with a hex letter
/// (Proxmox's own OUI `BC:24:11` included) stays byte-identical to capmox.
fn mac_scalar(mac: &str) -> String {
    if mac.chars().all(|c| c.is_ascii_digit() || c == ':') {
        quoted(mac)
    } else {
        mac.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flow_map_matches_capmox_spacing() {
        let f = vec!["\"to\": \"0.0.0.0/0\"".to_owned(), "\"metric\": 100".to_owned()];
        assert_eq!(flow_map(&f), "{ \"to\": \"0.0.0.0/0\",  \"metric\": 100, }");
        assert_eq!(flow_map(&[]), "{}");
    }

    #[test]
    fn digit_only_mac_is_quoted() {
        assert_eq!(mac_scalar("52:54:00:12:34:56"), "'52:54:00:12:34:56'");
        assert_eq!(mac_scalar("BC:24:11:00:00:01"), "BC:24:11:00:00:01");
    }
}
