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
