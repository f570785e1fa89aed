//! What operating a running VM meets in PVE (qemu-server 9.2): hot-plug rules per the VM's
//! `hotplug` option (memory live only with memory hot-plug, `cores` always pending, NIC
//! bridge/firewall changes live, model changes need network hot-plug), `GET …/pending`, reboot
//! applying what is pending and reset not, memory hot-plug's start checks, a paused VM that
//! cannot reboot, `protection` refusing destroy, MAC and firewall NIC options, a shutdown that
//! waits out its timeout before `forceStop` kills the guest, and the node's task list of a VM.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::{Value, json};

fn pending_keys(r: &common::Resp) -> Vec<String> {
    let r: &Value = &r.json;
    let mut keys: Vec<String> = r["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e.get("pending").is_some() || e.get("delete").is_some())
        .map(|e| e["key"].as_str().unwrap().to_owned())
        .collect();
    keys.sort();
    keys
}

#[tokio::test]
async fn hot_plug_follows_the_vms_hotplug_option() {
    let sim = common::start_default().await;
    sim.clone_vm(300, "plain").await;
    sim.clone_vm(301, "hot").await;
    let cfg = json!({"memory": "2048", "cores": 2, "numa": 1, "hotplug": "network,disk,usb,cpu,memory"});
    assert_eq!(sim.post_task("/nodes/pve1/qemu/301/config", cfg).await, "OK");
    for id in [300, 301] {
        assert_eq!(
            sim.post_task(&format!("/nodes/pve1/qemu/{id}/status/start"), json!({}))
                .await,
            "OK"
        );
    }
    let change = json!({"memory": "4096", "cores": 4, "description": "d"});
    for id in [300, 301] {
        assert_eq!(
            sim.post_task(&format!("/nodes/pve1/qemu/{id}/config"), change.clone())
                .await,
            "OK"
        );
    }
    // Without memory hot-plug the memory waits; cores always wait; the description is fast-plug.
    let plain = sim.get("/nodes/pve1/qemu/300/pending").await;
    assert_eq!(pending_keys(&plain), ["cores", "memory"]);
    let hot = sim.get("/nodes/pve1/qemu/301/pending").await;
    assert_eq!(pending_keys(&hot), ["cores"], "memory is hot-plugged");
    let current = sim.get("/nodes/pve1/qemu/301/config?current=1").await;
    assert_eq!(current.json["data"]["memory"], "4096");
    assert_eq!(current.json["data"]["cores"], 2);
    // The config merges what is pending; `current=1` does not.
    let merged = sim.get("/nodes/pve1/qemu/300/config").await;
    assert_eq!(merged.json["data"]["cores"], 4);
    // A reset keeps the QEMU process: nothing pending is applied. A reboot applies it.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/300/status/reset", json!({}))
            .await,
        "OK"
    );
    assert_eq!(
        pending_keys(&sim.get("/nodes/pve1/qemu/300/pending").await).len(),
        2
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/300/status/reboot", json!({}))
            .await,
        "OK"
    );
    assert!(pending_keys(&sim.get("/nodes/pve1/qemu/300/pending").await).is_empty());
    let applied = sim.get("/nodes/pve1/qemu/300/config?current=1").await;
    assert_eq!(applied.json["data"]["cores"], 4);
    // NICs: a firewall or bridge change applies at once, a model change needs network hot-plug.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/300/config", json!({"hotplug": "disk"}))
            .await,
        "OK"
    );
    let mac = sim.get("/nodes/pve1/qemu/300/config").await.json["data"]["net0"]
        .as_str()
        .unwrap()
        .split(['=', ','])
        .nth(1)
        .unwrap()
        .to_owned();
    let fw = json!({"net0": format!("virtio={mac},bridge=vmbr0,firewall=1")});
    assert_eq!(sim.post_task("/nodes/pve1/qemu/300/config", fw).await, "OK");
    let model = json!({"net0": format!("e1000={mac},bridge=vmbr0,firewall=1")});
    assert_eq!(sim.post_task("/nodes/pve1/qemu/300/config", model).await, "OK");
    assert_eq!(
        pending_keys(&sim.get("/nodes/pve1/qemu/300/pending").await),
        ["net0"]
    );
    let now = sim.get("/nodes/pve1/qemu/300/config?current=1").await;
    assert_eq!(
        now.json["data"]["net0"],
        format!("virtio={mac},bridge=vmbr0,firewall=1")
    );
}

#[tokio::test]
async fn memory_hot_plug_needs_numa_and_1024_mib() {
    let sim = common::start_default().await;
    sim.clone_vm(310, "nonuma").await;
    let cfg = json!({"memory": "2048", "hotplug": "network,disk,usb,memory"});
    assert_eq!(sim.post_task("/nodes/pve1/qemu/310/config", cfg).await, "OK");
    let st = sim
        .post_task("/nodes/pve1/qemu/310/status/start", json!({}))
        .await;
    assert!(
        st.starts_with("NUMA needs to be enabled for memory hotplug"),
        "{st}"
    );
    let cfg = json!({"memory": "512", "numa": 1});
    assert_eq!(sim.post_task("/nodes/pve1/qemu/310/config", cfg).await, "OK");
    let st = sim
        .post_task("/nodes/pve1/qemu/310/status/start", json!({}))
        .await;
    assert!(st.starts_with("minimum memory must be 1024MB"), "{st}");
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/310/config", json!({"memory": "1024"}))
            .await,
        "OK"
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/310/status/start", json!({}))
            .await,
        "OK"
    );
}

#[tokio::test]
async fn paused_vms_protection_nic_options_and_task_lists() {
    let sim = common::start_default().await;
    sim.clone_vm(320, "p").await;
    let nic = json!({"net0": "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1", "protection": 1});
    assert_eq!(sim.post_task("/nodes/pve1/qemu/320/config", nic).await, "OK");
    let cfg = sim.get("/nodes/pve1/qemu/320/config").await;
    assert_eq!(
        cfg.json["data"]["net0"],
        "virtio=BC:24:11:AA:BB:CC,bridge=vmbr0,firewall=1"
    );
    // Protection: the destroy is refused on the call, the VM stays.
    let r = sim.delete("/nodes/pve1/qemu/320").await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json["message"],
        "can't remove VM 320 - protection mode enabled\n"
    );
    assert!(sim.server.state().vm(320).is_some());
    // A paused VM cannot reboot (a reboot is a shutdown first).
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/320/status/start", json!({}))
            .await,
        "OK"
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/320/status/suspend", json!({}))
            .await,
        "OK"
    );
    let r = sim.post("/nodes/pve1/qemu/320/status/reboot", json!({})).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json["message"], "VM is paused - cannot shutdown\n");
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/320/status/resume", json!({}))
            .await,
        "OK"
    );
    assert_eq!(
        sim.post_task(
            "/nodes/pve1/qemu/320/status/shutdown",
            json!({"timeout": 30, "forceStop": 1})
        )
        .await,
        "OK"
    );
    // The node's task list of the VM, newest first.
    let tasks = sim.get("/nodes/pve1/tasks?vmid=320&source=all&limit=3").await;
    let types: Vec<&str> = tasks.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["type"].as_str().unwrap())
        .collect();
    assert_eq!(types.first(), Some(&"qmshutdown"), "{types:?}");
    assert!(types.len() <= 3);
}

#[tokio::test]
async fn an_ignored_shutdown_waits_out_its_timeout_before_force_stop() {
    let mut config = pve_sim::SimConfig::default();
    config.scenario.guest.ignore_shutdown = true;
    let sim = common::start(config).await;
    sim.clone_vm(330, "stubborn").await;
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/330/status/start", json!({}))
            .await,
        "OK"
    );
    sim.server.state().set_latency(pve_sim::scenario::LatencySpec {
        profile: pve_sim::scenario::Profile::Realistic,
        ..Default::default()
    });
    let started = std::time::Instant::now();
    let r = sim
        .post(
            "/nodes/pve1/qemu/330/status/shutdown",
            json!({"timeout": 1, "forceStop": 1}),
        )
        .await;
    let upid = r.json["data"].as_str().unwrap().to_owned();
    assert_eq!(sim.wait_task(&upid).await, "OK");
    assert!(
        started.elapsed() >= std::time::Duration::from_secs(1),
        "the task ends after the timeout"
    );
    assert_eq!(
        sim.server.state().vm(330).unwrap().power,
        pve_sim::PowerState::Stopped
    );
}
