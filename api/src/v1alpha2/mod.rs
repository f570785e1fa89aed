//! API version v1alpha2: the storage version, CAPI v1beta2 contract
//! (`status.initialization.provisioned`, `metav1.Condition` conditions).
//!
//! The types mirror capmox v0.9's `api/v1alpha2` field for field (JSON names, optionality, validation);
//! the CRDs assembled from them live in [`crate::crd`].

mod cluster;
mod cluster_template;
mod common;
mod conditions;
mod defaults;
mod devices;
mod ha;
mod machine;
mod machine_status;
mod machine_template;
mod network;
pub mod schema;
mod volumes;

pub use cluster::*;
pub use cluster_template::*;
pub use common::*;
pub use conditions::*;
pub use defaults::{DEFAULT_GATEWAY_METRIC, DEFAULT_MEMORY_ADJUSTMENT, DEFAULT_NET_NAME};
pub use devices::*;
pub use ha::*;
pub use machine::*;
pub use machine_status::*;
pub use machine_template::*;
pub use network::*;
pub use volumes::*;

/// The API version string of this module's kinds.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

/// The API version name (without group).
pub const VERSION: &str = "v1alpha2";

/// `status.vmStatus` value: the VM does not exist.
pub const VM_STATUS_NOT_FOUND: &str = "notfound";
/// `status.vmStatus` value: the VM is being provisioned.
pub const VM_STATUS_PENDING: &str = "pending";
/// `status.vmStatus` value: the VM is provisioned and running.
pub const VM_STATUS_READY: &str = "ready";
