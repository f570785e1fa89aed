//! What a ProxmoxMachineTemplate's machines offer, for the cluster-autoscaler's Cluster API
//! provider to scale a MachineDeployment from zero: `status.capacity` (`cpu`, `memory`) and
//! `status.nodeInfo` (`architecture`, `operatingSystem`) computed from the template spec alone
//! (no Proxmox calls). Pure functions.
//!
//! The sizes are the ones the machine controller applies to a clone
//! ([`desired_vm`]): `numSockets`, `numCores` and `memoryMiB` when set and positive.
//! Unset, the VM keeps the Proxmox VM template's value, which the spec cannot tell, so that
//! resource is left out of `capacity`; the autoscaler then takes it from the MachineDeployment's
//! `capacity.cluster-autoscaler.kubernetes.io/*` annotations (which win over the template status
//! anyway).

use std::collections::BTreeMap;

use capmox_api::v1alpha2::{NodeInfo, ProxmoxMachineSpec, ProxmoxMachineTemplateStatus};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use crate::machine::spec::desired_vm;

/// `status.capacity` key of the CPU count.
pub const CPU: &str = "cpu";
/// `status.capacity` key of the memory size.
pub const MEMORY: &str = "memory";
/// Architecture of the nodes: Proxmox VE hosts are x86-64 and KVM guests run the host's
/// architecture; no ProxmoxMachine spec field names another one.
pub const ARCHITECTURE: &str = "amd64";
/// Operating system of the nodes: Kubernetes nodes from cloud-init/Ignition/Talos images.
pub const OPERATING_SYSTEM: &str = "linux";

/// The capacity of a machine made from `spec`: `cpu` = sockets × cores when both are known,
/// `memory` = `memoryMiB` in `Mi` when known. Empty when neither is known.
pub fn capacity(spec: &ProxmoxMachineSpec) -> BTreeMap<String, Quantity> {
    let desired = desired_vm(spec);
    let mut out = BTreeMap::new();
    if let (Some(sockets), Some(cores)) = (desired.sockets, desired.cores) {
        let cpus = u64::from(sockets) * u64::from(cores);
        out.insert(CPU.to_owned(), Quantity(cpus.to_string()));
    }
    if let Some(mib) = desired.memory_mib {
        out.insert(MEMORY.to_owned(), Quantity(format!("{mib}Mi")));
    }
    out
}

/// Architecture and operating system of a machine made from `spec`.
pub fn node_info(_spec: &ProxmoxMachineSpec) -> NodeInfo {
    NodeInfo {
        architecture: Some(ARCHITECTURE.to_owned()),
        operating_system: Some(OPERATING_SYSTEM.to_owned()),
    }
}

/// The template status for `spec` (`capacity` absent when nothing is known).
pub fn template_status(spec: &ProxmoxMachineSpec) -> ProxmoxMachineTemplateStatus {
    let capacity = capacity(spec);
    ProxmoxMachineTemplateStatus {
        capacity: (!capacity.is_empty()).then_some(capacity),
        node_info: Some(node_info(spec)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(sockets: Option<i32>, cores: Option<i32>, memory: Option<i32>) -> ProxmoxMachineSpec {
        ProxmoxMachineSpec {
            num_sockets: sockets,
            num_cores: cores,
            memory_mib: memory,
            ..Default::default()
        }
    }

    fn q(s: &str) -> Quantity {
        Quantity(s.to_owned())
    }

    #[test]
    fn cpu_is_sockets_times_cores_and_memory_is_mib() {
        let c = capacity(&spec(Some(2), Some(4), Some(16384)));
        assert_eq!(c.get(CPU), Some(&q("8")));
        assert_eq!(c.get(MEMORY), Some(&q("16384Mi")));
        assert_eq!(c.len(), 2);
    }

    #[test]
    fn unknown_sizes_are_left_out() {
        // The VM keeps the Proxmox template's sockets: the CPU count is unknown.
        let c = capacity(&spec(None, Some(4), Some(2048)));
        assert_eq!(c.get(CPU), None);
        assert_eq!(c.get(MEMORY), Some(&q("2048Mi")));
        let c = capacity(&spec(Some(1), Some(2), None));
        assert_eq!(c.get(CPU), Some(&q("2")));
        assert_eq!(c.get(MEMORY), None);
        // memoryMiB 0 means "keep the template's", as in the machine controller.
        assert!(capacity(&spec(None, None, Some(0))).is_empty());
        let status = template_status(&spec(None, None, None));
        assert_eq!(status.capacity, None);
        assert!(status.node_info.is_some());
    }

    #[test]
    fn node_info_is_linux_on_amd64() {
        let info = node_info(&spec(None, None, None));
        assert_eq!(info.architecture.as_deref(), Some("amd64"));
        assert_eq!(info.operating_system.as_deref(), Some("linux"));
    }

    #[test]
    fn large_values_do_not_overflow() {
        let c = capacity(&spec(Some(i32::MAX), Some(i32::MAX), Some(i32::MAX)));
        let cpus = u64::try_from(i32::MAX).unwrap_or_default().pow(2);
        assert_eq!(c.get(CPU), Some(&q(&cpus.to_string())));
        assert_eq!(c.get(MEMORY), Some(&q(&format!("{}Mi", i32::MAX))));
    }

    #[test]
    fn status_serialises_as_the_autoscaler_reads_it() {
        let status = template_status(&spec(Some(1), Some(4), Some(8192)));
        assert_eq!(
            serde_json::to_value(&status).ok(),
            Some(serde_json::json!({
                "capacity": {"cpu": "4", "memory": "8192Mi"},
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}
            }))
        );
    }
}
