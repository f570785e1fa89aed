//! The two differences from PVE a third-party client (capmox v0.9.0 with go-proxmox v0.6.0)
//! found: `boot=;ide0` was accepted, and volume ids with an unescaped `/` were not routed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::PveVersion;
use serde_json::json;

/// `boot`'s default key is `legacy` (pattern `[acdn]{1,4}`), so a bare `;ide0` is a legacy value
/// PVE refuses (qemu-server `$boot_fmt`, pve-common `parse_property_string`/`check_prop`).
#[tokio::test]
async fn boot_values_are_checked_as_pve_checks_them() {
    for version in PveVersion::ALL {
        let sim = common::start_version(version).await;
        sim.clone_vm(150, "boot").await;
        let r = sim
            .put("/nodes/pve1/qemu/150/config", json!({"boot": ";ide0"}))
            .await;
        assert_eq!(r.status, 400, "{version}: {}", r.body);
        assert_eq!(
            r.json["errors"]["boot"],
            "invalid format - format error\nboot.legacy: value does not match the regex pattern\n"
        );
        let r = sim
            .post("/nodes/pve1/qemu/150/config", json!({"boot": "order=bogus0"}))
            .await;
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(
            r.json["errors"]["boot"]
                .as_str()
                .unwrap()
                .contains("boot.order: invalid format - invalid boot device 'bogus0'"),
            "{}",
            r.body
        );
        for ok in ["cdn", "legacy=dc", "order=scsi0;net0", "c,order=scsi0"] {
            let r = sim.put("/nodes/pve1/qemu/150/config", json!({"boot": ok})).await;
            assert_eq!(r.status, 200, "{version} boot={ok}: {}", r.body);
        }
        let r = sim
            .put("/nodes/pve1/qemu/150/config", json!({"boot": "cdn,dc"}))
            .await;
        assert_eq!(
            r.json["errors"]["boot"],
            "invalid format - duplicate key in comma-separated list property: legacy\n"
        );
    }
}

async fn upload(sim: &common::Sim, name: &str) {
    let form = reqwest::multipart::Form::new().text("content", "iso").part(
        "filename",
        reqwest::multipart::Part::bytes(vec![9u8; 1024]).file_name(name.to_string()),
    );
    let r = sim
        .client
        .post(format!("{}/nodes/pve1/storage/local/upload", sim.base))
        .header("Authorization", &sim.auth)
        .multipart(form)
        .send()
        .await
        .unwrap();
    let upid: serde_json::Value = r.json().await.unwrap();
    assert_eq!(sim.wait_task(upid["data"].as_str().unwrap()).await, "OK");
}

/// Below `.../content/` the rest of the path is the volume id, slashes included (pve-storage
/// `fragmentDelimiter => ''`; pve-common `map_path_to_methods` joins the rest of the path).
#[tokio::test]
async fn volume_ids_with_a_slash_are_routed() {
    let sim = common::start_default().await;
    upload(&sim, "user-data-102.iso").await;
    for path in [
        "/nodes/pve1/storage/local/content/local:iso/user-data-102.iso",
        "/nodes/pve1/storage/local/content/local%3Aiso%2Fuser-data-102.iso",
        "/nodes/pve1/storage/local/content/iso/user-data-102.iso",
        "/nodes/pve1/storage/local/content/local:iso//user-data-102.iso",
    ] {
        let r = sim.get(path).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert_eq!(r.json["data"]["size"], json!(1024), "{path}");
    }
    let r = sim
        .delete("/nodes/pve1/storage/local/content/local:iso/user-data-102.iso")
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    let r = sim
        .get("/nodes/pve1/storage/local/content/local:iso/user-data-102.iso")
        .await;
    assert_eq!(
        r.json["message"],
        "volume 'local:iso/user-data-102.iso' does not exist\n"
    );
    // Other path parameters cannot hold a slash: an escaped one splits the path, as in PVE.
    let r = sim.get("/nodes/pve1/qemu/100%2Fconfig").await;
    assert_eq!(r.status, 200, "decoded then split: {}", r.body);
}
