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
