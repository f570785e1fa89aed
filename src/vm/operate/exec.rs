//! Carries out one [`OpStep`] through the view, recording in the [`OpRecord`] what the next
//! decision must know — the request token acted on, the state the VM is brought to, a restart
//! under way, the pending keys — together with the task the step started (the owner persists
//! both before anything else happens).

use std::time::{Duration, Instant};

use super::guest::{self, GuestRead};
use super::{OpRecord, OpStep, RecordNote};
use crate::proxmox::types::{ResizeRequest, StopRequest};
use crate::vm::adapter::Adapter;
use crate::vm::decide::Power;
use crate::vm::error::VmError;
use crate::vm::exec::{Env, Next, StepResult, record_task};
use crate::vm::spec::VmRecord;

/// Runs `step` (an operation step of a created VM).
pub async fn execute<A: Adapter>(
    step: &OpStep,
    env: &Env<'_, A>,
    record: &mut VmRecord,
) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    let (node, vmid) = (vm.node.as_str(), vm.vmid);
    let view = env.view;
    let op = env.spec.operation.as_ref();
    let timeout = op.map_or(Duration::from_secs(180), |o| o.shutdown_timeout);
    let err = |what: &str| VmError::proxmox(format!("{what} VM {vmid}"));
    let r = &mut record.operation;
    let upid = match step {
        OpStep::Idle => return Ok(StepResult::next(Next::Watch)),
        OpStep::Created => {
            record.provisioned = true;
            record.operation.state = Some(Power::Stopped);
            return Ok(StepResult::next(Next::Now));
        }
        OpStep::Note(note) => {
            apply_note(r, note);
            return Ok(StepResult::next(Next::Now));
        }
        OpStep::ReadPending => {
            r.pending = view
                .pending(node, vmid)
                .await
                .map_err(err("reading the pending changes of"))?;
            r.pending_unread = false;
            return Ok(StepResult::next(Next::Now));
        }
        OpStep::ReadGuest => return read_guest(env, record).await,
        OpStep::ClassifyStop => {
            let tasks = view
                .recent_tasks(node, vmid)
                .await
                .map_err(err("reading the recent tasks of"))?;
            if stopped_on_request(&tasks) {
                r.stays_stopped = true;
                r.state = Some(Power::Stopped);
                return Ok(StepResult::next(Next::Now).with_message("the VM was shut down through Proxmox"));
            }
            started(r, None);
            view.start(node, vmid, &Default::default())
                .await
                .map_err(err("starting"))?
        }
        OpStep::Start(token) => {
            started(r, token.clone());
            view.start(node, vmid, &Default::default())
                .await
                .map_err(err("starting"))?
        }
        OpStep::Shutdown(token) => {
            stopping(r, token.clone());
            view.shutdown(node, vmid, timeout.as_secs())
                .await
                .map_err(err("shutting down"))?
        }
        OpStep::Stop(token) => {
            stopping(r, token.clone());
            view.stop(node, vmid, &StopRequest::default())
                .await
                .map_err(err("stopping"))?
        }
        OpStep::Pause => {
            r.state = Some(Power::Paused);
            view.pause(node, vmid).await.map_err(err("pausing"))?
        }
        OpStep::Resume => {
            r.state = Some(Power::Running);
            view.resume(node, vmid).await.map_err(err("resuming"))?
        }
        OpStep::Reboot(token) => {
            restarted(r, token.clone());
            view.reboot(node, vmid, timeout.as_secs())
                .await
                .map_err(err("rebooting"))?
        }
        OpStep::StopForRestart(token) => {
            restarted(r, token.clone());
            r.restarting = true;
            r.state = Some(Power::Stopped);
            view.stop(node, vmid, &StopRequest::default())
                .await
                .map_err(err("stopping"))?
        }
        OpStep::Reconfigure(update) => {
            r.pending_unread = vm.power != Power::Stopped;
            match view
                .configure(node, vmid, update)
                .await
                .map_err(err("reconfiguring"))?
            {
                Some(upid) => upid,
                None => return Ok(StepResult::next(Next::Now)),
            }
        }
        OpStep::GrowDisk { disk, size_gib } => {
            let req = ResizeRequest::to_gib(disk.clone(), *size_gib);
            match view
                .resize(node, vmid, &req)
                .await
                .map_err(err("resizing a disk of"))?
            {
                Some(upid) => upid,
                None => return Ok(StepResult::next(Next::Now)),
            }
        }
    };
    Ok(StepResult::next(record_task(record, env, vmid, &upid, None)))
}

/// The VM is (being) started: what the record must say before the start is issued.
fn started(r: &mut OpRecord, token: Option<String>) {
    if token.is_some() {
        r.power_request = token;
    }
    r.state = Some(Power::Running);
    r.stays_stopped = false;
    r.restarting = false;
    // A start applies what was pending.
    r.pending.clear();
    r.guest_read = false;
}

/// The VM is being stopped (by the run strategy, or on request: then it stays stopped).
fn stopping(r: &mut OpRecord, token: Option<String>) {
    if token.is_some() {
        r.power_request = token;
        r.stays_stopped = true;
    }
    r.state = Some(Power::Stopped);
    r.guest_read = false;
}

/// A restart is issued: its token is handled, the pending keys are read again after it.
fn restarted(r: &mut OpRecord, token: Option<String>) {
    if token.is_some() {
        r.restarted = token;
    }
    r.pending.clear();
    r.pending_unread = true;
    r.guest_read = false;
}

fn apply_note(r: &mut OpRecord, note: &RecordNote) {
    match note {
        RecordNote::Seen(power) => {
            if *power != Power::Stopped {
                r.stays_stopped = false;
            }
            if r.state != Some(*power) {
                r.guest_read = false;
            }
            r.state = Some(*power);
        }
        RecordNote::StaysStopped => {
            r.stays_stopped = true;
            r.state = Some(Power::Stopped);
        }
        RecordNote::Request(token) => r.power_request = Some(token.clone()),
        RecordNote::Restart(token) => r.restarted = Some(token.clone()),
        RecordNote::Applied(revision) => r.applied = Some(*revision),
        RecordNote::RestartDone => r.restarting = false,
    }
}

/// Whether the newest power task of a VM that was found stopped is a stop or shutdown someone
/// asked Proxmox for (it then stays stopped); a VM that stopped without one failed (or was
/// powered off inside the guest: Proxmox records no task for either).
pub fn stopped_on_request(tasks: &[crate::proxmox::endpoints::operate::TaskEntry]) -> bool {
    const POWER: &[&str] = &[
        "qmstart",
        "qmstop",
        "qmshutdown",
        "qmreboot",
        "qmreset",
        "qmpause",
        "qmresume",
        "qmsuspend",
        "hastart",
        "hastop",
    ];
    const STOPS: &[&str] = &["qmstop", "qmshutdown", "qmsuspend", "hastop"];
    let mut power: Vec<_> = tasks
        .iter()
        .filter(|t| POWER.contains(&t.task_type.as_str()))
        .collect();
    power.sort_by_key(|t| std::cmp::Reverse(t.starttime));
    power
        .first()
        .is_some_and(|t| STOPS.contains(&t.task_type.as_str()) && t.status.as_deref() != Some("running"))
}

/// How long to wait before reading the guest again: half its uptime, between the guest poll and
/// 30 s.
fn guest_wait(uptime: Duration, poll: Duration) -> Duration {
    (uptime / 2).clamp(poll, Duration::from_secs(30).max(poll))
}

async fn read_guest<A: Adapter>(env: &Env<'_, A>, record: &mut VmRecord) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    let nics = env
        .spec
        .operation
        .as_ref()
        .map(|o| o.nics.clone())
        .unwrap_or_default();
    let uptime = env
        .booted
        .map_or(Duration::from_secs(vm.uptime_secs), |b| Instant::now() - b);
    // Guest agents need a few seconds after boot: the first look waits for them, as the
    // provisioning's guest checks do.
    if let Some(wait) = env.view.guests.too_early(uptime, env.settings.guest_poll) {
        return Ok(StepResult::next(Next::After(wait)).with_message("waiting for the QEMU guest agent"));
    }
    let wait = guest_wait(uptime, env.settings.guest_poll);
    let mut result = match guest::read(env.view, vm, &nics).await? {
        GuestRead::NotReady => {
            return Ok(StepResult::next(Next::After(wait)).with_message("waiting for the QEMU guest agent"));
        }
        GuestRead::Partial(facts) => {
            let mut r = StepResult::next(Next::After(wait)).with_message("waiting for the guest's addresses");
            r.guest = Some(facts);
            r
        }
        GuestRead::Complete(facts) => {
            record.operation.guest_read = true;
            let mut r = StepResult::next(Next::Now);
            r.guest = Some(facts);
            r
        }
    };
    result.report.keep = false;
    Ok(result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxmox::endpoints::operate::TaskEntry;

    fn task(t: &str, at: u64, status: &str) -> TaskEntry {
        TaskEntry {
            upid: format!("UPID:pve1:00000001:00000002:{at:08X}:{t}:200:root@pam:"),
            task_type: t.into(),
            starttime: Some(at),
            status: Some(status.into()),
            user: Some("root@pam".into()),
        }
    }

    #[test]
    fn a_stop_is_on_request_when_the_newest_power_task_stopped_it() {
        assert!(stopped_on_request(&[
            task("qmstart", 100, "OK"),
            task("qmshutdown", 200, "OK"),
            task("qmconfig", 300, "OK"),
        ]));
        assert!(!stopped_on_request(&[
            task("qmshutdown", 100, "OK"),
            task("qmstart", 200, "OK")
        ]));
        assert!(!stopped_on_request(&[]), "no task: a failure");
        assert_eq!(
            guest_wait(Duration::from_secs(4), Duration::from_secs(5)),
            Duration::from_secs(5)
        );
        assert_eq!(
            guest_wait(Duration::from_secs(600), Duration::from_secs(5)),
            Duration::from_secs(30)
        );
    }

    #[test]
    fn starting_clears_what_a_start_applies() {
        let mut r = OpRecord {
            pending: vec!["cores".into()],
            stays_stopped: true,
            restarting: true,
            guest_read: true,
            ..OpRecord::default()
        };
        started(&mut r, Some("start@1".into()));
        assert_eq!(r.power_request.as_deref(), Some("start@1"));
        assert!(r.pending.is_empty() && !r.stays_stopped && !r.restarting && !r.guest_read);
        stopping(&mut r, Some("stop@2".into()));
        assert!(r.stays_stopped);
        restarted(&mut r, Some("t".into()));
        assert!(r.pending_unread);
        apply_note(&mut r, &RecordNote::Seen(Power::Running));
        assert!(!r.stays_stopped);
    }
}
