//! Waiting for guests (QEMU agent and cloud-init) without every machine polling its own guest.
//! Machines cloned from the same templates boot alike, so a few "scouts" — the earliest booted
//! machines still waiting — look at their guest every `guest_poll`; the others wait. When a
//! scout's cloud-init is done, every waiting machine that booted no later (within one poll
//! interval) is woken to look at its own guest, and the uptime it took is remembered: machines
//! booting later are first looked at when they have been up that long.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use capmox_api::v1alpha2::ProxmoxMachine;
use kube::runtime::reflector::ObjectRef;

/// Machines polling their guest at the normal interval.
pub const SCOUTS: usize = 2;
/// Weight of a new observation in the learned time to cloud-init done.
const ALPHA: f64 = 0.3;
/// A waiting machine that is no scout and has nothing learned yet looks after this many polls.
const FALLBACK_POLLS: u32 = 6;
/// While nothing is learned, a guest is first looked at after it has been up this many polls.
pub const FIRST_LOOK_POLLS: u32 = 2;

#[derive(Debug, Default)]
struct State {
    /// Waiting machines and when their VM booted.
    waiting: HashMap<ObjectRef<ProxmoxMachine>, Instant>,
    /// Learned uptime at which cloud-init is done.
    done_after: Option<Duration>,
    /// `cloud-init status --wait` processes started in guests, by VMID.
    pids: HashMap<u32, u64>,
}

/// Guest waits of one Proxmox cluster.
#[derive(Debug, Default)]
pub struct Guests {
    state: Mutex<State>,
}

impl Guests {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// `machine`, whose VM booted at `boot`, still waits for its guest: how long until it looks
    /// again.
    pub fn next_check(&self, machine: &ObjectRef<ProxmoxMachine>, boot: Instant, poll: Duration) -> Duration {
        // The boot time first seen is kept: estimates from later lists jitter by a second, which
        // would reorder machines that booted together and make more of them scouts.
        self.lock().waiting.entry(machine.clone()).or_insert(boot);
        if self.is_scout(machine) {
            return poll;
        }
        let now = Instant::now();
        match self.lock().done_after {
            Some(d) => (boot + d).saturating_duration_since(now).max(poll),
            None => poll * FALLBACK_POLLS,
        }
    }

    /// `machine`'s guest is done (its VM booted at `boot`): learns the time it took and returns the
    /// other waiting machines to wake (booted before, or within `poll` after, `boot`).
    pub fn done(
        &self,
        machine: &ObjectRef<ProxmoxMachine>,
        boot: Instant,
        poll: Duration,
    ) -> Vec<ObjectRef<ProxmoxMachine>> {
        let mut s = self.lock();
        s.waiting.remove(machine);
        let took = boot.elapsed().as_secs_f64();
        let learned = match s.done_after {
            Some(d) => d.as_secs_f64() * (1.0 - ALPHA) + took * ALPHA,
            None => took,
        };
        s.done_after = Some(Duration::from_secs_f64(learned));
        s.waiting
            .iter()
            .filter(|(_, b)| **b <= boot + poll)
            .map(|(m, _)| m.clone())
            .collect()
    }

    /// Whether `machine` (VM booted at `boot`, up for `uptime`) should look at its guest now: a
    /// machine that starts waiting looks at once only as a scout or when guests of this cluster
    /// were done by its uptime; otherwise it waits to be woken (or for its next check).
    pub fn should_look(&self, machine: &ObjectRef<ProxmoxMachine>, boot: Instant, uptime: Duration) -> bool {
        {
            let mut s = self.lock();
            if s.waiting.contains_key(machine) {
                return true;
            }
            s.waiting.insert(machine.clone(), boot);
        }
        self.is_scout(machine) || self.likely_done(uptime)
    }

    fn is_scout(&self, machine: &ObjectRef<ProxmoxMachine>) -> bool {
        let s = self.lock();
        let mut order: Vec<(&Instant, &ObjectRef<ProxmoxMachine>)> =
            s.waiting.iter().map(|(m, b)| (b, m)).collect();
        order.sort_by(|a, b| a.0.cmp(b.0).then_with(|| a.1.name.cmp(&b.1.name)));
        order.iter().take(SCOUTS).any(|(_, m)| *m == machine)
    }

    /// How much longer a guest up for `uptime` should be left alone before its first look: guest
    /// agents need a few seconds after boot, so while nothing is learned about this cluster's
    /// guests the first look waits until the guest has been up for [`FIRST_LOOK_POLLS`] polls.
    pub fn too_early(&self, uptime: Duration, poll: Duration) -> Option<Duration> {
        let first = poll * FIRST_LOOK_POLLS;
        (self.lock().done_after.is_none() && uptime < first).then(|| first - uptime)
    }

    /// Whether a guest up for `uptime` is probably done (guests of this cluster were, by then).
    pub fn likely_done(&self, uptime: Duration) -> bool {
        self.lock().done_after.is_some_and(|d| uptime >= d.mul_f64(0.95))
    }

    /// Stops tracking `machine` (provisioned, failed or deleted).
    pub fn forget(&self, machine: &ObjectRef<ProxmoxMachine>) {
        self.lock().waiting.remove(machine);
    }

    /// The `cloud-init status --wait` process running in VM `vmid`, if one was started.
    pub fn pid(&self, vmid: u32) -> Option<u64> {
        self.lock().pids.get(&vmid).copied()
    }

    /// Records (`Some`) or forgets (`None`) the process running in VM `vmid`.
    pub fn set_pid(&self, vmid: u32, pid: Option<u64>) {
        let mut s = self.lock();
        match pid {
            Some(p) => s.pids.insert(vmid, p),
            None => s.pids.remove(&vmid),
        };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(name: &str) -> ObjectRef<ProxmoxMachine> {
        ObjectRef::new(name).within("ns")
    }

    #[test]
    fn scouts_poll_the_others_are_woken() {
        let g = Guests::default();
        let poll = Duration::from_secs(5);
        let t0 = Instant::now();
        assert_eq!(g.next_check(&m("a"), t0, poll), poll);
        assert_eq!(g.next_check(&m("b"), t0 + Duration::from_secs(1), poll), poll);
        let c = g.next_check(&m("c"), t0 + Duration::from_secs(2), poll);
        assert_eq!(c, poll * FALLBACK_POLLS, "no scout and nothing learned");
        let late = g.next_check(&m("d"), t0 + Duration::from_secs(60), poll);
        assert_eq!(late, poll * FALLBACK_POLLS);
        let woken = g.done(&m("a"), t0, poll);
        let mut names: Vec<String> = woken.into_iter().map(|r| r.name).collect();
        names.sort();
        assert_eq!(names, vec!["b", "c"], "booted within one poll of the scout");
        // Something was learned: a later machine first looks when it has been up that long.
        let e = g.next_check(&m("e"), Instant::now(), poll);
        assert_eq!(
            g.too_early(Duration::ZERO, poll),
            None,
            "learned: no first-look delay"
        );
        assert!(e >= poll, "{e:?}");
        g.forget(&m("b"));
        g.forget(&m("c"));
        // A machine that starts waiting looks at once only as a scout or when done is likely.
        let g = Guests::default();
        let t = Instant::now();
        assert!(g.should_look(&m("s1"), t, Duration::ZERO), "first is a scout");
        assert!(g.should_look(&m("s2"), t, Duration::ZERO), "second is a scout");
        assert!(!g.should_look(&m("x"), t, Duration::ZERO), "third waits");
        assert!(g.should_look(&m("x"), t, Duration::ZERO), "its next check looks");
        let poll = Duration::from_secs(5);
        assert_eq!(
            g.too_early(Duration::from_secs(3), poll),
            Some(Duration::from_secs(7))
        );
        assert_eq!(g.too_early(Duration::from_secs(10), poll), None);
        g.set_pid(200, Some(7));
        assert_eq!(g.pid(200), Some(7));
        g.set_pid(200, None);
        assert_eq!(g.pid(200), None);
    }
}
