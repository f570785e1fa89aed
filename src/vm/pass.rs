//! One pass of the lifecycle: observe → decide → execute one step → report. The owner persists
//! the returned record afterwards (and runs the next pass at once when the outcome says so).

use std::sync::Arc;
use std::time::Duration;

use super::Settings;
use super::adapter::{Adapter, Addresses, Provisioned, Report};
use super::decide::{Facts, Power, Step, TaskFacts, VmPresence, decide};
use super::exec::{self, Env, Next, StepResult};
use super::spec::{VmRecord, VmSpec, later};
use super::{iso, observe, operate};
use crate::proxmox::view::tasks::effect_of;
use crate::proxmox::view::{Owner, ProxmoxView, TaskLook, VmFacts};

pub use super::delete::{DeleteOutcome, delete};

/// What a provisioning pass did.
#[derive(Debug)]
pub struct Outcome<E> {
    /// The step that ran.
    pub step: Step,
    /// The record after the pass: the owner persists it.
    pub record: VmRecord,
    /// When to look again.
    pub next: Next,
    /// What to show.
    pub report: Report,
    /// The step's error (already reflected in the report's message).
    pub error: Option<E>,
    /// The VM's power state as observed (`None`: not looked at).
    pub power: Option<Power>,
    /// The owner's addresses as this pass saw them (`None`: not looked at).
    pub addresses: Option<Addresses>,
    /// The VM became provisioned in this pass.
    pub provisioned: Option<Provisioned>,
    /// What the guest agent told about the running guest (an operation's guest read).
    pub guest: Option<super::operate::GuestFacts>,
    /// The VM's tags as observed (`None`: not looked at): what it was configured with, e.g. its
    /// address tags.
    pub vm_tags: Option<Vec<String>>,
}

/// How old the shared list may be for this pass. Provisioned VMs are only looked at by the
/// safety resync: any list of that age will do. Between its tasks a VM in flight changes only by
/// this process's writes, which already demand a newer list (`ProxmoxView::freshness`); a VM
/// waiting for its guest changes little (the guest agent tells when it stopped): a list a dozen
/// guest checks old will do. The placement of a VM without a VMID and the effect of a running
/// clone or stop want a list of the moment (ISO and config tasks do not show in it; a start is
/// confirmed by its task).
fn max_age(s: &Settings, record: &VmRecord) -> Duration {
    let task_shows_in_list = record
        .task
        .as_deref()
        .and_then(|t| crate::proxmox::Upid::parse(t).ok())
        .is_some_and(|u| effect_of(&u.task_type).is_some());
    if record.provisioned {
        s.resync
    } else if record.vmid.is_some() && !task_shows_in_list {
        s.observe_interval.max(s.guest_poll * 12)
    } else {
        s.observe_interval
    }
}

/// The step of a pass: the spec's refusal, else the lifecycle's decision, which the operation may
/// replace once the VM exists.
fn choose_step(spec: &VmSpec, facts: &Facts, record: &VmRecord, vm: Option<&VmFacts>) -> Step {
    let step = match &spec.refusal {
        Some(f) if !record.provisioned => Step::Fail(f.clone()),
        _ => decide(facts),
    };
    match (&spec.operation, vm) {
        (Some(op), Some(v)) => {
            let live = if record.provisioned && operate::needs_config(op, &record.operation) {
                operate::live::live_facts(&spec.desired, &v.config)
            } else {
                operate::LiveFacts::default()
            };
            operate::select(step, facts, op, &record.operation, live)
        }
        _ => step,
    }
}

/// Runs one provisioning pass of the VM `spec` wants, with what `record` says was done.
pub async fn provision<A: Adapter>(
    view: &Arc<ProxmoxView>,
    owner: &Owner,
    settings: &Settings,
    spec: &VmSpec,
    adapter: &A,
    mut record: VmRecord,
) -> Result<Outcome<A::Error>, A::Error> {
    let vmid = record.vmid;
    let max_age = max_age(settings, &record);
    let fresh = view.freshness(vmid, max_age);
    let full = spec.clone.full;
    let key = |t: &str| exec::timing_key(full, t);
    let iso_storage = spec.bootstrap.iso_storage.as_deref();
    let (effect, iso_at) =
        observe::iso_task_effect(view, iso_storage, record.task.as_deref(), vmid, fresh).await?;
    let look: Option<TaskLook> = view
        .look_at_task(record.task.as_deref(), vmid, fresh, key, effect)
        .await?;
    let task = look.as_ref().map(|l| l.facts.clone());
    // A task that ended counts as a write: what is read from here on must be newer.
    let fresh = view.freshness(vmid, max_age);
    if task == Some(TaskFacts::Succeeded) {
        record.task = None;
    }
    let retry_after = record.retry_left();
    if retry_after.is_none() {
        record.retry_after = None;
    }
    // While a task runs the decision is to wait for it: the VM is not looked at.
    let (vm, booted) = if task == Some(TaskFacts::Running) {
        (VmPresence::NotReserved, None)
    } else {
        let need_config = (!record.provisioned && !record.bootstrap_delivered)
            || spec
                .operation
                .as_ref()
                .is_some_and(|op| record.provisioned && operate::needs_config(op, &record.operation));
        observe::look(view, &spec.name, vmid, fresh, need_config).await?
    };
    // A provisioned VM's addresses are looked at too (from the owner's caches), so that lost ones
    // are asked for again; there an owner that cannot tell (e.g. a zone gone since) is no error.
    let addresses = match &vm {
        VmPresence::Ours(_) if !record.provisioned => Some(adapter.addresses()?),
        VmPresence::Ours(_) => adapter.addresses().ok(),
        _ => None,
    };
    let vm_facts = match &vm {
        VmPresence::Ours(v) => Some(v.as_ref()),
        _ => None,
    };
    if let Some(v) = vm_facts
        && record.node.as_deref() != Some(v.node.as_str())
    {
        record.node = Some(v.node.clone());
        // The VM moved (e.g. migrated): the owner's placement record follows it.
        adapter.moved(&v.node).await?;
    }
    let facts = Facts {
        desired: spec.desired.clone(),
        task: task.clone(),
        retry_after,
        addresses: addresses
            .as_ref()
            .map_or(super::AddressFacts::NotChecked, |a| a.facts.clone()),
        bootstrap_delivered: record.bootstrap_delivered,
        failed_terminally: record.failed_terminally,
        provisioned: record.provisioned,
        bootstrap_consumed: spec.bootstrap.consumed,
        bootstrap_iso_attached: vm_facts.is_some_and(|v| iso::attached(v.vmid, &v.config)),
        vm: vm.clone(),
        ha: spec.ha.clone(),
        ha_applied: record.ha.clone(),
        identity: record.identity.clone(),
    };
    let step = choose_step(spec, &facts, &record, vm_facts);
    tracing::debug!(owner = %owner, ?step, "next step");
    let env = Env {
        view,
        fresh,
        owner,
        spec,
        settings,
        vm: vm_facts,
        booted,
        adapter,
        addresses: addresses.as_ref(),
    };
    let (mut result, error) = match exec::execute(&step, &env, &mut record).await {
        Ok(r) => (r, None),
        Err(e) => (
            StepResult::next(Next::After(settings.task_poll_initial)).with_message(e.to_string()),
            Some(e),
        ),
    };
    if step == Step::PollTask
        && let Some(l) = &look
    {
        result.next = exec::wait_for_task(&env, vmid, &l.task_type, &key(&l.task_type), l.age, iso_at);
    }
    // A retried failure records when it may be retried, so the next pass waits instead of
    // repeating it, and a failure without one is recognisably terminal.
    if let Some(delay) = result.report.failure.as_ref().and_then(|f| f.retry_after)
        && record.retry_after.is_none()
    {
        record.retry_after = Some(later(delay));
    }
    Ok(Outcome {
        step,
        record,
        next: result.next,
        report: result.report,
        error,
        power: vm_facts.map(|v| v.power),
        addresses,
        provisioned: result.provisioned,
        guest: result.guest,
        vm_tags: vm_facts.map(|v| v.config.tags.clone()),
    })
}
