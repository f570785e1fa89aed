//! Release packaging: clusterctl's variable substitution ([`envsubst`]) and the release folder
//! `make release` writes ([`release`]): the provider components rendered from `config/default`
//! with the image stamped, `metadata.yaml`, the cluster templates and ClusterClasses, and the
//! Cluster API Operator's ConfigMap form of the components.

pub mod envsubst;
pub mod release;
