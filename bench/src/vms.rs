//! The standalone-VM row of `make bench`: N ProxmoxVirtualMachines (no Cluster API) created at
//! once against pve-sim's demo scenario, timed until every one is `Running` with its guest's
//! address (makespan vs the floor of one VM), then a window at rest, then snapshots, restores,
//! linked clones and an image import ([`crate::vm_ops`]), then their deletion — Proxmox requests
//! per VM from pve-sim's counters, Kubernetes requests of the manager at the control plane.

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use capmox_api::vm::{ProxmoxVirtualMachine, VmPhase};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde::{Deserialize, Serialize};
use testenv::{ServerOptions, TestEnv, TestEnvOptions};

use crate::counts::{Delta, Snapshot, kube_by_verb};
use crate::floor::VM_UP;
use crate::manager::{ManagerHandle, ManagerTarget, kube_client};
use crate::{BENCH_AGENT, BenchError, BenchOptions, Profile, SCENARIO};

/// The namespace of the VMs.
const NAMESPACE: &str = "bench-vms";

/// What one VM run measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct VmReport {
    /// VMs created and deleted.
    pub vms: usize,
    /// pve-sim latency profile.
    pub profile: String,
    /// `in-tree` or `kube-apiserver`.
    pub control_plane: String,
    /// The time one VM needs if every call returned at once (full clone, config write, ISO
    /// import, start, guest agent), seconds.
    pub floor_secs: f64,
    /// From creating the VMs until every one was `Running` with an address, seconds.
    pub makespan_secs: f64,
    /// From deleting them until every object and VM was gone, seconds.
    pub delete_secs: f64,
    /// Requests from creation until all were running.
    pub create: Delta,
    /// Requests during the rest window.
    pub rest: Delta,
    /// Length of the rest window, seconds.
    pub rest_window_secs: f64,
    /// Requests while deleting.
    pub delete: Delta,
    /// The VM operations (snapshot, restore, linked clone, image import).
    pub ops: Vec<crate::vm_ops::OpReport>,
    /// What failed or leaked.
    pub errors: Vec<String>,
}

/// The floor of one standalone VM.
pub fn vm_floor_secs(latency: &pve_sim::LatencySpec) -> f64 {
    ["qmclone-full", "qmconfig", "imgcopy", "qmstart"]
        .iter()
        .map(|t| latency.task(t).as_secs_f64())
        .sum::<f64>()
        + latency.agent_ready().as_secs_f64()
}

fn vm_name(i: usize) -> String {
    format!("vm-{i:04}")
}

fn vm(i: usize) -> Result<ProxmoxVirtualMachine, BenchError> {
    Ok(serde_json::from_value(serde_json::json!({
        "apiVersion": capmox_api::vm::API_VERSION, "kind": capmox_api::vm::KIND,
        "metadata": {"name": vm_name(i), "namespace": NAMESPACE},
        "spec": {
            "templateID": 100, "sourceNode": "pve1", "memoryMiB": 2048,
            "allowedNodes": ["pve1", "pve2", "pve3"], "storage": "shared",
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0",
                "ipv4Addresses": [format!("10.30.{}.{}/16", i / 250, i % 250 + 2)], "gateway": "10.30.0.1"}]},
            "cloudInit": {"userData": "#cloud-config\nruncmd:\n  - echo hello\n"}
        }
    }))?)
}

fn running(p: &ProxmoxVirtualMachine) -> bool {
    p.status.as_ref().is_some_and(|s| {
        s.phase == Some(VmPhase::Running) && s.ip_addresses.as_ref().is_some_and(|i| !i.is_empty())
    })
}

/// The counters now.
pub(crate) fn snapshot(env: &TestEnv, sim: &pve_sim::SimServer) -> Result<Snapshot, BenchError> {
    let kube = match env.request_counts() {
        Some(counts) => kube_by_verb(&counts?, "capmox-rs/"),
        None => Default::default(),
    };
    Ok(Snapshot {
        proxmox: sim.state().request_counts(),
        kube,
        machine_passes: 0,
        cluster_passes: 0,
    })
}

/// Runs one VM run of `n` VMs.
pub async fn run_vms(opts: &BenchOptions, n: usize, profile: Profile) -> Result<VmReport, BenchError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let tmp = tempfile::tempdir().map_err(|e| BenchError::io("creating a temp dir", e))?;
    let dir = tmp.path();
    let mut scenario = pve_sim::Scenario::from_yaml(SCENARIO)?;
    if profile == Profile::Instant {
        scenario.latency = pve_sim::LatencySpec::default();
    }
    // `local` takes `import` content: the image import's download lands there.
    for s in scenario.storages.iter_mut().filter(|s| s.name == "local") {
        s.content.push_str(",import");
    }
    let floor = vm_floor_secs(&scenario.latency);
    let latency = scenario.latency.clone();
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig {
        scenario,
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
                server: ServerOptions::default(),
                force_in_tree: true,
            })
            .await?
        }
    };
    let crds = capmox_api::crd::generated().map_err(|e| BenchError::Manager(e.to_string()))?;
    env.install_crds(crds).await?;
    let client = kube_client(env.kubeconfig_path(), BENCH_AGENT).await?;
    let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))?;
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .map_err(BenchError::kube("creating the namespace"))?;
    let target = ManagerTarget {
        kubeconfig: env.kubeconfig_path().to_path_buf(),
        proxmox_url: sim.url(),
        proxmox_token: sim.token_id().to_owned(),
        proxmox_secret: sim.token_secret().to_owned(),
        proxmox_ca_file: ca_file,
        extra_args: opts.manager_args.clone(),
        log_file: dir.join("manager.log"),
    };
    let mut manager = ManagerHandle::start(&opts.manager, &target).await?;
    // Let the manager's controllers list and watch before counting.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let mut report = VmReport {
        vms: n,
        profile: profile.name().to_owned(),
        control_plane: if env.is_real() {
            "kube-apiserver"
        } else {
            "in-tree"
        }
        .to_owned(),
        floor_secs: floor,
        ..VmReport::default()
    };
    let result = measure(
        opts,
        n,
        (&env, &sim, &latency),
        &client,
        &mut manager,
        &mut report,
    )
    .await;
    manager.stop().await?;
    sim.shutdown().await;
    drop(env);
    result.map(|()| report)
}

async fn measure(
    opts: &BenchOptions,
    n: usize,
    (env, sim, latency): (&TestEnv, &pve_sim::SimServer, &pve_sim::LatencySpec),
    client: &kube::Client,
    manager: &mut ManagerHandle,
    report: &mut VmReport,
) -> Result<(), BenchError> {
    let api: Api<ProxmoxVirtualMachine> = Api::namespaced(client.clone(), NAMESPACE);
    let limit = opts
        .timeout
        .unwrap_or_else(|| Duration::from_secs_f64((report.floor_secs * 4.0).max(300.0) + n as f64));
    let s0 = snapshot(env, sim)?;
    let created = Instant::now();
    futures::stream::iter(0..n)
        .map(|i| {
            let api = api.clone();
            async move {
                api.create(&PostParams::default(), &vm(i)?)
                    .await
                    .map(|_| ())
                    .map_err(BenchError::kube(format!("creating VM {i}")))
            }
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    loop {
        if manager.exited() {
            return Err(BenchError::Manager(
                "the manager exited while creating VMs".into(),
            ));
        }
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(BenchError::kube("listing the VMs"))?;
        if list.items.iter().filter(|p| running(p)).count() == n {
            report.makespan_secs = created.elapsed().as_secs_f64();
            break;
        }
        if created.elapsed() >= limit {
            report.errors.push(format!(
                "{} of {n} VMs running after {limit:?}",
                list.items.iter().filter(|p| running(p)).count()
            ));
            report.makespan_secs = created.elapsed().as_secs_f64();
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let s1 = snapshot(env, sim)?;
    report.create = s1.since(&s0);
    let clones = report.create.proxmox_of("POST /nodes/{node}/qemu/{vmid}/clone");
    if clones != n as u64 || sim.state().non_template_vmids().len() != n {
        report.errors.push(format!("{clones} clones for {n} VMs"));
    }
    tokio::time::sleep(opts.rest_window).await;
    let s2 = snapshot(env, sim)?;
    report.rest = s2.since(&s1);
    report.rest_window_secs = opts.rest_window.as_secs_f64();
    if opts.vm_ops > 0 {
        let target = crate::vm_ops::OpsTarget {
            env,
            sim,
            client,
            namespace: NAMESPACE,
            latency,
            limit,
        };
        let names: Vec<String> = (0..n.min(opts.vm_ops)).map(vm_name).collect();
        match crate::vm_ops::run_ops(&target, &names).await {
            Ok(ops) => report.ops = ops,
            Err(e) => report.errors.push(format!("VM operations: {e}")),
        }
    }
    let s2 = snapshot(env, sim)?;
    let deleting = Instant::now();
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .map_err(BenchError::kube("deleting the VMs"))?;
    loop {
        let left = api
            .list(&ListParams::default())
            .await
            .map_err(BenchError::kube("listing the VMs"))?
            .items
            .len();
        let vms = sim.state().non_template_vmids().len();
        if left == 0 && vms == 0 {
            report.delete_secs = deleting.elapsed().as_secs_f64();
            break;
        }
        if deleting.elapsed() >= limit {
            report
                .errors
                .push(format!("{left} objects and {vms} VMs left after {limit:?}"));
            report.delete_secs = deleting.elapsed().as_secs_f64();
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    let s3 = snapshot(env, sim)?;
    report.delete = s3.since(&s2);
    Ok(())
}

/// The table of the VM runs: one column per run.
pub fn vm_table(reports: &[VmReport]) -> String {
    let mut rows: Vec<(String, Vec<String>)> = Vec::new();
    let per = |r: &VmReport, v: u64| format!("{:.1}", v as f64 / r.vms.max(1) as f64);
    let row = |label: &str, f: &dyn Fn(&VmReport) -> String| {
        (label.to_owned(), reports.iter().map(f).collect::<Vec<_>>())
    };
    let mut first = row("standalone VMs", &|r| format!("{} ({})", r.vms, r.profile));
    first.1.push("floor of 1".to_owned());
    rows.push(first);
    rows.push(row("control plane", &|r| r.control_plane.clone()));
    rows.push(row("time to all Running with an address (s)", &|r| {
        format!("{:.1}", r.makespan_secs)
    }));
    rows.push(row("floor of one VM (s) / ratio", &|r| {
        format!(
            "{:.1} / {:.2}x",
            r.floor_secs,
            r.makespan_secs / r.floor_secs.max(0.001)
        )
    }));
    let mut total = row("Proxmox requests per VM to Running", &|r| {
        per(r, r.create.proxmox_total())
    });
    total.1.push(VM_UP.total().to_string());
    rows.push(total);
    let keys = |pick: &dyn Fn(&VmReport) -> &std::collections::BTreeMap<String, u64>| {
        let mut keys: Vec<String> = reports
            .iter()
            .flat_map(|r| pick(r).keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        let max = |k: &str| {
            reports
                .iter()
                .map(|r| pick(r).get(k).copied().unwrap_or(0))
                .max()
                .unwrap_or(0)
        };
        keys.sort_by_key(|k| std::cmp::Reverse(max(k)));
        keys
    };
    let mut proxmox = keys(&|r| &r.create.proxmox);
    let missing: Vec<String> = VM_UP
        .endpoints()
        .filter(|e| !proxmox.iter().any(|k| k == e))
        .map(str::to_owned)
        .collect();
    proxmox.extend(missing);
    for k in proxmox {
        let mut cells: Vec<String> = reports
            .iter()
            .map(|r| per(r, r.create.proxmox.get(&k).copied().unwrap_or(0)))
            .collect();
        cells.push(VM_UP.of(&k).to_string());
        rows.push((format!("    {k}"), cells));
    }
    rows.push(row("Kubernetes requests per VM to Running", &|r| {
        per(r, r.create.kube_total())
    }));
    for k in keys(&|r| &r.create.kube) {
        rows.push((
            format!("    {k}"),
            reports
                .iter()
                .map(|r| per(r, r.create.kube.get(&k).copied().unwrap_or(0)))
                .collect(),
        ));
    }
    rows.push(row("at rest: Proxmox requests per minute per VM", &|r| {
        let minutes = (r.rest_window_secs / 60.0).max(1.0 / 60.0);
        format!(
            "{:.2}",
            r.rest.proxmox_total() as f64 / minutes / r.vms.max(1) as f64
        )
    }));
    rows.push(row("at rest: Kubernetes requests per minute", &|r| {
        let minutes = (r.rest_window_secs / 60.0).max(1.0 / 60.0);
        format!("{:.1}", r.rest.kube_total() as f64 / minutes)
    }));
    rows.push(row("time to all deleted (s)", &|r| {
        format!("{:.1}", r.delete_secs)
    }));
    rows.push(row("Proxmox requests per VM deleted", &|r| {
        per(r, r.delete.proxmox_total())
    }));
    let ops: Vec<&[crate::vm_ops::OpReport]> = reports.iter().map(|r| r.ops.as_slice()).collect();
    rows.extend(crate::vm_ops::op_rows(&ops));
    rows.push(row("errors", &|r| r.errors.len().to_string()));
    let width = rows.iter().map(|(l, _)| l.len()).max().unwrap_or(0);
    // The floor column is only on the Proxmox request rows; the others get an empty cell.
    let columns = rows.iter().map(|(_, c)| c.len()).max().unwrap_or(0);
    let mut out = String::new();
    for (label, cells) in rows {
        let _ = write!(out, "| {label:<width$} |");
        for i in 0..columns {
            let c = cells.get(i).map_or("", String::as_str);
            let _ = write!(out, " {c:>16} |");
        }
        out.push('\n');
    }
    for r in reports {
        for e in &r.errors {
            let _ = writeln!(out, "error ({} VMs): {e}", r.vms);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_proxmox_rows_end_with_the_floor_of_one_vm() {
        let mut r = VmReport {
            vms: 4,
            profile: "realistic".into(),
            ..VmReport::default()
        };
        r.create
            .proxmox
            .insert("GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo".into(), 4);
        r.create
            .proxmox
            .insert("POST /nodes/{node}/qemu/{vmid}/clone".into(), 4);
        let t = vm_table(&[r]);
        let cells = |label: &str| crate::report::row_cells(&t, label);
        assert_eq!(cells("standalone VMs")[..2], ["4 (realistic)", "floor of 1"]);
        assert_eq!(
            cells("Proxmox requests per VM to Running")[..2],
            ["2.0", "8"],
            "{t}"
        );
        assert_eq!(
            cells("POST /nodes/{node}/qemu/{vmid}/clone")[..2],
            ["1.0", "1"],
            "{t}"
        );
        assert_eq!(
            cells("GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo")[..2],
            ["1.0", "0"],
            "{t}"
        );
        assert_eq!(
            cells("POST /nodes/{node}/qemu/{vmid}/status/start")[..2],
            ["0.0", "1"],
            "{t}"
        );
        let bars: std::collections::BTreeSet<usize> = t
            .lines()
            .filter(|l| l.starts_with('|'))
            .map(|l| l.matches('|').count())
            .collect();
        assert_eq!(bars.len(), 1, "{t}");
    }
}
