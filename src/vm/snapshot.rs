//! Snapshots of a created VM, for any owner kind: taking one, deleting one, rolling the VM back to
//! one — each a pure decision from what Proxmox shows (the VM's lock and power state, the
//! snapshot listing) and from the task the owner recorded *before* acting, so a step is safe to
//! repeat after a crash:
//!
//! * a snapshot has a name chosen before it is taken ([`proxmox_name`]): found in the listing,
//!   it was taken (or is being taken: Proxmox lists it with `snapstate` while its task runs); a
//!   failed snapshot task removes what it made, so not found means "take it";
//! * a rollback whose answer was lost is found again among the VM's recent tasks (the owner
//!   records when it was about to issue it);
//! * everything waits while the VM is locked (Proxmox serialises a VM's snapshot, rollback,
//!   clone and config tasks with the lock) or while the VM's owner has a task of its own in flight.

use super::operate::RunStrategy;
use crate::proxmox::types::Snapshot;
use crate::proxmox::view::{Power, TaskFacts};

/// Longest snapshot name Proxmox takes (`pve-configid`, 40 characters).
pub const NAME_MAX: usize = 40;

/// The Proxmox name of the snapshot an object `name` with UID `uid` takes: the name made a
/// `pve-configid` (letters, digits, `-`, `_`; a letter first), cut to leave room for the first 8
/// characters of the UID (so a re-created object of the same name never meets an old snapshot).
pub fn proxmox_name(name: &str, uid: &str) -> String {
    let suffix: String = uid.chars().filter(char::is_ascii_alphanumeric).take(8).collect();
    let mut base: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    if !base.starts_with(|c: char| c.is_ascii_alphabetic()) {
        base.insert(0, 's');
    }
    let room = NAME_MAX - suffix.len() - 1;
    base.truncate(room);
    let base = base.trim_end_matches(['-', '_']);
    format!("{base}-{suffix}")
}

/// The VM as a snapshot operation needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VmNow {
    /// Its lock (`snapshot`, `rollback`, `clone`, …).
    pub lock: Option<String>,
    /// Its power state.
    pub power: Power,
}

/// What a snapshot operation works from.
#[derive(Debug, Clone, PartialEq)]
pub struct SnapFacts<'a> {
    /// The VM (`None`: it does not exist).
    pub vm: Option<&'a VmNow>,
    /// The recorded task and what became of it.
    pub task: Option<&'a TaskFacts>,
    /// The snapshot as listed (`None`: not in the listing).
    pub listed: Option<&'a Snapshot>,
    /// Why the VM's owner wants the VM left alone now (its own task in flight, an earlier
    /// snapshot operation of the same VM first), if it does.
    pub owner_busy: Option<String>,
}

/// The next step of taking a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TakeStep {
    /// Wait (the message says for what).
    Wait(String),
    /// Look at the recorded task again.
    PollTask,
    /// Take the snapshot.
    Take,
    /// The recorded task found the VM locked and made nothing: forget it and wait.
    Retry(String),
    /// The snapshot exists, complete.
    Done,
    /// Refused or failed for good (the message says why).
    Fail(String),
}

/// The next step of taking the snapshot (with the VM's memory when `memory`).
pub fn decide_take(f: &SnapFacts<'_>, memory: bool) -> TakeStep {
    match f.task {
        Some(TaskFacts::Running) => return TakeStep::PollTask,
        // Proxmox checks the lock when the task starts, before it makes anything.
        Some(TaskFacts::Failed { exitstatus, .. })
            if exitstatus.contains("is locked") && f.listed.is_none() =>
        {
            return TakeStep::Retry(exitstatus.clone());
        }
        Some(TaskFacts::Failed { exitstatus, .. }) => {
            return TakeStep::Fail(format!("Proxmox could not take the snapshot: {exitstatus}"));
        }
        Some(TaskFacts::Succeeded) if f.listed.is_none() => {
            return TakeStep::Fail("the snapshot was taken but is gone from Proxmox".into());
        }
        _ => {}
    }
    let Some(vm) = f.vm else {
        return TakeStep::Fail("the VM does not exist".into());
    };
    if let Some(s) = f.listed {
        return match (&s.snapstate, &vm.lock) {
            (None, l) if l.as_deref() != Some("snapshot") => TakeStep::Done,
            _ => TakeStep::Wait("the snapshot is being taken".into()),
        };
    }
    if let Some(lock) = &vm.lock {
        return TakeStep::Wait(format!("the VM is locked ({lock})"));
    }
    if let Some(why) = &f.owner_busy {
        return TakeStep::Wait(why.clone());
    }
    if memory && vm.power == Power::Stopped {
        return TakeStep::Fail(
            "includeMemory needs a running VM, and the VM is stopped: take the snapshot without memory or start the VM first"
                .into(),
        );
    }
    TakeStep::Take
}

/// The next step of deleting a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DeleteStep {
    /// Wait (the message says for what).
    Wait(String),
    /// Look at the recorded task again.
    PollTask,
    /// Delete the snapshot.
    Delete,
    /// Nothing (left) to delete.
    Done,
    /// The deletion task failed (retried later).
    Failed(String),
}

/// The next step of deleting the snapshot.
pub fn decide_delete(f: &SnapFacts<'_>) -> DeleteStep {
    match f.task {
        Some(TaskFacts::Running) => return DeleteStep::PollTask,
        Some(TaskFacts::Failed { exitstatus, .. }) => return DeleteStep::Failed(exitstatus.clone()),
        _ => {}
    }
    let (Some(vm), Some(_)) = (f.vm, f.listed) else {
        return DeleteStep::Done;
    };
    if let Some(lock) = &vm.lock {
        return DeleteStep::Wait(format!("the VM is locked ({lock})"));
    }
    if let Some(why) = &f.owner_busy {
        return DeleteStep::Wait(why.clone());
    }
    DeleteStep::Delete
}

/// The next step of rolling the VM back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RollbackStep {
    /// Wait (the message says for what).
    Wait(String),
    /// Look at the recorded task again.
    PollTask,
    /// Roll back.
    Rollback,
    /// The VM was rolled back.
    Done,
    /// Refused or failed for good (the message says why).
    Fail(String),
}

/// The next step of rolling the VM back to the snapshot (`issued`: a rollback may have been
/// issued and no task of it was found — it never reached Proxmox).
pub fn decide_rollback(f: &SnapFacts<'_>) -> RollbackStep {
    match f.task {
        Some(TaskFacts::Running) => return RollbackStep::PollTask,
        Some(TaskFacts::Succeeded) => return RollbackStep::Done,
        Some(TaskFacts::Failed { exitstatus, .. }) => {
            return RollbackStep::Fail(format!("Proxmox could not roll the VM back: {exitstatus}"));
        }
        _ => {}
    }
    let Some(vm) = f.vm else {
        return RollbackStep::Fail("the VM does not exist".into());
    };
    let Some(s) = f.listed else {
        return RollbackStep::Fail("the snapshot no longer exists in Proxmox".into());
    };
    if s.snapstate.is_some() {
        return RollbackStep::Wait("the snapshot is not complete yet".into());
    }
    if let Some(lock) = &vm.lock {
        return RollbackStep::Wait(format!("the VM is locked ({lock})"));
    }
    if let Some(why) = &f.owner_busy {
        return RollbackStep::Wait(why.clone());
    }
    RollbackStep::Rollback
}

/// Whether the rollback starts the VM: a snapshot with memory resumes it anyway; without,
/// `Always` runs it, `Halted` keeps it stopped, and the others keep the power state it had.
pub fn start_after_rollback(run: RunStrategy, memory: bool, was_running: bool) -> bool {
    if memory {
        return false;
    }
    match run {
        RunStrategy::Always => true,
        RunStrategy::Halted => false,
        RunStrategy::RerunOnFailure | RunStrategy::Manual => was_running,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(state: Option<&str>) -> Snapshot {
        Snapshot {
            name: "s".into(),
            description: None,
            snaptime: Some(1),
            vmstate: false,
            parent: None,
            snapstate: state.map(Into::into),
        }
    }

    fn vm(lock: Option<&str>, power: Power) -> VmNow {
        VmNow {
            lock: lock.map(Into::into),
            power,
        }
    }

    fn facts<'a>(
        vm: Option<&'a VmNow>,
        task: Option<&'a TaskFacts>,
        listed: Option<&'a Snapshot>,
    ) -> SnapFacts<'a> {
        SnapFacts {
            vm,
            task,
            listed,
            owner_busy: None,
        }
    }

    #[test]
    fn names_are_config_ids_of_at_most_40_characters() {
        let uid = "0f3c9a2e-1111-2222-3333-444455556666";
        assert_eq!(proxmox_name("before-upgrade", uid), "before-upgrade-0f3c9a2e");
        assert_eq!(proxmox_name("1st.try", uid), "s1st-try-0f3c9a2e");
        let long = proxmox_name(&"a".repeat(100), uid);
        assert_eq!(long.len(), NAME_MAX);
        assert!(long.ends_with("-0f3c9a2e"));
        let re = regex::Regex::new(r"^[a-zA-Z][a-zA-Z0-9_\-]+$").unwrap();
        for n in ["x", "a.b.c", "9-lives", "trailing-"] {
            let p = proxmox_name(n, uid);
            assert!(re.is_match(&p) && p.len() <= NAME_MAX, "{p}");
        }
    }

    #[test]
    fn taking_waits_for_locks_refuses_memory_of_a_stopped_vm_and_finds_its_snapshot() {
        let free = vm(None, Power::Running);
        let stopped = vm(None, Power::Stopped);
        let locked = vm(Some("snapshot"), Power::Running);
        let done = snap(None);
        let preparing = snap(Some("prepare"));
        assert_eq!(decide_take(&facts(Some(&free), None, None), true), TakeStep::Take);
        assert_eq!(
            decide_take(&facts(Some(&stopped), None, None), false),
            TakeStep::Take
        );
        assert!(
            matches!(decide_take(&facts(Some(&stopped), None, None), true), TakeStep::Fail(m) if m.contains("stopped"))
        );
        assert!(
            matches!(decide_take(&facts(Some(&locked), None, None), false), TakeStep::Wait(m) if m.contains("locked (snapshot)"))
        );
        // After a crash that lost the task: the listing tells.
        assert!(matches!(
            decide_take(&facts(Some(&locked), None, Some(&preparing)), false),
            TakeStep::Wait(_)
        ));
        assert_eq!(
            decide_take(&facts(Some(&free), None, Some(&done)), true),
            TakeStep::Done
        );
        assert_eq!(
            decide_take(&facts(Some(&free), Some(&TaskFacts::Running), None), false),
            TakeStep::PollTask
        );
        let failed = TaskFacts::Failed {
            kind: "qmsnapshot".into(),
            exitstatus: "snapshot feature is not available".into(),
        };
        assert!(
            matches!(decide_take(&facts(Some(&free), Some(&failed), None), false), TakeStep::Fail(m) if m.contains("not available"))
        );
        assert!(matches!(
            decide_take(&facts(None, None, None), false),
            TakeStep::Fail(_)
        ));
        let raced = TaskFacts::Failed {
            kind: "qmsnapshot".into(),
            exitstatus: "VM is locked (snapshot)".into(),
        };
        assert!(matches!(
            decide_take(&facts(Some(&free), Some(&raced), None), false),
            TakeStep::Retry(_)
        ));
        let busy = SnapFacts {
            owner_busy: Some("the VM is being reconfigured".into()),
            ..facts(Some(&free), None, None)
        };
        assert_eq!(
            decide_take(&busy, false),
            TakeStep::Wait("the VM is being reconfigured".into())
        );
    }

    #[test]
    fn deleting_and_rolling_back_follow_the_listing_and_the_lock() {
        let free = vm(None, Power::Running);
        let locked = vm(Some("rollback"), Power::Stopped);
        let done = snap(None);
        assert_eq!(
            decide_delete(&facts(Some(&free), None, Some(&done))),
            DeleteStep::Delete
        );
        assert_eq!(decide_delete(&facts(Some(&free), None, None)), DeleteStep::Done);
        assert_eq!(decide_delete(&facts(None, None, None)), DeleteStep::Done);
        assert!(matches!(
            decide_delete(&facts(Some(&locked), None, Some(&done))),
            DeleteStep::Wait(_)
        ));
        assert_eq!(
            decide_rollback(&facts(Some(&free), None, Some(&done))),
            RollbackStep::Rollback
        );
        assert!(matches!(
            decide_rollback(&facts(Some(&locked), None, Some(&done))),
            RollbackStep::Wait(_)
        ));
        assert!(
            matches!(decide_rollback(&facts(Some(&free), None, None)), RollbackStep::Fail(m) if m.contains("no longer exists"))
        );
        assert_eq!(
            decide_rollback(&facts(Some(&locked), Some(&TaskFacts::Succeeded), Some(&done))),
            RollbackStep::Done
        );
        assert!(matches!(
            decide_rollback(&facts(Some(&free), None, Some(&snap(Some("prepare"))))),
            RollbackStep::Wait(_)
        ));
    }

    #[test]
    fn the_run_strategy_decides_the_start_after_a_rollback_without_memory() {
        assert!(start_after_rollback(RunStrategy::Always, false, false));
        assert!(!start_after_rollback(RunStrategy::Halted, false, true));
        assert!(start_after_rollback(RunStrategy::Manual, false, true));
        assert!(!start_after_rollback(RunStrategy::RerunOnFailure, false, false));
        assert!(
            !start_after_rollback(RunStrategy::Always, true, true),
            "memory resumes it anyway"
        );
    }
}
