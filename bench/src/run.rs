//! One bench run: set up pve-sim, the control plane, the stand-ins and the manager; then
//! provision N machines, wait at rest, restart the manager, delete the machines — reading the
//! counters at each phase's edges.

use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmox_api::capi::v1beta2::{Cluster, Machine};
use capmox_api::v1alpha2::ProxmoxMachine;
use futures::{StreamExt, TryStreamExt};
use kube::api::{Api, DeleteParams};
use kube::{Resource, ResourceExt};
use testenv::{ServerOptions, TestEnv, TestEnvOptions};

use crate::counts::{Snapshot, kube_by_verb};
use crate::manager::{ManagerHandle, ManagerTarget};
use crate::objects::{self, CLUSTER};
use crate::report::{RunReport, floor_secs};
use crate::world::World;
use crate::{BenchError, BenchOptions, Profile, RunSpec, SCENARIO};

/// How often progress is checked.
const POLL: Duration = Duration::from_millis(250);
/// Objects created at once.
const CREATE_PARALLELISM: usize = 16;

struct Rig {
    sim: pve_sim::SimServer,
    env: TestEnv,
    target: ManagerTarget,
    world: World,
}

fn progress(opts: &BenchOptions, line: impl AsRef<str>) {
    if opts.progress {
        eprintln!("bench: {}", line.as_ref());
    }
}

async fn start_rig(opts: &BenchOptions, spec: RunSpec, dir: &Path) -> Result<(Rig, f64), BenchError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut scenario = pve_sim::Scenario::from_yaml(SCENARIO)?;
    if spec.profile == Profile::Instant {
        scenario.latency = pve_sim::LatencySpec::default();
    }
    let floor = floor_secs(&scenario.latency, true);
    // Every Proxmox request in order (what a per-endpoint count does not show: which pass sent it),
    // kept with the other logs.
    let request_log = opts.keep.as_ref().map(|_| dir.join("pve-requests.jsonl"));
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig {
        scenario,
        request_log,
        ..pve_sim::SimConfig::default()
    })
    .await?;
    let ca_file = dir.join("pve-sim-ca.pem");
    std::fs::write(&ca_file, sim.ca_pem().unwrap_or_default())
        .map_err(|e| BenchError::io("writing pve-sim's CA", e))?;
    let env = match testenv::real::binaries_from_env().filter(|_| !opts.in_tree) {
        Some((apiserver, etcd)) => {
            TestEnv::start_real_audited(apiserver, etcd, dir.join("kube-apiserver-audit.log")).await?
        }
        None => {
            TestEnv::start_with(TestEnvOptions {
                server: ServerOptions {
                    garbage_collector: true,
                    event_history: 200_000,
                    ..ServerOptions::default()
                },
                force_in_tree: true,
            })
            .await?
        }
    };
    let world = World::start(&env).await?;
    let target = ManagerTarget {
        kubeconfig: env.kubeconfig_path().to_path_buf(),
        proxmox_url: sim.url(),
        proxmox_token: sim.token_id().to_owned(),
        proxmox_secret: sim.token_secret().to_owned(),
        proxmox_ca_file: ca_file,
        extra_args: opts.manager_args.clone(),
        log_file: dir.join("manager.log"),
    };
    Ok((
        Rig {
            sim,
            env,
            target,
            world,
        },
        floor,
    ))
}

impl Rig {
    async fn snapshot(&self, manager: Option<&ManagerHandle>) -> Result<Snapshot, BenchError> {
        let kube = match self.env.request_counts() {
            Some(counts) => kube_by_verb(&counts?, "capmox-rs/"),
            None => Default::default(),
        };
        let (machine_passes, cluster_passes) = match manager {
            Some(m) => (
                m.reconciles(capmox::controllers::machine::CONTROLLER)
                    .await
                    .unwrap_or(0),
                m.reconciles(capmox::controllers::cluster::CONTROLLER)
                    .await
                    .unwrap_or(0),
            ),
            None => (0, 0),
        };
        Ok(Snapshot {
            proxmox: self.sim.state().request_counts(),
            kube,
            machine_passes,
            cluster_passes,
        })
    }

    fn api<K>(&self) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        self.world.api()
    }

    async fn stop(self) {
        self.world.stop().await;
        self.sim.shutdown().await;
        drop(self.env);
    }
}

/// Waits until `check` returns `Some`, polling every [`POLL`], for at most `limit`.
async fn until<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> Result<T, BenchError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<Option<T>, BenchError>>,
{
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = check().await? {
            return Ok(v);
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: what.to_owned(),
                after: limit,
            });
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Seconds from the manager's start until its first reconcile of any kind.
async fn first_reconcile(m: &mut ManagerHandle) -> Result<f64, BenchError> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let passes = m
            .reconciles(capmox::controllers::cluster::CONTROLLER)
            .await
            .unwrap_or(0)
            + m.reconciles(capmox::controllers::machine::CONTROLLER)
                .await
                .unwrap_or(0);
        if passes > 0 {
            return Ok(m.started().elapsed().as_secs_f64());
        }
        if m.exited() {
            return Err(BenchError::Manager("the manager exited at startup".into()));
        }
        if Instant::now() >= deadline {
            return Err(BenchError::Timeout {
                what: "the manager's first reconcile".into(),
                after: Duration::from_secs(120),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn bootstrap_isos(sim: &pve_sim::SimServer) -> usize {
    sim.state()
        .file_volumes()
        .iter()
        .filter(|v| v.volid.contains("user-data-"))
        .count()
}

/// VMs still carrying their bootstrap ISO or its tag (the ISO removal is not over).
fn vms_with_bootstrap(sim: &pve_sim::SimServer) -> usize {
    sim.state().with(|c| {
        c.vms
            .values()
            .filter(|v| {
                let get = |k: &str| v.config.get(k).map(String::as_str).unwrap_or_default();
                get("tags").contains("cloud-init") || get("ide0").contains("user-data-")
            })
            .count()
    })
}

/// Machines that failed for good (`VMProvisionFailed` without a retry time), as error lines.
fn failures(pms: &[Arc<ProxmoxMachine>]) -> Vec<String> {
    pms.iter()
        .filter_map(|pm| {
            let c = pm.condition("VirtualMachineProvisioned")?;
            let retry = pm.status.as_ref().and_then(|s| s.retry_after.as_ref()).is_some();
            (c.status == "False" && c.reason == "VMProvisionFailed" && !retry)
                .then(|| format!("{}: {}: {}", pm.name_any(), c.reason, c.message))
        })
        .collect()
}

fn unfinished(pms: &[Arc<ProxmoxMachine>]) -> Vec<String> {
    pms.iter()
        .filter(|pm| !pm.is_provisioned())
        .map(|pm| {
            let reason = pm
                .condition("VirtualMachineProvisioned")
                .map(|c| format!("{}: {}", c.reason, c.message))
                .unwrap_or_else(|| "no condition".to_owned());
            format!("{} not provisioned ({reason})", pm.name_any())
        })
        .collect()
}

/// Runs one bench run.
pub async fn run_one(opts: &BenchOptions, spec: RunSpec) -> Result<RunReport, BenchError> {
    let tmp = tempfile::tempdir().map_err(|e| BenchError::io("creating a temp dir", e))?;
    let dir = match &opts.keep {
        Some(d) => {
            let d = d.join(format!("{}-{}", spec.machines, spec.profile.name()));
            std::fs::create_dir_all(&d).map_err(|e| BenchError::io("creating the log folder", e))?;
            d
        }
        None => tmp.path().to_path_buf(),
    };
    let (rig, floor) = start_rig(opts, spec, &dir).await?;
    let result = measure(opts, spec, &rig, floor).await;
    rig.stop().await;
    result
}

async fn measure(opts: &BenchOptions, spec: RunSpec, rig: &Rig, floor: f64) -> Result<RunReport, BenchError> {
    let n = spec.machines;
    let limit = opts
        .timeout
        .unwrap_or_else(|| Duration::from_secs_f64((floor * 4.0).max(300.0) + n as f64 * 1.5));
    let mut report = RunReport {
        machines: n,
        profile: spec.profile.name().to_owned(),
        control_plane: if rig.env.is_real() {
            "kube-apiserver"
        } else {
            "in-tree"
        }
        .to_owned(),
        kube_counting: if rig.env.is_real() {
            "audit log"
        } else {
            "in-tree server"
        }
        .to_owned(),
        manager_args: opts.manager_args.clone(),
        floor_secs: floor,
        ..RunReport::default()
    };
    rig.world.create_cluster().await?;
    let mut manager = ManagerHandle::start(&opts.manager, &rig.target).await?;
    report.first_reconcile_secs = Some(first_reconcile(&mut manager).await?);
    let clusters = rig.api::<Cluster>();
    until(Duration::from_secs(120), "the cluster infrastructure", || {
        let clusters = clusters.clone();
        async move {
            let c = clusters
                .get(CLUSTER)
                .await
                .map_err(BenchError::kube("reading the Cluster"))?;
            Ok(c.status
                .and_then(|s| s.initialization)
                .and_then(|i| i.infrastructure_provisioned)
                .filter(|p| *p)
                .map(|_| ()))
        }
    })
    .await?;
    tokio::time::sleep(Duration::from_secs(2)).await;
    report.rss_idle_bytes = manager.memory().map(|(rss, _)| rss);
    progress(
        opts,
        format!("{n} machines ({}): cluster ready", spec.profile.name()),
    );

    // Provisioning.
    let s0 = rig.snapshot(Some(&manager)).await?;
    let created = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| async move { rig.world.create_machine(&objects::machine_name(i)).await })
        .buffer_unordered(CREATE_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await?;
    progress(
        opts,
        format!("created {n} machines in {:.1}s", created.elapsed().as_secs_f64()),
    );
    let mut last_note = Instant::now();
    let (makespan, settled) = {
        let mut makespan = None;
        let deadline = created + limit;
        loop {
            if manager.exited() {
                return Err(BenchError::Manager(
                    "the manager exited while provisioning".into(),
                ));
            }
            let pms = rig.world.pms.state();
            let done = pms.iter().filter(|pm| pm.is_provisioned()).count();
            if makespan.is_none() && done == n && pms.len() == n {
                makespan = Some(created.elapsed().as_secs_f64());
            }
            if makespan.is_some() && bootstrap_isos(&rig.sim) == 0 && vms_with_bootstrap(&rig.sim) == 0 {
                break (makespan.unwrap_or_default(), created.elapsed().as_secs_f64());
            }
            let failed = failures(&pms);
            if !failed.is_empty() || Instant::now() >= deadline {
                report.errors = if failed.is_empty() {
                    unfinished(&pms)
                } else {
                    failed
                };
                report.makespan_secs = created.elapsed().as_secs_f64();
                return Ok(report);
            }
            if last_note.elapsed() >= Duration::from_secs(10) {
                last_note = Instant::now();
                progress(
                    opts,
                    format!(
                        "{done}/{n} provisioned after {:.0}s",
                        created.elapsed().as_secs_f64()
                    ),
                );
            }
            tokio::time::sleep(POLL).await;
        }
    };
    let s1 = rig.snapshot(Some(&manager)).await?;
    report.makespan_secs = makespan;
    report.settled_secs = settled;
    report.provision = s1.since(&s0);
    report.vms_cloned = report
        .provision
        .proxmox_of("POST /nodes/{node}/qemu/{vmid}/clone");
    report.vms_after_provisioning = rig.sim.state().non_template_vmids().len();
    if report.vms_cloned != n as u64 || report.vms_after_provisioning != n {
        report.errors.push(format!(
            "{} clones and {} VMs for {n} machines",
            report.vms_cloned, report.vms_after_provisioning
        ));
    }
    progress(
        opts,
        format!("all provisioned after {makespan:.1}s, ISOs removed after {settled:.1}s; at rest"),
    );

    // At rest.
    tokio::time::sleep(opts.rest_window).await;
    let s2 = rig.snapshot(Some(&manager)).await?;
    report.rest = s2.since(&s1);
    report.rest_window_secs = opts.rest_window.as_secs_f64();
    report.rss_peak_bytes = manager.memory().map(|(_, peak)| peak);
    let cpu_first = manager.cpu_seconds();

    // Restart with every machine provisioned.
    progress(opts, "restarting the manager");
    manager.stop().await?;
    let s3 = rig.snapshot(None).await?;
    let mut manager = ManagerHandle::start(&opts.manager, &rig.target).await?;
    report.restart_first_reconcile_secs = Some(first_reconcile(&mut manager).await?);
    tokio::time::sleep(opts.restart_window.saturating_sub(manager.started().elapsed())).await;
    let s4 = rig.snapshot(Some(&manager)).await?;
    report.restart = s4.since(&s3);
    report.restart_window_secs = manager.started().elapsed().as_secs_f64();

    // Deletion.
    progress(opts, "deleting the machines");
    let deleting = Instant::now();
    let machines = rig.api::<Machine>();
    futures::stream::iter(0..n)
        .map(|i| {
            let machines = machines.clone();
            async move {
                let name = objects::machine_name(i);
                machines
                    .delete(&name, &DeleteParams::default())
                    .await
                    .map(|_| ())
                    .map_err(BenchError::kube(format!("deleting Machine {name}")))
            }
        })
        .buffer_unordered(CREATE_PARALLELISM)
        .try_collect::<Vec<()>>()
        .await?;
    let gone = {
        let deadline = deleting + limit;
        loop {
            if manager.exited() {
                return Err(BenchError::Manager("the manager exited while deleting".into()));
            }
            let left = rig.world.pms.state().len();
            let vms = rig.sim.state().non_template_vmids().len();
            if left == 0 && vms == 0 && bootstrap_isos(&rig.sim) == 0 {
                break Ok(deleting.elapsed().as_secs_f64());
            }
            if Instant::now() >= deadline {
                break Err(format!(
                    "deletion timed out after {limit:?}: {left} ProxmoxMachines and {vms} VMs left"
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    };
    let s5 = rig.snapshot(Some(&manager)).await?;
    let mut delete = s5.since(&s4);
    // Passes of the second process: its counters started at zero.
    delete.machine_passes = s5.machine_passes.saturating_sub(s4.machine_passes);
    report.delete = delete;
    match gone {
        Ok(secs) => report.delete_secs = secs,
        Err(e) => {
            report.delete_secs = deleting.elapsed().as_secs_f64();
            report.errors.push(e);
        }
    }
    report.cpu_seconds = match (cpu_first, manager.cpu_seconds()) {
        (Some(a), Some(b)) => Some(a + b),
        _ => None,
    };
    manager.stop().await?;
    progress(opts, format!("deleted after {:.1}s", report.delete_secs));
    Ok(report)
}
