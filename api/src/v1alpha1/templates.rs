//! v1alpha1 ProxmoxClusterTemplate and ProxmoxMachineTemplate.

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{ProxmoxClusterSpec, ProxmoxMachineSpec, TemplateObjectMeta};

/// The template status is the same type in both versions (capmox-rs' autoscaling status).
pub use crate::v1alpha2::{NodeInfo, ProxmoxMachineTemplateStatus};

/// Desired state of a v1alpha1 ProxmoxClusterTemplate.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ProxmoxClusterTemplate",
    plural = "proxmoxclustertemplates",
    singular = "proxmoxclustertemplate",
    namespaced,
    served = true,
    storage = false,
    status = "ProxmoxClusterTemplateStatus",
    shortname = "pct",
    category = "cluster-api",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(transform = super::schema::finalize)]
pub struct ProxmoxClusterTemplateSpec {
    /// The cluster template.
    pub template: ProxmoxClusterTemplateResource,
}

/// capmox serves the v1alpha1 ProxmoxClusterTemplate with a status subresource but
/// declares no status fields; this empty type stands for that.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
pub struct ProxmoxClusterTemplateStatus {}

/// Metadata and spec of the ProxmoxClusters created from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterTemplateResource {
    /// Labels and annotations of created clusters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateObjectMeta>,
    /// Spec of created clusters.
    #[schemars(transform = super::schema::embedded_cluster_spec)]
    pub spec: ProxmoxClusterSpec,
}

/// Desired state of a v1alpha1 ProxmoxMachineTemplate.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha1",
    kind = "ProxmoxMachineTemplate",
    plural = "proxmoxmachinetemplates",
    singular = "proxmoxmachinetemplate",
    namespaced,
    served = true,
    storage = false,
    status = "ProxmoxMachineTemplateStatus",
    shortname = "pmt",
    category = "cluster-api",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase", remote = "Self")]
#[schemars(transform = super::schema::finalize)]
pub struct ProxmoxMachineTemplateSpec {
    /// The machine template.
    pub template: ProxmoxMachineTemplateResource,
}

/// Metadata and spec of the ProxmoxMachines created from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateResource {
    /// Labels and annotations of created machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateObjectMeta>,
    /// Spec of created machines.
    #[schemars(transform = super::schema::embedded_machine_spec)]
    pub spec: ProxmoxMachineSpec,
}

super::schema::tolerant_serde!(ProxmoxClusterTemplateSpec);

super::schema::tolerant_serde!(ProxmoxMachineTemplateSpec);
