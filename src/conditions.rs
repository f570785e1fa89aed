//! `metav1.Condition` bookkeeping: set a condition keeping `lastTransitionTime` unless the status
//! changes, the `Ready` summary over a kind's owned conditions, and the CAPI `Paused` condition.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// `True`.
pub const TRUE: &str = "True";
/// `False`.
pub const FALSE: &str = "False";

/// The `Paused` condition type (CAPI v1beta2 contract).
pub const PAUSED_CONDITION: &str = "Paused";
/// Reason of `Paused=True`.
pub const PAUSED_REASON: &str = "Paused";
/// Reason of `Paused=False`.
pub const NOT_PAUSED_REASON: &str = "NotPaused";
/// Reason of `Ready=True` when every owned condition is true.
pub const READY_REASON: &str = "Ready";

/// A condition without a timestamp: what a reconcile decides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Desired {
    /// Condition type.
    pub type_: String,
    /// Whether the condition holds.
    pub status: bool,
    /// CamelCase reason.
    pub reason: String,
    /// Human-readable message.
    pub message: String,
}

impl Desired {
    /// A true condition.
    pub fn truthy(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.to_owned(),
            status: true,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    /// A false condition.
    pub fn falsy(type_: &str, reason: &str, message: impl Into<String>) -> Self {
        Self {
            type_: type_.to_owned(),
            status: false,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }
}

fn status_str(b: bool) -> &'static str {
    if b { TRUE } else { FALSE }
}

/// The current time as a Kubernetes timestamp (what [`set`] takes).
pub fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// Sets `desired` in `conditions`. The existing `lastTransitionTime` is kept unless the status
/// changes; `now` is used for new conditions and transitions.
pub fn set(conditions: &mut Vec<Condition>, desired: &Desired, generation: Option<i64>, now: &Time) {
    let status = status_str(desired.status);
    match conditions.iter_mut().find(|c| c.type_ == desired.type_) {
        Some(c) => {
            if c.status != status {
                c.last_transition_time = now.clone();
                c.status = status.to_owned();
            }
            c.reason = desired.reason.clone();
            c.message = desired.message.clone();
            c.observed_generation = generation;
        }
        None => conditions.push(Condition {
            type_: desired.type_.clone(),
            status: status.to_owned(),
            reason: desired.reason.clone(),
            message: desired.message.clone(),
            observed_generation: generation,
            last_transition_time: now.clone(),
        }),
    }
}

/// Looks a condition up by type.
pub fn get<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether a condition is present and `True`.
pub fn is_true(conditions: &[Condition], type_: &str) -> bool {
    get(conditions, type_).is_some_and(|c| c.status == TRUE)
}

/// The `Ready` summary over `owned` condition types: true when every owned condition is true,
/// otherwise false with the first failing (or missing) condition's reason and message.
pub fn ready_summary(conditions: &[Condition], owned: &[&str]) -> Desired {
    for t in owned {
        match get(conditions, t) {
            Some(c) if c.status == TRUE => {}
            Some(c) => {
                return Desired::falsy(
                    capmox_api::v1alpha2::READY_CONDITION,
                    &c.reason,
                    c.message.clone(),
                );
            }
            None => {
                return Desired::falsy(
                    capmox_api::v1alpha2::READY_CONDITION,
                    "Unknown",
                    format!("condition {t} is not reported yet"),
                );
            }
        }
    }
    Desired::truthy(capmox_api::v1alpha2::READY_CONDITION, READY_REASON, "")
}

/// The `Paused` condition: why the object is paused, or `NotPaused`.
pub fn paused(cluster_paused: bool, annotation_paused: bool, kind: &str) -> Desired {
    let mut why = Vec::new();
    if cluster_paused {
        why.push("Cluster spec.paused is set to true".to_owned());
    }
    if annotation_paused {
        why.push(format!("{kind} has the cluster.x-k8s.io/paused annotation"));
    }
    if why.is_empty() {
        Desired::falsy(PAUSED_CONDITION, NOT_PAUSED_REASON, "")
    } else {
        Desired::truthy(PAUSED_CONDITION, PAUSED_REASON, why.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(s: &str) -> Time {
        Time(s.parse().unwrap())
    }

    #[test]
    fn transition_time_moves_only_on_status_change() {
        let mut c = Vec::new();
        set(
            &mut c,
            &Desired::falsy("A", "R1", "m1"),
            Some(1),
            &t("2026-01-01T00:00:00Z"),
        );
        set(
            &mut c,
            &Desired::falsy("A", "R2", "m2"),
            Some(2),
            &t("2026-01-01T00:01:00Z"),
        );
        assert_eq!(c.len(), 1);
        assert_eq!(c[0].last_transition_time, t("2026-01-01T00:00:00Z"));
        assert_eq!((c[0].reason.as_str(), c[0].observed_generation), ("R2", Some(2)));
        set(
            &mut c,
            &Desired::truthy("A", "Ok", ""),
            Some(2),
            &t("2026-01-01T00:02:00Z"),
        );
        assert_eq!(c[0].last_transition_time, t("2026-01-01T00:02:00Z"));
        assert_eq!(c[0].status, TRUE);
    }

    #[test]
    fn ready_summary_reports_first_failing() {
        let now = t("2026-01-01T00:00:00Z");
        let mut c = Vec::new();
        assert!(!ready_summary(&c, &["A"]).status);
        set(&mut c, &Desired::truthy("A", "Ok", ""), None, &now);
        set(&mut c, &Desired::falsy("B", "Broken", "why"), None, &now);
        let r = ready_summary(&c, &["A", "B"]);
        assert_eq!(
            (r.status, r.reason.as_str(), r.message.as_str()),
            (false, "Broken", "why")
        );
        assert!(ready_summary(&c, &["A"]).status);
    }

    #[test]
    fn paused_messages() {
        assert_eq!(paused(false, false, "ProxmoxCluster").reason, NOT_PAUSED_REASON);
        let p = paused(true, true, "ProxmoxCluster");
        assert!(p.status);
        assert!(p.message.contains("spec.paused") && p.message.contains("annotation"));
    }
}
