//! Helpers of the release tests: the repository, `../shared`, kubectl, the rendered components,
//! clusterctl-style substitution with representative values, permissive CRDs for kinds of other
//! providers.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn shared_dir() -> PathBuf {
    std::env::var_os("CAPMOX_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join("../shared"))
}

/// `../shared/<rel>` when it exists; otherwise prints one line saying what is missing.
pub fn shared(rel: &str) -> Option<PathBuf> {
    let p = shared_dir().join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped (partly): ../shared/{rel} not found");
        None
    }
}

pub fn kubectl_present() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs kubectl with an optional kubeconfig and stdin; returns (success, stdout, stderr).
pub fn kubectl(kubeconfig: Option<&Path>, args: &[&str], stdin: Option<&str>) -> (bool, String, String) {
    let mut cmd = Command::new("kubectl");
    if let Some(k) = kubeconfig {
        cmd.arg("--kubeconfig").arg(k);
    }
    let mut child = cmd
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = child.stdin.take().unwrap();
    if let Some(s) = stdin {
        input.write_all(s.as_bytes()).unwrap();
    }
    drop(input);
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// `kubectl kustomize <dir>`.
pub fn kustomize(dir: &Path) -> String {
    let (ok, out, err) = kubectl(None, &["kustomize", dir.to_str().unwrap()], None);
    assert!(ok, "kubectl kustomize {} failed: {err}", dir.display());
    out
}

pub fn documents(text: &str) -> Vec<Value> {
    capmox::packaging::release::documents(text).unwrap()
}

/// The document of `kind` named `name`.
pub fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name}"))
}

/// Values for every variable the templates use (clusterctl would take them from the
/// environment or clusterctl.yaml); variables with defaults are left unset.
pub fn template_values(namespace: &str) -> BTreeMap<String, String> {
    [
        ("CLUSTER_NAME", "capmox-test"),
        ("NAMESPACE", namespace),
        ("KUBERNETES_VERSION", "v1.33.1"),
        ("CONTROL_PLANE_MACHINE_COUNT", "3"),
        ("WORKER_MACHINE_COUNT", "2"),
        ("LOAD_BALANCER_MACHINE_COUNT", "2"),
        ("CONTROL_PLANE_ENDPOINT_IP", "10.10.10.9"),
        ("NODE_IP_RANGES", "[10.10.10.10-10.10.10.50]"),
        ("IP_PREFIX", "24"),
        ("GATEWAY", "10.10.10.1"),
        ("DNS_SERVERS", "[8.8.8.8, 8.8.4.4]"),
        ("PROXMOX_SOURCENODE", "pve1"),
        ("TEMPLATE_VMID", "100"),
        ("TEMPLATE_TAGS", "kubernetes, v1.33.1"),
        ("VM_SSH_KEYS", "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIA a@example, ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIB b@example"),
        ("BRIDGE", "vmbr0"),
        ("BOOT_VOLUME_DEVICE", "scsi0"),
        ("NODE_IPV6_RANGES", "[\"2001:db8::10-2001:db8::50\"]"),
        ("IPV6_PREFIX", "64"),
        ("IPV6_GATEWAY", "2001:db8::1"),
        ("PROXMOX_URL", "https://pve.example:8006"),
        ("PROXMOX_TOKEN", "capmox@pve!capi"),
        ("PROXMOX_SECRET", "0b2f0f1e-5f5c-4c1e-9d0a-0c1d2e3f4a5b"),
        ("SECONDARY_BRIDGE", "vmbr1"),
        ("SECONDARY_IP_RANGES", "[10.20.0.10-10.20.0.50]"),
        ("SECONDARY_IP_PREFIX", "24"),
        ("SECONDARY_GATEWAY", "10.20.0.1"),
        ("EXT_SERVICE_BRIDGE", "vmbr2"),
        ("LB_BGP_IPV4_RANGES", "[10.30.0.10-10.30.0.20]"),
        ("LB_BGP_IPV4_PREFIX", "24"),
        ("LB_BGP_IPV6_RANGE", "[\"2001:db8:30::10-2001:db8:30::20\"]"),
        ("LB_BGP_IPV6_PREFIX", "64"),
        ("METALLB_IPV4_ASN", "64512"),
        ("METALLB_IPV6_ASN", "64512"),
        ("METALLB_IPV4_BGP_PEER", "10.30.0.1"),
        ("METALLB_IPV4_BGP_PEER2", "10.30.0.2"),
        ("METALLB_IPV6_BGP_PEER", "2001:db8:30::1"),
        ("METALLB_IPV6_BGP_PEER2", "2001:db8:30::2"),
        ("METALLB_IPV4_BGP_PEER_ASN", "64513"),
        ("METALLB_IPV4_BGP_PEER2_ASN", "64514"),
        ("METALLB_IPV6_BGP_PEER_ASN", "64513"),
        ("METALLB_IPV6_BGP_PEER2_ASN", "64514"),
        ("METALLB_IPV4_BGP_SECRET", "bgp-v4"),
        ("METALLB_IPV6_BGP_SECRET", "bgp-v6"),
        ("METALLB_IPV4_RANGE", "10.40.0.0/24"),
        ("METALLB_IPV6_RANGE", "2001:db8:40::/64"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect()
}

/// A CRD that accepts any object of `kind` (for providers whose CRDs are not at hand).
pub fn permissive_crd(group: &str, kind: &str, versions: &[&str], namespaced: bool) -> Value {
    let plural = format!("{}s", kind.to_lowercase());
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{group}")},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": format!("{kind}List"), "plural": plural,
                      "singular": kind.to_lowercase()},
            "scope": if namespaced { "Namespaced" } else { "Cluster" },
            "versions": versions.iter().enumerate().map(|(i, v)| json!({
                "name": v, "served": true, "storage": i == 0,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
            })).collect::<Vec<_>>(),
        }
    })
}

/// Kinds the in-tree test API server serves besides custom resources.
pub const IN_TREE_KINDS: [&str; 6] = [
    "Namespace",
    "ConfigMap",
    "Secret",
    "Event",
    "Lease",
    "CustomResourceDefinition",
];

/// Splits documents into those the control plane can judge and the kinds it cannot (the in-tree
/// server has no Deployments, Services, RBAC, webhook configurations).
pub fn judgeable(docs: &[Value], real: bool) -> (Vec<Value>, Vec<String>) {
    let mut ok = Vec::new();
    let mut skipped = Vec::new();
    for d in docs {
        let api = d["apiVersion"].as_str().unwrap_or("");
        let kind = d["kind"].as_str().unwrap_or("");
        let builtin = !api.contains('.') || api.starts_with("apps/") || api.contains(".k8s.io/");
        if real || !builtin || IN_TREE_KINDS.contains(&kind) {
            ok.push(d.clone());
        } else {
            skipped.push(format!("{kind}/{}", d["metadata"]["name"].as_str().unwrap_or("")));
        }
    }
    (ok, skipped)
}

/// Multi-document YAML of JSON values (JSON is YAML).
pub fn to_yaml_stream(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| format!("---\n{}\n", serde_json::to_string(d).unwrap()))
        .collect()
}
