//! Errors of the VM lifecycle: a Proxmox request that failed (with what was being done), or a
//! state the pass cannot act on. Owners wrap them in their own error type (see
//! [`super::Adapter::Error`]) and classify them once there.

use crate::proxmox;
use crate::proxmox::view::ViewError;

/// Why a pass could not finish its step.
#[derive(Debug, thiserror::Error)]
pub enum VmError {
    /// A Proxmox API call failed.
    #[error("{action}: {source}")]
    Proxmox {
        /// What was being done.
        action: String,
        /// Client error.
        #[source]
        source: proxmox::Error,
    },
    /// Something the pass needs is missing or inconsistent.
    #[error("{0}")]
    Invalid(String),
}

impl VmError {
    /// Wraps a Proxmox client error with what was being done.
    pub fn proxmox(action: impl Into<String>) -> impl FnOnce(proxmox::Error) -> Self {
        let action = action.into();
        move |source| Self::Proxmox { action, source }
    }

    /// The Proxmox error, if this is one.
    pub fn proxmox_error(&self) -> Option<&proxmox::Error> {
        match self {
            Self::Proxmox { source, .. } => Some(source),
            Self::Invalid(_) => None,
        }
    }
}

impl From<ViewError> for VmError {
    fn from(e: ViewError) -> Self {
        match e {
            ViewError::Proxmox { action, source } => Self::Proxmox { action, source },
            ViewError::Inconsistent(m) => Self::Invalid(m),
        }
    }
}
