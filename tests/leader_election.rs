//! Leader election against the test control plane: one leader among two electors, release on
//! shutdown, takeover after expiry, and giving up when the Lease is taken away.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::time::Duration;

use capmox::leader::{LEASE_NAME, LeaderConfig, LeaderElector, LeaderError, Timing};
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

mod manager_support;
use manager_support::{eventually, wait_renewals};

const NS: &str = "default";

fn short_timing() -> Timing {
    Timing {
        lease_duration: Duration::from_secs(2),
        renew_deadline: Duration::from_secs(1),
        retry_period: Duration::from_millis(200),
    }
}

fn config(identity: &str, timing: Timing) -> LeaderConfig {
    LeaderConfig {
        namespace: NS.into(),
        name: LEASE_NAME.into(),
        identity: identity.into(),
        timing,
    }
}

struct Running {
    leader: watch::Receiver<bool>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), LeaderError>>,
}

fn start(client: &kube::Client, identity: &str, timing: Timing) -> Running {
    let elector = LeaderElector::new(client.clone(), config(identity, timing)).unwrap();
    let leader = elector.subscribe();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(elector.run(async move {
        let _ = rx.await;
    }));
    Running {
        leader,
        stop: Some(tx),
        task,
    }
}

async fn holder(api: &Api<Lease>) -> Option<String> {
    api.get_opt(LEASE_NAME)
        .await
        .unwrap()
        .and_then(|l| l.spec)
        .and_then(|s| s.holder_identity)
        .filter(|h| !h.is_empty())
}

async fn env() -> (testenv::TestEnv, Api<Lease>) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    let api: Api<Lease> = Api::namespaced(env.client(), NS);
    (env, api)
}

#[tokio::test]
async fn two_electors_one_leader_and_release_hands_over() {
    let (env, api) = env().await;
    // A long lease: the standby could only take over by expiry after 30 s, so a handover within
    // the deadline below proves the release.
    let timing = Timing {
        lease_duration: Duration::from_secs(30),
        renew_deadline: Duration::from_secs(10),
        retry_period: Duration::from_millis(200),
    };
    let mut a = start(&env.client(), "a_1", timing);
    eventually(Duration::from_secs(10), "a to lead", || {
        let v = *a.leader.borrow();
        async move { v }
    })
    .await;
    let mut b = start(&env.client(), "b_2", timing);

    // Let A renew several times while B is running.
    wait_renewals(&api, "a_1", 3, Duration::from_secs(10)).await;
    assert!(*a.leader.borrow());
    assert!(!*b.leader.borrow());
    assert!(!b.leader.has_changed().unwrap(), "b must never have led");

    // Graceful stop of A releases the lease; B takes over long before the lease could expire.
    a.stop.take().unwrap().send(()).unwrap();
    a.task.await.unwrap().unwrap();
    assert!(!*a.leader.borrow_and_update());
    eventually(Duration::from_secs(10), "b to lead after release", || {
        let v = *b.leader.borrow();
        async move { v }
    })
    .await;
    assert_eq!(holder(&api).await.as_deref(), Some("b_2"));
    let lease = api.get(LEASE_NAME).await.unwrap();
    assert_eq!(lease.spec.unwrap().lease_transitions, Some(1));

    b.stop.take().unwrap().send(()).unwrap();
    b.task.await.unwrap().unwrap();
    assert_eq!(holder(&api).await, None, "b released on shutdown");
}

#[tokio::test]
async fn expired_lease_is_taken_over_after_a_crash() {
    let (env, api) = env().await;
    let a = start(&env.client(), "crashy_1", short_timing());
    eventually(Duration::from_secs(10), "crashy to lead", || {
        let v = *a.leader.borrow();
        async move { v }
    })
    .await;
    // Simulate a crash: the task disappears without releasing.
    a.task.abort();
    let _ = a.task.await;
    assert_eq!(holder(&api).await.as_deref(), Some("crashy_1"));

    let mut b = start(&env.client(), "survivor_2", short_timing());
    eventually(Duration::from_secs(15), "survivor to lead after expiry", || {
        let v = *b.leader.borrow();
        async move { v }
    })
    .await;
    assert_eq!(holder(&api).await.as_deref(), Some("survivor_2"));
    b.stop.take().unwrap().send(()).unwrap();
    b.task.await.unwrap().unwrap();
    drop(a.stop);
}

#[tokio::test]
async fn leadership_is_lost_when_the_lease_is_taken_away() {
    let (env, api) = env().await;
    let mut a = start(&env.client(), "victim_1", short_timing());
    eventually(Duration::from_secs(10), "victim to lead", || {
        let v = *a.leader.borrow();
        async move { v }
    })
    .await;
    // Someone else overwrites the holder (e.g. after a network partition).
    let mut taken = false;
    for _ in 0..20 {
        let mut lease = api.get(LEASE_NAME).await.unwrap();
        let spec = lease.spec.as_mut().unwrap();
        spec.holder_identity = Some("intruder".into());
        spec.lease_duration_seconds = Some(60);
        if api
            .replace(LEASE_NAME, &PostParams::default(), &lease)
            .await
            .is_ok()
        {
            taken = true;
            break;
        }
    }
    assert!(taken, "could not overwrite the lease");
    let result = tokio::time::timeout(Duration::from_secs(15), &mut a.task)
        .await
        .expect("elector did not give up")
        .unwrap();
    assert!(matches!(result, Err(LeaderError::Lost { .. })), "{result:?}");
    assert!(!*a.leader.borrow_and_update());
    assert_eq!(holder(&api).await.as_deref(), Some("intruder"));
    drop(a.stop);
}

#[tokio::test]
async fn deleted_lease_is_recreated_by_the_leader() {
    let (env, api) = env().await;
    let mut a = start(&env.client(), "keeper_1", short_timing());
    eventually(Duration::from_secs(10), "keeper to lead", || {
        let v = *a.leader.borrow();
        async move { v }
    })
    .await;
    api.delete(LEASE_NAME, &Default::default()).await.unwrap();
    eventually(Duration::from_secs(10), "lease recreated", || {
        let api = api.clone();
        async move { holder(&api).await.as_deref() == Some("keeper_1") }
    })
    .await;
    assert!(*a.leader.borrow());
    a.stop.take().unwrap().send(()).unwrap();
    a.task.await.unwrap().unwrap();
}

#[test]
fn invalid_timing_is_rejected() {
    let bad = Timing {
        lease_duration: Duration::from_secs(1),
        renew_deadline: Duration::from_secs(2),
        retry_period: Duration::from_millis(200),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let (env, _) = env().await;
        assert!(matches!(
            LeaderElector::new(env.client(), config("x", bad)),
            Err(LeaderError::Config(_))
        ));
    });
}
