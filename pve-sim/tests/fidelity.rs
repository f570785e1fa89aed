//! Behaviour the machine controller depends on (docs/proxmox-api.md §5.3–§5.8, §7–§9): clone
//! parameters and lifecycle, locks, nextid, power tasks, destroy, uploads, cloud-init, leftovers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::time::Duration;

use pve_sim::{CloudInitResult, LatencySpec, PowerState, SimConfig};
use serde_json::{Value, json};

/// Waits until `f` holds, failing after a deadline.
async fn eventually(what: &str, f: impl Fn() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !f() {
        assert!(tokio::time::Instant::now() < deadline, "timed out: {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A default simulator whose linked clones take an hour (they only end when stopped).
async fn slow_clones() -> common::Sim {
    let mut config = SimConfig::default();
    config
        .scenario
        .latency
        .tasks
        .insert("qmclone-linked".into(), 3_600_000);
    common::start(config).await
}

fn upid_path(upid: &str) -> String {
    let node = upid.split(':').nth(1).unwrap();
    let enc = upid.replace(':', "%3A").replace('@', "%40").replace('!', "%21");
    format!("/nodes/{node}/tasks/{enc}")
}

#[tokio::test]
async fn full_clone_with_every_parameter() {
    let sim = common::start_default().await;
    sim.clone_vm(200, "src").await;
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/200/snapshot", json!({"snapname": "s1"}))
            .await,
        "OK"
    );
    // Full clone of a VM on local storage onto shared storage on another node.
    let st = sim
        .post_task(
            "/nodes/pve1/qemu/200/clone",
            json!({"newid": 201, "name": "capi-cp-0", "target": "pve2", "full": 1,
                   "storage": "shared", "format": "raw", "pool": "capi",
                   "snapname": "s1", "description": "machine capi-cp-0"}),
        )
        .await;
    assert_eq!(st, "OK");
    let vm = sim.server.state().vm(201).unwrap();
    assert_eq!(vm.node, "pve2");
    assert_eq!(vm.config["name"], "capi-cp-0");
    assert_eq!(vm.config["description"], "machine capi-cp-0");
    assert!(
        vm.config["scsi0"].starts_with("shared:vm-201-disk-0"),
        "{}",
        vm.config["scsi0"]
    );
    assert!(!vm.config.contains_key("lock"));
    let res = sim.get("/cluster/resources?type=vm").await.json["data"].clone();
    let entry = res
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 201)
        .cloned()
        .unwrap();
    assert_eq!(entry["pool"], "capi");
    assert_eq!(entry["node"], "pve2");
    // The VM is only found on its node.
    let r = sim.get("/nodes/pve1/qemu/201/config").await;
    assert_eq!(r.status, 500);
    // Unknown snapshot and unknown target node fail on the call.
    let r = sim
        .post(
            "/nodes/pve1/qemu/200/clone",
            json!({"newid": 202, "snapname": "nope"}),
        )
        .await;
    assert_eq!(r.json["message"], "snapshot 'nope' does not exist\n");
    let r = sim
        .post(
            "/nodes/pve1/qemu/200/clone",
            json!({"newid": 202, "target": "pve9"}),
        )
        .await;
    assert_eq!(r.json["message"], "no such cluster node 'pve9'\n");
    // storage with a linked clone is refused.
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 202, "storage": "local-lvm"}),
        )
        .await;
    assert_eq!(
        r.json["message"],
        "parameter 'storage' not allowed for linked clones\n"
    );
    assert!(sim.server.state().vm(202).is_none());
}

#[tokio::test]
async fn clone_task_runs_for_the_profile_latency_and_an_interrupted_clone_leaves_nothing() {
    let sim = slow_clones().await;
    let st = sim.server.state();
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 210, "name": "slow"}),
        )
        .await;
    let upid = r.json["data"].as_str().unwrap().to_string();
    let cfg = sim.get("/nodes/pve1/qemu/210/config").await;
    assert_eq!(cfg.status, 200, "the config exists at once");
    assert_eq!(cfg.json["data"]["lock"], "clone");
    let status = sim.get(&format!("{}/status", upid_path(&upid))).await;
    assert_eq!(status.json["data"]["status"], "running");
    // Writes to the locked VM fail: POST and PUT config synchronously, the rest in their task.
    let r = sim.put("/nodes/pve1/qemu/210/config", json!({"cores": 4})).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json["message"], "VM is locked (clone)\n");
    let r = sim.post("/nodes/pve1/qemu/210/config", json!({"cores": 4})).await;
    assert_eq!(r.json["message"], "VM is locked (clone)\n");
    assert_eq!(
        sim.put_task(
            "/nodes/pve1/qemu/210/resize",
            json!({"disk": "scsi0", "size": "+1G"})
        )
        .await,
        "VM is locked (clone)"
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/210/status/start", json!({}))
            .await,
        "VM is locked (clone)"
    );
    let r = sim.delete("/nodes/pve1/qemu/210").await;
    assert_eq!(
        sim.wait_task(r.json["data"].as_str().unwrap()).await,
        "VM is locked (clone)"
    );
    // The new id is taken while the clone runs.
    let r = sim.get("/cluster/nextid?vmid=210").await;
    assert_eq!(r.json["errors"]["vmid"], "VM 210 already exists");
    // Interrupting the task removes the half-created VM right away.
    let r = sim.delete(&upid_path(&upid)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(sim.wait_task(&upid).await, "interrupted by signal");
    eventually("the half-created VM is removed", || st.vm(210).is_none()).await;
    assert!(st.leftovers().is_empty(), "{:?}", st.leftovers());
}

#[tokio::test]
async fn clone_onto_an_id_used_on_another_node_fails_in_the_task() {
    let sim = common::start_default().await;
    let st = sim
        .post_task(
            "/nodes/pve2/qemu/101/clone",
            json!({"newid": 220, "name": "on-pve2"}),
        )
        .await;
    assert_eq!(st, "OK");
    let before = sim.server.state().vm(220).unwrap();
    let st = sim
        .post_task("/nodes/pve1/qemu/100/clone", json!({"newid": 220}))
        .await;
    assert_eq!(st, "unable to create VM 220: config file already exists");
    assert_eq!(
        sim.server.state().vm(220).unwrap(),
        before,
        "the existing VM is untouched"
    );
}

#[tokio::test]
async fn nextid_is_the_lowest_free_id_from_100() {
    let sim = common::start_default().await;
    sim.clone_vm(104, "gap").await;
    assert_eq!(sim.get("/cluster/nextid").await.json["data"], json!("103"));
    sim.clone_vm(103, "fill").await;
    assert_eq!(sim.get("/cluster/nextid").await.json["data"], json!("105"));
    let r = sim.get("/cluster/nextid?vmid=104").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json["errors"]["vmid"], "VM 104 already exists");
}

#[tokio::test]
async fn power_state_changes_when_the_task_completes() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    sim.clone_vm(230, "power").await;
    st.hold_tasks();
    let r = sim.post("/nodes/pve1/qemu/230/status/start", json!({})).await;
    let upid = r.json["data"].as_str().unwrap().to_string();
    let cur = sim.get("/nodes/pve1/qemu/230/status/current").await;
    assert_eq!(cur.json["data"]["status"], "stopped", "not before the task ends");
    st.release_tasks();
    assert_eq!(sim.wait_task(&upid).await, "OK");
    assert_eq!(st.vm(230).unwrap().power, PowerState::Running);
    st.hold_tasks();
    let r = sim.post("/nodes/pve1/qemu/230/status/shutdown", json!({})).await;
    let upid = r.json["data"].as_str().unwrap().to_string();
    assert_eq!(st.vm(230).unwrap().power, PowerState::Running);
    st.release_tasks();
    assert_eq!(sim.wait_task(&upid).await, "OK");
    assert_eq!(st.vm(230).unwrap().power, PowerState::Stopped);
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/230/status/start", json!({}))
            .await,
        "OK"
    );
    st.hold_tasks();
    let r = sim.post("/nodes/pve1/qemu/230/status/stop", json!({})).await;
    let upid = r.json["data"].as_str().unwrap().to_string();
    assert_eq!(st.vm(230).unwrap().power, PowerState::Running);
    st.release_tasks();
    assert_eq!(sim.wait_task(&upid).await, "OK");
    assert_eq!(st.vm(230).unwrap().power, PowerState::Stopped);
}

#[tokio::test]
async fn destroy_rules() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    // Missing VM: synchronous not-found error.
    let r = sim.delete("/nodes/pve1/qemu/999?purge=1").await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json["message"],
        "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist\n"
    );
    // Running VM: refused even with purge.
    sim.clone_vm(240, "d").await;
    st.set_power(240, PowerState::Running);
    let r = sim.delete("/nodes/pve1/qemu/240?purge=1").await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json["message"], "VM 240 is running - destroy failed\n");
    // HA-managed and stopped: purge is needed and removes the HA resource.
    st.set_power(240, PowerState::Stopped);
    let r = sim
        .post(
            "/cluster/ha/resources",
            json!({"sid": "vm:240", "state": "stopped"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = sim.delete("/nodes/pve1/qemu/240").await;
    assert_eq!(
        r.json["message"],
        "unable to remove VM 240 - used in HA resources and purge parameter not set.\n"
    );
    assert_eq!(st.leftovers().ha_resources, vec!["vm:240".to_string()]);
    let r = sim.delete("/nodes/pve1/qemu/240?purge=1").await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    assert!(st.leftovers().is_empty(), "{:?}", st.leftovers());
}

async fn upload(sim: &common::Sim, storage: &str, name: &str, bytes: Vec<u8>) -> common::Resp {
    let form = reqwest::multipart::Form::new().text("content", "iso").part(
        "filename",
        reqwest::multipart::Part::bytes(bytes).file_name(name.to_string()),
    );
    let r = sim
        .client
        .post(format!("{}/nodes/pve1/storage/{storage}/upload", sim.base))
        .header("Authorization", &sim.auth)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body = r.text().await.unwrap();
    let json = serde_json::from_str(&body).unwrap_or(Value::Null);
    common::Resp { status, body, json }
}

#[tokio::test]
async fn iso_upload_get_overwrite_and_delete() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    let r = upload(&sim, "local", "seed-250.iso", vec![1u8; 2048]).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let upid = r.json["data"].as_str().unwrap();
    assert!(upid.contains(":imgcopy::"), "{upid}");
    assert_eq!(sim.wait_task(upid).await, "OK");
    let path = "/nodes/pve1/storage/local/content/local%3Aiso%2Fseed-250.iso";
    let got = sim.get(path).await;
    assert_eq!(got.status, 200, "{}", got.body);
    assert_eq!(got.json["data"]["size"], json!(2048));
    assert_eq!(got.json["data"]["format"], "iso");
    assert_eq!(got.json["data"]["path"], "/var/lib/vz/template/iso/seed-250.iso");
    // Uploading the same name again overwrites the file (PVE does not refuse it).
    let r = upload(&sim, "local", "seed-250.iso", vec![2u8; 4096]).await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    assert_eq!(
        st.volume_bytes("pve1", "local:iso/seed-250.iso"),
        Some(vec![2u8; 4096])
    );
    assert_eq!(
        st.iso_volume_ids("pve1", "local"),
        vec!["local:iso/seed-250.iso".to_string()]
    );
    // Node-local: the file is not visible from another node's `local`.
    assert!(st.iso_volume_ids("pve2", "local").is_empty());
    // Shared storage: one namespace.
    let r = upload(&sim, "shared", "seed-251.iso", vec![3u8; 512]).await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    assert_eq!(
        st.iso_volume_ids("pve3", "shared"),
        vec!["shared:iso/seed-251.iso".to_string()]
    );
    let vols = st.leftovers().volumes;
    assert_eq!(vols.len(), 2);
    assert_eq!(vols[0].node, None);
    assert_eq!(vols[0].storage, "shared");
    assert_eq!(vols[1].node.as_deref(), Some("pve1"));
    assert_eq!(vols[1].content, "iso");
    // Delete both; a second delete and a get of the deleted volume fail.
    let r = sim.delete(path).await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    let r = sim
        .delete("/nodes/pve1/storage/shared/content/shared%3Aiso%2Fseed-251.iso")
        .await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    let r = sim.delete(path).await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json["message"],
        "volume 'local:iso/seed-250.iso' does not exist\n"
    );
    assert_eq!(sim.get(path).await.status, 500);
    assert!(st.leftovers().is_empty(), "{:?}", st.leftovers());
}

async fn cloud_init(sim: &common::Sim, vmid: u32) -> (i64, String) {
    let r = sim
        .post(
            &format!("/nodes/pve1/qemu/{vmid}/agent/exec"),
            json!({"command": ["cloud-init", "status"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let pid = r.json["data"]["pid"].as_i64().unwrap();
    let s = sim
        .get(&format!("/nodes/pve1/qemu/{vmid}/agent/exec-status?pid={pid}"))
        .await
        .json["data"]
        .clone();
    (
        s["exitcode"].as_i64().unwrap(),
        s["out-data"].as_str().unwrap_or_default().to_string(),
    )
}

#[tokio::test]
async fn agent_delay_and_cloud_init_results_per_scenario_and_per_vm() {
    let mut config = SimConfig::default();
    config.scenario.latency.agent_ready_ms = Some(3_600_000);
    config.scenario.guest.cloud_init = CloudInitResult::Error;
    let sim = common::start(config).await;
    let st = sim.server.state();
    sim.clone_vm(260, "a").await;
    sim.clone_vm(261, "b").await;
    for vmid in [260, 261] {
        let path = format!("/nodes/pve1/qemu/{vmid}/status/start");
        assert_eq!(sim.post_task(&path, json!({})).await, "OK");
    }
    let r = sim.get("/nodes/pve1/qemu/260/agent/get-osinfo").await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json["message"], "QEMU guest agent is not running\n");
    let r = sim
        .post(
            "/nodes/pve1/qemu/260/agent/exec",
            json!({"command": ["cloud-init", "status"]}),
        )
        .await;
    assert_eq!(r.json["message"], "QEMU guest agent is not running\n");
    // The agent comes up; cloud-init stays running until its delay has passed.
    st.set_latency(LatencySpec {
        agent_ready_ms: Some(0),
        cloud_init_done_ms: Some(3_600_000),
        ..LatencySpec::default()
    });
    assert_eq!(sim.get("/nodes/pve1/qemu/260/agent/get-osinfo").await.status, 200);
    assert_eq!(cloud_init(&sim, 260).await, (0, "status: running\n".into()));
    st.set_latency(LatencySpec::default());
    // Scenario-wide result: error (exit 1); a per-VM override wins.
    assert_eq!(cloud_init(&sim, 260).await, (1, "status: error\n".into()));
    st.set_cloud_init(Some(261), CloudInitResult::Degraded);
    assert_eq!(cloud_init(&sim, 261).await, (2, "status: done\n".into()));
    st.set_cloud_init(None, CloudInitResult::Done);
    assert_eq!(cloud_init(&sim, 260).await, (0, "status: done\n".into()));
    assert_eq!(cloud_init(&sim, 261).await.0, 2, "per-VM result kept");
}

#[tokio::test]
async fn cloud_init_status_wait_runs_until_cloud_init_is_done() {
    let mut config = SimConfig::default();
    config.scenario.latency.cloud_init_done_ms = Some(3_600_000);
    let sim = common::start(config).await;
    let st = sim.server.state();
    sim.clone_vm(262, "w").await;
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/262/status/start", json!({}))
            .await,
        "OK"
    );
    let r = sim
        .post(
            "/nodes/pve1/qemu/262/agent/exec",
            json!({"command": ["cloud-init", "status", "--wait"]}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let pid = r.json["data"]["pid"].as_i64().unwrap();
    let path = format!("/nodes/pve1/qemu/262/agent/exec-status?pid={pid}");
    let s = sim.get(&path).await.json["data"].clone();
    assert_eq!(s["exited"], json!(0), "still waiting: {s}");
    st.set_latency(LatencySpec::default());
    let s = sim.get(&path).await.json["data"].clone();
    assert_eq!(s["exited"], json!(1), "{s}");
    assert_eq!(s["exitcode"], json!(0));
    assert!(s["out-data"].as_str().unwrap().ends_with("status: done\n"), "{s}");
}

#[tokio::test]
async fn leftovers_list_what_a_provider_left_behind() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    assert!(st.leftovers().is_empty(), "templates are not leftovers");
    assert_eq!(st.vmids(), vec![100, 101, 102]);
    sim.clone_vm(270, "left").await;
    let left = st.leftovers();
    assert_eq!(left.vms, vec![270]);
    assert_eq!(st.non_template_vmids(), vec![270]);
    assert!(!left.is_empty());
    st.hold_tasks();
    let r = sim.delete("/nodes/pve1/qemu/270").await;
    assert_eq!(st.leftovers().running_tasks, 1);
    st.release_tasks();
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    assert!(st.leftovers().is_empty());
}
