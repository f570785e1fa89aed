//! Crash safety of the snapshot, restore and clone controllers (with the ProxmoxVirtualMachine
//! controller they work with) against pve-sim: one snapshot of a running VM, a restore to it, a
//! full clone of the VM, then the clone's and the snapshot's deletion — with the controllers
//! killed between any two of their Proxmox calls (pve-sim's request gate holds request `k + 1`,
//! the controllers are aborted, the held request is discarded so it never reaches Proxmox), then
//! restarted. Each run must end with exactly one result of each step — one Proxmox snapshot,
//! one rollback, one cloned VM — and nothing left once the objects are deleted. The sweep runs
//! `k = 1, 2, …` until a run finishes before the gate closes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod vm_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capmox_api::vm::{OperationPhase, ProxmoxVMClone, ProxmoxVMRestore, ProxmoxVMSnapshot, VmPhase};
use serde_json::json;
use vm_support::*;

const CLONE: &str = "POST /nodes/{node}/qemu/{vmid}/clone";
const SNAPSHOT: &str = "POST /nodes/{node}/qemu/{vmid}/snapshot";
const ROLLBACK: &str = "POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback";

fn crash_settings() -> capmox::vm::Settings {
    capmox::vm::Settings {
        task_poll_initial: Duration::from_millis(10),
        task_poll_max: Duration::from_millis(100),
        guest_poll: Duration::from_millis(20),
        resync: Duration::from_secs(30),
        ..fast_settings()
    }
}

/// Polls `f` every 10 ms until it holds, failing after `secs` seconds.
async fn wait_true<F, Fut>(secs: u64, what: &str, mut f: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !f().await {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// What a step waits for.
enum Done<'a> {
    Snapshot(&'a str),
    Restore(&'a str),
    Clone(&'a str, &'a str),
    Gone(&'a str, &'a str),
}

async fn done(h: &Harness, d: &Done<'_>) -> bool {
    match d {
        Done::Snapshot(n) => snap_done(h, n).await,
        Done::Restore(n) => restore_done(h, n).await,
        Done::Clone(n, t) => clone_done(h, n, t).await,
        Done::Gone(s, t) => gone(h, s, t).await,
    }
}

/// Waits for `d`, crashing and restarting the controllers once if a request is held at the gate
/// first (unless `crashed` already); returns whether it crashed.
async fn step(h: &mut Harness, crashed: bool, what: &str, d: Done<'_>) -> bool {
    let st = h.sim.state();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if !crashed && st.blocked_requests() > 0 {
            h.kill().await;
            st.discard_blocked();
            st.open_gate();
            h.start_controller();
            let h = &*h;
            wait_true(60, what, || done(h, &d)).await;
            return true;
        }
        if done(h, &d).await {
            return crashed;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, key: &str) -> u64 {
    after.get(key).copied().unwrap_or(0) - before.get(key).copied().unwrap_or(0)
}

async fn snap_done(h: &Harness, name: &str) -> bool {
    h.snaps()
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|s| s.status)
        .is_some_and(|s| s.phase == Some(OperationPhase::Succeeded))
}

async fn restore_done(h: &Harness, name: &str) -> bool {
    h.restores()
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|s| s.status)
        .is_some_and(|s| s.complete == Some(true))
}

async fn clone_done(h: &Harness, name: &str, target: &str) -> bool {
    let done = h
        .clones()
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|s| s.status)
        .is_some_and(|s| s.phase == Some(OperationPhase::Succeeded));
    done && h
        .pvms()
        .get_opt(target)
        .await
        .unwrap()
        .and_then(|p| p.status)
        .is_some_and(|s| s.phase == Some(VmPhase::Running))
}

async fn gone(h: &Harness, snap: &str, target: &str) -> bool {
    h.snaps().get_opt(snap).await.unwrap().is_none() && h.pvms().get_opt(target).await.unwrap().is_none()
}

/// One run: snapshot, restore, clone, then the clone and the snapshot deleted. Returns whether
/// the controllers were crashed in it.
async fn run(h: &mut Harness, base: u32, k: u64) -> bool {
    let st = h.sim.state();
    let (snap, restore, clone, target) = (format!("s{k}"), format!("r{k}"), format!("c{k}"), format!("t{k}"));
    let what = |step: &str| format!("{step} (crash at {k})");
    let counts = st.request_counts();
    h.create_op::<ProxmoxVMSnapshot>("ProxmoxVMSnapshot", &snap, json!({"source": {"name": "base"}}))
        .await
        .unwrap();
    let mut crashed = step(h, false, &what("snapshot"), Done::Snapshot(&snap)).await;
    let pname = h
        .snaps()
        .get(&snap)
        .await
        .unwrap()
        .status
        .unwrap()
        .snapshot_name
        .unwrap();
    assert_eq!(
        h.proxmox_snapshots(base),
        [pname],
        "{}: one snapshot",
        what("snapshot")
    );
    h.create_op::<ProxmoxVMRestore>(
        "ProxmoxVMRestore",
        &restore,
        json!({"target": {"name": "base"}, "snapshotName": snap}),
    )
    .await
    .unwrap();
    crashed = step(h, crashed, &what("restore"), Done::Restore(&restore)).await;
    h.create_op::<ProxmoxVMClone>(
        "ProxmoxVMClone",
        &clone,
        json!({"source": {"name": "base"}, "target": {"name": target}}),
    )
    .await
    .unwrap();
    crashed = step(h, crashed, &what("clone"), Done::Clone(&clone, &target)).await;
    let after = st.request_counts();
    assert_eq!(
        delta(&counts, &after, SNAPSHOT),
        1,
        "{}: one snapshot request",
        what("snapshot")
    );
    assert_eq!(
        delta(&counts, &after, ROLLBACK),
        1,
        "{}: one rollback",
        what("restore")
    );
    assert_eq!(delta(&counts, &after, CLONE), 1, "{}: one clone", what("clone"));
    assert_eq!(
        st.non_template_vmids().len(),
        2,
        "{}: the VM and its clone",
        what("clone")
    );
    h.pvms().delete(&target, &Default::default()).await.unwrap();
    h.snaps().delete(&snap, &Default::default()).await.unwrap();
    h.clones().delete(&clone, &Default::default()).await.unwrap();
    h.restores().delete(&restore, &Default::default()).await.unwrap();
    crashed = step(h, crashed, &what("deletion"), Done::Gone(&snap, &target)).await;
    if !crashed {
        st.open_gate();
    }
    wait_true(30, &what("nothing left"), || async {
        st.non_template_vmids() == [base] && h.proxmox_snapshots(base).is_empty() && st.running_tasks() == 0
    })
    .await;
    crashed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshots_restores_and_clones_survive_a_crash_between_any_two_proxmox_calls() {
    let mut h = Harness::start_ops(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    h.create(
        "base",
        json!({"templateID": 100, "sourceNode": "pve1", "memoryMiB": 2048,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "ipv4Addresses": ["10.50.0.5/24"], "gateway": "10.50.0.1"}]}}),
    )
    .await;
    let p = h.wait_phase("base", VmPhase::Running, 60).await;
    let base = u32::try_from(p.status.unwrap().vmid.unwrap()).unwrap();
    let before = st.request_total();
    assert!(!run(&mut h, base, 0).await);
    let baseline = st.request_total() - before;
    eprintln!("baseline: {baseline} Proxmox requests for a snapshot, a restore, a clone and their deletion");
    let mut k = 0;
    loop {
        k += 1;
        assert!(k <= 3 * baseline + 20, "the sweep does not end (k = {k})");
        st.gate_after(k);
        if !run(&mut h, base, k).await {
            break;
        }
    }
    eprintln!("snapshot/restore/clone crash sweep: covered gate positions 1..={k} (baseline {baseline})");
    assert!(k >= 10, "the sweep covered only {k} positions");
    h.stop().await;
}
