//! The opt-in garbage collector of the in-tree server (envtest has none, so this is an in-tree-only
//! test: it skips when real binaries are configured).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, PostParams, PropagationPolicy};
use serde_json::json;
use testenv::{ServerOptions, TestEnv, TestEnvOptions};

fn owned(name: &str, owner: &ConfigMap) -> ConfigMap {
    let mut c: ConfigMap = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    c.metadata.owner_references = Some(vec![OwnerReference {
        api_version: "v1".into(),
        kind: "ConfigMap".into(),
        name: owner.metadata.name.clone().unwrap(),
        uid: owner.metadata.uid.clone().unwrap(),
        ..Default::default()
    }]);
    c
}

#[tokio::test]
async fn opt_in_garbage_collector() {
    if testenv::real::binaries_from_env().is_some() {
        eprintln!(
            "skipped: tests the in-tree server's opt-in garbage collector (real binaries are configured)"
        );
        return;
    }
    let opts = TestEnvOptions {
        server: ServerOptions {
            garbage_collector: true,
            ..ServerOptions::default()
        },
        force_in_tree: true,
    };
    let env = TestEnv::start_with(opts).await.unwrap();
    let c = env.client();
    let ns = common::namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let mk = |n: &str| serde_json::from_value::<ConfigMap>(json!({"metadata": {"name": n}})).unwrap();

    // Background: dependents go once the owner is gone.
    let owner = api.create(&PostParams::default(), &mk("owner")).await.unwrap();
    api.create(&PostParams::default(), &owned("dep", &owner))
        .await
        .unwrap();
    let mut kept = owned("kept-by-finalizer", &owner);
    kept.metadata.finalizers = Some(vec!["example.io/hold".into()]);
    api.create(&PostParams::default(), &kept).await.unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    common::wait_for(10, "dependent collected", || async {
        api.get_opt("dep").await.unwrap().is_none().then_some(())
    })
    .await;
    let held = common::wait_for(10, "finalizer-held dependent marked", || async {
        api.get_opt("kept-by-finalizer")
            .await
            .unwrap()
            .filter(|c| c.metadata.deletion_timestamp.is_some())
    })
    .await;
    assert_eq!(held.metadata.finalizers.unwrap(), ["example.io/hold"]);

    // Foreground: the owner waits for its dependents.
    let owner = api.create(&PostParams::default(), &mk("fg-owner")).await.unwrap();
    api.create(&PostParams::default(), &owned("fg-dep", &owner))
        .await
        .unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Foreground),
        ..Default::default()
    };
    api.delete("fg-owner", &dp).await.unwrap();
    common::wait_for(10, "foreground deletion completes", || async {
        let gone = api.get_opt("fg-owner").await.unwrap().is_none()
            && api.get_opt("fg-dep").await.unwrap().is_none();
        gone.then_some(())
    })
    .await;

    // Orphan: dependents lose the owner reference and stay.
    let owner = api.create(&PostParams::default(), &mk("or-owner")).await.unwrap();
    api.create(&PostParams::default(), &owned("or-dep", &owner))
        .await
        .unwrap();
    let dp = DeleteParams {
        propagation_policy: Some(PropagationPolicy::Orphan),
        ..Default::default()
    };
    api.delete("or-owner", &dp).await.unwrap();
    let orphan = common::wait_for(10, "orphaned dependent", || async {
        let owner_gone = api.get_opt("or-owner").await.unwrap().is_none();
        let dep = api.get_opt("or-dep").await.unwrap();
        dep.filter(|d| owner_gone && d.metadata.owner_references.as_ref().is_none_or(Vec::is_empty))
    })
    .await;
    assert!(orphan.metadata.deletion_timestamp.is_none());
}
