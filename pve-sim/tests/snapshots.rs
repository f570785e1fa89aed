//! Snapshots as PVE takes them (`PVE::AbstractConfig::snapshot_create`, `snapshot_rollback`,
//! `snapshot_delete`; `PVE::API2::Qemu`'s snapshot, rollback and clone endpoints): the VM locked
//! while the task runs, the snapshot listed with `snapstate` meanwhile, the tree of parents (the
//! current state's parent is the config's `parent`), the memory of a running VM only, rollback
//! with memory (resumed) and without (stopped, or started with `start`), deletion relinking the
//! tree, and clones of a snapshot copying the VM as the snapshot has it.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use pve_sim::PowerState;
use serde_json::json;

const VM: &str = "/nodes/pve1/qemu/190";

async fn start(sim: &common::Sim) {
    assert_eq!(
        sim.post_task(&format!("{VM}/status/start"), json!({})).await,
        "OK"
    );
}

fn upid(r: &common::Resp) -> String {
    assert_eq!(r.status, 200, "{}", r.body);
    r.json["data"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_snapshot_locks_the_vm_and_builds_a_tree() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    sim.clone_vm(190, "snap").await;
    start(&sim).await;
    st.hold_tasks();
    let first = upid(
        &sim.post(
            &format!("{VM}/snapshot"),
            json!({"snapname": "s1", "vmstate": 1, "description": "one"}),
        )
        .await,
    );
    // While the task runs: locked, listed with its snapstate.
    assert_eq!(
        st.vm(190).unwrap().config.get("lock").map(String::as_str),
        Some("snapshot")
    );
    let list = sim.get(&format!("{VM}/snapshot")).await.json["data"].clone();
    assert_eq!(list[0]["snapstate"], "prepare");
    let second = upid(
        &sim.post(&format!("{VM}/snapshot"), json!({"snapname": "s2"}))
            .await,
    );
    st.release_tasks();
    assert_eq!(sim.wait_task(&first).await, "OK");
    assert_eq!(sim.wait_task(&second).await, "VM is locked (snapshot)");
    let list = sim.get(&format!("{VM}/snapshot")).await.json["data"].clone();
    assert_eq!(list.as_array().unwrap().len(), 2, "{list}");
    assert_eq!(
        (list[0]["vmstate"].clone(), list[0]["description"].clone()),
        (json!(1), json!("one"))
    );
    assert!(list[0].get("snapstate").is_none() && list[0].get("parent").is_none());
    assert_eq!(
        (list[1]["name"].clone(), list[1]["parent"].clone()),
        (json!("current"), json!("s1"))
    );
    assert!(!st.vm(190).unwrap().config.contains_key("lock"));
    // On top of s1; a stopped VM's memory is not saved (PVE ignores vmstate then).
    assert_eq!(
        sim.post_task(&format!("{VM}/snapshot"), json!({"snapname": "s2"}))
            .await,
        "OK"
    );
    assert_eq!(sim.post_task(&format!("{VM}/status/stop"), json!({})).await, "OK");
    assert_eq!(
        sim.post_task(&format!("{VM}/snapshot"), json!({"snapname": "s3", "vmstate": 1}))
            .await,
        "OK"
    );
    let list = sim.get(&format!("{VM}/snapshot")).await.json["data"].clone();
    assert_eq!(list[1]["parent"], "s1");
    assert_eq!(
        (list[2]["parent"].clone(), list[2]["vmstate"].clone()),
        (json!("s2"), json!(0))
    );
    assert_eq!(list[3]["parent"], "s3");
    let r = sim
        .post(&format!("{VM}/snapshot"), json!({"snapname": "current"}))
        .await;
    assert_eq!(
        r.json["message"],
        "unable to use snapshot name 'current' (reserved name)\n"
    );
    // Deleting s2 relinks s3 to s1.
    let del = upid(&sim.delete(&format!("{VM}/snapshot/s2")).await);
    assert_eq!(sim.wait_task(&del).await, "OK");
    let list = sim.get(&format!("{VM}/snapshot")).await.json["data"].clone();
    assert_eq!(
        (list[1]["name"].clone(), list[1]["parent"].clone()),
        (json!("s3"), json!("s1"))
    );
}

#[tokio::test]
async fn rollback_restores_config_disks_and_memory() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    sim.clone_vm(190, "snap").await;
    start(&sim).await;
    assert_eq!(
        sim.post_task(
            &format!("{VM}/snapshot"),
            json!({"snapname": "ram", "vmstate": 1})
        )
        .await,
        "OK"
    );
    assert_eq!(
        sim.post_task(&format!("{VM}/snapshot"), json!({"snapname": "disk"}))
            .await,
        "OK"
    );
    let before = st.vm(190).unwrap().config.get("memory").cloned();
    st.set_config(190, "memory", "8192");
    st.set_config(190, "description", "kept");
    // With memory: resumed, config back, parent set, description kept.
    assert_eq!(
        sim.post_task(&format!("{VM}/snapshot/ram/rollback"), json!({}))
            .await,
        "OK"
    );
    let vm = st.vm(190).unwrap();
    assert_eq!(vm.power, PowerState::Running);
    assert_eq!(vm.config.get("memory"), before.as_ref());
    assert_eq!(vm.config.get("parent").map(String::as_str), Some("ram"));
    assert_eq!(vm.config.get("description").map(String::as_str), Some("kept"));
    assert!(!vm.config.contains_key("lock"));
    // Without memory: stopped, unless `start`.
    assert_eq!(
        sim.post_task(&format!("{VM}/snapshot/disk/rollback"), json!({}))
            .await,
        "OK"
    );
    assert_eq!(st.vm(190).unwrap().power, PowerState::Stopped);
    assert_eq!(
        sim.post_task(&format!("{VM}/snapshot/disk/rollback"), json!({"start": 1}))
            .await,
        "OK"
    );
    assert_eq!(st.vm(190).unwrap().power, PowerState::Running);
    // While it runs the VM is locked; an unknown snapshot fails the task.
    st.hold_tasks();
    let r = upid(&sim.post(&format!("{VM}/snapshot/disk/rollback"), json!({})).await);
    assert_eq!(
        st.vm(190).unwrap().config.get("lock").map(String::as_str),
        Some("rollback")
    );
    assert_eq!(st.vm(190).unwrap().power, PowerState::Stopped, "stopped first");
    st.release_tasks();
    assert_eq!(sim.wait_task(&r).await, "OK");
    assert_eq!(
        sim.post_task(&format!("{VM}/snapshot/nope/rollback"), json!({}))
            .await,
        "snapshot 'nope' does not exist"
    );
}

#[tokio::test]
async fn a_clone_of_a_snapshot_copies_the_vm_as_it_was() {
    let sim = common::start_default().await;
    let st = sim.server.state();
    sim.clone_vm(190, "snap").await;
    assert_eq!(
        sim.post_task(&format!("{VM}/snapshot"), json!({"snapname": "s1"}))
            .await,
        "OK"
    );
    st.set_config(190, "memory", "8192");
    let st_ = sim
        .post_task(
            &format!("{VM}/clone"),
            json!({"newid": 191, "name": "past", "full": 1, "snapname": "s1"}),
        )
        .await;
    assert_eq!(st_, "OK");
    let past = st.vm(191).unwrap();
    assert_ne!(past.config.get("memory").map(String::as_str), Some("8192"));
    assert!(!past.config.contains_key("parent"), "a clone has no snapshots");
    // Linked clones need a template.
    let r = sim
        .post(&format!("{VM}/clone"), json!({"newid": 192, "full": 0}))
        .await;
    assert_eq!(r.status, 500);
    assert!(
        r.json["message"]
            .as_str()
            .unwrap()
            .starts_with("Linked clone feature is not supported")
    );
}
