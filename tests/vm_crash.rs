//! Crash safety of the ProxmoxVirtualMachine controller against pve-sim: one VM's whole life —
//! created, running with its guest's address, deleted — with the controller killed between any
//! two of its Proxmox calls (pve-sim's request gate holds request `k + 1`, the controller is
//! aborted, the held request is discarded so it never reaches Proxmox), then restarted. Each run
//! must end with exactly one VM while the object lives (one clone, one ISO upload) and nothing —
//! no VM, no ISO, no task — once it is deleted. The sweep runs `k = 1, 2, …` until a run
//! finishes before the gate closes, so every position of the run is covered.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod vm_support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use capmox_api::vm::VmPhase;
use serde_json::json;
use vm_support::*;

const CLONE: &str = "POST /nodes/{node}/qemu/{vmid}/clone";
const UPLOAD: &str = "POST /nodes/{node}/storage/{storage}/upload";

fn spec() -> serde_json::Value {
    json!({
        "templateID": 100, "sourceNode": "pve1", "memoryMiB": 2048,
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0",
            "ipv4Addresses": ["10.20.0.5/24"], "gateway": "10.20.0.1"}]}
    })
}

/// Fast timings, with a long safety-net resync: an idle VM makes no Proxmox call while a gate
/// position is being counted.
fn crash_settings() -> capmox::vm::Settings {
    capmox::vm::Settings {
        task_poll_initial: Duration::from_millis(10),
        task_poll_max: Duration::from_millis(100),
        guest_poll: Duration::from_millis(20),
        resync: Duration::from_secs(30),
        ..fast_settings()
    }
}

async fn running(h: &Harness, name: &str) -> bool {
    h.pvms().get_opt(name).await.unwrap().is_some_and(|p| {
        let s = p.status.unwrap_or_default();
        s.phase == Some(VmPhase::Running) && s.ip_addresses.is_some_and(|i| !i.is_empty())
    })
}

async fn gone(h: &Harness, name: &str) -> bool {
    h.pvms().get_opt(name).await.unwrap().is_none()
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

/// Waits until a request is blocked at the gate (`true`) or `done` holds with nothing blocked
/// (`false`).
async fn blocked_or<F, Fut>(h: &Harness, what: &str, mut done: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let st = h.sim.state();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if st.blocked_requests() > 0 {
            return true;
        }
        if done().await {
            return st.blocked_requests() > 0;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for a blocked request or {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Crashes the controller while a request waits at the gate, makes sure that request never
/// reaches Proxmox, and restarts the controller.
async fn crash_and_restart(h: &mut Harness) {
    let st = h.sim.state();
    h.kill().await;
    st.discard_blocked();
    st.open_gate();
    h.start_controller();
}

fn vms_named(h: &Harness, name: &str) -> Vec<u32> {
    h.sim.state().with(|c| {
        c.vms
            .values()
            .filter(|v| !v.is_template() && v.config.get("name").map(String::as_str) == Some(name))
            .map(|v| v.vmid)
            .collect()
    })
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, key: &str) -> u64 {
    after.get(key).copied().unwrap_or(0) - before.get(key).copied().unwrap_or(0)
}

/// Everything is gone: no VM, no file volume, no task running.
fn nothing_left(h: &Harness) -> bool {
    let st = h.sim.state();
    st.non_template_vmids().is_empty()
        && st.file_volumes().iter().all(|v| v.content != "iso")
        && st.running_tasks() == 0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_vm_survives_a_crash_between_any_two_proxmox_calls() {
    let mut h = Harness::start_with(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    // Baseline: the Proxmox requests of one VM's whole life (the controller serves only it).
    let before = st.request_total();
    h.create("base", spec()).await;
    wait_true(60, "base running", || running(&h, "base")).await;
    let created = st.request_total() - before;
    h.pvms().delete("base", &Default::default()).await.unwrap();
    wait_true(60, "base gone", || gone(&h, "base")).await;
    wait_true(30, "nothing left after base", || async { nothing_left(&h) }).await;
    let baseline = st.request_total() - before;
    eprintln!("baseline: {created} Proxmox requests to Running, {baseline} for the whole life");

    let mut k = 0;
    loop {
        k += 1;
        assert!(k <= 3 * baseline + 20, "the sweep does not end (k = {k})");
        let name = format!("v{k}");
        let what = format!("crash at {k}");
        let counts = st.request_counts();
        st.gate_after(k);
        h.create(&name, spec()).await;
        let mut crashed = blocked_or(&h, "running", || running(&h, &name)).await;
        if crashed {
            crash_and_restart(&mut h).await;
        }
        wait_true(60, &format!("{name} running ({what})"), || running(&h, &name)).await;
        let vmid = u32::try_from(h.pvms().get(&name).await.unwrap().status.unwrap().vmid.unwrap()).unwrap();
        assert_eq!(
            vms_named(&h, &name),
            [vmid],
            "{what}: exactly one VM, at status.vmid"
        );
        assert_eq!(st.non_template_vmids(), [vmid], "{what}: no other VM");
        let after = st.request_counts();
        assert_eq!(delta(&counts, &after, CLONE), 1, "{what}: one clone");
        assert_eq!(delta(&counts, &after, UPLOAD), 1, "{what}: one upload");
        h.pvms().delete(&name, &Default::default()).await.unwrap();
        if !crashed {
            crashed = blocked_or(&h, "gone", || gone(&h, &name)).await;
            if crashed {
                crash_and_restart(&mut h).await;
            } else {
                st.open_gate();
            }
        }
        wait_true(60, &format!("{name} gone ({what})"), || gone(&h, &name)).await;
        wait_true(30, &format!("nothing left ({what})"), || async {
            nothing_left(&h)
        })
        .await;
        if !crashed {
            break;
        }
    }
    eprintln!("VM crash sweep: covered gate positions 1..={k} (baseline {baseline})");
    assert!(k >= 10, "the sweep covered only {k} positions");
    h.stop().await;
}
