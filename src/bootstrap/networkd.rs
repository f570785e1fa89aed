//! systemd-networkd units for the Ignition path, rendered from the same network model as `network-config`.
//!
//! Names follow capmox: `NN-vrfN.netdev` per VRF (counting VRFs), `NN-ethN.network` per NIC and
//! `NN-vrfN.network` per VRF (counting all devices, NICs first). capmox returns them from a Go map, so its
//! order is random; we return them sorted by name.

use std::fmt::Write as _;

use super::error::BootstrapError;
use super::model::{Device, FibRule, NetworkModel, Route, Vrf};
use super::validate::validate_network;

/// One networkd unit: file name and contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NetworkdUnit {
    /// File name under `/etc/systemd/network`.
    pub name: String,
    /// Unit text.
    pub contents: String,
}

/// Validates `net` and renders its networkd units, sorted by name.
pub fn render_networkd_units(net: &NetworkModel) -> Result<Vec<NetworkdUnit>, BootstrapError> {
    validate_network(net)?;
    let mut units = Vec::new();
    for (n, vrf) in net.vrfs.iter().enumerate() {
        units.push(NetworkdUnit {
            name: format!("{n:02}-vrf{n}.netdev"),
            contents: format!(
                "[NetDev]\nName={}\nKind=vrf\n[VRF]\nTable={}\n",
                vrf.name, vrf.table
            ),
        });
    }
    for (i, dev) in net.devices.iter().enumerate() {
        let vrf = net.vrfs.iter().find(|v| v.interfaces.contains(&dev.guest_name()));
        units.push(NetworkdUnit {
            name: format!("{i:02}-eth{i}.network"),
            contents: ethernet_unit(dev, vrf),
        });
    }
    for (k, vrf) in net.vrfs.iter().enumerate() {
        let i = net.devices.len() + k;
        units.push(NetworkdUnit {
            name: format!("{i:02}-vrf{i}.network"),
            contents: vrf_unit(vrf),
        });
    }
    units.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(units)
}

fn ethernet_unit(dev: &Device, vrf: Option<&Vrf>) -> String {
    let mut s = format!("[Match]\nMACAddress={}", dev.mac);
    if let Some(mtu) = dev.link_mtu {
        let _ = write!(s, "\n[Link]\nMTUBytes={mtu}");
    }
    s.push_str("\n[Network]");
    if let Some(vrf) = vrf {
        let _ = write!(s, "\nVRF={}", vrf.name);
    }
    match (dev.dhcp4, dev.dhcp6) {
        (true, true) => s.push_str("\nDHCP=yes"),
        (true, false) => s.push_str("\nDHCP=ipv4"),
        (false, true) => s.push_str("\nDHCP=ipv6"),
        (false, false) => {}
    }
    if dev.accept_ra {
        s.push_str("\nIPv6AcceptRA=yes");
    }
    for dns in &dev.dns_servers {
        let _ = write!(s, "\nDNS={dns}");
    }
    for a in &dev.addresses {
        let _ = write!(s, "\n[Address]\nAddress={}", a.cidr());
    }
    write_routes(&mut s, &dev.effective_routes());
    write_rules(&mut s, &dev.routing_policy, None);
    s.push('\n');
    s
}

fn vrf_unit(vrf: &Vrf) -> String {
    let mut s = format!("[Match]\nName={}", vrf.name);
    // capmox moves every VRF route into the VRF's table.
    let routes: Vec<Route> = vrf
        .routes
        .iter()
        .map(|r| Route {
            table: Some(vrf.table),
            ..r.clone()
        })
        .collect();
    write_routes(&mut s, &routes);
    write_rules(&mut s, &vrf.routing_policy, Some(vrf.table));
    s.push('\n');
    s
}

fn write_routes(s: &mut String, routes: &[Route]) {
    for r in routes {
        s.push_str("\n[Route]");
        if let Some(to) = r.to {
            let _ = write!(s, "\nDestination={to}");
        }
        if let Some(via) = r.via {
            let _ = write!(s, "\nGateway={via}");
        }
        if let Some(metric) = r.metric {
            let _ = write!(s, "\nMetric={metric}");
        }
        if let Some(table) = r.table {
            let _ = write!(s, "\nTable={table}");
        }
    }
}

fn write_rules(s: &mut String, rules: &[FibRule], vrf_table: Option<i32>) {
    for r in rules {
        s.push_str("\n[RoutingPolicyRule]");
        if let Some(to) = r.to {
            let _ = write!(s, "\nTo={to}");
        }
        if let Some(from) = r.from {
            let _ = write!(s, "\nFrom={from}");
        }
        if let Some(priority) = r.priority {
            let _ = write!(s, "\nPriority={priority}");
        }
        match (r.table, vrf_table) {
            (None, Some(table)) | (Some(table), _) => {
                let _ = write!(s, "\nTable={table}");
            }
            (None, None) => {}
        }
    }
}
