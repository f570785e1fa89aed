//! The manifests of one end-to-end "tenant": a Cluster with its ProxmoxCluster, two Machines with
//! ProxmoxMachines and bootstrap Secrets, and a MachineDeployment of two built from a
//! ProxmoxMachineTemplate — the Proxmox kinds in `v1alpha1` (capmox v0.7 shapes) or `v1alpha2`,
//! the Cluster API kinds in the contract version of the CAPI release under test (`v1beta1` for
//! v1.10, `v1beta2` for v1.13).

use base64::Engine;
use serde_json::{Value, json};

/// Group of the Proxmox kinds.
pub const INFRA_GROUP: &str = "infrastructure.cluster.x-k8s.io";
/// The Kubernetes version of every Machine (matches the shared-storage template of the
/// `pve-sim/scenarios/demo.yaml` scenario, which every node can clone).
pub const KUBERNETES_VERSION: &str = "v1.32.4";
/// The template tags of that template.
const TEMPLATE_TAGS: [&str; 3] = ["capmox", "template", "v1.32.4"];
/// Label on the MachineDeployment's Machines (its selector).
pub const POOL_LABEL: &str = "e2e.capmox-rs.dev/pool";

/// A CAPI release under test.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capi {
    /// Release, e.g. `v1.13.4` (names the manager, CRD and webhook folders in `../shared/tools/capi`).
    pub release: &'static str,
    /// The `cluster.x-k8s.io` version (= the provider contract) of that release.
    pub api: &'static str,
}

impl Capi {
    /// CAPI v1.13.4, contract v1beta2.
    pub const V1_13_4: Capi = Capi {
        release: "v1.13.4",
        api: "v1beta2",
    };
    /// CAPI v1.10.2, contract v1beta1 (CozyStack).
    pub const V1_10_2: Capi = Capi {
        release: "v1.10.2",
        api: "v1beta1",
    };

    /// `cluster.x-k8s.io/<api>`.
    pub fn api_version(&self) -> String {
        format!("cluster.x-k8s.io/{}", self.api)
    }

    /// Whether this is the v1beta1 contract generation (refs carry `apiVersion`).
    pub fn v1beta1(&self) -> bool {
        self.api == "v1beta1"
    }
}

/// One cluster's worth of objects, in its own namespace.
#[derive(Debug, Clone)]
pub struct Tenant {
    /// The CAPI release.
    pub capi: Capi,
    /// The version the Proxmox kinds are applied in: `v1alpha1` or `v1alpha2`.
    pub infra: &'static str,
    /// Namespace (= cluster name).
    pub ns: String,
    /// Second octet of the tenant's node network `10.<net>.0.0/24`.
    net: u8,
}

impl Tenant {
    /// A tenant applying the Proxmox kinds in `infra`.
    pub fn new(capi: Capi, infra: &'static str, net: u8) -> Self {
        let release = capi.release.replace('.', "");
        Self {
            capi,
            infra,
            ns: format!("e2e-{release}-{infra}"),
            net,
        }
    }

    /// The Cluster's (and ProxmoxCluster's) name: the namespace.
    pub fn cluster(&self) -> &str {
        &self.ns
    }

    /// `infrastructure.cluster.x-k8s.io/<infra>`.
    pub fn infra_api_version(&self) -> String {
        format!("{INFRA_GROUP}/{}", self.infra)
    }

    /// The two stand-alone machines: (name, control plane).
    pub fn machines(&self) -> [(String, bool); 2] {
        [
            (format!("{}-cp-0", self.ns), true),
            (format!("{}-worker-0", self.ns), false),
        ]
    }

    /// Name of the MachineDeployment and its ProxmoxMachineTemplate.
    pub fn deployment(&self) -> String {
        format!("{}-md", self.ns)
    }

    /// The control-plane endpoint (inside the /24, outside the node range).
    pub fn endpoint(&self) -> (String, i64) {
        (format!("10.{}.0.5", self.net), 6443)
    }

    fn labels(&self) -> Value {
        json!({"cluster.x-k8s.io/cluster-name": self.cluster(), "e2e.capmox-rs.dev/tenant": self.ns})
    }

    fn meta(&self, name: &str) -> Value {
        json!({"name": name, "namespace": self.ns, "labels": self.labels(),
               "annotations": {"e2e.capmox-rs.dev/applied-as": self.infra}})
    }

    /// The ProxmoxCluster.
    pub fn proxmox_cluster(&self) -> Value {
        let (host, port) = self.endpoint();
        let n = self.net;
        let mut spec = json!({
            "controlPlaneEndpoint": {"host": host, "port": port},
            "ipv4Config": {"addresses": [format!("10.{n}.0.10-10.{n}.0.50")], "prefix": 24,
                           "gateway": format!("10.{n}.0.1"), "metric": 100},
            "dnsServers": [format!("10.{n}.0.1"), "9.9.9.9"],
            "allowedNodes": ["pve1", "pve2", "pve3"],
            "schedulerHints": {"memoryAdjustment": 150},
        });
        if self.infra == "v1alpha1" {
            // v0.4–v0.7 ClusterClass era: machine specs on the cluster (no v1alpha2 counterpart,
            // kept through the conversion-data annotation).
            spec["cloneSpec"] = json!({
                "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2e admin@example"],
                "machineSpec": {"controlPlane": {"sourceNode": "pve1", "templateID": 100,
                                                 "network": {"default": {"bridge": "vmbr0"}}}},
            });
        } else {
            // A v1alpha2-only field (kept through the annotation when CAPI v1.10 writes v1alpha1).
            spec["zoneConfig"] = json!([{"zone": "zone-b", "dnsServers": [format!("10.{n}.1.1")], "ipv4Config": {
                "addresses": [format!("10.{n}.1.10-10.{n}.1.50")], "prefix": 24, "gateway": format!("10.{n}.1.1")}}]);
        }
        json!({"apiVersion": self.infra_api_version(), "kind": "ProxmoxCluster",
               "metadata": self.meta(self.cluster()), "spec": spec})
    }

    /// The spec of every ProxmoxMachine (and of the template), in the tenant's version.
    pub fn machine_spec(&self) -> Value {
        let mut spec = json!({
            "templateSelector": {"matchTags": TEMPLATE_TAGS},
            "format": "qcow2",
            "full": true,
            "numSockets": 2,
            "numCores": 2,
            "memoryMiB": 2048,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
            "description": format!("{} node", self.cluster()),
            "checks": {"skipCloudInitStatus": false},
            "metadataSettings": {"providerIDInjection": true},
        });
        spec["network"] = if self.infra == "v1alpha1" {
            json!({"default": {"bridge": "vmbr0", "model": "virtio", "mtu": 1500, "vlan": 10,
                               "dnsServers": [format!("10.{}.0.53", self.net)]}})
        } else {
            // `queues` exists in v1alpha2 only.
            json!({"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio",
                    "mtu": 1500, "vlan": 10, "queues": 2, "defaultIPv4": true,
                    "dnsServers": [format!("10.{}.0.53", self.net)]}]})
        };
        spec
    }

    /// A stand-alone ProxmoxMachine.
    pub fn proxmox_machine(&self, name: &str, control_plane: bool) -> Value {
        let mut meta = self.meta(name);
        if control_plane {
            meta["labels"]["cluster.x-k8s.io/control-plane"] = json!("");
        }
        json!({"apiVersion": self.infra_api_version(), "kind": "ProxmoxMachine",
               "metadata": meta, "spec": self.machine_spec()})
    }

    /// The MachineDeployment's ProxmoxMachineTemplate.
    pub fn proxmox_machine_template(&self) -> Value {
        json!({"apiVersion": self.infra_api_version(), "kind": "ProxmoxMachineTemplate",
               "metadata": self.meta(&self.deployment()),
               "spec": {"template": {"spec": self.machine_spec()}}})
    }

    /// The bootstrap data Secret `name` (what a bootstrap provider writes).
    pub fn bootstrap_secret(&self, name: &str) -> Value {
        let b64 = |s: &str| base64::engine::general_purpose::STANDARD.encode(s);
        let data = format!("#cloud-config\nruncmd:\n  - [sh, -c, \"echo {name} joined\"]\n");
        json!({"apiVersion": "v1", "kind": "Secret", "type": "cluster.x-k8s.io/secret",
               "metadata": {"name": name, "namespace": self.ns, "labels": self.labels()},
               "data": {"value": b64(&data), "format": b64("cloud-config")}})
    }

    /// A reference to a Proxmox object from a CAPI object of this release.
    fn infra_ref(&self, kind: &str, name: &str) -> Value {
        if self.capi.v1beta1() {
            json!({"apiVersion": self.infra_api_version(), "kind": kind, "name": name, "namespace": self.ns})
        } else {
            json!({"apiGroup": INFRA_GROUP, "kind": kind, "name": name})
        }
    }

    /// The Cluster.
    pub fn cluster_object(&self) -> Value {
        json!({"apiVersion": self.capi.api_version(), "kind": "Cluster",
               "metadata": {"name": self.cluster(), "namespace": self.ns, "labels": self.labels()},
               "spec": {"clusterNetwork": {"pods": {"cidrBlocks": ["192.168.0.0/16"]}},
                        "infrastructureRef": self.infra_ref("ProxmoxCluster", self.cluster())}})
    }

    fn machine_spec_capi(&self, bootstrap: &str, infra_kind: &str, infra_name: &str) -> Value {
        json!({"clusterName": self.cluster(), "version": KUBERNETES_VERSION,
               "bootstrap": {"dataSecretName": bootstrap},
               "infrastructureRef": self.infra_ref(infra_kind, infra_name)})
    }

    /// A stand-alone Machine (bootstrap data Secret named like it).
    pub fn machine(&self, name: &str, control_plane: bool) -> Value {
        let mut labels = self.labels();
        if control_plane {
            labels["cluster.x-k8s.io/control-plane"] = json!("");
        }
        json!({"apiVersion": self.capi.api_version(), "kind": "Machine",
               "metadata": {"name": name, "namespace": self.ns, "labels": labels},
               "spec": self.machine_spec_capi(name, "ProxmoxMachine", name)})
    }

    /// The MachineDeployment (bootstrap data Secret named like it, shared by its Machines).
    pub fn machine_deployment(&self, replicas: i64) -> Value {
        let md = self.deployment();
        let mut template_labels = self.labels();
        template_labels[POOL_LABEL] = json!(md);
        json!({"apiVersion": self.capi.api_version(), "kind": "MachineDeployment",
               "metadata": {"name": md, "namespace": self.ns, "labels": self.labels()},
               "spec": {"clusterName": self.cluster(), "replicas": replicas,
                        "selector": {"matchLabels": {POOL_LABEL: md}},
                        "template": {"metadata": {"labels": template_labels},
                                     "spec": self.machine_spec_capi(&md, "ProxmoxMachineTemplate", &md)}}})
    }

    /// Every Proxmox object the user applies, in order.
    pub fn infrastructure(&self) -> Vec<Value> {
        let mut out = vec![self.proxmox_cluster()];
        for (name, cp) in self.machines() {
            out.push(self.proxmox_machine(&name, cp));
        }
        out.push(self.proxmox_machine_template());
        out
    }

    /// Every other object the user applies (Secrets, then the CAPI objects), in order.
    pub fn capi_objects(&self) -> Vec<Value> {
        let mut out: Vec<Value> = self
            .machines()
            .iter()
            .map(|(n, _)| self.bootstrap_secret(n))
            .collect();
        out.push(self.bootstrap_secret(&self.deployment()));
        out.push(self.cluster_object());
        for (name, cp) in self.machines() {
            out.push(self.machine(&name, cp));
        }
        out.push(self.machine_deployment(2));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manifests_decode_as_our_types() {
        for infra in ["v1alpha1", "v1alpha2"] {
            let t = Tenant::new(Capi::V1_10_2, infra, 20);
            for obj in t.infrastructure() {
                let v2 = capmox_api::conversion::convert_value(
                    obj.clone(),
                    "infrastructure.cluster.x-k8s.io/v1alpha2",
                )
                .unwrap_or_else(|e| panic!("{obj}: {e}"));
                assert_eq!(v2["apiVersion"], "infrastructure.cluster.x-k8s.io/v1alpha2");
            }
            assert_eq!(t.capi_objects().len(), 7);
        }
    }
}
