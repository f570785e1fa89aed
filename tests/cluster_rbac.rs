//! `config/rbac` is rendered from the permissions the controllers declare
//! (`capmox::controllers::rbac`). Run with `CAPMOX_UPDATE_RBAC=1` to rewrite the files.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use capmox::controllers::rbac;
use k8s_openapi::api::rbac::v1::{ClusterRole, Role};

fn path(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("config/rbac")
        .join(name)
}

fn check<T: serde::Serialize + serde::de::DeserializeOwned>(file: &str, generated: &T) {
    let p = path(file);
    let rendered = format!(
        "# Generated from src/controllers/rbac.rs; CAPMOX_UPDATE_RBAC=1 cargo test --test cluster_rbac rewrites it.\n{}",
        serde_saphyr::to_string(generated).unwrap()
    );
    if std::env::var_os("CAPMOX_UPDATE_RBAC").is_some() {
        std::fs::write(&p, &rendered).unwrap();
    }
    let on_disk = std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let parsed: T = serde_saphyr::from_str(&on_disk).unwrap();
    assert_eq!(
        serde_json::to_value(&parsed).unwrap(),
        serde_json::to_value(generated).unwrap(),
        "{} is out of date: run CAPMOX_UPDATE_RBAC=1 cargo test -p capmox --test cluster_rbac",
        p.display()
    );
}

#[test]
fn manager_role_matches_declared_rules() {
    let role: ClusterRole = rbac::manager_role();
    check("role.yaml", &role);
    let rules = role.rules.unwrap();
    for r in rbac::CLUSTER_CONTROLLER
        .iter()
        .chain(rbac::MACHINE_CONTROLLER)
        .chain(rbac::MACHINE_TEMPLATE_CONTROLLER)
        .chain(rbac::VIRTUAL_MACHINE_CONTROLLER)
        .chain(rbac::VM_OPERATIONS_CONTROLLERS)
        .chain(rbac::DIAGNOSTICS)
    {
        for v in r.verbs {
            assert!(rbac::grants(&rules, r.group, r.resource, v), "{r:?} {v}");
        }
    }
    // The secured metrics endpoint reviews every scrape with the API server.
    assert!(rbac::grants(
        &rules,
        "authentication.k8s.io",
        "tokenreviews",
        "create"
    ));
    assert!(rbac::grants(
        &rules,
        "authorization.k8s.io",
        "subjectaccessreviews",
        "create"
    ));
}

#[test]
fn metrics_reader_role_matches_the_path_the_server_authorizes() {
    let role: ClusterRole = rbac::metrics_reader_role();
    check("metrics_reader_role.yaml", &role);
    let rules = role.rules.unwrap();
    assert_eq!(rules.len(), 1);
    assert_eq!(
        rules[0].non_resource_urls.as_deref(),
        Some(&[rbac::METRICS_PATH.to_owned()][..])
    );
    assert_eq!(rules[0].verbs, ["get"]);
    // `capmox-` is added by config/default: capmox's `capmox-metrics-reader`.
    assert_eq!(role.metadata.name.as_deref(), Some("metrics-reader"));
}

#[test]
fn leader_election_role_matches_declared_rules() {
    let role: Role = rbac::leader_election_role();
    check("leader_election_role.yaml", &role);
    assert!(rbac::grants(
        role.rules.as_ref().unwrap(),
        "coordination.k8s.io",
        "leases",
        "update"
    ));
}

#[test]
fn kustomization_lists_every_manifest() {
    let k = std::fs::read_to_string(path("kustomization.yaml")).unwrap();
    for f in [
        "service_account.yaml",
        "role.yaml",
        "role_binding.yaml",
        "leader_election_role.yaml",
        "leader_election_role_binding.yaml",
        "metrics_reader_role.yaml",
    ] {
        assert!(k.contains(f), "kustomization.yaml misses {f}");
        assert!(path(f).exists(), "{f} missing");
    }
}
