//! Conversion through the API server (our CRDs with `conversion.strategy: Webhook` pointing at the
//! in-process webhook server by URL, capmox's admission webhooks registered too): every capmox
//! v0.9 sample and template object and a set of v0.7-era v1alpha1 manifests
//! (`tests/fixtures/capmox-v0.7-v1alpha1.yaml`) is created through its version, read through both
//! (the other version must be exactly our conversion), written back unchanged through the other
//! version and read again: nothing applied is lost and the round trip changes nothing but
//! defaults made explicit. Runs on the in-tree and the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "../api/tests/compat/mod.rs"]
mod compat;
mod webhook_support;

use std::collections::BTreeMap;
use std::path::Path;

use capmox_api::consts::CONVERSION_DATA_ANNOTATION;
use kube::api::{DynamicObject, PostParams};
use serde_json::{Value, json};
use webhook_support::*;

/// Whether every field of `applied` is in `live` with the same value (`live` may hold more:
/// defaults, webhook defaults).
fn subset(applied: &Value, live: &Value, path: &str, out: &mut Vec<String>) {
    match (applied, live) {
        (Value::Null, _) => {}
        (Value::Object(a), Value::Object(l)) => {
            for (k, v) in a {
                match l.get(k) {
                    Some(lv) => subset(v, lv, &format!("{path}.{k}"), out),
                    None if v.is_null() => {}
                    None => out.push(format!("{path}.{k} missing (applied {v})")),
                }
            }
        }
        (Value::Array(a), Value::Array(l)) if a.len() == l.len() => {
            for (i, (av, lv)) in a.iter().zip(l).enumerate() {
                subset(av, lv, &format!("{path}[{i}]"), out);
            }
        }
        (a, l) if a == l => {}
        (Value::Number(a), Value::Number(l)) if a.as_f64() == l.as_f64() => {}
        (a, l) => out.push(format!("{path}: applied {a}, read {l}")),
    }
}

fn other(version: &str) -> &'static str {
    if version == "v1alpha1" {
        "v1alpha2"
    } else {
        "v1alpha1"
    }
}

fn annotations_without_conversion_data(o: &DynamicObject) -> BTreeMap<String, String> {
    let mut a = o.metadata.annotations.clone().unwrap_or_default();
    a.remove(CONVERSION_DATA_ANNOTATION);
    a
}

/// Creates `doc` in `ns` through its own version and checks the round trip through the other.
/// Returns the object as read through both versions, or `None` when the CRD schema rejects it
/// (as capmox's own CRD does; never our webhooks).
async fn round_trip(
    c: &kube::Client,
    ns: &str,
    what: &str,
    doc: &Value,
) -> Option<(DynamicObject, DynamicObject)> {
    let kind = doc["kind"].as_str().unwrap();
    let version = doc["apiVersion"]
        .as_str()
        .unwrap()
        .rsplit('/')
        .next()
        .unwrap()
        .to_owned();
    let name = doc["metadata"]["name"].as_str().unwrap();
    let mut doc = doc.clone();
    doc["metadata"]["namespace"] = json!(ns);
    let (code, _, body) = create_raw(c, ns, kind, &version, &doc, "").await;
    let message = body["message"].as_str().unwrap_or_default();
    if code == 422 && !message.starts_with("admission webhook") {
        eprintln!("{what}: {kind} {name} is rejected by the CRD schema: {message}");
        return None;
    }
    assert_eq!(code, 201, "{what}: {kind} {name} was not created: {body}");

    let own = api(c, ns, kind, &version);
    let theirs = api(c, ns, kind, other(&version));
    let read_own = own.get(name).await.unwrap();
    let read_other = theirs.get(name).await.unwrap();
    assert_eq!(
        read_other.types.as_ref().unwrap().api_version,
        format!("{GROUP}/{}", other(&version))
    );

    // Nothing applied is lost.
    let mut lost = Vec::new();
    subset(&doc["spec"], &read_own.data["spec"], "spec", &mut lost);
    assert!(
        lost.is_empty(),
        "{what}: {kind} {name} lost fields:\n  {}",
        lost.join("\n  ")
    );

    // The other version is what our conversion says it is.
    let local = capmox_api::conversion::convert_value(
        serde_json::to_value(&read_own).unwrap(),
        &format!("{GROUP}/{}", other(&version)),
    )
    .unwrap();
    let mut differs = Vec::new();
    subset(&local["spec"], &read_other.data["spec"], "spec", &mut differs);
    assert!(
        differs.is_empty(),
        "{what}: {kind} {name} read through {} is not our conversion:\n  {}",
        other(&version),
        differs.join("\n  ")
    );

    // Written back unchanged through the other version, the object reads the same through that
    // version, and through its own it has everything it had (plus, at most, defaults of the
    // other version that the write made explicit, e.g. `externalManagedControlPlane: false`).
    let written = theirs.replace(name, &PostParams::default(), &read_other).await;
    if let Some(message) = writeback_denied(what, kind) {
        // Accepted through a version capmox does not validate (Exact), denied through the other.
        let e = match written {
            Err(kube::Error::Api(e)) => e,
            other => panic!("{what}: {kind} {name}: expected a denial, got {other:?}"),
        };
        assert!(e.message.ends_with(message), "{what}: {}", e.message);
        return Some((read_own, read_other));
    }
    written.unwrap_or_else(|e| {
        panic!(
            "{what}: {kind} {name} cannot be written back through {}: {e}",
            other(&version)
        )
    });
    let again_other = theirs.get(name).await.unwrap();
    assert_eq!(
        again_other.data["spec"], read_other.data["spec"],
        "{what}: {kind} {name} changed in the round trip"
    );
    let again = own.get(name).await.unwrap();
    let mut lost = Vec::new();
    subset(&read_own.data["spec"], &again.data["spec"], "spec", &mut lost);
    assert!(
        lost.is_empty(),
        "{what}: {kind} {name} lost in the round trip:\n  {}",
        lost.join("\n  ")
    );
    assert_eq!(
        again.metadata.labels, read_own.metadata.labels,
        "{what}: {kind} {name}"
    );
    assert_eq!(
        annotations_without_conversion_data(&again),
        annotations_without_conversion_data(&read_own),
        "{what}: {kind} {name}"
    );
    Some((read_own, read_other))
}

/// Samples capmox's own admission webhooks deny as they are, with the denial's message and the
/// smallest fix.
fn capmox_denies(what: &str, doc: &Value) -> Option<(&'static str, Value)> {
    (what == "samples/infrastructure_v1alpha2_proxmoxcluster.yaml" && doc["kind"] == "ProxmoxCluster").then(|| {
        (
            "spec.controlplaneEndpoint: Invalid value: \"\": provided endpoint address is not a valid IP or FQDN",
            json!({"spec": {"controlPlaneEndpoint": {"host": "10.10.10.200", "port": 6443}}}),
        )
    })
}

/// Samples accepted through v1alpha1 (capmox's ProxmoxClusterTemplate webhooks are `Exact`) that
/// capmox's rules deny when written through v1alpha2, with the denial's message.
fn writeback_denied(what: &str, kind: &str) -> Option<&'static str> {
    (what == "samples/infrastructure_v1alpha1_proxmoxclustertemplate.yaml" && kind == "ProxmoxClusterTemplate")
        .then_some("spec.controlplaneEndpoint: Invalid value: \"\": provided endpoint address is not a valid IP or FQDN")
}

#[tokio::test(flavor = "multi_thread")]
async fn capmox_v09_samples_and_templates_round_trip() {
    // `compat::compat_root` resolves `../shared` from the api crate; from here it is one level up.
    let root = match std::env::var_os("CAPMOX_COMPAT_DIR") {
        Some(dir) => Path::new(&dir).join(".."),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/compat/capmox-v0.9"),
    };
    if !root.join("templates").is_dir() {
        eprintln!("skipped: {} not found", root.display());
        return;
    }
    let env = testenv::TestEnv::start().await.unwrap();
    let c = env.client();
    let _hooks = setup(&env).await;
    let mut objects = compat::proxmox_objects(&root, &format!("{GROUP}/v1alpha2"));
    objects.extend(compat::proxmox_objects(&root, &format!("{GROUP}/v1alpha1")));
    assert!(objects.len() >= 20, "only {} objects found", objects.len());
    let mut namespaces: BTreeMap<std::path::PathBuf, String> = BTreeMap::new();
    let mut kinds = BTreeMap::<(String, String), usize>::new();
    let mut rejected = 0;
    for (file, kind, doc) in &objects {
        if !namespaces.contains_key(file) {
            namespaces.insert(file.clone(), namespace(&c, "compat").await);
        }
        let ns = &namespaces[file];
        let what = file.strip_prefix(&root).unwrap_or(file).display().to_string();
        let mut doc = doc.clone();
        if let Some((message, fix)) = capmox_denies(&what, &doc) {
            // capmox's own webhook denies this sample as it is: so must we, then it gets the fix.
            let mut bad = doc.clone();
            bad["metadata"]["namespace"] = json!(ns);
            let version = doc["apiVersion"].as_str().unwrap().rsplit('/').next().unwrap();
            let (code, _, body) = create_raw(&c, ns, kind, version, &bad, "").await;
            assert_eq!(code, 422, "{what}: {body}");
            assert!(
                body["message"].as_str().unwrap().ends_with(message),
                "{what}: {body}"
            );
            merge(&mut doc, fix);
        }
        if round_trip(&c, ns, &what, &doc).await.is_none() {
            rejected += 1;
            continue;
        }
        *kinds
            .entry((kind.clone(), doc["apiVersion"].as_str().unwrap().to_owned()))
            .or_default() += 1;
    }
    let tested: usize = kinds.values().sum();
    eprintln!("round-tripped {tested} objects, {rejected} rejected by the CRD schema: {kinds:?}");
    // Rejected as capmox's CRD rejects them: the nine ClusterClass machine templates (their
    // templateID comes from ClusterClass patches) and the v1alpha2 machine sample without a spec.
    assert!(
        tested >= 30 && rejected <= 10,
        "{tested} tested, {rejected} rejected"
    );
    for kind in [
        "ProxmoxCluster",
        "ProxmoxClusterTemplate",
        "ProxmoxMachine",
        "ProxmoxMachineTemplate",
    ] {
        assert!(
            kinds.keys().any(|(k, _)| k == kind),
            "no {kind} in the samples: {kinds:?}"
        );
        // Lists are converted in batches (one ConversionReview for many objects).
        for version in ["v1alpha1", "v1alpha2"] {
            let all: kube::Api<DynamicObject> = kube::Api::all_with(c.clone(), &ar(kind, version));
            let listed = all.list(&Default::default()).await.unwrap();
            let created: usize = kinds.iter().filter(|((k, _), _)| k == kind).map(|(_, n)| n).sum();
            assert_eq!(listed.items.len(), created, "{kind} listed through {version}");
            assert!(
                listed
                    .items
                    .iter()
                    .all(|o| o.types.as_ref().unwrap().api_version == format!("{GROUP}/{version}"))
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn capmox_v07_v1alpha1_manifests_round_trip_and_keep_their_network() {
    let env = testenv::TestEnv::start().await.unwrap();
    let c = env.client();
    let _hooks = setup(&env).await;
    let ns = namespace(&c, "v07").await;
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/capmox-v0.7-v1alpha1.yaml");
    let docs = compat::documents(&std::fs::read_to_string(&path).unwrap()).unwrap();
    assert_eq!(docs.len(), 9);
    let mut read = BTreeMap::new();
    for doc in &docs {
        let (own, other) = round_trip(&c, &ns, "v0.7 fixture", doc)
            .await
            .expect("the v0.7 fixtures are valid");
        read.insert(own.metadata.name.clone().unwrap(), (own, other));
    }
    // What our controllers read (v1alpha2) of a v0.7 machine: its whole network.
    let (_, full) = &read["v07-full"];
    let spec = &full.data["spec"];
    assert_eq!(
        spec["allowedNodes"],
        json!(["pve2"]),
        "target replaces allowedNodes"
    );
    let nics = &spec["network"]["networkDevices"];
    assert_eq!(nics[0]["name"], "net0");
    assert_eq!(nics[0]["bridge"], "vmbr0");
    assert_eq!(nics[0]["vlan"], 10);
    assert_eq!(nics[0]["defaultIPv4"], true);
    assert_eq!(nics[1]["name"], "net1");
    assert_eq!(nics[1]["ipPoolRef"][0]["name"], "storage-inet");
    assert_eq!(nics[1]["routes"][0]["table"], 100);
    assert_eq!(nics[1]["linkMtu"], 9000);
    assert_eq!(spec["network"]["vrfs"][0]["table"], 500);
    let (_, bare) = &read["v07-no-network"];
    assert_eq!(
        bare.data["spec"]["network"]["networkDevices"][0]["bridge"],
        "vmbr0"
    );
    let (_, selector) = &read["v07-selector"];
    let pools: Vec<&str> = selector.data["spec"]["network"]["networkDevices"][1]["ipPoolRef"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(pools, vec!["backend-inet", "backend-inet6"]);
    // v1alpha2-only data survives a v1alpha1 writer: cloneSpec is kept for v1alpha1 readers.
    let (own, _) = &read["v07-clonespec"];
    assert_eq!(
        own.data["spec"]["cloneSpec"]["machineSpec"]["workerNode"]["templateID"],
        101
    );
}
