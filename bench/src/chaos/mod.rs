//! `make chaos`: a soak of the manager under Proxmox faults and process kills.
//!
//! N machines go through create → provisioned → delete in waves; while wave `i` is created,
//! wave `i - 1` is deleted (a "step"). pve-sim injects faults into a share of the manager's
//! requests (5xx, stalls, connections dropped before or after the request was processed, failed
//! tasks, storage lock contention, `qmstart` failing although the VM runs), and the manager —
//! the `capmox` binary as its own OS process — is killed with SIGKILL at seeded points (after a
//! seeded number of a step's machines reached their goal) and restarted at once, as an OOM kill
//! and a rescheduled pod would. At the end the cluster is deleted, fault injection is turned
//! off, and the run counts what must be zero: machines not provisioned or not deleted, VMs cloned
//! more than once for a machine, orphaned VMs, leaked ISOs, IPAddressClaims and IPAddresses,
//! and finalizers left behind.

mod plan;
mod report;
mod rig;

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use capmox_api::capi::ipam_claims::v1beta2::{IPAddress, IPAddressClaim};
use capmox_api::capi::v1beta2::{Cluster, Machine};
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use futures::{StreamExt, TryStreamExt};
use kube::api::{DeleteParams, ListParams};
use kube::{Resource, ResourceExt};

pub use plan::{Kill, faults, kills, steps, wave_sizes};
pub use report::{ChaosReport, KillRecord};

use crate::manager::{ManagerHandle, ManagerMode};
use crate::objects::{self, CLUSTER};
use crate::{BenchError, Profile};
use rig::ChaosRig;

/// How often progress is checked.
const POLL: Duration = Duration::from_millis(200);
/// Objects created or deleted at once.
const PARALLELISM: usize = 16;

/// Options of a chaos run.
#[derive(Debug, Clone)]
pub struct ChaosOptions {
    /// Machines.
    pub machines: usize,
    /// Waves they are created in.
    pub waves: usize,
    /// Share of the manager's Proxmox requests that meet a fault.
    pub fault_rate: f64,
    /// SIGKILLs of the manager.
    pub kills: usize,
    /// Seed of pve-sim's faults and of the kill plan.
    pub seed: u64,
    /// pve-sim latency profile.
    pub profile: Profile,
    /// The `capmox` binary.
    pub manager_bin: PathBuf,
    /// Extra manager arguments.
    pub manager_args: Vec<String>,
    /// Use the in-tree API server even when `KUBEBUILDER_ASSETS` names real binaries.
    pub in_tree: bool,
    /// Time limit of one step.
    pub step_timeout: Duration,
    /// Keep the manager log here instead of in a temporary folder.
    pub keep: Option<PathBuf>,
    /// Print progress on stderr.
    pub progress: bool,
}

impl ChaosOptions {
    /// The defaults of `make chaos` for the manager at `manager_bin`: 200 machines in 4 waves,
    /// 10 % faults, 3 kills, instant latencies.
    pub fn new(manager_bin: PathBuf) -> Self {
        Self {
            machines: 200,
            waves: 4,
            fault_rate: 0.10,
            kills: 3,
            seed: 1,
            profile: Profile::Instant,
            manager_bin,
            manager_args: Vec::new(),
            in_tree: false,
            step_timeout: Duration::from_secs(900),
            keep: None,
            progress: false,
        }
    }

    fn note(&self, line: impl AsRef<str>) {
        if self.progress {
            eprintln!("chaos: {}", line.as_ref());
        }
    }
}

/// Runs a chaos soak and reports what it found (a run that could not even be set up is an
/// `Err`; everything else, including timeouts, ends up in the report's problems).
pub async fn run_chaos(opts: &ChaosOptions) -> Result<ChaosReport, BenchError> {
    let tmp = tempfile::tempdir().map_err(|e| BenchError::io("creating a temp dir", e))?;
    let dir = match &opts.keep {
        Some(d) => {
            std::fs::create_dir_all(d).map_err(|e| BenchError::io("creating the log folder", e))?;
            d.clone()
        }
        None => tmp.path().to_path_buf(),
    };
    let rig = ChaosRig::start(opts, &dir).await?;
    let mut report = ChaosReport {
        machines: opts.machines,
        waves: wave_sizes(opts.machines, opts.waves).len(),
        fault_rate: opts.fault_rate,
        seed: opts.seed,
        profile: opts.profile.name().to_owned(),
        control_plane: if rig.env.is_real() {
            "kube-apiserver"
        } else {
            "in-tree"
        }
        .to_owned(),
        ..ChaosReport::default()
    };
    let result = soak(opts, &rig, &mut report).await;
    if let Err(e) = result {
        report.errors.push(e.to_string());
    }
    rig.stop().await;
    Ok(report)
}

/// Where every machine stands, from the ProxmoxMachine store.
#[derive(Default)]
struct Progress {
    /// Machines seen provisioned at least once.
    provisioned: BTreeSet<String>,
    /// Machines that failed for good (name → reason: message).
    failed: BTreeMap<String, String>,
}

impl Progress {
    fn observe(&mut self, rig: &ChaosRig) {
        for pm in rig.world.pms.state() {
            let name = pm.name_any();
            if pm.is_provisioned() {
                self.provisioned.insert(name);
            } else if let Some(c) = pm.condition("VirtualMachineProvisioned") {
                let retry = pm.status.as_ref().and_then(|s| s.retry_after.as_ref()).is_some();
                if c.status == "False" && c.reason == "VMProvisionFailed" && !retry {
                    self.failed.insert(name, format!("{}: {}", c.reason, c.message));
                }
            }
        }
    }
}

async fn soak(opts: &ChaosOptions, rig: &ChaosRig, report: &mut ChaosReport) -> Result<(), BenchError> {
    let mode = ManagerMode::Process(opts.manager_bin.clone());
    rig.world.create_cluster().await?;
    let mut manager = ManagerHandle::start(&mode, &rig.target).await?;
    wait_cluster_ready(rig).await?;
    rig.faults_on(opts.fault_rate);
    opts.note(format!(
        "cluster ready; faults on ({:.0} %)",
        opts.fault_rate * 100.0
    ));

    let sizes = wave_sizes(opts.machines, opts.waves);
    let step_sizes = steps(opts.machines, opts.waves);
    let plan = kills(&step_sizes, opts.kills, opts.seed);
    report.planned_kills = plan.len();
    let waves: Vec<Vec<String>> = {
        let mut next = 0;
        sizes
            .iter()
            .map(|n| {
                let w = (next..next + n).map(objects::machine_name).collect();
                next += n;
                w
            })
            .collect()
    };
    let started = Instant::now();
    let mut progress = Progress::default();
    let mut deleted: BTreeSet<String> = BTreeSet::new();
    for step in 0..step_sizes.len() {
        let creating: &[String] = waves.get(step).map(Vec::as_slice).unwrap_or_default();
        let deleting: &[String] = step
            .checked_sub(1)
            .and_then(|p| waves.get(p))
            .map(Vec::as_slice)
            .unwrap_or_default();
        opts.note(format!(
            "step {step}: creating {} machines, deleting {}",
            creating.len(),
            deleting.len()
        ));
        let create = futures::stream::iter(creating.iter())
            .map(|name| rig.world.create_machine(name))
            .buffer_unordered(PARALLELISM)
            .try_collect::<Vec<()>>();
        let delete = futures::stream::iter(deleting.iter())
            .map(|name| delete_machine(rig, name))
            .buffer_unordered(PARALLELISM)
            .try_collect::<Vec<()>>();
        futures::try_join!(create, delete)?;
        let mut step_kills: Vec<Kill> = plan.iter().filter(|k| k.step == step).copied().collect();
        let deadline = Instant::now() + opts.step_timeout;
        loop {
            progress.observe(rig);
            let present: BTreeSet<String> = rig.world.pms.state().iter().map(|pm| pm.name_any()).collect();
            for name in deleting {
                if !present.contains(name) {
                    deleted.insert(name.clone());
                }
            }
            let created_done = creating
                .iter()
                .filter(|n| progress.provisioned.contains(*n) || progress.failed.contains_key(*n))
                .count();
            let deleted_done = deleting.iter().filter(|n| deleted.contains(*n)).count();
            let done = created_done + deleted_done;
            while step_kills.first().is_some_and(|k| done >= k.done) {
                step_kills.remove(0);
                let at = started.elapsed().as_secs_f64();
                opts.note(format!(
                    "step {step}: SIGKILL after {done} done ({at:.1} s); restarting"
                ));
                manager.kill().await?;
                report.kills.push(KillRecord {
                    step,
                    done,
                    at_secs: at,
                });
                manager = ManagerHandle::start(&mode, &rig.target).await?;
            }
            if done == creating.len() + deleting.len() && step_kills.is_empty() {
                break;
            }
            if manager.exited() {
                opts.note("the manager exited on its own; restarting");
                report
                    .errors
                    .push(format!("the manager exited on its own during step {step}"));
                manager = ManagerHandle::start(&mode, &rig.target).await?;
            }
            if Instant::now() >= deadline {
                report.errors.push(format!(
                    "step {step} timed out after {:?}: {created_done}/{} provisioned, {deleted_done}/{} deleted",
                    opts.step_timeout,
                    creating.len(),
                    deleting.len()
                ));
                return finish(opts, rig, report, manager, &progress, &deleted, started).await;
            }
            tokio::time::sleep(POLL).await;
        }
        opts.note(format!(
            "step {step} done after {:.1} s ({} provisioned, {} deleted so far)",
            started.elapsed().as_secs_f64(),
            progress.provisioned.len(),
            deleted.len()
        ));
    }
    finish(opts, rig, report, manager, &progress, &deleted, started).await
}

/// Deletes the cluster, turns faults off and takes the inventory.
async fn finish(
    opts: &ChaosOptions,
    rig: &ChaosRig,
    report: &mut ChaosReport,
    manager: ManagerHandle,
    progress: &Progress,
    deleted: &BTreeSet<String>,
    started: Instant,
) -> Result<(), BenchError> {
    report.provisioned = progress.provisioned.len();
    report.deleted = deleted.len();
    report.failed = progress
        .failed
        .iter()
        .map(|(n, why)| format!("{n}: {why}"))
        .collect();
    opts.note("deleting the cluster");
    let gone = delete_cluster(rig, opts.step_timeout).await;
    report.total_secs = started.elapsed().as_secs_f64();
    rig.faults_off();
    if let Err(e) = gone {
        report.errors.push(e.to_string());
    }
    report.proxmox_requests = rig.sim.state().request_counts().values().sum();
    manager.stop().await?;
    inventory(rig, report).await
}

async fn inventory(rig: &ChaosRig, report: &mut ChaosReport) -> Result<(), BenchError> {
    let state = rig.sim.state();
    let history = state.clone_history();
    report.vms_cloned = history.len();
    let mut per_name: BTreeMap<String, usize> = BTreeMap::new();
    for (_, name) in &history {
        *per_name.entry(name.clone()).or_default() += 1;
    }
    report.duplicate_vms = per_name
        .iter()
        .filter(|(_, n)| **n > 1)
        .map(|(name, n)| format!("{name} ({n} VMs)"))
        .collect();
    report.orphaned_vms = state.non_template_vmids();
    report.leaked_isos = state
        .file_volumes()
        .into_iter()
        .filter(|v| v.volid.contains("user-data-"))
        .map(|v| v.volid)
        .collect();
    let lp = ListParams::default();
    report.leaked_claims = rig
        .world
        .api::<IPAddressClaim>()
        .list(&lp)
        .await
        .map_err(BenchError::kube("listing IPAddressClaims"))?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    report.leaked_addresses = rig
        .world
        .api::<IPAddress>()
        .list(&lp)
        .await
        .map_err(BenchError::kube("listing IPAddresses"))?
        .items
        .iter()
        .map(ResourceExt::name_any)
        .collect();
    report.finalizers_left = Vec::new();
    collect_stuck::<ProxmoxMachine>(rig, &mut report.finalizers_left).await?;
    collect_stuck::<Machine>(rig, &mut report.finalizers_left).await?;
    collect_stuck::<ProxmoxCluster>(rig, &mut report.finalizers_left).await?;
    collect_stuck::<Cluster>(rig, &mut report.finalizers_left).await?;
    collect_stuck::<IPAddressClaim>(rig, &mut report.finalizers_left).await?;
    Ok(())
}

/// Objects of kind `K` that are being deleted but still have finalizers.
async fn collect_stuck<K>(rig: &ChaosRig, out: &mut Vec<String>) -> Result<(), BenchError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let kind = K::kind(&());
    let list = rig
        .world
        .api::<K>()
        .list(&ListParams::default())
        .await
        .map_err(BenchError::kube(format!("listing {kind}")))?;
    out.extend(
        list.items
            .iter()
            .filter(|o| o.meta().deletion_timestamp.is_some())
            .map(|o| format!("{kind}/{}: {}", o.name_any(), o.finalizers().join(","))),
    );
    Ok(())
}

async fn wait_cluster_ready(rig: &ChaosRig) -> Result<(), BenchError> {
    let limit = Duration::from_secs(120);
    let deadline = Instant::now() + limit;
    loop {
        let c = rig
            .world
            .api::<Cluster>()
            .get(CLUSTER)
            .await
            .map_err(BenchError::kube("reading the Cluster"))?;
        let ready = c
            .status
            .and_then(|s| s.initialization)
            .and_then(|i| i.infrastructure_provisioned)
            .unwrap_or(false);
        if ready {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: "the cluster infrastructure".into(),
                after: limit,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

async fn delete_machine(rig: &ChaosRig, name: &str) -> Result<(), BenchError> {
    rig.world
        .api::<Machine>()
        .delete(name, &DeleteParams::default())
        .await
        .map_err(BenchError::kube(format!("deleting Machine {name}")))?;
    Ok(())
}

/// Deletes the Cluster and the ProxmoxCluster and waits until the ProxmoxCluster is gone.
async fn delete_cluster(rig: &ChaosRig, limit: Duration) -> Result<(), BenchError> {
    let dp = DeleteParams::default();
    let ignore_missing = |r: Result<_, kube::Error>| match r {
        Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
        Err(e) => Err(e),
        Ok(_) => Ok(()),
    };
    ignore_missing(rig.world.api::<Cluster>().delete(CLUSTER, &dp).await.map(|_| ()))
        .map_err(BenchError::kube("deleting the Cluster"))?;
    ignore_missing(
        rig.world
            .api::<ProxmoxCluster>()
            .delete(CLUSTER, &dp)
            .await
            .map(|_| ()),
    )
    .map_err(BenchError::kube("deleting the ProxmoxCluster"))?;
    let deadline = Instant::now() + limit;
    loop {
        let left = rig
            .world
            .api::<ProxmoxCluster>()
            .get_opt(CLUSTER)
            .await
            .map_err(BenchError::kube("reading the ProxmoxCluster"))?;
        if left.is_none() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: "the ProxmoxCluster's deletion".into(),
                after: limit,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}
