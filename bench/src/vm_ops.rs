//! The VM-operation rows of `make bench`: on a few of the standalone VMs of a VM run (all
//! `Running`), at once per operation — a snapshot with memory (ProxmoxVMSnapshot), its restore
//! (ProxmoxVMRestore: the VM resumes where it was), a linked clone (ProxmoxVMClone: a new
//! ProxmoxVirtualMachine running from the source's template) — and one image import
//! (ProxmoxVMImage: a small qcow2 served on loopback, downloaded by Proxmox, imported,
//! converted to a template). Each row: the time until all are done vs the floor (what pve-sim's
//! latency profile makes the operation's tasks take), and Proxmox requests per operation. The
//! clones, snapshots and the image are removed afterwards (not counted), so the VM run's
//! deletion row stays about its VMs.

use std::time::{Duration, Instant};

use capmox_api::vm::{
    ImagePhase, OperationPhase, ProxmoxVMClone, ProxmoxVMImage, ProxmoxVMRestore, ProxmoxVMSnapshot,
    ProxmoxVirtualMachine,
};
use kube::Resource;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::BenchError;
use crate::counts::{Delta, Snapshot};

/// What one operation row measured.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct OpReport {
    /// The operation.
    pub op: String,
    /// How many ran at once.
    pub count: usize,
    /// What the profile makes one operation's tasks take, seconds.
    pub floor_secs: f64,
    /// From creating the objects until every one was done, seconds.
    pub secs: f64,
    /// Requests meanwhile.
    pub requests: Delta,
}

/// The floors of the operations under `latency`: a snapshot and a rollback are one task each; a
/// linked clone is `Succeeded` once its new VM is provisioned: the linked clone, config, ISO
/// upload and start, then the guest agent and cloud-init (whichever answers later); an import is
/// the download, the VM creation that imports the disk, the template conversion and the removal
/// of the downloaded file.
pub fn floors(latency: &pve_sim::LatencySpec) -> [(&'static str, f64); 4] {
    let sum = |tasks: &[&str]| tasks.iter().map(|t| latency.task(t).as_secs_f64()).sum::<f64>();
    [
        (SNAPSHOT, sum(&["qmsnapshot"])),
        (RESTORE, sum(&["qmrollback"])),
        (
            CLONE,
            sum(&["qmclone-linked", "qmconfig", "imgcopy", "qmstart"])
                + latency.agent_ready().max(latency.cloud_init_done()).as_secs_f64(),
        ),
        (IMPORT, sum(&["download", "qmcreate", "qmtemplate", "imgdel"])),
    ]
}

const SNAPSHOT: &str = "snapshot with memory";
const RESTORE: &str = "restore (with memory)";
const CLONE: &str = "linked clone to provisioned";
const IMPORT: &str = "image import to template";

/// Where the operations run.
pub struct OpsTarget<'a> {
    /// The manager's control plane, for the request counters.
    pub env: &'a testenv::TestEnv,
    /// The simulator.
    pub sim: &'a pve_sim::SimServer,
    /// A client of the bench.
    pub client: &'a kube::Client,
    /// The VMs' namespace.
    pub namespace: &'a str,
    /// The simulator's latencies (the floors).
    pub latency: &'a pve_sim::LatencySpec,
    /// Time limit of each operation.
    pub limit: Duration,
}

fn object(kind: &str, name: &str, ns: &str, spec: Value) -> Value {
    json!({"apiVersion": capmox_api::vm::API_VERSION, "kind": kind,
        "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

/// Creates `objects` at once and waits until `done` holds for each: `(seconds, requests)`.
async fn batch<K>(
    t: &OpsTarget<'_>,
    objects: Vec<Value>,
    done: impl Fn(&K) -> bool,
) -> Result<(f64, Delta), BenchError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + Serialize
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(t.client.clone(), t.namespace);
    let names: Vec<String> = objects
        .iter()
        .filter_map(|o| o["metadata"]["name"].as_str().map(str::to_owned))
        .collect();
    let s0 = crate::vms::snapshot(t.env, t.sim)?;
    let started = Instant::now();
    for o in objects {
        let obj: K = serde_json::from_value(o)?;
        let name = obj.meta().name.clone().unwrap_or_default();
        api.create(&PostParams::default(), &obj)
            .await
            .map_err(BenchError::kube(format!("creating {name}")))?;
    }
    loop {
        let list = api
            .list(&ListParams::default())
            .await
            .map_err(BenchError::kube("listing the operations"))?;
        let finished = list
            .items
            .iter()
            .filter(|o| names.contains(&o.meta().name.clone().unwrap_or_default()) && done(o))
            .count();
        if finished == names.len() {
            break;
        }
        if started.elapsed() >= t.limit {
            return Err(BenchError::Timeout {
                after: t.limit,
                what: format!("{finished} of {} operations ({})", names.len(), K::kind(&())),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let secs = started.elapsed().as_secs_f64();
    let s1: Snapshot = crate::vms::snapshot(t.env, t.sim)?;
    Ok((secs, s1.since(&s0)))
}

/// Deletes `names` of kind `K` and waits until they are gone.
async fn remove<K>(t: &OpsTarget<'_>, names: &[String]) -> Result<(), BenchError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + std::fmt::Debug
        + DeserializeOwned,
{
    let api: Api<K> = Api::namespaced(t.client.clone(), t.namespace);
    for n in names {
        api.delete(n, &DeleteParams::default())
            .await
            .map_err(BenchError::kube(format!("deleting {n}")))?;
    }
    let started = Instant::now();
    loop {
        let mut left = 0;
        for n in names {
            if api
                .get_opt(n)
                .await
                .map_err(BenchError::kube(format!("reading {n}")))?
                .is_some()
            {
                left += 1;
            }
        }
        if left == 0 {
            return Ok(());
        }
        if started.elapsed() >= t.limit {
            return Err(BenchError::Timeout {
                after: t.limit,
                what: format!("{left} {} to be deleted", K::kind(&())),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn succeeded(phase: Option<OperationPhase>) -> bool {
    phase == Some(OperationPhase::Succeeded)
}

/// Runs the operations on the VMs `vms` (each `Running`) and one image import.
pub async fn run_ops(t: &OpsTarget<'_>, vms: &[String]) -> Result<Vec<OpReport>, BenchError> {
    let ns = t.namespace;
    let floors = floors(t.latency);
    let floor = |op: &str| floors.iter().find(|(o, _)| *o == op).map_or(0.0, |(_, f)| *f);
    let mut out = Vec::new();
    let mut row = |op: &str, (secs, requests): (f64, Delta), count: usize| {
        out.push(OpReport {
            op: op.to_owned(),
            count,
            floor_secs: floor(op),
            secs,
            requests,
        });
    };
    let snaps: Vec<String> = vms.iter().map(|v| format!("{v}-snap")).collect();
    let objects = vms
        .iter()
        .zip(&snaps)
        .map(|(v, s)| {
            object(
                "ProxmoxVMSnapshot",
                s,
                ns,
                json!({"source": {"name": v}, "includeMemory": true}),
            )
        })
        .collect();
    let r = batch::<ProxmoxVMSnapshot>(t, objects, |s| succeeded(s.status.as_ref().and_then(|s| s.phase)))
        .await?;
    row(SNAPSHOT, r, vms.len());

    let objects = vms
        .iter()
        .zip(&snaps)
        .map(|(v, s)| {
            object(
                "ProxmoxVMRestore",
                &format!("{v}-restore"),
                ns,
                json!({"target": {"name": v}, "snapshotName": s}),
            )
        })
        .collect();
    let r = batch::<ProxmoxVMRestore>(t, objects, |r| {
        r.status.as_ref().and_then(|s| s.complete) == Some(true)
    })
    .await?;
    row(RESTORE, r, vms.len());

    let clones: Vec<String> = vms.iter().map(|v| format!("{v}-thin")).collect();
    let objects = vms
        .iter()
        .zip(&clones)
        .map(|(v, c)| {
            object(
                "ProxmoxVMClone",
                c,
                ns,
                json!({"source": {"name": v}, "target": {"name": c}, "linked": true}),
            )
        })
        .collect();
    let r =
        batch::<ProxmoxVMClone>(t, objects, |c| succeeded(c.status.as_ref().and_then(|s| s.phase))).await?;
    row(CLONE, r, vms.len());
    remove::<ProxmoxVirtualMachine>(t, &clones).await?;
    remove::<ProxmoxVMSnapshot>(t, &snaps).await?;

    let files = pve_sim::fileserver::FileServer::start()
        .await
        .map_err(|e| BenchError::io("starting the loopback file server", e))?;
    files.put("bench.qcow2", pve_sim::fileserver::qcow2_image(2 << 30, 64 << 10));
    let spec = json!({"url": files.url("bench.qcow2"), "node": "pve1", "storage": "local",
        "templateName": "bench-image", "hardware": {"diskStorage": "local-lvm"}});
    let image = "bench-image".to_owned();
    let r = batch::<ProxmoxVMImage>(t, vec![object("ProxmoxVMImage", &image, ns, spec)], |i| {
        i.status.as_ref().and_then(|s| s.phase) == Some(ImagePhase::Ready)
    })
    .await?;
    row(IMPORT, r, 1);
    remove::<ProxmoxVMImage>(t, std::slice::from_ref(&image)).await?;
    Ok(out)
}

/// The operation rows of the VM table: `(label, one cell per VM run)`.
pub fn op_rows(runs: &[&[OpReport]]) -> Vec<(String, Vec<String>)> {
    let mut ops: Vec<String> = Vec::new();
    for r in runs.iter().flat_map(|r| r.iter()) {
        if !ops.contains(&r.op) {
            ops.push(r.op.clone());
        }
    }
    let mut rows = Vec::new();
    for op in ops {
        let find = |run: &&[OpReport]| run.iter().find(|r| r.op == op).cloned();
        let cells = |f: &dyn Fn(&OpReport) -> String| {
            runs.iter()
                .map(|run| find(run).map_or_else(|| "-".to_owned(), |r| f(&r)))
                .collect::<Vec<_>>()
        };
        rows.push((
            format!("{op}: ops, time (s) / floor (s) / ratio"),
            cells(&|r| {
                format!(
                    "{} {:.1}/{:.1}/{:.2}x",
                    r.count,
                    r.secs,
                    r.floor_secs,
                    r.secs / r.floor_secs.max(0.001)
                )
            }),
        ));
        rows.push((
            format!("{op}: Proxmox requests per op"),
            cells(&|r| format!("{:.1}", r.requests.proxmox_total() as f64 / r.count.max(1) as f64)),
        ));
    }
    rows
}
