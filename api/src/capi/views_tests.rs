use serde_json::json;

use super::*;

fn dynamic(value: Value) -> DynamicObject {
    serde_json::from_value(value).unwrap()
}

/// A CAPI v1.10 (`v1beta1`) control-plane Machine as the API server returns it.
fn machine_v1beta1() -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1",
        "kind": "Machine",
        "metadata": {
            "name": "c1-cp-abcde", "namespace": "ns1", "uid": "1111-2222",
            "labels": {"cluster.x-k8s.io/cluster-name": "c1", "cluster.x-k8s.io/control-plane": ""},
            "annotations": {"cluster.x-k8s.io/paused": ""},
            "finalizers": ["machine.cluster.x-k8s.io"]
        },
        "spec": {
            "clusterName": "c1",
            "bootstrap": {
                "configRef": {"apiVersion": "bootstrap.cluster.x-k8s.io/v1beta1", "kind": "KubeadmConfig", "name": "c1-cp-x"},
                "dataSecretName": "c1-cp-x"
            },
            "infrastructureRef": {
                "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1",
                "kind": "ProxmoxMachine", "name": "c1-cp-pm", "namespace": "ns1", "uid": "3333"
            },
            "version": "v1.32.3",
            "providerID": "proxmox://0b6f1a59-2d3c-4a5e-8f7a-9c0d1e2f3a4b",
            "failureDomain": "zone-a",
            "nodeDrainTimeout": "10s"
        },
        "status": {
            "bootstrapReady": true, "infrastructureReady": true, "phase": "Running",
            "nodeRef": {"apiVersion": "v1", "kind": "Node", "name": "c1-cp-node", "uid": "4444"},
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": "2026-01-01T00:00:00Z"}],
            "v1beta2": {"conditions": []}
        }
    })
}

/// A CAPI v1.12 (`v1beta2`) worker Machine.
fn machine_v1beta2() -> Value {
    json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2",
        "kind": "Machine",
        "metadata": {
            "name": "c1-md-xyz", "namespace": "ns1", "uid": "5555",
            "labels": {"cluster.x-k8s.io/cluster-name": "c1"},
            "deletionTimestamp": "2026-01-01T00:00:00Z"
        },
        "spec": {
            "clusterName": "c1",
            "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "b"}},
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxMachine", "name": "c1-md-pm"},
            "version": "v1.33.1",
            "deletion": {"nodeDrainTimeoutSeconds": 10},
            "taints": []
        },
        "status": {
            "initialization": {"infrastructureProvisioned": false, "bootstrapDataSecretCreated": false},
            "nodeRef": {"name": "c1-md-node"},
            "deprecated": {"v1beta1": {"conditions": []}}
        }
    })
}

#[test]
fn machine_v1beta1_is_read() {
    let view = MachineView::from_dynamic(&dynamic(machine_v1beta1()));
    assert_eq!(
        view,
        MachineView {
            name: "c1-cp-abcde".into(),
            namespace: "ns1".into(),
            uid: Some("1111-2222".into()),
            cluster_name: Some("c1".into()),
            bootstrap_data_secret_name: Some("c1-cp-x".into()),
            version: Some("v1.32.3".into()),
            infrastructure_ref: Some(InfraRef {
                api_group: Some("infrastructure.cluster.x-k8s.io".into()),
                kind: "ProxmoxMachine".into(),
                name: "c1-cp-pm".into(),
            }),
            failure_domain: Some("zone-a".into()),
            control_plane: true,
            node_ref: Some("c1-cp-node".into()),
            provider_id: Some("proxmox://0b6f1a59-2d3c-4a5e-8f7a-9c0d1e2f3a4b".into()),
            deleting: false,
            paused: true,
        }
    );
    assert!(
        view.infrastructure_ref
            .unwrap()
            .is("infrastructure.cluster.x-k8s.io", "ProxmoxMachine")
    );
}

#[test]
fn machine_v1beta2_is_read() {
    let view = MachineView::from_dynamic(&dynamic(machine_v1beta2()));
    assert_eq!(
        view,
        MachineView {
            name: "c1-md-xyz".into(),
            namespace: "ns1".into(),
            uid: Some("5555".into()),
            cluster_name: Some("c1".into()),
            bootstrap_data_secret_name: None,
            version: Some("v1.33.1".into()),
            infrastructure_ref: Some(InfraRef {
                api_group: Some("infrastructure.cluster.x-k8s.io".into()),
                kind: "ProxmoxMachine".into(),
                name: "c1-md-pm".into(),
            }),
            failure_domain: None,
            control_plane: false,
            node_ref: Some("c1-md-node".into()),
            provider_id: None,
            deleting: true,
            paused: false,
        }
    );
}

#[test]
fn from_value_matches_from_dynamic() {
    for obj in [machine_v1beta1(), machine_v1beta2()] {
        assert_eq!(
            MachineView::from_value(&obj),
            MachineView::from_dynamic(&dynamic(obj.clone()))
        );
    }
}

#[test]
fn cluster_name_falls_back_to_label() {
    let mut obj = machine_v1beta2();
    obj["spec"]["clusterName"] = json!("");
    obj["metadata"]["labels"]["cluster.x-k8s.io/cluster-name"] = json!("from-label");
    assert_eq!(
        MachineView::from_value(&obj).cluster_name.as_deref(),
        Some("from-label")
    );
    obj["spec"].as_object_mut().unwrap().remove("clusterName");
    assert_eq!(
        MachineView::from_value(&obj).cluster_name.as_deref(),
        Some("from-label")
    );
}

#[test]
fn missing_or_mistyped_fields_read_as_absent() {
    let empty = MachineView::from_value(&json!({}));
    assert_eq!(empty, MachineView::default());

    let odd = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
        "metadata": {"name": "m"},
        "spec": {
            "clusterName": 7,
            "bootstrap": "not-an-object",
            "infrastructureRef": {"kind": "ProxmoxMachine"},
            "version": null,
            "futureField": {"x": 1}
        },
        "status": {"nodeRef": "n1"}
    });
    let view = MachineView::from_value(&odd);
    assert_eq!(view.name, "m");
    assert_eq!(view.cluster_name, None);
    assert_eq!(view.bootstrap_data_secret_name, None);
    assert_eq!(view.infrastructure_ref, None);
    assert_eq!(view.version, None);
    assert_eq!(view.node_ref, None);

    // Metadata that is not ObjectMeta does not fail the view either.
    let bad_meta = json!({"metadata": {"labels": "nope"}, "spec": {"clusterName": "c"}});
    let view = MachineView::from_value(&bad_meta);
    assert_eq!(view.name, "");
    assert_eq!(view.cluster_name.as_deref(), Some("c"));
}

#[test]
fn infra_ref_group_of_core_api_version_is_none() {
    let r = InfraRef::from_value(&json!({"apiVersion": "v1", "kind": "ConfigMap", "name": "x"})).unwrap();
    assert_eq!(r.api_group, None);
    // apiGroup (v1beta2) wins over apiVersion.
    let r =
        InfraRef::from_value(&json!({"apiGroup": "a.io", "apiVersion": "b.io/v1", "kind": "K", "name": "n"}))
            .unwrap();
    assert_eq!(r.api_group.as_deref(), Some("a.io"));
    assert_eq!(InfraRef::from_value(&json!({"kind": "K", "name": ""})), None);
}

#[test]
fn cluster_v1beta1_is_read() {
    let obj = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
        "metadata": {"name": "c1", "namespace": "ns1"},
        "spec": {
            "paused": false,
            "controlPlaneEndpoint": {"host": "10.0.0.1", "port": 6443},
            "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxCluster", "name": "c1"}
        },
        "status": {"infrastructureReady": true, "controlPlaneReady": false, "phase": "Provisioned"}
    });
    assert_eq!(
        ClusterView::from_value(&obj),
        ClusterView {
            name: "c1".into(),
            namespace: "ns1".into(),
            paused: false,
            infrastructure_provisioned: true,
            infrastructure_ref: Some(InfraRef {
                api_group: Some("infrastructure.cluster.x-k8s.io".into()),
                kind: "ProxmoxCluster".into(),
                name: "c1".into(),
            }),
            deleting: false,
        }
    );
}

#[test]
fn cluster_v1beta2_is_read() {
    let obj = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c2", "namespace": "ns2", "deletionTimestamp": "2026-01-01T00:00:00Z"},
        "spec": {
            "paused": true,
            "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxCluster", "name": "c2"}
        },
        "status": {"initialization": {"infrastructureProvisioned": true, "controlPlaneInitialized": false}}
    });
    let view = ClusterView::from_dynamic(&dynamic(obj));
    assert!(view.paused);
    assert!(view.infrastructure_provisioned);
    assert!(view.deleting);
    assert_eq!(view.infrastructure_ref.unwrap().name, "c2");
}

#[test]
fn cluster_paused_by_annotation_and_not_provisioned_by_default() {
    let obj = json!({
        "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
        "metadata": {"name": "c3", "annotations": {"cluster.x-k8s.io/paused": "true"}},
        "spec": {},
        "status": {"initialization": {"infrastructureProvisioned": "yes"}}
    });
    let view = ClusterView::from_value(&obj);
    assert!(view.paused);
    assert!(!view.infrastructure_provisioned);
    assert_eq!(view.infrastructure_ref, None);
    assert_eq!(ClusterView::from_value(&json!(null)), ClusterView::default());
}

#[test]
fn typed_test_objects_read_back_through_views() {
    use kube::Resource;

    let mut m = super::super::v1beta2::Machine::new(
        "m1",
        super::super::v1beta2::MachineSpec {
            cluster_name: "c1".into(),
            bootstrap: super::super::MachineBootstrap {
                data_secret_name: Some("boot".into()),
            },
            infrastructure_ref: super::super::v1beta2::ContractVersionedObjectReference {
                api_group: "infrastructure.cluster.x-k8s.io".into(),
                kind: "ProxmoxMachine".into(),
                name: "pm1".into(),
            },
            ..Default::default()
        },
    );
    m.meta_mut().namespace = Some("ns".into());
    m.status = Some(super::super::v1beta2::MachineStatus {
        node_ref: Some(super::super::v1beta2::MachineNodeReference { name: "n1".into() }),
        ..Default::default()
    });
    let view = MachineView::from_value(&serde_json::to_value(&m).unwrap());
    assert_eq!(view.bootstrap_data_secret_name.as_deref(), Some("boot"));
    assert_eq!(view.node_ref.as_deref(), Some("n1"));
    assert_eq!(view.infrastructure_ref.unwrap().name, "pm1");

    let mut c = super::super::v1beta1::Cluster::new("c1", Default::default());
    c.status = Some(super::super::v1beta1::ClusterStatus {
        infrastructure_ready: Some(true),
        ..Default::default()
    });
    assert!(ClusterView::from_value(&serde_json::to_value(&c).unwrap()).infrastructure_provisioned);
}
