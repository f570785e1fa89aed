//! Shared harness of the stand-in tests: an in-tree control plane with every CRD the stand-ins
//! and the provider use, and a namespace.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use serde_json::json;
use testenv::{ServerOptions, TestEnv, TestEnvOptions};

/// Namespace of every test object.
pub const NS: &str = "standins";

/// A running control plane with the CRDs installed and [`NS`] created.
pub struct Env {
    pub env: TestEnv,
    pub client: kube::Client,
}

/// Starts the in-tree control plane (`gc`: with its garbage collector).
pub async fn start(gc: bool) -> Env {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = TestEnv::start_with(TestEnvOptions {
        server: ServerOptions {
            garbage_collector: gc,
            ..ServerOptions::default()
        },
        force_in_tree: true,
    })
    .await
    .expect("control plane starts");
    env.install_crds(capmox_api::crd::all().unwrap()).await.unwrap();
    env.install_crds(capmox_standins::crds::all().unwrap())
        .await
        .unwrap();
    let client = env.client();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    Env { env, client }
}

/// Polls `f` until it returns `Some`, failing after `secs` seconds.
#[allow(unused_imports)]
pub use testenv::wait_for;
