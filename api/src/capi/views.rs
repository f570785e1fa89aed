//! Lenient, read-only views of Cluster API core objects (`cluster.x-k8s.io` v1beta1 of CAPI
//! v1.10 and v1beta2 of CAPI v1.11+), built from [`DynamicObject`]s.
//!
//! Both shapes are read regardless of the object's apiVersion, and a missing, mistyped or unknown
//! field never fails: it reads as absent. The views are meant for reading only; they are never
//! written back.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::api::DynamicObject;
use serde_json::Value;

use super::CONTROL_PLANE_LABEL;
use crate::consts::{CLUSTER_NAME_LABEL, PAUSED_ANNOTATION};

/// Reference to an infrastructure object (e.g. a `ProxmoxMachine`) in the object's namespace.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct InfraRef {
    /// API group: `apiGroup` (v1beta2) or the group part of `apiVersion` (v1beta1); `None` when
    /// neither names a group.
    pub api_group: Option<String>,
    /// Kind of the referenced object.
    pub kind: String,
    /// Name of the referenced object.
    pub name: String,
}

impl InfraRef {
    /// Reads a reference object; `None` unless it has a non-empty `kind` and `name`.
    pub fn from_value(value: &Value) -> Option<InfraRef> {
        let kind = non_empty_str(value.get("kind"))?;
        let name = non_empty_str(value.get("name"))?;
        let api_group = non_empty_str(value.get("apiGroup")).or_else(|| {
            value
                .get("apiVersion")
                .and_then(Value::as_str)
                .and_then(|v| v.split_once('/'))
                .map(|(group, _)| group.to_owned())
                .filter(|g| !g.is_empty())
        });
        Some(InfraRef {
            api_group,
            kind,
            name,
        })
    }

    /// Whether this reference points at `kind` in `group`.
    pub fn is(&self, group: &str, kind: &str) -> bool {
        self.api_group.as_deref() == Some(group) && self.kind == kind
    }
}

/// What the provider reads of a CAPI `Machine`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MachineView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (empty when unset).
    pub namespace: String,
    /// `metadata.uid`.
    pub uid: Option<String>,
    /// `spec.clusterName`, else the `cluster.x-k8s.io/cluster-name` label.
    pub cluster_name: Option<String>,
    /// `spec.bootstrap.dataSecretName`: the Secret with the bootstrap data, once it exists.
    pub bootstrap_data_secret_name: Option<String>,
    /// `spec.version`: Kubernetes version of the node.
    pub version: Option<String>,
    /// `spec.infrastructureRef`.
    pub infrastructure_ref: Option<InfraRef>,
    /// `spec.failureDomain`.
    pub failure_domain: Option<String>,
    /// Whether the `cluster.x-k8s.io/control-plane` label is present.
    pub control_plane: bool,
    /// `status.nodeRef.name`.
    pub node_ref: Option<String>,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
    /// Whether the `cluster.x-k8s.io/paused` annotation is present.
    pub paused: bool,
}

impl MachineView {
    /// Reads a Machine of either version.
    pub fn from_dynamic(obj: &DynamicObject) -> MachineView {
        let meta = &obj.metadata;
        let data = &obj.data;
        let spec = data.get("spec");
        let at = |path: &[&str]| non_empty_str(lookup(spec, path));
        MachineView {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            uid: meta.uid.clone(),
            cluster_name: at(&["clusterName"]).or_else(|| label(meta, CLUSTER_NAME_LABEL)),
            bootstrap_data_secret_name: at(&["bootstrap", "dataSecretName"]),
            version: at(&["version"]),
            infrastructure_ref: lookup(spec, &["infrastructureRef"]).and_then(InfraRef::from_value),
            failure_domain: at(&["failureDomain"]),
            control_plane: has_label(meta, CONTROL_PLANE_LABEL),
            node_ref: non_empty_str(lookup(data.get("status"), &["nodeRef", "name"])),
            provider_id: at(&["providerID"]),
            deleting: meta.deletion_timestamp.is_some(),
            paused: has_annotation(meta, PAUSED_ANNOTATION),
        }
    }

    /// Reads a whole Machine object given as JSON (`apiVersion`, `kind`, `metadata`, ...);
    /// unreadable metadata reads as empty.
    pub fn from_value(value: &Value) -> MachineView {
        MachineView::from_dynamic(&dynamic_from_value(value))
    }
}

/// What the provider reads of a CAPI `Cluster`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterView {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.namespace` (empty when unset).
    pub namespace: String,
    /// `spec.paused` is true or the `cluster.x-k8s.io/paused` annotation is present.
    pub paused: bool,
    /// `status.initialization.infrastructureProvisioned` (v1beta2) or
    /// `status.infrastructureReady` (v1beta1) is true.
    pub infrastructure_provisioned: bool,
    /// `spec.infrastructureRef`.
    pub infrastructure_ref: Option<InfraRef>,
    /// Whether `metadata.deletionTimestamp` is set.
    pub deleting: bool,
}

impl ClusterView {
    /// Reads a Cluster of either version.
    pub fn from_dynamic(obj: &DynamicObject) -> ClusterView {
        let meta = &obj.metadata;
        let spec = obj.data.get("spec");
        let status = obj.data.get("status");
        let is_true = |v: Option<&Value>| v.and_then(Value::as_bool).unwrap_or(false);
        ClusterView {
            name: meta.name.clone().unwrap_or_default(),
            namespace: meta.namespace.clone().unwrap_or_default(),
            paused: is_true(lookup(spec, &["paused"])) || has_annotation(meta, PAUSED_ANNOTATION),
            infrastructure_provisioned: is_true(lookup(
                status,
                &["initialization", "infrastructureProvisioned"],
            )) || is_true(lookup(status, &["infrastructureReady"])),
            infrastructure_ref: lookup(spec, &["infrastructureRef"]).and_then(InfraRef::from_value),
            deleting: meta.deletion_timestamp.is_some(),
        }
    }

    /// Reads a whole Cluster object given as JSON; unreadable metadata reads as empty.
    pub fn from_value(value: &Value) -> ClusterView {
        ClusterView::from_dynamic(&dynamic_from_value(value))
    }
}

/// A [`DynamicObject`] from whole-object JSON, never failing: metadata that does not parse is
/// left empty and everything else but `apiVersion`/`kind`/`metadata` lands in `data`.
fn dynamic_from_value(value: &Value) -> DynamicObject {
    let metadata = value
        .get("metadata")
        .and_then(|m| serde_json::from_value::<ObjectMeta>(m.clone()).ok())
        .unwrap_or_default();
    let mut data = value.clone();
    if let Some(map) = data.as_object_mut() {
        for key in ["apiVersion", "kind", "metadata"] {
            map.remove(key);
        }
    }
    let str_at = |key: &str| value.get(key).and_then(Value::as_str).map(str::to_owned);
    let types = match (str_at("apiVersion"), str_at("kind")) {
        (Some(api_version), Some(kind)) => Some(kube::core::TypeMeta { api_version, kind }),
        _ => None,
    };
    DynamicObject {
        types,
        metadata,
        data,
    }
}

/// The value at `path` below `root`, if every step is an object key.
fn lookup<'a>(root: Option<&'a Value>, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(root?, |v, key| v.get(key))
}

/// A string value, unless absent, not a string or empty.
fn non_empty_str(v: Option<&Value>) -> Option<String> {
    v.and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn label(meta: &ObjectMeta, key: &str) -> Option<String> {
    meta.labels
        .as_ref()
        .and_then(|l| l.get(key))
        .filter(|v| !v.is_empty())
        .cloned()
}

fn has_label(meta: &ObjectMeta, key: &str) -> bool {
    meta.labels.as_ref().is_some_and(|l| l.contains_key(key))
}

fn has_annotation(meta: &ObjectMeta, key: &str) -> bool {
    meta.annotations.as_ref().is_some_and(|a| a.contains_key(key))
}

#[cfg(test)]
#[path = "views_tests.rs"]
mod tests;
