//! `download-url`, the `import` content type, `import-from` on VM creation and the template
//! conversion of an imported VM, as PVE 8.4 and 9.1 do them (pve-storage `download_url`,
//! pve-common `download_file_from_url`, qemu-server `create_disks`): each behaviour against a
//! loopback HTTP server the test starts.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use pve_sim::fileserver::{FileServer, qcow2_image};
use pve_sim::scenario::StorageSpec;
use pve_sim::{PveVersion, Scenario, SimConfig};
use serde_json::json;

const SHA256_OF_ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

/// A simulator whose `local` storage also takes `import` content.
async fn sim(version: PveVersion) -> Sim {
    let mut scenario = Scenario {
        version,
        ..Scenario::default()
    };
    for s in &mut scenario.storages {
        if s.name == "local" {
            s.content = "iso,vztmpl,backup,import".into();
        }
    }
    scenario.storages.push(StorageSpec {
        name: "nfs-iso".into(),
        kind: "nfs".into(),
        content: "iso".into(),
        shared: true,
        nodes: Vec::new(),
        total: 1 << 40,
    });
    start(SimConfig {
        scenario,
        pve_version: Some(version),
        ..SimConfig::default()
    })
    .await
}

fn sha256(data: &[u8]) -> String {
    use sha2::Digest;
    format!("{:x}", sha2::Sha256::digest(data))
}

async fn upid_of(s: &Sim, path: &str, body: serde_json::Value) -> String {
    let r = s.post(path, body).await;
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.json["data"].as_str().unwrap().to_owned()
}

async fn log_of(s: &Sim, upid: &str) -> Vec<String> {
    let node = upid.split(':').nth(1).unwrap();
    let enc = upid.replace(':', "%3A").replace('@', "%40").replace('!', "%21");
    let r = s.get(&format!("/nodes/{node}/tasks/{enc}/log?limit=500")).await;
    r.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["t"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn a_download_verifies_its_checksum_and_lands_as_import_content() {
    for version in [PveVersion::V8_4, PveVersion::V9_1] {
        let s = sim(version).await;
        let files = FileServer::start().await.unwrap();
        let image = qcow2_image(2 << 30, 4096);
        files.put("noble.qcow2", image.clone());
        let upid = upid_of(
            &s,
            "/nodes/pve1/storage/local/download-url",
            json!({"url": files.url("noble.qcow2"), "content": "import", "filename": "noble.qcow2",
                   "checksum": sha256(&image), "checksum-algorithm": "sha256"}),
        )
        .await;
        assert!(upid.contains(":download:noble.qcow2:"), "{upid}");
        assert_eq!(s.wait_task(&upid).await, "OK");
        let log = log_of(&s, &upid).await;
        assert_eq!(
            log[0],
            format!(
                "downloading {} to /var/lib/vz/import/noble.qcow2",
                files.url("noble.qcow2")
            )
        );
        assert!(
            log.iter().any(|l| l.starts_with("Length: 4096 (4.0K)")),
            "{log:?}"
        );
        assert!(log.iter().any(|l| l.contains("100%")), "{log:?}");
        assert!(log.contains(&"calculating checksum...OK, checksum verified".to_owned()));
        assert_eq!(log.last().unwrap(), "TASK OK");
        let list = s.get("/nodes/pve1/storage/local/content?content=import").await;
        let vols = list.json["data"].as_array().unwrap();
        assert_eq!(vols.len(), 1, "{}", list.body);
        assert_eq!(vols[0]["volid"], "local:import/noble.qcow2");
        assert_eq!(vols[0]["format"], "qcow2");
        assert_eq!(vols[0]["size"], 4096);
        // Node-local: another node does not see it.
        let other = s.get("/nodes/pve2/storage/local/content?content=import").await;
        assert_eq!(other.json["data"].as_array().unwrap().len(), 0);
        // The same file again with its checksum: nothing to download.
        let again = upid_of(
            &s,
            "/nodes/pve1/storage/local/download-url",
            json!({"url": files.url("noble.qcow2"), "content": "import", "filename": "noble.qcow2",
                   "checksum": sha256(&image), "checksum-algorithm": "sha256"}),
        )
        .await;
        assert_eq!(s.wait_task(&again).await, "OK");
        assert!(
            log_of(&s, &again)
                .await
                .iter()
                .any(|l| l.contains("no need to download"))
        );
        assert_eq!(files.requests().len(), 1, "no second fetch");
        // ... and without one PVE refuses to overwrite it.
        let refused = upid_of(
            &s,
            "/nodes/pve1/storage/local/download-url",
            json!({"url": files.url("noble.qcow2"), "content": "import", "filename": "noble.qcow2"}),
        )
        .await;
        assert_eq!(
            s.wait_task(&refused).await,
            "refusing to override existing file '/var/lib/vz/import/noble.qcow2'"
        );
        s.server.shutdown().await;
    }
}

#[tokio::test]
async fn a_checksum_mismatch_or_a_bad_image_fails_the_task_and_leaves_nothing() {
    let s = sim(PveVersion::V8_4).await;
    let files = FileServer::start().await.unwrap();
    files.put("abc.raw", b"abc".to_vec());
    files.put("plain.qcow2", b"not a qcow2 image".to_vec());
    let upid = upid_of(
        &s,
        "/nodes/pve1/storage/local/download-url",
        json!({"url": files.url("abc.raw"), "content": "import", "filename": "abc.raw",
               "checksum": "00", "checksum-algorithm": "sha256"}),
    )
    .await;
    let status = s.wait_task(&upid).await;
    assert_eq!(
        status,
        format!("checksum mismatch: got '{SHA256_OF_ABC}' != expect '00'")
    );
    let log = log_of(&s, &upid).await;
    assert_eq!(
        log[log.len() - 2],
        status,
        "the error is the last line before TASK ERROR"
    );
    let bad = upid_of(
        &s,
        "/nodes/pve1/storage/local/download-url",
        json!({"url": files.url("plain.qcow2"), "content": "import", "filename": "plain.qcow2"}),
    )
    .await;
    assert_eq!(
        s.wait_task(&bad).await,
        "failed to verify file: failed to query file information with qemu-img"
    );
    let missing = upid_of(
        &s,
        "/nodes/pve1/storage/local/download-url",
        json!({"url": files.url("nope.raw"), "content": "import", "filename": "nope.raw"}),
    )
    .await;
    let st = s.wait_task(&missing).await;
    assert!(
        st.starts_with(
            "download failed: command 'wget --progress=dot:giga -O /var/lib/vz/import/nope.raw.tmp_dwnl."
        ),
        "{st}"
    );
    assert!(st.ends_with("failed: exit code 8"), "{st}");
    assert!(
        log_of(&s, &missing)
            .await
            .iter()
            .any(|l| l.ends_with("ERROR 404: Not Found."))
    );
    assert!(s.server.state().file_volumes().is_empty(), "no file left");
    s.server.shutdown().await;
}

#[tokio::test]
async fn download_url_checks_its_parameters_and_the_storage_first() {
    let s = sim(PveVersion::V9_1).await;
    let post = |body: serde_json::Value, storage: &'static str| {
        let s = &s;
        async move {
            s.post(&format!("/nodes/pve1/storage/{storage}/download-url"), body)
                .await
        }
    };
    let r = post(
        json!({"url": "ftp://x/a.qcow2", "content": "import", "filename": "a.qcow2"}),
        "local",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(r.json["errors"]["url"], "value does not match the regex pattern");
    let r = post(
        json!({"url": "http://x/a.qcow2", "content": "import", "filename": "a.qcow2", "checksum": "ab"}),
        "local",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json["errors"]["checksum-algorithm"],
        "missing property required by 'checksum'"
    );
    let r = post(
        json!({"url": "http://x/a.img", "content": "import", "filename": "a.img"}),
        "local",
    )
    .await;
    assert_eq!(r.status, 400);
    assert_eq!(
        r.json["errors"]["filename"],
        "invalid filename or wrong extension"
    );
    let r = post(
        json!({"url": "http://x/a.qcow2", "content": "import", "filename": "a.qcow2"}),
        "nfs-iso",
    )
    .await;
    assert_eq!(r.status, 500);
    assert!(
        r.body
            .contains("storage 'nfs-iso' is not configured for content-type 'import'"),
        "{}",
        r.body
    );
    let r = post(
        json!({"url": "http://x/a.qcow2", "content": "import", "filename": "a.qcow2"}),
        "local-lvm",
    )
    .await;
    assert_eq!(r.status, 500);
    assert!(
        r.body
            .contains("can't upload to storage type 'lvmthin', not a file based storage!"),
        "{}",
        r.body
    );
    let r = post(
        json!({"url": "http://x/a.qcow2", "content": "import", "filename": "a.qcow2"}),
        "nope",
    )
    .await;
    assert_eq!(r.status, 500);
    assert!(r.body.contains("storage 'nope' does not exist"), "{}", r.body);
    assert_eq!(s.server.state().running_tasks(), 0);
    s.server.shutdown().await;
}

#[tokio::test]
async fn progress_lines_appear_while_the_download_runs_and_a_stop_leaves_nothing() {
    let s = sim(PveVersion::V8_4).await;
    let files = FileServer::start().await.unwrap();
    let size = 80usize << 20;
    files.put("big.raw", vec![0u8; size]);
    files.hold_after(40 << 20);
    let upid = upid_of(
        &s,
        "/nodes/pve1/storage/local/download-url",
        json!({"url": files.url("big.raw"), "content": "import", "filename": "big.raw"}),
    )
    .await;
    // The first 32 MiB line shows while the server holds the rest.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let log = log_of(&s, &upid).await;
        if let Some(l) = log.iter().find(|l| l.starts_with("     0K ........")) {
            assert!(l.contains(" 40% "), "{l}");
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress line: {log:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let node = "pve1";
    let enc = upid.replace(':', "%3A").replace('@', "%40").replace('!', "%21");
    assert_eq!(s.delete(&format!("/nodes/{node}/tasks/{enc}")).await.status, 200);
    assert_eq!(s.wait_task(&upid).await, "interrupted by signal");
    files.release();
    assert!(
        s.server.state().file_volumes().is_empty(),
        "an interrupted download leaves nothing"
    );
    s.server.shutdown().await;
}

#[tokio::test]
async fn a_vm_created_with_import_from_gets_the_image_and_becomes_a_template() {
    for version in [PveVersion::V8_4, PveVersion::V9_1] {
        let s = sim(version).await;
        let files = FileServer::start().await.unwrap();
        files.put("noble.qcow2", qcow2_image(3 << 30, 2048));
        let dl = upid_of(
            &s,
            "/nodes/pve1/storage/local/download-url",
            json!({"url": files.url("noble.qcow2"), "content": "import", "filename": "noble.qcow2"}),
        )
        .await;
        assert_eq!(s.wait_task(&dl).await, "OK");
        // The special syntax and the source's content type are checked before the task.
        let r = s
            .post(
                "/nodes/pve1/qemu",
                json!({"vmid": 500, "scsi0": "local-lvm:8,import-from=local:import/noble.qcow2"}),
            )
            .await;
        assert_eq!(r.status, 400);
        assert!(
            r.json["errors"]["scsi0"]
                .as_str()
                .unwrap()
                .contains("requires special syntax"),
            "{}",
            r.body
        );
        let r = s
            .post(
                "/nodes/pve1/qemu",
                json!({"vmid": 500, "scsi0": "local-lvm:0,import-from=local:iso/x.iso"}),
            )
            .await;
        assert_eq!(r.status, 400);
        assert_eq!(
            r.json["errors"]["scsi0"],
            "local:iso/x.iso has wrong type 'iso' - needs to be 'images' or 'import'"
        );
        let create = upid_of(
            &s,
            "/nodes/pve1/qemu",
            json!({"vmid": 500, "name": "noble", "memory": 1024, "scsihw": "virtio-scsi-single",
                   "scsi0": "local-lvm:0,import-from=local:import/noble.qcow2,discard=on",
                   "net0": "virtio,bridge=vmbr0"}),
        )
        .await;
        assert_eq!(s.wait_task(&create).await, "OK");
        let log = log_of(&s, &create).await;
        assert!(
            log.contains(&"create full clone of drive (local:import/noble.qcow2)".to_owned()),
            "{log:?}"
        );
        let cfg = s.get("/nodes/pve1/qemu/500/config").await;
        assert_eq!(
            cfg.json["data"]["scsi0"],
            "local-lvm:vm-500-disk-0,discard=on,size=3G"
        );
        let t = upid_of(&s, "/nodes/pve1/qemu/500/template", json!({})).await;
        assert_eq!(s.wait_task(&t).await, "OK");
        let cfg = s.get("/nodes/pve1/qemu/500/config").await;
        assert_eq!(cfg.json["data"]["template"], 1);
        assert_eq!(
            cfg.json["data"]["scsi0"],
            "local-lvm:base-500-disk-0,discard=on,size=3G"
        );
        // A linked clone of the new template works.
        let c = upid_of(
            &s,
            "/nodes/pve1/qemu/500/clone",
            json!({"newid": 501, "name": "n1"}),
        )
        .await;
        assert_eq!(s.wait_task(&c).await, "OK");
        // The file is import content that can go now.
        let del = s
            .delete("/nodes/pve1/storage/local/content/local:import/noble.qcow2")
            .await;
        assert_eq!(del.status, 200, "{}", del.body);
        s.server.shutdown().await;
    }
}

#[tokio::test]
async fn an_import_of_a_missing_file_fails_the_create_task_and_leaves_no_vm() {
    let s = sim(PveVersion::V8_4).await;
    let create = upid_of(
        &s,
        "/nodes/pve1/qemu",
        json!({"vmid": 600, "name": "gone", "scsi0": "local-lvm:0,import-from=local:import/gone.qcow2"}),
    )
    .await;
    assert_eq!(
        s.wait_task(&create).await,
        "unable to create VM 600 - failed to stat '/var/lib/vz/import/gone.qcow2'"
    );
    assert!(s.server.state().vm(600).is_none());
    s.server.shutdown().await;
}
