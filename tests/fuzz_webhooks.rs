//! Fuzzing what the API server sends the webhooks: `ConversionReview` and `AdmissionReview`
//! bodies (raw bytes, wrong shapes, and real capmox objects mutated at random paths — wrong
//! types, missing keys, hostile strings) and the `cluster.x-k8s.io/conversion-data` annotation
//! (garbage, JSON of the wrong kind or version, mutated objects). The handlers must always answer
//! a review (never panic), keep the request's uid, convert all objects or none, and a converted
//! object must convert back and forth stably.
//!
//! Seeds: the v1alpha1 manifests of `tests/fixtures/capmox-v0.7-v1alpha1.yaml` and their
//! v1alpha2 conversions.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_support;

use std::sync::LazyLock;

use base64::Engine;
use capmox_api::consts::CONVERSION_DATA_ANNOTATION;
use capmox_api::conversion::convert_value;
use capmox_api::webhook::ADMISSION_WEBHOOKS;
use fuzz_support::{config, hostile_string, pve_json};
use proptest::prelude::*;
use serde_json::{Value, json};

const V1: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
const V2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

static SEEDS: LazyLock<Vec<Value>> = LazyLock::new(|| {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/capmox-v0.7-v1alpha1.yaml"
    );
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = Vec::new();
    for doc in text.split("\n---").map(str::trim).filter(|d| !d.is_empty()) {
        let v: Value = serde_saphyr::from_str(doc).unwrap();
        if !v.is_object() {
            continue;
        }
        let hub = convert_value(v.clone(), V2).unwrap();
        out.push(v);
        out.push(hub);
    }
    assert!(out.len() >= 16, "{} seeds", out.len());
    out
});

/// Every JSON pointer of `v` (objects and arrays included).
fn paths(v: &Value, at: String, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, x) in m {
                let p = format!("{at}/{}", k.replace('~', "~0").replace('/', "~1"));
                out.push(p.clone());
                paths(x, p, out);
            }
        }
        Value::Array(a) => {
            for (i, x) in a.iter().enumerate() {
                let p = format!("{at}/{i}");
                out.push(p.clone());
                paths(x, p, out);
            }
        }
        _ => {}
    }
}

#[derive(Debug, Clone)]
enum Mutation {
    Replace(usize, Value),
    Remove(usize),
    Hostile(usize, String),
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        2 => (any::<usize>(), pve_json()).prop_map(|(i, v)| Mutation::Replace(i, v)),
        1 => any::<usize>().prop_map(Mutation::Remove),
        2 => (any::<usize>(), hostile_string()).prop_map(|(i, s)| Mutation::Hostile(i, s)),
    ]
}

fn apply(mut v: Value, muts: &[Mutation]) -> Value {
    for m in muts {
        let mut all = Vec::new();
        paths(&v, String::new(), &mut all);
        // apiVersion and kind stay: without them nothing past the dispatch is exercised.
        all.retain(|p| p != "/apiVersion" && p != "/kind");
        if all.is_empty() {
            continue;
        }
        let (i, new) = match m {
            Mutation::Replace(i, x) => (*i, Some(x.clone())),
            Mutation::Hostile(i, s) => (*i, Some(Value::String(s.clone()))),
            Mutation::Remove(i) => (*i, None),
        };
        let p = &all[i % all.len()];
        let (parent, last) = p.rsplit_once('/').unwrap();
        let last = last.replace("~1", "/").replace("~0", "~");
        match (v.pointer_mut(parent), new) {
            (Some(Value::Object(m)), Some(x)) => {
                m.insert(last, x);
            }
            (Some(Value::Object(m)), None) => {
                m.remove(&last);
            }
            (Some(Value::Array(a)), Some(x)) => {
                if let Ok(i) = last.parse::<usize>()
                    && i < a.len()
                {
                    a[i] = x;
                }
            }
            (Some(Value::Array(a)), None) => {
                if let Ok(i) = last.parse::<usize>()
                    && i < a.len()
                {
                    a.remove(i);
                }
            }
            _ => {}
        }
    }
    v
}

/// What the conversion-data annotation holds.
fn annotation() -> impl Strategy<Value = Option<String>> {
    prop_oneof![
        3 => Just(None),
        1 => hostile_string().prop_map(Some),
        1 => pve_json().prop_map(|v| Some(v.to_string())),
        2 => (any::<usize>(), prop::collection::vec(mutation(), 0..3)).prop_map(|(i, muts)| {
            let seed = SEEDS[i % SEEDS.len()].clone();
            let mut obj = apply(seed, &muts);
            if let Some(m) = obj.as_object_mut() {
                m.remove("metadata");
            }
            Some(obj.to_string())
        }),
    ]
}

/// A capmox object (v1alpha1 or v1alpha2) mutated at random paths, maybe with an annotation.
fn object() -> impl Strategy<Value = Value> {
    (
        any::<usize>(),
        prop::collection::vec(mutation(), 0..4),
        annotation(),
    )
        .prop_map(|(i, muts, ann)| {
            let mut v = apply(SEEDS[i % SEEDS.len()].clone(), &muts);
            if let Some(a) = ann
                && let Some(meta) = v.get_mut("metadata").and_then(Value::as_object_mut)
            {
                meta.entry("annotations")
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .map(|m| m.insert(CONVERSION_DATA_ANNOTATION.into(), Value::String(a)));
            }
            v
        })
}

/// `v` without the conversion-data annotation (and an emptied annotation map).
fn without_data(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(a) = v
        .pointer_mut("/metadata/annotations")
        .and_then(Value::as_object_mut)
    {
        a.remove(CONVERSION_DATA_ANNOTATION);
        if a.is_empty()
            && let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut)
        {
            m.remove("annotations");
        }
    }
    v
}

fn other(v: &Value) -> &'static str {
    if v["apiVersion"] == V1 { V2 } else { V1 }
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn fuzz_conversion_is_total_and_stable(obj in object()) {
        let to = other(&obj);
        let from = obj["apiVersion"].as_str().unwrap().to_owned();
        if let Ok(there) = convert_value(obj.clone(), to) {
            prop_assert_eq!(&there["apiVersion"], &json!(to));
            prop_assert_eq!(&there["kind"], &obj["kind"]);
            // What was converted converts back, and converting that again gives the same object.
            let back = convert_value(there.clone(), &from)
                .map_err(|e| TestCaseError::fail(format!("no way back: {e}\n{there:#}")))?;
            let again = convert_value(back.clone(), to)
                .map_err(|e| TestCaseError::fail(format!("no way there again: {e}\n{back:#}")))?;
            // Whether the conversion-data annotation is needed may differ; what it stands for not.
            prop_assert_eq!(without_data(&again), without_data(&there), "back:\n{:#}", back);
        }
    }

    #[test]
    fn fuzz_conversion_reviews(
        objects in prop::collection::vec(object(), 0..4),
        desired in prop_oneof![Just(V1.to_owned()), Just(V2.to_owned()), "\\PC{0,20}"],
        uid in prop_oneof![Just("u-1".to_owned()), hostile_string()],
        raw in proptest::option::of(prop::collection::vec(any::<u8>(), 0..64)),
    ) {
        let body = raw.unwrap_or_else(|| serde_json::to_vec(&json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
        })).unwrap());
        let (_, review) = capmox::webhooks::convert::handle(&body);
        let review = serde_json::to_value(&review).unwrap();
        let response = &review["response"];
        let status = response["result"]["status"].as_str().unwrap_or_default().to_owned();
        prop_assert!(status == "Success" || status == "Failure", "{}", review);
        if status == "Success" {
            prop_assert_eq!(&response["uid"], &json!(uid));
            let converted = response["convertedObjects"].as_array().unwrap();
            prop_assert_eq!(converted.len(), objects.len());
            for c in converted {
                prop_assert_eq!(&c["apiVersion"], &json!(desired));
            }
        } else {
            prop_assert!(!response["result"]["message"].as_str().unwrap_or_default().is_empty());
            prop_assert!(response["convertedObjects"].as_array().is_none_or(Vec::is_empty));
        }
    }

    #[test]
    fn fuzz_admission_reviews(
        hook in 0..ADMISSION_WEBHOOKS.len(),
        obj in object(),
        old in proptest::option::of(object()),
        op in prop_oneof![Just("CREATE"), Just("UPDATE"), Just("DELETE"), Just("CONNECT"), Just("")],
        uid in prop_oneof![Just(json!("u-1")), hostile_string().prop_map(Value::String), pve_json()],
        foreign_kind in any::<bool>(),
        raw in proptest::option::of(prop::collection::vec(any::<u8>(), 0..64)),
    ) {
        let hook = &ADMISSION_WEBHOOKS[hook];
        let kind = if foreign_kind { "ProxmoxMachine".to_owned() } else { hook.kind.kind().to_owned() };
        // The API server sends the object in the webhook's version (v1alpha2).
        let to_v2 = |o: Value| convert_value(o.clone(), V2).unwrap_or(o);
        let body = raw.clone().unwrap_or_else(|| serde_json::to_vec(&json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": uid,
                "kind": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1alpha2", "kind": kind},
                "resource": {"group": "infrastructure.cluster.x-k8s.io", "version": "v1alpha2", "resource": "x"},
                "name": "n", "namespace": "ns", "operation": op, "userInfo": {},
                "object": to_v2(obj), "oldObject": old.map(to_v2), "dryRun": false,
            },
        })).unwrap());
        let review = capmox::webhooks::review::handle(hook, &body);
        prop_assert_eq!(&review["kind"], &json!("AdmissionReview"));
        let response = &review["response"];
        prop_assert!(response["allowed"].is_boolean(), "{}", review);
        if raw.is_none() && uid.is_string() {
            prop_assert_eq!(&response["uid"], &uid);
        }
        if response["allowed"] == false {
            prop_assert!(!response["status"]["message"].as_str().unwrap_or_default().is_empty(), "{}", review);
        }
        if let Some(patch) = response["patch"].as_str() {
            let bytes = base64::engine::general_purpose::STANDARD.decode(patch).unwrap();
            let ops: Vec<Value> = serde_json::from_slice(&bytes).unwrap();
            for op in ops {
                prop_assert!(op["op"].is_string() && op["path"].is_string(), "{}", op);
            }
        }
    }
}

#[test]
fn seeds_convert_both_ways() {
    for s in SEEDS.iter() {
        let there = convert_value(s.clone(), other(s)).unwrap();
        convert_value(there, s["apiVersion"].as_str().unwrap()).unwrap();
    }
}

// ------------------------------------------------------------------ regressions found by fuzzing

/// Converts `obj` to the other version, back, and there again: the last two must agree.
fn stable(obj: Value) {
    let to = other(&obj);
    let from = obj["apiVersion"].as_str().unwrap().to_owned();
    let there = convert_value(obj, to).unwrap();
    let back = convert_value(there.clone(), &from).unwrap();
    let again = convert_value(back.clone(), to).unwrap();
    assert_eq!(again, there, "back:\n{back:#}");
}

fn with_annotation(mut obj: Value, data: Value) -> Value {
    obj["metadata"]["annotations"] = json!({CONVERSION_DATA_ANNOTATION: data.to_string()});
    obj
}

/// A v1alpha2 ProxmoxClusterTemplate with an empty `controlPlaneEndpoint`, carrying v1alpha1 data
/// with a `cloneSpec` in its annotation: the endpoint was lost on the way back (the stored hub was
/// only taken whole when the spoke matched it *including* the spoke-only `cloneSpec`), so
/// converting again gave another object.
#[test]
fn regression_cluster_template_keeps_an_empty_endpoint_next_to_a_clone_spec() {
    let spoke_data = json!({
        "apiVersion": V1, "kind": "ProxmoxClusterTemplate",
        "spec": {"template": {"spec": {
            "cloneSpec": {"machineSpec": {"controlPlane": {"network": {"default": {"bridge": "vmbr0"}}, "sourceNode": "pve1", "templateID": 100}},
                          "sshAuthorizedKeys": ["ssh-ed25519 AAAA admin@example"]},
            "controlPlaneEndpoint": {"host": "10.40.10.9", "port": 6443},
            "dnsServers": ["10.40.10.1"],
            "ipv4Config": {"addresses": ["10.40.10.10-10.40.10.50"], "gateway": "10.40.10.1", "metric": 100, "prefix": 24},
        }}},
    });
    let hub = with_annotation(
        json!({
            "apiVersion": V2, "kind": "ProxmoxClusterTemplate", "metadata": {"name": "v07-class"},
            "spec": {"template": {"spec": {
                "controlPlaneEndpoint": {},
                "dnsServers": ["10.40.10.1"],
                "ipv4Config": {"addresses": ["10.40.10.10-10.40.10.50"], "gateway": "10.40.10.1", "metric": 100, "prefix": 24},
            }}},
        }),
        spoke_data,
    );
    stable(hub);
}

/// The same shape for ProxmoxCluster (whose stored hub was compared the same way).
#[test]
fn regression_cluster_keeps_an_empty_endpoint_next_to_a_clone_spec() {
    let spoke_data = json!({
        "apiVersion": V1, "kind": "ProxmoxCluster",
        "spec": {
            "cloneSpec": {"machineSpec": {"controlPlane": {"network": {"default": {"bridge": "vmbr0"}}, "sourceNode": "pve1", "templateID": 100}}},
            "controlPlaneEndpoint": {"host": "10.40.10.9", "port": 6443},
            "dnsServers": ["10.40.10.1"],
            "ipv4Config": {"addresses": ["10.40.10.10-10.40.10.50"], "gateway": "10.40.10.1", "prefix": 24},
        },
    });
    let hub = with_annotation(
        json!({
            "apiVersion": V2, "kind": "ProxmoxCluster", "metadata": {"name": "c"},
            "spec": {
                "controlPlaneEndpoint": {},
                "dnsServers": ["10.40.10.1"],
                "ipv4Config": {"addresses": ["10.40.10.10-10.40.10.50"], "gateway": "10.40.10.1", "prefix": 24},
            },
        }),
        spoke_data,
    );
    stable(hub);
}
