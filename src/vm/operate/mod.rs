//! Operating a VM after it was created — for owners that keep a VM running as their spec says
//! rather than provisioning it once (a standalone VM; a ProxmoxMachine has no [`Operation`] and
//! is only provisioned):
//!
//! * power intent: a run strategy ([`RunStrategy`]: keep it running, rerun it after a failure,
//!   keep it halted, or power it only on request), a pause wish, a one-shot restart and one-shot
//!   power requests (tokens acted on once);
//! * live reconfiguration: the options of [`super::desired::DesiredVm`] that differ from the
//!   VM's config are written to the running VM — Proxmox applies what it hot-plugs and keeps the
//!   rest pending — and disks grow online; the pending keys are read back once after a write, and
//!   a restart (asked for, or by itself with `restart_on_change`) applies them.
//!
//! [`decide`] is pure (facts in, one [`OpStep`] out, table-tested in `decide_tests.rs`), like the
//! provisioning decision it extends: the lifecycle's pass asks it whenever the provisioning
//! decision has nothing left to do ([`select`]); [`exec`] carries a step out through the view and
//! records in [`OpRecord`] what a later pass must know (the tokens handled, the state the VM was
//! brought to, the pending keys) before anything else happens.

pub mod decide;
pub mod exec;
pub mod guest;
pub mod live;

use std::time::Duration;

pub use decide::{OpFacts, OpStep, RecordNote, decide};

use super::decide::{Facts, Power, Step, VmPresence};

/// How the VM is powered (KubeVirt's run strategies).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum RunStrategy {
    /// Keep it running: start it whenever it is found stopped.
    #[default]
    Always,
    /// Start it again after a failure (it stopped without anyone asking Proxmox to stop it), not
    /// after a stop or shutdown someone asked Proxmox for.
    RerunOnFailure,
    /// Shut it down (hard stop after the timeout) and keep it stopped.
    Halted,
    /// Powered only by explicit requests.
    Manual,
}

impl RunStrategy {
    /// Whether the VM is started right after its creation.
    pub fn starts_at_creation(self) -> bool {
        matches!(self, Self::Always | Self::RerunOnFailure)
    }
}

/// A one-shot power request (acted on once: its token is recorded).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PowerRequest {
    /// Start (else stop).
    pub start: bool,
    /// Identifies the request (e.g. the annotation's value).
    pub token: String,
}

/// What the owner wants of a VM after its creation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation {
    /// The run strategy.
    pub run: RunStrategy,
    /// Keep the running VM paused.
    pub paused: bool,
    /// A restart request (acted on once when it differs from the one recorded).
    pub restart: Option<String>,
    /// A power request (acted on once when it differs from the one recorded).
    pub power_request: Option<PowerRequest>,
    /// How long a shutdown (or the shutdown half of a reboot) may take.
    pub shutdown_timeout: Duration,
    /// Restart by itself when Proxmox keeps changes pending.
    pub restart_on_change: bool,
    /// The guest agent is on: a restart is a guest reboot, the guest's addresses come from it.
    pub agent: bool,
    /// The revision of the wanted config (e.g. the object's generation): while it is not the one
    /// recorded as applied, the VM's config is compared with the wanted one.
    pub revision: i64,
    /// The guest's NICs whose addresses are reported (`net0`, …; empty: every interface).
    pub nics: Vec<String>,
}

/// What has been done in operating the VM (the owner persists it with the
/// [`super::VmRecord`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OpRecord {
    /// The last restart request acted on.
    pub restarted: Option<String>,
    /// The last power request acted on.
    pub power_request: Option<String>,
    /// The state the VM was last brought to or seen in (`None`: not known yet).
    pub state: Option<Power>,
    /// The VM stopped and its run strategy keeps it so (a stop someone asked Proxmox for under
    /// `RerunOnFailure`, any stop under `Manual`).
    pub stays_stopped: bool,
    /// A restart by stop and start is under way (its stop was issued).
    pub restarting: bool,
    /// Config keys Proxmox keeps pending.
    pub pending: Vec<String>,
    /// A live config write was made; the pending keys are still to be read.
    pub pending_unread: bool,
    /// The revision of the wanted config the VM was found to match.
    pub applied: Option<i64>,
    /// The guest facts (addresses, OS) of the current boot were read.
    pub guest_read: bool,
}

/// What the guest agent told about the running guest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GuestFacts {
    /// Usable addresses of the reported NICs, IPv4 first.
    pub addresses: Vec<std::net::IpAddr>,
    /// The OS (`pretty-name`, else name and version).
    pub os: Option<String>,
}

/// Whether a pass needs the VM's full config for the operation (the wanted revision is not
/// applied yet).
pub fn needs_config(op: &Operation, record: &OpRecord) -> bool {
    record.applied != Some(op.revision)
}

/// The step of an owner with an [`Operation`]: the provisioning decision's `step`, unless that
/// has nothing left to do (the operation decides then), or would start a VM whose run strategy
/// does not start it at creation (it is handed over stopped).
pub fn select(step: Step, f: &Facts, op: &Operation, record: &OpRecord, live: LiveFacts) -> Step {
    let VmPresence::Ours(vm) = &f.vm else {
        return step;
    };
    match step {
        Step::PowerOn | Step::CheckGuest if !f.provisioned && !op.run.starts_at_creation() => {
            if vm.power == Power::Stopped {
                Step::Operate(OpStep::Created)
            } else {
                step
            }
        }
        Step::Idle | Step::RemoveBootstrapIso => {
            let facts = OpFacts {
                op,
                record,
                power: vm.power,
                changes: live.changes,
                grow: live.grow,
                config_checked: live.checked,
            };
            match decide(&facts) {
                OpStep::Idle => step,
                s => Step::Operate(s),
            }
        }
        other => other,
    }
}

/// What the pass found about the VM's config for the operation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LiveFacts {
    /// The config was compared with the wanted one.
    pub checked: bool,
    /// The options to write (empty: none differ).
    pub changes: crate::proxmox::types::ConfigUpdate,
    /// A disk to grow: `(disk, GiB)`.
    pub grow: Option<(String, u64)>,
}
