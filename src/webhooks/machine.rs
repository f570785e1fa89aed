//! capmox's ProxmoxMachine webhooks. Defaulting: when no NIC says `defaultIPv4` (or
//! `defaultIPv6`) at all, `net0` gets `true`. Validation on create and update: NIC names must be
//! `net0..net(n-1)`, at most one default NIC per family, `mtu` 1 or ≥ 1280, `linkMtu` ≥ 1280,
//! every NIC routing policy has a table, `default`/`all` placeholders need a derivable family
//! (`is6`), VRF rules use the VRF's table; on update `tags are immutable`. Field paths and
//! messages are capmox's (Go-style paths such as `spec.network.networkDevices.0.name` and
//! `spec.network.VirtualNetworkDevices.VRFs.0.Table`).
//!
//! Added for our fields: `cloudInitStorage` must be a Proxmox storage ID, and
//! `networkConfigFormat: v2` with routing policies or VRFs draws a warning (Talos ignores them).

use std::net::IpAddr;

use capmox_api::v1alpha2::{
    NetworkConfigFormat, NetworkDevice, ProxmoxMachine, ProxmoxMachineSpec, RouteSpec, RoutingPolicySpec,
    VrfDevice,
};
use ipnet::IpNet;
use serde_json::{Value, json};

use super::field::{FieldError, Verdict, bad_request, invalid};

const KIND: &str = "ProxmoxMachine";

/// JSON Patch operations defaulting `obj` (a v1alpha2 ProxmoxMachine as JSON): `defaultIPv4`
/// and `defaultIPv6` set on `net0` (the first NIC when none is called `net0`) when no NIC sets
/// the field, `true` or `false`. Nothing for a machine without NICs.
pub fn default_patch(obj: &Value) -> Vec<Value> {
    let Some(devices) = obj
        .pointer("/spec/network/networkDevices")
        .and_then(Value::as_array)
        .filter(|d| !d.is_empty())
    else {
        return Vec::new();
    };
    let target = devices
        .iter()
        .position(|d| d.get("name").and_then(Value::as_str) == Some("net0"))
        .unwrap_or(0);
    let mut ops = Vec::new();
    for field in ["defaultIPv4", "defaultIPv6"] {
        let any_set = devices.iter().any(|d| d.get(field).is_some_and(|v| !v.is_null()));
        if !any_set {
            ops.push(json!({
                "op": "add",
                "path": format!("/spec/network/networkDevices/{target}/{field}"),
                "value": true,
            }));
        }
    }
    ops
}

fn net_offset(name: &str) -> Option<u32> {
    name.strip_prefix("net")?.parse().ok()
}

fn is_placeholder(s: Option<&str>) -> bool {
    s.is_some_and(|s| s.eq_ignore_ascii_case("default") || s.eq_ignore_ascii_case("all"))
}

fn is_concrete(s: Option<&str>) -> bool {
    s.is_some_and(|s| s.parse::<IpNet>().is_ok() || s.parse::<IpAddr>().is_ok())
}

fn policy_placeholder(p: &RoutingPolicySpec) -> Result<(), String> {
    let placeholder = is_placeholder(p.to.as_deref()) || is_placeholder(p.from.as_deref());
    let concrete = is_concrete(p.to.as_deref()) || is_concrete(p.from.as_deref());
    if placeholder && !concrete && p.is6.is_none() {
        return Err(
            "is6 must be set when 'to'/'from' is a placeholder and neither provides an address family".into(),
        );
    }
    Ok(())
}

fn routes(routes: &[RouteSpec]) -> Result<(), String> {
    for (i, r) in routes.iter().enumerate() {
        if is_placeholder(r.to.as_deref()) && !is_concrete(r.via.as_deref()) && r.is6.is_none() {
            return Err(format!(
                "route [{i}]: is6 must be set when 'to' is a placeholder and 'via' is unset"
            ));
        }
    }
    Ok(())
}

fn routing_policy(policies: &[RoutingPolicySpec]) -> Result<(), String> {
    for (i, p) in policies.iter().enumerate() {
        if p.table.is_none() {
            return Err(format!("routing policy [{i}] requires a table"));
        }
        policy_placeholder(p).map_err(|e| format!("routing policy [{i}]: {e}"))?;
    }
    Ok(())
}

fn vrf(vrf: &VrfDevice) -> Result<(), String> {
    for p in vrf.routing_policy.as_deref().unwrap_or_default() {
        if let Some(table) = p.table
            && table != vrf.table
        {
            return Err(format!(
                "VRF {}: device/rule routing table mismatch {} != {table}",
                vrf.name, vrf.table
            ));
        }
        policy_placeholder(p).map_err(|e| format!("VRF {}: {e}", vrf.name))?;
    }
    routes(vrf.routes.as_deref().unwrap_or_default()).map_err(|e| format!("VRF {}: {e}", vrf.name))
}

fn device_error(i: usize, field: &str, device: &NetworkDevice, detail: String) -> FieldError {
    let path = if field.is_empty() {
        format!("spec.network.networkDevices.{i}")
    } else {
        format!("spec.network.networkDevices.{i}.{field}")
    };
    FieldError::invalid(path, serde_json::to_value(device).unwrap_or(Value::Null), detail)
}

/// capmox's `validateNetworks`: the first error, in capmox's order. NICs are checked in the
/// order of their slot numbers (capmox sorts the names as strings, which rejects `net10` in a
/// list of eleven consecutive NICs).
pub fn network_error(spec: &ProxmoxMachineSpec) -> Option<FieldError> {
    let mut devices: Vec<&NetworkDevice> = spec.network.network_devices.iter().collect();
    devices.sort_by_key(|d| net_offset(d.name.as_deref().unwrap_or("net0")).unwrap_or(u32::MAX));
    let (mut v4, mut v6) = (0, 0);
    for (i, d) in devices.into_iter().enumerate() {
        let name = d.name.as_deref().unwrap_or("net0");
        if net_offset(name).and_then(|o| usize::try_from(o).ok()) != Some(i) {
            return Some(FieldError::invalid(
                format!("spec.network.networkDevices.{i}.name"),
                json!(name),
                "Non-consecutive proxmox interface name",
            ));
        }
        v4 += usize::from(d.default_ipv4 == Some(true));
        v6 += usize::from(d.default_ipv6 == Some(true));
        if v4 > 1 || v6 > 1 {
            return Some(device_error(
                i,
                "",
                d,
                "More than one default IPv4/IPv6 interface in NetworkDevices".into(),
            ));
        }
        if let Some(mtu) = d.mtu
            && mtu != 1
            && mtu < 1280
        {
            return Some(device_error(
                i,
                "mtu",
                d,
                format!("mtu must be at least 1280 or 1, but was {mtu}"),
            ));
        }
        if let Some(mtu) = d.link_mtu
            && mtu < 1280
        {
            return Some(device_error(
                i,
                "linkMtu",
                d,
                format!("mtu must be at least 1280, but was {mtu}"),
            ));
        }
        if let Err(e) = routing_policy(d.routing_policy.as_deref().unwrap_or_default()) {
            return Some(device_error(i, "routingPolicy", d, e));
        }
        if let Err(e) = routes(d.routes.as_deref().unwrap_or_default()) {
            return Some(device_error(i, "routes", d, e));
        }
    }
    for (i, v) in spec
        .network
        .vrfs
        .as_deref()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        if let Err(e) = vrf(v) {
            return Some(FieldError::invalid(
                format!("spec.network.VirtualNetworkDevices.VRFs.{i}.Table"),
                serde_json::to_value(v).unwrap_or(Value::Null),
                e,
            ));
        }
    }
    None
}

/// Proxmox storage IDs (`pve-storage-id`): a letter, then letters, digits, `-`, `_`, `.`,
/// ending in a letter or digit.
fn is_storage_id(s: &str) -> bool {
    let b = s.as_bytes();
    b.first().is_some_and(u8::is_ascii_alphabetic)
        && b.last().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
}

/// Checks of our additive fields at `prefix` (`spec` or `spec.template.spec`).
pub fn additive_errors(spec: &ProxmoxMachineSpec, prefix: &str) -> Option<FieldError> {
    let storage = spec.cloud_init_storage.as_deref()?;
    (!is_storage_id(storage)).then(|| {
        FieldError::invalid(
            format!("{prefix}.cloudInitStorage"),
            json!(storage),
            "must be a Proxmox storage ID: a letter, then letters, digits, '-', '_' or '.', ending in a letter or digit",
        )
    })
}

/// Warnings about our additive fields at `prefix`.
pub fn additive_warnings(spec: &ProxmoxMachineSpec, prefix: &str) -> Vec<String> {
    let policies = spec
        .network
        .network_devices
        .iter()
        .any(|d| d.routing_policy.as_ref().is_some_and(|p| !p.is_empty()));
    let vrfs = spec.network.vrfs.as_ref().is_some_and(|v| !v.is_empty());
    if spec.network_config_format == Some(NetworkConfigFormat::V2) && (policies || vrfs) {
        return vec![format!(
            "{prefix}.networkConfigFormat: v2 is meant for Talos, which ignores routingPolicy and vrfs"
        )];
    }
    Vec::new()
}

fn validate(m: &ProxmoxMachine, verb: &str) -> Verdict {
    let name = m.metadata.name.as_deref().unwrap_or_default();
    if let Some(e) = network_error(&m.spec) {
        return Verdict::deny(invalid(KIND, name, &[e]))
            .warn(format!("cannot {verb} proxmox machine {name}"));
    }
    if let Some(e) = additive_errors(&m.spec, "spec") {
        return Verdict::deny(invalid(KIND, name, &[e]));
    }
    Verdict::allow().warn_all(additive_warnings(&m.spec, "spec"))
}

/// ProxmoxMachine create.
pub fn validate_create(m: &ProxmoxMachine) -> Verdict {
    validate(m, "create")
}

/// ProxmoxMachine update.
pub fn validate_update(old: &ProxmoxMachine, new: &ProxmoxMachine) -> Verdict {
    if old.spec.tags != new.spec.tags {
        return Verdict::deny(bad_request("tags are immutable"));
    }
    validate(new, "update")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn machine(network: Value) -> ProxmoxMachine {
        serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
            "metadata": {"name": "m"},
            "spec": {"network": network},
        }))
        .unwrap()
    }

    #[test]
    fn defaults_only_when_no_nic_has_an_opinion() {
        let obj = json!({"spec": {"network": {"networkDevices": [{"name": "net1"}, {"name": "net0"}]}}});
        let ops = default_patch(&obj);
        assert_eq!(ops[0]["path"], "/spec/network/networkDevices/1/defaultIPv4");
        assert_eq!(ops.len(), 2);
        let opinion = json!({"spec": {"network": {"networkDevices": [{"name": "net0"}, {"name": "net1", "defaultIPv4": false}]}}});
        let ops = default_patch(&opinion);
        assert_eq!(ops.len(), 1);
        assert_eq!(ops[0]["path"], "/spec/network/networkDevices/0/defaultIPv6");
        assert!(default_patch(&json!({"spec": {}})).is_empty());
    }

    #[test]
    fn network_rules_in_capmox_order() {
        let gap = machine(json!({"networkDevices": [{"name": "net0"}, {"name": "net2"}]}));
        let e = network_error(&gap.spec).unwrap();
        assert_eq!(e.field, "spec.network.networkDevices.1.name");
        assert_eq!(e.detail, "Non-consecutive proxmox interface name");
        let eleven: Vec<Value> = (0..11).map(|i| json!({"name": format!("net{i}")})).collect();
        assert!(network_error(&machine(json!({"networkDevices": eleven})).spec).is_none());
        let mtu = machine(json!({"networkDevices": [{"name": "net0", "mtu": 1000}]}));
        assert_eq!(
            network_error(&mtu.spec).unwrap().detail,
            "mtu must be at least 1280 or 1, but was 1000"
        );
        let vrf = machine(json!({"networkDevices": [{"name": "net0"}],
            "vrfs": [{"name": "vrf-a", "table": 500, "routingPolicy": [{"table": 501, "to": "10.0.0.0/8"}]}]}));
        let e = network_error(&vrf.spec).unwrap();
        assert_eq!(e.field, "spec.network.VirtualNetworkDevices.VRFs.0.Table");
        assert_eq!(
            e.detail,
            "VRF vrf-a: device/rule routing table mismatch 500 != 501"
        );
        let route = machine(json!({"networkDevices": [{"name": "net0", "routes": [{"to": "default"}]}]}));
        assert_eq!(
            network_error(&route.spec).unwrap().detail,
            "route [0]: is6 must be set when 'to' is a placeholder and 'via' is unset"
        );
        let via = machine(
            json!({"networkDevices": [{"name": "net0", "routes": [{"to": "default", "via": "10.0.0.1"}]}]}),
        );
        assert!(network_error(&via.spec).is_none());
    }

    #[test]
    fn storage_ids() {
        assert!(is_storage_id("local"));
        assert!(is_storage_id("cephfs-iso.2"));
        assert!(!is_storage_id("2local"));
        assert!(!is_storage_id("local/iso"));
        assert!(!is_storage_id("local-"));
    }
}
