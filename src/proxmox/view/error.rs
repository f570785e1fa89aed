//! Errors of the view's reads: a Proxmox request that failed (with what was being read), or an
//! answer that contradicts itself (the VM moved while it was read).

use crate::proxmox::Error;

/// A read of the view failed.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    /// A Proxmox request failed.
    #[error("{action}: {source}")]
    Proxmox {
        /// What was being read.
        action: String,
        /// The client's error.
        #[source]
        source: Error,
    },
    /// Proxmox's answers disagree (e.g. the VM left its node while it was read): look again.
    #[error("{0}")]
    Inconsistent(String),
}

impl ViewError {
    /// Wraps a client error with what was being read.
    pub fn proxmox(action: impl Into<String>) -> impl FnOnce(Error) -> Self {
        let action = action.into();
        move |source| Self::Proxmox { action, source }
    }
}
