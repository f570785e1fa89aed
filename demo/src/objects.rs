//! The objects the demo creates, the way core Cluster API, a bootstrap provider and a user
//! applying capmox's default cluster template would: one Cluster with its ProxmoxCluster, one
//! control-plane and two worker Machines with bootstrap Secrets and ProxmoxMachines.

use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use serde_json::json;

/// Namespace of every demo object.
pub const NAMESPACE: &str = "demo";
/// Name of the Cluster and the ProxmoxCluster.
pub const CLUSTER: &str = "demo";
/// Kubernetes version of the Machines (the version tag of the scenario's shared-storage template).
pub const KUBERNETES_VERSION: &str = "v1.32.4";
/// Tags selecting the template: the scenario's template on shared storage, so that every node
/// can clone it.
pub const TEMPLATE_TAGS: [&str; 3] = ["capmox", "template", "v1.32.4"];
/// Proxmox nodes of the scenario.
pub const NODES: [&str; 3] = ["pve1", "pve2", "pve3"];
/// Addresses handed to machines (a range of a /24, the gateway and endpoint outside it).
pub const NODE_IP_RANGE: &str = "192.168.100.10-192.168.100.50";
/// Gateway of the node network.
pub const GATEWAY: &str = "192.168.100.1";
/// Control-plane endpoint (a virtual IP inside the /24 but outside the machines' range).
pub const CONTROL_PLANE_ENDPOINT: &str = "192.168.100.5";

/// A machine of the demo cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoMachine {
    /// Name of the Machine, its ProxmoxMachine, its bootstrap Secret and the VM.
    pub name: &'static str,
    /// Whether it is a control-plane machine.
    pub control_plane: bool,
}

/// The three machines: one control plane, two workers.
pub const MACHINES: [DemoMachine; 3] = [
    DemoMachine {
        name: "demo-cp-0",
        control_plane: true,
    },
    DemoMachine {
        name: "demo-worker-0",
        control_plane: false,
    },
    DemoMachine {
        name: "demo-worker-1",
        control_plane: false,
    },
];

/// The ProxmoxCluster of capmox's default template (ipv4Config, dnsServers, allowedNodes,
/// control-plane endpoint on port 6443). Owner and labels are added by the caller.
pub fn proxmox_cluster() -> Result<ProxmoxCluster, serde_json::Error> {
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": CLUSTER, "namespace": NAMESPACE},
        "spec": {
            "allowedNodes": NODES,
            "controlPlaneEndpoint": {"host": CONTROL_PLANE_ENDPOINT, "port": 6443},
            "dnsServers": ["192.168.100.1", "9.9.9.9"],
            "ipv4Config": {"addresses": [NODE_IP_RANGE], "prefix": 24, "gateway": GATEWAY},
        },
    }))
}

/// A ProxmoxMachine with the values of capmox's default template (full qcow2 clone, 2 sockets ×
/// 2 cores, 2 GiB, 20 GB boot volume on `scsi0`, `net0` on `vmbr0` with the default IPv4 pool),
/// selecting the template by tags. Owner and labels are added by the caller.
pub fn proxmox_machine(name: &str) -> Result<ProxmoxMachine, serde_json::Error> {
    serde_json::from_value(json!({
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
    }))
}

/// Small cloud-config user data standing in for what the kubeadm bootstrap provider renders.
pub fn user_data(machine: &str) -> String {
    format!(
        "#cloud-config\n\
         write_files:\n  \
         - path: /etc/capmox-demo\n    \
           content: \"{machine} provisioned by capmox-rs\\n\"\n\
         runcmd:\n  \
         - [sh, -c, \"echo {machine} joined the demo cluster\"]\n"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn objects_deserialize() {
        let pc = proxmox_cluster().unwrap();
        assert_eq!(pc.spec.allowed_nodes.as_deref().map(<[String]>::len), Some(3));
        let pm = proxmox_machine("demo-cp-0").unwrap();
        assert_eq!(pm.spec.num_sockets, Some(2));
        assert_eq!(pm.spec.memory_mib, Some(2048));
        assert!(pm.spec.template_selector.is_some());
        assert!(user_data("m").starts_with("#cloud-config\n"));
    }
}
