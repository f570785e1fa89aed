//! pvestatd's status cache: `/cluster/resources` shows a VM's power state, uptime, name and
//! template from the last refresh of its node, while `status/current` and the node's `qemu`
//! list are live.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use pve_sim::{LatencySpec, Profile, Scenario, SimConfig};
use serde_json::{Value, json};

async fn resource(sim: &common::Sim, vmid: u32) -> Value {
    let all = sim.get("/cluster/resources?type=vm").await.json["data"].clone();
    all.as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == vmid)
        .cloned()
        .unwrap_or(Value::Null)
}

/// The cache on but frozen: the test moves it with `refresh_status_cache` /
/// `refresh_node_status`.
async fn frozen() -> common::Sim {
    let scenario = Scenario {
        latency: LatencySpec {
            status_cache_ms: Some(10_000),
            ..LatencySpec::default()
        },
        ..Scenario::default()
    };
    let sim = common::start(SimConfig {
        scenario,
        ..SimConfig::default()
    })
    .await;
    sim.server.state().freeze_status_cache(true);
    sim
}

#[tokio::test]
async fn cluster_resources_lag_behind_the_live_state() {
    let sim = frozen().await;
    let st = sim.server.state();
    sim.clone_vm(300, "lag").await;
    // No data for the new VM yet: only what pmxcfs has (id, node, lock, tags).
    let r = resource(&sim, 300).await;
    assert_eq!(r["status"], "unknown", "{r}");
    assert!(r.get("name").is_none() && r.get("uptime").is_none(), "{r}");
    st.refresh_status_cache();
    assert_eq!(resource(&sim, 300).await["status"], "stopped");
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/300/status/start", json!({}))
            .await,
        "OK"
    );
    // Live: status/current and the node's VM list.
    let cur = sim.get("/nodes/pve1/qemu/300/status/current").await;
    assert_eq!(cur.json["data"]["status"], "running");
    let list = sim.get("/nodes/pve1/qemu").await.json["data"].clone();
    let e = list
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["vmid"] == 300)
        .unwrap()
        .clone();
    assert_eq!(e["status"], "running");
    // Cached: still stopped, uptime 0, old name; tags and lock are live.
    sim.put(
        "/nodes/pve1/qemu/300/config",
        json!({"name": "renamed", "tags": "x"}),
    )
    .await;
    let r = resource(&sim, 300).await;
    assert_eq!(
        (&r["status"], &r["uptime"], &r["name"], &r["tags"]),
        (&json!("stopped"), &json!(0), &json!("lag"), &json!("x")),
        "{r}"
    );
    // Another node's refresh changes nothing for VMs on pve1.
    st.refresh_node_status("pve2");
    assert_eq!(resource(&sim, 300).await["status"], "stopped");
    st.refresh_node_status("pve1");
    let r = resource(&sim, 300).await;
    assert_eq!(
        (&r["status"], &r["name"]),
        (&json!("running"), &json!("renamed")),
        "{r}"
    );
    // A deleted VM disappears at once (the VM list is live).
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/300/status/stop", json!({})).await,
        "OK"
    );
    let r = sim.delete("/nodes/pve1/qemu/300").await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    assert_eq!(resource(&sim, 300).await, Value::Null);
}

/// Each node refreshes on its own cycle: with a short cycle the start shows up by itself.
#[tokio::test]
async fn nodes_refresh_on_their_own_cycle() {
    let scenario = Scenario {
        latency: LatencySpec {
            status_cache_ms: Some(300),
            ..LatencySpec::default()
        },
        ..Scenario::default()
    };
    let sim = common::start(SimConfig {
        scenario,
        ..SimConfig::default()
    })
    .await;
    sim.clone_vm(310, "cycle").await;
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/310/status/start", json!({}))
            .await,
        "OK"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if resource(&sim, 310).await["status"] == "running" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the cache never caught up"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn the_cache_is_on_in_realistic_and_can_be_switched_off() {
    let realistic = LatencySpec {
        profile: Profile::Realistic,
        ..LatencySpec::default()
    };
    assert_eq!(realistic.status_cache(), Some(Duration::from_secs(10)));
    assert_eq!(LatencySpec::default().status_cache(), None);
    let off = LatencySpec {
        profile: Profile::Realistic,
        status_cache_ms: Some(0),
        ..LatencySpec::default()
    };
    assert_eq!(off.status_cache(), None);
    let yaml = "latency:\n  profile: realistic\n  status_cache_ms: 0\n";
    assert_eq!(Scenario::from_yaml(yaml).unwrap().latency.status_cache(), None);
    // Off (instant): the start is visible at once.
    let sim = common::start_default().await;
    sim.clone_vm(320, "live").await;
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/320/status/start", json!({}))
            .await,
        "OK"
    );
    assert_eq!(resource(&sim, 320).await["status"], "running");
    // Turning it on at runtime fills it from the current state.
    let st = sim.server.state();
    st.freeze_status_cache(true);
    st.set_latency(LatencySpec {
        status_cache_ms: Some(10_000),
        ..LatencySpec::default()
    });
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/320/status/stop", json!({})).await,
        "OK"
    );
    assert_eq!(resource(&sim, 320).await["status"], "running", "cached");
}
