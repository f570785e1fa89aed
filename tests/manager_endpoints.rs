//! The in-process manager against the test control plane: health and readiness follow the CRD
//! wait, metrics are served, a missing CRD fails startup, shutdown is graceful, and the global
//! Proxmox probe result shows on `/readyz` without failing it.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::net::SocketAddr;
use std::time::Duration;

use capmox::manager::{Manager, ManagerError, ManagerOptions};
use tokio::sync::oneshot;

mod manager_support;
use manager_support::eventually;

fn local() -> Option<SocketAddr> {
    Some(SocketAddr::from(([127, 0, 0, 1], 0)))
}

fn http() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap()
}

async fn get(client: &reqwest::Client, addr: SocketAddr, path: &str) -> (u16, String) {
    let resp = client.get(format!("http://{addr}{path}")).send().await.unwrap();
    let status = resp.status().as_u16();
    (status, resp.text().await.unwrap())
}

fn crds() -> Vec<k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition>
{
    capmox_api::crd::all().unwrap()
}

#[tokio::test]
async fn probes_follow_crd_wait_and_metrics_are_served() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    let manager = Manager::new(
        env.client(),
        ManagerOptions {
            health_addr: local(),
            metrics_addr: local(),
            ..ManagerOptions::default()
        },
    )
    .await
    .unwrap();
    let health = manager.health_addr().unwrap();
    let metrics_addr = manager.metrics_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));
    let http = http();

    // Before the CRDs exist the manager is alive but not ready.
    eventually(Duration::from_secs(10), "healthz", || {
        let http = http.clone();
        async move { get(&http, health, "/healthz").await.0 == 200 }
    })
    .await;
    let (status, body) = get(&http, health, "/readyz").await;
    assert_eq!(status, 503, "{body}");

    env.install_crds(crds()).await.unwrap();
    eventually(Duration::from_secs(20), "readyz and leading", || {
        let http = http.clone();
        async move {
            let (status, body) = get(&http, health, "/readyz").await;
            status == 200 && body.contains("leader: true")
        }
    })
    .await;
    let (_, body) = get(&http, health, "/readyz").await;
    assert!(body.contains("global proxmox client: not configured"), "{body}");

    let (status, text) = get(&http, metrics_addr, "/metrics").await;
    assert_eq!(status, 200);
    // Families with series show up; the per-controller series exist from the start.
    for family in [
        "# TYPE capmox_reconcile counter",
        "capmox_reconcile_total{controller=\"proxmoxcluster\"} 0",
        "# TYPE capmox_reconcile_duration_seconds histogram",
        "capmox_reconcile_duration_seconds_count{controller=\"proxmoxcluster\"} 0",
        "# TYPE capmox_leader gauge",
        "capmox_leader 1",
        "# EOF",
    ] {
        assert!(text.contains(family), "missing {family:?} in\n{text}");
    }
    assert_eq!(get(&http, metrics_addr, "/nope").await.0, 404);

    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("manager did not stop")
        .unwrap()
        .unwrap();
    // The servers are gone after a graceful stop.
    assert!(http.get(format!("http://{health}/healthz")).send().await.is_err());
}

#[tokio::test]
async fn missing_crds_fail_startup_after_the_timeout() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    let manager = Manager::new(
        env.client(),
        ManagerOptions {
            crd_wait_timeout: Duration::from_millis(500),
            ..ManagerOptions::default()
        },
    )
    .await
    .unwrap();
    let result = tokio::time::timeout(Duration::from_secs(20), manager.run(std::future::pending()))
        .await
        .expect("manager did not give up");
    match result {
        Err(ManagerError::CrdsMissing { crd, .. }) => {
            assert!(
                crd.starts_with("proxmoxclusters.infrastructure.cluster.x-k8s.io"),
                "{crd}"
            )
        }
        other => panic!("expected CrdsMissing, got {other:?}"),
    }
}

#[tokio::test]
async fn global_proxmox_probe_is_reported_but_does_not_fail_readiness() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    env.install_crds(crds()).await.unwrap();
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig::default())
        .await
        .unwrap();
    let creds = capmox::proxmox::Credentials::token(sim.token_id(), sim.token_secret());
    let reachable = capmox::proxmox::ClientConfig::new(sim.url(), creds.clone()).insecure();
    // Nothing listens on port 9 of localhost.
    let unreachable = capmox::proxmox::ClientConfig::new("https://127.0.0.1:9", creds).insecure();
    let http = http();

    for (config, expect) in [(reachable, "reachable (version"), (unreachable, "unreachable:")] {
        let manager = Manager::new(
            env.client(),
            ManagerOptions {
                health_addr: local(),
                proxmox: Some(config),
                ..ManagerOptions::default()
            },
        )
        .await
        .unwrap();
        let health = manager.health_addr().unwrap();
        let metrics = manager.metrics();
        let (stop, stopped) = oneshot::channel::<()>();
        let run = tokio::spawn(manager.run(async move {
            let _ = stopped.await;
        }));
        eventually(Duration::from_secs(20), expect, || {
            let http = http.clone();
            async move {
                let (status, body) = get(&http, health, "/readyz").await;
                status == 200 && body.contains(expect)
            }
        })
        .await;
        // The probe went through the metrics observer.
        assert!(
            metrics
                .render()
                .contains("capmox_proxmox_requests_total{endpoint=\"/version\",method=\"GET\""),
            "{}",
            metrics.render()
        );
        assert!(!body_contains_secret(
            &get(&http, health, "/readyz").await.1,
            sim.token_secret()
        ));
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), run)
            .await
            .expect("manager did not stop")
            .unwrap()
            .unwrap();
    }
}

fn body_contains_secret(body: &str, secret: &str) -> bool {
    body.contains(secret)
}

#[tokio::test]
async fn namespaced_manager_waits_for_crds_in_its_namespace() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    env.install_crds(crds()).await.unwrap();
    let mut options = ManagerOptions {
        health_addr: local(),
        ..ManagerOptions::default()
    };
    options.settings.namespace = Some("default".into());
    capmox::manager::wait_for_crds(&env.client(), Some("default"), Duration::from_secs(5))
        .await
        .unwrap();
    let manager = Manager::new(env.client(), options).await.unwrap();
    let health = manager.health_addr().unwrap();
    let (stop, stopped) = oneshot::channel::<()>();
    let run = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));
    let http = http();
    eventually(Duration::from_secs(20), "readyz", || {
        let http = http.clone();
        async move { get(&http, health, "/readyz").await.0 == 200 }
    })
    .await;
    stop.send(()).unwrap();
    tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("manager did not stop")
        .unwrap()
        .unwrap();
}
