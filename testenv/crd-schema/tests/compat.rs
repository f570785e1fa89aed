//! Loads the capmox v0.9, CAPI v1.12 and in-cluster IPAM CRDs from `../shared/compat` (override with
//! `CRD_SCHEMA_COMPAT_DIR`) and checks the engine against them: every schema is structural, every
//! CEL rule compiles and evaluates, capmox samples get the defaults the apiserver fills in, and
//! representative invalid objects are rejected with the apiserver's messages.

// Test helpers outside #[test] functions: panicking on broken fixtures is the point.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crd_schema::{Schema, format_invalid, structural};
use serde_json::{Value, json};

const GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// Added by the apiserver when a type, enum, required or size error keeps CEL rules from running.
const BLOCKED: &str = "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

fn compat_dir() -> Option<PathBuf> {
    let dir = std::env::var_os("CRD_SCHEMA_COMPAT_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/compat")));
    if dir.join("capmox-v0.9/crd").is_dir() {
        Some(dir)
    } else {
        eprintln!(
            "skipped: {} not found (set CRD_SCHEMA_COMPAT_DIR)",
            dir.join("capmox-v0.9/crd").display()
        );
        None
    }
}

fn yaml_docs(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    docs.into_iter().filter(|d| !d.is_null()).collect()
}

fn crd_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for sub in ["capmox-v0.9/crd", "capi-v1.12", "ipam-in-cluster"] {
        let mut found: Vec<PathBuf> = std::fs::read_dir(dir.join(sub))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
            .collect();
        found.sort();
        files.extend(found);
    }
    files
}

/// (kind, version, schema JSON) for every CRD version.
fn all_versions(dir: &Path) -> Vec<(String, String, Value)> {
    let mut out = Vec::new();
    for f in crd_files(dir) {
        for crd in yaml_docs(&f) {
            let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
            for v in crd["spec"]["versions"].as_array().unwrap() {
                let name = v["name"].as_str().unwrap().to_string();
                out.push((kind.clone(), name, v["schema"]["openAPIV3Schema"].clone()));
            }
        }
    }
    out
}

fn capmox_schema(dir: &Path, kind: &str, version: &str) -> Schema {
    static CACHE: OnceLock<Vec<(String, String, Value)>> = OnceLock::new();
    let versions = CACHE.get_or_init(|| {
        let mut out = Vec::new();
        for f in crd_files(dir)
            .iter()
            .filter(|f| f.to_string_lossy().contains("capmox-v0.9"))
        {
            for crd in yaml_docs(f) {
                let kind = crd["spec"]["names"]["kind"].as_str().unwrap().to_string();
                for v in crd["spec"]["versions"].as_array().unwrap() {
                    let name = v["name"].as_str().unwrap().to_string();
                    out.push((kind.clone(), name, v["schema"]["openAPIV3Schema"].clone()));
                }
            }
        }
        out
    });
    let (_, _, s) = versions
        .iter()
        .find(|(k, v, _)| k == kind && v == version)
        .unwrap_or_else(|| panic!("{kind} {version} not found"));
    Schema::from_openapi(s).unwrap()
}

#[test]
fn every_schema_is_structural_and_every_rule_is_supported() {
    let Some(dir) = compat_dir() else { return };
    let versions = all_versions(&dir);
    assert!(
        versions.len() >= 20,
        "expected the capmox, CAPI and IPAM CRDs, got {}",
        versions.len()
    );
    let mut rule_count = 0;
    let mut unsupported = Vec::new();
    for (i, (kind, version, schema)) in versions.iter().enumerate() {
        let problems = structural::check_at(schema, &format!("spec.versions[{i}].schema.openAPIV3Schema"));
        assert!(
            problems.is_empty(),
            "{kind} {version} is not structural: {problems:#?}"
        );
        let parsed = Schema::from_openapi(schema).unwrap_or_else(|e| panic!("{kind} {version}: {e}"));
        rule_count += parsed.rules().len();
        unsupported.extend(
            parsed
                .unsupported_rules()
                .into_iter()
                .map(|r| format!("{kind} {version}: {r}")),
        );
    }
    eprintln!(
        "{} schemas, {rule_count} CEL rules, {} unsupported",
        versions.len(),
        unsupported.len()
    );
    for u in &unsupported {
        eprintln!("unsupported: {u}");
    }
    assert!(
        rule_count > 50,
        "expected the CRDs' CEL rules, found {rule_count}"
    );
    assert!(
        unsupported.is_empty(),
        "rules the engine cannot compile: {unsupported:#?}"
    );
}

#[test]
fn capmox_samples_get_apiserver_defaults() {
    let Some(dir) = compat_dir() else { return };
    let samples = dir.join("capmox-v0.9/samples");
    let cluster = capmox_schema(&dir, "ProxmoxCluster", "v1alpha2");
    let mut obj = yaml_docs(&samples.join("infrastructure_v1alpha2_proxmoxcluster.yaml")).remove(0);
    cluster.prune_and_default(&mut obj);
    assert_eq!(obj["spec"]["ipv4Config"]["metric"], json!(100));
    assert_eq!(obj["spec"]["externalManagedControlPlane"], json!(false));
    assert_eq!(
        obj["metadata"]["labels"]["app.kubernetes.io/name"],
        json!("proxmoxcluster")
    );
    let errs = cluster.validate(&obj, None);
    assert!(errs.is_empty(), "{errs:?}");

    // The machine sample has `spec:` with no fields (null): the apiserver drops the null and then
    // requires spec.
    let machine = capmox_schema(&dir, "ProxmoxMachine", "v1alpha2");
    let mut obj = yaml_docs(&samples.join("infrastructure_v1alpha2_proxmoxmachine.yaml")).remove(0);
    machine.prune_and_default(&mut obj);
    assert!(obj.get("spec").is_none());
    let errs = machine.validate(&obj, None);
    assert_eq!(
        format_invalid("ProxmoxMachine", GROUP, "proxmoxmachine-sample", &errs),
        format!(
            "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"proxmoxmachine-sample\" is invalid: [spec: Required value, {BLOCKED}]"
        )
    );

    let mut obj = valid_machine();
    obj["spec"]["unknownField"] = json!("dropped");
    obj["spec"]["templateSelector"] = json!({"matchTags": ["ubuntu"]});
    obj["spec"].as_object_mut().unwrap().remove("templateID");
    obj["spec"].as_object_mut().unwrap().remove("sourceNode");
    obj["spec"]["network"]["networkDevices"] =
        json!([{"bridge": "vmbr0"}, {"name": "net1", "bridge": "vmbr1", "model": "e1000"}]);
    machine.prune_and_default(&mut obj);
    assert!(obj["spec"].get("unknownField").is_none());
    assert_eq!(obj["spec"]["full"], json!(true));
    assert_eq!(obj["spec"]["templateSelector"]["matchPolicy"], json!("exact"));
    assert_eq!(
        obj["spec"]["network"]["networkDevices"][0],
        json!({"bridge": "vmbr0", "name": "net0", "model": "virtio"})
    );
    assert_eq!(
        obj["spec"]["network"]["networkDevices"][1]["model"],
        json!("e1000")
    );
    let errs = machine.validate(&obj, None);
    assert!(errs.is_empty(), "{errs:?}");
}

fn valid_machine() -> Value {
    json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": "m1", "namespace": "default"},
        "spec": {
            "sourceNode": "pve1",
            "templateID": 100,
            "memoryMiB": 2048,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}
        }
    })
}

fn machine_errors(dir: &Path, edit: impl FnOnce(&mut Value)) -> String {
    let machine = capmox_schema(dir, "ProxmoxMachine", "v1alpha2");
    let mut obj = valid_machine();
    edit(&mut obj);
    machine.prune_and_default(&mut obj);
    format_invalid("ProxmoxMachine", GROUP, "m1", &machine.validate(&obj, None))
}

#[test]
fn invalid_capmox_objects_are_rejected_like_the_apiserver() {
    let Some(dir) = compat_dir() else { return };
    let head = "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"m1\" is invalid";
    assert_eq!(machine_errors(&dir, |_| {}), head);

    assert_eq!(
        machine_errors(&dir, |o| o["spec"]["providerID"] =
            json!("vsphere://4217c5f4-7ac0-4c38-b3d5-4e9a2b1c0d11")),
        format!(
            "{head}: spec.providerID: Invalid value: \"vsphere://4217c5f4-7ac0-4c38-b3d5-4e9a2b1c0d11\": spec.providerID in body should match '^proxmox://[a-fA-F0-9]{{8}}-[a-fA-F0-9]{{4}}-[a-fA-F0-9]{{4}}-[a-fA-F0-9]{{4}}-[a-fA-F0-9]{{12}}$'"
        )
    );
    assert_eq!(
        machine_errors(&dir, |o| o["spec"]["memoryMiB"] = json!(1001)),
        format!(
            "{head}: spec.memoryMiB: Invalid value: 1001: spec.memoryMiB in body should be a multiple of 8"
        )
    );
    let either = "must define either a SourceNode with a TemplateID or a TemplateSelector";
    assert_eq!(
        machine_errors(&dir, |o| o["spec"]["templateSelector"] =
            json!({"matchTags": ["a"]})),
        format!("{head}: spec: Invalid value: \"object\": {either}"),
        "both templateID and templateSelector break both exists_one rules (one message, shown once)"
    );
    assert_eq!(
        machine_errors(&dir, |o| {
            let spec = o["spec"].as_object_mut().unwrap();
            spec.remove("templateID");
            spec.remove("sourceNode");
        }),
        format!(
            "{head}: [spec: Invalid value: \"object\": {either}, spec: Invalid value: \"object\": Must specify either templateID or templateSelector]"
        )
    );
    assert_eq!(
        machine_errors(&dir, |o| o["spec"]["vmIDRange"] =
            json!({"start": 2000, "end": 1000})),
        format!(
            "{head}: spec.vmIDRange: Invalid value: \"object\": end should be greater than or equal to start"
        )
    );
    assert_eq!(
        machine_errors(&dir, |o| o["spec"]["network"]["networkDevices"][0]["mtu"] =
            json!(100)),
        format!("{head}: spec.network.networkDevices[0].mtu: Invalid value: \"integer\": invalid MTU value")
    );
    assert_eq!(
        machine_errors(
            &dir,
            |o| o["spec"]["network"]["networkDevices"] =
                json!([{"name": "net1", "bridge": "vmbr0"}, {"name": "net1", "bridge": "vmbr1"}])
        ),
        format!(
            "{head}: spec.network.networkDevices[1]: Duplicate value: map[string]interface {{}}{{\"name\":\"net1\"}}"
        )
    );
    assert_eq!(
        machine_errors(&dir, |o| o["spec"]["network"]["networkDevices"][0]["model"] =
            json!("ne2k")),
        format!(
            "{head}: [spec.network.networkDevices[0].model: Unsupported value: \"ne2k\": supported values: \"e1000\", \"virtio\", \"rtl8139\", \"vmxnet3\", {BLOCKED}]"
        )
    );
    assert_eq!(
        machine_errors(&dir, |o| o["spec"]["format"] = json!("raw")),
        head,
        "full defaults to true"
    );
    assert_eq!(
        machine_errors(&dir, |o| {
            o["spec"]["format"] = json!("raw");
            o["spec"]["full"] = json!(false);
        }),
        format!("{head}: spec: Invalid value: \"object\": Must set full=true when specifying format")
    );
}

#[test]
fn transition_rules_apply_on_update_only() {
    let Some(dir) = compat_dir() else { return };
    let machine = capmox_schema(&dir, "ProxmoxMachine", "v1alpha2");
    let mut old = valid_machine();
    old["spec"]["disks"] = json!({"bootVolume": {"disk": "scsi0", "sizeGb": 10}});
    machine.prune_and_default(&mut old);
    assert!(machine.validate(&old, None).is_empty());
    let mut new = old.clone();
    new["spec"]["disks"]["bootVolume"]["sizeGb"] = json!(20);
    assert!(machine.validate(&new, None).is_empty(), "no oldSelf on create");
    let errs = machine.validate(&new, Some(&old));
    assert_eq!(
        format_invalid("ProxmoxMachine", GROUP, "m1", &errs),
        "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"m1\" is invalid: spec.disks.bootVolume: Invalid value: \"object\": Value is immutable"
    );
    let mut unrelated = old.clone();
    unrelated["spec"]["memoryMiB"] = json!(4096);
    assert!(machine.validate(&unrelated, Some(&old)).is_empty());
}

fn cluster_errors(dir: &Path, edit: impl FnOnce(&mut Value)) -> String {
    let cluster = capmox_schema(dir, "ProxmoxCluster", "v1alpha2");
    let mut obj = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": "c1", "namespace": "default"},
        "spec": {
            "dnsServers": ["8.8.8.8"],
            "ipv4Config": {"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"}
        }
    });
    edit(&mut obj);
    cluster.prune_and_default(&mut obj);
    format_invalid("ProxmoxCluster", GROUP, "c1", &cluster.validate(&obj, None))
}

#[test]
fn invalid_clusters_are_rejected_like_the_apiserver() {
    let Some(dir) = compat_dir() else { return };
    let head = "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c1\" is invalid";
    assert_eq!(cluster_errors(&dir, |_| {}), head);
    assert_eq!(
        cluster_errors(&dir, |o| {
            o["spec"].as_object_mut().unwrap().remove("dnsServers");
            o["spec"]["ipv4Config"]["prefix"] = json!(200);
        }),
        format!(
            "{head}: [spec.ipv4Config.prefix: Invalid value: 200: spec.ipv4Config.prefix in body should be less than or equal to 128, spec.dnsServers: Required value, {BLOCKED}]"
        )
    );
    assert_eq!(
        cluster_errors(&dir, |o| {
            o["spec"].as_object_mut().unwrap().remove("ipv4Config");
        }),
        format!(
            "{head}: spec: Invalid value: \"object\": no such key: ipv4Config evaluating rule: at least one ip config must be set, either ipv4Config or ipv6Config"
        )
    );
    assert_eq!(
        cluster_errors(&dir, |o| {
            o["spec"].as_object_mut().unwrap().remove("ipv4Config");
            o["spec"]["ipv6Config"] =
                json!({"addresses": ["fd00::10-fd00::20"], "prefix": 64, "gateway": "fd00::1"});
        }),
        head,
        "an error on the left of || is absorbed by a true right side"
    );
    assert_eq!(
        cluster_errors(&dir, |o| o["spec"]["ipv4Config"]["addresses"] = json!([])),
        format!("{head}: spec.ipv4Config: Invalid value: \"object\": IPv4Config addresses must be provided")
    );
    assert_eq!(
        cluster_errors(&dir, |o| o["spec"]["controlPlaneEndpoint"] =
            json!({"host": "10.0.0.5", "port": 0})),
        format!(
            "{head}: [spec.controlPlaneEndpoint.port: Invalid value: 0: spec.controlPlaneEndpoint.port in body should be greater than or equal to 1, spec.controlPlaneEndpoint: Invalid value: \"object\": port must be within 1-65535]"
        )
    );
    assert_eq!(
        cluster_errors(&dir, |o| o["spec"]["dnsServers"] = json!(["8.8.8.8", "8.8.8.8"])),
        format!("{head}: spec.dnsServers[1]: Duplicate value: \"8.8.8.8\"")
    );
}
