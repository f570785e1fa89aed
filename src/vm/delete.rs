//! One deletion pass: observe → [`decide_delete`] → execute one step. Stop and destroy are tasks
//! recorded in the record and awaited before anything else happens, so a pass never issues a
//! second stop or destroy while one is running; a VM that no longer exists means that part is
//! done. What the owner holds beside the VM (addresses, its place) is the owner's to release once
//! the pass says [`DeleteStep::Finish`].

use std::sync::Arc;
use std::time::Duration;

use super::Settings;
use super::decide::{DeleteFacts, DeleteStep, IsoLocation, TaskFacts, VmFacts, VmPresence, decide_delete};
use super::error::VmError;
use super::exec::Next;
use super::spec::{VmRecord, later};
use super::{iso, observe};
use crate::proxmox::Upid;
use crate::proxmox::types::{DeleteVmOptions, StopRequest};
use crate::proxmox::view::tasks::effect_of;
use crate::proxmox::view::watch::Expect;
use crate::proxmox::view::{Owner, ProxmoxView};

/// What a deletion pass did.
#[derive(Debug)]
pub struct DeleteOutcome {
    /// The step that ran.
    pub step: DeleteStep,
    /// The record after the pass: the owner persists it.
    pub record: VmRecord,
    /// When to look again (ignored when `finished`).
    pub next: Next,
    /// What the step is doing (for the owner's "deleting" message).
    pub message: String,
    /// A stop or destroy task failed (its exit status): it is retried after the retry delay.
    pub failure: Option<String>,
    /// The VM and its ISO are gone: the owner may release the rest and finish.
    pub finished: bool,
}

/// What the pass looked at.
struct Looked {
    facts: DeleteFacts,
    task_type: String,
    task_age: Duration,
}

/// Observes the recorded task, the VM and (without a VM) its ISO.
async fn observe_delete(
    view: &ProxmoxView,
    settings: &Settings,
    name: &str,
    ha_wanted: bool,
    record: &mut VmRecord,
    vmid: u32,
) -> Result<Looked, VmError> {
    let fresh = view.freshness(Some(vmid), settings.observe_interval);
    let look = view
        .look_at_task(record.task.as_deref(), Some(vmid), fresh, str::to_owned, None)
        .await?;
    let (task_type, task_age) = look
        .as_ref()
        .map_or((String::new(), Duration::ZERO), |l| (l.task_type.clone(), l.age));
    let task = look.map(|l| l.facts);
    if task == Some(TaskFacts::Succeeded) {
        record.task = None;
    }
    // A task that ended counts as a write, so what is read from here on is new enough. A stop its
    // task confirmed does not: it is laid over the list read before it, which shows the VM as it
    // was when this owner stopped it (nothing else changes a VM being deleted that the destroy
    // would not notice).
    let stopped = task == Some(TaskFacts::Succeeded) && task_type == "qmstop";
    let max_age = if stopped {
        settings.observe_interval.max(settings.guest_poll * 12)
    } else {
        settings.observe_interval
    };
    let fresh = view.freshness(Some(vmid), max_age);
    let (vm, bootstrap_iso) = if task == Some(TaskFacts::Running) {
        (VmPresence::NotReserved, None)
    } else {
        let (presence, _) = observe::look(view, name, Some(vmid), fresh, false).await?;
        let node = match &presence {
            VmPresence::Ours(v) => Some(v.node.clone()),
            _ => record.node.clone(),
        };
        let iso = match (&presence, node) {
            (VmPresence::Ours(_), _) | (_, None) => None,
            _ if view.iso_known_removed(vmid) => None,
            (_, Some(node)) => {
                let (_, snap) = view.snapshot(fresh).await?;
                iso::find(view, &snap, &node, vmid, fresh).await?
            }
        };
        (presence, iso)
    };
    let retry_after = record.retry_left();
    if retry_after.is_none() {
        record.retry_after = None;
    }
    // Our HA resource: recorded, or wanted and listed (a crash may fall between the registration
    // and its record).
    let ha_ours = record.ha.is_some() || (ha_wanted && matches!(&vm, VmPresence::Ours(v) if v.ha_managed));
    Ok(Looked {
        facts: DeleteFacts {
            task,
            vm,
            bootstrap_iso,
            retry_after,
            ha_ours,
        },
        task_type,
        task_age,
    })
}

/// Runs one deletion pass of the VM named `name` (`ha_wanted`: the owner asks for HA, so a VM
/// Proxmox lists as HA-managed is taken to be its resource).
pub async fn delete(
    view: &Arc<ProxmoxView>,
    owner: &Owner,
    settings: &Settings,
    name: &str,
    ha_wanted: bool,
    mut record: VmRecord,
) -> Result<DeleteOutcome, VmError> {
    let Some(vmid) = record.vmid else {
        return Ok(DeleteOutcome {
            step: DeleteStep::Finish,
            record,
            next: Next::Now,
            message: String::new(),
            failure: None,
            finished: true,
        });
    };
    let looked = observe_delete(view, settings, name, ha_wanted, &mut record, vmid).await?;
    let step = decide_delete(&looked.facts);
    tracing::debug!(owner = %owner, ?step, "next delete step");
    let mut out = DeleteOutcome {
        step: step.clone(),
        record,
        next: Next::Now,
        message: String::new(),
        failure: None,
        finished: false,
    };
    let vm = match &looked.facts.vm {
        VmPresence::Ours(v) => Some(v.as_ref()),
        _ => None,
    };
    let delivered = out.record.bootstrap_delivered;
    let act = Act {
        view,
        owner,
        settings,
        name,
        vmid,
    };
    out.next = act.run(&step, &looked, vm, delivered, &mut out).await?;
    Ok(out)
}

/// The pass's means to act.
struct Act<'a> {
    view: &'a Arc<ProxmoxView>,
    owner: &'a Owner,
    settings: &'a Settings,
    name: &'a str,
    vmid: u32,
}

impl Act<'_> {
    /// Records a stop or destroy task and has the view wake the owner when its effect shows.
    fn wait_for(&self, record: &mut VmRecord, upid: &Upid, expect: Expect) -> Next {
        record.task = Some(upid.to_string());
        self.wait_again(&upid.task_type, expect, Duration::ZERO)
    }

    fn wait_again(&self, task_type: &str, expect: Expect, age: Duration) -> Next {
        let look = self.view.next_look(task_type, age);
        self.view
            .expect(self.vmid, self.owner.clone(), expect, task_type, age);
        Next::After(look * 3 + self.settings.task_poll_max)
    }

    /// Whether the stop or destroy `step` may act on VM `v`: a destroy right after this owner's
    /// own stop acts on the list that showed the stop's effect (read after it, naming the VM
    /// ours); anything else first reads the config fresh — which also tells whether the bootstrap
    /// ISO of a VM whose data was delivered is gone (detached and untagged).
    async fn may_act(
        &self,
        step: &DeleteStep,
        v: &VmFacts,
        own_stop_done: bool,
        delivered: bool,
    ) -> Result<bool, VmError> {
        if *step == DeleteStep::DestroyVm && own_stop_done {
            return Ok(true);
        }
        let Some(config) = self.view.read_config_of(&v.node, v.vmid, self.name).await? else {
            return Ok(false);
        };
        if delivered && !iso::attached(v.vmid, &config) {
            self.view.iso_removed(v.vmid);
        }
        Ok(true)
    }

    /// Executes `step`; returns when to look again.
    async fn run(
        &self,
        step: &DeleteStep,
        looked: &Looked,
        vm: Option<&VmFacts>,
        delivered: bool,
        out: &mut DeleteOutcome,
    ) -> Result<Next, VmError> {
        let s = self.settings;
        // This pass saw the owner's own stop take effect.
        let own_stop_done = looked.task_type == "qmstop" && looked.facts.task == Some(TaskFacts::Succeeded);
        Ok(match (step, vm) {
            (DeleteStep::PollTask, _) => match effect_of(&looked.task_type) {
                Some(expect) => self.wait_again(&looked.task_type, expect, looked.task_age),
                None => Next::After(self.view.next_look(&looked.task_type, looked.task_age)),
            },
            (DeleteStep::ForgetTask { failure }, _) => {
                out.record.task = None;
                if let Some(f) = failure {
                    // Not retried at once: a stop or destroy that keeps failing must not flood
                    // Proxmox with tasks (capmox #96).
                    out.record.retry_after = Some(later(s.retry_delay));
                    out.failure = Some(f.clone());
                    return Ok(if vm.is_some() {
                        Next::After(s.retry_delay)
                    } else {
                        Next::Now
                    });
                }
                Next::Now
            }
            // The owner keeps showing the failure until the retry.
            (DeleteStep::WaitForRetry(left), _) => Next::After(*left),
            (DeleteStep::WaitForUnlock(lock), Some(_)) => {
                out.message = format!("VM is locked ({lock})");
                if lock == "clone" {
                    self.wait_again("qmclone", Expect::CloneDone, Duration::ZERO)
                } else {
                    Next::After(s.task_poll_max)
                }
            }
            // The shared list was older than a change of the VM: look again with a fresh one.
            (DeleteStep::StopVm | DeleteStep::DestroyVm, Some(v))
                if !self.may_act(step, v, own_stop_done, delivered).await? =>
            {
                Next::Now
            }
            (DeleteStep::RemoveHa { sid }, Some(v)) => {
                out.message = format!("removing HA resource {sid}");
                self.view
                    .delete_ha(v.vmid, sid)
                    .await
                    .map_err(VmError::proxmox(format!("removing HA resource {sid}")))?;
                out.record.ha = None;
                Next::Now
            }
            (DeleteStep::StopVm, Some(v)) => {
                out.message = format!("stopping VM {}", v.vmid);
                match self.view.stop(&v.node, v.vmid, &StopRequest::default()).await {
                    // Read from its task when it should be done: the list's power state lags.
                    Ok(upid) => {
                        out.record.task = Some(upid.to_string());
                        Next::After(self.view.next_look(&upid.task_type, Duration::ZERO))
                    }
                    Err(e) if e.is_not_found() => Next::Now,
                    Err(e) => return Err(VmError::proxmox(format!("stopping VM {}", v.vmid))(e)),
                }
            }
            (DeleteStep::DestroyVm, Some(v)) => {
                out.message = format!("destroying VM {}", v.vmid);
                let opts = DeleteVmOptions {
                    purge: Some(true),
                    destroy_unreferenced_disks: Some(true),
                };
                match self.view.destroy(&v.node, v.vmid, &opts).await {
                    Ok(upid) => self.wait_for(&mut out.record, &upid, Expect::Gone),
                    Err(e) if e.is_not_found() => Next::Now,
                    Err(e) => return Err(VmError::proxmox(format!("destroying VM {}", v.vmid))(e)),
                }
            }
            (DeleteStep::DeleteIso(loc), _) => self.delete_iso(loc, out).await?,
            (DeleteStep::Finish, _) => {
                self.view.forget_vm(self.vmid);
                self.view.guests.forget(self.owner);
                out.finished = true;
                Next::Now
            }
            (other, None) => {
                return Err(VmError::Invalid(format!("delete step {other:?} without a VM")));
            }
        })
    }

    async fn delete_iso(&self, loc: &IsoLocation, out: &mut DeleteOutcome) -> Result<Next, VmError> {
        out.message = format!("deleting {}", loc.volid);
        let deleted = self
            .view
            .delete_iso(self.vmid, loc)
            .await
            .map_err(VmError::proxmox(format!("deleting {}", loc.volid)))?;
        Ok(match deleted {
            Some(upid) => {
                out.record.task = Some(upid.to_string());
                Next::After(self.view.next_look("imgdel", Duration::ZERO))
            }
            None => Next::Now,
        })
    }
}
