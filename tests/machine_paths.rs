//! The ProxmoxMachine controller's less travelled paths against pve-sim and the in-tree control
//! plane: Ignition bootstrap data, template selection by tags, scheduling and VMID ranges, the
//! waiting reasons, pausing, IPAM conflicts, cloud-init outcomes, bootstrap ISO storage and
//! network-config format, Proxmox faults retried to success and foreign VMs at a reserved VMID.
//!
//! Where a test needs to look at the bootstrap ISO it stalls the machines in `WaitingForCloudInit`
//! by making the guest agent answer "not running" (the CAPI stand-in sets the Machine's nodeRef as
//! soon as the machine is provisioned, after which the ISO is removed), reads the ISO from the
//! simulator and then lets the agent answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

#[path = "machine_paths/common.rs"]
mod common;
#[path = "machine_paths/faults.rs"]
mod faults;
#[path = "machine_paths/features.rs"]
mod features;
#[path = "machine_paths/provisioning.rs"]
mod provisioning;
