//! capmox-compatible API types for the `infrastructure.cluster.x-k8s.io` group.

pub mod conversion;
pub mod v1alpha1;
pub mod v1alpha2;
