//! Fault injection is deterministic under a seed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::{EndpointFault, FaultSpec, SimConfig};
use serde_json::json;

fn faulty(seed: u64) -> SimConfig {
    let mut config = SimConfig {
        seed,
        ..SimConfig::default()
    };
    config.scenario.faults = FaultSpec {
        endpoints: vec![EndpointFault {
            endpoint: "GET /cluster/nextid".into(),
            error_rate: 0.5,
            status: 500,
            message: "got timeout".into(),
            latency_ms: 0,
            ..Default::default()
        }],
        ..FaultSpec::default()
    };
    config
}

async fn pattern(seed: u64) -> Vec<u16> {
    let sim = common::start(faulty(seed)).await;
    let mut out = Vec::new();
    for _ in 0..24 {
        out.push(sim.get("/cluster/nextid").await.status);
    }
    // Other endpoints are unaffected.
    assert_eq!(sim.get("/version").await.status, 200);
    out
}

#[tokio::test]
async fn endpoint_errors_repeat_under_the_same_seed() {
    let a = pattern(42).await;
    let b = pattern(42).await;
    assert_eq!(a, b);
    assert!(a.contains(&500) && a.contains(&200), "{a:?}");
    let c = pattern(43).await;
    assert_ne!(a, c, "another seed gives another sequence");
}

#[tokio::test]
async fn injected_error_reason_phrase_and_task_failures() {
    let mut config = faulty(1);
    config.scenario.faults.endpoints[0].error_rate = 1.0;
    config.scenario.faults.task_failure_rate = 1.0;
    let sim = common::start(config).await;
    let r = sim.get("/cluster/nextid").await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json["message"], "got timeout\n");
    let st = sim
        .post_task("/nodes/pve1/qemu/100/clone", json!({"newid": 600}))
        .await;
    assert_eq!(st, "clone failed: injected task failure");
    assert!(
        sim.server.state().vm(600).is_none(),
        "a failed clone leaves no VM behind"
    );
}

#[tokio::test]
async fn parallel_clones_on_local_storage_contend_for_the_storage_lock() {
    let mut config = SimConfig::default();
    config.scenario.faults.storage_lock_contention = 1.0;
    let sim = common::start(config).await;
    let state = sim.server.state();
    state.hold_tasks();
    let first = sim
        .post("/nodes/pve1/qemu/100/clone", json!({"newid": 700}))
        .await;
    let second = sim
        .post("/nodes/pve1/qemu/100/clone", json!({"newid": 701}))
        .await;
    // Shared storage does not contend.
    let third = sim
        .post("/nodes/pve2/qemu/101/clone", json!({"newid": 702}))
        .await;
    let fourth = sim
        .post("/nodes/pve2/qemu/101/clone", json!({"newid": 703}))
        .await;
    state.release_tasks();
    assert_eq!(sim.wait_task(first.json["data"].as_str().unwrap()).await, "OK");
    assert_eq!(
        sim.wait_task(second.json["data"].as_str().unwrap()).await,
        "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-local-lvm' - got timeout"
    );
    assert!(state.vm(701).is_none());
    assert_eq!(sim.wait_task(third.json["data"].as_str().unwrap()).await, "OK");
    assert_eq!(sim.wait_task(fourth.json["data"].as_str().unwrap()).await, "OK");
    // Once the first clone is done, the next one goes through.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/100/clone", json!({"newid": 704}))
            .await,
        "OK"
    );
}

fn drop_fault(endpoint: &str, before: f64, after: f64) -> SimConfig {
    let mut config = SimConfig::default();
    config.scenario.faults.endpoints = vec![EndpointFault {
        endpoint: endpoint.into(),
        drop_rate: before,
        drop_after_rate: after,
        ..EndpointFault::default()
    }];
    config
}

#[tokio::test]
async fn a_connection_dropped_before_processing_changes_nothing() {
    let sim = common::start(drop_fault("POST /nodes/{node}/qemu/{vmid}/clone", 1.0, 0.0)).await;
    let sent = sim
        .client
        .post(format!("{}/nodes/pve1/qemu/100/clone", sim.base))
        .header("Authorization", &sim.auth)
        .json(&json!({"newid": 610, "name": "dropped"}))
        .send()
        .await;
    assert!(sent.is_err(), "the client sees a dropped connection: {sent:?}");
    assert!(sim.server.state().vm(610).is_none());
    assert!(sim.server.state().clone_history().is_empty());
    // Other endpoints answer.
    assert_eq!(sim.get("/version").await.status, 200);
}

#[tokio::test]
async fn a_connection_dropped_after_processing_hides_a_done_clone() {
    let sim = common::start(drop_fault("POST /nodes/{node}/qemu/{vmid}/clone", 0.0, 1.0)).await;
    let sent = sim
        .client
        .post(format!("{}/nodes/pve1/qemu/100/clone", sim.base))
        .header("Authorization", &sim.auth)
        .json(&json!({"newid": 611, "name": "lost-answer"}))
        .send()
        .await;
    assert!(sent.is_err(), "the answer is lost: {sent:?}");
    let state = sim.server.state();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while state.clone_history().is_empty() {
        assert!(std::time::Instant::now() < deadline, "the clone never completed");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(state.clone_history(), vec![(611, "lost-answer".to_owned())]);
    assert!(
        state.vm(611).is_some(),
        "the clone happened although nobody heard of it"
    );
}

#[tokio::test]
async fn latency_applies_to_the_given_share_of_requests() {
    let mut config = SimConfig::default();
    config.scenario.faults.endpoints = vec![EndpointFault {
        endpoint: "GET /version".into(),
        latency_ms: 120_000,
        latency_rate: Some(0.0),
        ..EndpointFault::default()
    }];
    let sim = common::start(config).await;
    let started = std::time::Instant::now();
    for _ in 0..5 {
        assert_eq!(sim.get("/version").await.status, 200);
    }
    // With a rate of zero no request waits (one injected delay would be two minutes).
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    let mut always = EndpointFault {
        endpoint: "GET /version".into(),
        latency_ms: 300,
        ..EndpointFault::default()
    };
    always.latency_rate = None;
    sim.server.state().set_faults(FaultSpec {
        endpoints: vec![always],
        ..FaultSpec::default()
    });
    let started = std::time::Instant::now();
    assert_eq!(sim.get("/version").await.status, 200);
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
}
