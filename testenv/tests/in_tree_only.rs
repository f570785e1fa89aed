//! Internals of the in-tree server that have no counterpart to compare with on a real
//! kube-apiserver (whose watch cache size is its own): these skip when real binaries are
//! configured.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, PostParams, WatchEvent, WatchParams};
use serde_json::json;
use testenv::{ServerOptions, TestEnv, TestEnvOptions};

#[tokio::test]
async fn bounded_watch_history() {
    if testenv::real::binaries_from_env().is_some() {
        eprintln!("skipped: tests the in-tree server's bounded event history (real binaries are configured)");
        return;
    }
    let env = TestEnv::start_with(TestEnvOptions {
        server: ServerOptions {
            event_history: 5,
            ..ServerOptions::default()
        },
        force_in_tree: true,
    })
    .await
    .unwrap();
    let c = env.client();
    let ns = common::namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let first = api
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "c0"}})).unwrap(),
        )
        .await
        .unwrap();
    let first_rv = first.metadata.resource_version.unwrap();
    for i in 1..10 {
        api.create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": format!("c{i}")}})).unwrap(),
        )
        .await
        .unwrap();
    }
    let mut w = api
        .watch(&WatchParams::default(), &first_rv)
        .await
        .unwrap()
        .boxed();
    match w.try_next().await.unwrap() {
        Some(WatchEvent::Error(e)) => {
            assert_eq!(e.code, 410);
            assert!(
                e.message
                    .starts_with(&format!("too old resource version: {first_rv} (")),
                "{}",
                e.message
            );
        }
        other => panic!("expected 410, got {other:?}"),
    }
}
