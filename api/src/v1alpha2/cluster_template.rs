//! `ProxmoxClusterTemplate` (v1alpha2): a template for `ProxmoxCluster`s used by ClusterClass.

use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::cluster::{ProxmoxClusterSpec, RULE_CLUSTER_IP_CONFIG};
use super::common::TemplateObjectMeta;

/// Desired state of a `ProxmoxClusterTemplate`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "ProxmoxClusterTemplate",
    doc = "ProxmoxClusterTemplate describes ProxmoxClusters created through a ClusterClass (v1alpha2).",
    plural = "proxmoxclustertemplates",
    singular = "proxmoxclustertemplate",
    namespaced,
    shortname = "pct",
    category = "cluster-api",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterTemplateSpec {
    /// The cluster to create from this template.
    pub template: ProxmoxClusterTemplateResource,
}

/// Metadata and spec of the `ProxmoxCluster` created from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxClusterTemplateResource {
    /// Labels and annotations for the created cluster.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateObjectMeta>,

    /// Spec of the created cluster.
    #[schemars(schema_with = "template_cluster_spec")]
    pub spec: ProxmoxClusterSpec,
}

/// The cluster spec schema without the rule capmox only places on `ProxmoxCluster` itself
/// (its webhook enforces it for templates).
fn template_cluster_spec(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = ProxmoxClusterSpec::json_schema(generator);
    super::schema::remove_rules(&mut schema, &[RULE_CLUSTER_IP_CONFIG]);
    schema
}
