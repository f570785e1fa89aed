//! Request counts by User-Agent, verb and resource: the in-tree server's counters, or the audit
//! log of a real kube-apiserver (started with one when `KUBEBUILDER_ASSETS` names the binaries).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;
use testenv::TestEnv;
use testenv::server::requests::RequestKey;

const AGENT: &str = "request-count-test/1";

async fn start(dir: &std::path::Path) -> TestEnv {
    match testenv::real::binaries_from_env() {
        Some((apiserver, etcd)) => TestEnv::start_real_audited(apiserver, etcd, dir.join("audit.log"))
            .await
            .unwrap(),
        None => TestEnv::start().await.unwrap(),
    }
}

#[tokio::test]
async fn requests_are_counted_by_user_agent_verb_and_resource() {
    let dir = tempfile::tempdir().unwrap();
    let env = start(dir.path()).await;
    let kubeconfig = kube::config::Kubeconfig::read_from(env.kubeconfig_path()).unwrap();
    let mut config = kube::Config::from_custom_kubeconfig(kubeconfig, &Default::default())
        .await
        .unwrap();
    config
        .headers
        .push((http::header::USER_AGENT, http::HeaderValue::from_static(AGENT)));
    let client = kube::Client::try_from(config).unwrap();
    let cms: Api<ConfigMap> = Api::namespaced(client, "default");
    let cm: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "counted"}})).unwrap();
    cms.create(&PostParams::default(), &cm).await.unwrap();
    for _ in 0..3 {
        cms.get("counted").await.unwrap();
    }
    cms.patch(
        "counted",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"a": "b"}})),
    )
    .await
    .unwrap();
    cms.list(&Default::default()).await.unwrap();
    let key = |verb: &str| RequestKey {
        user_agent: AGENT.into(),
        verb: verb.into(),
        resource: "configmaps".into(),
    };
    let want = [("create", 1), ("get", 3), ("patch", 1), ("list", 1)];
    // The audit log is written as requests complete; give it a moment.
    let counts = testenv::wait_for(10, "the requests counted", || async {
        let counts = env.request_counts().expect("counts available").unwrap();
        want.iter()
            .all(|(verb, n)| counts.get(&key(verb)) == Some(n))
            .then_some(counts)
    })
    .await;
    let ours: u64 = counts
        .iter()
        .filter(|(k, _)| k.user_agent == AGENT)
        .map(|(_, n)| n)
        .sum();
    assert_eq!(ours, 6, "{counts:?}");
}
