//! `ProxmoxMachineTemplate` (v1alpha2): a template for `ProxmoxMachine`s used by MachineDeployments,
//! control planes and ClusterClass.

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
