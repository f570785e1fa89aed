//! VM create, template conversion, template deletion with linked clones, offline nodes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::json;

#[tokio::test]
async fn create_template_and_linked_clone_lifecycle() {
    let sim = common::start_default().await;
    let body = json!({
        "vmid": 900, "name": "golden", "cores": 2, "memory": "2048", "agent": "1",
        "scsi0": "local-lvm:8", "net0": "virtio,bridge=vmbr0", "tags": "B;a",
    });
    let r = sim.post("/nodes/pve1/qemu", body.clone()).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    let cfg = sim.get("/nodes/pve1/qemu/900/config").await.json["data"].clone();
    assert_eq!(cfg["scsi0"], "local-lvm:vm-900-disk-0,size=8G");
    assert!(cfg["smbios1"].as_str().unwrap().starts_with("uuid="));
    assert!(cfg["net0"].as_str().unwrap().starts_with("virtio=BC:24:11:"));
    assert_eq!(cfg["tags"], "B;a", "create does not normalise tags");
    assert_eq!(cfg["boot"], "order=net0;scsi0");
    let r = sim.post("/nodes/pve2/qemu", json!({"vmid": 900})).await;
    assert_eq!(
        r.json["message"],
        "unable to create VM 900 - VM 900 already exists on node 'pve1'\n"
    );
    let r = sim
        .post("/nodes/pve1/qemu", json!({"vmid": 901, "scsi0": "nope:8"}))
        .await;
    assert_eq!(r.json["message"], "storage 'nope' does not exist\n");

    // Convert to a template, then linked-clone it.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/900/template", json!({})).await,
        "OK"
    );
    let cfg = sim.get("/nodes/pve1/qemu/900/config").await.json["data"].clone();
    assert_eq!(cfg["template"], json!(1));
    assert_eq!(cfg["scsi0"], "local-lvm:base-900-disk-0,size=8G");
    let r = sim.post("/nodes/pve1/qemu/900/template", json!({})).await;
    assert_eq!(r.json["message"], "you can't convert a template to a template\n");
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/900/clone", json!({"newid": 902}))
            .await,
        "OK"
    );
    let r = sim.delete("/nodes/pve1/qemu/900").await;
    assert_eq!(
        sim.wait_task(r.json["data"].as_str().unwrap()).await,
        "base volume 'base-900-disk-0' is still in use by linked clones"
    );
    let r = sim.delete("/nodes/pve1/qemu/902").await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    let r = sim.delete("/nodes/pve1/qemu/900").await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    assert!(sim.server.state().vm(900).is_none());
}

#[tokio::test]
async fn offline_and_unknown_nodes() {
    let sim = common::start_default().await;
    assert!(sim.server.state().set_node_online("pve3", false));
    let r = sim.get("/nodes/pve3/status").await;
    assert_eq!(r.status, 595);
    let nodes = sim.get("/nodes").await.json["data"].clone();
    assert!(
        nodes
            .as_array()
            .unwrap()
            .iter()
            .any(|n| n["node"] == "pve3" && n["status"] == "offline")
    );
    let r = sim.get("/nodes/pve9/qemu").await;
    assert_eq!(r.status, 500);
    assert!(
        r.json["message"]
            .as_str()
            .unwrap()
            .starts_with("hostname lookup 'pve9' failed")
    );
}

#[tokio::test]
async fn fresh_clones_have_no_rrd_data_and_deleting_a_disk_updates_boot() {
    let mut config = pve_sim::SimConfig::default();
    config.scenario.latency.rrd_delay_ms = Some(3_600_000);
    let sim = common::start(config).await;
    sim.clone_vm(910, "fresh").await;
    let r = sim.get("/cluster/resources?type=vm").await;
    let entry = r.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 910)
        .cloned()
        .unwrap();
    assert_eq!(entry["status"], "unknown");
    assert!(entry.get("name").is_none());
    let tmpl = r.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 100)
        .cloned()
        .unwrap();
    assert_eq!(tmpl["template"], 1);

    let st = sim
        .post_task(
            "/nodes/pve1/qemu/910/config",
            json!({"scsi1": "local-lvm:4", "boot": "order=scsi0;scsi1;net0"}),
        )
        .await;
    assert_eq!(st, "OK");
    let st = sim
        .post_task("/nodes/pve1/qemu/910/config", json!({"delete": "scsi1"}))
        .await;
    assert_eq!(st, "OK");
    let cfg = sim.get("/nodes/pve1/qemu/910/config").await.json["data"].clone();
    assert_eq!(cfg["boot"], "order=scsi0;net0");
    assert!(cfg.get("scsi1").is_none());
    let r = sim
        .post("/nodes/pve1/qemu/910/config", json!({"boot": "order=scsi0;ide3"}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json["errors"]["boot"],
        "invalid bootorder: device 'ide3' does not exist'"
    );
}

#[tokio::test]
async fn shutdown_timeouts_and_start_failing_yet_running() {
    let mut config = pve_sim::SimConfig::default();
    config.scenario.guest.ignore_shutdown = true;
    config.scenario.faults.start_fails_but_runs = 1.0;
    let sim = common::start(config).await;
    sim.clone_vm(920, "stubborn").await;
    let st = sim
        .post_task("/nodes/pve1/qemu/920/status/start", json!({}))
        .await;
    assert!(st.starts_with("start failed: "), "{st}");
    assert_eq!(
        sim.server.state().vm(920).unwrap().power,
        pve_sim::PowerState::Running
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/920/status/shutdown", json!({}))
            .await,
        "VM quit/powerdown failed - got timeout"
    );
    let r = sim
        .post("/nodes/pve1/qemu/920/status/shutdown", json!({"forceStop": 1}))
        .await;
    let upid = r.json["data"].as_str().unwrap().to_string();
    assert_eq!(sim.wait_task(&upid).await, "OK");
    let enc = upid.replace(':', "%3A").replace('@', "%40").replace('!', "%21");
    let log = sim.get(&format!("/nodes/pve1/tasks/{enc}/log")).await;
    assert_eq!(
        log.json["data"][0]["t"],
        "VM still running - terminating now with SIGTERM"
    );
    assert_eq!(
        sim.server.state().vm(920).unwrap().power,
        pve_sim::PowerState::Stopped
    );
}

#[tokio::test]
async fn shutdown_closes_the_server() {
    let sim = common::start_default().await;
    assert_eq!(sim.get("/version").await.status, 200);
    let common::Sim {
        server,
        client,
        base,
        auth,
    } = sim;
    server.shutdown().await;
    let r = client
        .get(format!("{base}/version"))
        .header("Authorization", auth)
        .send()
        .await;
    assert!(r.is_err(), "server still answers after shutdown: {r:?}");
}

#[tokio::test]
async fn pools_are_checked_when_the_scenario_defines_them() {
    let mut config = pve_sim::SimConfig::default();
    config.scenario.pools = vec!["capi".into()];
    let sim = common::start(config).await;
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 930, "pool": "nope"}),
        )
        .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json["message"],
        "Permission check failed (pool 'nope' does not exist)\n"
    );
    assert_eq!(
        sim.post_task(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 930, "pool": "capi"})
        )
        .await,
        "OK"
    );
    let all = sim.get("/cluster/resources").await.json["data"].clone();
    let items = all.as_array().unwrap();
    assert!(items.iter().any(|e| e["id"] == "qemu/930" && e["pool"] == "capi"));
    assert!(
        items
            .iter()
            .any(|e| e["id"] == "/pool/capi" && e["type"] == "pool")
    );
}

#[tokio::test]
async fn bridges_are_checked_at_start_when_the_scenario_defines_them() {
    let mut config = pve_sim::SimConfig::default();
    for node in &mut config.scenario.nodes {
        node.bridges = vec!["vmbr0".into(), "vmbr1".into()];
    }
    let sim = common::start(config).await;
    sim.clone_vm(940, "wired").await;
    // PVE accepts any bridge in the config; the start fails, naming it in the task log.
    let r = sim
        .post(
            "/nodes/pve1/qemu/940/config",
            json!({"net1": "virtio,bridge=vmbr1", "net2": "virtio,bridge=vmbr9"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = sim.post("/nodes/pve1/qemu/940/status/start", json!({})).await;
    let upid = r.json["data"].as_str().unwrap().to_string();
    assert_eq!(
        sim.wait_task(&upid).await,
        "start failed: QEMU exited with code 1"
    );
    let enc = upid.replace(':', "%3A").replace('@', "%40").replace('!', "%21");
    let log = sim.get(&format!("/nodes/pve1/tasks/{enc}/log")).await;
    let lines: Vec<&str> = log.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["t"].as_str().unwrap())
        .collect();
    assert_eq!(lines[0], "bridge 'vmbr9' does not exist");
    assert!(
        lines[1].starts_with("kvm: -netdev type=tap,id=net2,ifname=tap940i2,"),
        "{lines:?}"
    );
    assert_eq!(
        lines.last().copied(),
        Some("TASK ERROR: start failed: QEMU exited with code 1")
    );
    assert_eq!(
        sim.server.state().vm(940).unwrap().power,
        pve_sim::PowerState::Stopped
    );
    // With the bridge fixed the VM starts.
    let r = sim
        .post("/nodes/pve1/qemu/940/config", json!({"delete": "net2"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/940/status/start", json!({}))
            .await,
        "OK"
    );
}
