//! NoCloud ISO upload, attach, and `agent/network-get-interfaces` reading the ISO's network-config.
//! ISOs are built with the real tools (xorriso / genisoimage); each case skips if its tool is absent.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::path::Path;
use std::process::Command;

use serde_json::json;

fn tool(name: &str) -> bool {
    Command::new(name)
        .arg("-version")
        .output()
        .is_ok_and(|o| o.status.success())
}

fn write_seed(dir: &Path, mac: &str) {
    std::fs::write(dir.join("user-data"), "#cloud-config\nhostname: m1\n").unwrap();
    std::fs::write(dir.join("meta-data"), "instance-id: 1234\nlocal-hostname: m1\n").unwrap();
    let net = format!(
        "network:\n  version: 2\n  renderer: networkd\n  ethernets:\n    eth0:\n      match:\n        macaddress: {mac}\n      dhcp4: false\n      addresses:\n        - 10.0.0.21/24\n        - 2001:db8::21/64\n      routes:\n        - to: 0.0.0.0/0\n          via: 10.0.0.1\n"
    );
    std::fs::write(dir.join("network-config"), net).unwrap();
}

fn build_iso(tool: &str, flags: &[&str], src: &Path, out: &Path) {
    let mut cmd = Command::new(tool);
    if tool == "xorriso" {
        cmd.args(["-as", "mkisofs"]);
    }
    cmd.args(["-quiet", "-o"])
        .arg(out)
        .args(["-V", "cidata"])
        .args(flags)
        .arg(src);
    let st = cmd.output().unwrap();
    assert!(
        st.status.success(),
        "{tool} failed: {}",
        String::from_utf8_lossy(&st.stderr)
    );
}

async fn upload_and_read(sim: &common::Sim, vmid: u32, iso: Vec<u8>) -> serde_json::Value {
    let name = format!("user-data-{vmid}.iso");
    let form = reqwest::multipart::Form::new().text("content", "iso").part(
        "filename",
        reqwest::multipart::Part::bytes(iso.clone()).file_name(name.clone()),
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
    let v: serde_json::Value = r.json().await.unwrap();
    let upid = v["data"].as_str().unwrap();
    assert!(upid.contains(":imgcopy::"), "imgcopy has an empty id: {upid}");
    assert_eq!(sim.wait_task(upid).await, "OK");
    let volid = format!("local:iso/{name}");
    assert_eq!(
        sim.server.state().volume_bytes("pve1", &volid),
        Some(iso),
        "bytes are kept"
    );
    let content = sim.get("/nodes/pve1/storage/local/content?content=iso").await;
    assert!(
        content.json["data"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["volid"] == volid.as_str())
    );
    let got = sim
        .get(&format!(
            "/nodes/pve1/storage/local/content/{}",
            volid.replace(':', "%3A").replace('/', "%2F")
        ))
        .await;
    assert_eq!(got.status, 200, "{}", got.body);

    let st = sim
        .post_task(
            &format!("/nodes/pve1/qemu/{vmid}/config"),
            json!({"ide0": format!("{volid},media=cdrom"), "boot": "order=scsi0;ide0"}),
        )
        .await;
    assert_eq!(st, "OK");
    assert_eq!(
        sim.post_task(&format!("/nodes/pve1/qemu/{vmid}/status/start"), json!({}))
            .await,
        "OK"
    );
    let r = sim
        .get(&format!("/nodes/pve1/qemu/{vmid}/agent/network-get-interfaces"))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.json["data"]["result"].clone()
}

async fn check_tool(tool_name: &str, flags: &[&str], vmid: u32) {
    if !tool(tool_name) {
        eprintln!("skipped: {tool_name} not installed (apt-get install xorriso genisoimage)");
        return;
    }
    let sim = common::start_default().await;
    sim.clone_vm(vmid, "iso").await;
    let cfg = sim.get(&format!("/nodes/pve1/qemu/{vmid}/config")).await.json["data"].clone();
    let mac = cfg["net0"]
        .as_str()
        .unwrap()
        .split(',')
        .next()
        .unwrap()
        .trim_start_matches("virtio=")
        .to_string();
    let dir = tempfile::tempdir().unwrap();
    let src = dir.path().join("seed");
    std::fs::create_dir(&src).unwrap();
    write_seed(&src, &mac);
    let out = dir.path().join("seed.iso");
    build_iso(tool_name, flags, &src, &out);
    let ifaces = upload_and_read(&sim, vmid, std::fs::read(&out).unwrap()).await;
    let eth0 = ifaces
        .as_array()
        .unwrap()
        .iter()
        .find(|i| i["name"] == "eth0")
        .cloned()
        .expect("eth0");
    assert_eq!(eth0["hardware-address"], mac.to_lowercase());
    let ips: Vec<&str> = eth0["ip-addresses"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["ip-address"].as_str().unwrap())
        .collect();
    assert!(ips.contains(&"10.0.0.21"), "{ips:?}");
    assert!(ips.contains(&"2001:db8::21"), "{ips:?}");
    assert_eq!(ifaces[0]["name"], "lo");
}

#[tokio::test]
async fn xorriso_joliet_rock_ridge() {
    check_tool("xorriso", &["-J", "-R"], 400).await;
}

#[tokio::test]
async fn xorriso_rock_ridge_only() {
    check_tool("xorriso", &["-R"], 401).await;
}

#[tokio::test]
async fn genisoimage_joliet_rock_ridge() {
    check_tool("genisoimage", &["-J", "-R"], 402).await;
}

#[tokio::test]
async fn genisoimage_joliet_only() {
    check_tool("genisoimage", &["-J"], 403).await;
}

#[tokio::test]
async fn upload_rules() {
    let sim = common::start_default().await;
    let upload = |storage: &'static str, field: &'static str, name: &'static str| {
        let form = reqwest::multipart::Form::new().text("content", "iso").part(
            field,
            reqwest::multipart::Part::bytes(vec![0u8; 16]).file_name(name),
        );
        sim.client
            .post(format!("{}/nodes/pve1/storage/{storage}/upload", sim.base))
            .header("Authorization", &sim.auth)
            .multipart(form)
            .send()
    };
    let r = upload("local", "filename", "seed.txt").await.unwrap();
    assert_eq!(r.status().as_u16(), 400);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["errors"]["filename"], "wrong file extension");
    let r = upload("local-lvm", "filename", "seed.iso").await.unwrap();
    assert_eq!(r.status().as_u16(), 500);
    assert!(r.text().await.unwrap().contains("does not support 'iso' content"));
    let r = upload("local", "file", "seed.iso").await.unwrap();
    assert_eq!(r.status().as_u16(), 500);
    // Name normalisation, then delete through the content endpoint.
    let r = upload("local", "filename", "my seed.iso").await.unwrap();
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(sim.wait_task(v["data"].as_str().unwrap()).await, "OK");
    assert_eq!(
        sim.server.state().volume_ids("pve1", "local"),
        vec!["local:iso/my_seed.iso".to_string()]
    );
    let r = sim
        .delete("/nodes/pve1/storage/local/content/local%3Aiso%2Fmy_seed.iso")
        .await;
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    assert!(sim.server.state().volume_ids("pve1", "local").is_empty());
    let r = sim
        .delete("/nodes/pve1/storage/local/content/local%3Aiso%2Fmy_seed.iso")
        .await;
    assert_eq!(r.status, 500);
}
