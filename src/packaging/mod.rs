//! Release packaging: clusterctl's variable substitution ([`envsubst`]) and the release folder
//! `make release` writes ([`release`]): the provider components rendered from `config/default`
//! with the image stamped, `metadata.yaml`, the cluster templates and ClusterClasses, and the
//! Cluster API Operator's ConfigMap form of the components; and the Helm chart's templates,
//! generated from the same kustomize source ([`chart`]); and the book's generated Reference
//! ([`reference`]).

pub mod chart;
pub mod envsubst;
pub mod reference;
pub mod release;
