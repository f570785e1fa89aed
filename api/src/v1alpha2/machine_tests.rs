//! The capmox-rs additions to the machine spec, checked against the generated CRD schema.

use serde_json::{Value, json};

use super::*;

/// Validation errors of `spec` as a v1alpha2 ProxmoxMachine against the generated CRD.
fn errors(spec: Value) -> Vec<String> {
    let crd = crate::crd::proxmox_machines().unwrap();
    let version = crd.spec.versions.iter().find(|v| v.name == "v1alpha2").unwrap();
    let schema = serde_json::to_value(
        version
            .schema
            .as_ref()
            .unwrap()
            .open_api_v3_schema
            .as_ref()
            .unwrap(),
    )
    .unwrap();
    let schema = crd_schema::Schema::from_openapi(&schema).unwrap();
    let mut obj = json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
        "metadata": {"name": "m", "namespace": "ns"}, "spec": spec
    });
    schema.prune_and_default(&mut obj);
    schema
        .validate(&obj, None)
        .iter()
        .map(|e| e.to_string())
        .collect()
}

fn spec_with(extra: Value) -> Value {
    let mut spec = json!({
        "sourceNode": "pve1", "templateID": 100,
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}
    });
    for (k, v) in extra.as_object().unwrap() {
        spec[k] = v.clone();
    }
    spec
}

#[test]
fn new_fields_are_accepted_by_the_crd() {
    let errs = errors(spec_with(
        json!({"cloudInitStorage": "local", "networkConfigFormat": "v2"}),
    ));
    assert_eq!(errs, Vec::<String>::new());
    assert_eq!(
        errors(spec_with(json!({"networkConfigFormat": "capmox"}))),
        Vec::<String>::new()
    );
}

#[test]
fn invalid_values_are_rejected_by_the_crd() {
    let errs = errors(spec_with(json!({"cloudInitStorage": ""})));
    assert!(
        errs.iter().any(|e| e.contains("spec.cloudInitStorage")),
        "{errs:?}"
    );
    let errs = errors(spec_with(json!({"networkConfigFormat": "V2"})));
    assert!(
        errs.iter().any(|e| e.contains("spec.networkConfigFormat")),
        "{errs:?}"
    );
}

#[test]
fn format_defaults_to_capmox_and_serialises_lowercase() {
    let spec = ProxmoxMachineSpec::default();
    assert_eq!(
        spec.network_config_format_or_default(),
        NetworkConfigFormat::Capmox
    );
    assert_eq!(
        serde_json::to_value(NetworkConfigFormat::V2).unwrap(),
        json!("v2")
    );
    assert_eq!(
        serde_json::to_value(NetworkConfigFormat::Capmox).unwrap(),
        json!("capmox")
    );
    let spec = ProxmoxMachineSpec {
        network_config_format: Some(NetworkConfigFormat::V2),
        ..Default::default()
    };
    assert_eq!(spec.network_config_format_or_default(), NetworkConfigFormat::V2);
    assert!(
        serde_json::to_value(ProxmoxMachineSpec::default())
            .unwrap()
            .get("cloudInitStorage")
            .is_none()
    );
}

#[test]
fn additional_volumes_and_ha_are_validated_by_the_crd() {
    let ok = spec_with(json!({
        "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}, "additionalVolumes": [
            {"disk": "scsi1", "sizeGb": 1, "storage": "local-lvm", "format": "raw", "discard": true,
             "ssd": true, "iothread": true, "cache": "none"},
            {"disk": "virtio0", "sizeGb": 100, "iothread": true},
            {"disk": "sata5", "sizeGb": 2, "ssd": true}
        ]},
        "ha": {"group": "prod", "state": "ignored", "maxRestart": 0, "maxRelocate": 3}
    }));
    assert_eq!(errors(ok), Vec::<String>::new());
    for (bad, field) in [
        (
            json!({"additionalVolumes": [{"disk": "ide1", "sizeGb": 1}]}),
            "disk",
        ),
        (
            json!({"additionalVolumes": [{"disk": "scsi31", "sizeGb": 1}]}),
            "disk",
        ),
        (
            json!({"additionalVolumes": [{"disk": "scsi1", "sizeGb": 0}]}),
            "sizeGb",
        ),
        (
            json!({"additionalVolumes": [{"disk": "scsi1", "sizeGb": 1, "cache": "fast"}]}),
            "cache",
        ),
        (
            json!({"additionalVolumes": [{"disk": "virtio1", "sizeGb": 1, "ssd": true}]}),
            "ssd",
        ),
        (
            json!({"additionalVolumes": [{"disk": "sata1", "sizeGb": 1, "iothread": true}]}),
            "iothread",
        ),
    ] {
        let errs = errors(spec_with(json!({"disks": bad})));
        assert!(errs.iter().any(|e| e.contains(field)), "{bad}: {errs:?}");
    }
    let errs = errors(spec_with(json!({"ha": {"state": "enabled"}})));
    assert!(errs.iter().any(|e| e.contains("spec.ha.state")), "{errs:?}");
    let errs = errors(spec_with(json!({"ha": {"maxRestart": -1}})));
    assert!(errs.iter().any(|e| e.contains("spec.ha.maxRestart")), "{errs:?}");
}
