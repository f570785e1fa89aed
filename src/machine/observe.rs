//! Reads what the state machine decides on — the recorded task, the VM behind the recorded VMID,
//! the IPAM claims — from what the controller already knows where it can: the shared
//! `/cluster/resources` list of the machine's Proxmox cluster ([`super::view`]) shows whether the
//! VM exists, where, its name, lock, tags, power state and uptime, and whether a clone, stop or
//! destroy took effect (a start that ended well is laid over it); the VM config is read only
//! while the VM is still being shaped (and then kept up to date with this controller's writes);
//! a task is asked about only when its effect does not show; the claims come from the watch
//! caches.

use std::sync::Arc;
use std::time::{Duration, Instant};

use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;

use super::error::MachineError;
use super::state::{IpFacts, Power, TaskFacts, VmFacts, VmPresence};
use super::view::watch::Expect;
use super::view::writes::WriteKind;
use super::view::{Freshness, ProxmoxView, Snapshot};
use crate::bootstrap::{CLOUD_INIT_TAG, iso_file_name};
use crate::ipam;
use crate::proxmox::Upid;
use crate::proxmox::types::{ClusterResource, VmConfig};

/// Smallest VMID Proxmox hands out; lower recorded values (capmox writes `-1`) mean "none".
const MIN_VMID: i64 = 100;

/// How much earlier than its first look a start's task may be read (a pass scheduled for the
/// first look may run a little early).
const FIRST_LOOK_SLACK: Duration = Duration::from_millis(100);

/// Whether a task of this type leaves the VM running when it succeeds.
fn starts_vm(task_type: &str) -> bool {
    matches!(task_type, "qmstart" | "qmresume")
}

/// The VMID recorded in `spec.virtualMachineID`, if it is a real one.
pub fn recorded_vmid(pm: &ProxmoxMachine) -> Option<u32> {
    pm.spec
        .virtual_machine_id
        .filter(|v| *v >= MIN_VMID)
        .and_then(|v| u32::try_from(v).ok())
}

/// The VM state that shows a task of this type is over (`None`: only the task can tell).
///
/// A start (or resume) is confirmed by its task alone, not by the list: Proxmox may report a
/// failed start of a VM that runs anyway, which is worth a warning, so its task is read in any
/// case — and a task that ended well tells that the VM runs ([`ProxmoxView::start_confirmed`]).
pub fn effect_of(task_type: &str) -> Option<Expect> {
    match task_type {
        "qmclone" => Some(Expect::CloneDone),
        "qmstop" | "qmshutdown" => Some(Expect::Stopped),
        "qmdestroy" => Some(Expect::Gone),
        _ => None,
    }
}

/// What a pass knows about the recorded task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskLook {
    /// The outcome.
    pub facts: TaskFacts,
    /// The task's type (`qmclone`, …).
    pub task_type: String,
    /// How long it has run.
    pub age: Duration,
}

/// Looks up `status.taskRef`: first by its effect (in the shared snapshot, or `effect_seen` for
/// ISO imports and deletions, which the caller checks in the storage listing), else by asking
/// Proxmox for the task. A malformed or unknown UPID reads as [`TaskFacts::Unknown`]. Learns the
/// duration of finished tasks under `timing_key` (the task type unless the caller knows better).
pub async fn task_look(
    view: &ProxmoxView,
    task_ref: Option<&str>,
    vmid: Option<u32>,
    fresh: Freshness,
    timing_key: impl Fn(&str) -> String,
    effect_seen: Option<bool>,
) -> Result<Option<TaskLook>, MachineError> {
    let Some(raw) = task_ref.filter(|t| !t.is_empty()) else {
        return Ok(None);
    };
    let Ok(upid) = Upid::parse(raw) else {
        return Ok(Some(TaskLook {
            facts: TaskFacts::Unknown,
            task_type: String::new(),
            age: Duration::ZERO,
        }));
    };
    let age = view.task_age(raw, upid.starttime);
    let key = timing_key(&upid.task_type);
    let look = |facts| TaskLook {
        facts,
        task_type: upid.task_type.clone(),
        age,
    };
    let mut seen = effect_seen.unwrap_or(false);
    if !seen && let (Some(expect), Some(vmid)) = (effect_of(&upid.task_type), vmid) {
        let (_, snap) = view.snapshot(fresh.after(view.last_write(vmid))).await?;
        seen = expect.met(snap.vm(vmid));
    }
    // A task whose effect can be seen and does not show yet, while it is not overdue, still
    // runs: its status is asked for only when it is overdue (to notice a failure).
    let visible = effect_seen.is_some() || effect_of(&upid.task_type).is_some();
    let overdue = (view.timing.estimate(&key) * 2).min(view.settings().look_max);
    if !seen && visible && age < overdue {
        return Ok(Some(look(TaskFacts::Running)));
    }
    if seen {
        let took = view.finished(raw).unwrap_or(age);
        view.task_done(&key, took);
        return Ok(Some(look(TaskFacts::Succeeded)));
    }
    // A start is read when it should be done (a pass that comes earlier waits without a request).
    let starts = starts_vm(&upid.task_type);
    if starts && age + FIRST_LOOK_SLACK < view.timing.first_look(&key).min(view.settings().look_max) {
        return Ok(Some(look(TaskFacts::Running)));
    }
    let facts = match view.client().task_status(&upid).await {
        Ok(s) if !s.is_finished() => TaskFacts::Running,
        Ok(s) if s.is_success() => {
            let took = view.finished(raw).unwrap_or(age);
            view.task_done(&key, took);
            TaskFacts::Succeeded
        }
        // A deletion that found the file gone (an interrupted earlier pass deleted it) did its job.
        Ok(s)
            if upid.task_type == "imgdel"
                && crate::proxmox::error::classify_task_exitstatus(
                    s.exitstatus.as_deref().unwrap_or_default(),
                ) == Some(crate::proxmox::ErrorClass::NotFound) =>
        {
            view.finished(raw);
            TaskFacts::Succeeded
        }
        Ok(s) => {
            view.finished(raw);
            let mut exitstatus = s.exitstatus.clone().unwrap_or_else(|| "unknown error".to_owned());
            // A failed start names its cause only in the task log (an unknown bridge, ...).
            if let Some(detail) = view.client().task_failure_detail(&upid, &exitstatus).await {
                exitstatus = format!("{exitstatus} ({detail})");
            }
            TaskFacts::Failed {
                kind: upid.task_type.clone(),
                exitstatus,
            }
        }
        Err(e) if e.is_not_found() => TaskFacts::Unknown,
        Err(e) => return Err(MachineError::proxmox(format!("reading task {raw}"))(e)),
    };
    // A start of this process that ended well is laid over the lists read before it instead of
    // reading a new one. (A failed start is looked at in a new list: the VM may run anyway.)
    let confirmed = starts && facts == TaskFacts::Succeeded && vmid.is_some_and(|v| view.start_confirmed(v));
    if !confirmed
        && facts != TaskFacts::Running
        && !seen
        && let Some(vmid) = vmid
    {
        // The task ended after the listing was read: later looks need a newer one (not when that
        // listing already showed the task's effect; not for tasks no listing shows).
        let kind = if effect_seen.is_some() {
            WriteKind::Storage
        } else {
            WriteKind::of_task(&upid.task_type)
        };
        view.wrote_kind(vmid, kind);
    }
    Ok(Some(look(facts)))
}

fn power_of(status: Option<&str>) -> Option<Power> {
    match status? {
        "running" => Some(Power::Running),
        "paused" | "suspended" => Some(Power::Paused),
        "stopped" => Some(Power::Stopped),
        _ => None,
    }
}

/// The config fields `/cluster/resources` shows: name, lock, tags, template.
fn partial_config(r: &ClusterResource) -> VmConfig {
    let mut raw = std::collections::BTreeMap::new();
    let mut put = |k: &str, v: Option<&String>| {
        if let Some(v) = v {
            raw.insert(k.to_owned(), serde_json::Value::String(v.clone()));
        }
    };
    put("name", r.name.as_ref());
    put("lock", r.lock.as_ref());
    put("tags", r.tags.as_ref());
    if r.template {
        raw.insert("template".to_owned(), serde_json::json!(1));
    }
    VmConfig::from(raw)
}

/// Reads the VM on `node` directly (`status/current` + config): for VMs the shared list cannot
/// describe yet (Proxmox shows a freshly created VM without name and status for a few seconds).
async fn read_vm(view: &ProxmoxView, node: &str, vmid: u32) -> Result<Option<VmFacts>, MachineError> {
    let status = match view.client().vm_status(node, vmid).await {
        Ok(s) => s,
        Err(e) if e.is_not_found() => return Ok(None),
        Err(e) => return Err(MachineError::proxmox(format!("reading VM {vmid} on {node}"))(e)),
    };
    let Some(config) = view.config(node, vmid).await? else {
        return Ok(None);
    };
    let power = if status.is_paused() {
        Power::Paused
    } else if status.is_running() {
        Power::Running
    } else {
        Power::Stopped
    };
    Ok(Some(VmFacts {
        vmid,
        node: node.to_owned(),
        power,
        uptime_secs: if power == Power::Stopped {
            0
        } else {
            status.uptime.unwrap_or(0)
        },
        ha_managed: status.ha.managed,
        config: (*config).clone(),
    }))
}

fn classify(name: &str, vm: VmFacts) -> VmPresence {
    // A clone still running has a temporary config without a name (its answer may never have
    // been recorded: a crash or a lost response). It is not someone else's VM yet: both flows
    // wait while a VM is locked and classify it again by name once the clone is done.
    let cloning = vm.config.lock.as_deref() == Some("clone") && vm.config.name.is_none();
    if !cloning && (vm.config.template || vm.config.name.as_deref() != Some(name)) {
        VmPresence::Foreign {
            name: vm.config.name.clone(),
        }
    } else {
        VmPresence::Ours(Box::new(vm))
    }
}

/// What the pass knows about the machine's VM, and the list it came from.
#[derive(Debug, Clone)]
pub struct VmLook {
    /// The VM.
    pub presence: VmPresence,
    /// When the VM booted (running VMs only).
    pub booted: Option<Instant>,
}

/// The VM behind the recorded VMID, from the shared list (`fresh`); with its full config when
/// `need_config` (else the fields the list shows: name, lock, tags).
pub async fn vm_look(
    view: &ProxmoxView,
    name: &str,
    vmid: Option<u32>,
    fresh: Freshness,
    need_config: bool,
) -> Result<VmLook, MachineError> {
    let Some(vmid) = vmid else {
        return Ok(VmLook {
            presence: VmPresence::NotReserved,
            booted: None,
        });
    };
    let (at, snap) = view.snapshot(fresh.after(view.last_write(vmid))).await?;
    look_in(view, &snap, at, name, vmid, need_config).await
}

async fn look_in(
    view: &ProxmoxView,
    snap: &Arc<Snapshot>,
    at: Instant,
    name: &str,
    vmid: u32,
    need_config: bool,
) -> Result<VmLook, MachineError> {
    let none = |presence| VmLook {
        presence,
        booted: None,
    };
    let Some(listed) = snap.vm(vmid) else {
        return Ok(none(VmPresence::Missing));
    };
    // Tags this controller wrote after the list was read are known without reading it again.
    let overlaid;
    let r = match view.tags_written_after(vmid, at) {
        Some(tags) => {
            overlaid = ClusterResource {
                tags: Some(tags).filter(|t| !t.is_empty()),
                ..listed.clone()
            };
            &overlaid
        }
        None => listed,
    };
    let Some(node) = r.node.clone() else {
        return Ok(none(VmPresence::Missing));
    };
    let power = power_of(r.status.as_deref());
    let clone_running = r.lock.as_deref() == Some("clone");
    let Some(power) = power.filter(|_| r.name.is_some() && !clone_running) else {
        if clone_running {
            // Classified again by name once the clone is done.
            return Ok(none(VmPresence::Ours(Box::new(VmFacts {
                vmid,
                node,
                power: Power::Stopped,
                uptime_secs: 0,
                ha_managed: r.hastate.is_some(),
                config: partial_config(&ClusterResource {
                    name: None,
                    ..r.clone()
                }),
            }))));
        }
        // Too fresh for the list: read the VM itself.
        let vm = read_vm(view, &node, vmid).await?;
        let booted = vm
            .as_ref()
            .filter(|v| v.power != Power::Stopped)
            .map(|v| Instant::now() - Duration::from_secs(v.uptime_secs));
        return Ok(VmLook {
            presence: vm.map_or(VmPresence::Missing, |v| classify(name, v)),
            booted,
        });
    };
    let snapshot_age = at.elapsed();
    // A start this controller confirmed, which the list may not show yet.
    let started = view.running_since(vmid, at).filter(|_| power != Power::Running);
    let power = if started.is_some() { Power::Running } else { power };
    let uptime = match (power, started) {
        (_, Some(since)) => since.elapsed(),
        (Power::Stopped, None) => Duration::ZERO,
        _ => Duration::from_secs(r.uptime.unwrap_or(0)) + snapshot_age,
    };
    let partial = partial_config(r);
    let ours = !partial.template && partial.name.as_deref() == Some(name);
    let config = if ours && need_config {
        match view.config(&node, vmid).await? {
            Some(c) => (*c).clone(),
            None => {
                return Err(MachineError::Invalid(format!(
                    "VM {vmid} left node {node} while it was read; looking again"
                )));
            }
        }
    } else {
        partial
    };
    let vm = VmFacts {
        vmid,
        node,
        power,
        uptime_secs: uptime.as_secs(),
        ha_managed: r.hastate.is_some(),
        config,
    };
    Ok(VmLook {
        presence: classify(name, vm),
        booted: (power != Power::Stopped).then(|| Instant::now() - uptime),
    })
}

/// Whether the VM has our bootstrap ISO attached or still carries the tag that says one may exist.
pub fn bootstrap_iso_attached(vmid: u32, config: &VmConfig) -> bool {
    let file = iso_file_name(u64::from(vmid));
    config.ide0.as_deref().is_some_and(|v| v.contains(&file))
        || config.tags.iter().any(|t| t.eq_ignore_ascii_case(CLOUD_INIT_TAG))
}

/// The state of the machine's IPAM claims, with the resolution it was derived from (from the
/// watch caches).
pub fn ip_facts(
    cache: &dyn super::caches::Caches,
    version: ipam::IpamApiVersion,
    pm: &ProxmoxMachine,
    pc: &ProxmoxCluster,
) -> Result<(IpFacts, ipam::Resolution), MachineError> {
    let ns = pm.namespace().unwrap_or_default();
    let desired = ipam::desired_claims(pm, pc)?;
    let (claims, addresses) = ipam::load_cached(
        version,
        &desired,
        |n| cache.claim(&ns, n),
        |n| cache.address(&ns, n),
    );
    let resolution = ipam::resolve(&desired, &claims, &addresses);
    let facts = if !resolution.missing.is_empty() {
        IpFacts::ClaimsMissing
    } else if let Some(message) = resolution.conflict_message() {
        IpFacts::Conflict(message)
    } else if !resolution.is_complete() {
        IpFacts::Pending
    } else {
        IpFacts::Resolved(resolution.resolved.clone())
    };
    Ok((facts, resolution))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::view::ViewSettings;
    use crate::proxmox::{ClientConfig, Credentials};

    /// A view whose client points nowhere: the looks below must not send a request.
    fn offline_view() -> Arc<ProxmoxView> {
        let client = crate::proxmox::Client::new(ClientConfig::new(
            "https://pve.invalid:8006",
            Credentials::token("capmox@pve!t", "secret"),
        ))
        .unwrap();
        let settings = ViewSettings {
            observe_interval: Duration::from_secs(1),
            look_min: Duration::from_millis(100),
            look_max: Duration::from_secs(5),
        };
        let (wake, _) = futures::channel::mpsc::unbounded();
        ProxmoxView::new(client, Default::default(), Default::default(), settings, wake)
    }

    fn listed(status: &str) -> Arc<Snapshot> {
        Arc::new(Snapshot::new(
            serde_json::from_value(serde_json::json!([
                {"type": "qemu", "vmid": 200, "node": "pve1", "name": "m1", "status": status, "uptime": 0}
            ]))
            .unwrap(),
        ))
    }

    #[tokio::test]
    async fn a_confirmed_start_outweighs_a_list_that_does_not_show_it_yet() {
        let view = offline_view();
        let upid = "UPID:pve1:00001234:00005678:65000000:qmstart:200:capmox@pve!t:";
        view.started(upid, 200);
        // A list read while the start ran (another machine's pass) shows the VM stopped.
        let during = Instant::now();
        let power = |look: VmLook| match look.presence {
            VmPresence::Ours(v) => (v.power, look.booted.is_some()),
            other => panic!("{other:?}"),
        };
        let before = look_in(&view, &listed("stopped"), during, "m1", 200, false)
            .await
            .unwrap();
        assert_eq!(power(before), (Power::Stopped, false), "not confirmed yet");
        assert!(view.start_confirmed(200));
        let after = look_in(&view, &listed("stopped"), during, "m1", 200, false)
            .await
            .unwrap();
        assert_eq!(power(after), (Power::Running, true), "the task said it runs");
        // A list that shows it running tells its own uptime.
        let shown = look_in(&view, &listed("running"), Instant::now(), "m1", 200, false)
            .await
            .unwrap();
        assert_eq!(power(shown), (Power::Running, true));
        // A stop after it: lists tell again.
        view.wrote(200);
        let stopped = look_in(&view, &listed("stopped"), Instant::now(), "m1", 200, false)
            .await
            .unwrap();
        assert_eq!(power(stopped), (Power::Stopped, false));
    }

    #[test]
    fn effects_of_task_types() {
        assert_eq!(effect_of("qmclone"), Some(Expect::CloneDone));
        assert_eq!(effect_of("qmstart"), None, "confirmed by its task");
        assert_eq!(effect_of("qmdestroy"), Some(Expect::Gone));
        assert_eq!(effect_of("qmconfig"), None);
        assert_eq!(effect_of("imgcopy"), None);
    }

    #[test]
    fn list_fields_make_a_partial_config() {
        let r: ClusterResource = serde_json::from_value(serde_json::json!({
            "type": "qemu", "vmid": 200, "name": "m1", "tags": "a;go-proxmox+cloud-init", "lock": "backup"
        }))
        .unwrap();
        let c = partial_config(&r);
        assert_eq!(c.name.as_deref(), Some("m1"));
        assert_eq!(c.lock.as_deref(), Some("backup"));
        assert!(bootstrap_iso_attached(200, &c));
        assert_eq!(power_of(Some("running")), Some(Power::Running));
        assert_eq!(power_of(Some("unknown")), None);
    }
}
