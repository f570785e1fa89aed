//! The two template generations say the same thing: every document of every flavor and
//! ClusterClass, converted to the v1beta1 generation the way `make release` does for v0.10.x and
//! brought back up — the Proxmox kinds by the API server's own conversion (`capmox_api`, which our
//! conversion webhook runs, conversion-data annotation included), the CAPI kinds by `capmox
//! convert` — is what `templates/` says, after clusterctl's substitution, apart from what the
//! API server's defaulting adds anyway (`defaultIPv4`/`defaultIPv6` on `net0`). ClusterClasses
//! themselves are judged by CAPI v1.10.2's webhook (`tests/release_cluster_class.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod release_support;

use capmox::packaging::{envsubst, release};
use release_support::*;
use serde_json::Value;

const NS: &str = "generations";
const CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";

/// Drops nulls, empty objects and empty lists (absent to the API server).
fn normalized(v: Value) -> Value {
    match v {
        Value::Object(o) => Value::Object(
            o.into_iter()
                .map(|(k, v)| (k, normalized(v)))
                .filter(|(_, v)| {
                    !v.is_null()
                        && v.as_object().is_none_or(|o| !o.is_empty())
                        && v.as_array().is_none_or(|a| !a.is_empty())
                })
                .collect(),
        ),
        Value::Array(a) => {
            let mut a: Vec<Value> = a.into_iter().map(normalized).collect();
            // Argument lists (`name`/`value`) were maps in v1beta1: their order is not kept.
            if a.iter().all(|i| {
                i.as_object()
                    .is_some_and(|o| o.len() == 2 && o.contains_key("name") && o.contains_key("value"))
            }) {
                a.sort_by(|x, y| x["name"].as_str().cmp(&y["name"].as_str()));
            }
            Value::Array(a)
        }
        other => other,
    }
}

/// The API server's defaulting of a v1alpha2 machine template (our mutating webhook).
fn defaulted(mut doc: Value) -> Value {
    if doc["kind"] == "ProxmoxMachineTemplate" {
        let machine = serde_json::json!({"spec": doc["spec"]["template"]["spec"].clone()});
        for op in capmox::webhooks::machine::default_patch(&machine) {
            let path = op["path"]
                .as_str()
                .unwrap()
                .replacen("/spec", "/spec/template/spec", 1);
            let (parent, field) = path.rsplit_once('/').unwrap();
            doc.pointer_mut(parent)
                .unwrap()
                .as_object_mut()
                .unwrap()
                .insert(field.to_owned(), op["value"].clone());
        }
    }
    doc
}

fn without_conversion_data(mut v: Value) -> Value {
    for p in ["/metadata/annotations", "/spec/template/metadata/annotations"] {
        if let Some(a) = v.pointer_mut(p).and_then(Value::as_object_mut) {
            a.remove(CONVERSION_DATA);
        }
    }
    v
}

/// One v1beta1-generation document brought back to the v1beta2 generation.
fn up(doc: &Value) -> Value {
    let av = doc["apiVersion"].as_str().unwrap();
    if av == capmox_api::v1alpha1::API_VERSION {
        let v =
            capmox_api::conversion::convert_value(doc.clone(), capmox_api::v1alpha2::API_VERSION).unwrap();
        return without_conversion_data(v);
    }
    if doc["kind"] == "TalosControlPlane" {
        let mut v = doc.clone();
        v["spec"]["infrastructureTemplate"]["apiVersion"] = Value::from(capmox_api::v1alpha2::API_VERSION);
        return v;
    }
    if av == "controlplane.cluster.x-k8s.io/v1alpha1" {
        let mut v = doc.clone();
        v["apiVersion"] = Value::from("controlplane.cluster.x-k8s.io/v1alpha2");
        return v;
    }
    let text = format!("---\n{}\n", serde_json::to_string(doc).unwrap());
    let out = capmox::convert::convert_text(&text, "doc").unwrap();
    documents(&out.output).remove(0)
}

#[test]
fn both_generations_of_every_template_say_the_same() {
    let values = template_values(NS);
    let mut compared = 0;
    for t in release::template_files(&repo()).unwrap() {
        let name = t.file_name().unwrap().to_string_lossy().into_owned();
        let source = std::fs::read_to_string(&t).unwrap();
        let old = release::template_for_contract(&source, &name, "v1beta1").unwrap();
        let subst = |text: &str| documents(&envsubst::process_with(text, &values).unwrap());
        let (new_docs, old_docs) = (subst(&source), subst(&old));
        assert_eq!(new_docs.len(), old_docs.len(), "{name}");
        for (new, old) in new_docs.into_iter().zip(old_docs) {
            let what = format!("{name}: {} {}", new["kind"], new["metadata"]["name"]);
            if new["kind"] == "ClusterClass" {
                assert_eq!(old["apiVersion"], "cluster.x-k8s.io/v1beta1", "{what}");
                continue;
            }
            let back = normalized(up(&old));
            let want = normalized(defaulted(new));
            pretty_assertions::assert_eq!(back, want, "{what}");
            compared += 1;
        }
    }
    assert!(compared > 100, "{compared}");
}

/// What v1alpha1 has no field for rides in the annotation our conversion webhook reads: the
/// Talos flavor's `networkConfigFormat: v2` comes back when the API server converts the v1alpha1
/// template to v1alpha2 (and from there to the machines CAPI clones).
#[test]
fn the_talos_network_format_survives_the_v1alpha1_template() {
    let name = "cluster-template-talos.yaml";
    let source = std::fs::read_to_string(repo().join("templates").join(name)).unwrap();
    let old = release::template_for_contract(&source, name, "v1beta1").unwrap();
    let docs = documents(&envsubst::process_with(&old, &template_values(NS)).unwrap());
    let mut n = 0;
    for d in docs.iter().filter(|d| d["kind"] == "ProxmoxMachineTemplate") {
        assert_eq!(d["apiVersion"], capmox_api::v1alpha1::API_VERSION);
        assert!(d["spec"]["template"]["spec"].get("networkConfigFormat").is_none());
        let v2 = capmox_api::conversion::convert_value(d.clone(), capmox_api::v1alpha2::API_VERSION).unwrap();
        assert_eq!(
            v2["spec"]["template"]["spec"]["networkConfigFormat"], "v2",
            "{v2}"
        );
        n += 1;
    }
    assert_eq!(n, 2);
}
