//! Crash safety of the ProxmoxMachine controller against pve-sim: the controller is killed between
//! every pair of consecutive Proxmox calls of a provisioning and of a deletion (pve-sim's request
//! gate holds request `k + 1`, the controller is aborted, the held request is discarded so it
//! never reaches Proxmox), restarted, and must finish the job without a second clone, a leaked
//! VM/ISO/claim, or a repeated stop/destroy. Further tests pin the delete flow's ordering (stop
//! awaited before destroy, `purge=1`), HA-managed VMs, no duplicate tasks while one is in flight,
//! VMs that vanished behind the controller's back, deletion during a running (or failing) clone,
//! a crash during the ISO import, and failed tasks being retried (once, after the retry delay).
//!
//! A sweep runs `k = 1, 2, …` until one run finishes before the gate closes, so every position of
//! that run is covered (the run length varies by a few task polls with timing).
//!
//! The sweeps run only the machine controller once the cluster is ready (the ProxmoxCluster
//! controller's version probes and inventory refreshes would otherwise interleave with the
//! machine's calls and shift the gate positions); one machine lives at a time so that gate
//! position `k` is exactly "after the machine's k-th Proxmox request".
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmox::context::{Context, ControllerSettings};
use capmox::credentials::ProxmoxClients;
use capmox::machine::MachineSettings;
use capmox_api::consts::PAUSED_ANNOTATION;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use machine_support::*;
use serde_json::json;

const CLONE: &str = "POST /nodes/{node}/qemu/{vmid}/clone";
const UPLOAD: &str = "POST /nodes/{node}/storage/{storage}/upload";
const STOP: &str = "POST /nodes/{node}/qemu/{vmid}/status/stop";
const RESOURCES: &str = "GET /cluster/resources";
const DESTROY: &str = "DELETE /nodes/{node}/qemu/{vmid}";

/// Fast timings, but a long safety-net resync so idle machines make no Proxmox calls while a
/// gate position is being counted.
/// Waits until pve-sim answered `n` more task-status polls (the controller looked at its task again).
async fn wait_task_polls(st: &pve_sim::SimState, n: usize, what: &str) {
    for _ in 0..n {
        let polls = st.request_count(TASK_STATUS);
        wait_true(30, what, || async { st.request_count(TASK_STATUS) > polls }).await;
    }
}

fn crash_settings() -> MachineSettings {
    MachineSettings {
        task_poll_initial: Duration::from_millis(10),
        task_poll_max: Duration::from_millis(100),
        guest_poll: Duration::from_millis(20),
        resync: Duration::from_secs(30),
        ..fast_machine_settings()
    }
}

/// The machine controller alone, with a fresh context per start (as after a process restart).
struct MachineController {
    task: Option<tokio::task::JoinHandle<()>>,
    settings: MachineSettings,
}

impl MachineController {
    fn new(settings: MachineSettings) -> Self {
        Self { task: None, settings }
    }

    fn start(&mut self, h: &Harness) {
        if self.task.is_some() {
            return;
        }
        let cfg = capmox::proxmox::ClientConfig::new(
            h.sim.url(),
            capmox::proxmox::Credentials::token(h.sim.token_id(), h.sim.token_secret()),
        )
        .with_ca_pem(h.sim.ca_pem().unwrap());
        let global = capmox::proxmox::Client::with_observer(cfg, h.metrics.proxmox_observer()).unwrap();
        let ctx = Arc::new(Context::new(
            h.client.clone(),
            h.metrics.clone(),
            ControllerSettings {
                namespace: None,
                concurrency: 4,
                cluster: Default::default(),
                machine: self.settings.clone(),
                ..ControllerSettings::default()
            },
            Arc::new(ProxmoxClients::new(Some(global), h.metrics.proxmox_observer())),
        ));
        self.task = Some(tokio::spawn(capmox::controllers::machine::run(
            ctx,
            std::future::pending::<()>(),
        )));
    }

    /// Aborts the controller (a crash: nothing is shut down gracefully).
    async fn kill(&mut self) {
        if let Some(t) = self.task.take() {
            t.abort();
            let _ = t.await;
        }
    }
}

/// Starts the harness, creates cluster `c1`, waits until its infrastructure is provisioned and
/// swaps the harness's controllers for the machine controller alone.
async fn setup(sim: pve_sim::SimConfig, settings: MachineSettings) -> (Harness, MachineController) {
    let mut h = Harness::start_with(sim, settings.clone()).await;
    h.create_cluster("c1", json!({})).await;
    let clusters = h.clusters();
    wait_for(60, "cluster infrastructure provisioned", || {
        let clusters = clusters.clone();
        async move {
            let c = clusters.get("c1").await.unwrap();
            let v = serde_json::to_value(&c).unwrap();
            (v.pointer("/status/initialization/infrastructureProvisioned") == Some(&json!(true)))
                .then_some(())
        }
    })
    .await;
    h.kill_controllers().await;
    let mut mc = MachineController::new(settings);
    mc.start(&h);
    (h, mc)
}

/// Non-template VMs whose name is `name`.
fn vms_named(h: &Harness, name: &str) -> Vec<u32> {
    h.sim.state().with(|c| {
        c.vms
            .values()
            .filter(|v| !v.is_template() && v.config.get("name").map(String::as_str) == Some(name))
            .map(|v| v.vmid)
            .collect()
    })
}

/// ISO volids of the bootstrap ISO of `vmid` anywhere.
fn isos_of(h: &Harness, vmid: u32) -> Vec<String> {
    let file = format!("user-data-{vmid}.iso");
    h.sim
        .state()
        .file_volumes()
        .into_iter()
        .filter(|v| v.volid.ends_with(&file))
        .map(|v| v.volid)
        .collect()
}

fn recorded_vmid(pm: &capmox_api::v1alpha2::ProxmoxMachine) -> Option<u32> {
    pm.spec.virtual_machine_id.and_then(|v| u32::try_from(v).ok())
}

/// The whole provisioning flow is over: provisioned, the node joined, the bootstrap ISO detached
/// and deleted and the VM untagged.
async fn provisioning_done(h: &Harness, name: &str) -> bool {
    let Some(pm) = h.pms().get_opt(name).await.unwrap() else {
        return false;
    };
    let Some(vmid) = recorded_vmid(&pm).filter(|_| pm.is_provisioned()) else {
        return false;
    };
    let joined = h
        .machines()
        .get_opt(name)
        .await
        .unwrap()
        .and_then(|m| m.status)
        .and_then(|s| s.node_ref)
        .is_some();
    let Some(vm) = h.sim.state().vm(vmid) else {
        return false;
    };
    let tags = vm.config.get("tags").cloned().unwrap_or_default();
    let ide0 = vm.config.get("ide0").cloned().unwrap_or_default();
    joined && !tags.contains("cloud-init") && !ide0.contains("user-data-") && isos_of(h, vmid).is_empty()
}

/// Where a machine's provisioning stands (for the message of a timed-out wait): the
/// ProxmoxMachine's conditions, the Machine's nodeRef, the VM's power, tags and ISO drive.
async fn provisioning_state(h: &Harness, name: &str) -> String {
    let pm = h.pms().get_opt(name).await.ok().flatten();
    let vmid = pm.as_ref().and_then(recorded_vmid);
    let conditions = pm
        .as_ref()
        .and_then(|pm| serde_json::to_value(&pm.status).ok())
        .map(|s| s["conditions"].to_string())
        .unwrap_or_default();
    let node_ref = h
        .machines()
        .get_opt(name)
        .await
        .ok()
        .flatten()
        .and_then(|m| m.status)
        .and_then(|s| s.node_ref)
        .map(|n| n.name);
    let vm = vmid.and_then(|v| h.sim.state().vm(v)).map(|vm| {
        format!(
            "power {:?}, tags {:?}, ide0 {:?}",
            vm.power,
            vm.config.get("tags"),
            vm.config.get("ide0")
        )
    });
    let isos = vmid.map(|v| isos_of(h, v)).unwrap_or_default();
    format!(
        "{name}: vmid {vmid:?}, provisioned {:?}, conditions {conditions}, nodeRef {node_ref:?}, VM {vm:?}, ISOs {isos:?}; {}",
        pm.as_ref().map(|pm| pm.is_provisioned()),
        h.where_it_stands(name).await
    )
}

/// Waits until `name`'s whole provisioning flow is over (see [`provisioning_done`]), failing with
/// where it stands after `secs` seconds.
async fn wait_provisioning_done(h: &Harness, name: &str, secs: u64) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !provisioning_done(h, name).await {
        if Instant::now() >= deadline {
            panic!(
                "timed out waiting for {name} provisioned; {}",
                provisioning_state(h, name).await
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until a request is blocked at the gate (`true`) or `done` holds with nothing blocked
/// (`false`).
async fn blocked_or<F, Fut>(h: &Harness, secs: u64, what: &str, mut done: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let st = h.sim.state();
    let deadline = Instant::now() + Duration::from_secs(secs);
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

/// Crashes the controller while request `k + 1` waits at the gate, makes sure that request never
/// reaches Proxmox, and restarts the controller.
async fn crash_and_restart(h: &Harness, mc: &mut MachineController) {
    let st = h.sim.state();
    mc.kill().await;
    st.discard_blocked();
    st.open_gate();
    mc.start(h);
}

fn delta(before: &BTreeMap<String, u64>, after: &BTreeMap<String, u64>, key: &str) -> u64 {
    after.get(key).copied().unwrap_or(0) - before.get(key).copied().unwrap_or(0)
}

async fn wait_no_leftovers(h: &Harness, what: &str) {
    wait_true(30, what, || async {
        let (vms, isos, ipam) = h.leftovers().await;
        vms.is_empty() && isos.is_empty() && ipam == 0
    })
    .await;
}

/// Deletes the Machine (the CAPI stand-in deletes the ProxmoxMachine), waits until both are gone
/// and nothing is left behind.
async fn delete_and_wait(h: &Harness, name: &str) {
    h.machines()
        .delete(name, &kube::api::DeleteParams::default())
        .await
        .unwrap();
    wait_true(60, &format!("{name} deleted"), || gone(h, name)).await;
    wait_no_leftovers(h, &format!("{name} deleted")).await;
}

/// Polls `f` every 10 ms until it is true, failing after `secs` seconds.
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

/// Waits (polling every 10 ms) until the ProxmoxMachine satisfies `pred`.
async fn wait_pm(
    h: &Harness,
    name: &str,
    what: &str,
    pred: impl Fn(&capmox_api::v1alpha2::ProxmoxMachine) -> bool,
) -> capmox_api::v1alpha2::ProxmoxMachine {
    let api = h.pms();
    testenv::wait_for_explained(
        60,
        Duration::from_millis(10),
        &format!("{name}: {what}"),
        || {
            let api = api.clone();
            let pred = &pred;
            async move {
                let pm = api.get_opt(name).await.unwrap()?;
                pred(&pm).then_some(pm)
            }
        },
        || provisioning_state(h, name),
    )
    .await
}

fn bootstrap() -> Option<(&'static str, Option<&'static str>)> {
    Some((CLOUD_CONFIG, Some("cloud-config")))
}

/// Task latencies (ms) per task type on top of the instant profile.
fn latency(tasks: &[(&str, u64)]) -> pve_sim::LatencySpec {
    let mut lat = pve_sim::LatencySpec::default();
    for (kind, ms) in tasks {
        lat.tasks.insert((*kind).to_owned(), *ms);
    }
    lat
}

/// The VM carries everything the provisioning steps apply (no step was skipped by a crash).
fn assert_vm_configured(h: &Harness, vmid: u32, what: &str) {
    let vm = h.sim.state().vm(vmid).unwrap();
    let get = |k: &str| vm.config.get(k).cloned().unwrap_or_default();
    assert_eq!(vm.power, pve_sim::PowerState::Running, "{what}: VM running");
    assert_eq!(
        (get("sockets"), get("cores"), get("memory")),
        ("2".into(), "2".into(), "2048".into()),
        "{what}: CPU/memory"
    );
    assert!(
        get("scsi0").contains("size=20G"),
        "{what}: boot disk resized: {}",
        get("scsi0")
    );
    assert!(
        get("tags").contains("ip_net0_10.10.10."),
        "{what}: IP tag: {}",
        get("tags")
    );
    assert!(
        get("net0").contains("bridge=vmbr0"),
        "{what}: net0: {}",
        get("net0")
    );
}

/// Provisions one machine per gate position `k = 1, 2, …` and crashes the controller while
/// Proxmox request `k + 1` waits at the gate, until a provisioning finishes before the gate
/// closes: every position of that run is covered. Returns the number of positions.
async fn provisioning_sweep(tasks: &[(&str, u64)]) -> u64 {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    st.set_latency(latency(tasks));

    // Baseline: how many Proxmox requests one machine's whole provisioning takes (with the
    // machine controller alone running, every request is this machine's).
    let before = st.request_total();
    h.create_machine("c1", "base", false, bootstrap(), json!({}))
        .await;
    wait_provisioning_done(&h, "base", 60).await;
    let baseline = st.request_total() - before;
    eprintln!("baseline provisioning: {baseline} Proxmox requests");
    h.delete_machine("base", 60).await;
    wait_no_leftovers(&h, "baseline deleted").await;

    let mut k = 0;
    loop {
        k += 1;
        assert!(k <= 4 * baseline + 20, "the sweep does not end (k = {k})");
        let name = format!("p{k}");
        let what = format!("crash at {k}");
        let counts = st.request_counts();
        st.gate_after(k);
        h.create_machine("c1", &name, false, bootstrap(), json!({})).await;
        let blocked = blocked_or(&h, 60, "provisioned", || provisioning_done(&h, &name)).await;
        if blocked {
            crash_and_restart(&h, &mut mc).await;
            wait_true(60, &format!("{name} provisioned after a {what}"), || {
                provisioning_done(&h, &name)
            })
            .await;
        } else {
            st.open_gate();
        }
        let pm = h.pms().get(&name).await.unwrap();
        let vmid = recorded_vmid(&pm).unwrap();
        assert_eq!(
            vms_named(&h, &name),
            vec![vmid],
            "{what}: exactly one VM of {name}, at spec.virtualMachineID"
        );
        assert_eq!(st.non_template_vmids(), vec![vmid], "{what}: no other VM");
        assert_vm_configured(&h, vmid, &what);
        assert_eq!(
            located_machines(&h).await,
            vec![name.clone()],
            "{what}: node location"
        );
        let (_, isos, _) = h.leftovers().await;
        assert!(isos.is_empty(), "{what}: ISOs left: {isos:?}");
        let after = st.request_counts();
        assert_eq!(delta(&counts, &after, CLONE), 1, "{what}: one clone");
        assert_eq!(delta(&counts, &after, UPLOAD), 1, "{what}: one upload");
        delete_and_wait(&h, &name).await;
        if !blocked {
            break;
        }
    }
    eprintln!("provisioning crash sweep: covered gate positions 1..={k} (baseline {baseline})");
    mc.kill().await;
    h.stop().await;
    k
}

/// A provisioning takes at least this many Proxmox requests (reserve, clone, configure, upload,
/// start, guest checks, ISO removal): a sweep that covers fewer positions ended early.
const MIN_PROVISIONING_POSITIONS: u64 = 15;

/// Every gate position, with instant tasks (crashes while a task runs: the ignored variant below
/// and `crash_during_the_iso_import_does_not_upload_again`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioning_survives_a_crash_between_any_two_proxmox_calls() {
    let n = provisioning_sweep(&[]).await;
    assert!(
        n >= MIN_PROVISIONING_POSITIONS,
        "the sweep covered only {n} positions"
    );
}

/// The same with every task taking 150 ms, so crashes also land while clone, config, resize and
/// start tasks run (about three minutes on two cores; run with `--ignored`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "slow: about three minutes"]
async fn provisioning_survives_crashes_while_tasks_run() {
    let tasks = [
        "qmclone-linked",
        "qmclone-full",
        "qmconfig",
        "resize",
        "imgcopy",
        "qmstart",
        "imgdel",
    ]
    .map(|t| (t, 150));
    let n = provisioning_sweep(&tasks).await;
    assert!(
        n >= MIN_PROVISIONING_POSITIONS,
        "the sweep covered only {n} positions"
    );
}

const TASK_STATUS: &str = "GET /nodes/{node}/tasks/{upid}/status";

/// Simulator timings where cloud-init never finishes: machines wait in `WaitingForCloudInit` with
/// the VM running, the bootstrap ISO attached and the IP claims bound — every delete step has work.
fn cloud_init_forever() -> pve_sim::LatencySpec {
    pve_sim::LatencySpec {
        cloud_init_done_ms: Some(3_600_000),
        ..Default::default()
    }
}

/// Creates a machine and waits until it waits for cloud-init (VM running, ISO present).
async fn provision_until_cloud_init(h: &Harness, name: &str) -> u32 {
    h.create_machine("c1", name, false, bootstrap(), json!({})).await;
    let pm = wait_pm(h, name, "waiting for cloud-init", |pm| {
        reason_of(pm).as_deref() == Some(capmox_api::v1alpha2::WAITING_FOR_CLOUD_INIT_REASON)
    })
    .await;
    let vmid = recorded_vmid(&pm).unwrap();
    assert_eq!(
        h.sim.state().vm(vmid).unwrap().power,
        pve_sim::PowerState::Running
    );
    assert_eq!(isos_of(h, vmid).len(), 1);
    vmid
}

/// Creates a machine and waits until the whole provisioning flow is over.
async fn provision_fully(h: &Harness, name: &str) -> u32 {
    h.create_machine("c1", name, false, bootstrap(), json!({})).await;
    wait_provisioning_done(h, name, 60).await;
    recorded_vmid(&h.pms().get(name).await.unwrap()).unwrap()
}

async fn annotate(h: &Harness, name: &str, key: &str, value: Option<&str>) {
    let patch = json!({"metadata": {"annotations": {key: value}}});
    h.pms()
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Pauses the machine and waits until the controller has seen it (no pass runs afterwards).
async fn pause(h: &Harness, name: &str) {
    annotate(h, name, PAUSED_ANNOTATION, Some("true")).await;
    wait_pm(h, name, "paused", |pm| {
        pm.condition("Paused").is_some_and(|c| c.status == "True")
    })
    .await;
}

/// Deletes the Machine (the CAPI stand-in deletes the ProxmoxMachine) without waiting for the end.
async fn start_deletion(h: &Harness, name: &str) {
    h.machines()
        .delete(name, &kube::api::DeleteParams::default())
        .await
        .unwrap();
    wait_pm(h, name, "deletion requested", |pm| {
        pm.metadata.deletion_timestamp.is_some()
    })
    .await;
}

async fn gone(h: &Harness, name: &str) -> bool {
    h.pms().get_opt(name).await.unwrap().is_none() && h.machines().get_opt(name).await.unwrap().is_none()
}

/// Machine names in the ProxmoxCluster's `status.nodeLocations`.
async fn located_machines(h: &Harness) -> Vec<String> {
    let pc = h.pcs().get("c1").await.unwrap();
    let locations = pc.status.and_then(|s| s.node_locations).unwrap_or_default();
    [locations.control_plane, locations.workers]
        .into_iter()
        .flatten()
        .flatten()
        .map(|l| l.machine.name)
        .collect()
}

/// Exit statuses of the simulator's tasks of `kind` (all VMs, all time).
fn task_results(h: &Harness, kind: &str) -> Vec<Option<String>> {
    h.sim.state().with(|c| {
        c.tasks
            .values()
            .filter(|t| t.kind == kind)
            .map(|t| t.exitstatus.clone())
            .collect()
    })
}

/// Asserts that the deleted machine left nothing behind.
async fn assert_deleted_cleanly(h: &Harness, name: &str, vmid: u32, what: &str) {
    assert!(h.sim.state().vm(vmid).is_none(), "{what}: VM {vmid} still exists");
    assert!(isos_of(h, vmid).is_empty(), "{what}: ISO of {vmid} left");
    wait_no_leftovers(h, what).await;
    assert!(
        !located_machines(h).await.contains(&name.to_owned()),
        "{what}: {name} still in nodeLocations"
    );
}

/// Deletes one machine per gate position `j = 1, 2, …` (VM running, ISO attached, claims bound)
/// and crashes the controller while Proxmox request `j + 1` waits at the gate, until a deletion
/// finishes before the gate closes. Returns the number of positions.
async fn deletion_sweep(tasks: &[(&str, u64)]) -> u64 {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    st.set_latency(pve_sim::LatencySpec {
        cloud_init_done_ms: Some(3_600_000),
        ..latency(tasks)
    });

    // Baseline: the Proxmox requests of one deletion (running VM, ISO, claims).
    let vmid = provision_until_cloud_init(&h, "dbase").await;
    pause(&h, "dbase").await;
    start_deletion(&h, "dbase").await;
    let before = st.request_total();
    annotate(&h, "dbase", PAUSED_ANNOTATION, None).await;
    wait_true(60, "baseline deleted", || gone(&h, "dbase")).await;
    let baseline = st.request_total() - before;
    eprintln!("baseline deletion: {baseline} Proxmox requests");
    assert_deleted_cleanly(&h, "dbase", vmid, "baseline").await;

    let mut j = 0;
    loop {
        j += 1;
        assert!(j <= 4 * baseline + 20, "the sweep does not end (j = {j})");
        let name = format!("d{j}");
        let vmid = provision_until_cloud_init(&h, &name).await;
        // Paused while the deletion is requested, so the first request after the gate is set is
        // the deletion's first.
        pause(&h, &name).await;
        start_deletion(&h, &name).await;
        let counts = st.request_counts();
        st.gate_after(j);
        annotate(&h, &name, PAUSED_ANNOTATION, None).await;
        let blocked = blocked_or(&h, 60, "deleted", || gone(&h, &name)).await;
        if blocked {
            crash_and_restart(&h, &mut mc).await;
            wait_true(60, &format!("{name} deleted after a crash at {j}"), || {
                gone(&h, &name)
            })
            .await;
        } else {
            st.open_gate();
        }
        let what = format!("crash at {j}");
        assert_deleted_cleanly(&h, &name, vmid, &what).await;
        let after = st.request_counts();
        assert_eq!(delta(&counts, &after, STOP), 1, "{what}: one stop");
        assert_eq!(delta(&counts, &after, DESTROY), 1, "{what}: one destroy");
        if !blocked {
            break;
        }
    }
    for kind in ["qmstop", "qmdestroy"] {
        for r in task_results(&h, kind) {
            assert_eq!(r.as_deref(), Some("OK"), "every {kind} task succeeded");
        }
    }
    eprintln!("deletion crash sweep: covered gate positions 1..={j} (baseline {baseline})");
    mc.kill().await;
    h.stop().await;
    j
}

/// Every gate position; stop, destroy and ISO deletion take 50 ms so crashes also land while
/// they run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_survives_a_crash_between_any_two_proxmox_calls() {
    let n = deletion_sweep(&[("qmstop", 50), ("qmdestroy", 50), ("imgdel", 50)]).await;
    assert!(n >= 8, "the sweep covered only {n} positions");
}

/// One line of the simulator's request log.
#[derive(Debug, serde::Deserialize)]
struct Logged {
    method: String,
    path: String,
    endpoint: Option<String>,
    params: serde_json::Value,
    status: u16,
}

fn read_log(path: &std::path::Path) -> Vec<Logged> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

fn is_one(v: Option<&serde_json::Value>) -> bool {
    matches!(v, Some(v) if *v == json!("1") || *v == json!(1) || *v == json!(true))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn running_vm_is_stopped_before_it_is_destroyed_with_purge() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("requests.jsonl");
    let sim = pve_sim::SimConfig {
        request_log: Some(log.clone()),
        ..Default::default()
    };
    let (h, mut mc) = setup(sim, crash_settings()).await;
    let vmid = provision_fully(&h, "run1").await;
    // The stop takes a while, so a destroy issued without awaiting it would fail.
    let mut latency = pve_sim::LatencySpec::default();
    latency.tasks.insert("qmstop".into(), 400);
    h.sim.state().set_latency(latency);
    assert_eq!(
        h.sim.state().vm(vmid).unwrap().power,
        pve_sim::PowerState::Running
    );
    h.delete_machine("run1", 60).await;
    assert_deleted_cleanly(&h, "run1", vmid, "running VM").await;

    let lines = read_log(&log);
    let vm_path = format!("/api2/json/nodes/pve1/qemu/{vmid}");
    let stops: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].endpoint.as_deref() == Some(STOP))
        .collect();
    let destroys: Vec<usize> = (0..lines.len())
        .filter(|i| lines[*i].method == "DELETE" && lines[*i].path == vm_path)
        .collect();
    assert_eq!(stops.len(), 1, "one stop request");
    assert_eq!(
        destroys.len(),
        1,
        "one destroy request (none failed with 'VM is running')"
    );
    let (stop, destroy) = (stops[0], destroys[0]);
    assert!(stop < destroy, "stop before destroy");
    assert_eq!(lines[stop].status, 200);
    assert_eq!(lines[destroy].status, 200, "destroy accepted: the VM was stopped");
    assert!(
        is_one(lines[destroy].params.get("purge")),
        "destroy with purge=1: {:?}",
        lines[destroy].params
    );
    // The stop is awaited: by its task, or by the VM's state in the cluster's resource list.
    let stop_looks = lines[stop..destroy]
        .iter()
        .filter(|l| {
            (l.endpoint.as_deref() == Some(TASK_STATUS) && l.path.contains("qmstop"))
                || l.endpoint.as_deref() == Some("GET /cluster/resources")
        })
        .count();
    assert!(stop_looks >= 1, "the stop task was awaited before the destroy");
    assert_eq!(task_results(&h, "qmstop"), vec![Some("OK".to_owned())]);
    assert_eq!(task_results(&h, "qmdestroy"), vec![Some("OK".to_owned())]);
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ha_managed_vm_is_deleted_and_leaves_ha() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    let vmid = provision_fully(&h, "ha1").await;
    st.with(|c| {
        c.ha.insert(
            vmid,
            pve_sim::state::HaResource {
                sid: format!("vm:{vmid}"),
                state: "started".into(),
                group: None,
                max_restart: 1,
                max_relocate: 1,
                comment: None,
            },
        )
    });
    assert_eq!(st.ha_resources(), vec![format!("vm:{vmid}")]);
    let counts = st.request_counts();
    h.delete_machine("ha1", 60).await;
    assert_deleted_cleanly(&h, "ha1", vmid, "HA VM").await;
    assert!(st.ha_resources().is_empty(), "HA resource purged");
    let after = st.request_counts();
    assert_eq!(delta(&counts, &after, STOP), 1);
    assert_eq!(delta(&counts, &after, DESTROY), 1);
    assert_eq!(task_results(&h, "hastop"), vec![Some("OK".to_owned())]);
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_second_stop_or_destroy_while_one_is_in_flight() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    let vmid = provision_fully(&h, "hold1").await;
    let counts = st.request_counts();
    st.hold_tasks();
    h.machines()
        .delete("hold1", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    wait_true(30, "stop issued", || async {
        st.request_count(STOP) > counts.get(STOP).copied().unwrap_or(0)
    })
    .await;
    // Several reconciles while the stop task runs: each pokes the object and waits until the
    // controller has looked at the task again.
    for i in 0..5 {
        let polls = st.request_count(TASK_STATUS);
        annotate(&h, "hold1", "test.capmox/poke", Some(&i.to_string())).await;
        wait_true(30, "the task polled again", || async {
            st.request_count(TASK_STATUS) > polls
        })
        .await;
    }
    // A crash while the stop runs: the restarted controller polls the recorded task.
    mc.kill().await;
    mc.start(&h);
    wait_task_polls(&st, 3, "the stop task polled after the restart").await;
    let held = st.request_counts();
    assert_eq!(delta(&counts, &held, STOP), 1, "one stop while it is in flight");
    assert_eq!(
        delta(&counts, &held, DESTROY),
        0,
        "no destroy while the stop runs"
    );
    assert_eq!(st.vm(vmid).unwrap().power, pve_sim::PowerState::Running);
    st.release_tasks();
    wait_true(60, "hold1 deleted", || gone(&h, "hold1")).await;
    assert_deleted_cleanly(&h, "hold1", vmid, "held tasks").await;
    let after = st.request_counts();
    assert_eq!(delta(&counts, &after, STOP), 1);
    assert_eq!(delta(&counts, &after, DESTROY), 1);
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vanished_vm_and_unreserved_machine_are_released() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();

    // A provisioned machine whose VM was deleted behind the controller's back.
    let vmid = provision_fully(&h, "gone1").await;
    assert!(st.with(|c| c.vms.remove(&vmid)).is_some());
    let (counts, total) = (st.request_counts(), st.request_total());
    h.delete_machine("gone1", 30).await;
    assert_deleted_cleanly(&h, "gone1", vmid, "vanished VM").await;
    let after = st.request_counts();
    assert_eq!(delta(&counts, &after, STOP) + delta(&counts, &after, DESTROY), 0);
    let used = st.request_total() - total;
    assert!(used < 30, "no error loop: {used} Proxmox requests");

    // The VM vanished while the bootstrap ISO and the claims still exist: both are cleaned up.
    st.set_latency(cloud_init_forever());
    let vmid = provision_until_cloud_init(&h, "gone2").await;
    assert!(st.with(|c| c.vms.remove(&vmid)).is_some());
    h.delete_machine("gone2", 30).await;
    assert_deleted_cleanly(&h, "gone2", vmid, "vanished VM with ISO").await;

    // A machine that never got a VMID (no bootstrap data yet): gone at once, Proxmox untouched.
    h.create_machine("c1", "nodata", false, None, json!({})).await;
    let pm = h
        .wait_pm(
            "nodata",
            30,
            "waiting for bootstrap data with the finalizer",
            |pm| {
                reason_of(pm).as_deref() == Some(capmox_api::v1alpha2::WAITING_FOR_BOOTSTRAP_DATA_REASON)
                    && pm
                        .finalizers()
                        .iter()
                        .any(|f| f == capmox_api::consts::MACHINE_FINALIZER)
            },
        )
        .await;
    assert_eq!(pm.spec.virtual_machine_id, None);
    let total = st.request_total();
    h.delete_machine("nodata", 30).await;
    assert_eq!(
        st.request_total(),
        total,
        "no Proxmox request for a machine without a VM"
    );
    wait_no_leftovers(&h, "nodata").await;
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_waits_for_a_running_clone() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    st.hold_tasks();
    let counts = st.request_counts();
    h.create_machine("c1", "clone1", false, bootstrap(), json!({}))
        .await;
    let pm = h
        .wait_pm("clone1", 30, "clone in flight", |pm| {
            pm.status
                .as_ref()
                .and_then(|s| s.task_ref.as_deref())
                .is_some_and(|t| t.contains(":qmclone:"))
        })
        .await;
    let vmid = recorded_vmid(&pm).unwrap();
    assert_eq!(
        st.vm(vmid).unwrap().config.get("lock").map(String::as_str),
        Some("clone")
    );
    h.machines()
        .delete("clone1", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    h.wait_pm("clone1", 30, "deletion requested", |pm| {
        pm.metadata.deletion_timestamp.is_some()
    })
    .await;
    // The deletion keeps polling the clone and touches nothing else.
    wait_task_polls(&st, 3, "the clone task polled").await;
    // A crash while the clone runs changes nothing: the restarted controller polls it again.
    mc.kill().await;
    mc.start(&h);
    wait_task_polls(&st, 3, "the clone task polled after the restart").await;
    let held = st.request_counts();
    assert_eq!(delta(&counts, &held, STOP) + delta(&counts, &held, DESTROY), 0);
    assert!(h.pms().get_opt("clone1").await.unwrap().is_some());
    st.release_tasks();
    wait_true(60, "clone1 deleted", || gone(&h, "clone1")).await;
    assert_deleted_cleanly(&h, "clone1", vmid, "deleted during the clone").await;
    let after = st.request_counts();
    assert_eq!(delta(&counts, &after, CLONE), 1);
    assert_eq!(delta(&counts, &after, DESTROY), 1);
    assert_eq!(task_results(&h, "qmclone"), vec![Some("OK".to_owned())]);
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_clone_task_is_forgotten_and_retried() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    st.set_faults(pve_sim::FaultSpec {
        task_failure_rate: 1.0,
        ..Default::default()
    });
    h.create_machine("c1", "fail1", false, bootstrap(), json!({}))
        .await;
    h.wait_reason("fail1", capmox_api::v1alpha2::CLONING_FAILED_REASON, 30)
        .await;
    st.set_faults(pve_sim::FaultSpec::default());
    // The failed task must not stay recorded: the clone is retried after the retry delay.
    let pm = h.wait_provisioned("fail1", 60).await;
    let task = pm
        .status
        .as_ref()
        .and_then(|s| s.task_ref.clone())
        .unwrap_or_default();
    assert!(!task.contains(":qmclone:"), "{task}");
    let vmid = recorded_vmid(&pm).unwrap();
    assert_eq!(vms_named(&h, "fail1"), vec![vmid]);
    // At least the failed clone and the successful retry (another failed try may slip in before
    // the fault is lifted); only one VM came out of them.
    assert!(st.request_count(CLONE) >= 2);
    h.delete_machine("fail1", 60).await;
    wait_no_leftovers(&h, "fail1 deleted").await;
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletion_after_a_failed_clone_finishes() {
    // A long retry delay: without a VM there is nothing to hold back, so it must not matter.
    let settings = MachineSettings {
        retry_delay: Duration::from_secs(600),
        ..crash_settings()
    };
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), settings).await;
    let st = h.sim.state();
    st.hold_tasks();
    st.set_faults(pve_sim::FaultSpec {
        task_failure_rate: 1.0,
        ..Default::default()
    });
    h.create_machine("c1", "fail2", false, bootstrap(), json!({}))
        .await;
    let pm = h
        .wait_pm("fail2", 30, "clone in flight", |pm| {
            pm.status
                .as_ref()
                .and_then(|s| s.task_ref.as_deref())
                .is_some_and(|t| t.contains(":qmclone:"))
        })
        .await;
    let vmid = recorded_vmid(&pm).unwrap();
    start_deletion(&h, "fail2").await;
    // The clone fails while the machine is being deleted: the failure is reported, forgotten,
    // and the deletion goes on (nothing is left to stop or destroy).
    st.release_tasks();
    wait_true(60, "fail2 deleted", || gone(&h, "fail2")).await;
    assert_eq!(task_results(&h, "qmclone").len(), 1);
    assert_ne!(task_results(&h, "qmclone")[0].as_deref(), Some("OK"));
    assert_deleted_cleanly(&h, "fail2", vmid, "failed clone").await;
    assert_eq!(st.request_count(DESTROY) + st.request_count(STOP), 0);
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crash_during_the_iso_import_does_not_upload_again() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    st.set_latency(latency(&[("imgcopy", 2_000)]));
    h.create_machine("c1", "imp1", false, bootstrap(), json!({}))
        .await;
    h.wait_pm("imp1", 30, "import task recorded", |pm| {
        pm.status
            .as_ref()
            .and_then(|s| s.task_ref.as_deref())
            .is_some_and(|t| t.contains(":imgcopy:"))
    })
    .await;
    // Keep the import running across the crash (the file only exists once it ends).
    st.hold_tasks();
    assert_eq!(task_results(&h, "imgcopy"), vec![None], "the import still runs");
    mc.kill().await;
    mc.start(&h);
    wait_task_polls(&st, 3, "the import task polled").await;
    assert_eq!(
        st.request_count(UPLOAD),
        1,
        "no second upload while the first imports"
    );
    st.release_tasks();
    wait_provisioning_done(&h, "imp1", 60).await;
    assert_eq!(st.request_count(UPLOAD), 1);
    assert_eq!(task_results(&h, "imgcopy"), vec![Some("OK".to_owned())]);
    h.delete_machine("imp1", 60).await;
    wait_no_leftovers(&h, "imp1 deleted").await;
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_stop_is_retried_only_after_the_retry_delay() {
    let settings = MachineSettings {
        retry_delay: Duration::from_secs(600),
        ..crash_settings()
    };
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), settings).await;
    let st = h.sim.state();
    let vmid = provision_fully(&h, "stopfail").await;
    st.set_faults(pve_sim::FaultSpec {
        task_failure_rate: 1.0,
        ..Default::default()
    });
    h.machines()
        .delete("stopfail", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    wait_pm(&h, "stopfail", "deletion failed", |pm| {
        reason_of(pm).as_deref() == Some(capmox_api::v1alpha2::DELETION_FAILED_REASON)
    })
    .await;
    // More passes (watch events) must not issue the failed stop again and again.
    // (A pass is counted by the reconcile metric: a pass that only waits needs no request.)
    for i in 0..4 {
        let passes = h.metrics.reconcile_count("proxmoxmachine");
        annotate(&h, "stopfail", "test.capmox/poke", Some(&i.to_string())).await;
        wait_true(30, "another pass", || async {
            h.metrics.reconcile_count("proxmoxmachine") > passes
        })
        .await;
    }
    assert_eq!(st.request_count(STOP), 1, "one failed stop, then the retry delay");
    assert_eq!(st.request_count(DESTROY), 0);
    // The retry delay is over (cleared instead of waited for): the stop is retried and succeeds.
    st.set_faults(pve_sim::FaultSpec::default());
    h.pms()
        .patch_status(
            "stopfail",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"retryAfter": null}})),
        )
        .await
        .unwrap();
    wait_true(60, "stopfail deleted", || gone(&h, "stopfail")).await;
    assert_deleted_cleanly(&h, "stopfail", vmid, "failed stop").await;
    assert_eq!(st.request_count(STOP), 2);
    assert_eq!(st.request_count(DESTROY), 1);
    mc.kill().await;
    h.stop().await;
}

/// Three machines provisioned at once with a crash at a few gate positions. Sampled, not swept:
/// with several machines the order of their requests varies from run to run, so positions are
/// not reproducible; what is checked is that concurrent reservations plus a crash never give two
/// machines one VMID, a second VM per machine, or a leaked VM, ISO or claim.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_provisioning_survives_sampled_crashes() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    for (round, k) in [3u64, 12, 30, 60].into_iter().enumerate() {
        let names: Vec<String> = (0..3).map(|i| format!("r{round}m{i}")).collect();
        let clones = st.request_count(CLONE);
        st.gate_after(k);
        for n in &names {
            h.create_machine("c1", n, false, bootstrap(), json!({})).await;
        }
        let all_done = || async {
            for n in &names {
                if !provisioning_done(&h, n).await {
                    return false;
                }
            }
            true
        };
        if blocked_or(&h, 60, "all provisioned", all_done).await {
            crash_and_restart(&h, &mut mc).await;
        } else {
            st.open_gate();
        }
        let deadline = Instant::now() + Duration::from_secs(90);
        while !all_done().await {
            if Instant::now() > deadline {
                for n in &names {
                    let pm = h.pms().get(n).await.unwrap();
                    let vm = recorded_vmid(&pm).and_then(|v| st.vm(v));
                    eprintln!("{n}: status {:?}; VM {vm:?}", pm.status);
                }
                panic!("round {round} (crash at {k}) not provisioned");
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let mut vmids = Vec::new();
        for n in &names {
            let vmid = recorded_vmid(&h.pms().get(n).await.unwrap()).unwrap();
            assert_eq!(vms_named(&h, n), vec![vmid], "crash at {k}: one VM of {n}");
            assert_vm_configured(&h, vmid, &format!("crash at {k}, {n}"));
            vmids.push(vmid);
        }
        vmids.sort_unstable();
        eprintln!(
            "round {round} (crash at {k}): {} clone requests for 3 machines",
            st.request_count(CLONE) - clones
        );
        assert_eq!(st.non_template_vmids(), vmids, "crash at {k}: no other VM");
        let (_, isos, ipam) = h.leftovers().await;
        assert!(isos.is_empty(), "crash at {k}: ISOs left: {isos:?}");
        assert_eq!(ipam, 6, "crash at {k}: one claim and one address per machine");
        for n in &names {
            h.machines()
                .delete(n, &kube::api::DeleteParams::default())
                .await
                .unwrap();
        }
        for n in &names {
            wait_true(60, &format!("{n} deleted"), || gone(&h, n)).await;
        }
        wait_no_leftovers(&h, &format!("round {round} deleted")).await;
    }
    mc.kill().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_vm_at_the_recorded_vmid_is_never_destroyed() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    let vmid = provision_fully(&h, "own1").await;
    // Someone else's VM now sits at the recorded VMID (e.g. ours was replaced by hand).
    assert!(st.set_config(vmid, "name", "someone-else"));
    h.delete_machine("own1", 30).await;
    let vm = st.vm(vmid).expect("the foreign VM is kept");
    assert_eq!(vm.power, pve_sim::PowerState::Running);
    assert_eq!(st.request_count(STOP) + st.request_count(DESTROY), 0);
    assert!(!located_machines(&h).await.contains(&"own1".to_owned()));
    mc.kill().await;
    h.stop().await;
}

/// The clone request reached Proxmox but its answer never got recorded (a crash or a lost response
/// between the call and the status write): the half-created VM (`lock: clone`, no name yet) at the
/// recorded VMID must be waited for and adopted, not taken for someone else's VM.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unrecorded_clone_in_flight_is_adopted_not_repeated() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    st.hold_tasks();
    h.create_machine("c1", "lost1", false, bootstrap(), json!({}))
        .await;
    let pm = wait_pm(&h, "lost1", "clone in flight", |pm| {
        pm.status
            .as_ref()
            .and_then(|s| s.task_ref.as_deref())
            .is_some_and(|t| t.contains(":qmclone:"))
    })
    .await;
    let vmid = recorded_vmid(&pm).unwrap();
    mc.kill().await;
    h.pms()
        .patch_status(
            "lost1",
            &PatchParams::default(),
            &Patch::Merge(&json!({"status": {"taskRef": null}})),
        )
        .await
        .unwrap();
    mc.start(&h);
    for _ in 0..3 {
        let total = st.request_total();
        wait_true(30, "another pass", || async { st.request_total() > total + 2 }).await;
    }
    let pm = h.pms().get("lost1").await.unwrap();
    assert_eq!(recorded_vmid(&pm), Some(vmid), "the VMID is kept");
    assert_eq!(st.request_count(CLONE), 1, "no second clone");
    st.release_tasks();
    wait_provisioning_done(&h, "lost1", 60).await;
    assert_eq!(vms_named(&h, "lost1"), vec![vmid]);
    assert_eq!(st.non_template_vmids(), vec![vmid]);
    assert_eq!(st.request_count(CLONE), 1);
    delete_and_wait(&h, "lost1").await;
    mc.kill().await;
    h.stop().await;
}

/// A crash between the spec write (VMID) and the status write (node) of the reservation leaves a
/// VMID without a node: the machine reserves again instead of failing forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vmid_recorded_without_node_is_reserved_again() {
    let (h, mut mc) = setup(pve_sim::SimConfig::default(), crash_settings()).await;
    let st = h.sim.state();
    mc.kill().await;
    h.create_machine(
        "c1",
        "half1",
        false,
        bootstrap(),
        json!({"virtualMachineID": 150}),
    )
    .await;
    mc.start(&h);
    wait_true(60, "half1 provisioned", || provisioning_done(&h, "half1")).await;
    let vmid = recorded_vmid(&h.pms().get("half1").await.unwrap()).unwrap();
    assert_eq!(vms_named(&h, "half1"), vec![vmid]);
    assert_eq!(st.non_template_vmids(), vec![vmid]);
    assert_eq!(st.request_count(CLONE), 1);
    delete_and_wait(&h, "half1").await;
    mc.kill().await;
    h.stop().await;
}

/// One machine's life on an idle controller, request by request: the options, the ISO and the
/// tags go out in one config write (no `qmconfig` task), no storage is listed before the first
/// upload of a VM this controller cloned, and the deletion of a machine whose ISO it removed
/// lists no storage and reads the VM's config once (before the stop; the destroy follows the
/// list that showed the stop).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_machine_costs_one_config_write_and_no_needless_listing() {
    lone_machine_costs(pve_sim::SimConfig::default()).await;
}

/// The same with pvestatd's status cache on (10 s, as PVE): `/cluster/resources` shows a new VM
/// as `VM <vmid>` and a stopped one as running for a while. Neither costs a request more: the
/// config read under the owner's name is not repeated for a placeholder name, and the stop is
/// read from its task, not waited for in the list.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_machine_costs_the_same_with_pvestatds_lag() {
    let mut sim = pve_sim::SimConfig::default();
    sim.scenario.latency.status_cache_ms = Some(10_000);
    lone_machine_costs(sim).await;
}

async fn lone_machine_costs(sim: pve_sim::SimConfig) {
    const CONFIG_POST: &str = "POST /nodes/{node}/qemu/{vmid}/config";
    const CONFIG_PUT: &str = "PUT /nodes/{node}/qemu/{vmid}/config";
    const CONFIG_GET: &str = "GET /nodes/{node}/qemu/{vmid}/config";
    const LISTING: &str = "GET /nodes/{node}/storage/{storage}/content";
    let (h, mut mc) = setup(sim, crash_settings()).await;
    let st = h.sim.state();
    let before = st.request_counts();
    let vmid = provision_fully(&h, "lone").await;
    assert_vm_configured(&h, vmid, "lone");
    let provisioned = st.request_counts();
    assert_eq!(delta(&before, &provisioned, CONFIG_POST), 0, "no config task");
    assert_eq!(
        delta(&before, &provisioned, CONFIG_PUT),
        2,
        "one write delivers, one detaches"
    );
    assert_eq!(delta(&before, &provisioned, UPLOAD), 1);
    assert_eq!(
        delta(&before, &provisioned, TASK_STATUS),
        1,
        "one task read: the start's (the clone and the upload show in listings)"
    );
    assert_eq!(
        delta(&before, &provisioned, LISTING),
        2,
        "listed only to see the upload and the ISO deletion done"
    );
    assert_eq!(
        delta(&before, &provisioned, CONFIG_GET),
        1,
        "the config is read once, after the clone (not again once the ISO is gone)"
    );
    delete_and_wait(&h, "lone").await;
    let deleted = st.request_counts();
    assert_eq!(delta(&provisioned, &deleted, LISTING), 0, "the ISO is known gone");
    assert_eq!(
        delta(&provisioned, &deleted, CONFIG_GET),
        1,
        "one config read, before the stop"
    );
    assert_eq!(delta(&provisioned, &deleted, STOP), 1);
    assert_eq!(delta(&provisioned, &deleted, DESTROY), 1);
    assert_eq!(
        delta(&provisioned, &deleted, TASK_STATUS),
        1,
        "the stop is read from its task (the list's power state lags)"
    );
    // The destroy acts on the list read before the stop its task confirmed, unless that list is
    // older than twelve guest polls (240 ms here: a loaded machine can take that long).
    assert!(
        delta(&provisioned, &deleted, RESOURCES) <= 3,
        "the list is read to find the VM, after the destroy, and at most once more"
    );
    wait_no_leftovers(&h, "lone deleted").await;
    mc.kill().await;
    h.stop().await;
}
