//! The real-binary plumbing (process start, flags, certificates, token file, readiness, teardown),
//! exercised with `testenv-fake-control-plane` standing in for kube-apiserver and etcd. With real
//! binaries configured (`TEST_ASSET_*` / `KUBEBUILDER_ASSETS`) every other test runs against them.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use k8s_openapi::api::core::v1::{ConfigMap, Namespace};
use kube::api::{Api, PostParams};
use serde_json::json;
use testenv::TestEnv;

#[tokio::test(flavor = "multi_thread")]
async fn real_mode_plumbing_with_stand_in_binaries() {
    let fake = env!("CARGO_BIN_EXE_testenv-fake-control-plane");
    let env = TestEnv::start_real(fake, fake).await.unwrap();
    assert!(env.is_real());
    let c = env.client();
    Api::<Namespace>::all(c.clone()).get("default").await.unwrap();
    let ns = common::namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "x"}})).unwrap(),
    )
    .await
    .unwrap();
    common::install_test_crds(&env).await;
    assert!(
        std::fs::read_to_string(env.kubeconfig_path())
            .unwrap()
            .contains(env.server_url())
    );
    let url = env.server_url().to_string();
    drop(env);
    // The processes are gone after drop: the port stops answering.
    common::wait_for(30, "stand-in apiserver stopped", || {
        let url = url.clone();
        async move {
            let addr = url.trim_start_matches("https://").to_string();
            tokio::net::TcpStream::connect(addr).await.is_err().then_some(())
        }
    })
    .await;
}

#[tokio::test]
async fn missing_binaries_are_reported() {
    let err = TestEnv::start_real("/nonexistent/kube-apiserver", "/nonexistent/etcd")
        .await
        .unwrap_err();
    assert!(err.to_string().contains("/nonexistent/etcd"), "{err}");
}
