//! The test-support CAPI CRDs are structural and accept (and keep) core-CAPI-shaped objects.

use serde_json::{Value, json};

use super::*;

fn schema_of(crd: &CustomResourceDefinition, version: &str) -> Value {
    let v = crd.spec.versions.iter().find(|v| v.name == version).unwrap();
    serde_json::to_value(v.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap()).unwrap()
}

/// Prunes and validates `obj` against `version` of `crd`; returns the pruned object.
fn admit(crd: &CustomResourceDefinition, version: &str, mut obj: Value) -> Value {
    let schema = schema_of(crd, version);
    assert_eq!(
        crd_schema::structural::check(&schema),
        Vec::<String>::new(),
        "{version}"
    );
    let schema = crd_schema::Schema::from_openapi(&schema).unwrap();
    schema.prune_and_default(&mut obj);
    let errors = schema.validate(&obj, None);
    assert!(errors.is_empty(), "{version}: {errors:?}");
    obj
}

#[test]
fn machine_crd_keeps_core_capi_fields() {
    let crd = machine_crd().unwrap();
    let v1beta2 = admit(
        &crd,
        "v1beta2",
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {
                "clusterName": "c1",
                "bootstrap": {"configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io", "kind": "KubeadmConfig", "name": "b"},
                              "dataSecretName": "b"},
                "infrastructureRef": {"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxMachine", "name": "pm"},
                "version": "v1.33.1",
                "deletion": {"nodeDrainTimeoutSeconds": 10}
            },
            "status": {
                "initialization": {"infrastructureProvisioned": true},
                "nodeRef": {"name": "n1"},
                "addresses": [{"type": "InternalIP", "address": "10.0.0.5"}],
                "deprecated": {"v1beta1": {"conditions": []}}
            }
        }),
    );
    assert_eq!(v1beta2["spec"]["bootstrap"]["configRef"]["kind"], "KubeadmConfig");
    assert_eq!(v1beta2["spec"]["deletion"]["nodeDrainTimeoutSeconds"], 10);
    assert_eq!(
        v1beta2["status"]["deprecated"],
        json!({"v1beta1": {"conditions": []}})
    );
    assert_eq!(v1beta2["status"]["nodeRef"]["name"], "n1");

    let v1beta1 = admit(
        &crd,
        "v1beta1",
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "ns"},
            "spec": {
                "clusterName": "c1",
                "bootstrap": {"dataSecretName": "b"},
                "infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxMachine", "name": "pm"},
                "nodeDrainTimeout": "10s"
            },
            "status": {"infrastructureReady": true, "nodeRef": {"kind": "Node", "name": "n1"},
                       "conditions": [{"type": "Ready", "status": "True", "severity": ""}]}
        }),
    );
    assert_eq!(v1beta1["spec"]["nodeDrainTimeout"], "10s");
    assert_eq!(v1beta1["status"]["conditions"][0]["severity"], "");
}

#[test]
fn cluster_crd_keeps_infrastructure_readiness() {
    let crd = cluster_crd().unwrap();
    let v1beta2 = admit(
        &crd,
        "v1beta2",
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"paused": false},
            "status": {"initialization": {"infrastructureProvisioned": true}, "phase": "Provisioned"}
        }),
    );
    assert_eq!(
        v1beta2["status"]["initialization"]["infrastructureProvisioned"],
        true
    );
    let v1beta1 = admit(
        &crd,
        "v1beta1",
        json!({
            "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster",
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {},
            "status": {"infrastructureReady": true, "controlPlaneReady": true}
        }),
    );
    assert_eq!(v1beta1["status"]["infrastructureReady"], true);
    for v in &crd.spec.versions {
        assert!(
            v.subresources.as_ref().is_some_and(|s| s.status.is_some()),
            "{}",
            v.name
        );
    }
}
