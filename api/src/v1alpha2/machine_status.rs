//! Observed state of a v1alpha2 `ProxmoxMachine`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::common::{InitializationStatus, MachineAddress};

/// Observed state of a `ProxmoxMachine`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxMachineStatus {
    /// Addresses of the machine (host name and internal IPs) reported to Cluster API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub addresses: Option<Vec<MachineAddress>>,

    /// True once bootstrap data has been handed to the VM.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_provided: Option<bool>,

    /// Conditions of the machine (`Ready`, `VirtualMachineProvisioned`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// The credentials Secret of the Proxmox cluster the VM was created in, when it is not the
    /// ProxmoxCluster's own (a zone's `credentialsRef`): fixed once the VMID is reserved, so the VM
    /// is managed and deleted there whatever later happens to `zoneConfig`. capmox-rs addition.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::secret_reference")]
    pub credentials_ref: Option<k8s_openapi::api::core::v1::SecretReference>,

    /// The Proxmox HA resource this controller registered for the VM, as applied (`spec.ha`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha_resource: Option<super::ha::HaResourceStatus>,

    /// Initialization state for Cluster API.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization: Option<InitializationStatus>,

    /// IP addresses allocated per NIC (plus a synthetic `default` entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "map", "x-kubernetes-list-map-keys" = ["net"]))]
    pub ip_addresses: Option<Vec<IpAddressesSpec>>,

    /// Guest network state (declared for compatibility, not populated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub network: Option<Vec<NetworkStatus>>,

    /// Proxmox node the VM lives on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxmox_node: Option<String>,

    /// Do not retry a failed Proxmox task before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "super::schema::date_time")]
    pub retry_after: Option<Time>,

    /// UPID of the Proxmox task in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,

    /// Coarse VM state: `notfound`, `pending` or `ready` (see [`super::VM_STATUS_READY`] and friends).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_status: Option<String>,
}

/// IP addresses of one NIC.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct IpAddressesSpec {
    /// IPv4 addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ipv4: Option<Vec<String>>,

    /// IPv6 addresses.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ipv6: Option<Vec<String>>,

    /// NIC slot name, or `default` for addresses from the default pools.
    #[schemars(length(min = 4), regex(pattern = super::schema::IP_ADDRESSES_NET_PATTERN))]
    pub net: String,
}

/// State of one guest network interface.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkStatus {
    /// Whether the interface is connected.
    pub connected: bool,

    /// Addresses on the interface.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "set"))]
    pub ip_addrs: Option<Vec<String>>,

    /// MAC address of the interface.
    #[schemars(
        length(min = 17, max = 17),
        regex(pattern = super::schema::MAC_ADDRESS_PATTERN)
    )]
    pub mac_addr: String,

    /// NIC slot name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 4), regex(pattern = super::schema::NET_NAME_PATTERN))]
    pub network_name: Option<String>,
}
