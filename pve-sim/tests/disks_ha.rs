//! New data disks on a config write (allocated before the call returns, a replaced disk kept as
//! `unusedN`, freed with the VM) and the HA resource API (`PUT`, groups).

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::json;

#[tokio::test]
async fn config_post_allocates_disks_before_answering_and_destroy_frees_them() {
    let sim = common::start_default().await;
    sim.clone_vm(180, "disks").await;
    let before = sim.get("/nodes/pve1/qemu/180/config").await.json["data"].clone();
    sim.server.state().hold_tasks();
    let r = sim
        .post(
            "/nodes/pve1/qemu/180/config",
            json!({"scsi1": "local-lvm:10,discard=on,ssd=1", "virtio1": "shared:2,format=qcow2", "cores": 4}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    // The task has not run: the disks already exist (pending), the digest changed.
    let cfg = sim.get("/nodes/pve1/qemu/180/config").await.json["data"].clone();
    assert_eq!(cfg["scsi1"], "local-lvm:vm-180-disk-1,discard=on,ssd=1,size=10G");
    assert_eq!(cfg["virtio1"], "shared:vm-180-disk-2,format=qcow2,size=2G");
    assert_ne!(cfg["digest"], before["digest"]);
    assert_eq!(cfg["cores"], before["cores"], "other options wait for the task");
    let content = sim.get("/nodes/pve1/storage/local-lvm/content?vmid=180").await;
    let vols: Vec<&str> = content.json["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|v| v["volid"].as_str())
        .collect();
    assert_eq!(vols, ["local-lvm:vm-180-disk-0", "local-lvm:vm-180-disk-1"]);
    sim.server.state().release_tasks();
    assert_eq!(sim.wait_task(r.json["data"].as_str().unwrap()).await, "OK");
    let cfg = sim.get("/nodes/pve1/qemu/180/config").await.json["data"].clone();
    assert_eq!(cfg["cores"], json!(4));
    // Writing the slot again allocates a second volume; PVE keeps the first as unused0.
    let st = sim
        .post_task("/nodes/pve1/qemu/180/config", json!({"scsi1": "local-lvm:10"}))
        .await;
    assert_eq!(st, "OK");
    let cfg = sim.get("/nodes/pve1/qemu/180/config").await.json["data"].clone();
    assert_eq!(cfg["unused0"], "local-lvm:vm-180-disk-1");
    assert_eq!(cfg["scsi1"], "local-lvm:vm-180-disk-3,size=10G");
    // Errors of the allocation are synchronous.
    let r = sim
        .post("/nodes/pve1/qemu/180/config", json!({"scsi2": "nope:1"}))
        .await;
    assert_eq!(r.json["message"], "storage 'nope' does not exist\n");
    let r = sim
        .post("/nodes/pve1/qemu/180/config", json!({"scsi2": "local:1"}))
        .await;
    assert_eq!(r.status, 400);
    let r = sim
        .post(
            "/nodes/pve1/qemu/180/config",
            json!({"virtio2": "local-lvm:1,ssd=1"}),
        )
        .await;
    assert_eq!(r.status, 400, "{}", r.body);
    // Destroying the VM frees every volume, unused ones included.
    let upid = sim
        .delete("/nodes/pve1/qemu/180?purge=1&destroy-unreferenced-disks=1")
        .await;
    assert_eq!(sim.wait_task(upid.json["data"].as_str().unwrap()).await, "OK");
    for storage in ["local-lvm", "shared"] {
        let content = sim
            .get(&format!("/nodes/pve1/storage/{storage}/content?vmid=180"))
            .await;
        assert_eq!(content.json["data"], json!([]), "{storage}");
    }
}

#[tokio::test]
async fn ha_resources_update_and_check_their_group() {
    let sim = common::start_default().await;
    sim.clone_vm(181, "ha").await;
    assert_eq!(sim.get("/cluster/ha/groups").await.json["data"], json!([]));
    // PVE 8.4 does not check the group on create (pve-ha-manager 4.0.7 `API2/HA/Resources.pm`
    // checks it on update only); the list then reports the missing group.
    let r = sim
        .post("/cluster/ha/resources", json!({"sid": "vm:181", "group": "prod"}))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let list = sim.get("/cluster/ha/resources").await.json["data"].clone();
    assert_eq!(
        list[0]["errors"]["group"], "group 'prod' does not exist",
        "{list}"
    );
    assert_eq!(sim.delete("/cluster/ha/resources/vm:181").await.status, 200);
    sim.server.state().add_ha_group("prod");
    assert_eq!(
        sim.get("/cluster/ha/groups").await.json["data"][0]["group"],
        "prod"
    );
    let r = sim
        .post(
            "/cluster/ha/resources",
            json!({"sid": "vm:181", "group": "prod", "max_restart": 2}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = sim.post("/cluster/ha/resources", json!({"sid": "181"})).await;
    assert_eq!(
        r.json["message"],
        "create resource failed: resource ID 'vm:181' already defined\n"
    );
    let r = sim
        .put(
            "/cluster/ha/resources/vm:181",
            json!({"state": "ignored", "max_relocate": 3, "delete": "group"}),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let got = sim.get("/cluster/ha/resources/vm:181").await.json["data"].clone();
    assert_eq!(
        (
            got["state"].clone(),
            got["max_restart"].clone(),
            got["max_relocate"].clone()
        ),
        (json!("ignored"), json!(2), json!(3))
    );
    assert!(got.get("group").is_none(), "{got}");
    let r = sim
        .put("/cluster/ha/resources/vm:181", json!({"group": "nope"}))
        .await;
    assert_eq!(r.json["message"], "HA group 'nope' does not exist\n");
    let r = sim
        .put("/cluster/ha/resources/vm:999", json!({"state": "started"}))
        .await;
    assert_eq!(
        r.json["message"],
        "update resources config failed: no such resource 'vm:999'\n"
    );
    let r = sim
        .put("/cluster/ha/resources/vm:181", json!({"state": "bogus"}))
        .await;
    assert_eq!(r.status, 400);
    assert_eq!(sim.delete("/cluster/ha/resources/vm:181").await.status, 200);
    assert!(sim.server.state().ha_resources().is_empty());
}
