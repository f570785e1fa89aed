//! v1alpha1 objects survive our types unchanged.
//!
//! 1. Every v1alpha1 `Proxmox*` object in capmox v0.9's `samples/`, `templates/` and `examples/`
//!    (from `../shared/compat/capmox-v0.9` relative to the repository root, or
//!    `$CAPMOX_COMPAT_ROOT`; `${VAR}`/`${VAR:=default}` substituted by representative values)
//!    deserializes into our v1alpha1 types and re-serializes to the same JSON. `null` values are
//!    dropped first, as the API server prunes them; capmox's v1alpha1 samples are kubebuilder
//!    placeholders whose `spec` is `null`, which decode (like in Go) to the zero-valued spec.
//! 2. Every v1alpha2 `Proxmox*` object there, down-converted to v1alpha1, re-serializes through
//!    the v1alpha1 types unchanged and converts back up to the same v1alpha2 object.
//! 3. Hand-written v1alpha1 manifests in the shape capmox v0.7 users wrote (every network
//!    feature, `cloneSpec`, a status) round-trip exactly, through JSON and through the hub.

// Helpers outside `#[test]` functions panic on failure like the tests themselves.
#![allow(clippy::expect_used)]

use std::path::{Path, PathBuf};

use capmox_api::conversion::{Convertible, convert_value};
use capmox_api::{v1alpha1, v1alpha2};
use pretty_assertions::assert_eq;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

const V1: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
const V2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

fn compat_root() -> PathBuf {
    match std::env::var_os("CAPMOX_COMPAT_ROOT") {
        Some(dir) => PathBuf::from(dir),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/compat/capmox-v0.9"),
    }
}

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for path in paths {
        if path.is_dir() {
            yaml_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "yaml" || e == "yml") {
            out.push(path);
        }
    }
}

/// A representative value for a clusterctl variable without a default.
fn representative(name: &str) -> String {
    let list = ["RANGES", "SERVERS", "SSH_KEYS", "TAGS", "ALLOWED_NODES"];
    let number = [
        "PREFIX", "VMID", "SIZE", "COUNT", "ASN", "SOCKETS", "CORES", "MIB",
    ];
    let ip = ["_IP", "GATEWAY", "PEER"];
    if list.iter().any(|k| name.contains(k)) {
        if name.contains("SSH") {
            "\"ssh-ed25519 AAAAC3Nza test@example\"".into()
        } else if name.contains("IPV6") {
            "[fd00::10-fd00::20]".into()
        } else if name.contains("TAGS") {
            // Used inside brackets: `matchTags: [${TEMPLATE_TAGS}]`.
            "ubuntu, k8s".into()
        } else {
            "[10.10.10.10-10.10.10.20, 10.10.10.30]".into()
        }
    } else if number.iter().any(|k| name.contains(k)) {
        if name.contains("IPV6") {
            "64".into()
        } else {
            "24".into()
        }
    } else if ip.iter().any(|k| name.contains(k)) {
        if name.contains("IPV6") {
            "fd00::1".into()
        } else {
            "10.10.10.1".into()
        }
    } else {
        format!("rep-{}", name.to_ascii_lowercase().replace('_', "-"))
    }
}

/// Replaces `${VAR}` by [`representative`] and `${VAR:=default}` by its default.
fn substitute(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let expr = &after[..end];
        match expr.split_once(":=").or_else(|| expr.split_once('=')) {
            Some((_, default)) => out.push_str(default.trim_matches('"')),
            None => out.push_str(&representative(expr)),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Drops `null` members recursively (the API server prunes them from non-nullable fields).
fn prune_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(prune_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(prune_nulls),
        _ => {}
    }
}

fn proxmox_objects() -> Option<Vec<(String, Value)>> {
    let root = compat_root();
    if !root.join("templates").is_dir() {
        return None;
    }
    let mut files = Vec::new();
    for dir in ["samples", "templates", "examples"] {
        yaml_files(&root.join(dir), &mut files);
    }
    let mut objects = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(&file).expect("readable file");
        let docs: Vec<Value> = serde_saphyr::from_multiple(&substitute(&text))
            .unwrap_or_else(|e| panic!("{}: not YAML after substitution: {e}", file.display()));
        for mut doc in docs {
            let kind = doc
                .get("kind")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            if !kind.starts_with("Proxmox") {
                continue;
            }
            prune_nulls(&mut doc);
            let name = doc
                .pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string();
            objects.push((format!("{} {kind}/{name}", file.display()), doc));
        }
    }
    Some(objects)
}

/// Deserializes `doc` as `T` and serializes it again.
fn through<T: Serialize + DeserializeOwned>(what: &str, doc: &Value) -> Value {
    let typed: T =
        serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{what}: does not decode: {e}"));
    serde_json::to_value(&typed).expect("encodes")
}

fn through_v1(what: &str, doc: &Value) -> Value {
    match doc["kind"].as_str().unwrap_or_default() {
        "ProxmoxCluster" => through::<v1alpha1::ProxmoxCluster>(what, doc),
        "ProxmoxClusterTemplate" => through::<v1alpha1::ProxmoxClusterTemplate>(what, doc),
        "ProxmoxMachine" => through::<v1alpha1::ProxmoxMachine>(what, doc),
        "ProxmoxMachineTemplate" => through::<v1alpha1::ProxmoxMachineTemplate>(what, doc),
        other => panic!("{what}: unexpected kind {other}"),
    }
}

fn through_v2(what: &str, doc: &Value) -> Value {
    match doc["kind"].as_str().unwrap_or_default() {
        "ProxmoxCluster" => through::<v1alpha2::ProxmoxCluster>(what, doc),
        "ProxmoxClusterTemplate" => through::<v1alpha2::ProxmoxClusterTemplate>(what, doc),
        "ProxmoxMachine" => through::<v1alpha2::ProxmoxMachine>(what, doc),
        "ProxmoxMachineTemplate" => through::<v1alpha2::ProxmoxMachineTemplate>(what, doc),
        other => panic!("{what}: unexpected kind {other}"),
    }
}

#[test]
fn capmox_v1alpha1_objects_round_trip() {
    let Some(objects) = proxmox_objects() else {
        eprintln!("skipped: ../shared/compat/capmox-v0.9 not found (set CAPMOX_COMPAT_ROOT)");
        return;
    };
    let v1: Vec<_> = objects.iter().filter(|(_, d)| d["apiVersion"] == V1).collect();
    assert!(!v1.is_empty(), "no v1alpha1 objects found");
    for (what, doc) in v1 {
        let back = through_v1(what, doc);
        if doc.get("spec").is_none() {
            // A placeholder sample: the zero-valued spec appears, everything else is unchanged.
            eprintln!("{what}: placeholder without spec decodes to the zero-valued spec");
            let mut without_spec = back.clone();
            without_spec.as_object_mut().expect("object").remove("spec");
            assert_eq!(&without_spec, doc, "{what}");
            assert_eq!(
                through_v1(what, &back),
                back,
                "{what}: zero-valued spec is stable"
            );
        } else {
            assert_eq!(&back, doc, "{what}");
        }
    }
}

#[test]
fn capmox_v1alpha2_objects_round_trip_through_v1alpha1() {
    let Some(objects) = proxmox_objects() else {
        eprintln!("skipped: ../shared/compat/capmox-v0.9 not found (set CAPMOX_COMPAT_ROOT)");
        return;
    };
    let v2: Vec<_> = objects.iter().filter(|(_, d)| d["apiVersion"] == V2).collect();
    assert!(
        v2.len() >= 10,
        "expected capmox's v1alpha2 templates, found {}",
        v2.len()
    );
    for (what, doc) in v2 {
        if doc.get("spec").is_none() {
            // v1alpha2 requires `spec`; the API server rejects these placeholder samples.
            eprintln!("{what}: placeholder without the required spec, not a valid v1alpha2 object");
            continue;
        }
        let hub = through_v2(what, doc);
        let spoke = convert_value(hub.clone(), V1).unwrap_or_else(|e| panic!("{what}: down-conversion: {e}"));
        assert_eq!(spoke["apiVersion"], V1);
        assert_eq!(
            through_v1(what, &spoke),
            spoke,
            "{what}: v1alpha1 form re-serializes unchanged"
        );
        let back = convert_value(spoke, V2).unwrap_or_else(|e| panic!("{what}: up-conversion: {e}"));
        assert_eq!(back, hub, "{what}: hub -> v1alpha1 -> hub");
    }
}

fn hand_written() -> Vec<Value> {
    let meta = |name: &str| json!({"name": name, "namespace": "default", "labels": {"cluster.x-k8s.io/cluster-name": "c1"}});
    let pool = |name: &str| json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "GlobalInClusterIPPool", "name": name});
    let machine_spec = json!({
        "sourceNode": "pve1", "templateID": 9000, "format": "qcow2", "full": true, "storage": "local-lvm",
        "pool": "capi", "snapName": "base", "target": "pve2", "description": "worker",
        "numSockets": 2, "numCores": 4, "memoryMiB": 8192,
        "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 100}},
        "network": {
            "default": {"bridge": "vmbr0", "model": "virtio", "mtu": 1500, "vlan": 100, "dnsServers": ["10.0.0.53"],
                        "ipv4PoolRef": pool("shared-inet"), "ipv6PoolRef": pool("shared-inet6")},
            "additionalDevices": [{
                "name": "net1", "bridge": "vmbr1", "model": "e1000", "mtu": 9000, "linkMtu": 9000,
                "ipv4PoolRef": pool("storage-inet"),
                "routes": [{"to": "10.20.0.0/16", "via": "10.10.0.1", "metric": 200, "table": 100}],
                "routingPolicy": [{"to": "10.20.0.0/16", "from": "10.10.0.0/16", "table": 100, "priority": 100}]
            }],
            "vrfs": [{"name": "vrf-storage", "table": 100, "interfaces": ["net1"],
                      "routes": [{"to": "default", "via": "10.10.0.1"}],
                      "routingPolicy": [{"from": "10.10.0.0/16", "priority": 200}]}]
        },
        "vmIDRange": {"start": 1000, "end": 1999},
        "checks": {"skipCloudInitStatus": false, "skipQemuGuestAgent": false},
        "metadataSettings": {"providerIDInjection": true},
        "allowedNodes": ["pve1", "pve2"],
        "tags": ["k8s", "worker"]
    });
    let cluster_spec = json!({
        "controlPlaneEndpoint": {"host": "10.0.0.100", "port": 6443},
        "externalManagedControlPlane": false,
        "allowedNodes": ["pve1", "pve2", "pve3"],
        "schedulerHints": {"memoryAdjustment": 95},
        "ipv4Config": {"addresses": ["10.0.0.10-10.0.0.50"], "prefix": 24, "gateway": "10.0.0.1", "metric": 100},
        "ipv6Config": {"addresses": ["fd00::10-fd00::50"], "prefix": 64, "gateway": "fd00::1", "metric": 100},
        "dnsServers": ["10.0.0.53", "1.1.1.1"],
        "credentialsRef": {"name": "pve-creds", "namespace": "capmox-system"},
        "cloneSpec": {
            "machineSpec": {"controlPlane": machine_spec.clone(), "workerNode": {"sourceNode": "pve1", "templateID": 9000}},
            "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3Nza admin@example"],
            "virtualIPNetworkInterface": "eth0"
        }
    });
    vec![
        json!({"apiVersion": V1, "kind": "ProxmoxCluster", "metadata": meta("c1"), "spec": cluster_spec.clone(),
               "status": {"ready": true, "inClusterIpPoolRef": [{"name": "c1-v4-icip"}, {"name": "c1-v6-icip"}],
                          "nodeLocations": {"controlPlane": [{"machine": {"name": "c1-cp-1"}, "node": "pve1"}],
                                            "workers": [{"machine": {"name": "c1-w-1"}, "node": "pve2"}]},
                          "failureReason": "InvalidConfiguration", "failureMessage": "bad",
                          "conditions": [{"type": "Ready", "status": "False", "severity": "Error", "reason": "ProxmoxUnreachable",
                                          "message": "connection refused", "lastTransitionTime": "2024-05-06T07:08:09Z"}]}}),
        json!({"apiVersion": V1, "kind": "ProxmoxClusterTemplate", "metadata": meta("ct"),
               "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": cluster_spec}}}),
        json!({"apiVersion": V1, "kind": "ProxmoxMachine", "metadata": meta("m1"), "spec": machine_spec.clone(),
               "status": {"ready": true, "vmStatus": "ready", "bootstrapDataProvided": true, "proxmoxNode": "pve2",
                          "taskRef": "UPID:pve2:0001", "retryAfter": "2024-05-06T07:08:09Z",
                          "addresses": [{"type": "Hostname", "address": "m1"}, {"type": "InternalIP", "address": "10.0.0.11"}],
                          "ipAddresses": {"net0": {"ipv4": "10.0.0.11", "ipv6": "fd00::11"}, "net1": {"ipv4": "10.10.0.11"}},
                          "network": [{"connected": true, "macAddr": "bc:24:11:00:00:01", "networkName": "vmbr0", "ipAddrs": ["10.0.0.11"]}],
                          "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2024-05-06T07:08:09Z"}]}}),
        json!({"apiVersion": V1, "kind": "ProxmoxMachineTemplate", "metadata": meta("mt"),
               "spec": {"template": {"spec": machine_spec}}}),
    ]
}

fn spoke_hub_spoke<T>(doc: &Value)
where
    T: Convertible + Serialize + DeserializeOwned + PartialEq + std::fmt::Debug,
    T::Hub: Serialize + DeserializeOwned,
{
    let spoke: T = serde_json::from_value(doc.clone()).expect("decodes");
    let hub = serde_json::to_value(spoke.to_hub().expect("up")).expect("encodes");
    let hub: T::Hub = serde_json::from_value(hub).expect("hub decodes");
    assert_eq!(T::from_hub(&hub).expect("down"), spoke);
}

#[test]
fn hand_written_v1alpha1_manifests_round_trip() {
    for doc in hand_written() {
        let what = format!("hand-written {}", doc["kind"]);
        assert_eq!(through_v1(&what, &doc), doc, "{what}");
        match doc["kind"].as_str().unwrap_or_default() {
            "ProxmoxCluster" => spoke_hub_spoke::<v1alpha1::ProxmoxCluster>(&doc),
            "ProxmoxClusterTemplate" => spoke_hub_spoke::<v1alpha1::ProxmoxClusterTemplate>(&doc),
            "ProxmoxMachine" => spoke_hub_spoke::<v1alpha1::ProxmoxMachine>(&doc),
            _ => spoke_hub_spoke::<v1alpha1::ProxmoxMachineTemplate>(&doc),
        }
    }
}

#[test]
fn substitution_uses_defaults_and_representatives() {
    assert_eq!(substitute("a: ${NUM_CORES:=4}"), "a: 4");
    assert_eq!(substitute("a: ${TEMPLATE_VMID}"), "a: 24");
    assert_eq!(substitute("x${CLUSTER_NAME}y"), "xrep-cluster-namey");
    assert_eq!(substitute("v: ${VIP_NETWORK_INTERFACE=\"\"}"), "v: ");
}
