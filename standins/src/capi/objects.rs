//! Builders for the objects core Cluster API and a bootstrap provider create, shaped the way they
//! create them (names, labels, owner references, secret type).

use std::collections::BTreeMap;

use capmox_api::capi::CONTROL_PLANE_LABEL;
use capmox_api::capi::v1beta2::{
    Cluster, ClusterSpec, ContractVersionedObjectReference, Machine, MachineBootstrap, MachineSpec,
};
use capmox_api::consts::{CLUSTER_NAME_LABEL, GROUP};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use kube::api::ObjectMeta;
use kube::{Resource, ResourceExt};

use crate::meta::owner_reference;

/// Type of bootstrap data Secrets (`cluster.x-k8s.io/secret`).
pub const BOOTSTRAP_SECRET_TYPE: &str = "cluster.x-k8s.io/secret";
/// Kind of the infrastructure cluster the helpers reference.
pub const PROXMOX_CLUSTER_KIND: &str = "ProxmoxCluster";
/// Kind of the infrastructure machine the helpers reference.
pub const PROXMOX_MACHINE_KIND: &str = "ProxmoxMachine";

fn meta(ns: &str, name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(ns.to_owned()),
        ..ObjectMeta::default()
    }
}

/// A v1beta2 `Cluster` whose `spec.infrastructureRef` names the ProxmoxCluster `proxmox_cluster`.
pub fn cluster(ns: &str, name: &str, proxmox_cluster: &str) -> Cluster {
    Cluster {
        metadata: meta(ns, name),
        spec: ClusterSpec {
            infrastructure_ref: Some(ContractVersionedObjectReference {
                api_group: GROUP.to_owned(),
                kind: PROXMOX_CLUSTER_KIND.to_owned(),
                name: proxmox_cluster.to_owned(),
            }),
            ..ClusterSpec::default()
        },
        status: None,
    }
}

/// A v1beta2 `Machine` of `cluster` as a MachineSet or control-plane provider creates it: label
/// `cluster.x-k8s.io/cluster-name` (+ `cluster.x-k8s.io/control-plane` when `control_plane`),
/// `spec.clusterName`, `spec.bootstrap.dataSecretName` (`None`: the bootstrap provider has not
/// produced data yet), `spec.infrastructureRef` → the ProxmoxMachine `infra_name`, `spec.version`.
pub fn machine(
    ns: &str,
    name: &str,
    cluster: &str,
    control_plane: bool,
    bootstrap_secret: Option<&str>,
    infra_name: &str,
    version: &str,
) -> Machine {
    let mut labels = BTreeMap::from([(CLUSTER_NAME_LABEL.to_owned(), cluster.to_owned())]);
    if control_plane {
        labels.insert(CONTROL_PLANE_LABEL.to_owned(), String::new());
    }
    Machine {
        metadata: ObjectMeta {
            labels: Some(labels),
            ..meta(ns, name)
        },
        spec: MachineSpec {
            cluster_name: cluster.to_owned(),
            bootstrap: MachineBootstrap {
                data_secret_name: bootstrap_secret.map(str::to_owned),
            },
            infrastructure_ref: ContractVersionedObjectReference {
                api_group: GROUP.to_owned(),
                kind: PROXMOX_MACHINE_KIND.to_owned(),
                name: infra_name.to_owned(),
            },
            version: Some(version.to_owned()),
            ..MachineSpec::default()
        },
        status: None,
    }
}

/// A bootstrap data Secret as the kubeadm bootstrap provider writes it: type
/// `cluster.x-k8s.io/secret`, key `value` with the data and, when given, key `format`
/// (`cloud-config` or `ignition`; the Talos provider writes none).
pub fn bootstrap_secret(ns: &str, name: &str, value: &str, format: Option<&str>) -> Secret {
    let mut data = BTreeMap::from([("value".to_owned(), ByteString(value.as_bytes().to_vec()))]);
    if let Some(f) = format {
        data.insert("format".to_owned(), ByteString(f.as_bytes().to_vec()));
    }
    Secret {
        metadata: meta(ns, name),
        type_: Some(BOOTSTRAP_SECRET_TYPE.to_owned()),
        data: Some(data),
        ..Secret::default()
    }
}

fn set_controller_owner(
    meta: &mut ObjectMeta,
    owner: k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference,
) {
    let owners = meta.owner_references.get_or_insert_with(Vec::new);
    owners.retain(|o| o.controller != Some(true) && o.uid != owner.uid);
    owners.push(owner);
}

fn set_label(meta: &mut ObjectMeta, key: &str, value: &str) {
    meta.labels
        .get_or_insert_with(BTreeMap::new)
        .insert(key.to_owned(), value.to_owned());
}

/// Makes `meta` (a ProxmoxCluster's) owned by `cluster` the way the core Cluster controller does:
/// a controller owner reference (replacing any other controller) and the
/// `cluster.x-k8s.io/cluster-name` label. The Cluster must have been created (it needs a uid).
pub fn set_cluster_owner(meta: &mut ObjectMeta, cluster: &Cluster) {
    set_controller_owner(meta, owner_reference(cluster, true));
    set_label(meta, CLUSTER_NAME_LABEL, &cluster.name_any());
}

/// Makes `meta` (a ProxmoxMachine's) owned by `machine` the way the core Machine controller does:
/// a controller owner reference (replacing e.g. a MachineSet), the `cluster.x-k8s.io/cluster-name`
/// label and, for control-plane machines, the `cluster.x-k8s.io/control-plane` label. The
/// Machine must have been created (it needs a uid).
pub fn set_machine_owner(meta: &mut ObjectMeta, machine: &Machine) {
    set_controller_owner(meta, owner_reference(machine, true));
    set_label(meta, CLUSTER_NAME_LABEL, &machine.spec.cluster_name);
    if machine.labels().contains_key(CONTROL_PLANE_LABEL) {
        set_label(meta, CONTROL_PLANE_LABEL, "");
    }
}

/// Whether `meta` has a controller owner reference to `owner` (matched by uid).
pub(crate) fn controlled_by<K: Resource<DynamicType = ()>>(meta: &ObjectMeta, owner: &K) -> bool {
    let uid = owner.meta().uid.as_deref();
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && Some(o.uid.as_str()) == uid && o.kind == K::kind(&()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_labels_and_refs() {
        let m = machine(
            "ns",
            "cp-0",
            "demo",
            true,
            Some("cp-0-bootstrap"),
            "cp-0",
            "v1.33.0",
        );
        assert_eq!(
            m.labels().get(CLUSTER_NAME_LABEL).map(String::as_str),
            Some("demo")
        );
        assert!(m.labels().contains_key(CONTROL_PLANE_LABEL));
        assert_eq!(m.spec.infrastructure_ref.kind, "ProxmoxMachine");
        assert_eq!(m.spec.infrastructure_ref.api_group, GROUP);
        assert_eq!(
            m.spec.bootstrap.data_secret_name.as_deref(),
            Some("cp-0-bootstrap")
        );
        let w = machine("ns", "w-0", "demo", false, None, "w-0", "v1.33.0");
        assert!(!w.labels().contains_key(CONTROL_PLANE_LABEL));
        assert!(w.spec.bootstrap.data_secret_name.is_none());
    }

    #[test]
    fn bootstrap_secret_shape() {
        let s = bootstrap_secret("ns", "b", "#cloud-config\n", Some("cloud-config"));
        assert_eq!(s.type_.as_deref(), Some(BOOTSTRAP_SECRET_TYPE));
        let data = s.data.unwrap();
        assert_eq!(data["value"].0, b"#cloud-config\n");
        assert_eq!(data["format"].0, b"cloud-config");
        let talos = bootstrap_secret("ns", "b", "machine: {}", None);
        assert!(!talos.data.unwrap().contains_key("format"));
    }

    #[test]
    fn owners_replace_other_controllers() {
        let mut m = machine("ns", "m", "demo", true, None, "m", "v1.33.0");
        m.metadata.uid = Some("uid-m".into());
        let mut meta = ObjectMeta::default();
        set_controller_owner(
            &mut meta,
            k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
                kind: "MachineSet".into(),
                uid: "uid-ms".into(),
                controller: Some(true),
                ..Default::default()
            },
        );
        set_machine_owner(&mut meta, &m);
        let owners = meta.owner_references.clone().unwrap();
        assert_eq!(owners.len(), 1);
        assert_eq!(owners[0].kind, "Machine");
        assert_eq!(owners[0].api_version, "cluster.x-k8s.io/v1beta2");
        assert!(controlled_by(&meta, &m));
        assert!(meta.labels.unwrap().contains_key(CONTROL_PLANE_LABEL));
    }
}
