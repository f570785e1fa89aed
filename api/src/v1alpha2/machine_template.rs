//! `ProxmoxMachineTemplate` (v1alpha2): a template for `ProxmoxMachine`s used by MachineDeployments,
//! control planes and ClusterClass.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use kube::CustomResource;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use super::common::TemplateObjectMeta;
use super::machine::{
    ProxmoxMachineSpec, RULE_MACHINE_SOURCE_NODE_XOR_SELECTOR, RULE_MACHINE_TEMPLATE_ID_XOR_SELECTOR,
};

/// Desired state of a `ProxmoxMachineTemplate`.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "infrastructure.cluster.x-k8s.io",
    version = "v1alpha2",
    kind = "ProxmoxMachineTemplate",
    doc = "ProxmoxMachineTemplate describes ProxmoxMachines created by Cluster API (v1alpha2).",
    plural = "proxmoxmachinetemplates",
    singular = "proxmoxmachinetemplate",
    namespaced,
    status = "ProxmoxMachineTemplateStatus",
    shortname = "pmt",
    category = "cluster-api",
    derive = "PartialEq",
    derive = "Default"
)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateSpec {
    /// The machines to create from this template.
    pub template: ProxmoxMachineTemplateResource,
}

/// Metadata and spec of the `ProxmoxMachine`s created from a template.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateResource {
    /// Labels and annotations for the created machines.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateObjectMeta>,

    /// Spec of the created machines.
    #[schemars(schema_with = "template_machine_spec")]
    pub spec: ProxmoxMachineSpec,
}

/// The machine spec schema without the two rules capmox only places on `ProxmoxMachine` itself.
fn template_machine_spec(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = ProxmoxMachineSpec::json_schema(generator);
    super::schema::remove_rules(
        &mut schema,
        &[
            RULE_MACHINE_SOURCE_NODE_XOR_SELECTOR,
            RULE_MACHINE_TEMPLATE_ID_XOR_SELECTOR,
        ],
    );
    schema
}

/// Observed state of a `ProxmoxMachineTemplate` (capmox-rs; capmox declares no template status):
/// what a machine made from it offers, for the cluster-autoscaler's Cluster API provider to scale
/// a MachineDeployment from zero (CAPI's optional InfraMachineTemplate autoscaling contract).
/// The same type serves v1alpha1 and v1alpha2.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineTemplateStatus {
    /// Resources of a node made from this template (`cpu`, `memory`), as Kubernetes quantities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "resource_list")]
    pub capacity: Option<BTreeMap<String, Quantity>>,

    /// Architecture and operating system of a node made from this template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_info: Option<NodeInfo>,
}

/// Architecture and operating system of the nodes a template makes (CAPI's `NodeInfo`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct NodeInfo {
    /// CPU architecture of the node (`amd64`, `arm64`, `s390x`, `ppc64le`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("enum" = ["amd64", "arm64", "s390x", "ppc64le"]))]
    pub architecture: Option<String>,

    /// Operating system of the node, e.g. `linux`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operating_system: Option<String>,
}

/// Schema of a `corev1.ResourceList` (a map of quantities): integer or string, strings in the
/// quantity syntax (controller-gen's pattern; its `anyOf` branches are implied by
/// `x-kubernetes-int-or-string`).
fn resource_list(_: &mut SchemaGenerator) -> Schema {
    schemars::json_schema!({
        "type": "object",
        "additionalProperties": {
            "pattern": QUANTITY_PATTERN,
            "x-kubernetes-int-or-string": true
        }
    })
}

/// The pattern controller-gen puts on `resource.Quantity`.
const QUANTITY_PATTERN: &str = r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$";
