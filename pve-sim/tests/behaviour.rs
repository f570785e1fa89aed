//! Pins PVE behaviour the provider relies on (see docs/proxmox-api.md §4.4, §8, §9).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::PowerState;
use serde_json::json;

#[tokio::test]
async fn nextid_is_a_string_and_taken_ids_are_400() {
    let sim = common::start_default().await;
    let r = sim.get("/cluster/nextid").await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["data"], json!("103"), "nextid must be a JSON string");
    let r = sim.get("/cluster/nextid?vmid=150").await;
    assert_eq!(r.json["data"], json!("150"));
    let r = sim.get("/cluster/nextid?vmid=100").await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json["errors"]["vmid"], "VM 100 already exists");
    assert_eq!(r.json["message"], "Parameter verification failed.\n");
    assert_eq!(r.json["data"], serde_json::Value::Null);
}

#[tokio::test]
async fn bad_token_is_401_with_empty_body_and_unknown_path_is_501() {
    let sim = common::start_default().await;
    let r = sim
        .client
        .get(format!("{}/version", sim.base))
        .header(
            "Authorization",
            format!("PVEAPIToken={}=wrong", sim.server.token_id()),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401);
    assert!(r.text().await.unwrap().is_empty());
    let r = sim
        .client
        .get(format!("{}/version", sim.base))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 401, "no credentials");
    assert!(r.text().await.unwrap().is_empty());
    let r = sim.get("/foo").await;
    assert_eq!(r.status, 501);
    assert_eq!(r.body, "Method 'GET /foo' not implemented");
    let r = sim.post("/version", json!({})).await;
    assert_eq!(r.status, 501);
}

#[tokio::test]
async fn parameter_verification_shape() {
    let sim = common::start_default().await;
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 5, "bogus": 1, "full": "true"}),
        )
        .await;
    assert_eq!(r.status, 400);
    let errors = &r.json["errors"];
    assert_eq!(errors["newid"], "value must have a minimum value of 100");
    assert_eq!(errors["full"], "type check ('boolean') failed - got 'true'");
    assert_eq!(
        errors["bogus"],
        "property is not defined in schema and the schema does not allow additional properties"
    );
    let r = sim.post("/nodes/pve1/qemu/100/clone", json!({})).await;
    assert_eq!(
        r.json["errors"]["newid"],
        "property is missing and it is not optional"
    );
    // Property strings report the failing sub-key.
    sim.clone_vm(120, "m0").await;
    let r = sim
        .post(
            "/nodes/pve1/qemu/120/config",
            json!({"net0": "virtio,bridge=vmbr0,tag=5000"}),
        )
        .await;
    assert_eq!(r.status, 400);
    assert!(
        r.json["errors"]["net0"].as_str().unwrap().contains("net0.tag"),
        "{}",
        r.body
    );
    let r = sim
        .post("/nodes/pve1/qemu/120/config", json!({"delete": "foo"}))
        .await;
    assert_eq!(r.json["errors"]["delete"], "unknown option 'foo'");
}

#[tokio::test]
async fn linked_clone_from_non_template_fails_on_the_call() {
    let sim = common::start_default().await;
    sim.clone_vm(130, "plain").await;
    let r = sim
        .post("/nodes/pve1/qemu/130/clone", json!({"newid": 131, "full": 0}))
        .await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json["message"],
        "Linked clone feature is not supported for 'local-lvm:vm-130-disk-0' (scsi0)\n"
    );
    // Full clone of a normal VM works; the name defaults to Copy-of-VM-<name>.
    let st = sim
        .post_task("/nodes/pve1/qemu/130/clone", json!({"newid": 131}))
        .await;
    assert_eq!(st, "OK");
    let r = sim.get("/nodes/pve1/qemu/131/config").await;
    assert_eq!(r.json["data"]["name"], "Copy-of-VM-plain");
    // Missing source: synchronous, check_running wording.
    let r = sim
        .post("/nodes/pve1/qemu/999/clone", json!({"newid": 132}))
        .await;
    assert_eq!(
        r.json["message"],
        "unable to find configuration file for VM 999 on node 'pve1'\n"
    );
    // Cross-node clone of a template on local storage.
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 133, "target": "pve2"}),
        )
        .await;
    assert_eq!(
        r.json["message"],
        "can't clone VM to node 'pve2' (VM uses local storage)\n"
    );
    // Template 101 is on shared storage: cross-node works.
    let st = sim
        .post_task(
            "/nodes/pve2/qemu/101/clone",
            json!({"newid": 134, "target": "pve3"}),
        )
        .await;
    assert_eq!(st, "OK");
    assert_eq!(sim.server.state().vm(134).unwrap().node, "pve3");
}

#[tokio::test]
async fn clone_gives_new_macs_new_uuid_and_locks_during_the_task() {
    let sim = common::start_default().await;
    let state = sim.server.state();
    state.hold_tasks();
    let r = sim
        .post(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 140, "name": "capi-md-0"}),
        )
        .await;
    let upid = r.json["data"].as_str().unwrap().to_string();
    assert!(upid.contains(":qmclone:100:"), "id is the source vmid: {upid}");
    let during = sim.get("/nodes/pve1/qemu/140/config").await;
    assert_eq!(during.json["data"]["lock"], "clone");
    assert_eq!(during.json["data"]["description"], " qmclone temporary file");
    let r = sim.post("/nodes/pve1/qemu/140/config", json!({"cores": 4})).await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json["message"], "VM is locked (clone)\n");
    let res = sim.get("/cluster/resources?type=vm").await;
    let entry = res.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["vmid"] == 140)
        .cloned()
        .unwrap();
    assert_eq!(entry["lock"], "clone");
    state.release_tasks();
    assert_eq!(sim.wait_task(&upid).await, "OK");
    let src = sim.get("/nodes/pve1/qemu/100/config").await.json["data"].clone();
    let new = sim.get("/nodes/pve1/qemu/140/config").await.json["data"].clone();
    assert!(new.get("lock").is_none());
    assert!(new.get("template").is_none());
    assert_eq!(new["name"], "capi-md-0");
    let mac = |v: &serde_json::Value| v["net0"].as_str().unwrap().split(',').next().unwrap().to_string();
    assert_ne!(mac(&src), mac(&new));
    assert!(mac(&new).starts_with("virtio=BC:24:11:"));
    assert_ne!(src["smbios1"], new["smbios1"]);
    assert!(new["smbios1"].as_str().unwrap().starts_with("uuid="));
    assert_eq!(new["tags"], src["tags"], "clone copies tags verbatim");
    assert_eq!(new["cores"], json!(2), "integers are JSON numbers");
    assert_eq!(new["memory"], json!("2048"), "memory is a string since 8.1");
    // Clone onto an existing local id fails on the call.
    let r = sim
        .post("/nodes/pve1/qemu/100/clone", json!({"newid": 140}))
        .await;
    assert_eq!(
        r.json["message"],
        "unable to create VM 140: config file already exists\n"
    );
}

#[tokio::test]
async fn power_rules_sync_versus_task() {
    let sim = common::start_default().await;
    sim.clone_vm(150, "p").await;
    // Reboot, reset, suspend, resume of a stopped VM fail on the call.
    for action in ["reboot", "reset", "suspend", "resume"] {
        let r = sim
            .post(&format!("/nodes/pve1/qemu/150/status/{action}"), json!({}))
            .await;
        assert_eq!(r.status, 500, "{action}");
        assert_eq!(r.json["message"], "VM 150 not running\n", "{action}");
    }
    // Stop of a stopped VM ends OK.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/150/status/stop", json!({})).await,
        "OK"
    );
    // Start works, then start again fails inside the task.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/150/status/start", json!({}))
            .await,
        "OK"
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/150/status/start", json!({}))
            .await,
        "VM 150 already running"
    );
    let cur = sim.get("/nodes/pve1/qemu/150/status/current").await;
    assert_eq!(cur.json["data"]["status"], "running");
    assert_eq!(cur.json["data"]["ha"]["managed"], 0);
    // Destroying a running VM fails on the call.
    let r = sim.delete("/nodes/pve1/qemu/150").await;
    assert_eq!(r.json["message"], "VM 150 is running - destroy failed\n");
    // Suspend / resume / reboot of a running VM.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/150/status/suspend", json!({}))
            .await,
        "OK"
    );
    assert_eq!(sim.server.state().vm(150).unwrap().power, PowerState::Paused);
    let r = sim.post("/nodes/pve1/qemu/150/status/shutdown", json!({})).await;
    assert_eq!(r.json["message"], "VM is paused - cannot shutdown\n");
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/150/status/resume", json!({}))
            .await,
        "OK"
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/150/status/reboot", json!({}))
            .await,
        "OK"
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/150/status/shutdown", json!({}))
            .await,
        "OK"
    );
    assert_eq!(sim.server.state().vm(150).unwrap().power, PowerState::Stopped);
    // Starting a template fails in the task.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/100/status/start", json!({}))
            .await,
        "you can't start a vm if it's a template"
    );
    // A missing VM: start reports in the task, stop with the check_running wording.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/999/status/start", json!({}))
            .await,
        "Configuration file 'nodes/pve1/qemu-server/999.conf' does not exist"
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/999/status/stop", json!({})).await,
        "unable to find configuration file for VM 999 on node 'pve1'"
    );
    // A VM on another node is "missing" there.
    let r = sim.get("/nodes/pve2/qemu/150/config").await;
    assert_eq!(
        r.json["message"],
        "Configuration file 'nodes/pve2/qemu-server/150.conf' does not exist\n"
    );
}

#[tokio::test]
async fn ha_managed_delete_needs_purge() {
    let sim = common::start_default().await;
    sim.clone_vm(160, "ha").await;
    let r = sim
        .post(
            "/cluster/ha/resources",
            json!({"sid": "vm:160", "state": "stopped"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let list = sim.get("/cluster/ha/resources").await;
    assert_eq!(list.json["data"][0]["sid"], "vm:160");
    let cur = sim.get("/nodes/pve1/qemu/160/status/current").await;
    assert_eq!(cur.json["data"]["ha"]["managed"], 1);
    let r = sim.delete("/nodes/pve1/qemu/160").await;
    assert_eq!(r.status, 500);
    assert_eq!(
        r.json["message"],
        "unable to remove VM 160 - used in HA resources and purge parameter not set.\n"
    );
    let r = sim.delete("/nodes/pve1/qemu/160?purge=1").await;
    assert_eq!(r.status, 200);
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    assert!(sim.server.state().vm(160).is_none());
    assert!(
        sim.server.state().ha_resources().is_empty(),
        "purge removes the HA resource"
    );
    let r = sim.get("/cluster/nextid?vmid=160").await;
    assert_eq!(r.json["data"], json!("160"));
}

#[tokio::test]
async fn config_resize_and_tags() {
    let sim = common::start_default().await;
    sim.clone_vm(170, "cfg").await;
    let digest = sim.get("/nodes/pve1/qemu/170/config").await.json["data"]["digest"]
        .as_str()
        .unwrap()
        .to_string();
    let st = sim
        .post_task(
            "/nodes/pve1/qemu/170/config",
            json!({"cores": 4, "memory": "4096", "tags": "Capi;cluster-a;capi", "net0": "virtio,bridge=vmbr0,tag=100", "digest": digest}),
        )
        .await;
    assert_eq!(st, "OK");
    let cfg = sim.get("/nodes/pve1/qemu/170/config").await.json["data"].clone();
    assert_eq!(cfg["cores"], json!(4));
    assert_eq!(cfg["tags"], "capi;cluster-a");
    assert!(
        cfg["net0"].as_str().unwrap().starts_with("virtio=BC:24:11:"),
        "{}",
        cfg["net0"]
    );
    assert!(cfg["net0"].as_str().unwrap().ends_with(",bridge=vmbr0,tag=100"));
    let r = sim
        .post(
            "/nodes/pve1/qemu/170/config",
            json!({"cores": 2, "digest": digest}),
        )
        .await;
    assert_eq!(
        r.json["message"],
        "checksum mismatch (file change by other user?)\n"
    );
    let r = sim.post("/nodes/pve1/qemu/170/config", json!({})).await;
    assert_eq!(r.json["message"], "no options specified\n");
    // Synchronous PUT returns null.
    let r = sim
        .put("/nodes/pve1/qemu/170/config", json!({"description": "hello"}))
        .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.json["data"], serde_json::Value::Null);
    // Resize: grow works, shrink fails inside the task.
    assert_eq!(
        sim.put_task(
            "/nodes/pve1/qemu/170/resize",
            json!({"disk": "scsi0", "size": "+10G"})
        )
        .await,
        "OK"
    );
    let cfg = sim.get("/nodes/pve1/qemu/170/config").await.json["data"].clone();
    assert_eq!(cfg["scsi0"], "local-lvm:vm-170-disk-0,size=30G");
    assert_eq!(
        sim.put_task(
            "/nodes/pve1/qemu/170/resize",
            json!({"disk": "scsi0", "size": "20G"})
        )
        .await,
        "shrinking disks is not supported"
    );
    assert_eq!(
        sim.put_task(
            "/nodes/pve1/qemu/170/resize",
            json!({"disk": "scsi1", "size": "20G"})
        )
        .await,
        "disk 'scsi1' does not exist"
    );
    // Running VM: non-hot-pluggable keys go pending.
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/170/status/start", json!({}))
            .await,
        "OK"
    );
    assert_eq!(
        sim.post_task(
            "/nodes/pve1/qemu/170/config",
            json!({"cores": 8, "name": "renamed"})
        )
        .await,
        "OK"
    );
    let cur = sim.get("/nodes/pve1/qemu/170/config?current=1").await.json["data"].clone();
    assert_eq!(cur["cores"], json!(4));
    assert_eq!(cur["name"], "renamed");
    let pend = sim.get("/nodes/pve1/qemu/170/config").await.json["data"].clone();
    assert_eq!(pend["cores"], json!(8));
}

#[tokio::test]
async fn guest_agent_and_cloud_init() {
    let mut config = pve_sim::SimConfig::default();
    config.scenario.latency.cloud_init_done_ms = Some(3_600_000);
    let sim = common::start(config).await;
    sim.clone_vm(180, "guest").await;
    let r = sim.get("/nodes/pve1/qemu/180/agent/get-osinfo").await;
    assert_eq!(r.json["message"], "VM 180 is not running\n");
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/180/status/start", json!({}))
            .await,
        "OK"
    );
    let r = sim.get("/nodes/pve1/qemu/180/agent/get-osinfo").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json["data"]["result"]["id"], "ubuntu");
    let st = cloud_init_status(&sim).await;
    assert_eq!(st["exited"], json!(1));
    assert_eq!(st["exitcode"], json!(0));
    assert!(st["out-data"].as_str().unwrap().contains("running"));
    // Make cloud-init finish now, then fail, then degrade.
    let latency = pve_sim::LatencySpec {
        cloud_init_done_ms: Some(0),
        ..Default::default()
    };
    sim.server.state().set_latency(latency);
    let st = cloud_init_status(&sim).await;
    assert_eq!(st["exitcode"], json!(0));
    assert_eq!(st["out-data"], "status: done\n");
    sim.server
        .state()
        .set_cloud_init(Some(180), pve_sim::CloudInitResult::Error);
    assert_eq!(cloud_init_status(&sim).await["exitcode"], json!(1));
    sim.server
        .state()
        .set_cloud_init(Some(180), pve_sim::CloudInitResult::Degraded);
    assert_eq!(cloud_init_status(&sim).await["exitcode"], json!(2));
    // Agent not yet up.
    let latency = pve_sim::LatencySpec {
        agent_ready_ms: Some(3_600_000),
        ..Default::default()
    };
    sim.server.state().set_latency(latency);
    let r = sim.get("/nodes/pve1/qemu/180/agent/get-osinfo").await;
    assert_eq!(r.status, 500);
    assert_eq!(r.json["message"], "QEMU guest agent is not running\n");
}

#[tokio::test]
async fn snapshots_and_listings() {
    let sim = common::start_default().await;
    sim.clone_vm(190, "snap").await;
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/190/snapshot", json!({"snapname": "s1"}))
            .await,
        "OK"
    );
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/190/snapshot", json!({"snapname": "s1"}))
            .await,
        "snapshot name 's1' already used"
    );
    let list = sim.get("/nodes/pve1/qemu/190/snapshot").await.json["data"].clone();
    assert_eq!(list[0]["name"], "s1");
    assert_eq!(list[1]["name"], "current");
    let r = sim.delete("/nodes/pve1/qemu/190/snapshot/s1").await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    let nodes = sim.get("/nodes").await.json["data"].clone();
    assert_eq!(nodes.as_array().unwrap().len(), 3);
    let status = sim.get("/nodes/pve1/status").await.json["data"].clone();
    assert!(status["memory"]["total"].as_u64().unwrap() > 0);
    let qemu = sim.get("/nodes/pve1/qemu").await.json["data"].clone();
    assert!(qemu.as_array().unwrap().iter().any(|v| v["vmid"] == 190));
    assert_eq!(sim.get("/nodes/pve1/lxc").await.json["data"], json!([]));
    let storages = sim.get("/nodes/pve1/storage").await.json["data"].clone();
    assert!(
        storages
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["storage"] == "local" && s["content"] == "iso,vztmpl,backup")
    );
    let cs = sim.get("/cluster/status").await.json["data"].clone();
    assert_eq!(cs[0]["type"], "cluster");
    let v = sim.get("/version").await.json["data"].clone();
    assert_eq!(v["release"], "8.4");
    let r = sim.get("/nodes/nope/status").await;
    assert_eq!(r.status, 500);
    let r = sim.get("/nodes/pve1/tasks/UPID:bogus/status").await;
    assert_eq!(r.json["errors"]["upid"], "unable to parse worker upid");
    assert!(
        sim.server
            .state()
            .request_count("GET /nodes/{node}/qemu/{vmid}/snapshot")
            >= 1
    );
}

async fn cloud_init_status(sim: &common::Sim) -> serde_json::Value {
    let r = sim
        .post(
            "/nodes/pve1/qemu/180/agent/exec",
            json!({"command": ["cloud-init", "status"], "input-data": ""}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let pid = r.json["data"]["pid"].as_i64().unwrap();
    sim.get(&format!("/nodes/pve1/qemu/180/agent/exec-status?pid={pid}"))
        .await
        .json["data"]
        .clone()
}
