//! capmox-compatible API types for the `infrastructure.cluster.x-k8s.io` group.
//!
//! * [`v1alpha2`]: the storage version (CAPI v1beta2 contract).
//! * [`v1alpha1`]: the older served version (CAPI v1beta1 contract).
//! * [`conversion`]: pure v1alpha1 ⇄ v1alpha2 conversion.
//! * [`crd`]: the merged, labelled CRDs written to `config/crd/bases/` by the `crdgen` binary.
//! * [`consts`]: finalizers, labels and annotations.
//! * [`capi`]: the few Cluster API and IPAM types the controllers read.
//! * [`webhook`]: the table of served webhooks and the manifests generated from it.
//! * [`vm`]: `vm.capmox-rs.io/v1alpha1` — `ProxmoxVirtualMachine`, VMs without Cluster API.

pub mod capi;
pub mod consts;
pub mod conversion;
pub mod crd;
pub mod v1alpha1;
pub mod v1alpha2;
pub mod vm;
pub mod webhook;
