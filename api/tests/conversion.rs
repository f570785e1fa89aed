//! Example-based tests of the individual capmox conversion rules (v1alpha1 ⇄ v1alpha2).

// Helpers outside `#[test]` functions panic on failure like the tests themselves.
#![allow(clippy::expect_used)]

use capmox_api::consts::CONVERSION_DATA_ANNOTATION;
use capmox_api::conversion::{ConversionError, Convertible, convert_value};
use capmox_api::{v1alpha1, v1alpha2};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

const V1: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";
const V2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

fn up(obj: Value) -> Value {
    convert_value(obj, V2).expect("up-conversion")
}

fn down(obj: Value) -> Value {
    convert_value(obj, V1).expect("down-conversion")
}

fn conversion_data(obj: &Value) -> Option<Value> {
    obj.pointer("/metadata/annotations")
        .and_then(|a| a.get(CONVERSION_DATA_ANNOTATION))
        .and_then(Value::as_str)
        .map(|s| serde_json::from_str(s).expect("annotation holds JSON"))
}

fn machine_v1(spec: Value) -> Value {
    json!({"apiVersion": V1, "kind": "ProxmoxMachine", "metadata": {"name": "m", "namespace": "default"}, "spec": spec})
}

fn machine_v2(spec: Value) -> Value {
    json!({"apiVersion": V2, "kind": "ProxmoxMachine", "metadata": {"name": "m", "namespace": "default"}, "spec": spec})
}

fn pool(name: &str) -> Value {
    json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": name})
}

#[test]
fn default_and_additional_devices_become_network_devices() {
    let spoke = machine_v1(json!({
        "sourceNode": "pve1", "templateID": 100,
        "network": {
            "default": {"bridge": "vmbr0", "model": "virtio", "mtu": 1500, "vlan": 10,
                        "ipv4PoolRef": pool("v4-inet"), "ipv6PoolRef": pool("v6-inet6")},
            "additionalDevices": [{
                "name": "net1", "bridge": "vmbr1", "ipv4PoolRef": pool("extra-inet"), "linkMtu": 9000,
                "routes": [{"to": "10.0.0.0/8", "via": "10.1.0.1", "metric": 0, "table": 100}],
                "routingPolicy": [{"from": "10.1.0.0/16", "table": 100, "priority": 0}]
            }],
            "vrfs": [{"name": "vrf-blue", "table": 100, "interfaces": ["net1"]}]
        }
    }));
    let hub = up(spoke);
    assert_eq!(
        hub["spec"]["network"],
        json!({
            "networkDevices": [
                {"name": "net0", "bridge": "vmbr0", "model": "virtio", "mtu": 1500, "vlan": 10,
                 "defaultIPv4": true, "defaultIPv6": true, "ipPoolRef": [pool("v4-inet"), pool("v6-inet6")]},
                {"name": "net1", "bridge": "vmbr1", "ipPoolRef": [pool("extra-inet")], "linkMtu": 9000,
                 "routes": [{"to": "10.0.0.0/8", "via": "10.1.0.1", "table": 100}],
                 "routingPolicy": [{"from": "10.1.0.0/16", "table": 100}]}
            ],
            "vrfs": [{"name": "vrf-blue", "table": 100, "interfaces": ["net1"]}]
        })
    );
    // `metric: 0` and `priority: 0` became absent, so the v1alpha1 object is kept for the way back.
    assert_eq!(conversion_data(&hub).expect("annotation")["apiVersion"], V1);
}

#[test]
fn network_devices_split_back_by_pool_name() {
    let hub = machine_v2(json!({
        "sourceNode": "pve1", "templateID": 100,
        "network": {"networkDevices": [
            {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true,
             "ipPoolRef": [pool("b-inet6"), pool("a-inet")]},
            {"name": "net1", "bridge": "vmbr1", "ipPoolRef": [pool("plain")]}
        ]}
    }));
    let spoke = down(hub.clone());
    assert_eq!(
        spoke["spec"]["network"],
        json!({
            "default": {"bridge": "vmbr0", "ipv4PoolRef": pool("a-inet"), "ipv6PoolRef": pool("b-inet6")},
            "additionalDevices": [{"name": "net1", "bridge": "vmbr1", "ipv4PoolRef": pool("plain")}]
        })
    );
    // The pool order is not expressible in v1alpha1: the hub is kept in the annotation and restored.
    let data = conversion_data(&spoke).expect("annotation");
    assert_eq!(data["apiVersion"], V2);
    assert!(data.get("metadata").is_none());
    assert_eq!(up(spoke), hub);
}

#[test]
fn machine_without_network_gets_dummy_net0() {
    let spoke = machine_v1(json!({"sourceNode": "pve1", "templateID": 100}));
    let hub = up(spoke.clone());
    assert_eq!(
        hub["spec"]["network"],
        json!({"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true}]})
    );
    assert_eq!(conversion_data(&hub), None);
    assert_eq!(down(hub), spoke);
}

#[test]
fn cloud_init_storage_and_network_config_format_survive_v1alpha1() {
    let hub = machine_v2(json!({
        "sourceNode": "pve1", "templateID": 100,
        "cloudInitStorage": "cephfs", "networkConfigFormat": "v2",
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true}]}
    }));
    let spoke = down(hub.clone());
    assert!(spoke["spec"].get("cloudInitStorage").is_none());
    assert!(spoke["spec"].get("networkConfigFormat").is_none());
    assert_eq!(conversion_data(&spoke).expect("annotation")["apiVersion"], V2);
    assert_eq!(up(spoke.clone()), hub);
    // A v1alpha1 client edits the object: the edit wins, the v1alpha2-only fields come back.
    let mut edited = spoke;
    edited["spec"]["numCores"] = json!(4);
    let back = up(edited);
    assert_eq!(back["spec"]["numCores"], 4);
    assert_eq!(back["spec"]["cloudInitStorage"], "cephfs");
    assert_eq!(back["spec"]["networkConfigFormat"], "v2");
}

#[test]
fn image_ref_is_in_both_versions() {
    // A machine and a template naming a ProxmoxVMImage: v1alpha1 holds imageRef itself (no
    // conversion data), so a machine CAPI v1.10 creates through v1alpha1 has a template source.
    let net = json!({"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true}]});
    let hub = machine_v2(json!({"imageRef": {"name": "noble"}, "full": false, "network": net}));
    let spoke = down(hub.clone());
    assert_eq!(spoke["spec"]["imageRef"], json!({"name": "noble"}));
    assert_eq!(conversion_data(&spoke), None);
    assert_eq!(up(spoke), hub);
    let template = json!({"apiVersion": V2, "kind": "ProxmoxMachineTemplate", "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"imageRef": {"name": "noble"}, "network": net}}}});
    let spoke = down(template.clone());
    assert_eq!(
        spoke["spec"]["template"]["spec"]["imageRef"],
        json!({"name": "noble"})
    );
    assert!(
        spoke["spec"]["template"].get("metadata").is_none(),
        "no machine data needed: {spoke}"
    );
    assert_eq!(up(spoke), template);
}

#[test]
fn additional_volumes_and_ha_survive_v1alpha1() {
    let hub = machine_v2(json!({
        "sourceNode": "pve1", "templateID": 100,
        "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20},
                  "additionalVolumes": [{"disk": "scsi1", "sizeGb": 50, "storage": "ceph", "discard": true, "cache": "writeback"}]},
        "ha": {"group": "g1", "state": "stopped", "maxRestart": 2},
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true}]}
    }));
    let spoke = down(hub.clone());
    assert_eq!(
        spoke["spec"]["disks"],
        json!({"bootVolume": {"disk": "scsi0", "sizeGb": 20}})
    );
    assert!(spoke["spec"].get("ha").is_none());
    assert_eq!(up(spoke.clone()), hub);
    // A v1alpha1 client edits the object: the edit wins, the v1alpha2-only fields come back.
    let mut edited = spoke;
    edited["spec"]["disks"]["bootVolume"]["sizeGb"] = json!(30);
    let back = up(edited);
    assert_eq!(back["spec"]["disks"]["bootVolume"]["sizeGb"], 30);
    assert_eq!(
        back["spec"]["disks"]["additionalVolumes"],
        hub["spec"]["disks"]["additionalVolumes"]
    );
    assert_eq!(back["spec"]["ha"], hub["spec"]["ha"]);
}

#[test]
fn dhcp_modes_and_zone_nodes_survive_v1alpha1() {
    let hub = machine_v2(json!({
        "sourceNode": "pve1", "templateID": 100,
        "network": {"networkDevices": [
            {"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true, "ipv4": "dhcp", "ipv6": "slaac"},
            {"name": "net1", "bridge": "vmbr1", "ipv6": "dhcp"}
        ]}
    }));
    let spoke = down(hub.clone());
    assert!(spoke["spec"]["network"]["default"].get("ipv4").is_none());
    assert_eq!(up(spoke.clone()), hub);
    // A v1alpha1 client edits the object: the edit wins, the modes come back.
    let mut edited = spoke;
    edited["spec"]["numCores"] = json!(2);
    let back = up(edited);
    assert_eq!(back["spec"]["numCores"], 2);
    assert_eq!(back["spec"]["network"]["networkDevices"][0]["ipv4"], "dhcp");
    assert_eq!(back["spec"]["network"]["networkDevices"][0]["ipv6"], "slaac");
    assert_eq!(back["spec"]["network"]["networkDevices"][1]["ipv6"], "dhcp");
}

#[test]
fn network_config_format_defaults_to_capmox() {
    let spec: v1alpha2::ProxmoxMachineSpec =
        serde_json::from_value(json!({"network": {"networkDevices": []}})).expect("spec");
    assert_eq!(
        spec.network_config_format_or_default(),
        v1alpha2::NetworkConfigFormat::Capmox
    );
    let spec: v1alpha2::ProxmoxMachineSpec =
        serde_json::from_value(json!({"network": {"networkDevices": []}, "networkConfigFormat": "v2"}))
            .expect("spec");
    assert_eq!(
        spec.network_config_format_or_default(),
        v1alpha2::NetworkConfigFormat::V2
    );
    assert!(
        serde_json::from_value::<v1alpha2::ProxmoxMachineSpec>(
            json!({"network": {"networkDevices": []}, "networkConfigFormat": "V2"})
        )
        .is_err()
    );
}

#[test]
fn target_replaces_allowed_nodes_and_is_restored() {
    let spoke = machine_v1(
        json!({"sourceNode": "pve1", "templateID": 100, "target": "pve2", "allowedNodes": ["pve1"]}),
    );
    let hub = up(spoke.clone());
    assert_eq!(hub["spec"]["allowedNodes"], json!(["pve2"]));
    assert_eq!(down(hub.clone()), spoke);
    // The hub is edited elsewhere but still pins the target: target and allowedNodes come back.
    let mut edited = hub;
    edited["spec"]["numCores"] = json!(8);
    let spoke_again = down(edited);
    assert_eq!(spoke_again["spec"]["target"], "pve2");
    assert_eq!(spoke_again["spec"]["allowedNodes"], json!(["pve1"]));
    assert_eq!(spoke_again["spec"]["numCores"], 8);
}

#[test]
fn conditions_and_ready_map_to_v1beta2_shape() {
    let mut spoke = machine_v1(json!({"sourceNode": "pve1", "templateID": 100}));
    spoke["status"] = json!({
        "ready": true,
        "failureReason": "CreateError",
        "conditions": [
            {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-02T03:04:05Z"},
            {"type": "VirtualMachineProvisioned", "status": "False", "severity": "Warning",
             "reason": "Cloning", "message": "cloning", "lastTransitionTime": "2025-01-02T03:04:05Z"}
        ],
        "ipAddresses": {"net0": {"ipv4": "10.0.0.5", "ipv6": "fd00::5"}}
    });
    let hub = up(spoke.clone());
    assert_eq!(hub["status"]["initialization"], json!({"provisioned": true}));
    assert_eq!(hub["status"]["conditions"][0]["reason"], "APIConversionReason");
    assert_eq!(hub["status"]["conditions"][0]["message"], "API Conversion");
    assert_eq!(hub["status"]["conditions"][1]["reason"], "Cloning");
    assert_eq!(
        hub["status"]["ipAddresses"],
        json!([{"net": "net0", "ipv4": ["10.0.0.5"], "ipv6": ["fd00::5"]}])
    );
    assert!(hub["status"].get("failureReason").is_none());
    // Severity and failureReason only exist in v1alpha1; they come back from the annotation.
    assert_eq!(down(hub), spoke);
}

#[test]
fn hub_only_fields_survive_an_edited_spoke() {
    let hub = json!({
        "apiVersion": V2, "kind": "ProxmoxCluster", "metadata": {"name": "c"},
        "spec": {
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {"addresses": ["10.0.0.10-10.0.0.20"], "prefix": 24, "gateway": "10.0.0.1"},
            "controlPlaneEndpoint": {"host": "10.0.0.5", "port": 6443},
            "zoneConfig": [{"zone": "z1", "dnsServers": ["10.1.0.1"], "nodes": ["pve1", "pve2"]}]
        }
    });
    let mut spoke = down(hub.clone());
    assert_eq!(
        spoke["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.0.0.5", "port": 6443})
    );
    assert!(spoke["spec"].get("zoneConfig").is_none());
    // A v1alpha1 client edits a field; zoneConfig is still restored on the way up.
    spoke["spec"]["dnsServers"] = json!(["10.0.0.2"]);
    let back = up(spoke);
    assert_eq!(back["spec"]["dnsServers"], json!(["10.0.0.2"]));
    assert_eq!(back["spec"]["zoneConfig"], hub["spec"]["zoneConfig"]);
    assert_eq!(conversion_data(&back), None);
}

#[test]
fn clone_spec_is_dropped_but_kept_for_the_way_back() {
    let spoke = json!({
        "apiVersion": V1, "kind": "ProxmoxCluster", "metadata": {"name": "c"},
        "spec": {
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {"addresses": ["10.0.0.10/28"], "prefix": 24, "gateway": "10.0.0.1", "metric": 100},
            "cloneSpec": {"machineSpec": {"controlPlane": {"sourceNode": "pve1", "templateID": 100}},
                          "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}
        },
        "status": {"ready": false, "inClusterIpPoolRef": [{"name": "c-v4-icip"}]}
    });
    let hub = up(spoke.clone());
    assert!(hub["spec"].get("cloneSpec").is_none());
    assert_eq!(
        hub["status"]["inClusterIPPoolRef"],
        json!([{"name": "c-v4-icip"}])
    );
    assert_eq!(hub["status"]["initialization"], json!({"provisioned": false}));
    assert_eq!(down(hub), spoke);
}

#[test]
fn typed_api_agrees_with_value_api() {
    let hub: v1alpha2::ProxmoxMachineTemplate = serde_json::from_value(json!({
        "apiVersion": V2, "kind": "ProxmoxMachineTemplate", "metadata": {"name": "t"},
        "spec": {"template": {"spec": {
            "templateSelector": {"matchTags": ["ubuntu"]},
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true}]}
        }}}
    }))
    .expect("hub");
    let spoke = v1alpha1::ProxmoxMachineTemplate::from_hub(&hub).expect("down");
    assert!(spoke.spec.template.spec.network.is_none());
    assert_eq!(spoke.to_hub().expect("up"), hub);
}

#[test]
fn same_version_is_returned_unchanged_and_errors_are_typed() {
    let obj = machine_v2(json!({"unknownField": 1}));
    assert_eq!(convert_value(obj.clone(), V2).expect("no-op"), obj);
    assert!(matches!(
        convert_value(json!({"apiVersion": V1, "kind": "Other"}), V2),
        Err(ConversionError::UnsupportedKind(k)) if k == "Other"
    ));
    assert!(matches!(
        convert_value(machine_v1(json!({})), "infrastructure.cluster.x-k8s.io/v1beta1"),
        Err(ConversionError::UnsupportedVersion(_))
    ));
    assert!(matches!(
        convert_value(json!({"kind": "ProxmoxMachine"}), V2),
        Err(ConversionError::MissingField { .. })
    ));
    let mut bad = machine_v1(json!({}));
    bad["metadata"]["annotations"] = json!({CONVERSION_DATA_ANNOTATION: "{not json"});
    assert!(matches!(
        convert_value(bad, V2),
        Err(ConversionError::Decode { .. })
    ));
}

/// CAPI v1.10 reads a v1alpha2 ProxmoxMachineTemplate through v1alpha1 and creates each machine
/// from `spec.template` through v1alpha1, copying `spec.template.metadata.annotations` (not the
/// template's own). The machine data rides along there, so the created machine keeps what
/// v1alpha1 cannot express (found by the end-to-end test with CAPI v1.10.2: NIC `queues` and a
/// second pool were lost on every MachineDeployment machine).
#[test]
fn machines_cloned_from_a_v1alpha1_read_template_keep_hub_only_fields() {
    let hub_spec = json!({
        "sourceNode": "pve1", "templateID": 100,
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "queues": 4, "defaultIPv4": true,
                     "ipPoolRef": [pool("a-inet"), pool("b-inet")]}],
                    "zone": "zone-b"},
        "cloudInitStorage": "shared",
    });
    let template = json!({"apiVersion": V2, "kind": "ProxmoxMachineTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"template": {"metadata": {"labels": {"a": "b"}}, "spec": hub_spec}}});
    let read = down(template.clone());
    let annotations = &read["spec"]["template"]["metadata"]["annotations"];
    assert_eq!(read["spec"]["template"]["metadata"]["labels"], json!({"a": "b"}));
    let data: Value =
        serde_json::from_str(annotations[CONVERSION_DATA_ANNOTATION].as_str().expect("data")).expect("JSON");
    assert_eq!(
        data,
        json!({"apiVersion": V2, "kind": "ProxmoxMachine", "spec": hub_spec})
    );

    // CAPI's clone: spec.template.spec, annotations from spec.template.metadata plus its own.
    let mut clone_annotations = annotations.clone();
    clone_annotations["cluster.x-k8s.io/cloned-from-name"] = json!("t");
    let clone = json!({"apiVersion": V1, "kind": "ProxmoxMachine",
        "metadata": {"name": "t-abc", "namespace": "default", "annotations": clone_annotations},
        "spec": read["spec"]["template"]["spec"]});
    let created = up(clone);
    assert_eq!(created["spec"], hub_spec);
    assert_eq!(
        created["metadata"]["annotations"],
        json!({"cluster.x-k8s.io/cloned-from-name": "t"})
    );

    // Written back through v1alpha1 (e.g. an ownerReference patch), the template is unchanged.
    assert_eq!(up(read), template);
    // A spec v1alpha1 expresses needs no machine data.
    let plain = json!({"apiVersion": V2, "kind": "ProxmoxMachineTemplate",
        "metadata": {"name": "t", "namespace": "default"},
        "spec": {"template": {"spec": {"sourceNode": "pve1", "templateID": 100,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr1", "model": "virtio", "defaultIPv4": true, "defaultIPv6": true}]}}}}});
    assert_eq!(down(plain.clone())["spec"]["template"].get("metadata"), None);
    assert_eq!(up(down(plain.clone())), plain);
}

/// The template's autoscaling status (capacity, nodeInfo) is the same in both versions: it
/// converts as it is, without a conversion-data annotation, both ways.
#[test]
fn machine_template_status_converts_unchanged() {
    let status = json!({
        "capacity": {"cpu": "8", "memory": "16Gi"},
        "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}
    });
    let hub = json!({
        "apiVersion": V2, "kind": "ProxmoxMachineTemplate", "metadata": {"name": "t"},
        "spec": {"template": {"spec": {"sourceNode": "pve1", "templateID": 100, "numCores": 4,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true, "defaultIPv6": true}]}}}},
        "status": status
    });
    let spoke = down(hub.clone());
    assert_eq!(spoke["status"], status);
    assert_eq!(conversion_data(&spoke), None);
    assert_eq!(up(spoke.clone()), hub);
    // An edit of the status through v1alpha1 reaches the hub.
    let mut edited = spoke;
    edited["status"]["capacity"]["cpu"] = json!("2");
    assert_eq!(up(edited)["status"]["capacity"]["cpu"], json!("2"));
}
