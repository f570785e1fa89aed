//! The webhook manifests under `config/` are exactly what `capmox_api::webhook` generates, say
//! what capmox v0.9's say, and render to capmox's released names through kustomize.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;

use capmox_api::webhook::manifests;
use serde_json::Value;

fn config_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../config")
}

fn docs(text: &str) -> Vec<Value> {
    text.split("\n---")
        .map(|d| d.trim_start_matches("---"))
        .filter(|d| d.lines().any(|l| !l.trim().is_empty() && !l.starts_with('#')))
        .map(|d| serde_saphyr::from_str::<Value>(d).expect("YAML parses"))
        .collect()
}

#[test]
fn checked_in_manifests_match_generated() {
    let dir = config_dir();
    let mut stale = Vec::new();
    let files = manifests::files().expect("manifests render");
    for (rel, generated) in &files {
        match std::fs::read_to_string(dir.join(rel)) {
            Ok(on_disk) if &on_disk == generated => {}
            Ok(_) => stale.push(format!("{} differs from the generated file", rel.display())),
            Err(e) => stale.push(format!("{} cannot be read: {e}", rel.display())),
        }
    }
    for sub in ["webhook", "crd/patches"] {
        for entry in std::fs::read_dir(dir.join(sub))
            .expect("directory exists")
            .flatten()
        {
            let rel = PathBuf::from(sub).join(entry.file_name());
            if !files.contains_key(&rel) {
                stale.push(format!("{} is not generated any more", rel.display()));
            }
        }
    }
    assert!(
        stale.is_empty(),
        "config/webhook or config/crd/patches is out of date; run `make manifests` and commit:\n  {}",
        stale.join("\n  ")
    );
}

/// The admission configurations list the served paths, and nothing else.
#[test]
fn manifests_name_exactly_the_served_paths() {
    let text = manifests::webhook_manifests().unwrap();
    let mut paths: Vec<String> = docs(&text)
        .iter()
        .flat_map(|d| d["webhooks"].as_array().cloned().unwrap_or_default())
        .map(|w| w["clientConfig"]["service"]["path"].as_str().unwrap().to_owned())
        .collect();
    for kind in capmox_api::webhook::WebhookKind::ALL {
        let patch = docs(&manifests::conversion_patch(kind).unwrap()).remove(0);
        let p = &patch["spec"]["conversion"]["webhook"]["clientConfig"]["service"]["path"];
        assert_eq!(p, "/convert");
    }
    paths.push("/convert".into());
    let mut served = capmox_api::webhook::served_paths();
    paths.sort();
    served.sort();
    assert_eq!(paths, served);
}

fn compat(rel: &str) -> Option<PathBuf> {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../shared/compat/capmox-v0.9/config")
        .join(rel);
    p.exists().then_some(p)
}

fn without_ca_annotation(mut v: Value) -> Value {
    if let Some(m) = v["metadata"].as_object_mut() {
        m.remove("annotations");
    }
    v
}

/// Same configurations as capmox v0.9 (apart from the CA injection annotation, which capmox adds
/// in `config/default`), same Service, same CRD patches.
#[test]
fn manifests_say_what_capmox_says() {
    let Some(dir) = compat("webhook") else {
        eprintln!("skipped: ../shared/compat/capmox-v0.9/config not found");
        return;
    };
    let theirs = docs(&std::fs::read_to_string(dir.join("manifests.yaml")).unwrap());
    let ours: Vec<Value> = docs(&manifests::webhook_manifests().unwrap())
        .into_iter()
        .map(without_ca_annotation)
        .collect();
    assert_eq!(ours, theirs);
    let svc = |t: &str| {
        let mut v = docs(t).remove(0);
        v["metadata"].as_object_mut().unwrap().remove("labels");
        v
    };
    assert_eq!(
        svc(&manifests::service().unwrap()),
        svc(&std::fs::read_to_string(dir.join("service.yaml")).unwrap())
    );
    for kind in capmox_api::webhook::WebhookKind::ALL {
        let patches = compat("crd/patches").unwrap();
        for (name, ours) in [
            (
                format!("webhook_in_{}.yaml", kind.plural()),
                manifests::conversion_patch(kind).unwrap(),
            ),
            (
                format!("cainjection_in_{}.yaml", kind.plural()),
                manifests::ca_injection_patch(kind).unwrap(),
            ),
        ] {
            let theirs = std::fs::read_to_string(patches.join(&name)).unwrap();
            assert_eq!(docs(&ours), docs(&theirs), "{name}");
        }
    }
}

/// Through kustomize with the release's `namePrefix`/`namespace`, the configurations are
/// `capmox-{mutating,validating}-webhook-configuration` calling `capmox-webhook-service` in
/// `capmox-system`.
#[test]
fn kustomize_renders_capmox_release_names() {
    if Command::new("kubectl")
        .arg("version")
        .arg("--client")
        .output()
        .is_err()
    {
        eprintln!("skipped: kubectl (kustomize) not found");
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let overlay = tmp.path().join("overlay");
    std::fs::create_dir_all(&overlay).unwrap();
    // kustomize only loads resources below the kustomization's root: copy config/webhook next to it.
    let webhook = tmp.path().join("webhook");
    std::fs::create_dir_all(&webhook).unwrap();
    for entry in std::fs::read_dir(config_dir().join("webhook")).unwrap().flatten() {
        std::fs::copy(entry.path(), webhook.join(entry.file_name())).unwrap();
    }
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "namePrefix: capmox-\nnamespace: capmox-system\nresources:\n- ../webhook\n",
    )
    .unwrap();
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(&overlay)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let rendered = docs(&String::from_utf8(out.stdout).unwrap());
    let by_kind = |k: &str| rendered.iter().find(|d| d["kind"] == k).unwrap().clone();
    let svc = by_kind("Service");
    assert_eq!(svc["metadata"]["name"], "capmox-webhook-service");
    assert_eq!(svc["metadata"]["namespace"], "capmox-system");
    for (kind, name) in [
        (
            "MutatingWebhookConfiguration",
            "capmox-mutating-webhook-configuration",
        ),
        (
            "ValidatingWebhookConfiguration",
            "capmox-validating-webhook-configuration",
        ),
    ] {
        let cfg = by_kind(kind);
        assert_eq!(cfg["metadata"]["name"], name);
        assert_eq!(
            cfg["metadata"]["annotations"]["cert-manager.io/inject-ca-from"],
            "capmox-system/capmox-serving-cert"
        );
        for hook in cfg["webhooks"].as_array().unwrap() {
            assert_eq!(hook["clientConfig"]["service"]["name"], "capmox-webhook-service");
            assert_eq!(hook["clientConfig"]["service"]["namespace"], "capmox-system");
        }
    }
}
