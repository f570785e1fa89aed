//! API version v1alpha1: served for the CAPI v1beta1 contract (CAPI <= v1.10).
//!
//! This version keeps the v1beta1-contract status shape (`status.ready`,
//! `failureReason`/`failureMessage`, CAPI v1beta1 conditions). It is not the
//! storage version; objects are converted to and from `v1alpha2` (the hub).

mod capi;
mod cluster;
mod machine;
mod network;
pub mod schema;
mod templates;

pub use capi::*;
pub use cluster::*;
pub use machine::*;
pub use network::*;
pub use templates::*;

/// The API version string of this module's kinds.
pub const API_VERSION: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
