//! The v1alpha2 → v1alpha1 side of [`super::proxmox`]: what the API server's defaulting adds before
//! comparing a round trip, NICs moved back to `default`/`additionalDevices` in the source tree so
//! comments follow them, IP pool references marked with their family so the object conversion
//! splits them into `ipv4PoolRef`/`ipv6PoolRef`, and the conversion-data annotation that carries
//! what v1alpha1 has no field for.

use std::collections::BTreeMap;

use capmox_api::v1alpha2;
use serde_json::Value;

use super::tokens::Tokens;
use super::tree::{Entry, Node};

/// Marks the object conversion reads an IP pool's family from (capmox names pools `…inet…` and
/// `…inet6…`; a v1alpha1 NIC has one pool per family).
pub(super) const V4_MARK: &str = "__capmox_inet__";
pub(super) const V6_MARK: &str = "__capmox_inet6__";

/// What the API server's defaulting webhook adds to a v1alpha2 machine (`defaultIPv4`/`defaultIPv6`
/// on `net0`), so that comparing a v1alpha1 round trip with the source sees only real losses.
pub(super) fn apply_machine_defaults(kind: &str, value: &mut Value) {
    let spec_path = match kind {
        "ProxmoxMachine" => "/spec",
        "ProxmoxMachineTemplate" => "/spec/template/spec",
        _ => return,
    };
    let Some(spec) = value.pointer(spec_path).cloned() else {
        return;
    };
    let mut machine = serde_json::json!({ "spec": spec });
    for op in crate::webhooks::machine::default_patch(&machine.clone()) {
        let (Some(path), Some(v)) = (op["path"].as_str(), op.get("value")) else {
            continue;
        };
        let Some((parent, field)) = path.rsplit_once('/') else {
            continue;
        };
        if let Some(o) = machine.pointer_mut(parent).and_then(Value::as_object_mut) {
            o.insert(field.to_owned(), v.clone());
        }
    }
    if let Some(slot) = value.pointer_mut(spec_path) {
        *slot = machine["spec"].take();
    }
}

/// The reverse of [`super::proxmox`]'s `remap_source`: a machine's `network.networkDevices` become `network.default`
/// (the first) and `network.additionalDevices` (the others), so comments and styles follow them.
pub(super) fn remap_source_down(kind: &str, root: &mut Node) {
    let spec_path: &[&str] = match kind {
        "ProxmoxMachine" => &["spec"],
        "ProxmoxMachineTemplate" => &["spec", "template", "spec"],
        _ => return,
    };
    let Some(network) = root
        .get_path_mut(spec_path)
        .and_then(Node::as_map_mut)
        .and_then(|s| s.get_mut("network"))
        .and_then(Node::as_map_mut)
    else {
        return;
    };
    let Some(pos) = network.entries.iter().position(|e| e.key == "networkDevices") else {
        return;
    };
    let devices = network.entries.remove(pos);
    let Node::Seq(mut seq) = devices.value else {
        network.entries.insert(pos, devices);
        return;
    };
    if seq.items.is_empty() {
        return;
    }
    let first = seq.items.remove(0);
    let mut at = pos;
    let mut default = Entry::new("default", first.value);
    default.comments = devices.comments;
    network.entries.insert(at, default);
    at += 1;
    if !seq.items.is_empty() {
        network
            .entries
            .insert(at, Entry::new("additionalDevices", Node::Seq(seq)));
    }
}

/// The conversion-data annotation value holding only `paths` of `value` (a v1alpha2 object):
/// `None` when a path crosses a list or a value holds a clusterctl variable (it could not be
/// restored as written).
pub(super) fn sparse_object(value: &Value, paths: &[String], tokens: &Tokens) -> Option<String> {
    let mut out = serde_json::json!({"apiVersion": value["apiVersion"], "kind": value["kind"]});
    for p in paths {
        if p.contains('[') {
            return None;
        }
        let keys: Vec<&str> = p.trim_start_matches('.').split('.').collect();
        let mut src = value;
        for k in &keys {
            src = src.get(*k)?;
        }
        if tokens.contains_token(&src.to_string()) {
            return None;
        }
        let mut dst = &mut out;
        for k in &keys[..keys.len() - 1] {
            dst = dst
                .as_object_mut()?
                .entry(k.to_string())
                .or_insert_with(|| Value::Object(Default::default()));
        }
        dst.as_object_mut()?
            .insert(keys[keys.len() - 1].to_owned(), src.clone());
    }
    // The annotation must decode as a whole v1alpha2 object; the one required field a machine
    // spec has is its network (no NIC restores nothing).
    let machine_spec = match out["kind"].as_str() {
        Some("ProxmoxMachine") => out.pointer_mut("/spec"),
        Some("ProxmoxMachineTemplate") => out.pointer_mut("/spec/template/spec"),
        _ => None,
    };
    if let Some(Value::Object(spec)) = machine_spec {
        spec.entry("network")
            .or_insert_with(|| serde_json::json!({"networkDevices": []}));
    }
    let mut decoded = out.clone();
    decoded["metadata"] = serde_json::json!({});
    let fits = match out["kind"].as_str() {
        Some("ProxmoxCluster") => serde_json::from_value::<v1alpha2::ProxmoxCluster>(decoded).is_ok(),
        Some("ProxmoxClusterTemplate") => {
            serde_json::from_value::<v1alpha2::ProxmoxClusterTemplate>(decoded).is_ok()
        }
        Some("ProxmoxMachine") => serde_json::from_value::<v1alpha2::ProxmoxMachine>(decoded).is_ok(),
        Some("ProxmoxMachineTemplate") => {
            serde_json::from_value::<v1alpha2::ProxmoxMachineTemplate>(decoded).is_ok()
        }
        _ => false,
    };
    fits.then(|| serde_json::to_string(&out).ok()).flatten()
}

/// Prefixes the names of IP pool references whose family is known with a mark the object
/// conversion splits them by.
pub(super) fn mark_pool_families(value: &mut Value, pool_v6: &BTreeMap<String, bool>) {
    match value {
        Value::Object(o) => {
            if let Some(Value::Array(refs)) = o.get_mut("ipPoolRef") {
                for r in refs {
                    if let Some(Value::String(name)) = r.get_mut("name")
                        && let Some(v6) = pool_v6.get(name.as_str())
                    {
                        *name = format!("{}{name}", if *v6 { V6_MARK } else { V4_MARK });
                    }
                }
            }
            o.values_mut().for_each(|v| mark_pool_families(v, pool_v6));
        }
        Value::Array(a) => a.iter_mut().for_each(|v| mark_pool_families(v, pool_v6)),
        _ => {}
    }
}

/// Takes the marks of [`mark_pool_families`] off again (in the annotation text too).
pub(super) fn unmark_pool_families(value: &mut Value) {
    match value {
        Value::String(s) if s.contains(V4_MARK) || s.contains(V6_MARK) => {
            *s = s.replace(V6_MARK, "").replace(V4_MARK, "");
        }
        Value::Object(o) => o.values_mut().for_each(unmark_pool_families),
        Value::Array(a) => a.iter_mut().for_each(unmark_pool_families),
        _ => {}
    }
}
