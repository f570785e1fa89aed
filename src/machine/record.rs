//! A ProxmoxMachine's spec and status as the lifecycle's [`VmRecord`] (`spec.virtualMachineID`,
//! `status.proxmoxNode`, `status.taskRef`, `status.retryAfter`, `status.bootstrapDataProvided`,
//! `status.haResource`, `status.initialization.provisioned`), and what a pass reports shown as
//! capmox shows it: the `VirtualMachineProvisioned` condition (with capmox's reasons), the `Ready`
//! summary, `status.vmStatus`, `status.ipAddresses` and `status.addresses`.

use std::time::SystemTime;

use capmox_api::v1alpha2::{self as api, HaResourceStatus, HaState, ProxmoxMachine};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;

use crate::conditions::{self, Desired};
use crate::vm::ha::HaResource;
use crate::vm::{Phase, Reason, VmRecord};

/// Smallest VMID Proxmox hands out; lower recorded values (capmox writes `-1`) mean "none".
const MIN_VMID: i64 = 100;

/// The VMID recorded in `spec.virtualMachineID`, if it is a real one.
pub fn recorded_vmid(pm: &ProxmoxMachine) -> Option<u32> {
    pm.spec
        .virtual_machine_id
        .filter(|v| *v >= MIN_VMID)
        .and_then(|v| u32::try_from(v).ok())
}

fn to_system(t: &Time) -> SystemTime {
    SystemTime::from(t.0)
}

fn to_time(t: SystemTime) -> Time {
    Time(k8s_openapi::jiff::Timestamp::try_from(t).unwrap_or(k8s_openapi::jiff::Timestamp::MAX))
}

fn ha_state(s: &str) -> HaState {
    match s {
        "stopped" => HaState::Stopped,
        "ignored" => HaState::Ignored,
        _ => HaState::Started,
    }
}

/// The applied HA resource as the status records it.
pub fn ha_status(r: &HaResource) -> HaResourceStatus {
    HaResourceStatus {
        sid: r.sid.clone(),
        group: r.group.clone(),
        state: ha_state(&r.state),
        max_restart: i32::try_from(r.max_restart).unwrap_or(i32::MAX),
        max_relocate: i32::try_from(r.max_relocate).unwrap_or(i32::MAX),
    }
}

/// The applied HA resource the status records.
pub fn ha_resource(s: &HaResourceStatus) -> HaResource {
    HaResource {
        sid: s.sid.clone(),
        group: s.group.clone(),
        state: s.state.as_str().to_owned(),
        max_restart: u32::try_from(s.max_restart).unwrap_or(0),
        max_relocate: u32::try_from(s.max_relocate).unwrap_or(0),
    }
}

/// The record `pm` persisted.
pub fn record_of(pm: &ProxmoxMachine) -> VmRecord {
    let st = pm.status.clone().unwrap_or_default();
    let failed_terminally = st.retry_after.is_none()
        && pm
            .condition(api::VIRTUAL_MACHINE_PROVISIONED_CONDITION)
            .is_some_and(|c| c.status == conditions::FALSE && c.reason == api::VM_PROVISION_FAILED_REASON);
    VmRecord {
        vmid: recorded_vmid(pm),
        node: st.proxmox_node,
        task: st.task_ref.filter(|t| !t.is_empty()),
        retry_after: st.retry_after.as_ref().map(to_system),
        bootstrap_delivered: st.bootstrap_data_provided == Some(true),
        ha: st.ha_resource.as_ref().map(ha_resource),
        provisioned: st.initialization.as_ref().and_then(|i| i.provisioned) == Some(true),
        failed_terminally,
        operation: Default::default(),
        identity: identity(pm),
    }
}

/// The SMBIOS UUID `spec.providerID` names (`proxmox://<uuid>`; `None` for anything else): the
/// machine's VM existed, whatever its status says (spec survives a restore and a move).
pub fn identity(pm: &ProxmoxMachine) -> Option<String> {
    let id = pm.spec.provider_id.as_deref()?;
    let uuid = id.strip_prefix(capmox_api::consts::PROVIDER_ID_PREFIX)?;
    crate::proxmox::types::smbios1_uuid(&format!("uuid={uuid}")).filter(|u| u.eq_ignore_ascii_case(uuid))
}

/// Writes what changed between `before` and `after` into `pm`'s working copy.
pub fn apply(pm: &mut ProxmoxMachine, before: &VmRecord, after: &VmRecord) {
    if before.vmid != after.vmid {
        pm.spec.virtual_machine_id = after.vmid.map(i64::from);
    }
    let st = pm.status.get_or_insert_with(Default::default);
    if before.node != after.node {
        st.proxmox_node.clone_from(&after.node);
    }
    if before.task != after.task {
        st.task_ref.clone_from(&after.task);
    }
    if before.retry_after != after.retry_after {
        st.retry_after = after.retry_after.map(to_time);
    }
    if after.bootstrap_delivered && !before.bootstrap_delivered {
        st.bootstrap_data_provided = Some(true);
    }
    if before.ha != after.ha {
        st.ha_resource = after.ha.as_ref().map(ha_status);
    }
    if after.provisioned && !before.provisioned {
        st.initialization = Some(api::InitializationStatus {
            provisioned: Some(true),
        });
    }
}

/// The `VirtualMachineProvisioned` reason of a phase.
pub fn phase_reason(phase: Phase) -> &'static str {
    match phase {
        Phase::Cloning => api::CLONING_REASON,
        Phase::ShapingDisks => api::WAITING_FOR_DISK_RECONCILIATION_REASON,
        Phase::WaitingForAddresses => api::WAITING_FOR_STATIC_IP_ALLOCATION_REASON,
        Phase::DeliveringBootstrap => api::WAITING_FOR_BOOTSTRAP_DATA_RECONCILIATION_REASON,
        Phase::PoweringOn => api::WAITING_FOR_VM_POWER_UP_REASON,
        Phase::WaitingForGuest => api::WAITING_FOR_CLOUD_INIT_REASON,
        Phase::WaitingForDynamicAddress => api::WAITING_FOR_DYNAMIC_ADDRESS_REASON,
        Phase::Provisioned => api::PROVISIONED_REASON,
    }
}

/// The condition (or event) reason of a lifecycle reason, as capmox names it.
pub fn reason(r: Reason) -> &'static str {
    match r {
        Reason::VmFailed => api::VM_PROVISION_FAILED_REASON,
        Reason::CloneFailed => api::CLONING_FAILED_REASON,
        Reason::StartFailed => api::POWERING_ON_FAILED_REASON,
        Reason::TaskFailed => api::TASK_FAILED_REASON,
        Reason::PcieNeedsQ35 => api::PCIE_REQUIRES_Q35_REASON,
        Reason::VolumesFailed => api::ADDITIONAL_VOLUMES_FAILED_REASON,
        Reason::PciMappingUnavailable => api::PCI_MAPPING_UNAVAILABLE_REASON,
        Reason::HaFailed => api::HA_CONFIGURATION_FAILED_REASON,
        Reason::VmidTaken => "VMIDTaken",
        Reason::CloudInitDegraded => "CloudInitDegraded",
        Reason::Owner(r) => r,
    }
}

/// Sets `desired` (a `VirtualMachineProvisioned` condition) and the `Ready` summary.
pub fn set_condition(pm: &mut ProxmoxMachine, desired: &Desired) {
    let generation = pm.metadata.generation;
    let status = pm.status.get_or_insert_with(Default::default);
    let list = status.conditions.get_or_insert_with(Vec::new);
    let now = super::now();
    conditions::set(list, desired, generation, &now);
    let ready = conditions::ready_summary(list, &[api::VIRTUAL_MACHINE_PROVISIONED_CONDITION]);
    conditions::set(list, &ready, generation, &now);
}

/// Sets the `Ready` summary of the conditions as they are.
pub fn refresh_ready(pm: &mut ProxmoxMachine) {
    let generation = pm.metadata.generation;
    let status = pm.status.get_or_insert_with(Default::default);
    let list = status.conditions.get_or_insert_with(Vec::new);
    let ready = conditions::ready_summary(list, &[api::VIRTUAL_MACHINE_PROVISIONED_CONDITION]);
    conditions::set(list, &ready, generation, &super::now());
}

/// The current `VirtualMachineProvisioned` condition's reason and message.
pub fn current_condition(pm: &ProxmoxMachine) -> Option<(String, String)> {
    pm.condition(api::VIRTUAL_MACHINE_PROVISIONED_CONDITION)
        .map(|c| (c.reason.clone(), c.message.clone()))
}
