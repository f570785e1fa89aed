//! Two full in-process managers with leader election against one control plane and one
//! pve-sim: only the leader reconciles; after the leader stops gracefully the standby takes over
//! and reconciles.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::sync::Arc;
use std::time::Duration;

use capmox::controllers::cluster::CONTROLLER;
use capmox::leader::{LEASE_NAME, LeaderConfig, Timing};
use capmox::manager::{Manager, ManagerOptions};
use capmox::metrics::Metrics;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, PostParams};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

mod manager_support;
use manager_support::{eventually, wait_renewals};

const NS: &str = "default";

struct Running {
    metrics: Arc<Metrics>,
    leader: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), capmox::manager::ManagerError>>,
}

impl Running {
    fn reconciles(&self) -> u64 {
        self.metrics.reconcile_count(CONTROLLER)
    }

    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        tokio::time::timeout(Duration::from_secs(20), self.task)
            .await
            .expect("manager did not stop")
            .unwrap()
            .unwrap();
    }
}

async fn start(env: &testenv::TestEnv, sim: &pve_sim::SimServer, identity: &str) -> Running {
    let proxmox = capmox::proxmox::ClientConfig::new(
        sim.url(),
        capmox::proxmox::Credentials::token(sim.token_id(), sim.token_secret()),
    )
    .insecure();
    let manager = Manager::new(
        env.client(),
        ManagerOptions {
            leader_election: Some(LeaderConfig {
                namespace: NS.into(),
                name: LEASE_NAME.into(),
                identity: identity.into(),
                // A long lease: a takeover within the test deadlines needs the release.
                timing: Timing {
                    lease_duration: Duration::from_secs(60),
                    renew_deadline: Duration::from_secs(10),
                    retry_period: Duration::from_millis(200),
                },
            }),
            proxmox: Some(proxmox),
            ..ManagerOptions::default()
        },
    )
    .await
    .unwrap();
    let metrics = manager.metrics();
    let leader = manager.leadership();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(manager.run(async move {
        let _ = rx.await;
    }));
    Running {
        metrics,
        leader,
        stop: Some(tx),
        task,
    }
}

async fn create_proxmox_cluster(client: kube::Client, name: &str) {
    let ar = ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1alpha2", "ProxmoxCluster"),
        "proxmoxclusters",
    );
    let api: Api<DynamicObject> = Api::namespaced_with(client, NS, &ar);
    let obj: DynamicObject = serde_json::from_value(serde_json::json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "allowedNodes": ["pve1"],
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {
                "addresses": ["10.0.0.10-10.0.0.20"],
                "prefix": 24,
                "gateway": "10.0.0.1"
            }
        }
    }))
    .unwrap();
    api.create(&PostParams::default(), &obj).await.unwrap();
}

#[tokio::test]
async fn two_managers_only_the_leader_reconciles() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    let mut crds = capmox_api::crd::all().unwrap();
    crds.push(capmox_api::capi::cluster_crd().unwrap());
    crds.push(capmox_api::capi::in_cluster_ip_pool_crd());
    env.install_crds(crds).await.unwrap();
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig::default())
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(env.client(), NS);

    let a = start(&env, &sim, "manager-a").await;
    eventually(Duration::from_secs(20), "manager a to lead", || {
        let v = *a.leader.borrow();
        async move { v }
    })
    .await;
    let mut b = start(&env, &sim, "manager-b").await;

    create_proxmox_cluster(env.client(), "c1").await;
    eventually(Duration::from_secs(20), "the leader to reconcile c1", || {
        let n = a.reconciles();
        async move { n >= 1 }
    })
    .await;
    // Give B ample opportunity: A renews the lease several times while B keeps watching it.
    wait_renewals(&leases, "manager-a", 3, Duration::from_secs(20)).await;
    assert!(*a.leader.borrow());
    assert!(!*b.leader.borrow());
    assert_eq!(b.reconciles(), 0, "the standby must not reconcile");
    assert!(b.metrics.render().contains("capmox_leader 0"));
    assert!(a.metrics.render().contains("capmox_leader 1"));

    // Graceful stop of A releases the lease; B takes over and reconciles the existing object.
    let a_count = a.reconciles();
    assert!(a_count >= 1);
    a.stop().await;
    eventually(Duration::from_secs(20), "manager b to lead", || {
        let v = *b.leader.borrow_and_update();
        async move { v }
    })
    .await;
    eventually(Duration::from_secs(20), "manager b to reconcile c1", || {
        let n = b.reconciles();
        async move { n >= 1 }
    })
    .await;
    let lease = leases.get(LEASE_NAME).await.unwrap();
    assert_eq!(
        lease.spec.and_then(|s| s.holder_identity).as_deref(),
        Some("manager-b")
    );
    b.stop().await;
    sim.shutdown().await;
}

#[tokio::test]
async fn a_manager_that_loses_the_lease_stops_with_an_error() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    let mut crds = capmox_api::crd::all().unwrap();
    crds.push(capmox_api::capi::cluster_crd().unwrap());
    crds.push(capmox_api::capi::in_cluster_ip_pool_crd());
    env.install_crds(crds).await.unwrap();
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig::default())
        .await
        .unwrap();
    let leases: Api<Lease> = Api::namespaced(env.client(), NS);
    let mut a = start(&env, &sim, "manager-a").await;
    eventually(Duration::from_secs(20), "manager a to lead", || {
        let v = *a.leader.borrow();
        async move { v }
    })
    .await;

    // Another party takes the Lease over (e.g. after a partition healed).
    let mut taken = false;
    for _ in 0..20 {
        let mut lease = leases.get(LEASE_NAME).await.unwrap();
        let spec = lease.spec.as_mut().unwrap();
        spec.holder_identity = Some("someone-else".into());
        if leases
            .replace(LEASE_NAME, &PostParams::default(), &lease)
            .await
            .is_ok()
        {
            taken = true;
            break;
        }
    }
    assert!(taken, "could not overwrite the lease");
    let result = tokio::time::timeout(Duration::from_secs(20), &mut a.task)
        .await
        .expect("manager did not stop after losing the lease")
        .unwrap();
    assert!(
        matches!(
            result,
            Err(capmox::manager::ManagerError::Leader(
                capmox::leader::LeaderError::Lost { .. }
            ))
        ),
        "{result:?}"
    );
    assert!(a.metrics.render().contains("capmox_leader 0"));
    // The lease is left to its new holder.
    let holder = leases
        .get(LEASE_NAME)
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity);
    assert_eq!(holder.as_deref(), Some("someone-else"));
    sim.shutdown().await;
}
