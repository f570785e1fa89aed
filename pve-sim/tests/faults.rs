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
