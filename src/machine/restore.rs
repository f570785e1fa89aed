//! A ProxmoxMachine that comes back without what it had recorded — restored from a backup (new
//! UID, maybe no status), moved by `clusterctl move` (no status) — takes up its VM, its claims and
//! its addresses where they are. The lifecycle adopts the VM from what survives (the VMID and the
//! provider ID in `spec`, see [`super::record::identity`]); this module keeps the addresses honest:
//! the VM keeps the address it was configured with, and when IPAM now holds another one for the
//! machine (its claim was collected with the old UID and allocated anew) the machine says so in
//! the `IPAddressesConsistent` condition instead of rewriting the running VM's network.

use std::net::{IpAddr, Ipv4Addr};

use capmox_api::v1alpha2::ProxmoxMachine;

use crate::conditions::{self, Desired};
use crate::ipam::{IpFamily, Resolution};

/// Condition type: the addresses IPAM holds for the machine are the ones its VM was configured
/// with. Present only while they are not (status `False`).
pub const ADDRESSES_CONSISTENT_CONDITION: &str = "IPAddressesConsistent";
/// Reason of [`ADDRESSES_CONSISTENT_CONDITION`] when they differ (also the Warning event's).
pub const ADDRESS_MISMATCH_REASON: &str = "IPAddressMismatch";

/// The IPv4 addresses the VM was configured with, as its `ip_net0_<ip>` tags say (sorted).
pub fn configured_ipv4(tags: &[String]) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = tags
        .iter()
        .filter_map(|t| t.strip_prefix("ip_net0_")?.parse().ok())
        .collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// The default-pool IPv4 addresses IPAM resolved (sorted).
fn ipam_ipv4(r: &Resolution) -> Vec<Ipv4Addr> {
    let mut out: Vec<Ipv4Addr> = r
        .resolved
        .iter()
        .filter(|a| a.is_default_pool && a.family == IpFamily::V4)
        .filter_map(|a| match a.address {
            IpAddr::V4(v4) => Some(v4),
            IpAddr::V6(_) => None,
        })
        .collect();
    out.sort_unstable();
    out
}

fn list(ips: &[Ipv4Addr]) -> String {
    ips.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
}

/// When the VM (which ran with the machine's bootstrap data) carries address tags other than the
/// default IPv4 addresses IPAM resolved: the resolution as the VM has it (its addresses in place
/// of IPAM's, in the same order) and the message of the condition. `None`: they agree, or the VM
/// carries no address tag to compare with.
pub fn vm_addresses(resolution: &Resolution, vm_tags: &[String]) -> Option<(Resolution, String)> {
    let vm = configured_ipv4(vm_tags);
    let ipam = ipam_ipv4(resolution);
    if vm.is_empty() || vm == ipam {
        return None;
    }
    let mut shown = resolution.clone();
    if vm.len() == ipam.len() {
        // IPAM's addresses in resolution order, each replaced by the VM's of the same rank.
        for a in shown
            .resolved
            .iter_mut()
            .filter(|a| a.is_default_pool && a.family == IpFamily::V4)
        {
            if let IpAddr::V4(v4) = a.address
                && let Some(rank) = ipam.iter().position(|x| *x == v4)
            {
                a.address = IpAddr::V4(vm[rank]);
            }
        }
    }
    let message = format!(
        "IPAM holds {} for this machine, but its VM was configured with {} (its ip_net0_ tags) and \
         keeps it: the running VM's network is not rewritten and the status shows the VM's address. \
         The pool no longer reserves {} for this machine and may hand it out again: replace the \
         machine, or release the claim's address so it can be claimed anew",
        list(&ipam),
        list(&vm),
        list(&vm),
    );
    Some((shown, message))
}

/// Shows `mismatch` in the `IPAddressesConsistent` condition (removed when `None`); whether the
/// condition newly says so (for a Warning event).
pub fn show_mismatch(pm: &mut ProxmoxMachine, mismatch: Option<&str>) -> bool {
    let generation = pm.metadata.generation;
    let Some(message) = mismatch else {
        if let Some(list) = pm.status.as_mut().and_then(|s| s.conditions.as_mut()) {
            list.retain(|c| c.type_ != ADDRESSES_CONSISTENT_CONDITION);
        }
        return false;
    };
    let status = pm.status.get_or_insert_with(Default::default);
    let list = status.conditions.get_or_insert_with(Vec::new);
    let before = conditions::get(list, ADDRESSES_CONSISTENT_CONDITION).map(|c| c.message.clone());
    let desired = Desired::falsy(ADDRESSES_CONSISTENT_CONDITION, ADDRESS_MISMATCH_REASON, message);
    conditions::set(list, &desired, generation, &super::now());
    before.as_deref() != Some(message)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ipam::ResolvedAddress;
    use capmox_api::capi::ipam_claims::IpPoolReference;

    fn resolved(addr: &str, default: bool) -> ResolvedAddress {
        let address: IpAddr = addr.parse().unwrap();
        ResolvedAddress {
            net: "net0".into(),
            device_index: 0,
            pool_offset: 0,
            pool: IpPoolReference::default(),
            family: if address.is_ipv4() {
                IpFamily::V4
            } else {
                IpFamily::V6
            },
            address,
            prefix: 24,
            gateway: None,
            is_default_pool: default,
            ip_address_name: "m1-net0-00-inet".into(),
            metric: None,
        }
    }

    fn resolution(addrs: &[(&str, bool)]) -> Resolution {
        Resolution {
            resolved: addrs.iter().map(|(a, d)| resolved(a, *d)).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn tags_name_the_configured_addresses() {
        let tags = [
            "k8s".into(),
            "ip_net0_10.0.0.7".into(),
            "ip_net0_x".into(),
            "ip_net0_10.0.0.5".into(),
        ];
        assert_eq!(
            configured_ipv4(&tags),
            vec![Ipv4Addr::new(10, 0, 0, 5), Ipv4Addr::new(10, 0, 0, 7)]
        );
    }

    #[test]
    fn the_vm_keeps_its_address_and_the_mismatch_is_said() {
        let r = resolution(&[("10.0.0.9", true), ("fd00::9", true), ("10.1.0.9", false)]);
        assert_eq!(vm_addresses(&r, &["ip_net0_10.0.0.9".into()]), None);
        assert_eq!(
            vm_addresses(&r, &["other".into()]),
            None,
            "no tag: nothing to compare"
        );
        let (shown, message) = vm_addresses(&r, &["ip_net0_10.0.0.5".into()]).unwrap();
        let shown: Vec<String> = shown.resolved.iter().map(|a| a.address.to_string()).collect();
        assert_eq!(shown, ["10.0.0.5", "fd00::9", "10.1.0.9"]);
        assert!(message.contains("IPAM holds 10.0.0.9"), "{message}");
        assert!(message.contains("configured with 10.0.0.5"), "{message}");
    }

    #[test]
    fn the_condition_comes_and_goes() {
        let mut pm = ProxmoxMachine::default();
        assert!(show_mismatch(&mut pm, Some("differs")));
        assert!(!show_mismatch(&mut pm, Some("differs")), "said once");
        let c = pm.condition(ADDRESSES_CONSISTENT_CONDITION).unwrap();
        assert_eq!(
            (c.status.as_str(), c.reason.as_str()),
            ("False", ADDRESS_MISMATCH_REASON)
        );
        assert!(!show_mismatch(&mut pm, None));
        assert!(pm.condition(ADDRESSES_CONSISTENT_CONDITION).is_none());
    }
}
