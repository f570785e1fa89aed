//! The guest facts an owner reports of a running VM, read through the QEMU guest agent once per
//! boot: the usable addresses of its NICs (matched by MAC) and its OS. Two requests when the
//! agent answers (`get-osinfo`, `network-get-interfaces`); one while it does not yet.

use std::net::IpAddr;

use super::GuestFacts;
use crate::proxmox::ErrorClass;
use crate::proxmox::types::{GuestNetworkInterface, OsInfo, VmConfig};
use crate::proxmox::view::ProxmoxView;
use crate::vm::decide::VmFacts;
use crate::vm::dynamic::usable;
use crate::vm::error::VmError;

/// What one read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GuestRead {
    /// The agent does not answer yet.
    NotReady,
    /// It answered, but some NIC has no usable address yet.
    Partial(GuestFacts),
    /// Every NIC has an address.
    Complete(GuestFacts),
}

/// The OS as shown: the pretty name, else name and version.
pub fn os_name(info: &OsInfo) -> Option<String> {
    info.pretty_name.clone().filter(|s| !s.is_empty()).or_else(|| {
        let name = info.name.clone()?;
        Some(match &info.version {
            Some(v) => format!("{name} {v}"),
            None => name,
        })
    })
}

/// The usable addresses of `nics` (`net0`, …, by the MACs `config` gives them; empty: every
/// interface but loopback), IPv4 first, and whether every NIC has one.
pub fn addresses(
    nics: &[String],
    config: &VmConfig,
    ifaces: &[GuestNetworkInterface],
) -> (Vec<IpAddr>, bool) {
    let ips_of = |iface: &GuestNetworkInterface| -> Vec<IpAddr> {
        iface
            .ip_addresses
            .iter()
            .filter_map(|a| a.ip_address.parse::<IpAddr>().ok())
            .filter(|ip| usable(*ip))
            .collect()
    };
    let mut all = Vec::new();
    let mut complete = true;
    if nics.is_empty() {
        for iface in ifaces.iter().filter(|i| i.name != "lo") {
            all.extend(ips_of(iface));
        }
    }
    for net in nics {
        let mac = net
            .strip_prefix("net")
            .and_then(|i| i.parse::<u32>().ok())
            .and_then(|i| config.nets.get(&i))
            .and_then(|d| d.mac.clone());
        let iface = mac.and_then(|m| {
            ifaces.iter().find(|i| {
                i.hardware_address
                    .as_deref()
                    .is_some_and(|h| h.eq_ignore_ascii_case(&m))
            })
        });
        let ips = iface.map(ips_of).unwrap_or_default();
        complete &= !ips.is_empty();
        all.extend(ips);
    }
    all.sort_by_key(|ip| ip.is_ipv6());
    all.dedup();
    (all, complete)
}

fn agent_down(e: &crate::proxmox::Error) -> bool {
    matches!(
        e.class(),
        ErrorClass::AgentNotReady | ErrorClass::AgentNotConfigured
    )
}

/// Reads the guest facts of `vm` once.
pub async fn read(view: &ProxmoxView, vm: &VmFacts, nics: &[String]) -> Result<GuestRead, VmError> {
    let client = view.client();
    let os = match client.agent_os_info(&vm.node, vm.vmid).await {
        Ok(info) => os_name(&info),
        Err(e) if agent_down(&e) => return Ok(GuestRead::NotReady),
        Err(e) => {
            return Err(VmError::proxmox(format!(
                "querying the guest agent of VM {}",
                vm.vmid
            ))(e));
        }
    };
    let ifaces = match client.agent_network_interfaces(&vm.node, vm.vmid).await {
        Ok(i) => i,
        Err(e) if agent_down(&e) => return Ok(GuestRead::NotReady),
        Err(e) => {
            return Err(VmError::proxmox(format!(
                "reading the network interfaces of VM {}",
                vm.vmid
            ))(e));
        }
    };
    let config = if nics.is_empty() {
        None
    } else {
        view.config(&vm.node, vm.vmid).await?
    };
    let (ips, complete) = addresses(nics, config.as_deref().unwrap_or(&vm.config), &ifaces);
    let facts = GuestFacts { addresses: ips, os };
    Ok(if complete {
        GuestRead::Complete(facts)
    } else {
        GuestRead::Partial(facts)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn addresses_by_mac_ipv4_first() {
        let config = VmConfig::from(
            serde_json::from_value::<std::collections::BTreeMap<String, serde_json::Value>>(json!({
                "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
                "net1": "virtio=BC:24:11:00:00:02,bridge=vmbr0"
            }))
            .unwrap(),
        );
        let ifaces: Vec<GuestNetworkInterface> = serde_json::from_value(json!([
            {"name": "lo", "hardware-address": "00:00:00:00:00:00",
             "ip-addresses": [{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8}]},
            {"name": "eth0", "hardware-address": "bc:24:11:00:00:01", "ip-addresses": [
                {"ip-address": "fe80::1", "ip-address-type": "ipv6", "prefix": 64},
                {"ip-address": "fd00::5", "ip-address-type": "ipv6", "prefix": 64},
                {"ip-address": "10.0.0.5", "ip-address-type": "ipv4", "prefix": 24}]},
            {"name": "eth1", "hardware-address": "bc:24:11:00:00:02", "ip-addresses": []}
        ]))
        .unwrap();
        let (ips, complete) = addresses(&["net0".into()], &config, &ifaces);
        assert_eq!(
            ips,
            ["10.0.0.5".parse::<IpAddr>().unwrap(), "fd00::5".parse().unwrap()]
        );
        assert!(complete);
        let (_, complete) = addresses(&["net0".into(), "net1".into()], &config, &ifaces);
        assert!(!complete, "net1 has no address yet");
        let (ips, _) = addresses(&[], &config, &ifaces);
        assert_eq!(ips.len(), 2, "every interface but lo");
        let info = OsInfo {
            name: Some("Ubuntu".into()),
            version: Some("24.04".into()),
            ..OsInfo::default()
        };
        assert_eq!(os_name(&info).as_deref(), Some("Ubuntu 24.04"));
    }
}
