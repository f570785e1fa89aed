//! PVE's boot rules: only the devices of a VM's effective boot order are bootable (`order=`, or
//! the legacy letters with `bootdisk`), and a VM whose order reaches no disk with an OS runs but
//! its guest never comes up (no guest agent, no cloud-init).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use serde_json::json;

async fn start(sim: &common::Sim, vmid: u32) {
    let st = sim
        .post_task(&format!("/nodes/pve1/qemu/{vmid}/status/start"), json!({}))
        .await;
    assert_eq!(st, "OK");
}

async fn stop(sim: &common::Sim, vmid: u32) {
    let st = sim
        .post_task(&format!("/nodes/pve1/qemu/{vmid}/status/stop"), json!({}))
        .await;
    assert_eq!(st, "OK");
}

/// The agent's answer to a ping: `Ok` or PVE's error message.
async fn agent(sim: &common::Sim, vmid: u32) -> Result<(), String> {
    let r = sim
        .post(&format!("/nodes/pve1/qemu/{vmid}/agent/ping"), json!({}))
        .await;
    if r.status == 200 {
        Ok(())
    } else {
        Err(r.json["message"].as_str().unwrap_or(&r.body).trim().to_owned())
    }
}

async fn set(sim: &common::Sim, vmid: u32, body: serde_json::Value) {
    let r = sim.put(&format!("/nodes/pve1/qemu/{vmid}/config"), body).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

fn order(sim: &common::Sim, vmid: u32) -> Vec<String> {
    sim.server
        .state()
        .with(|c| c.vms.get(&vmid).unwrap().effective_boot_order())
}

#[tokio::test]
async fn only_a_boot_order_that_reaches_an_os_disk_brings_the_guest_up() {
    let sim = common::start_default().await;
    // A template without a `boot` key (and without `bootdisk`): PVE's legacy default `cdn`
    // boots no disk, only the network.
    sim.server.state().with(|c| {
        c.vms.get_mut(&100).unwrap().config.remove("boot");
    });
    sim.clone_vm(201, "no-boot-key").await;
    assert_eq!(order(&sim, 201), ["net0"]);
    start(&sim, 201).await;
    assert_eq!(
        agent(&sim, 201).await,
        Err("QEMU guest agent is not running".into())
    );
    let vm = sim.get("/nodes/pve1/qemu/201/status/current").await;
    assert_eq!(vm.json["data"]["status"], "running", "the VM itself runs");

    // What capmox writes for such a template: the seed ISO as the only boot device.
    stop(&sim, 201).await;
    set(
        &sim,
        201,
        json!({"ide0": "none,media=cdrom", "boot": "order=ide0"}),
    )
    .await;
    start(&sim, 201).await;
    assert_eq!(
        agent(&sim, 201).await,
        Err("QEMU guest agent is not running".into())
    );

    // The cloned disk first: the guest comes up.
    stop(&sim, 201).await;
    set(&sim, 201, json!({"boot": "order=scsi0;net0"})).await;
    start(&sim, 201).await;
    assert_eq!(agent(&sim, 201).await, Ok(()));

    // Legacy letters: `c` boots the `bootdisk` only.
    sim.clone_vm(202, "legacy").await;
    set(
        &sim,
        202,
        json!({"boot": "cdn", "bootdisk": "scsi0", "ide0": "none,media=cdrom"}),
    )
    .await;
    assert_eq!(order(&sim, 202), ["scsi0", "ide0", "net0"]);
    start(&sim, 202).await;
    assert_eq!(agent(&sim, 202).await, Ok(()));
    stop(&sim, 202).await;
    set(&sim, 202, json!({"boot": "dn"})).await;
    assert_eq!(order(&sim, 202), ["ide0", "net0"]);
    start(&sim, 202).await;
    assert_eq!(
        agent(&sim, 202).await,
        Err("QEMU guest agent is not running".into())
    );

    // A disk added after the clone is blank: booting only it brings nothing up.
    sim.clone_vm(203, "blank").await;
    set(
        &sim,
        203,
        json!({"scsi1": "local-lvm:4", "boot": "order=scsi1;net0"}),
    )
    .await;
    start(&sim, 203).await;
    assert_eq!(
        agent(&sim, 203).await,
        Err("QEMU guest agent is not running".into())
    );
    sim.server.shutdown().await;
}
