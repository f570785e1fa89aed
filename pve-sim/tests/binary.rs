//! The `pve-sim` binary serves a scenario file and prints how to connect.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Kills the child process when dropped (also when an assertion fails).
struct Guard(std::process::Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn binary_serves_the_demo_scenario_as_9_1() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scenario = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/demo.yaml");
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let child = Command::new(env!("CARGO_BIN_EXE_pve-sim"))
        .arg("--scenario")
        .arg(&scenario)
        .args([
            "--listen",
            "127.0.0.1:0",
            "--http",
            "--profile",
            "instant",
            "--pve-version",
            "9.1",
            "--request-log",
        ])
        .arg(&log)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut guard = Guard(child);
    let stdout = guard.0.stdout.take().unwrap();
    let lines: Vec<String> = tokio::task::spawn_blocking(move || {
        BufReader::new(stdout)
            .lines()
            .map_while(Result::ok)
            .take_while(|l| !l.starts_with("try:"))
            .collect()
    })
    .await
    .unwrap();
    let field = |prefix: &str| {
        lines
            .iter()
            .find_map(|l| l.strip_prefix(prefix))
            .map(|v| v.split_whitespace().next().unwrap().to_string())
    };
    let url = field("pve-sim listening on ").expect("URL printed");
    let token = field("token id:").expect("token id printed");
    let secret = field("token secret:").expect("secret printed");
    assert_eq!(token, "capmox@pve!capi");
    assert_eq!(field("Proxmox VE:").as_deref(), Some("9.1"));
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let r = client
        .get(format!("{url}/api2/json/cluster/resources"))
        .header("Authorization", format!("PVEAPIToken={token}={secret}"))
        .send()
        .await
        .unwrap();
    let status = r.status().as_u16();
    let body: serde_json::Value = r.json().await.unwrap();
    let version: serde_json::Value = client
        .get(format!("{url}/api2/json/version"))
        .header("Authorization", format!("PVEAPIToken={token}={secret}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    drop(guard);
    assert_eq!(version["data"]["release"], "9.1", "{version}");
    assert_eq!(status, 200);
    assert!(
        body["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["id"] == "qemu/100")
    );
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("\"endpoint\":\"GET /cluster/resources\""));
}
