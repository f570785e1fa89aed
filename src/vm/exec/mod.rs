//! Carries out one [`Step`] of the provisioning decision: the Proxmox writes of that step (through
//! the view, which records what they make stale) and the owner's part (through the
//! [`Adapter`]), changing the [`VmRecord`] it is given and reporting what happened. Every step
//! either finishes with Proxmox's state changed (so the next decision moves on) or records the
//! task it started before anything else happens.

pub mod bootstrap;
pub mod guest;
pub mod ha;
pub mod place;

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::Settings;
use super::adapter::{Adapter, Addresses, Provisioned, Report};
use super::decide::{Failure, Reason, Step, VmFacts};
use super::error::VmError;
use super::spec::{VmRecord, VmSpec, later};
use crate::proxmox::types::ResizeRequest;
use crate::proxmox::view::tasks::effect_of;
use crate::proxmox::view::timing;
use crate::proxmox::view::watch::Expect;
use crate::proxmox::view::{Freshness, Owner, ProxmoxView};
use crate::proxmox::{ErrorClass, Upid};

/// When the owner should look at the VM again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Right away (the step changed something the next decision depends on).
    Now,
    /// After this delay (a task or the guest is busy).
    After(Duration),
    /// When something the owner watches changes; the owner adds a long safety-net requeue.
    Watch,
}

/// What a step did, besides the record it changed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepResult {
    /// When to look again.
    pub next: Next,
    /// What to show.
    pub report: Report,
    /// The VM became provisioned in this step.
    pub provisioned: Option<Provisioned>,
    /// What the guest agent told about the running guest (an operation's guest read).
    pub guest: Option<crate::vm::operate::GuestFacts>,
}

impl StepResult {
    /// A step that finished; look again per `next`.
    pub fn next(next: Next) -> Self {
        Self {
            next,
            report: Report::default(),
            provisioned: None,
            guest: None,
        }
    }

    /// The same result with a message.
    pub fn with_message(mut self, message: impl Into<String>) -> Self {
        self.report.message = message.into();
        self
    }

    /// A failed step: shows `reason`; retried after `retry_after` (`None`: terminal).
    pub fn failed(reason: Reason, message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        Self {
            next: retry_after.map_or(Next::Watch, Next::After),
            report: Report::failed(Failure {
                reason,
                message: message.into(),
                retry_after,
            }),
            provisioned: None,
            guest: None,
        }
    }

    /// The same (failed) result with a Warning event of the failure's reason and message.
    pub fn warned(mut self) -> Self {
        if let Some(f) = &self.report.failure {
            self.report.warning = Some((f.reason, f.message.clone()));
        }
        self
    }
}

/// Everything a step may read.
pub struct Env<'a, A: Adapter> {
    /// What this process knows about the VM's Proxmox cluster (and its client).
    pub view: &'a Arc<ProxmoxView>,
    /// How fresh this pass's shared reads must be.
    pub fresh: Freshness,
    /// The owner (to be woken by the view).
    pub owner: &'a Owner,
    /// What the owner wants.
    pub spec: &'a VmSpec,
    /// Timeouts and delays.
    pub settings: &'a Settings,
    /// The VM, when it exists.
    pub vm: Option<&'a VmFacts>,
    /// When the VM booted (running VMs).
    pub booted: Option<Instant>,
    /// The owner's side.
    pub adapter: &'a A,
    /// The owner's addresses, when they were looked at.
    pub addresses: Option<&'a Addresses>,
}

impl<A: Adapter> Env<'_, A> {
    pub(super) fn vm(&self) -> Result<&VmFacts, VmError> {
        self.vm
            .ok_or_else(|| VmError::Invalid("the step needs the VM but it was not observed".into()))
    }

    /// The timing key of a task type (clones by kind).
    pub fn timing_key(&self, task_type: &str) -> String {
        timing_key(self.spec.clone.full, task_type)
    }
}

/// The timing key of a task type: clones by kind (full or linked).
pub fn timing_key(full_clone: bool, task_type: &str) -> String {
    if task_type == "qmclone" {
        timing::clone_key(full_clone).to_owned()
    } else {
        task_type.to_owned()
    }
}

/// When to look at a task of `task_type` (timing key `key`) that has run for `age` again. A task
/// whose effect shows in the shared VM list — or, for ISO imports and deletions, in the listing
/// of `iso` (`(node, storage)`) — also makes the view wake the owner when it does (the returned
/// delay is then only a safety net).
pub fn wait_for_task<A: Adapter>(
    env: &Env<'_, A>,
    vmid: Option<u32>,
    task_type: &str,
    key: &str,
    age: Duration,
    iso: Option<(String, String)>,
) -> Next {
    let view = env.view;
    let look = view.next_look(key, age);
    let expect = match (task_type, iso, vmid) {
        ("imgcopy", Some((node, storage)), Some(id)) => Some(Expect::IsoPresent {
            volid: super::iso::volid(&storage, id),
            node,
            storage,
        }),
        ("imgdel", Some((node, storage)), Some(id)) => Some(Expect::IsoGone {
            volid: super::iso::volid(&storage, id),
            node,
            storage,
        }),
        _ => effect_of(task_type),
    };
    match (expect, vmid) {
        (Some(expect), Some(vmid)) => {
            view.expect(vmid, env.owner.clone(), expect, key, age);
            Next::After(look * 3 + env.settings.task_poll_max)
        }
        _ => Next::After(look),
    }
}

/// Records a task this pass started so the next passes wait for it instead of repeating the
/// call (`iso`: where the ISO an import or deletion works on lives).
pub fn record_task<A: Adapter>(
    record: &mut VmRecord,
    env: &Env<'_, A>,
    vmid: u32,
    upid: &Upid,
    iso: Option<(String, String)>,
) -> Next {
    record.task = Some(upid.to_string());
    let key = env.timing_key(&upid.task_type);
    wait_for_task(env, Some(vmid), &upid.task_type, &key, Duration::ZERO, iso)
}

/// Runs `step` against Proxmox and the owner, recording its results in `record`.
pub async fn execute<A: Adapter>(
    step: &Step,
    env: &Env<'_, A>,
    record: &mut VmRecord,
) -> Result<StepResult, A::Error> {
    let s = env.settings;
    Ok(match step {
        Step::WaitForAddresses | Step::Idle | Step::StayFailed => StepResult::next(Next::Watch),
        Step::WaitForRetry(left) => StepResult::next(Next::After(*left)),
        // The pass computes when to look at the task again.
        Step::PollTask => StepResult::next(Next::After(s.task_poll_initial)),
        Step::WaitForUnlock(lock) => {
            let vm = env.vm()?;
            let next = if lock == "clone" {
                let key = env.timing_key("qmclone");
                wait_for_task(env, Some(vm.vmid), "qmclone", &key, Duration::ZERO, None)
            } else {
                Next::After(s.task_poll_max)
            };
            StepResult::next(next).with_message(format!("VM is locked ({lock})"))
        }
        Step::ForgetTask => {
            record.task = None;
            StepResult::next(Next::Now)
        }
        Step::HandleFailedTask { kind, exitstatus } => failed_task(record, kind, exitstatus, s),
        Step::ReserveVm => place::reserve(env, record).await?,
        Step::CloneVm => clone(env, record).await?,
        Step::ForgetVmid { holder } => {
            let vmid = record.vmid.unwrap_or_default();
            record.vmid = None;
            record.node = None;
            let mut r = StepResult::next(Next::Now);
            r.report.warning = Some((
                Reason::VmidTaken,
                format!(
                    "VMID {vmid} was taken by VM {:?} before the clone; choosing another",
                    holder.as_deref().unwrap_or_default()
                ),
            ));
            r
        }
        Step::ConfigureVm(update) => {
            let vm = env.vm()?;
            match env.view.configure(&vm.node, vm.vmid, update).await {
                // The VM is stopped and the task applies exactly this: the view's config follows
                // (a failed task makes the next pass read it again).
                Ok(upid) => StepResult::next(match upid {
                    Some(upid) => record_task(record, env, vm.vmid, &upid, None),
                    None => Next::Now,
                }),
                // The write may have happened with its answer lost: the next pass reads the
                // config again (a data disk is never allocated twice: its slot then exists).
                Err(e) if update.sets_disks() && !e.is_retryable() => StepResult::failed(
                    Reason::VolumesFailed,
                    format!("creating the additional volumes of VM {}: {e}", vm.vmid),
                    Some(s.retry_delay),
                )
                .warned(),
                Err(e) => return Err(VmError::proxmox(format!("configuring VM {}", vm.vmid))(e).into()),
            }
        }
        Step::ResizeBootDisk { disk, size_gib } => {
            let vm = env.vm()?;
            let upid = env
                .view
                .resize(&vm.node, vm.vmid, &ResizeRequest::to_gib(disk.clone(), *size_gib))
                .await
                .map_err(VmError::proxmox(format!("resizing {disk} of VM {}", vm.vmid)))?;
            StepResult::next(match upid {
                Some(upid) => record_task(record, env, vm.vmid, &upid, None),
                None => Next::Now,
            })
        }
        Step::ObtainAddresses => {
            let report = env.adapter.obtain_addresses().await?;
            let next = match report.failure.as_ref().and_then(|f| f.retry_after) {
                Some(delay) => Next::After(delay),
                None => Next::Watch,
            };
            StepResult {
                next,
                report,
                provisioned: None,
                guest: None,
            }
        }
        Step::AddressConflict(message) => {
            StepResult::next(Next::After(s.retry_delay)).with_message(message.clone())
        }
        Step::DeliverBootstrapData => bootstrap::deliver(env, record).await?,
        Step::PowerOn | Step::Resume => {
            let vm = env.vm()?;
            let upid = if *step == Step::Resume {
                env.view.resume(&vm.node, vm.vmid).await
            } else {
                env.view.start(&vm.node, vm.vmid, &Default::default()).await
            }
            .map_err(VmError::proxmox(format!("starting VM {}", vm.vmid)))?;
            StepResult::next(record_task(record, env, vm.vmid, &upid, None))
        }
        Step::ApplyHa(wanted) => ha::apply(env, record, wanted).await?,
        Step::RemoveHa(applied) => ha::remove(env, record, applied).await?,
        Step::CheckGuest => guest::check(env, record).await?,
        Step::RemoveBootstrapIso => bootstrap::remove(env).await?,
        Step::Operate(op) => crate::vm::operate::exec::execute(op, env, record).await?,
        Step::Adopt { provisioned } => adopt(env, record, *provisioned)?,
        Step::Fail(f) => {
            if let Some(delay) = f.retry_after {
                record.retry_after = Some(later(delay));
            }
            StepResult::failed(f.reason, f.message.clone(), f.retry_after)
        }
    })
}

/// Clones the VM ([`place::clone`]) and asks for its addresses while Proxmox copies the disks, so
/// the owner's IPAM works meanwhile instead of after the clone. What comes of the asking (a
/// missing pool, …) is the later ObtainAddresses step's to report.
async fn clone<A: Adapter>(env: &Env<'_, A>, record: &mut VmRecord) -> Result<StepResult, A::Error> {
    let mut r = place::clone(env, record).await?;
    if record.task.is_some() {
        // What the owner knows of them first (from its caches): the asking reports on it.
        let _ = env.adapter.addresses();
        match env.adapter.obtain_addresses().await {
            // A warning of the asking (e.g. claims made again for orphaned addresses) is shown.
            Ok(report) if r.report.warning.is_none() => r.report.warning = report.warning,
            Ok(_) => {}
            Err(e) => {
                tracing::debug!(owner = %env.owner, error = %e, "asking for the addresses with the clone");
            }
        }
    }
    Ok(r)
}

/// Records what the VM shows was done (see [`Step::Adopt`]); no Proxmox request.
fn adopt<A: Adapter>(
    env: &Env<'_, A>,
    record: &mut VmRecord,
    provisioned: bool,
) -> Result<StepResult, VmError> {
    let vm = env.vm()?;
    record.bootstrap_delivered = true;
    let mut r = StepResult::next(Next::Now).with_message(format!(
        "adopted VM {}: it ran with this owner's bootstrap data",
        vm.vmid
    ));
    if provisioned {
        record.provisioned = true;
        r.provisioned = Some(Provisioned {
            uuid: vm.config.smbios_uuid.clone(),
            learnt: Vec::new(),
        });
    }
    Ok(r)
}

fn failed_task(record: &mut VmRecord, kind: &str, exitstatus: &str, s: &Settings) -> StepResult {
    // Lock contention and other transient task failures (e.g. parallel clones onto node-local
    // storage, capmox #389) are retried soon; anything else waits the full retry delay.
    let transient = crate::proxmox::error::classify_task_exitstatus(exitstatus)
        .is_some_and(|c| matches!(c, ErrorClass::Locked | ErrorClass::Server));
    let delay = if transient {
        s.retry_delay.min(s.task_poll_max)
    } else {
        s.retry_delay
    };
    record.task = None;
    record.retry_after = Some(later(delay));
    let reason = match kind {
        "qmclone" => Reason::CloneFailed,
        "qmstart" | "qmresume" => Reason::StartFailed,
        _ => Reason::TaskFailed,
    };
    let mut r = StepResult::failed(reason, format!("{kind}: {exitstatus}"), Some(delay));
    r.report.warning = Some((reason, format!("Proxmox task {kind} failed: {exitstatus}")));
    r
}
