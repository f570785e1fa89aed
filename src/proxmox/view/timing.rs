//! How long Proxmox tasks take, per task type, and so when to look at a task again: instead of a
//! blind backoff, a task is first checked when it should be done — at 90 % of the estimate for
//! its type — and then at a tenth of the estimate. Estimates start from typical Proxmox VE
//! durations and follow what this Proxmox cluster actually does (an exponentially weighted
//! average of the observed durations), so a cluster with slow storage is polled less often, not
//! more.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::Duration;

/// Weight of a new observation in the running estimate.
const ALPHA: f64 = 0.3;

/// What a task seen done at its first look counts as: this share of the time it was seen done.
const FIRST_LOOK_SAMPLE: f64 = 0.92;

/// The timing key of a clone: full and linked clones take very different times.
pub fn clone_key(full: bool) -> &'static str {
    if full { "qmclone-full" } else { "qmclone-linked" }
}

/// Typical duration of a task type on Proxmox VE (a 20 GB disk for clones).
pub fn typical(kind: &str) -> Duration {
    Duration::from_millis(match kind {
        "qmclone-full" => 20_000,
        "qmclone" | "qmclone-linked" => 2_000,
        "qmstart" => 3_000,
        "qmshutdown" | "qmreboot" => 5_000,
        "qmdestroy" => 2_000,
        "qmconfig" => 300,
        "resize" | "imgcopy" | "imgdel" | "qmstop" | "qmresume" => 1_000,
        _ => 1_000,
    })
}

/// Learned task durations of one Proxmox cluster.
#[derive(Debug, Default)]
pub struct Timing {
    estimates: Mutex<HashMap<String, Duration>>,
}

impl Timing {
    /// The expected duration of a task of `kind`.
    pub fn estimate(&self, kind: &str) -> Duration {
        self.estimates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(kind)
            .copied()
            .unwrap_or_else(|| typical(kind))
    }

    /// A task of `kind` was seen done after `took`. Seen done at the first look (`first_look`),
    /// it may have ended earlier: the estimate then moves towards a little less than `took`, so
    /// it can also shrink — slowly: a first look comes at 105 % of the estimate, and a sample of
    /// 80 % of that (as it was) made the estimate settle where half the first looks came too
    /// early, which cost a second status read for half the tasks (about 2.4 reads per start at
    /// 100 machines). At 92 % the estimate shrinks by about 1 % per task while the first looks
    /// find the tasks done.
    pub fn observed(&self, kind: &str, took: Duration, first_look: bool) {
        let mut m = self
            .estimates
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = m.get(kind).copied().unwrap_or_else(|| typical(kind));
        let sample = if first_look {
            took.mul_f64(FIRST_LOOK_SAMPLE)
        } else {
            took
        };
        let new = old.as_secs_f64() * (1.0 - ALPHA) + sample.as_secs_f64() * ALPHA;
        m.insert(kind.to_owned(), Duration::from_secs_f64(new.max(0.0)));
    }

    /// When to look at a task of `kind` that has run for `elapsed`: just after its estimate,
    /// then every tenth of the estimate; never sooner than `min` nor later than `max` (a long
    /// estimate is checked at least every `max`).
    pub fn next_look(&self, kind: &str, elapsed: Duration, min: Duration, max: Duration) -> Duration {
        let max = max.max(min);
        let estimate = self.estimate(kind);
        let first = self.first_look(kind);
        if elapsed < first {
            return (first - elapsed).clamp(min, max);
        }
        (estimate / 10).clamp(min, max)
    }

    /// When a task of `kind` is first looked at: just after its estimate.
    pub fn first_look(&self, kind: &str) -> Duration {
        self.estimate(kind).mul_f64(1.05)
    }

    /// Whether a look after `elapsed` was the first one (it came before the first look plus
    /// half a `max` interval).
    pub fn was_first_look(&self, kind: &str, elapsed: Duration, max: Duration) -> bool {
        elapsed <= self.first_look(kind).min(max) + max / 2
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_look_near_the_estimate_then_a_tenth() {
        let t = Timing::default();
        let (min, max) = (Duration::from_millis(10), Duration::from_secs(60));
        let look = |kind, s: u64| t.next_look(kind, Duration::from_secs(s), min, max);
        assert_eq!(look("qmclone-full", 0), Duration::from_secs(21));
        assert_eq!(look("qmclone-full", 20), Duration::from_secs(1));
        assert_eq!(look("qmclone-full", 22), Duration::from_secs(2));
        assert_eq!(look("qmconfig", 1), Duration::from_millis(30));
        assert_eq!(
            t.next_look("qmconfig", Duration::ZERO, Duration::from_secs(1), max),
            Duration::from_secs(1)
        );
        // A long estimate is looked at at least every `max`.
        assert_eq!(
            t.next_look("qmclone-full", Duration::ZERO, min, Duration::from_millis(300)),
            Duration::from_millis(300)
        );
    }

    #[test]
    fn estimates_follow_observations_both_ways() {
        let t = Timing::default();
        for _ in 0..30 {
            t.observed("qmclone-full", Duration::from_secs(60), false);
        }
        let e = t.estimate("qmclone-full").as_secs_f64();
        assert!((e - 60.0).abs() < 0.1, "{e}");
        for _ in 0..60 {
            t.observed("qmclone-full", Duration::from_secs(2), true);
        }
        let e = t.estimate("qmclone-full").as_secs_f64();
        assert!(
            e < 2.0,
            "a task always done at the first look is looked at sooner: {e}"
        );
        assert_eq!(t.estimate("qmstart"), Duration::from_secs(3));
    }
}
