//! Errors of the stand-in reconcilers (logged and retried, never surfaced to callers).

use crate::ipam::pool::PoolError;

/// Why a stand-in reconcile failed.
#[derive(Debug, thiserror::Error)]
pub enum StandInError {
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done, e.g. `creating IPAddress ns/name`.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// An `InClusterIPPool` cannot be used.
    #[error("InClusterIPPool {pool}: {source}")]
    Pool {
        /// `namespace/name` of the pool.
        pool: String,
        /// What is wrong with it.
        #[source]
        source: PoolError,
    },
    /// An object lacks a field the stand-in needs.
    #[error("{object}: {message}")]
    Invalid {
        /// `kind namespace/name` of the object.
        object: String,
        /// What is missing.
        message: String,
    },
}

impl StandInError {
    /// Whether the error is an optimistic-concurrency conflict (the object changed since it was
    /// read): expected now and then, retried at once and not worth a warning.
    pub fn is_conflict(&self) -> bool {
        matches!(self, StandInError::Kube { source, .. } if is_conflict(source))
    }
}

/// Logs a reconcile error (conflicts at debug level, others as warnings) for `stand_in`.
pub(crate) fn log_retry(stand_in: &str, err: &StandInError) {
    if err.is_conflict() {
        tracing::debug!(stand_in, error = %err, "conflict; retrying");
    } else {
        tracing::warn!(stand_in, error = %err, "retrying");
    }
}

/// How long to wait before retrying after `err`: conflicts are retried almost at once.
pub(crate) fn retry_delay(err: &StandInError, otherwise: std::time::Duration) -> std::time::Duration {
    if err.is_conflict() {
        std::time::Duration::from_millis(50)
    } else {
        otherwise
    }
}

/// Builds a [`StandInError::Kube`] with context.
pub(crate) fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> StandInError {
    let action = action.into();
    move |source| StandInError::Kube { action, source }
}

/// Whether a client error is a 404.
pub(crate) fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

/// Whether a client error is a 409 AlreadyExists/Conflict.
pub(crate) fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}
