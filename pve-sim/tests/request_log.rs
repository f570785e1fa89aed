//! The request log: one JSON line per request, secrets redacted, upload bytes summarised.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::SimConfig;
use serde_json::{Value, json};

#[tokio::test]
async fn request_log_redacts_secrets() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let sim = common::start(SimConfig {
        request_log: Some(log.clone()),
        ..SimConfig::default()
    })
    .await;
    let password = sim.server.password().to_string();
    let r = sim
        .client
        .post(format!("{}/access/ticket", sim.base))
        .form(&[("username", sim.server.user()), ("password", password.as_str())])
        .send()
        .await
        .unwrap();
    let ticket: Value = r.json().await.unwrap();
    let ticket = ticket["data"]["ticket"].as_str().unwrap().to_string();
    sim.clone_vm(500, "logged").await;
    let r = sim
        .post(
            "/nodes/pve1/qemu/500/config",
            json!({"cipassword": "hunter2", "ciuser": "capi"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let form = reqwest::multipart::Form::new().text("content", "iso").part(
        "filename",
        reqwest::multipart::Part::bytes(vec![7u8; 4096]).file_name("x.iso"),
    );
    let r = sim
        .client
        .post(format!("{}/nodes/pve1/storage/local/upload", sim.base))
        .header("Authorization", &sim.auth)
        .multipart(form)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    sim.get("/nodes/pve1/nothing").await;

    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!text.contains(&password), "password leaked");
    assert!(!text.contains("hunter2"), "cipassword leaked");
    assert!(!text.contains(&ticket), "ticket leaked");
    assert!(!text.contains(sim.server.token_secret()), "token secret leaked");
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let login = lines
        .iter()
        .find(|l| l["path"] == "/api2/json/access/ticket")
        .unwrap();
    assert_eq!(login["params"]["password"], "<redacted>");
    assert_eq!(login["status"], 200);
    let config = lines
        .iter()
        .find(|l| l["endpoint"] == "POST /nodes/{node}/qemu/{vmid}/config")
        .unwrap();
    assert_eq!(config["params"]["cipassword"], "<redacted>");
    assert_eq!(config["params"]["ciuser"], "capi");
    assert_eq!(config["method"], "POST");
    let upload = lines
        .iter()
        .find(|l| l["endpoint"] == "POST /nodes/{node}/storage/{storage}/upload")
        .unwrap();
    assert_eq!(upload["params"]["upload"], "<4096 bytes>");
    assert_eq!(upload["params"]["filename"], "x.iso");
    let missing = lines
        .iter()
        .find(|l| l["path"] == "/api2/json/nodes/pve1/nothing")
        .unwrap();
    assert_eq!(missing["status"], 501);
}

/// A provider's whole lifecycle against each version, logged, then every successful request
/// checked against the schema of the version played (`../shared/pve-api`).
#[tokio::test]
async fn every_request_is_valid_against_the_schema_of_the_version_played() {
    for version in pve_sim::PveVersion::ALL {
        let Some(path) = pve_sim::schema::find(version) else {
            eprintln!(
                "skipped: {} not found in {}",
                version.schema_file(),
                pve_sim::schema::default_dir().display()
            );
            return;
        };
        let schema = pve_sim::schema::ApiSchema::load(&path).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("requests.jsonl");
        let sim = common::start(SimConfig {
            request_log: Some(log.clone()),
            pve_version: Some(version),
            ..SimConfig::default()
        })
        .await;
        lifecycle(&sim, version).await;
        let text = std::fs::read_to_string(&log).unwrap();
        let problems = schema.check_log(&text, false);
        assert!(problems.is_empty(), "{version}: {problems:#?}");
        assert!(text.lines().count() > 25, "{version}: the lifecycle ran");
        // The judge judges: an unknown parameter is caught.
        let bad = r#"{"endpoint":"POST /nodes/{node}/qemu/{vmid}/config","params":{"node":"pve1","vmid":"500","bogus":"1"},"status":200}"#;
        assert_eq!(schema.check_log(bad, false).len(), 1);
    }
}

async fn lifecycle(sim: &common::Sim, version: pve_sim::PveVersion) {
    let ok = |r: &common::Resp, what: &str| assert!(r.status < 400, "{version} {what}: {}", r.body);
    ok(&sim.get("/version").await, "version");
    ok(&sim.get("/cluster/nextid").await, "nextid");
    ok(&sim.get("/cluster/resources?type=vm").await, "resources");
    let st = sim
        .post_task(
            "/nodes/pve1/qemu/100/clone",
            json!({"newid": 500, "name": "lc", "full": 0, "pool": "capi"}),
        )
        .await;
    assert_eq!(st, "OK");
    let form = reqwest::multipart::Form::new().text("content", "iso").part(
        "filename",
        reqwest::multipart::Part::bytes(vec![7u8; 2048]).file_name("user-data-500.iso"),
    );
    let r = sim
        .client
        .post(format!("{}/nodes/pve1/storage/local/upload", sim.base))
        .header("Authorization", &sim.auth)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let upid: Value = r.json().await.unwrap();
    assert_eq!(sim.wait_task(upid["data"].as_str().unwrap()).await, "OK");
    let st = sim
        .post_task(
            "/nodes/pve1/qemu/500/config",
            json!({
                "cores": 2, "memory": "4096", "net0": "virtio,bridge=vmbr0,tag=10",
                "ipconfig0": "ip=10.0.0.5/24,gw=10.0.0.1", "ciuser": "capi", "tags": "capmox;v1",
                "scsi1": "local-lvm:4,iothread=1,discard=on",
                "ide2": "local:iso/user-data-500.iso,media=cdrom", "boot": "order=scsi0;ide2;net0",
                "agent": "enabled=1", "onboot": 1
            }),
        )
        .await;
    assert_eq!(st, "OK");
    ok(
        &sim.put(
            "/nodes/pve1/qemu/500/resize",
            json!({"disk": "scsi0", "size": "+2G"}),
        )
        .await,
        "resize",
    );
    ok(&sim.get("/nodes/pve1/qemu/500/config").await, "config");
    ok(&sim.get("/nodes/pve1/qemu/500/pending").await, "pending");
    assert_eq!(
        sim.post_task("/nodes/pve1/qemu/500/status/start", json!({}))
            .await,
        "OK"
    );
    ok(&sim.get("/nodes/pve1/qemu/500/status/current").await, "current");
    ok(
        &sim.post("/nodes/pve1/qemu/500/agent/ping", json!({})).await,
        "ping",
    );
    ok(
        &sim.get("/nodes/pve1/qemu/500/agent/network-get-interfaces").await,
        "ifaces",
    );
    let r = sim
        .post(
            "/nodes/pve1/qemu/500/agent/exec",
            json!({"command": ["cloud-init", "status"]}),
        )
        .await;
    ok(&r, "exec");
    let pid = r.json["data"]["pid"].as_i64().unwrap();
    ok(
        &sim.get(&format!("/nodes/pve1/qemu/500/agent/exec-status?pid={pid}"))
            .await,
        "exec-status",
    );
    let mut ha = json!({"sid": "vm:500", "state": "started", "max_restart": 2});
    if version.is_9() {
        ha["failback"] = json!(0);
    }
    ok(&sim.post("/cluster/ha/resources", ha).await, "ha create");
    ok(
        &sim.put(
            "/cluster/ha/resources/vm:500",
            json!({"state": "started", "comment": "x"}),
        )
        .await,
        "ha update",
    );
    if version.is_9() {
        let rule =
            json!({"rule": "lc", "type": "node-affinity", "resources": "vm:500", "nodes": "pve1:2,pve2"});
        ok(&sim.post("/cluster/ha/rules", rule).await, "rule");
        ok(&sim.get("/cluster/ha/rules").await, "rules");
    } else {
        ok(&sim.get("/cluster/ha/groups").await, "groups");
    }
    ok(&sim.delete("/cluster/ha/resources/vm:500").await, "ha delete");
    ok(&sim.get("/nodes/pve1/tasks?vmid=500&limit=10").await, "tasks");
    let r = sim
        .post(
            "/nodes/pve1/qemu/500/status/shutdown",
            json!({"forceStop": 1, "timeout": 30}),
        )
        .await;
    ok(&r, "shutdown");
    let upid = r.json["data"].as_str().unwrap().to_string();
    assert_eq!(sim.wait_task(&upid).await, "OK");
    let enc = upid.replace(':', "%3A").replace('@', "%40").replace('!', "%21");
    ok(
        &sim.get(&format!("/nodes/pve1/tasks/{enc}/log?start=0&limit=50"))
            .await,
        "log",
    );
    ok(
        &sim.get("/nodes/pve1/storage/local/content/local:iso/user-data-500.iso")
            .await,
        "volume",
    );
    let r = sim
        .delete("/nodes/pve1/qemu/500?purge=1&destroy-unreferenced-disks=1")
        .await;
    ok(&r, "destroy");
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    let r = sim
        .delete("/nodes/pve1/storage/local/content/local:iso/user-data-500.iso")
        .await;
    ok(&r, "volume delete");
}
