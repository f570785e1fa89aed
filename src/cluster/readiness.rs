//! Conditions and readiness of a ProxmoxCluster from what a reconcile observed (pure), and the
//! events worth recording when they change.

use capmox_api::v1alpha2::{
    ApiEndpoint, DELETING_REASON, InitializationStatus, MISSING_CONTROL_PLANE_ENDPOINT_REASON,
    PROVISIONED_REASON, PROXMOX_AVAILABLE_CONDITION, PROXMOX_UNREACHABLE_REASON, ProxmoxClusterSpec,
    ProxmoxClusterStatus, READY_CONDITION,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

use crate::conditions::{self, Desired};

/// capmox's message while an external control plane has not set the endpoint.
pub const MISSING_ENDPOINT_MESSAGE: &str =
    "The ProxmoxCluster is missing or waiting for a ControlPlaneEndpoint";
/// capmox's message when there are no credentials at all.
pub const NO_CREDENTIALS_MESSAGE: &str = "No credentials found, ProxmoxCluster missing credentialsRef";

/// Conditions owned by the ProxmoxCluster controller and summarised into `Ready`.
pub const OWNED_CONDITIONS: &[&str] = &[PROXMOX_AVAILABLE_CONDITION];

/// What the reconcile found out about Proxmox availability.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Availability {
    /// Credentials work and Proxmox answered: the cluster is provisioned.
    Available,
    /// An external control plane has not set `spec.controlPlaneEndpoint` yet.
    MissingEndpoint,
    /// The cluster is being deleted and waits for something.
    Deleting(String),
    /// Credentials are missing/unusable or Proxmox did not answer.
    Failed {
        /// Condition reason.
        reason: String,
        /// Condition message.
        message: String,
    },
}

/// Whether an endpoint is unset in the sense of capmox's `IsZero` (no host or no port).
pub fn endpoint_is_zero(endpoint: Option<&ApiEndpoint>) -> bool {
    endpoint.is_none_or(|e| e.host.as_deref().is_none_or(str::is_empty) || e.port.unwrap_or(0) == 0)
}

/// Whether the cluster waits for an external control plane to set its endpoint.
pub fn waiting_for_endpoint(spec: &ProxmoxClusterSpec) -> bool {
    spec.is_external_managed_control_plane() && endpoint_is_zero(spec.control_plane_endpoint.as_ref())
}

fn availability_condition(a: &Availability) -> Desired {
    match a {
        Availability::Available => Desired::truthy(PROXMOX_AVAILABLE_CONDITION, PROVISIONED_REASON, ""),
        Availability::MissingEndpoint => Desired::falsy(
            PROXMOX_AVAILABLE_CONDITION,
            MISSING_CONTROL_PLANE_ENDPOINT_REASON,
            MISSING_ENDPOINT_MESSAGE,
        ),
        Availability::Deleting(m) => Desired::falsy(PROXMOX_AVAILABLE_CONDITION, DELETING_REASON, m.clone()),
        Availability::Failed { reason, message } => {
            Desired::falsy(PROXMOX_AVAILABLE_CONDITION, reason, message.clone())
        }
    }
}

/// Sets `ProxmoxAvailable`, `Paused=False` and the `Ready` summary; marks the cluster provisioned
/// when available (never un-marks it: Cluster API does not expect the flag to flip back).
pub fn apply(status: &mut ProxmoxClusterStatus, a: &Availability, generation: Option<i64>, now: &Time) {
    let mut conds = status.conditions.take().unwrap_or_default();
    conditions::set(&mut conds, &availability_condition(a), generation, now);
    conditions::set(
        &mut conds,
        &conditions::paused(false, false, "ProxmoxCluster"),
        generation,
        now,
    );
    let ready = conditions::ready_summary(&conds, OWNED_CONDITIONS);
    conditions::set(&mut conds, &ready, generation, now);
    status.conditions = Some(conds);
    if *a == Availability::Available {
        status.initialization = Some(InitializationStatus {
            provisioned: Some(true),
        });
    }
}

/// Sets only the `Paused` condition (the only status a paused object gets).
pub fn apply_paused(
    status: &mut ProxmoxClusterStatus,
    cluster_paused: bool,
    annotation_paused: bool,
    generation: Option<i64>,
    now: &Time,
) {
    let mut conds = status.conditions.take().unwrap_or_default();
    let p = conditions::paused(cluster_paused, annotation_paused, "ProxmoxCluster");
    conditions::set(&mut conds, &p, generation, now);
    status.conditions = Some(conds);
}

/// An event to record for a change between two statuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transition {
    /// Warning (true) or normal.
    pub warning: bool,
    /// Event reason.
    pub reason: &'static str,
    /// Event note.
    pub note: String,
}

fn available(conds: &[Condition]) -> Option<&Condition> {
    conditions::get(conds, PROXMOX_AVAILABLE_CONDITION)
}

/// The Normal events for the change from `old` to `new`: Proxmox reachable again, waiting for
/// an endpoint, deleting, ready, and pools created.
pub fn transitions(old: &ProxmoxClusterStatus, new: &ProxmoxClusterStatus) -> Vec<Transition> {
    let empty = Vec::new();
    let o = available(old.conditions.as_ref().unwrap_or(&empty));
    let n = available(new.conditions.as_ref().unwrap_or(&empty));
    let mut out = Vec::new();
    if let Some(n) = n
        && o.map(|o| (&o.status, &o.reason)) != Some((&n.status, &n.reason))
    {
        let was_unreachable = o.is_some_and(|o| o.reason == PROXMOX_UNREACHABLE_REASON);
        // Failures (credentials, Proxmox unreachable, a failed step) are published as Warning
        // events by the controller on every failed reconcile, not here.
        match n.reason.as_str() {
            PROVISIONED_REASON if was_unreachable => out.push(Transition {
                warning: false,
                reason: "ProxmoxReachable",
                note: "Proxmox API is reachable again".into(),
            }),
            MISSING_CONTROL_PLANE_ENDPOINT_REASON => out.push(Transition {
                warning: false,
                reason: MISSING_CONTROL_PLANE_ENDPOINT_REASON,
                note: MISSING_ENDPOINT_MESSAGE.into(),
            }),
            DELETING_REASON => out.push(Transition {
                warning: false,
                reason: DELETING_REASON,
                note: n.message.clone(),
            }),
            _ => {}
        }
    }
    let ready = |s: &ProxmoxClusterStatus| {
        conditions::is_true(s.conditions.as_deref().unwrap_or(&[]), READY_CONDITION)
    };
    if ready(new) && !ready(old) {
        out.push(Transition {
            warning: false,
            reason: "Ready",
            note: "ProxmoxCluster is provisioned".into(),
        });
    }
    if new.in_cluster_ip_pool_ref != old.in_cluster_ip_pool_ref && new.in_cluster_ip_pool_ref.is_some() {
        let names: Vec<_> = new
            .in_cluster_ip_pool_ref
            .iter()
            .flatten()
            .map(|r| r.name.as_str())
            .collect();
        out.push(Transition {
            warning: false,
            reason: "InClusterIPPoolsReconciled",
            note: format!("InClusterIPPools: {}", names.join(", ")),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn now() -> Time {
        Time("2026-01-01T00:00:00Z".parse().unwrap())
    }

    #[test]
    fn endpoint_zero_rules() {
        assert!(endpoint_is_zero(None));
        let e = |h: Option<&str>, p: Option<i32>| ApiEndpoint {
            host: h.map(Into::into),
            port: p,
        };
        assert!(endpoint_is_zero(Some(&e(Some(""), Some(6443)))));
        assert!(endpoint_is_zero(Some(&e(Some("h"), None))));
        assert!(endpoint_is_zero(Some(&e(Some("h"), Some(0)))));
        assert!(!endpoint_is_zero(Some(&e(Some("h"), Some(6443)))));
        let mut spec = ProxmoxClusterSpec {
            external_managed_control_plane: Some(true),
            ..Default::default()
        };
        assert!(waiting_for_endpoint(&spec));
        spec.control_plane_endpoint = Some(e(Some("10.0.0.5"), Some(443)));
        assert!(!waiting_for_endpoint(&spec));
        spec.control_plane_endpoint = None;
        spec.external_managed_control_plane = None;
        assert!(!waiting_for_endpoint(&spec));
    }

    #[test]
    fn available_marks_provisioned_and_ready() {
        let mut s = ProxmoxClusterStatus::default();
        apply(&mut s, &Availability::Available, Some(3), &now());
        assert_eq!(s.initialization.as_ref().unwrap().provisioned, Some(true));
        let c = s.conditions.as_ref().unwrap();
        assert!(conditions::is_true(c, READY_CONDITION));
        assert_eq!(conditions::get(c, "Paused").unwrap().reason, "NotPaused");
        assert_eq!(
            conditions::get(c, PROXMOX_AVAILABLE_CONDITION).unwrap().reason,
            PROVISIONED_REASON
        );
    }

    #[test]
    fn failure_propagates_to_ready_and_keeps_provisioned() {
        let mut s = ProxmoxClusterStatus::default();
        apply(&mut s, &Availability::Available, None, &now());
        let old = s.clone();
        let failed = Availability::Failed {
            reason: PROXMOX_UNREACHABLE_REASON.into(),
            message: "connection refused".into(),
        };
        apply(&mut s, &failed, None, &now());
        let ready = conditions::get(s.conditions.as_ref().unwrap(), READY_CONDITION).unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.reason.as_str()),
            ("False", PROXMOX_UNREACHABLE_REASON)
        );
        assert_eq!(s.initialization.as_ref().unwrap().provisioned, Some(true));
        assert!(
            transitions(&old, &s).is_empty(),
            "failures are published by the controller's error path"
        );
        let back = s.clone();
        apply(&mut s, &Availability::Available, None, &now());
        let reasons: Vec<_> = transitions(&back, &s).iter().map(|t| t.reason).collect();
        assert_eq!(reasons, ["ProxmoxReachable", "Ready"]);
        assert!(transitions(&s, &s).is_empty());
    }

    #[test]
    fn missing_endpoint_is_not_ready() {
        let mut s = ProxmoxClusterStatus::default();
        apply(&mut s, &Availability::MissingEndpoint, None, &now());
        let c = s.conditions.as_ref().unwrap();
        assert!(!conditions::is_true(c, READY_CONDITION));
        assert_eq!(
            conditions::get(c, PROXMOX_AVAILABLE_CONDITION).unwrap().message,
            MISSING_ENDPOINT_MESSAGE
        );
        assert!(s.initialization.is_none());
    }
}
