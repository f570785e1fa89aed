//! The generated CRD files are read by a real Kubernetes tool: `kubectl kustomize` (Go YAML, no
//! cluster needed) must accept them and yield the same objects we generated.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

use serde_json::Value;

fn kubectl_available() -> bool {
    Command::new("kubectl")
        .args(["version", "--client"])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Numbers compared by value, everything else structurally.
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same(p, q)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (x, y) => x == y,
    }
}

#[test]
fn kubectl_kustomize_accepts_generated_crds() {
    if !kubectl_available() {
        eprintln!("skipped: kubectl not found on PATH");
        return;
    }
    let bases = Path::new(env!("CARGO_MANIFEST_DIR")).join("../config/crd/bases");
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut resources = Vec::new();
    let crds = capmox_api::crd::all().expect("CRDs assemble");
    for crd in &crds {
        let name = capmox_api::crd::file_name(crd);
        std::fs::copy(bases.join(&name), tmp.path().join(&name)).expect("copy CRD file");
        resources.push(format!("- {name}"));
    }
    std::fs::write(
        tmp.path().join("kustomization.yaml"),
        format!(
            "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n{}\n",
            resources.join("\n")
        ),
    )
    .expect("write kustomization");
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(tmp.path())
        .output()
        .expect("run kubectl kustomize");
    assert!(
        out.status.success(),
        "kubectl kustomize rejected the CRDs: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 output");
    let docs: Vec<Value> = serde_saphyr::from_multiple(&text).expect("kustomize output parses");
    assert_eq!(
        docs.len(),
        crds.len(),
        "kustomize returned {} objects",
        docs.len()
    );
    for crd in &crds {
        let ours = serde_json::to_value(crd).expect("CRD to JSON");
        let theirs = docs
            .iter()
            .find(|d| d["metadata"]["name"] == ours["metadata"]["name"])
            .unwrap_or_else(|| panic!("{} missing from kustomize output", ours["metadata"]["name"]));
        assert!(
            same(&ours, theirs),
            "{}: kubectl reads different data than we generated",
            ours["metadata"]["name"]
        );
    }
}
