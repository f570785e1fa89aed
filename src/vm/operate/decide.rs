//! The operation's decision: the VM's power state, the owner's [`Operation`] and what
//! [`OpRecord`] says was done → the single next [`OpStep`]. Pure; every step records what it did
//! before the next decision, so repeating one after a crash is harmless (a request token is
//! recorded with the step that acts on it).
//!
//! ```text
//! restart by stop+start under way → Start
//! a new power request             → Start | Shutdown | Stop (token recorded)
//! run strategy vs power state     → Shutdown | Stop | Start | ClassifyStop | (note)
//! pause wish                      → Pause | Resume
//! config                          → Reconfigure | GrowDisk | (note applied)
//! pending after a live write      → ReadPending
//! a new restart request / pending → Reboot | StopForRestart (token recorded)
//! guest facts of this boot        → ReadGuest
//! ```

use super::{OpRecord, Operation, RunStrategy};
use crate::proxmox::types::ConfigUpdate;
use crate::vm::decide::Power;

/// What the operation's decision works from.
#[derive(Debug, Clone, PartialEq)]
pub struct OpFacts<'a> {
    /// What the owner wants.
    pub op: &'a Operation,
    /// What was done.
    pub record: &'a OpRecord,
    /// The VM's power state.
    pub power: Power,
    /// Options that differ from the wanted ones (only when `config_checked`).
    pub changes: ConfigUpdate,
    /// A disk to grow (only when `config_checked`).
    pub grow: Option<(String, u64)>,
    /// The VM's config was compared with the wanted one in this pass.
    pub config_checked: bool,
}

/// A change of the record alone (no Proxmox write).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordNote {
    /// The VM is in this state now (seen).
    Seen(Power),
    /// The VM stopped and stays stopped (its run strategy does not start it again).
    StaysStopped,
    /// A request that needs no action (the VM is already as asked): its token is handled.
    Request(String),
    /// A restart request with nothing to restart (the VM is stopped): its token is handled.
    Restart(String),
    /// The VM matches the wanted config of this revision.
    Applied(i64),
    /// A restart by stop and start is over (someone started the VM meanwhile).
    RestartDone,
}

/// The single next thing to do for a VM in operation.
#[derive(Debug, Clone, PartialEq)]
pub enum OpStep {
    /// The VM was created and its run strategy does not start it: it is handed over stopped.
    Created,
    /// Start the stopped VM (a request token, when a request asks for it).
    Start(Option<String>),
    /// Shut the running VM down, stopping it hard after the timeout.
    Shutdown(Option<String>),
    /// Stop the VM hard (a paused VM cannot shut down).
    Stop(Option<String>),
    /// The VM stopped while it was to run (`RerunOnFailure`): read its recent tasks to tell a
    /// stop someone asked Proxmox for (it stays stopped) from a failure (started again).
    ClassifyStop,
    /// Pause the running VM.
    Pause,
    /// Resume the paused VM.
    Resume,
    /// Reboot the running VM through Proxmox (applies pending changes); the restart token.
    Reboot(Option<String>),
    /// Restart without the guest agent (or a paused VM): stop it hard, then start it.
    StopForRestart(Option<String>),
    /// Write these options to the VM (live where Proxmox hot-plugs them).
    Reconfigure(ConfigUpdate),
    /// Grow a disk (online).
    GrowDisk {
        /// Disk key.
        disk: String,
        /// Target size in GiB.
        size_gib: u64,
    },
    /// Read the keys Proxmox keeps pending.
    ReadPending,
    /// Read the guest's addresses and OS through the agent.
    ReadGuest,
    /// Change the record only.
    Note(RecordNote),
    /// Nothing to do.
    Idle,
}

impl OpStep {
    /// Whether the step writes to Proxmox.
    pub fn writes_to_proxmox(&self) -> bool {
        !matches!(
            self,
            Self::Created | Self::ReadPending | Self::ReadGuest | Self::Note(_) | Self::Idle
        )
    }
}

/// A request token that differs from the one recorded.
fn new_token<'a>(wanted: Option<&'a String>, handled: Option<&String>) -> Option<&'a String> {
    wanted.filter(|w| handled != Some(*w))
}

/// The next step of a VM in operation.
pub fn decide(f: &OpFacts<'_>) -> OpStep {
    let (op, r) = (f.op, f.record);
    if r.restarting {
        return match f.power {
            Power::Stopped => OpStep::Start(None),
            _ => OpStep::Note(RecordNote::RestartDone),
        };
    }
    if let Some(step) = power_request(f) {
        return step;
    }
    if let Some(step) = run_strategy(f) {
        return step;
    }
    if r.state != Some(f.power) {
        return OpStep::Note(RecordNote::Seen(f.power));
    }
    match (f.power, op.paused) {
        (Power::Running, true) => return OpStep::Pause,
        (Power::Paused, false) => return OpStep::Resume,
        _ => {}
    }
    if f.config_checked {
        if !f.changes.is_empty() {
            return OpStep::Reconfigure(f.changes.clone());
        }
        if let Some((disk, size_gib)) = f.grow.clone() {
            return OpStep::GrowDisk { disk, size_gib };
        }
        if r.applied != Some(op.revision) {
            return OpStep::Note(RecordNote::Applied(op.revision));
        }
    }
    if r.pending_unread && f.power != Power::Stopped {
        return OpStep::ReadPending;
    }
    if let Some(step) = restart(f) {
        return step;
    }
    if f.power == Power::Running && op.agent && !r.guest_read {
        return OpStep::ReadGuest;
    }
    OpStep::Idle
}

/// A new one-shot power request.
fn power_request(f: &OpFacts<'_>) -> Option<OpStep> {
    let req =
        f.op.power_request
            .as_ref()
            .filter(|q| f.record.power_request.as_deref() != Some(q.token.as_str()))?;
    let token = Some(req.token.clone());
    Some(match (req.start, f.power) {
        (true, Power::Stopped) => OpStep::Start(token),
        (false, Power::Running) => OpStep::Shutdown(token),
        (false, Power::Paused) => OpStep::Stop(token),
        _ => OpStep::Note(RecordNote::Request(req.token.clone())),
    })
}

/// What the run strategy says about the power state.
fn run_strategy(f: &OpFacts<'_>) -> Option<OpStep> {
    let r = f.record;
    let was_up = matches!(r.state, Some(Power::Running | Power::Paused));
    Some(match (f.op.run, f.power) {
        (RunStrategy::Halted, Power::Running) => OpStep::Shutdown(None),
        (RunStrategy::Halted, Power::Paused) => OpStep::Stop(None),
        (RunStrategy::Always, Power::Stopped) => OpStep::Start(None),
        (RunStrategy::RerunOnFailure, Power::Stopped) if !r.stays_stopped => {
            if was_up {
                OpStep::ClassifyStop
            } else {
                OpStep::Start(None)
            }
        }
        (RunStrategy::Manual, Power::Stopped) if was_up && !r.stays_stopped => {
            OpStep::Note(RecordNote::StaysStopped)
        }
        _ => return None,
    })
}

/// A new restart request, or pending changes with `restart_on_change`.
fn restart(f: &OpFacts<'_>) -> Option<OpStep> {
    let (op, r) = (f.op, f.record);
    let token = new_token(op.restart.as_ref(), r.restarted.as_ref()).cloned();
    let wanted = token.is_some() || (op.restart_on_change && !r.pending.is_empty());
    if !wanted {
        return None;
    }
    Some(match f.power {
        Power::Stopped => OpStep::Note(RecordNote::Restart(token?)),
        Power::Running if op.agent => OpStep::Reboot(token),
        _ => OpStep::StopForRestart(token),
    })
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
