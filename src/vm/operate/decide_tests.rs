//! Table tests of the operation's decision: one row per situation, from facts as a pass would
//! observe them.

use super::*;
use crate::vm::operate::PowerRequest;
use std::time::Duration;

fn op() -> Operation {
    Operation {
        run: RunStrategy::Always,
        paused: false,
        restart: None,
        power_request: None,
        shutdown_timeout: Duration::from_secs(180),
        restart_on_change: false,
        agent: true,
        revision: 1,
        nics: Vec::new(),
    }
}

/// A record of a VM that was seen running, with this revision applied and the guest read.
fn settled(power: Power) -> OpRecord {
    OpRecord {
        state: Some(power),
        applied: Some(1),
        guest_read: true,
        ..OpRecord::default()
    }
}

fn facts<'a>(op: &'a Operation, record: &'a OpRecord, power: Power) -> OpFacts<'a> {
    OpFacts {
        op,
        record,
        power,
        changes: ConfigUpdate::new(),
        grow: None,
        config_checked: false,
    }
}

fn step(op: &Operation, record: &OpRecord, power: Power) -> OpStep {
    decide(&facts(op, record, power))
}

fn with(f: impl FnOnce(&mut Operation)) -> Operation {
    let mut o = op();
    f(&mut o);
    o
}

#[test]
fn run_strategies_against_power_states() {
    use Power::{Paused, Running, Stopped};
    use RunStrategy::{Always, Halted, Manual, RerunOnFailure};
    let cases: &[(RunStrategy, Power, Power, OpStep)] = &[
        // (strategy, state recorded, power seen, step)
        (Always, Running, Running, OpStep::Idle),
        (Always, Running, Stopped, OpStep::Start(None)),
        (Always, Stopped, Stopped, OpStep::Start(None)),
        (Halted, Running, Running, OpStep::Shutdown(None)),
        (Halted, Paused, Paused, OpStep::Stop(None)),
        (Halted, Stopped, Stopped, OpStep::Idle),
        (RerunOnFailure, Running, Stopped, OpStep::ClassifyStop),
        (RerunOnFailure, Stopped, Stopped, OpStep::Start(None)),
        (Manual, Running, Stopped, OpStep::Note(RecordNote::StaysStopped)),
        (Manual, Stopped, Stopped, OpStep::Idle),
        (Manual, Running, Running, OpStep::Idle),
        // The record follows what is seen.
        (Manual, Stopped, Running, OpStep::Note(RecordNote::Seen(Running))),
    ];
    for (run, state, power, want) in cases {
        let o = with(|o| o.run = *run);
        let r = settled(*state);
        assert_eq!(
            &step(&o, &r, *power),
            want,
            "{run:?}, recorded {state:?}, seen {power:?}"
        );
    }
    // A VM that stays stopped is not started by RerunOnFailure, but is by Always.
    let r = OpRecord {
        stays_stopped: true,
        ..settled(Stopped)
    };
    assert_eq!(step(&with(|o| o.run = RerunOnFailure), &r, Stopped), OpStep::Idle);
    assert_eq!(step(&op(), &r, Stopped), OpStep::Start(None));
}

#[test]
fn power_requests_act_once() {
    use Power::{Paused, Running, Stopped};
    let start = |t: &str| PowerRequest {
        start: true,
        token: t.into(),
    };
    let stop = |t: &str| PowerRequest {
        start: false,
        token: t.into(),
    };
    let manual = |q: PowerRequest| {
        with(|o| {
            o.run = RunStrategy::Manual;
            o.power_request = Some(q);
        })
    };
    let cases: &[(PowerRequest, Power, OpStep)] = &[
        (start("a"), Stopped, OpStep::Start(Some("a".into()))),
        (stop("b"), Running, OpStep::Shutdown(Some("b".into()))),
        (stop("c"), Paused, OpStep::Stop(Some("c".into()))),
        (start("d"), Running, OpStep::Note(RecordNote::Request("d".into()))),
        (stop("e"), Stopped, OpStep::Note(RecordNote::Request("e".into()))),
    ];
    for (q, power, want) in cases {
        let r = settled(*power);
        assert_eq!(&step(&manual(q.clone()), &r, *power), want, "{q:?} on {power:?}");
    }
    // Handled: nothing more.
    let r = OpRecord {
        power_request: Some("a".into()),
        ..settled(Running)
    };
    assert_eq!(step(&manual(start("a")), &r, Running), OpStep::Idle);
}

#[test]
fn pause_and_resume_follow_the_wish() {
    let paused = with(|o| o.paused = true);
    assert_eq!(
        step(&paused, &settled(Power::Running), Power::Running),
        OpStep::Pause
    );
    assert_eq!(
        step(&paused, &settled(Power::Paused), Power::Paused),
        OpStep::Idle
    );
    assert_eq!(
        step(&op(), &settled(Power::Paused), Power::Paused),
        OpStep::Resume
    );
    // A halted VM is not paused or resumed: it is stopped.
    let halted = with(|o| {
        o.paused = true;
        o.run = RunStrategy::Halted;
    });
    assert_eq!(
        step(&halted, &settled(Power::Stopped), Power::Stopped),
        OpStep::Idle
    );
}

#[test]
fn config_changes_then_pending_then_restart() {
    let o = op();
    let unapplied = OpRecord {
        applied: None,
        ..settled(Power::Running)
    };
    let mut f = facts(&o, &unapplied, Power::Running);
    f.config_checked = true;
    f.changes = ConfigUpdate::new().cores(4);
    assert_eq!(decide(&f), OpStep::Reconfigure(ConfigUpdate::new().cores(4)));
    f.changes = ConfigUpdate::new();
    f.grow = Some(("scsi0".into(), 30));
    assert_eq!(
        decide(&f),
        OpStep::GrowDisk {
            disk: "scsi0".into(),
            size_gib: 30
        }
    );
    f.grow = None;
    assert_eq!(decide(&f), OpStep::Note(RecordNote::Applied(1)));
    // After a live write the pending keys are read once.
    let written = OpRecord {
        pending_unread: true,
        ..settled(Power::Running)
    };
    assert_eq!(step(&o, &written, Power::Running), OpStep::ReadPending);
    // Pending keys wait for a restart: asked for, or by itself with restartOnChange.
    let pending = OpRecord {
        pending: vec!["cores".into()],
        ..settled(Power::Running)
    };
    assert_eq!(step(&o, &pending, Power::Running), OpStep::Idle);
    let auto = with(|o| o.restart_on_change = true);
    assert_eq!(step(&auto, &pending, Power::Running), OpStep::Reboot(None));
}

#[test]
fn restart_requests() {
    use Power::{Paused, Running, Stopped};
    let asked = with(|o| o.restart = Some("t1".into()));
    assert_eq!(
        step(&asked, &settled(Running), Running),
        OpStep::Reboot(Some("t1".into()))
    );
    let no_agent = with(|o| {
        o.restart = Some("t1".into());
        o.agent = false;
    });
    assert_eq!(
        step(&no_agent, &settled(Running), Running),
        OpStep::StopForRestart(Some("t1".into()))
    );
    let paused = with(|o| {
        o.restart = Some("t1".into());
        o.paused = true;
    });
    assert_eq!(
        step(&paused, &settled(Paused), Paused),
        OpStep::StopForRestart(Some("t1".into()))
    );
    let halted = with(|o| {
        o.restart = Some("t1".into());
        o.run = RunStrategy::Halted;
    });
    assert_eq!(
        step(&halted, &settled(Stopped), Stopped),
        OpStep::Note(RecordNote::Restart("t1".into()))
    );
    // Handled once.
    let done = OpRecord {
        restarted: Some("t1".into()),
        ..settled(Running)
    };
    assert_eq!(step(&asked, &done, Running), OpStep::Idle);
    // A stop-and-start restart goes on with the start.
    let restarting = OpRecord {
        restarting: true,
        ..settled(Stopped)
    };
    assert_eq!(step(&op(), &restarting, Stopped), OpStep::Start(None));
    assert_eq!(
        step(&op(), &restarting, Running),
        OpStep::Note(RecordNote::RestartDone)
    );
}

#[test]
fn guest_facts_are_read_once_per_boot() {
    let unread = OpRecord {
        guest_read: false,
        ..settled(Power::Running)
    };
    assert_eq!(step(&op(), &unread, Power::Running), OpStep::ReadGuest);
    let no_agent = with(|o| o.agent = false);
    assert_eq!(step(&no_agent, &unread, Power::Running), OpStep::Idle);
    assert!(!OpStep::ReadGuest.writes_to_proxmox());
    assert!(OpStep::Reboot(None).writes_to_proxmox());
}
