//! Errors of a ProxmoxMachine reconcile, each with a short class for metrics and logs.

use capmox_api::v1alpha2 as api;

use crate::bootstrap::BootstrapError;
use crate::cluster::ClusterError;
use crate::ipam::IpamError;
use crate::proxmox;

/// Reason of a Proxmox API failure outside a provisioning step.
pub const PROXMOX_API_ERROR_REASON: &str = "ProxmoxAPIError";
/// Reason of a Kubernetes API failure.
pub const KUBERNETES_API_ERROR_REASON: &str = "KubernetesAPIError";
/// Reason of inconsistent input the machine cannot be reconciled with.
pub const INVALID_CONFIGURATION_REASON: &str = "InvalidConfiguration";

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

impl From<crate::vm::VmError> for MachineError {
    fn from(e: crate::vm::VmError) -> Self {
        match e {
            crate::vm::VmError::Proxmox { action, source } => Self::Proxmox { action, source },
            crate::vm::VmError::Invalid(m) => Self::Invalid(m),
        }
    }
}

impl From<crate::proxmox::view::ViewError> for MachineError {
    fn from(e: crate::proxmox::view::ViewError) -> Self {
        crate::vm::VmError::from(e).into()
    }
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

    /// The `VirtualMachineProvisioned=False` reason (and Warning event reason) of an error that
    /// stopped a reconcile outside a provisioning step. Never `VMProvisionFailed`, which marks
    /// terminal step failures.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Proxmox { source, .. } => {
                crate::cluster::error::auth_reason(source).unwrap_or(PROXMOX_API_ERROR_REASON)
            }
            Self::Kube { .. } => KUBERNETES_API_ERROR_REASON,
            Self::Credentials(c) => c.reason(),
            Self::Ipam(_) => api::WAITING_FOR_STATIC_IP_ALLOCATION_REASON,
            Self::Bootstrap(_) => api::WAITING_FOR_BOOTSTRAP_DATA_RECONCILIATION_REASON,
            Self::Invalid(_) => INVALID_CONFIGURATION_REASON,
        }
    }

    /// Whether Proxmox refused the credentials (401) or a privilege (403): such errors are retried
    /// with backoff up to [`crate::cluster::error::AUTH_BACKOFF_CAP`] and at once when the
    /// credentials Secret changes.
    pub fn is_auth(&self) -> bool {
        match self {
            Self::Proxmox { source, .. } => crate::cluster::error::auth_reason(source).is_some(),
            Self::Credentials(c) => c.kind() == crate::cluster::ErrorKind::Auth,
            _ => false,
        }
    }

    /// The error with `zone`'s own Proxmox cluster named in its message (a machine of a zone with
    /// its own `credentialsRef`), so that refused credentials point at the right Secret.
    pub fn in_zone(self, zone: &str, secret: &str) -> Self {
        match self {
            Self::Proxmox { action, source } => Self::Proxmox {
                action: format!("Proxmox cluster of zone {zone} (credentials Secret {secret}): {action}"),
                source,
            },
            other => other,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proxmox_auth_errors_get_their_own_reason() {
        let auth = |status| {
            MachineError::proxmox("reading VM 101")(proxmox::Error::Auth {
                status,
                message: "Authentication failed!".into(),
            })
        };
        assert_eq!(auth(401).reason(), "ProxmoxAuthenticationFailed");
        assert_eq!(auth(403).reason(), "ProxmoxPermissionDenied");
        assert!(auth(401).is_auth());
        let other = MachineError::proxmox("x")(proxmox::Error::NotFound { message: "x".into() });
        assert_eq!(other.reason(), PROXMOX_API_ERROR_REASON);
        assert!(!other.is_auth());
        let zoned = auth(401).in_zone("b", "ns/pve-b");
        assert_eq!(zoned.reason(), "ProxmoxAuthenticationFailed");
        assert!(
            zoned
                .to_string()
                .starts_with("Proxmox cluster of zone b (credentials Secret ns/pve-b): reading VM 101"),
            "{zoned}"
        );
    }
}
