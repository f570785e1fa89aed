//! Waiting for guests (QEMU agent and cloud-init) without every machine polling its own guest.
//! Machines cloned from the same templates boot alike, so a few "scouts" — the earliest booted
//! machines still waiting — look at their guest every `guest_poll`; the others wait. When a
//! scout's cloud-init is done, every waiting machine that booted no later (within one poll
//! interval) is woken to look at its own guest, and the uptime it took is remembered: machines
//! booting later are first looked at when they have been up that long. A pass that comes
//! before a machine's look is due (another trigger woke it) does not look: the look waits.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::owner::Owner;

/// Machines polling their guest at the normal interval.
pub const SCOUTS: usize = 2;
/// Weight of a new observation in the learned time to cloud-init done.
const ALPHA: f64 = 0.3;
/// A waiting machine that is no scout and has nothing learned yet looks after this many polls.
const FALLBACK_POLLS: u32 = 6;
/// While nothing is learned, a guest is first looked at after it has been up this many polls.
pub const FIRST_LOOK_POLLS: u32 = 3;

/// The wait of a scout whose guest has been up for `up` while nothing is learned about this
/// cluster's guests and no other machine waits: half its uptime, at least one poll and at most
/// [`FALLBACK_POLLS`] — a guest that takes minutes is not read every poll, and the first done is
/// seen within a third of the time it took.
fn scout_backoff(up: Duration, poll: Duration) -> Duration {
    (up / 2).clamp(poll, poll * FALLBACK_POLLS)
}

/// A machine waiting for its guest.
#[derive(Debug, Clone, Copy)]
struct Waiter {
    /// When its VM booted.
    boot: Instant,
    /// When it looks next (`None`: at its next pass — it was woken, or has not looked yet).
    due: Option<Instant>,
    /// When it last looked.
    looked: Option<Instant>,
    /// When a look last found cloud-init still running.
    running_at: Option<Instant>,
}

impl Waiter {
    fn new(boot: Instant) -> Self {
        Self {
            boot,
            due: None,
            looked: None,
            running_at: None,
        }
    }
}

/// A pass this close before a look is due looks (timers fire a little early or late).
const DUE_SLACK: Duration = Duration::from_millis(100);

/// Whether a machine waiting for its guest looks at it in this pass.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Look {
    /// Look now.
    Now,
    /// The machine just started waiting and is left to be woken or to its first check.
    NotYet,
    /// The next look is due in this long: this pass came early (something else triggered it).
    Due(Duration),
}

#[derive(Debug, Default)]
struct State {
    /// Waiting machines.
    waiting: HashMap<Owner, Waiter>,
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
    pub fn next_check(&self, machine: &Owner, boot: Instant, poll: Duration) -> Duration {
        // The boot time first seen is kept: estimates from later lists jitter by a second, which
        // would reorder machines that booted together and make more of them scouts.
        let boot = self
            .lock()
            .waiting
            .entry(machine.clone())
            .or_insert(Waiter::new(boot))
            .boot;
        let now = Instant::now();
        let scout = self.is_scout(machine);
        let (done_after, waiting) = {
            let s = self.lock();
            (s.done_after, s.waiting.len())
        };
        let wait = match (scout, done_after) {
            // Scouts back off only while nothing is learned and no other machine waits for what
            // they learn (a late first done would delay every machine booted with them).
            (true, None) if waiting <= SCOUTS => scout_backoff(now.saturating_duration_since(boot), poll),
            (true, _) => poll,
            // Guests of this cluster were done by this uptime: look then, not a whole poll
            // later (a guest not done by then is looked at every poll).
            (false, Some(d)) => match (boot + d).saturating_duration_since(now) {
                left if left.is_zero() => poll,
                left => left.max(poll / 10),
            },
            (false, None) => poll * FALLBACK_POLLS,
        };
        if let Some(w) = self.lock().waiting.get_mut(machine) {
            w.due = Some(now + wait);
        }
        wait
    }

    /// A look at `machine`'s guest found cloud-init still running.
    pub fn still_running(&self, machine: &Owner) {
        if let Some(w) = self.lock().waiting.get_mut(machine) {
            w.running_at = Some(Instant::now());
        }
    }

    /// `machine` (waiting) looks again in `wait`, whatever its schedule says.
    pub fn look_again_in(&self, machine: &Owner, wait: Duration) -> Duration {
        if let Some(w) = self.lock().waiting.get_mut(machine) {
            w.due = Some(Instant::now() + wait);
        }
        wait
    }

    /// `machine`'s guest is done (its VM booted at `boot`): learns the time it took and returns the
    /// other waiting machines to wake (booted before, or within `poll` after, `boot`) — those that
    /// looked within the last `poll` are not woken again: when guests finish together, each done
    /// would otherwise wake every waiting machine once more, and a machine would look as often
    /// as others finish.
    pub fn done(&self, machine: &Owner, boot: Instant, poll: Duration) -> Vec<Owner> {
        let mut s = self.lock();
        let waiter = s.waiting.remove(machine);
        // Cloud-init finished between the last look that found it running and now: the middle
        // of that span is learned, not the end (which is late by up to a poll).
        let took = match waiter.and_then(|w| w.running_at) {
            Some(r) => (r.saturating_duration_since(boot).as_secs_f64() + boot.elapsed().as_secs_f64()) / 2.0,
            None => boot.elapsed().as_secs_f64(),
        };
        let learned = match s.done_after {
            Some(d) => d.as_secs_f64() * (1.0 - ALPHA) + took * ALPHA,
            None => took,
        };
        s.done_after = Some(Duration::from_secs_f64(learned));
        let mut woken = Vec::new();
        let now = Instant::now();
        let wakeable = |w: &Waiter| {
            w.boot <= boot + poll && w.due.is_some() && w.looked.is_none_or(|l| now.duration_since(l) >= poll)
        };
        for (m, w) in s.waiting.iter_mut().filter(|(_, w)| wakeable(w)) {
            w.due = None;
            woken.push(m.clone());
        }
        woken
    }

    /// Whether `machine` (VM booted at `boot`, up for `uptime`) looks at its guest in this pass:
    /// a machine that starts waiting looks at once only as a scout or when guests of this cluster
    /// were done by its uptime, else it waits to be woken (or for its next check); a waiting
    /// machine looks when it was woken or its next look is due — a pass something else
    /// triggered earlier does not cost a look.
    pub fn should_look(&self, machine: &Owner, boot: Instant, uptime: Duration) -> Look {
        {
            let mut s = self.lock();
            let now = Instant::now();
            if let Some(w) = s.waiting.get_mut(machine) {
                return match w.due {
                    Some(due) if due > now + DUE_SLACK => Look::Due(due - now),
                    _ => {
                        w.looked = Some(now);
                        Look::Now
                    }
                };
            }
            s.waiting.insert(machine.clone(), Waiter::new(boot));
        }
        if self.is_scout(machine) || self.likely_done(uptime) {
            if let Some(w) = self.lock().waiting.get_mut(machine) {
                w.looked = Some(Instant::now());
            }
            Look::Now
        } else {
            Look::NotYet
        }
    }

    fn is_scout(&self, machine: &Owner) -> bool {
        let s = self.lock();
        let mut order: Vec<(&Instant, &Owner)> = s.waiting.iter().map(|(m, w)| (&w.boot, m)).collect();
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
    pub fn forget(&self, machine: &Owner) {
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

    fn m(name: &str) -> Owner {
        Owner::new("ProxmoxMachine", "ns", name)
    }

    #[test]
    fn scouts_back_off_while_nothing_is_learned() {
        let poll = Duration::from_secs(5);
        assert_eq!(scout_backoff(Duration::from_secs(4), poll), poll);
        assert_eq!(
            scout_backoff(Duration::from_secs(15), poll),
            Duration::from_millis(7_500)
        );
        assert_eq!(
            scout_backoff(Duration::from_secs(600), poll),
            poll * FALLBACK_POLLS
        );
        let g = Guests::default();
        let boot = Instant::now() - Duration::from_secs(20);
        let wait = g.next_check(&m("lone"), boot, poll);
        assert!(
            wait >= Duration::from_millis(9_900) && wait <= Duration::from_millis(10_100),
            "{wait:?}"
        );
        // Once a guest was done, scouts poll at the normal interval.
        g.lock().done_after = Some(Duration::from_secs(30));
        assert_eq!(g.next_check(&m("lone"), boot, poll), poll);
        // So do they while more machines wait than the scouts: those wait for what they learn.
        let g = Guests::default();
        for name in ["a", "b", "c"] {
            g.next_check(&m(name), boot, poll);
        }
        assert_eq!(g.next_check(&m("a"), boot, poll), poll);
    }

    #[test]
    fn a_guest_short_of_the_learned_time_looks_at_it_not_a_poll_later() {
        let g = Guests::default();
        let poll = Duration::from_secs(5);
        let now = Instant::now();
        // The scouts are the earliest booted.
        let early = now.checked_sub(Duration::from_secs(60)).unwrap();
        for name in ["a", "b"] {
            g.next_check(&m(name), early, poll);
        }
        g.lock().done_after = Some(Duration::from_secs(30));
        // Up 28 s of the 30 s guests of this cluster took: looks in about 2 s.
        let short = now.checked_sub(Duration::from_secs(28)).unwrap();
        let wait = g.next_check(&m("c"), short, poll);
        assert!(wait < poll && wait > Duration::from_secs(1), "{wait:?}");
        // Up a moment short of it: not sooner than a tenth of a poll.
        let almost = now.checked_sub(Duration::from_millis(29_700)).unwrap();
        assert_eq!(g.next_check(&m("d"), almost, poll), poll / 10);
        // Past it: every poll.
        let past = now.checked_sub(Duration::from_secs(40)).unwrap();
        assert_eq!(g.next_check(&m("e"), past, poll), poll);
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
        assert!(e >= poll / 10, "{e:?}");
        g.forget(&m("b"));
        g.forget(&m("c"));
        // A machine that starts waiting looks at once only as a scout or when done is likely.
        let g = Guests::default();
        let t = Instant::now();
        assert_eq!(
            g.should_look(&m("s1"), t, Duration::ZERO),
            Look::Now,
            "first is a scout"
        );
        assert_eq!(
            g.should_look(&m("s2"), t, Duration::ZERO),
            Look::Now,
            "second is a scout"
        );
        assert_eq!(
            g.should_look(&m("x"), t, Duration::ZERO),
            Look::NotYet,
            "third waits"
        );
        let poll = Duration::from_secs(5);
        let wait = g.next_check(&m("x"), t, poll);
        assert_eq!(wait, poll * FALLBACK_POLLS);
        match g.should_look(&m("x"), t, Duration::ZERO) {
            Look::Due(d) => assert!(d <= wait && d > wait - Duration::from_secs(1), "{d:?}"),
            other => panic!("a pass before the check is due must not look: {other:?}"),
        }
        // A scout that looked is not due again before its poll either.
        assert_eq!(g.next_check(&m("s1"), t, poll), poll);
        assert!(matches!(g.should_look(&m("s1"), t, Duration::ZERO), Look::Due(_)));
        assert_eq!(
            g.too_early(Duration::from_secs(3), poll),
            Some(Duration::from_secs(12))
        );
        assert_eq!(g.too_early(Duration::from_secs(15), poll), None);
        // Woken by a scout's done: the early machines look at their next pass — but not one
        // that looked within the last poll (s1).
        let woken = g.done(&m("s2"), t, poll);
        assert_eq!(woken, vec![m("x")]);
        assert_eq!(g.should_look(&m("x"), t, Duration::ZERO), Look::Now);
        // x looked and is still running: the next done does not wake it again at once.
        g.next_check(&m("x"), t, poll);
        g.should_look(&m("y"), t, Duration::ZERO);
        g.next_check(&m("y"), t, poll);
        let woken = g.done(&m("y"), t, poll);
        assert!(woken.is_empty(), "{woken:?}");
        assert!(matches!(g.should_look(&m("x"), t, Duration::ZERO), Look::Due(_)));
        // Done after a look that found it running: the middle of the span is learned.
        let g2 = Guests::default();
        let boot = Instant::now() - Duration::from_secs(40);
        g2.should_look(&m("p"), boot, Duration::from_secs(40));
        g2.still_running(&m("p"));
        // That look was 4 s ago (booted 40 s ago): done between 36 s and 40 s of uptime.
        g2.lock().waiting.get_mut(&m("p")).unwrap().running_at = Some(boot + Duration::from_secs(36));
        g2.done(&m("p"), boot, poll);
        let learned = g2.lock().done_after.unwrap();
        assert!(
            learned >= Duration::from_millis(37_900) && learned <= Duration::from_millis(38_500),
            "{learned:?}"
        );
        g.set_pid(200, Some(7));
        assert_eq!(g.pid(200), Some(7));
        g.set_pid(200, None);
        assert_eq!(g.pid(200), None);
    }
}
