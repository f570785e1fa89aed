//! Errors of a ProxmoxMachine reconcile, each with a short class for metrics and logs.

use crate::bootstrap::BootstrapError;
use crate::cluster::ClusterError;
use crate::ipam::IpamError;
use crate::proxmox;

/// Why a machine reconcile could not finish its step.
#[derive(Debug, thiserror::Error)]
pub enum MachineError {
    /// A Proxmox API call failed.
    #[error("{action}: {source}")]
    Proxmox {
        /// What was being done.
        action: String,
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
        source: Box<kube::Error>,
    },
    /// No usable Proxmox credentials for the machine's cluster.
    #[error(transparent)]
    Credentials(#[from] ClusterError),
    /// IPAM bookkeeping failed.
    #[error(transparent)]
    Ipam(#[from] IpamError),
    /// The bootstrap data could not be read or rendered.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// Something the machine needs is missing or inconsistent.
    #[error("{0}")]
    Invalid(String),
}

impl MachineError {
    /// Wraps a Proxmox client error with what was being done.
    pub fn proxmox(action: impl Into<String>) -> impl FnOnce(proxmox::Error) -> Self {
        let action = action.into();
        move |source| Self::Proxmox { action, source }
    }

    /// Wraps a Kubernetes client error with what was being done.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube {
            action,
            source: Box::new(source),
        }
    }

    /// Short lower-case class for the `capmox_reconcile_errors_total{reason}` label.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Proxmox { source, .. } => source.class().as_str(),
            Self::Kube { .. } => "kubernetes",
            Self::Credentials(_) => "credentials",
            Self::Ipam(_) => "ipam",
            Self::Bootstrap(_) => "bootstrap",
            Self::Invalid(_) => "invalid",
        }
    }

    /// The Proxmox error, if this is one.
    pub fn proxmox_error(&self) -> Option<&proxmox::Error> {
        match self {
            Self::Proxmox { source, .. } => Some(source),
            _ => None,
        }
    }
}
