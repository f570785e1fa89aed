//! Looking at a task this process (or an earlier one) recorded: first by its effect — in the
//! shared list (a clone or destroy: what the cluster's VM list shows at once), or in a storage
//! listing the caller checked (an ISO import or deletion) — and only when that does not tell, by
//! asking Proxmox for the task. A power change (start, stop, shutdown, …) is read from its task
//! when it should be done: the list's power state comes from pvestatd and lags by up to ~10 s.
//! A task that ends is learned from ([`super::timing`]) and makes what it changed stale; a power
//! change that ended well is laid over the lists read before it instead
//! ([`super::writes::Writes::confirmed`]).

use std::time::Duration;

use super::watch::Expect;
use super::writes::WriteKind;
use super::{Freshness, ProxmoxView, ViewError, lock};
use crate::proxmox::{ErrorClass, Upid};

/// How much earlier than its first look a start's task may be read (a pass scheduled for the
/// first look may run a little early).
const FIRST_LOOK_SLACK: Duration = Duration::from_millis(100);

/// Outcome of a recorded Proxmox task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskFacts {
    /// Still running.
    Running,
    /// Finished with `OK` or `WARNINGS: N`.
    Succeeded,
    /// Finished with another exit status.
    Failed {
        /// Task type from the UPID (`qmclone`, `qmstart`, …).
        kind: String,
        /// The exit status text.
        exitstatus: String,
    },
    /// Proxmox does not know the task (e.g. the node was reinstalled): forget it.
    Unknown,
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

/// The power state a task of this type leaves the VM in when it succeeds: such tasks are
/// confirmed by their task alone, read when they should be done (`None`: not a power change).
fn leaves(task_type: &str) -> Option<super::Power> {
    match task_type {
        "qmstart" | "qmresume" | "qmreboot" | "qmreset" => Some(super::Power::Running),
        "qmpause" => Some(super::Power::Paused),
        "qmstop" | "qmshutdown" => Some(super::Power::Stopped),
        _ => None,
    }
}

/// The VM state that shows a task of this type is over (`None`: only the task can tell).
///
/// A power change is confirmed by its task alone, not by the list: the list's power state lags
/// (pvestatd), and Proxmox may report a failed start of a VM that runs anyway, which is worth a
/// warning, so its task is read in any case — and a task that ended well tells the new state.
pub fn effect_of(task_type: &str) -> Option<Expect> {
    match task_type {
        "qmclone" => Some(Expect::CloneDone),
        "qmdestroy" => Some(Expect::Gone),
        _ => None,
    }
}

impl ProxmoxView {
    /// Looks at the task `task_ref` of VM `vmid` (see the module documentation). `effect_seen`
    /// is what the caller saw in a storage listing for ISO tasks (`None`: not an ISO task). A
    /// malformed or unknown UPID reads as [`TaskFacts::Unknown`]. Learns the duration of
    /// finished tasks under `timing_key` (the task type unless the caller knows better).
    pub async fn look_at_task(
        &self,
        task_ref: Option<&str>,
        vmid: Option<u32>,
        fresh: Freshness,
        timing_key: impl Fn(&str) -> String,
        effect_seen: Option<bool>,
    ) -> Result<Option<TaskLook>, ViewError> {
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
        let age = self.task_age(raw, upid.starttime);
        let key = timing_key(&upid.task_type);
        let look = |facts| TaskLook {
            facts,
            task_type: upid.task_type.clone(),
            age,
        };
        let mut seen = effect_seen.unwrap_or(false);
        if !seen && let (Some(expect), Some(vmid)) = (effect_of(&upid.task_type), vmid) {
            let fresh = fresh.after(lock(&self.writes).last_vm(vmid));
            // Before its first look (a pass another trigger brought early), the task is looked
            // for only in a list already read: a new one is requested when it should be done.
            let early = age + FIRST_LOOK_SLACK < self.timing.first_look(&key).min(self.settings.look_max);
            let snap = if early {
                self.resources
                    .peek()
                    .filter(|(at, _)| fresh.accepts(*at, std::time::Instant::now()))
                    .map(|(_, snap)| snap)
            } else {
                Some(self.snapshot(fresh).await?.1)
            };
            seen = snap.is_some_and(|snap| expect.met(snap.vm(vmid)));
        }
        // A task whose effect can be seen and does not show yet, while it is not overdue, still
        // runs: its status is asked for only when it is overdue (to notice a failure).
        let visible = effect_seen.is_some() || effect_of(&upid.task_type).is_some();
        let overdue = (self.timing.estimate(&key) * 2).min(self.settings.look_max);
        if !seen && visible && age < overdue {
            return Ok(Some(look(TaskFacts::Running)));
        }
        if seen {
            let took = self.finished(raw).unwrap_or(age);
            self.task_done(&key, took);
            // What the view's refresher would have looked for was seen by this pass.
            if let Some(vmid) = vmid {
                self.waits.remove(vmid);
            }
            return Ok(Some(look(TaskFacts::Succeeded)));
        }
        // A power change is read when it should be done (a pass that comes earlier waits without a
        // request).
        let power_change = leaves(&upid.task_type).is_some();
        if power_change && age + FIRST_LOOK_SLACK < self.timing.first_look(&key).min(self.settings.look_max) {
            return Ok(Some(look(TaskFacts::Running)));
        }
        let facts = self.ask_for_task(raw, &upid, &key, age).await?;
        if facts != TaskFacts::Running
            && let Some(vmid) = vmid
        {
            self.waits.remove(vmid);
        }
        if let (TaskFacts::Failed { .. }, Some(vmid)) = (&facts, vmid) {
            // A failed config task may have applied nothing: the config is read again.
            self.forget_config(vmid);
        }
        // A start of this process that ended well is laid over the lists read before it instead of
        // reading a new one. (A failed start is looked at in a new list: the VM may run anyway.)
        let confirmed = facts == TaskFacts::Succeeded
            && leaves(&upid.task_type)
                .zip(vmid)
                .is_some_and(|(power, v)| lock(&self.writes).confirmed(v, power));
        if !confirmed
            && facts != TaskFacts::Running
            && let Some(vmid) = vmid
        {
            // The task ended after the listing was read: later looks need a newer one (not for
            // tasks no listing shows).
            let kind = if effect_seen.is_some() {
                WriteKind::Storage
            } else {
                WriteKind::of_task(&upid.task_type)
            };
            self.record(vmid, kind);
        }
        Ok(Some(look(facts)))
    }

    /// Asks Proxmox for the task's status (and, for a failure, its cause from the task log).
    async fn ask_for_task(
        &self,
        raw: &str,
        upid: &Upid,
        key: &str,
        age: Duration,
    ) -> Result<TaskFacts, ViewError> {
        Ok(match self.client.task_status(upid).await {
            Ok(s) if !s.is_finished() => TaskFacts::Running,
            Ok(s) if s.is_success() => {
                let took = self.finished(raw).unwrap_or(age);
                self.task_done(key, took);
                TaskFacts::Succeeded
            }
            // A deletion that found the file gone (an interrupted earlier pass deleted it) did its job.
            Ok(s)
                if upid.task_type == "imgdel"
                    && crate::proxmox::error::classify_task_exitstatus(
                        s.exitstatus.as_deref().unwrap_or_default(),
                    ) == Some(ErrorClass::NotFound) =>
            {
                self.finished(raw);
                TaskFacts::Succeeded
            }
            Ok(s) => {
                self.finished(raw);
                let mut exitstatus = s.exitstatus.clone().unwrap_or_else(|| "unknown error".to_owned());
                // A failed start names its cause only in the task log (an unknown bridge, ...).
                if let Some(detail) = self.client.task_failure_detail(upid, &exitstatus).await {
                    exitstatus = format!("{exitstatus} ({detail})");
                }
                TaskFacts::Failed {
                    kind: upid.task_type.clone(),
                    exitstatus,
                }
            }
            Err(e) if e.is_not_found() => TaskFacts::Unknown,
            Err(e) => return Err(ViewError::proxmox(format!("reading task {raw}"))(e)),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn effects_of_task_types() {
        assert_eq!(effect_of("qmclone"), Some(Expect::CloneDone));
        assert_eq!(effect_of("qmstart"), None, "confirmed by its task");
        assert_eq!(effect_of("qmstop"), None, "the list's power state lags: its task");
        assert_eq!(effect_of("qmshutdown"), None);
        assert_eq!(leaves("qmstop"), Some(super::super::Power::Stopped));
        assert_eq!(effect_of("qmdestroy"), Some(Expect::Gone));
        assert_eq!(effect_of("qmconfig"), None);
        assert_eq!(effect_of("imgcopy"), None);
    }

    #[tokio::test]
    async fn a_clone_looked_at_before_its_first_look_runs_without_a_request() {
        // A view whose client points nowhere: a request would fail the look.
        let view = super::super::look::tests::offline_view();
        let upid = "UPID:pve1:00001234:00005678:65000000:qmclone:100:capmox@pve!t:";
        view.started(upid, 200);
        let look = view
            .look_at_task(
                Some(upid),
                Some(200),
                Freshness::within(Duration::from_secs(1)),
                str::to_owned,
                None,
            )
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            look.facts,
            TaskFacts::Running,
            "no list was read: the client points nowhere"
        );
        assert_eq!(look.task_type, "qmclone");
    }
}
