//! Waiting for the state a Proxmox task produces instead of polling each task: an owner that
//! started a clone, stop or destroy registers what it waits for (its VM unlocked, stopped or
//! gone; a start is confirmed by its task, see [`super::tasks::effect_of`]), one that uploads or
//! deletes its VM's seed ISO waits for the file to appear or go; the view's refresher reads
//! `/cluster/resources` (and the ISO listings concerned) once for all waiting owners when the
//! first of them is due, and wakes every owner whose VM or ISO got there. An owner is due when its
//! task should be done ([`super::timing`]); until then nothing is read.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::owner::Owner;
use tokio::sync::Notify;

use crate::proxmox::types::ClusterResource;

/// The VM or ISO state a machine waits for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    /// The VM exists and is not locked by a clone (the clone finished, well or not).
    CloneDone,
    /// The VM is stopped.
    Stopped,
    /// The VM no longer exists.
    Gone,
    /// The VM's seed ISO `volid` is in the listing of `storage` on `node`.
    IsoPresent {
        /// Node.
        node: String,
        /// Storage.
        storage: String,
        /// Volume ID of the ISO.
        volid: String,
    },
    /// The VM's seed ISO `volid` is no longer in the listing of `storage` on `node`.
    IsoGone {
        /// Node.
        node: String,
        /// Storage.
        storage: String,
        /// Volume ID of the ISO.
        volid: String,
    },
}

/// The ISO volume ids of one storage listing (`None`: not read).
pub type IsoListing = Option<Arc<BTreeSet<String>>>;

/// What the refresher read for one check.
pub struct Observed<'a> {
    /// The VM entry of a VMID in `/cluster/resources` (`None`: absent).
    pub vm: &'a dyn Fn(u32) -> Option<ClusterResource>,
    /// The ISO volume ids on `(node, storage)` (`None`: not read this time).
    pub isos: &'a dyn Fn(&str, &str) -> IsoListing,
}

impl Expect {
    /// Whether `vm` (the VMID's entry of `/cluster/resources`, `None`: absent) shows the state
    /// (always `false` for ISO states).
    pub fn met(&self, vm: Option<&ClusterResource>) -> bool {
        match (self, vm) {
            (Self::IsoPresent { .. } | Self::IsoGone { .. }, _) => false,
            (Self::Gone, None) => true,
            (Self::Gone, Some(_)) | (_, None) => false,
            (Self::CloneDone, Some(v)) => v.lock.as_deref() != Some("clone"),
            (Self::Stopped, Some(v)) => v.status.as_deref() == Some("stopped"),
        }
    }

    /// The listing this state is read from (`None`: the VM list).
    pub fn listing(&self) -> Option<(&str, &str)> {
        match self {
            Self::IsoPresent { node, storage, .. } | Self::IsoGone { node, storage, .. } => {
                Some((node.as_str(), storage.as_str()))
            }
            _ => None,
        }
    }

    /// Whether VM `vmid`'s state (or ISO) as `seen` shows the state (`None`: not read).
    fn met_in(&self, vmid: u32, seen: &Observed<'_>) -> Option<bool> {
        match self {
            Self::IsoPresent { node, storage, volid } | Self::IsoGone { node, storage, volid } => {
                let there = (seen.isos)(node, storage)?.contains(volid);
                Some(matches!(self, Self::IsoPresent { .. }) == there)
            }
            _ => Some(self.met((seen.vm)(vmid).as_ref())),
        }
    }
}

#[derive(Debug)]
struct Wait {
    owner: Owner,
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

    /// `owner` waits until VM `vmid` shows `expect`; look first after `first`, then every `every`.
    pub fn add(&self, vmid: u32, owner: Owner, expect: Expect, first: Duration, every: Duration) {
        self.lock().insert(
            vmid,
            Wait {
                owner,
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

    /// What a check at `now` has to read: the VM list (when a VM wait is due) and the ISO
    /// listings of the due ISO waits.
    pub fn due_reads(&self, now: Instant) -> (bool, Vec<(String, String)>) {
        let mut vms = false;
        let mut listings = Vec::new();
        for w in self.lock().values().filter(|w| w.next <= now) {
            match w.expect.listing() {
                Some((n, s)) => {
                    let key = (n.to_owned(), s.to_owned());
                    if !listings.contains(&key) {
                        listings.push(key);
                    }
                }
                None => vms = true,
            }
        }
        (vms, listings)
    }

    /// Number of waiting machines.
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether nobody waits.
    pub fn is_empty(&self) -> bool {
        self.lock().is_empty()
    }

    /// Checks every wait against what was read: returns the machines whose VM or ISO got there
    /// (and forgets them); waits that were due and are not met are looked at again after their
    /// interval.
    pub fn check(&self, seen: &Observed<'_>, now: Instant) -> Vec<Owner> {
        let mut woken = Vec::new();
        self.lock().retain(|vmid, w| {
            if w.expect.met_in(*vmid, seen) == Some(true) {
                woken.push(w.owner.clone());
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
        assert!(Expect::Stopped.met(Some(&vm("stopped", None))));
        assert!(!Expect::Stopped.met(Some(&vm("running", None))));
        assert!(Expect::Gone.met(None));
        assert!(!Expect::Gone.met(Some(&vm("stopped", None))));
    }

    #[test]
    fn met_waits_wake_their_machine_once() {
        let w = Waits::default();
        let m = Owner::new("ProxmoxMachine", "ns", "m");
        w.add(
            200,
            m.clone(),
            Expect::Stopped,
            Duration::ZERO,
            Duration::from_secs(1),
        );
        w.add(
            201,
            Owner::new("ProxmoxMachine", "ns", "n"),
            Expect::Gone,
            Duration::from_secs(5),
            Duration::from_secs(1),
        );
        assert_eq!(w.len(), 2);
        let now = Instant::now();
        let none = |_: &str, _: &str| None;
        let running = |_| Some(vm("running", None));
        let woken = w.check(
            &Observed {
                vm: &running,
                isos: &none,
            },
            now,
        );
        assert!(woken.is_empty());
        assert!(w.next_due().is_some_and(|d| d > now));
        let stopped = |_| Some(vm("stopped", None));
        let woken = w.check(
            &Observed {
                vm: &stopped,
                isos: &none,
            },
            now,
        );
        assert_eq!(woken, vec![m]);
        assert_eq!(w.len(), 1, "the other machine still waits");
    }

    #[test]
    fn iso_waits_read_their_listing() {
        let w = Waits::default();
        let m = Owner::new("ProxmoxMachine", "ns", "m");
        let expect = Expect::IsoPresent {
            node: "pve1".into(),
            storage: "local".into(),
            volid: "local:iso/user-data-300.iso".into(),
        };
        w.add(300, m.clone(), expect, Duration::ZERO, Duration::from_secs(1));
        let now = Instant::now() + Duration::from_millis(1);
        assert_eq!(w.due_reads(now), (false, vec![("pve1".into(), "local".into())]));
        let no_vm = |_| None;
        let unread = |_: &str, _: &str| None;
        assert!(
            w.check(
                &Observed {
                    vm: &no_vm,
                    isos: &unread
                },
                now
            )
            .is_empty()
        );
        let listed = |_: &str, _: &str| {
            Some(Arc::new(BTreeSet::from([
                "local:iso/user-data-300.iso".to_owned()
            ])))
        };
        assert_eq!(
            w.check(
                &Observed {
                    vm: &no_vm,
                    isos: &listed
                },
                now
            ),
            vec![m]
        );
    }
}
