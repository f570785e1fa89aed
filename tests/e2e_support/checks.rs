//! What the end-to-end test judges with: API access by apiVersion/kind, "every applied field is
//! still there" (read through both served versions of the Proxmox kinds), a stand-in for the
//! garbage collector the test control plane lacks, and what is left in pve-sim.

use std::collections::{BTreeMap, BTreeSet};

use capmox_api::conversion::convert_value;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use serde_json::Value;

use super::objects::INFRA_GROUP;

/// The plural resource name of `kind` (the kinds this test uses).
pub fn plural(kind: &str) -> String {
    let lower = kind.to_ascii_lowercase();
    if lower.ends_with("ss") || lower.ends_with("address") {
        format!("{lower}es")
    } else {
        format!("{lower}s")
    }
}

/// The API resource of `api_version` + `kind`.
pub fn resource(api_version: &str, kind: &str) -> ApiResource {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), &plural(kind))
}

/// A namespaced dynamic API.
pub fn api(client: &kube::Client, ns: &str, api_version: &str, kind: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &resource(api_version, kind))
}

/// Creates `obj` (a JSON manifest with apiVersion, kind, metadata.namespace) as it is.
pub async fn create(client: &kube::Client, obj: &Value) -> Result<DynamicObject, String> {
    let s = |p: &str| {
        obj.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let (av, kind, ns, name) = (
        s("/apiVersion"),
        s("/kind"),
        s("/metadata/namespace"),
        s("/metadata/name"),
    );
    let dynobj: DynamicObject = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
    api(client, &ns, &av, &kind)
        .create(&PostParams::default(), &dynobj)
        .await
        .map_err(|e| format!("creating {kind} {ns}/{name} ({av}): {e}"))
}

/// The paths of `applied` that `stored` does not have with the same value (objects: every key of
/// `applied`; lists: same length, element by element; numbers by value).
pub fn missing(stored: &Value, applied: &Value, path: &str, out: &mut Vec<String>) {
    match (stored, applied) {
        (Value::Object(s), Value::Object(a)) => {
            for (k, av) in a {
                let p = format!("{path}.{k}");
                match s.get(k) {
                    Some(sv) => missing(sv, av, &p, out),
                    None => out.push(format!("{p} (applied {av}) is gone")),
                }
            }
        }
        (Value::Array(s), Value::Array(a)) if s.len() == a.len() => {
            for (i, (sv, av)) in s.iter().zip(a).enumerate() {
                missing(sv, av, &format!("{path}[{i}]"), out);
            }
        }
        (Value::Number(s), Value::Number(a)) if s.as_f64() == a.as_f64() => {}
        (s, a) if s == a => {}
        (s, a) => out.push(format!("{path}: applied {a}, stored {s}")),
    }
}

/// The annotation our conversion keeps what the other version cannot express in: an
/// implementation detail, not a field the user applied.
const CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";

/// `v` without any conversion-data annotation (on the object or in `spec.template.metadata`).
fn strip_conversion_data(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.remove(CONVERSION_DATA);
            m.retain(|k, v| {
                strip_conversion_data(v);
                !(k == "annotations" && v.as_object().is_some_and(serde_json::Map::is_empty))
            });
        }
        Value::Array(l) => l.iter_mut().for_each(strip_conversion_data),
        _ => {}
    }
}

/// What must still be there of an applied object: its spec, labels and annotations.
fn judged(obj: &Value) -> Value {
    let mut out = serde_json::json!({"spec": obj["spec"]});
    for key in ["labels", "annotations"] {
        if let Some(v) = obj["metadata"].get(key) {
            out["metadata"][key] = v.clone();
        }
    }
    strip_conversion_data(&mut out);
    out
}

/// The fields of `expected` (a manifest of a Proxmox kind in its version) that the stored object,
/// read through that version and through the other one (compared with our conversion of the
/// manifest), no longer has. `name` overrides the manifest's name (objects CAPI created from a
/// template). An empty list: nothing lost.
pub async fn lost_fields(client: &kube::Client, expected: &Value, name: Option<&str>) -> Vec<String> {
    let ns = expected["metadata"]["namespace"].as_str().unwrap_or_default();
    let kind = expected["kind"].as_str().unwrap_or_default();
    let name = name.unwrap_or_else(|| expected["metadata"]["name"].as_str().unwrap_or_default());
    let mut out = Vec::new();
    for version in ["v1alpha1", "v1alpha2"] {
        let av = format!("{INFRA_GROUP}/{version}");
        let want = match convert_value(expected.clone(), &av) {
            Ok(v) => v,
            Err(e) => {
                out.push(format!(
                    "{kind} {ns}/{name}: our conversion to {version} failed: {e}"
                ));
                continue;
            }
        };
        match api(client, ns, &av, kind).get(name).await {
            Ok(stored) => {
                let stored = serde_json::to_value(&stored).unwrap_or_default();
                let mut lost = Vec::new();
                missing(&stored, &judged(&want), "", &mut lost);
                out.extend(
                    lost.into_iter()
                        .map(|l| format!("{kind} {ns}/{name} read as {version}: {l}")),
                );
            }
            Err(e) => out.push(format!("{kind} {ns}/{name}: reading it as {version}: {e}")),
        }
    }
    out
}

/// Deletes what a garbage collector would: objects of `kinds` in `ns` all of whose owners are
/// gone. Returns `kind/name` of each deleted object.
pub async fn collect_garbage(client: &kube::Client, ns: &str, kinds: &[(String, &str)]) -> Vec<String> {
    let mut alive: BTreeMap<String, bool> = BTreeMap::new();
    let mut deleted = Vec::new();
    for (av, kind) in kinds {
        let Ok(list) = api(client, ns, av, kind).list(&ListParams::default()).await else {
            continue;
        };
        for obj in list.items {
            let owners = obj.metadata.owner_references.clone().unwrap_or_default();
            if owners.is_empty() || obj.metadata.deletion_timestamp.is_some() {
                continue;
            }
            let mut any_alive = false;
            for o in &owners {
                let key = format!("{}/{}/{}", o.api_version, o.kind, o.uid);
                let is_alive = match alive.get(&key) {
                    Some(v) => *v,
                    None => {
                        let got = api(client, ns, &o.api_version, &o.kind).get_opt(&o.name).await;
                        let v = match got {
                            Ok(Some(owner)) => owner.metadata.uid.as_deref() == Some(o.uid.as_str()),
                            Ok(None) => false,
                            // Unknown kind or a failing read: not garbage.
                            Err(_) => true,
                        };
                        alive.insert(key, v);
                        v
                    }
                };
                any_alive |= is_alive;
            }
            if !any_alive {
                let name = obj.metadata.name.clone().unwrap_or_default();
                if api(client, ns, av, kind)
                    .delete(&name, &DeleteParams::background())
                    .await
                    .is_ok()
                {
                    deleted.push(format!("{kind}/{name}"));
                }
            }
        }
    }
    deleted
}

/// Non-template VMs in pve-sim whose name starts with `prefix`: name → VMID.
pub fn vms(sim: &pve_sim::SimServer, prefix: &str) -> BTreeMap<String, u32> {
    sim.state().with(|c| {
        c.vms
            .iter()
            .filter(|(_, vm)| !vm.is_template())
            .filter_map(|(id, vm)| {
                let name = vm.config.get("name")?;
                name.starts_with(prefix).then(|| (name.clone(), *id))
            })
            .collect()
    })
}

/// ISO volumes on pve-sim's storages.
pub fn isos(sim: &pve_sim::SimServer) -> BTreeSet<String> {
    sim.state().with(|c| {
        c.volumes
            .values()
            .flat_map(|m| m.keys())
            .filter(|v| v.contains(":iso/") || v.ends_with(".iso"))
            .cloned()
            .collect()
    })
}

/// Names of the objects of `kind` in `ns`.
pub async fn names(client: &kube::Client, ns: &str, api_version: &str, kind: &str) -> Vec<String> {
    api(client, ns, api_version, kind)
        .list(&ListParams::default())
        .await
        .map(|l| l.items.into_iter().filter_map(|o| o.metadata.name).collect())
        .unwrap_or_else(|e| vec![format!("<listing {kind}: {e}>")])
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn containment() {
        let mut out = Vec::new();
        missing(
            &json!({"a": {"b": [1, {"c": 2, "d": 3}]}, "e": 8.0}),
            &json!({"a": {"b": [1, {"c": 2}]}, "e": 8}),
            "",
            &mut out,
        );
        assert!(out.is_empty(), "{out:?}");
        missing(&json!({"a": {}}), &json!({"a": {"b": 1}}), "", &mut out);
        missing(&json!({"l": [1]}), &json!({"l": [1, 2]}), "", &mut out);
        assert_eq!(out, [".a.b (applied 1) is gone", ".l: applied [1,2], stored [1]"]);
        let j = judged(
            &json!({"metadata": {"name": "x", "annotations": {CONVERSION_DATA: "{}"}},
            "spec": {"template": {"metadata": {"annotations": {CONVERSION_DATA: "{}", "k": "v"}}}}}),
        );
        assert_eq!(
            j,
            json!({"metadata": {}, "spec": {"template": {"metadata": {"annotations": {"k": "v"}}}}})
        );
        assert_eq!(plural("IPAddress"), "ipaddresses");
        assert_eq!(plural("MachineDeployment"), "machinedeployments");
        assert_eq!(plural("InClusterIPPool"), "inclusterippools");
    }
}
