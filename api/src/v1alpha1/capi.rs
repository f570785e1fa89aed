//! Small CAPI v1beta1 types used by the v1alpha1 API (defined here so that the
//! crate does not depend on an external Cluster API crate).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// A CAPI v1beta1 status condition (`cluster.x-k8s.io/v1beta1` `Condition`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Condition {
    /// Condition type, e.g. `Ready` or `VirtualMachineProvisioned`.
    #[schemars(length(min = 1, max = 256))]
    #[serde(rename = "type")]
    pub type_: String,
    /// Condition status: `True`, `False` or `Unknown`.
    pub status: String,
    /// How severe a `False` condition is: `Error`, `Warning` or `Info`.
    #[schemars(length(max = 32))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub severity: Option<String>,
    /// When the condition last changed its status.
    pub last_transition_time: Time,
    /// A short machine-readable CamelCase reason for the current status.
    #[schemars(length(min = 1, max = 256))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A human-readable explanation of the current status.
    #[schemars(length(min = 1, max = 10240))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// Host and port of an API server endpoint (CAPI v1beta1 `APIEndpoint`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ApiEndpoint {
    /// DNS name or IP address of the endpoint.
    #[schemars(length(max = 512))]
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub host: String,
    /// TCP port of the endpoint.
    #[serde(default, skip_serializing_if = "is_zero_i32")]
    pub port: i32,
}

/// Labels and annotations carried by a template (CAPI v1beta1 `ObjectMeta`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateObjectMeta {
    /// Labels to copy onto objects created from the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
    /// Annotations to copy onto objects created from the template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
}

/// An address of a machine (CAPI v1beta1 `MachineAddress`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineAddress {
    /// Kind of address.
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
    /// The address value.
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
}

/// Kinds of machine addresses.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema)]
pub enum MachineAddressType {
    /// The machine's host name.
    #[default]
    Hostname,
    /// An externally reachable IP address.
    #[serde(rename = "ExternalIP")]
    ExternalIp,
    /// A cluster-internal IP address.
    #[serde(rename = "InternalIP")]
    InternalIp,
    /// An externally resolvable DNS name.
    #[serde(rename = "ExternalDNS")]
    ExternalDns,
    /// A cluster-internal DNS name.
    #[serde(rename = "InternalDNS")]
    InternalDns,
}

/// Reference to an object in the same namespace by name (`corev1.LocalObjectReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct LocalObjectReference {
    /// Name of the referenced object.
    #[serde(default = "String::new", skip_serializing_if = "String::is_empty")]
    #[schemars(extend("default" = ""))]
    pub name: String,
}

/// Typed reference to an object in the same namespace (`corev1.TypedLocalObjectReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct TypedLocalObjectReference {
    /// API group of the referenced object; empty means the core group.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_group: Option<String>,
    /// Kind of the referenced object.
    pub kind: String,
    /// Name of the referenced object.
    pub name: String,
}

/// Reference to a Secret by name and namespace (`corev1.SecretReference`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-map-type" = "atomic"))]
pub struct SecretReference {
    /// Name of the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Namespace of the Secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
}

fn is_zero_i32(v: &i32) -> bool {
    *v == 0
}
