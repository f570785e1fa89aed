//! Condition types and reasons used in v1alpha2 statuses (capmox `conditions_consts.go` plus the
//! Cluster API reasons capmox reuses).

/// Summary condition of every kind.
pub const READY_CONDITION: &str = "Ready";

/// ProxmoxCluster: whether the Proxmox API is reachable with the configured credentials.
pub const PROXMOX_AVAILABLE_CONDITION: &str = "ProxmoxAvailable";
/// Reason: the Proxmox API could not be reached.
pub const PROXMOX_UNREACHABLE_REASON: &str = "ProxmoxUnreachable";
/// Reason: the credentials secret was not found.
pub const CREDENTIALS_NOT_FOUND_REASON: &str = "CredentialsNotFound";
/// Reason: an externally managed control plane has not set the endpoint yet.
pub const MISSING_CONTROL_PLANE_ENDPOINT_REASON: &str = "MissingControlPlaneEndpoint";

/// ProxmoxMachine: progress of the virtual machine's provisioning.
pub const VIRTUAL_MACHINE_PROVISIONED_CONDITION: &str = "VirtualMachineProvisioned";
/// Reason: the VM is being cloned.
pub const CLONING_REASON: &str = "Cloning";
/// Reason: cloning the VM failed.
pub const CLONING_FAILED_REASON: &str = "CloningFailed";
/// Reason: waiting for the boot disk to be resized.
pub const WAITING_FOR_DISK_RECONCILIATION_REASON: &str = "WaitingForDiskReconciliation";
/// Reason: waiting for static IP addresses from IPAM.
pub const WAITING_FOR_STATIC_IP_ALLOCATION_REASON: &str = "WaitingForStaticIPAllocation";
/// Reason: waiting for bootstrap data to be injected.
pub const WAITING_FOR_BOOTSTRAP_DATA_RECONCILIATION_REASON: &str = "WaitingForBootstrapDataReconciliation";
/// Reason: waiting for the VM to power on.
pub const WAITING_FOR_VM_POWER_UP_REASON: &str = "WaitingForVMPowerUp";
/// Reason: powering on the VM failed.
pub const POWERING_ON_FAILED_REASON: &str = "PoweringOnFailed";
/// Reason: waiting for cloud-init to finish.
pub const WAITING_FOR_CLOUD_INIT_REASON: &str = "WaitingForCloudInit";
/// Reason: waiting for the bootstrap provider to report readiness.
pub const WAITING_FOR_BOOTSTRAP_READY_REASON: &str = "WaitingForBootstrapReady";
/// Reason: waiting for the CAPI Machine's addresses.
pub const WAITING_FOR_CLUSTER_API_MACHINE_ADDRESSES_REASON: &str = "WaitingForClusterAPIMachineAddresses";
/// Reason: provisioning the VM failed.
pub const VM_PROVISION_FAILED_REASON: &str = "VMProvisionFailed";
/// Reason: a Proxmox task failed.
pub const TASK_FAILED_REASON: &str = "TaskFailed";
/// Reason: an additional data disk (`spec.disks.additionalVolumes`) could not be created.
pub const ADDITIONAL_VOLUMES_FAILED_REASON: &str = "AdditionalVolumesFailed";
/// Reason: the VM's Proxmox HA resource (`spec.ha`) could not be registered, updated or removed.
pub const HA_CONFIGURATION_FAILED_REASON: &str = "HAConfigurationFailed";
/// Reason: no allowed node has an entry in every Proxmox PCI resource mapping of `spec.pciDevices`.
pub const PCI_MAPPING_UNAVAILABLE_REASON: &str = "PCIMappingUnavailable";
/// Reason: `spec.pciDevices` asks for PCIe but the template's machine type is not q35.
pub const PCIE_REQUIRES_Q35_REASON: &str = "PCIeRequiresQ35";
/// Reason: deleting the VM failed.
pub const DELETION_FAILED_REASON: &str = "DeletionFailed";

/// Cluster API reason: the object is being deleted.
pub const DELETING_REASON: &str = "Deleting";
/// Cluster API reason: provisioning is complete.
pub const PROVISIONED_REASON: &str = "Provisioned";
/// Cluster API reason: waiting for the cluster infrastructure.
pub const WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON: &str = "WaitingForClusterInfrastructureReady";
/// Cluster API reason: waiting for the bootstrap data secret.
pub const WAITING_FOR_BOOTSTRAP_DATA_REASON: &str = "WaitingForBootstrapData";
/// `VirtualMachineProvisioned` reason: the Machine's failure domain names no zone of the
/// ProxmoxCluster (capmox-rs, failure domains from zones).
pub const UNKNOWN_FAILURE_DOMAIN_REASON: &str = "UnknownFailureDomain";
/// `VirtualMachineProvisioned` reason: the guest has no DHCP/SLAAC address yet (capmox-rs).
pub const WAITING_FOR_DYNAMIC_ADDRESS_REASON: &str = "WaitingForDynamicAddress";
