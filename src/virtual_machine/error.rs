//! Errors of a ProxmoxVirtualMachine reconcile, each with a short class for metrics and logs and
//! a reason for the `Ready` condition and Warning events.

use crate::credentials::CredentialsError;
use crate::proxmox;

/// Reason of a Proxmox API failure outside a step.
pub const PROXMOX_API_ERROR_REASON: &str = "ProxmoxAPIError";
/// Reason of a Kubernetes API failure.
pub const KUBERNETES_API_ERROR_REASON: &str = "KubernetesAPIError";
/// Reason of missing or unusable credentials.
pub const CREDENTIALS_REASON: &str = "CredentialsUnavailable";
/// Reason of inconsistent input.
pub const INVALID_CONFIGURATION_REASON: &str = "InvalidConfiguration";

/// Why a ProxmoxVirtualMachine reconcile could not finish its step.
#[derive(Debug, thiserror::Error)]
pub enum VirtualMachineError {
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
    /// No usable Proxmox credentials.
    #[error("{0}")]
    Credentials(String),
    /// Something the object needs is missing or inconsistent.
    #[error("{0}")]
    Invalid(String),
}

impl From<crate::vm::VmError> for VirtualMachineError {
    fn from(e: crate::vm::VmError) -> Self {
        match e {
            crate::vm::VmError::Proxmox { action, source } => Self::Proxmox { action, source },
            crate::vm::VmError::Invalid(m) => Self::Invalid(m),
        }
    }
}

impl From<crate::proxmox::view::ViewError> for VirtualMachineError {
    fn from(e: crate::proxmox::view::ViewError) -> Self {
        crate::vm::VmError::from(e).into()
    }
}

impl From<crate::ipam::IpamError> for VirtualMachineError {
    fn from(e: crate::ipam::IpamError) -> Self {
        match e {
            crate::ipam::IpamError::Kube {
                action,
                namespace,
                name,
                source,
            } => Self::Kube {
                action: format!("{action} {namespace}/{name}"),
                source,
            },
            other => Self::Invalid(other.to_string()),
        }
    }
}

impl From<CredentialsError> for VirtualMachineError {
    fn from(e: CredentialsError) -> Self {
        Self::Credentials(e.to_string())
    }
}

impl VirtualMachineError {
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

    /// Short lower-case class for `capmox_reconcile_errors_total{reason}`.
    pub fn class(&self) -> &'static str {
        match self {
            Self::Proxmox { source, .. } => source.class().as_str(),
            Self::Kube { .. } => "kubernetes",
            Self::Credentials(_) => "credentials",
            Self::Invalid(_) => "invalid",
        }
    }

    /// The condition and event reason.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Proxmox { source, .. } => {
                crate::cluster::error::auth_reason(source).unwrap_or(PROXMOX_API_ERROR_REASON)
            }
            Self::Kube { .. } => KUBERNETES_API_ERROR_REASON,
            Self::Credentials(_) => CREDENTIALS_REASON,
            Self::Invalid(_) => INVALID_CONFIGURATION_REASON,
        }
    }

    /// Whether Proxmox refused the credentials or a privilege.
    pub fn is_auth(&self) -> bool {
        matches!(self, Self::Proxmox { source, .. } if crate::cluster::error::auth_reason(source).is_some())
    }
}
