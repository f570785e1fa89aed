//! `ProxmoxVirtualMachine.status`: what the VM is (phase, VMID, node, addresses, console, OS,
//! conditions) and what the controller recorded before acting (task, retry time, bootstrap
//! delivery, handled restart and power requests), so every step is safe to repeat after a crash.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::v1alpha2::{HaResourceStatus, schema};

/// Observed state of a `ProxmoxVirtualMachine`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxVirtualMachineStatus {
    /// Where the VM stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<VmPhase>,

    /// The VM's VMID (reserved before the clone, or the adopted one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmid: Option<i64>,

    /// The Proxmox node the VM lives on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,

    /// Addresses of the guest, from the QEMU guest agent (link-local and loopback left out).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ip_addresses: Option<Vec<String>>,

    /// Addresses the NICs got from their IPAM pools (`ipPoolRef`), by NIC slot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub pool_addresses: Option<Vec<crate::v1alpha2::IpAddressesSpec>>,
    /// The Proxmox web console of this VM.
    #[serde(rename = "consoleURL", default, skip_serializing_if = "Option::is_none")]
    pub console_url: Option<String>,

    /// The guest OS as the agent reports it (`get-osinfo`: pretty name, else name and version).
    #[serde(rename = "guestOS", default, skip_serializing_if = "Option::is_none")]
    pub guest_os: Option<String>,

    /// When the controller last wrote this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::date_time")]
    pub last_updated: Option<Time>,

    /// The generation of the spec the status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// `Ready`, `VMCreated`, `ResourcesAllocated`, `NetworkConfigured`, `RestartRequired`,
    /// `SpecDrift`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// The VM's name in Proxmox (the object's name, or the adopted VM's own).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm_name: Option<String>,

    /// The Proxmox task in flight (UPID): waited for, never issued twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,

    /// A failed step is not retried before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::date_time")]
    pub retry_after: Option<Time>,

    /// The bootstrap (NoCloud) ISO was delivered and attached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bootstrap_data_provided: Option<bool>,

    /// The VM was created (or adopted) and handed over to its run strategy.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub provisioned: Option<bool>,

    /// The VM failed for good (the message is in the `Ready` condition).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<bool>,

    /// The HA resource applied.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ha_resource: Option<HaResourceStatus>,

    /// The last `vm.capmox-rs.io/restartedAt` value acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarted_at: Option<String>,

    /// The last `vm.capmox-rs.io/powerRequest` value acted on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_request: Option<String>,

    /// The power state this controller last brought the VM to or saw it in (`running`,
    /// `stopped`, `paused`): a VM found stopped after `running` stopped by itself.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<String>,

    /// The VM stopped on its own and the run strategy keeps it stopped (`RerunOnFailure` after
    /// a shutdown, `Manual`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stopped_by_guest: Option<bool>,

    /// Config keys Proxmox keeps pending until the next restart.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub pending_changes: Option<Vec<String>>,

    /// A live config write was made and Proxmox's pending changes are still to be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pending_unread: Option<bool>,

    /// The guest facts (addresses, OS) of the current boot were read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_read: Option<bool>,

    /// A restart by stop and start is under way (its stop was issued).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restarting: Option<bool>,

    /// The generation whose hardware the VM was found to have (nothing left to apply).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub applied_generation: Option<i64>,

    /// The last `vm.capmox-rs.io/restored` value acted on (the VM was compared with the spec).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub restored: Option<String>,

    /// Config keys in which the restored VM differs from the spec of `appliedGeneration` (not
    /// re-applied until the spec changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub spec_drift: Option<Vec<String>>,
}

/// Where a VM stands (KubeVirt's `printableStatus`, Viti's names).
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum VmPhase {
    /// Waiting for something before anything is done (credentials, a template, a decision).
    Pending,
    /// Being cloned, configured and given its bootstrap data.
    Creating,
    /// Being started (or resumed).
    Starting,
    /// Running.
    Running,
    /// Being shut down.
    Stopping,
    /// Stopped.
    Stopped,
    /// Paused (QEMU pause).
    Paused,
    /// The object is being deleted.
    Deleting,
    /// Failed: the `Ready` condition says why.
    Error,
}

impl VmPhase {
    /// The spelling in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Creating => "Creating",
            Self::Starting => "Starting",
            Self::Running => "Running",
            Self::Stopping => "Stopping",
            Self::Stopped => "Stopped",
            Self::Paused => "Paused",
            Self::Deleting => "Deleting",
            Self::Error => "Error",
        }
    }
}
