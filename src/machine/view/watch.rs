//! Waiting for the state a Proxmox task produces instead of polling each task: a machine that
//! started a clone, start, stop or destroy registers what it waits for (its VM unlocked,
//! running, stopped or gone); the view's refresher reads `/cluster/resources` once for all
//! waiting machines when the first of them is due and wakes every machine whose VM got there.
//! A machine is due when its task should be done ([`super::timing`]); until then nothing is read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capmox_api::v1alpha2::ProxmoxMachine;
use kube::runtime::reflector::ObjectRef;
use tokio::sync::Notify;

use crate::proxmox::types::ClusterResource;

/// The VM state a machine waits for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// The VM exists and is not locked by a clone (the clone finished, well or not).
    CloneDone,
    /// The VM runs.
    Running,
    /// The VM is stopped.
    Stopped,
    /// The VM no longer exists.
    Gone,
}

impl Expect {
    /// Whether `vm` (the VMID's entry of `/cluster/resources`, `None`: absent) shows the state.
    pub fn met(self, vm: Option<&ClusterResource>) -> bool {
        match (self, vm) {
            (Self::Gone, None) => true,
            (Self::Gone, Some(_)) | (_, None) => false,
            (Self::CloneDone, Some(v)) => v.lock.as_deref() != Some("clone"),
            (Self::Running, Some(v)) => v.status.as_deref() == Some("running"),
            (Self::Stopped, Some(v)) => v.status.as_deref() == Some("stopped"),
        }
    }
}

#[derive(Debug)]
struct Wait {
    machine: ObjectRef<ProxmoxMachine>,
    expect: Expect,
    next: Instant,
    every: Duration,
}

/// The machines waiting for their VM's state, by VMID.
#[derive(Debug, Default)]
pub struct Waits {
    waits: Mutex<HashMap<u32, Wait>>,
    /// Wakes the refresher when a wait is added.
    pub notify: Arc<Notify>,
}

impl Waits {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, Wait>> {
        self.waits
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `machine` waits until VM `vmid` shows `expect`; look first after `first`, then every `every`.
    pub fn add(
        &self,
        vmid: u32,
        machine: ObjectRef<ProxmoxMachine>,
        expect: Expect,
        first: Duration,
        every: Duration,
    ) {
        self.lock().insert(
            vmid,
            Wait {
                machine,
                expect,
                next: Instant::now() + first,
                every,
            },
        );
        self.notify.notify_one();
    }

    /// Stops waiting for VM `vmid`.
    pub fn remove(&self, vmid: u32) {
        self.lock().remove(&vmid);
    }

    /// When the earliest wait is due (`None`: nobody waits).
    pub fn next_due(&self) -> Option<Instant> {
        self.lock().values().map(|w| w.next).min()
    }

    /// Number of waiting machines.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nobody waits.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Checks every wait against a fresh list: returns the machines whose VM got there (and forgets
    /// them); waits that were due and are not met are looked at again after their interval.
    pub fn check(
        &self,
        vm: impl Fn(u32) -> Option<ClusterResource>,
        now: Instant,
    ) -> Vec<ObjectRef<ProxmoxMachine>> {
        let mut woken = Vec::new();
        self.lock().retain(|vmid, w| {
            if w.expect.met(vm(*vmid).as_ref()) {
                woken.push(w.machine.clone());
                return false;
            }
            if w.next <= now {
                w.next = now + w.every;
            }
            true
        });
        woken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vm(status: &str, lock: Option<&str>) -> ClusterResource {
        serde_json::from_value(serde_json::json!({
            "type": "qemu", "vmid": 200, "status": status, "lock": lock
        }))
        .unwrap()
    }

    #[test]
    fn expectations() {
        assert!(Expect::CloneDone.met(Some(&vm("stopped", None))));
        assert!(!Expect::CloneDone.met(Some(&vm("unknown", Some("clone")))));
        assert!(!Expect::CloneDone.met(None));
        assert!(Expect::Running.met(Some(&vm("running", None))));
        assert!(!Expect::Running.met(Some(&vm("stopped", None))));
        assert!(Expect::Stopped.met(Some(&vm("stopped", None))));
        assert!(Expect::Gone.met(None));
        assert!(!Expect::Gone.met(Some(&vm("stopped", None))));
    }

    #[test]
    fn met_waits_wake_their_machine_once() {
        let w = Waits::default();
        let m = ObjectRef::new("m").within("ns");
        w.add(
            200,
            m.clone(),
            Expect::Running,
            Duration::ZERO,
            Duration::from_secs(1),
        );
        w.add(
            201,
            ObjectRef::new("n").within("ns"),
            Expect::Gone,
            Duration::from_secs(5),
            Duration::from_secs(1),
        );
        assert_eq!(w.len(), 2);
        let now = Instant::now();
        let woken = w.check(|_| Some(vm("stopped", None)), now);
        assert!(woken.is_empty());
        assert!(w.next_due().is_some_and(|d| d > now));
        let woken = w.check(|_| Some(vm("running", None)), now);
        assert_eq!(woken, vec![m]);
        assert_eq!(w.len(), 1, "the other machine still waits");
    }
}
