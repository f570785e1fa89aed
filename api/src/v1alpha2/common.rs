//! Small Cluster API v1beta2 types used by more than one v1alpha2 kind.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Host and port of the Kubernetes API server endpoint (CAPI v1beta2 `APIEndpoint`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": "self.port > 0 && self.port < 65536", "message": "port must be within 1-65535"}
]))]
pub struct ApiEndpoint {
    /// DNS name or IP address the API server is reachable at.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 512))]
    pub host: Option<String>,
    /// TCP port the API server listens on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1, max = 65535))]
    pub port: Option<i32>,
}

/// Labels and annotations a template stamps onto the objects created from it (CAPI `ObjectMeta`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct TemplateObjectMeta {
    /// Annotations to put on created objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<BTreeMap<String, String>>,
    /// Labels to put on created objects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub labels: Option<BTreeMap<String, String>>,
}

/// Initialization state reported to Cluster API (v1beta2 contract).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("minProperties" = 1))]
pub struct InitializationStatus {
    /// True once the infrastructure is fully provisioned; Cluster API waits for this.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,
}

/// One address of a machine (CAPI v1beta2 `MachineAddress`).
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineAddress {
    /// The address value.
    #[schemars(length(min = 1, max = 256))]
    pub address: String,
    /// What kind of address this is.
    #[serde(rename = "type")]
    pub type_: MachineAddressType,
}

/// Kinds of machine addresses.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
pub enum MachineAddressType {
    /// Host name of the machine.
    #[default]
    Hostname,
    /// IP address reachable from outside the cluster.
    #[serde(rename = "ExternalIP")]
    ExternalIp,
    /// IP address reachable inside the cluster.
    #[serde(rename = "InternalIP")]
    InternalIp,
    /// DNS name resolvable from outside the cluster.
    #[serde(rename = "ExternalDNS")]
    ExternalDns,
    /// DNS name resolvable inside the cluster.
    #[serde(rename = "InternalDNS")]
    InternalDns,
}
