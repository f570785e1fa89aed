//! Assembly of the four multi-version CustomResourceDefinitions served by this provider.
//!
//! Each kind's v1alpha1 and v1alpha2 CRDs (as derived by `kube::CustomResource`) are normalised
//! (see [`normalize`]), merged with v1alpha2 as the storage version and labelled with the provider
//! label and the CAPI contract labels. The output of [`all`] is what `crdgen` writes to
//! `config/crd/bases/`; it is the canonical CRD, not the single-version `crd()` of the types.

pub mod normalize;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;
use kube::core::crd::{MergeError, merge_crds};

use crate::consts::{CONTRACT_LABEL_V1BETA1, CONTRACT_LABEL_V1BETA2, PROVIDER_LABEL, PROVIDER_NAME};
use crate::{v1alpha1, v1alpha2};

/// The storage (hub) version of every kind.
pub const STORAGE_VERSION: &str = "v1alpha2";

/// API version listed in the `cluster.x-k8s.io/v1beta1` contract label (CAPI v1.10 resolves it).
pub const V1BETA1_CONTRACT_VERSIONS: &str = "v1alpha1";

/// API version listed in the `cluster.x-k8s.io/v1beta2` contract label (CAPI >= v1.11 resolves it).
pub const V1BETA2_CONTRACT_VERSIONS: &str = "v1alpha2";

/// Errors while assembling or writing CRDs.
#[derive(Debug, thiserror::Error)]
pub enum CrdError {
    /// The per-version CRDs of a kind could not be merged.
    #[error("merging the versions of CRD {name}: {source}")]
    Merge {
        /// CRD name.
        name: String,
        /// Underlying error.
        #[source]
        source: MergeError,
    },
    /// A CRD could not be converted to JSON.
    #[error("converting CRD {name} to JSON: {source}")]
    Json {
        /// CRD name.
        name: String,
        /// Underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// A CRD could not be serialised to YAML.
    #[error("serialising CRD {name} to YAML: {source}")]
    Yaml {
        /// CRD name.
        name: String,
        /// Underlying error.
        #[source]
        source: serde_saphyr::ser::Error,
    },
    /// A CRD file could not be written.
    #[error("writing {path}: {source}")]
    Write {
        /// Target file.
        path: PathBuf,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
}

/// The `ProxmoxCluster` CRD (v1alpha1 served, v1alpha2 served + storage).
pub fn proxmox_clusters() -> Result<CustomResourceDefinition, CrdError> {
    assemble(vec![
        v1alpha1::ProxmoxCluster::crd(),
        v1alpha2::ProxmoxCluster::crd(),
    ])
}

/// The `ProxmoxClusterTemplate` CRD.
pub fn proxmox_cluster_templates() -> Result<CustomResourceDefinition, CrdError> {
    assemble(vec![
        v1alpha1::ProxmoxClusterTemplate::crd(),
        v1alpha2::ProxmoxClusterTemplate::crd(),
    ])
}

/// The `ProxmoxMachine` CRD.
pub fn proxmox_machines() -> Result<CustomResourceDefinition, CrdError> {
    assemble(vec![
        v1alpha1::ProxmoxMachine::crd(),
        v1alpha2::ProxmoxMachine::crd(),
    ])
}

/// The `ProxmoxMachineTemplate` CRD.
pub fn proxmox_machine_templates() -> Result<CustomResourceDefinition, CrdError> {
    assemble(vec![
        v1alpha1::ProxmoxMachineTemplate::crd(),
        v1alpha2::ProxmoxMachineTemplate::crd(),
    ])
}

/// All four CRDs, in a stable order.
pub fn all() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        proxmox_clusters()?,
        proxmox_cluster_templates()?,
        proxmox_machines()?,
        proxmox_machine_templates()?,
    ])
}

/// The `ProxmoxVirtualMachine` CRD (`vm.capmox-rs.io`, one version `v1alpha1`; not a Cluster
/// API kind: no contract labels, only the provider label).
pub fn proxmox_virtual_machines() -> Result<CustomResourceDefinition, CrdError> {
    vm_kind(crate::vm::ProxmoxVirtualMachine::crd())
}

/// The `ProxmoxVMSnapshot` CRD (`vm.capmox-rs.io/v1alpha1`).
pub fn proxmox_vm_snapshots() -> Result<CustomResourceDefinition, CrdError> {
    vm_kind(crate::vm::ProxmoxVMSnapshot::crd())
}

/// The `ProxmoxVMRestore` CRD (`vm.capmox-rs.io/v1alpha1`).
pub fn proxmox_vm_restores() -> Result<CustomResourceDefinition, CrdError> {
    vm_kind(crate::vm::ProxmoxVMRestore::crd())
}

/// The `ProxmoxVMClone` CRD (`vm.capmox-rs.io/v1alpha1`).
pub fn proxmox_vm_clones() -> Result<CustomResourceDefinition, CrdError> {
    vm_kind(crate::vm::ProxmoxVMClone::crd())
}

/// The snapshot, restore and clone CRDs of ProxmoxVirtualMachines.
pub fn vm_operations() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![
        proxmox_vm_snapshots()?,
        proxmox_vm_restores()?,
        proxmox_vm_clones()?,
    ])
}

/// A `vm.capmox-rs.io` CRD normalised, with its list kind and the provider label.
fn vm_kind(mut crd: CustomResourceDefinition) -> Result<CustomResourceDefinition, CrdError> {
    for version in &mut crd.spec.versions {
        let Some(props) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let name = crd.metadata.name.clone().unwrap_or_default();
        let mut value = serde_json::to_value(&*props).map_err(|source| CrdError::Json {
            name: name.clone(),
            source,
        })?;
        normalize::normalize_root(&mut value);
        *props = serde_json::from_value(value).map_err(|source| CrdError::Json { name, source })?;
    }
    crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    crd.metadata.labels = Some(BTreeMap::from([(
        PROVIDER_LABEL.to_owned(),
        PROVIDER_NAME.to_owned(),
    )]));
    Ok(crd)
}

/// The `ProxmoxVMImage` CRD (`vm.capmox-rs.io`, `v1alpha1`; labelled as
/// [`proxmox_virtual_machines`]).
pub fn proxmox_vm_images() -> Result<CustomResourceDefinition, CrdError> {
    vm_kind(crate::vm::ProxmoxVMImage::crd())
}

/// Every CRD a release installs: the four Cluster API kinds of [`all`],
/// [`proxmox_virtual_machines`], [`proxmox_vm_images`] and the kinds of [`vm_operations`].
pub fn generated() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let mut crds = all()?;
    crds.push(proxmox_virtual_machines()?);
    crds.push(proxmox_vm_images()?);
    crds.extend(vm_operations()?);
    Ok(crds)
}

/// Normalises, merges and labels the single-version CRDs of one kind.
fn assemble(mut versions: Vec<CustomResourceDefinition>) -> Result<CustomResourceDefinition, CrdError> {
    versions.iter_mut().for_each(normalize::normalize_crd);
    for crd in &mut versions {
        crd.spec.names.list_kind = Some(format!("{}List", crd.spec.names.kind));
    }
    let name = versions
        .first()
        .and_then(|c| c.metadata.name.clone())
        .unwrap_or_default();
    let mut crd = merge_crds(versions, STORAGE_VERSION).map_err(|source| CrdError::Merge { name, source })?;
    crd.spec.versions.sort_by(|a, b| a.name.cmp(&b.name));
    for version in &mut crd.spec.versions {
        version.served = true;
        version.storage = version.name == STORAGE_VERSION;
    }
    crd.metadata.labels = Some(labels());
    Ok(crd)
}

/// The labels on every CRD of this provider.
pub fn labels() -> BTreeMap<String, String> {
    BTreeMap::from([
        (
            CONTRACT_LABEL_V1BETA1.to_owned(),
            V1BETA1_CONTRACT_VERSIONS.to_owned(),
        ),
        (
            CONTRACT_LABEL_V1BETA2.to_owned(),
            V1BETA2_CONTRACT_VERSIONS.to_owned(),
        ),
        (PROVIDER_LABEL.to_owned(), PROVIDER_NAME.to_owned()),
    ])
}

/// The file name of a CRD under `config/crd/bases/`: `<group>_<plural>.yaml`.
pub fn file_name(crd: &CustomResourceDefinition) -> String {
    format!("{}_{}.yaml", crd.spec.group, crd.spec.names.plural)
}

/// Renders a CRD as a YAML document (starting with `---`). Integral numbers (which
/// `JSONSchemaProps` keeps as `f64`) are written as integers, as controller-gen does.
pub fn to_yaml(crd: &CustomResourceDefinition) -> Result<String, CrdError> {
    let name = crd.metadata.name.clone().unwrap_or_default();
    let mut value = serde_json::to_value(crd).map_err(|source| CrdError::Json {
        name: name.clone(),
        source,
    })?;
    normalize::integral_numbers(&mut value);
    let body = serde_saphyr::to_string(&value).map_err(|source| CrdError::Yaml { name, source })?;
    Ok(format!("---\n{body}"))
}

/// Writes every CRD of [`generated`] into `dir` as `<group>_<plural>.yaml` and returns the written paths.
pub fn write_all(dir: &Path) -> Result<Vec<PathBuf>, CrdError> {
    std::fs::create_dir_all(dir).map_err(|source| CrdError::Write {
        path: dir.to_path_buf(),
        source,
    })?;
    let mut written = Vec::new();
    for crd in generated()? {
        let path = dir.join(file_name(&crd));
        std::fs::write(&path, to_yaml(&crd)?).map_err(|source| CrdError::Write {
            path: path.clone(),
            source,
        })?;
        written.push(path);
    }
    Ok(written)
}
