//! The ProxmoxCluster service's error type, classified once into a condition reason and a
//! requeue policy.

use capmox_api::v1alpha2::{CREDENTIALS_NOT_FOUND_REASON, PROXMOX_UNREACHABLE_REASON};

use crate::credentials::CredentialsError;
use crate::proxmox;

/// How the controller should retry after an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    /// Retry with per-object exponential backoff (network, API server, Proxmox down).
    Transient,
    /// Configuration the user has to fix; retried with backoff as well, since a fix (a new
    /// Secret) does not always trigger an event on the ProxmoxCluster.
    Invalid,
    /// Proxmox refused the credentials: retried with backoff up to [`AUTH_BACKOFF_CAP`], and at
    /// once when the credentials Secret changes.
    Auth,
}

/// Errors of a ProxmoxCluster reconcile.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// No credentials: neither a global client nor a `credentialsRef`, or the Secret is missing.
    #[error("{message}")]
    CredentialsNotFound {
        /// What is missing.
        message: String,
    },
    /// The credentials Secret exists but cannot be used.
    #[error(transparent)]
    InvalidCredentials(#[from] CredentialsError),
    /// Proxmox refused the credentials (401) or a privilege (403).
    #[error("Proxmox refused the API token of {credentials}: {source}; {remedy}")]
    ProxmoxAuth {
        /// Where the credentials come from (`credentials Secret ns/name`, `PROXMOX_TOKEN`).
        credentials: String,
        /// What fixes it.
        remedy: &'static str,
        /// Client error ([`proxmox::Error::Auth`]).
        #[source]
        source: proxmox::Error,
    },
    /// The probe (`GET /version` or `GET /cluster/status`) failed.
    #[error("Proxmox API unreachable: {source}")]
    ProxmoxUnreachable {
        /// Client error.
        #[source]
        source: proxmox::Error,
    },
    /// A Kubernetes API call failed.
    #[error("{action}: {}", brief(source))]
    Kube {
        /// Condition/event reason naming the step that failed (one of the `*_FAILED_REASON`s).
        reason: &'static str,
        /// What was being done.
        action: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
}

/// Reason when Proxmox answers 401: the API token is unknown, revoked, expired or its secret wrong
/// (ProxmoxCluster `ProxmoxAvailable`, ProxmoxMachine `VirtualMachineProvisioned`, Warning events).
pub const PROXMOX_AUTHENTICATION_FAILED_REASON: &str = "ProxmoxAuthenticationFailed";
/// Reason when Proxmox answers 403: the token lacks a privilege (`Permission check failed (...)`).
pub const PROXMOX_PERMISSION_DENIED_REASON: &str = "ProxmoxPermissionDenied";

/// Longest retry delay after Proxmox refused the credentials: the retries back off exponentially
/// up to this, and a rotated credentials Secret is picked up at once through the Secret watch.
pub const AUTH_BACKOFF_CAP: std::time::Duration = std::time::Duration::from_secs(300);

/// The condition reason of a Proxmox auth error (`None` for every other error).
pub fn auth_reason(e: &proxmox::Error) -> Option<&'static str> {
    match e {
        proxmox::Error::Auth { status: 403, .. } => Some(PROXMOX_PERMISSION_DENIED_REASON),
        proxmox::Error::Auth { .. } => Some(PROXMOX_AUTHENTICATION_FAILED_REASON),
        _ => None,
    }
}

/// Reason of a failed finalizer write.
pub const FINALIZER_PATCH_FAILED_REASON: &str = "FinalizerPatchFailed";
/// Reason of a failed InClusterIPPool apply.
pub const IP_POOL_RECONCILIATION_FAILED_REASON: &str = "InClusterIPPoolReconciliationFailed";
/// Reason of a failed read or write of the credentials Secret.
pub const CREDENTIALS_SECRET_FAILED_REASON: &str = "CredentialsSecretReconciliationFailed";
/// Reason of a failed lookup of the owner Cluster.
pub const OWNER_CLUSTER_LOOKUP_FAILED_REASON: &str = "OwnerClusterLookupFailed";
/// Reason of a failed listing of the cluster's ProxmoxMachines during deletion.
pub const MACHINE_LIST_FAILED_REASON: &str = "ProxmoxMachineListFailed";
/// Reason of a failed status write (reported as an event only: the status could not be written).
pub const STATUS_PATCH_FAILED_REASON: &str = "StatusPatchFailed";

/// A Kubernetes client error for a log line or a condition: the API server's message with its
/// reason and code, not kube's debug dump of the whole `Status`.
fn brief(e: &kube::Error) -> String {
    match e {
        kube::Error::Api(s) => format!("{} ({} {})", s.message, s.code, s.reason),
        other => other.to_string(),
    }
}

impl ClusterError {
    /// Wraps a Kubernetes client error with the step's reason and what was being done.
    pub fn kube(reason: &'static str, action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube {
            reason,
            action,
            source,
        }
    }

    /// Short machine-readable reason (metrics label, event reason).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::CredentialsNotFound { .. } => CREDENTIALS_NOT_FOUND_REASON,
            Self::InvalidCredentials(CredentialsError::Client { .. }) => PROXMOX_UNREACHABLE_REASON,
            Self::InvalidCredentials(_) => CREDENTIALS_NOT_FOUND_REASON,
            Self::ProxmoxAuth { source, .. } => {
                auth_reason(source).unwrap_or(PROXMOX_AUTHENTICATION_FAILED_REASON)
            }
            Self::ProxmoxUnreachable { .. } => PROXMOX_UNREACHABLE_REASON,
            Self::Kube { reason, .. } => reason,
        }
    }

    /// Whether a Kubernetes write was refused because the copy it was based on is out of date
    /// (409 Conflict). Nothing is wrong then: the reconcile of the newer copy, which its watch
    /// event brings, does the work, so the failure is neither recorded in the status nor
    /// published as an event.
    pub fn is_conflict(&self) -> bool {
        matches!(self, Self::Kube { source: kube::Error::Api(s), .. } if s.code == 409)
    }

    /// Retry classification.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::CredentialsNotFound { .. } | Self::InvalidCredentials(_) => ErrorKind::Invalid,
            Self::ProxmoxAuth { .. } => ErrorKind::Auth,
            Self::ProxmoxUnreachable { .. } | Self::Kube { .. } => ErrorKind::Transient,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_errors_have_their_own_reasons_and_kind() {
        let e = |status| proxmox::Error::Auth {
            status,
            message: "x".into(),
        };
        assert_eq!(auth_reason(&e(401)), Some(PROXMOX_AUTHENTICATION_FAILED_REASON));
        assert_eq!(auth_reason(&e(403)), Some(PROXMOX_PERMISSION_DENIED_REASON));
        assert_eq!(
            auth_reason(&proxmox::Error::NotFound { message: "x".into() }),
            None
        );
        let c = ClusterError::ProxmoxAuth {
            credentials: "credentials Secret ns/creds".into(),
            remedy: "put a valid token into the Secret",
            source: e(401),
        };
        assert_eq!(c.reason(), PROXMOX_AUTHENTICATION_FAILED_REASON);
        assert_eq!(c.kind(), ErrorKind::Auth);
        assert_eq!(
            c.to_string(),
            "Proxmox refused the API token of credentials Secret ns/creds: proxmox auth error (HTTP 401): x; put a valid token into the Secret"
        );
    }
}
