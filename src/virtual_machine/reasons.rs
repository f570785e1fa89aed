//! The reasons of ProxmoxVirtualMachine conditions and events (each has an entry in
//! `docs/reasons.yaml`; the book's reasons page is generated from these constants).
//!
//! `Ready`'s reason is the phase (`Pending` … `Error`, see [`capmox_api::vm::VmPhase`]) unless a
//! step failed; the phases that are not also step reasons are listed here too.

/// VMCreated: the object took an existing VM over (`spec.adopt`).
pub const ADOPTED_REASON: &str = "Adopted";
/// VMCreated: the VM was cloned and configured; also the event of a VM created stopped.
pub const CREATED_REASON: &str = "Created";
/// VMCreated is not yet true: the VM is being cloned and configured.
pub const CREATING_REASON: &str = "Creating";
/// ResourcesAllocated: the VM has the sockets, cores, memory, disks and NICs of the spec.
pub const ALLOCATED_REASON: &str = "Allocated";
/// ResourcesAllocated is false while a spec change is written to the VM; also its event.
pub const RECONFIGURING_REASON: &str = "Reconfiguring";
/// NetworkConfigured: the guest agent reported the VM's addresses.
pub const ADDRESSES_REPORTED_REASON: &str = "AddressesReported";
/// NetworkConfigured: the guest agent is off (`spec.agent: false`), no addresses are reported.
pub const AGENT_DISABLED_REASON: &str = "AgentDisabled";
/// NetworkConfigured is false while a NIC's IPAM pool (`ipPoolRef`) has not given its address.
pub const WAITING_FOR_IP_ADDRESS_REASON: &str = "WaitingForIPAddress";
/// NetworkConfigured is false until the guest agent reports the addresses.
pub const WAITING_FOR_GUEST_AGENT_REASON: &str = "WaitingForGuestAgent";
/// RestartRequired is false: Proxmox holds no pending change.
pub const NOTHING_PENDING_REASON: &str = "NothingPending";
/// RestartRequired: Proxmox keeps changes pending until the next restart (the message names them).
pub const CHANGES_PENDING_REASON: &str = "ChangesPending";
/// Ready is false: the last reconcile failed (the message says why).
pub const ERROR_REASON: &str = "Error";
/// Event: the NoCloud ISO with the cloud-init data is attached.
pub const BOOTSTRAP_DELIVERED_REASON: &str = "BootstrapDelivered";
/// Event and phase: the VM is being started.
pub const STARTING_REASON: &str = "Starting";
/// Event: the guest is asked to shut down (`runStrategy: Halted`).
pub const SHUTTING_DOWN_REASON: &str = "ShuttingDown";
/// Event and phase: the VM is being stopped.
pub const STOPPING_REASON: &str = "Stopping";
/// Event: the VM stopped without being asked (a crash or a guest-initiated shutdown).
pub const STOPPED_UNEXPECTEDLY_REASON: &str = "StoppedUnexpectedly";
/// Event: the VM is being paused (`spec.paused: true`).
pub const PAUSING_REASON: &str = "Pausing";
/// Event: the VM is being resumed (`spec.paused: false`).
pub const RESUMING_REASON: &str = "Resuming";
/// Event: the VM is restarted (the `vm.capmox-rs.io/restartedAt` annotation or
/// `spec.restartOnChange`).
pub const RESTARTING_REASON: &str = "Restarting";
/// Event: a disk is grown online to the size of the spec.
pub const DISK_GROWING_REASON: &str = "DiskGrowing";
/// Event: the VM was destroyed (`deletionPolicy: Delete`) or released (`Retain`).
pub const DELETED_REASON: &str = "Deleted";
/// Phase (Ready's reason): not started yet.
pub const PENDING_REASON: &str = "Pending";
/// Phase (Ready's reason): the VM runs.
pub const RUNNING_REASON: &str = "Running";
/// Phase (Ready's reason): the VM is stopped.
pub const STOPPED_REASON: &str = "Stopped";
/// Phase (Ready's reason): the VM is paused.
pub const PAUSED_REASON: &str = "Paused";

/// SpecDrift is false: the VM matches the spec (or no restore happened since it was applied).
pub const IN_SYNC_REASON: &str = "InSync";
/// SpecDrift: the VM was restored from a snapshot and differs from the spec (the message names
/// the config keys); the spec is applied again when it changes.
pub const RESTORED_STATE_REASON: &str = "RestoredState";

#[cfg(test)]
mod tests {
    use capmox_api::vm::VmPhase;

    use super::*;

    #[test]
    fn every_phase_is_a_listed_reason() {
        let listed = [
            PENDING_REASON,
            CREATING_REASON,
            STARTING_REASON,
            RUNNING_REASON,
            STOPPING_REASON,
            STOPPED_REASON,
            PAUSED_REASON,
            "Deleting",
            ERROR_REASON,
        ];
        for p in [
            VmPhase::Pending,
            VmPhase::Creating,
            VmPhase::Starting,
            VmPhase::Running,
            VmPhase::Stopping,
            VmPhase::Stopped,
            VmPhase::Paused,
            VmPhase::Deleting,
            VmPhase::Error,
        ] {
            assert!(listed.contains(&p.as_str()), "{}", p.as_str());
        }
    }
}
