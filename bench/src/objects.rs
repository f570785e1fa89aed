//! The objects the bench creates, as core Cluster API, a bootstrap provider and a user applying
//! capmox's default cluster template would: one Cluster with its ProxmoxCluster (three allowed
//! nodes, an IPv4 pool large enough for thousands of machines), and per machine a labelled
//! bootstrap Secret, a worker Machine and its ProxmoxMachine (full clone of the template on shared
//! storage, selected by tags).

use std::collections::BTreeMap;

use capmox_api::capi::v1beta2::{Cluster, Machine};
use capmox_api::consts::CLUSTER_NAME_LABEL;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_standins::capi::objects as capi;
use k8s_openapi::api::core::v1::Secret;
use serde_json::json;

/// Namespace of every bench object.
pub const NAMESPACE: &str = "bench";
/// Name of the Cluster and its ProxmoxCluster.
pub const CLUSTER: &str = "bench";
/// Kubernetes version of the Machines (the tag of the scenario's shared-storage template).
pub const KUBERNETES_VERSION: &str = "v1.32.4";
/// Tags selecting the scenario's template on shared storage (every node can clone it).
pub const TEMPLATE_TAGS: [&str; 3] = ["capmox", "template", "v1.32.4"];
/// Proxmox nodes of the scenario.
pub const NODES: [&str; 3] = ["pve1", "pve2", "pve3"];
/// Addresses handed to machines: about 2,000 in a /21.
pub const NODE_IP_RANGE: &str = "10.100.0.10-10.100.7.250";

/// Name of machine `i` (also of its Machine, bootstrap Secret and VM).
pub fn machine_name(i: usize) -> String {
    format!("bench-{i:04}")
}

/// The Cluster.
pub fn cluster() -> Cluster {
    capi::cluster(NAMESPACE, CLUSTER, CLUSTER)
}

/// The ProxmoxCluster (owner and labels are added by the caller). The memory check of the
/// scheduler is disabled (`memoryAdjustment: 0`): a thousand 2 GiB machines do not fit the
/// scenario's nodes, and the bench measures the controller, not the capacity.
pub fn proxmox_cluster() -> Result<ProxmoxCluster, serde_json::Error> {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
        "spec": {
            "allowedNodes": NODES,
            "controlPlaneEndpoint": {"host": "10.100.0.5", "port": 6443},
            "dnsServers": ["10.100.0.1"],
            "ipv4Config": {"addresses": [NODE_IP_RANGE], "prefix": 21, "gateway": "10.100.0.1"},
            "schedulerHints": {"memoryAdjustment": 0},
        },
    }))
}

/// The bootstrap Secret of machine `name`, labelled with the cluster name as the kubeadm
/// bootstrap provider does.
pub fn bootstrap_secret(name: &str) -> Secret {
    let mut s = capi::bootstrap_secret(
        NAMESPACE,
        name,
        &format!("#cloud-config\nruncmd:\n  - [sh, -c, \"echo {name} joined\"]\n"),
        Some("cloud-config"),
    );
    s.metadata.labels = Some(BTreeMap::from([(
        CLUSTER_NAME_LABEL.to_owned(),
        CLUSTER.to_owned(),
    )]));
    s
}

/// The worker Machine of `name`.
pub fn machine(name: &str) -> Machine {
    capi::machine(
        NAMESPACE,
        name,
        CLUSTER,
        false,
        Some(name),
        name,
        KUBERNETES_VERSION,
    )
}

/// The ProxmoxMachine of capmox's default template values (full qcow2 clone, 2 × 2 CPUs, 2 GiB,
/// 20 GB boot volume, `net0` on `vmbr0` with the default IPv4 pool), owned by `machine`.
pub fn proxmox_machine(name: &str, machine: &Machine) -> Result<ProxmoxMachine, serde_json::Error> {
    let mut pm: ProxmoxMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "templateSelector": {"matchTags": TEMPLATE_TAGS},
            "format": "qcow2",
            "full": true,
            "numSockets": 2,
            "numCores": 2,
            "memoryMiB": 2048,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
            "network": {"networkDevices": [
                {"name": "net0", "bridge": "vmbr0", "model": "virtio", "defaultIPv4": true}
            ]},
        },
    }))?;
    capi::set_machine_owner(&mut pm.metadata, machine);
    Ok(pm)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_build() {
        let pc = proxmox_cluster().unwrap();
        assert_eq!(pc.spec.allowed_nodes.as_deref().map(<[String]>::len), Some(3));
        assert_eq!(machine_name(7), "bench-0007");
        let s = bootstrap_secret("bench-0001");
        assert!(s.metadata.labels.unwrap().contains_key(CLUSTER_NAME_LABEL));
    }
}
