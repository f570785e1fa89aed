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
    /// `GET /version` failed.
    #[error("Proxmox API unreachable: {source}")]
    ProxmoxUnreachable {
        /// Client error.
        #[source]
        source: proxmox::Error,
    },
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// Client error.
        #[source]
        source: kube::Error,
    },
}

impl ClusterError {
    /// Wraps a Kubernetes client error with what was being done.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }

    /// Short machine-readable reason (metrics label, event reason).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::CredentialsNotFound { .. } => CREDENTIALS_NOT_FOUND_REASON,
            Self::InvalidCredentials(CredentialsError::Client { .. }) => PROXMOX_UNREACHABLE_REASON,
            Self::InvalidCredentials(_) => CREDENTIALS_NOT_FOUND_REASON,
            Self::ProxmoxUnreachable { .. } => PROXMOX_UNREACHABLE_REASON,
            Self::Kube { .. } => "KubernetesAPIError",
        }
    }

    /// The `ProxmoxAvailable=False` reason this error sets, if it concerns Proxmox at all.
    pub fn condition_reason(&self) -> Option<&'static str> {
        match self {
            Self::Kube { .. } => None,
            other => Some(other.reason()),
        }
    }

    /// Retry classification.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Self::CredentialsNotFound { .. } | Self::InvalidCredentials(_) => ErrorKind::Invalid,
            Self::ProxmoxUnreachable { .. } | Self::Kube { .. } => ErrorKind::Transient,
        }
    }
}
