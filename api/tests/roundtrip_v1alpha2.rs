//! Every v1alpha2 Proxmox* object in capmox's templates, samples and examples deserialises into
//! our types and serialises back to exactly the same JSON (no field lost, added or changed).

#![allow(clippy::expect_used, clippy::unwrap_used)]
#![recursion_limit = "256"]

mod compat;

use capmox_api::v1alpha2;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// Objects in capmox's material that capmox's own CRD rejects, so no API server ever stores them:
/// `(path suffix, object name, why)`. For these the test asserts that our types reject them too.
const UPSTREAM_INVALID: &[(&str, &str, &str)] = &[(
    "samples/infrastructure_v1alpha2_proxmoxmachine.yaml",
    "proxmoxmachine-sample",
    "kubebuilder scaffold with `spec: null`; the CRD requires spec (and spec.network)",
)];

fn upstream_invalid(file: &std::path::Path, name: &str) -> bool {
    UPSTREAM_INVALID
        .iter()
        .any(|(suffix, n, _)| file.ends_with(suffix) && *n == name)
}

fn round_trip<K: DeserializeOwned + Serialize>(doc: &Value) -> Result<Value, String> {
    let typed: K = serde_json::from_value(doc.clone()).map_err(|e| format!("deserialising: {e}"))?;
    serde_json::to_value(&typed).map_err(|e| format!("serialising: {e}"))
}

#[test]
fn capmox_v1alpha2_objects_round_trip() {
    let Some(root) = compat::compat_root() else {
        eprintln!("skipped: ../shared/compat/capmox-v0.9 (templates, samples, examples) not found");
        return;
    };
    let objects = compat::proxmox_objects(&root, v1alpha2::API_VERSION);
    assert!(
        objects.len() >= 10,
        "expected capmox's v1alpha2 objects, found {}",
        objects.len()
    );
    let mut failures = Vec::new();
    let mut kinds = std::collections::BTreeSet::new();
    for (file, kind, doc) in &objects {
        let result = match kind.as_str() {
            "ProxmoxCluster" => round_trip::<v1alpha2::ProxmoxCluster>(doc),
            "ProxmoxClusterTemplate" => round_trip::<v1alpha2::ProxmoxClusterTemplate>(doc),
            "ProxmoxMachine" => round_trip::<v1alpha2::ProxmoxMachine>(doc),
            "ProxmoxMachineTemplate" => round_trip::<v1alpha2::ProxmoxMachineTemplate>(doc),
            other => Err(format!("unknown kind {other}")),
        };
        kinds.insert(kind.clone());
        let name = doc["metadata"]["name"].as_str().unwrap_or("?");
        if upstream_invalid(file, name) {
            if result.is_ok() {
                failures.push(format!(
                    "{} {kind}/{name}: invalid upstream but accepted",
                    file.display()
                ));
            }
            continue;
        }
        match result {
            Ok(back) if back == *doc => {}
            Ok(back) => failures.push(format!(
                "{} {kind}/{name}: changed on round trip\n  in:  {doc}\n  out: {back}",
                file.display()
            )),
            Err(e) => failures.push(format!("{} {kind}/{name}: {e}", file.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "{} object(s) failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for kind in [
        "ProxmoxCluster",
        "ProxmoxClusterTemplate",
        "ProxmoxMachine",
        "ProxmoxMachineTemplate",
    ] {
        assert!(kinds.contains(kind), "no {kind} among capmox's v1alpha2 objects");
    }
}

#[test]
fn empty_and_absent_lists_stay_distinct() {
    let doc = serde_json::json!({
        "apiVersion": v1alpha2::API_VERSION,
        "kind": "ProxmoxCluster",
        "metadata": {"name": "c"},
        "spec": {
            "allowedNodes": [],
            "dnsServers": ["1.1.1.1"],
            "externalManagedControlPlane": false,
            "ipv4Config": {"addresses": [], "gateway": "10.0.0.1", "prefix": 24, "metric": 0}
        },
        "status": {"initialization": {"provisioned": false}, "conditions": []}
    });
    assert_eq!(round_trip::<v1alpha2::ProxmoxCluster>(&doc).unwrap(), doc);
}

#[test]
fn full_machine_round_trips() {
    let doc = serde_json::json!({
        "apiVersion": v1alpha2::API_VERSION,
        "kind": "ProxmoxMachine",
        "metadata": {"name": "m", "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": "c"}},
        "spec": {
            "sourceNode": "pve1", "templateID": 100, "full": true, "format": "qcow2", "storage": "local",
            "pool": "p", "snapName": "s", "description": "d", "target": null,
            "providerID": "proxmox://01234567-89ab-cdef-0123-456789abcdef", "virtualMachineID": 123,
            "numSockets": 1, "numCores": 2, "memoryMiB": 2048,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
            "network": {
                "zone": "z1",
                "networkDevices": [{
                    "name": "net0", "bridge": "vmbr0", "model": "virtio", "mtu": 1500, "vlan": 10, "queues": 2,
                    "defaultIPv4": true, "defaultIPv6": false, "dnsServers": ["1.1.1.1"], "linkMtu": 1500,
                    "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}],
                    "routes": [{"to": "default", "via": "10.0.0.1", "metric": 100, "table": 10, "is6": false}],
                    "routingPolicy": [{"to": "10.0.0.0/8", "from": "10.1.0.0/16", "table": 10, "priority": 100, "is6": false}]
                }],
                "vrfs": [{"name": "vrf-a", "table": 500, "interfaces": ["net0"], "routes": [{"to": "default"}]}]
            },
            "vmIDRange": {"start": 1000, "end": 2000},
            "checks": {"skipCloudInitStatus": true, "skipQemuGuestAgent": false},
            "metadataSettings": {"providerIDInjection": true},
            "allowedNodes": ["pve1"],
            "tags": ["a"],
            "templateSelector": {"matchTags": ["t"], "matchPolicy": "bestSubset"}
        },
        "status": {
            "addresses": [{"type": "Hostname", "address": "m"}, {"type": "InternalIP", "address": "10.0.0.5"}],
            "bootstrapDataProvided": true,
            "conditions": [{"type": "Ready", "status": "True", "reason": "Provisioned", "message": "", "lastTransitionTime": "2026-01-01T00:00:00Z", "observedGeneration": 2}],
            "initialization": {"provisioned": true},
            "ipAddresses": [{"net": "net0", "ipv4": ["10.0.0.5"], "ipv6": []}],
            "network": [{"connected": true, "macAddr": "aa:bb:cc:dd:ee:ff", "networkName": "net0", "ipAddrs": ["10.0.0.5"]}],
            "proxmoxNode": "pve1", "taskRef": "UPID:x", "vmStatus": "ready",
            "retryAfter": "2026-01-01T00:00:00Z"
        }
    });
    // `target` is not a v1alpha2 field: it must be dropped, everything else kept.
    let mut expected = doc.clone();
    expected["spec"].as_object_mut().unwrap().remove("target");
    assert_eq!(round_trip::<v1alpha2::ProxmoxMachine>(&doc).unwrap(), expected);
}

/// Loads one version's schema of every CRD in `crds`, keyed by kind.
fn load_schemas(crds: &[Value], version: &str) -> std::collections::BTreeMap<String, crd_schema::Schema> {
    let mut out = std::collections::BTreeMap::new();
    for crd in crds {
        let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_owned();
        let v = crd["spec"]["versions"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == version)
            .unwrap_or_else(|| panic!("{kind} has no {version}"));
        let schema = crd_schema::Schema::from_openapi(&v["schema"]["openAPIV3Schema"])
            .unwrap_or_else(|e| panic!("{kind}: schema not loadable: {e}"));
        out.insert(kind, schema);
    }
    out
}

fn verdict(schema: &crd_schema::Schema, doc: &Value) -> Vec<String> {
    let mut obj = doc.clone();
    schema.prune_and_default(&mut obj);
    let mut errors: Vec<String> = schema
        .validate(&obj, None)
        .iter()
        .map(ToString::to_string)
        .collect();
    errors.sort();
    errors
}

/// Our v1alpha2 schemas accept and reject capmox's substituted objects exactly as capmox's own CRDs
/// do (same validation messages), checked with the `crd-schema` engine (OpenAPI + CEL).
#[test]
fn capmox_v1alpha2_objects_get_the_same_verdict_as_capmox() {
    let Some(root) = compat::compat_root() else {
        eprintln!("skipped: ../shared/compat/capmox-v0.9 (templates, samples, examples) not found");
        return;
    };
    let ours: Vec<Value> = capmox_api::crd::all()
        .unwrap()
        .iter()
        .map(|c| serde_json::to_value(c).unwrap())
        .collect();
    let theirs: Vec<Value> = std::fs::read_dir(root.join("crd"))
        .unwrap()
        .flatten()
        .flat_map(|e| compat::documents(&std::fs::read_to_string(e.path()).unwrap()).unwrap())
        .collect();
    let ours = load_schemas(&ours, "v1alpha2");
    let theirs = load_schemas(&theirs, "v1alpha2");
    let objects = compat::proxmox_objects(&root, v1alpha2::API_VERSION);
    let mut failures = Vec::new();
    let mut rejected = 0;
    for (file, kind, doc) in &objects {
        let name = doc["metadata"]["name"].as_str().unwrap_or("?");
        let a = verdict(&ours[kind], doc);
        let b = verdict(&theirs[kind], doc);
        if a != b {
            failures.push(format!(
                "{} {kind}/{name}:\n  ours:   {a:?}\n  capmox: {b:?}",
                file.display()
            ));
        }
        if !b.is_empty() {
            rejected += 1;
            eprintln!(
                "note: capmox's own CRD rejects {} {kind}/{name}: {b:?}",
                file.display()
            );
        }
    }
    eprintln!("compared {} objects, {rejected} rejected by both", objects.len());
    assert!(
        failures.is_empty(),
        "{} verdict(s) differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}
