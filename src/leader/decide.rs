//! The pure leader-election decision: given the observed Lease, the local clock and what we
//! believe about our own leadership, what to do next.
//!
//! Expiry is judged against the LOCAL time at which the lease record was last seen to change
//! (like client-go), never against the `renewTime` written by another host, so clock skew between
//! replicas cannot make two of them leader at once. A new candidate therefore waits one full lease
//! duration after first seeing a record held by someone else, unless the holder released it
//! (empty `holderIdentity`).

use std::time::{Duration, Instant};

/// Timing of the election.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timing {
    /// How long non-leaders wait after the last observed change before taking over.
    pub lease_duration: Duration,
    /// How long the leader keeps trying to renew before it gives up leadership.
    pub renew_deadline: Duration,
    /// Interval between attempts (candidates) and renewals (leader).
    pub retry_period: Duration,
}

impl Default for Timing {
    fn default() -> Self {
        Self {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }
}

impl Timing {
    /// Checks the client-go invariants: `lease_duration > renew_deadline > retry_period > 0`.
    pub fn validate(&self) -> Result<(), String> {
        if self.retry_period.is_zero() {
            return Err("leader election retry period must be positive".into());
        }
        if self.renew_deadline <= self.retry_period {
            return Err(format!(
                "leader election renew deadline ({:?}) must be greater than the retry period ({:?})",
                self.renew_deadline, self.retry_period
            ));
        }
        if self.lease_duration <= self.renew_deadline {
            return Err(format!(
                "leader election lease duration ({:?}) must be greater than the renew deadline ({:?})",
                self.lease_duration, self.renew_deadline
            ));
        }
        Ok(())
    }
}

/// What the Lease looked like when last read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseState {
    /// No Lease object exists.
    Missing,
    /// The Lease exists.
    Held {
        /// `spec.holderIdentity` (`None` or empty: released).
        holder: Option<String>,
        /// `spec.leaseDurationSeconds` as written by the holder (`None`: absent).
        lease_duration: Option<Duration>,
        /// Local time at which this record (holder or renew time) was first seen in its current form.
        observed_at: Instant,
    },
}

/// What we believe about our own leadership.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Not leader.
    Candidate,
    /// Leader; the last successful write of the Lease happened at `last_renewed` (local time).
    Leader {
        /// Local time of the last successful create/acquire/renew.
        last_renewed: Instant,
    },
}

/// The next step of the election loop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Create the Lease with us as holder.
    Create,
    /// Take over a released or expired Lease (increment `leaseTransitions`, set `acquireTime`).
    Acquire,
    /// We hold the Lease: write a fresh `renewTime`.
    Renew,
    /// Someone else holds a valid Lease: read it again at `until`.
    Wait {
        /// When to look again.
        until: Instant,
    },
    /// We were leader and are not any more (renew deadline missed or the Lease was taken over).
    Lost,
}

/// Decides the next step. Pure: no I/O, no clock reads.
pub fn decide(now: Instant, lease: &LeaseState, identity: &str, role: Role, timing: &Timing) -> Action {
    if let Role::Leader { last_renewed } = role {
        // `now` earlier than the last renewal (impossible with a monotonic clock) counts as no time passed.
        if now.saturating_duration_since(last_renewed) > timing.renew_deadline {
            return Action::Lost;
        }
    }
    match lease {
        LeaseState::Missing => match role {
            // Our Lease vanished (deleted by someone): recreate it while we are inside the deadline.
            Role::Leader { .. } | Role::Candidate => Action::Create,
        },
        LeaseState::Held {
            holder,
            lease_duration,
            observed_at,
        } => {
            let holder = holder.as_deref().unwrap_or("");
            if holder == identity {
                return Action::Renew;
            }
            if matches!(role, Role::Leader { .. }) && !holder.is_empty() {
                return Action::Lost;
            }
            if holder.is_empty() {
                return Action::Acquire;
            }
            // A missing or non-positive duration is treated as our own configured duration, so a
            // malformed record cannot be stolen early.
            let duration = lease_duration
                .filter(|d| !d.is_zero())
                .unwrap_or(timing.lease_duration);
            let expires = observed_at.checked_add(duration);
            match expires {
                Some(expires) if expires > now => Action::Wait {
                    until: expires.min(now + timing.retry_period),
                },
                Some(_) => Action::Acquire,
                // Overflow: the lease never expires in practice; look again later.
                None => Action::Wait {
                    until: now + timing.retry_period,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ME: &str = "me_abc";
    const OTHER: &str = "other_xyz";

    fn timing() -> Timing {
        Timing {
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    fn held(holder: Option<&str>, secs: Option<u64>, observed_at: Instant) -> LeaseState {
        LeaseState::Held {
            holder: holder.map(str::to_owned),
            lease_duration: secs.map(Duration::from_secs),
            observed_at,
        }
    }

    fn s(n: u64) -> Duration {
        Duration::from_secs(n)
    }

    #[test]
    fn missing_lease_is_created() {
        let t0 = Instant::now();
        assert_eq!(
            decide(t0, &LeaseState::Missing, ME, Role::Candidate, &timing()),
            Action::Create
        );
        let leader = Role::Leader { last_renewed: t0 };
        assert_eq!(
            decide(t0 + s(1), &LeaseState::Missing, ME, leader, &timing()),
            Action::Create
        );
    }

    #[test]
    fn held_by_other_and_fresh_waits_at_most_a_retry_period() {
        let t0 = Instant::now();
        let lease = held(Some(OTHER), Some(15), t0);
        assert_eq!(
            decide(t0, &lease, ME, Role::Candidate, &timing()),
            Action::Wait { until: t0 + s(2) }
        );
        // Close to expiry: wake up exactly at expiry.
        assert_eq!(
            decide(t0 + s(14), &lease, ME, Role::Candidate, &timing()),
            Action::Wait { until: t0 + s(15) }
        );
    }

    #[test]
    fn expiry_boundary_is_inclusive() {
        let t0 = Instant::now();
        let lease = held(Some(OTHER), Some(15), t0);
        assert!(matches!(
            decide(
                t0 + s(15) - Duration::from_nanos(1),
                &lease,
                ME,
                Role::Candidate,
                &timing()
            ),
            Action::Wait { .. }
        ));
        assert_eq!(
            decide(t0 + s(15), &lease, ME, Role::Candidate, &timing()),
            Action::Acquire
        );
        assert_eq!(
            decide(t0 + s(100), &lease, ME, Role::Candidate, &timing()),
            Action::Acquire
        );
    }

    #[test]
    fn holder_duration_beats_ours() {
        let t0 = Instant::now();
        let lease = held(Some(OTHER), Some(60), t0);
        assert!(matches!(
            decide(t0 + s(30), &lease, ME, Role::Candidate, &timing()),
            Action::Wait { .. }
        ));
        assert_eq!(
            decide(t0 + s(60), &lease, ME, Role::Candidate, &timing()),
            Action::Acquire
        );
        let short = held(Some(OTHER), Some(1), t0);
        assert_eq!(
            decide(t0 + s(1), &short, ME, Role::Candidate, &timing()),
            Action::Acquire
        );
    }

    #[test]
    fn missing_or_zero_duration_uses_ours() {
        let t0 = Instant::now();
        for lease in [held(Some(OTHER), None, t0), held(Some(OTHER), Some(0), t0)] {
            assert!(matches!(
                decide(t0 + s(14), &lease, ME, Role::Candidate, &timing()),
                Action::Wait { .. }
            ));
            assert_eq!(
                decide(t0 + s(15), &lease, ME, Role::Candidate, &timing()),
                Action::Acquire
            );
        }
    }

    #[test]
    fn released_lease_is_acquired_at_once() {
        let t0 = Instant::now();
        for holder in [None, Some("")] {
            let lease = held(holder, Some(1), t0);
            assert_eq!(
                decide(t0, &lease, ME, Role::Candidate, &timing()),
                Action::Acquire
            );
        }
    }

    #[test]
    fn held_by_us_is_renewed() {
        let t0 = Instant::now();
        let lease = held(Some(ME), Some(15), t0);
        assert_eq!(
            decide(
                t0 + s(3),
                &lease,
                ME,
                Role::Leader { last_renewed: t0 },
                &timing()
            ),
            Action::Renew
        );
        // A record naming us while we think we are candidate (e.g. our create succeeded but the
        // response was lost) is simply renewed.
        assert_eq!(decide(t0, &lease, ME, Role::Candidate, &timing()), Action::Renew);
    }

    #[test]
    fn renew_deadline_missed_loses_leadership() {
        let t0 = Instant::now();
        let lease = held(Some(ME), Some(15), t0);
        let leader = Role::Leader { last_renewed: t0 };
        assert_eq!(decide(t0 + s(10), &lease, ME, leader, &timing()), Action::Renew);
        assert_eq!(
            decide(
                t0 + s(10) + Duration::from_millis(1),
                &lease,
                ME,
                leader,
                &timing()
            ),
            Action::Lost
        );
        assert_eq!(
            decide(t0 + s(11), &LeaseState::Missing, ME, leader, &timing()),
            Action::Lost
        );
    }

    #[test]
    fn taken_over_while_leader_is_lost() {
        let t0 = Instant::now();
        let lease = held(Some(OTHER), Some(15), t0);
        assert_eq!(
            decide(
                t0 + s(1),
                &lease,
                ME,
                Role::Leader { last_renewed: t0 },
                &timing()
            ),
            Action::Lost
        );
    }

    #[test]
    fn released_while_leader_is_reacquired() {
        let t0 = Instant::now();
        let lease = held(None, Some(1), t0);
        assert_eq!(
            decide(
                t0 + s(1),
                &lease,
                ME,
                Role::Leader { last_renewed: t0 },
                &timing()
            ),
            Action::Acquire
        );
    }

    #[test]
    fn clock_before_observation_counts_as_no_time_passed() {
        let t0 = Instant::now() + s(100);
        let lease = held(Some(OTHER), Some(15), t0);
        let earlier = t0 - s(50);
        assert_eq!(
            decide(earlier, &lease, ME, Role::Candidate, &timing()),
            Action::Wait {
                until: earlier + s(2)
            }
        );
        // last_renewed in the future: still leader.
        let ours = held(Some(ME), Some(15), t0);
        assert_eq!(
            decide(earlier, &ours, ME, Role::Leader { last_renewed: t0 }, &timing()),
            Action::Renew
        );
    }

    #[test]
    fn huge_duration_does_not_overflow() {
        let t0 = Instant::now();
        let lease = LeaseState::Held {
            holder: Some(OTHER.into()),
            lease_duration: Some(Duration::MAX),
            observed_at: t0,
        };
        assert_eq!(
            decide(t0 + s(1), &lease, ME, Role::Candidate, &timing()),
            Action::Wait { until: t0 + s(3) }
        );
    }

    #[test]
    fn identity_match_is_exact() {
        let t0 = Instant::now();
        let lease = held(Some("me_abc2"), Some(15), t0);
        assert!(matches!(
            decide(t0, &lease, ME, Role::Candidate, &timing()),
            Action::Wait { .. }
        ));
    }

    #[test]
    fn timing_invariants() {
        assert!(Timing::default().validate().is_ok());
        assert!(timing().validate().is_ok());
        let bad = |l, r, p| Timing {
            lease_duration: Duration::from_millis(l),
            renew_deadline: Duration::from_millis(r),
            retry_period: Duration::from_millis(p),
        };
        assert!(bad(2000, 1000, 200).validate().is_ok());
        assert!(bad(1000, 1000, 200).validate().is_err());
        assert!(bad(2000, 200, 200).validate().is_err());
        assert!(bad(2000, 1000, 0).validate().is_err());
    }

    mod properties {
        use super::*;
        use proptest::prelude::*;

        fn holder_strategy() -> impl Strategy<Value = Option<String>> {
            prop_oneof![
                Just(None),
                Just(Some(String::new())),
                Just(Some(ME.to_owned())),
                Just(Some(OTHER.to_owned())),
            ]
        }

        proptest! {
            /// Safety: we never take a lease another holder still owns, and we stop leading
            /// exactly when the renew deadline passed or someone else holds the lease.
            #[test]
            fn decisions_are_safe(
                holder in holder_strategy(),
                missing in any::<bool>(),
                duration_s in proptest::option::of(0u64..120),
                observed_ms in 0u64..200_000,
                now_ms in 0u64..200_000,
                leader in proptest::option::of(0u64..200_000),
            ) {
                let base = Instant::now();
                let t = timing();
                let now = base + Duration::from_millis(now_ms);
                let observed_at = base + Duration::from_millis(observed_ms);
                let lease = if missing {
                    LeaseState::Missing
                } else {
                    LeaseState::Held {
                        holder: holder.clone(),
                        lease_duration: duration_s.map(Duration::from_secs),
                        observed_at,
                    }
                };
                let role = leader.map_or(Role::Candidate, |ms| Role::Leader {
                    last_renewed: base + Duration::from_millis(ms),
                });
                let action = decide(now, &lease, ME, role, &t);

                let deadline_missed = matches!(role, Role::Leader { last_renewed }
                    if now.saturating_duration_since(last_renewed) > t.renew_deadline);
                let other = !missing && holder.as_deref().is_some_and(|h| !h.is_empty() && h != ME);
                if matches!(role, Role::Leader { .. }) {
                    prop_assert_eq!(action == Action::Lost, deadline_missed || other);
                } else {
                    prop_assert_ne!(action, Action::Lost);
                }
                if other && action == Action::Acquire {
                    let d = duration_s.filter(|d| *d > 0).map_or(t.lease_duration, Duration::from_secs);
                    prop_assert!(now >= observed_at + d, "acquired an unexpired lease");
                }
                if let Action::Wait { until } = action {
                    prop_assert!(until > now);
                    prop_assert!(until <= now + t.retry_period);
                }
            }
        }
    }
}
