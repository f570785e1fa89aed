//! Bad input through the API, with the controllers running: a corpus of invalid ProxmoxCluster,
//! ProxmoxMachine and template objects that the CRD schemas and CEL rules refuse (the webhook
//! rules have their own corpus in `tests/webhooks_admission.rs`; the webhooks are registered here
//! too, so each object meets every layer as in a cluster). Every object is refused with the
//! API server's 422 carrying capmox's message and field; none is stored, not even partly (a
//! refused update leaves the object as it was); the controllers keep running and still provision
//! a valid machine afterwards. Runs on the in-tree and the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;
mod webhook_support;

use kube::api::{Patch, PatchParams};
use machine_support::{CLOUD_CONFIG, Harness, NS, merge};
use serde_json::{Value, json};

const V2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";
const V1: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";

fn machine(name: &str, extra: Value) -> Value {
    let mut o = json!({
        "apiVersion": V2, "kind": "ProxmoxMachine", "metadata": {"name": name},
        "spec": {
            "sourceNode": "pve1", "templateID": 100,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio"}]},
        },
    });
    merge(&mut o, json!({"spec": extra}));
    o
}

fn nic(extra: Value) -> Value {
    let mut d = json!({"name": "net0", "bridge": "vmbr0", "model": "virtio"});
    merge(&mut d, extra);
    json!({"network": {"networkDevices": [d]}})
}

fn cluster(name: &str, extra: Value) -> Value {
    let mut o = json!({
        "apiVersion": V2, "kind": "ProxmoxCluster", "metadata": {"name": name},
        "spec": {
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"},
            "controlPlaneEndpoint": {"host": "10.10.10.5", "port": 6443},
        },
    });
    merge(&mut o, json!({"spec": extra}));
    o
}

fn template(kind: &str, name: &str, inner: Value) -> Value {
    json!({"apiVersion": V2, "kind": kind, "metadata": {"name": name},
           "spec": {"template": {"spec": inner["spec"].clone()}}})
}

/// One refused object and the API server's message after `<Kind>.<group> "<name>" is invalid: `
/// (kube-apiserver v1.32's text; the in-tree server gives the same).
struct Case {
    what: &'static str,
    kind: &'static str,
    version: &'static str,
    object: Value,
    message: &'static str,
}

fn case(what: &'static str, object: Value, message: &'static str) -> Case {
    let kind = match object["kind"].as_str().unwrap() {
        "ProxmoxMachine" => "ProxmoxMachine",
        "ProxmoxCluster" => "ProxmoxCluster",
        "ProxmoxMachineTemplate" => "ProxmoxMachineTemplate",
        _ => "ProxmoxClusterTemplate",
    };
    let version = if object["apiVersion"] == V1 {
        "v1alpha1"
    } else {
        "v1alpha2"
    };
    Case {
        what,
        kind,
        version,
        object,
        message,
    }
}

fn corpus() -> Vec<Case> {
    let pool = |extra: Value| {
        let mut p = json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"});
        merge(&mut p, extra);
        nic(json!({"ipPoolRef": [p]}))
    };
    let mut no_template = machine("m-notemplate", json!({}));
    no_template["spec"].as_object_mut().unwrap().remove("sourceNode");
    no_template["spec"].as_object_mut().unwrap().remove("templateID");
    let mut no_network = machine("m-nonet", json!({}));
    no_network["spec"].as_object_mut().unwrap().remove("network");
    let mut no_dns = cluster("c-nodns", json!({}));
    no_dns["spec"].as_object_mut().unwrap().remove("dnsServers");
    vec![
        case(
            "machine without a template source",
            no_template,
            r#"[spec: Invalid value: "object": must define either a SourceNode with a TemplateID or a TemplateSelector, spec: Invalid value: "object": Must specify either templateID or templateSelector]"#,
        ),
        case(
            "machine with both a template ID and a selector",
            machine("m-both", json!({"templateSelector": {"matchTags": ["k8s"]}})),
            r#"spec: Invalid value: "object": must define either a SourceNode with a TemplateID or a TemplateSelector"#,
        ),
        case(
            "machine with a format on a linked clone",
            machine("m-format", json!({"full": false, "format": "qcow2"})),
            r#"spec: Invalid value: "object": Must set full=true when specifying format"#,
        ),
        case(
            "machine with a storage on a linked clone",
            machine("m-storage", json!({"full": false, "storage": "local-lvm"})),
            r#"spec: Invalid value: "object": Must set full=true when specifying storage"#,
        ),
        case(
            "machine without network",
            no_network,
            r#"[spec.network: Required value, <nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#,
        ),
        case(
            "machine NIC mtu out of range",
            machine("m-mtu", nic(json!({"mtu": 100}))),
            r#"spec.network.networkDevices[0].mtu: Invalid value: "integer": invalid MTU value"#,
        ),
        case(
            "machine NIC link mtu out of range",
            machine("m-linkmtu", nic(json!({"linkMtu": 70000}))),
            r#"spec.network.networkDevices[0].linkMtu: Invalid value: "integer": invalid MTU value"#,
        ),
        case(
            "machine NIC model unknown",
            machine("m-model", nic(json!({"model": "ne2k_pci"}))),
            r#"[spec.network.networkDevices[0].model: Unsupported value: "ne2k_pci": supported values: "e1000", "virtio", "rtl8139", "vmxnet3", <nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#,
        ),
        case(
            "machine NIC name not netN",
            machine("m-ifname", nic(json!({"name": "eth0"}))),
            r#"spec.network.networkDevices[0].name: Invalid value: "eth0": spec.network.networkDevices[0].name in body should match '^net[0-9]+$'"#,
        ),
        case(
            "machine NIC VLAN out of range",
            machine("m-vlan", nic(json!({"vlan": 5000}))),
            r#"spec.network.networkDevices[0].vlan: Invalid value: 5000: spec.network.networkDevices[0].vlan in body should be less than or equal to 4094"#,
        ),
        case(
            "machine IP pool of another API group",
            machine("m-poolgroup", pool(json!({"apiGroup": "example.com"}))),
            r#"spec.network.networkDevices[0].ipPoolRef[0]: Invalid value: "object": ipPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"#,
        ),
        case(
            "machine IP pool of another kind",
            machine("m-poolkind", pool(json!({"kind": "ConfigMap"}))),
            r#"spec.network.networkDevices[0].ipPoolRef[0]: Invalid value: "object": ipPoolRef allows either InClusterIPPool or GlobalInClusterIPPool"#,
        ),
        case(
            "machine FIB rule with a kernel priority",
            machine(
                "m-prio",
                nic(json!({"routingPolicy": [{"to": "10.50.0.0/16", "table": 100, "priority": 32765}]})),
            ),
            r#"spec.network.networkDevices[0].routingPolicy[0].priority: Invalid value: "integer": Cowardly refusing to insert FIB rule matching kernel rules"#,
        ),
        case(
            "machine VRF in a kernel table",
            machine(
                "m-vrf",
                json!({"network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}], "vrfs": [{"name": "vrf-blue", "table": 254}]}}),
            ),
            r#"spec.network.vrfs[0].table: Invalid value: "integer": Cowardly refusing to insert l3mdev rules into kernel tables"#,
        ),
        case(
            "machine VMID range ending before it starts",
            machine("m-range", json!({"vmIDRange": {"start": 2000, "end": 1000}})),
            r#"spec.vmIDRange: Invalid value: "object": end should be greater than or equal to start"#,
        ),
        case(
            "machine VMID range below 100",
            machine("m-range100", json!({"vmIDRange": {"start": 50, "end": 1000}})),
            r#"spec.vmIDRange.start: Invalid value: 50: spec.vmIDRange.start in body should be greater than or equal to 100"#,
        ),
        case(
            "machine boot volume below 5 GB",
            machine(
                "m-disk",
                json!({"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 2}}}),
            ),
            r#"spec.disks.bootVolume.sizeGb: Invalid value: 2: spec.disks.bootVolume.sizeGb in body should be greater than or equal to 5"#,
        ),
        case(
            "machine tag Proxmox would refuse",
            machine("m-tag", json!({"tags": ["bad tag!"]})),
            r#"spec.tags[0]: Invalid value: "bad tag!": spec.tags[0] in body should match '^(?i)[a-z0-9_][a-z0-9_\-\+\.]*$'"#,
        ),
        case(
            "machine providerID of another provider",
            machine(
                "m-pid",
                json!({"providerID": "proxmox:/x6c3fa683-bef9-4425-b413-eaa45a9d6191"}),
            ),
            r#"spec.providerID: Invalid value: "proxmox:/x6c3fa683-bef9-4425-b413-eaa45a9d6191": spec.providerID in body should match '^proxmox://[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$'"#,
        ),
        case(
            "machine without cores",
            machine("m-cores", json!({"numCores": 0})),
            r#"spec.numCores: Invalid value: 0: spec.numCores in body should be greater than or equal to 1"#,
        ),
        case(
            "machine network-config format unknown",
            machine("m-ncf", json!({"networkConfigFormat": "v3"})),
            r#"[spec.networkConfigFormat: Unsupported value: "v3": supported values: "capmox", "v2", <nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#,
        ),
        case(
            "machine template selector policy unknown",
            {
                let mut m = machine(
                    "m-policy",
                    json!({"templateSelector": {"matchTags": ["k8s"], "matchPolicy": "fuzzy"}}),
                );
                m["spec"].as_object_mut().unwrap().remove("sourceNode");
                m["spec"].as_object_mut().unwrap().remove("templateID");
                m
            },
            r#"[spec.templateSelector.matchPolicy: Unsupported value: "fuzzy": supported values: "exact", "uniqueSubset", "bestSubset", <nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#,
        ),
        case(
            "machine network zone with a space",
            machine(
                "m-zone",
                json!({"network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}], "zone": "zone a"}}),
            ),
            r#"spec.network.zone: Invalid value: "zone a": spec.network.zone in body should match '^[a-z0-9A-Z](?:[a-z0-9A-Z-_.]{0,61}[a-z0-9A-Z])?$'"#,
        ),
        case(
            "cluster without IP config and endpoint",
            cluster(
                "c-noip",
                json!({"ipv4Config": null, "controlPlaneEndpoint": null}),
            ),
            r#"spec: Invalid value: "object": at least one ip config must be set, either ipv4Config or ipv6Config (a cluster whose machines all use DHCP needs no IP pool, but a static controlPlaneEndpoint)"#,
        ),
        case(
            "cluster endpoint port 0",
            cluster("c-port", json!({"controlPlaneEndpoint": {"port": 0}})),
            r#"[spec.controlPlaneEndpoint.port: Invalid value: 0: spec.controlPlaneEndpoint.port in body should be greater than or equal to 1, spec.controlPlaneEndpoint: Invalid value: "object": port must be within 1-65535]"#,
        ),
        case(
            "cluster pool without addresses",
            cluster("c-noaddr", json!({"ipv4Config": {"addresses": []}})),
            r#"spec.ipv4Config: Invalid value: "object": IPv4Config addresses must be provided"#,
        ),
        case(
            "cluster prefix over 128",
            cluster("c-prefix", json!({"ipv4Config": {"prefix": 200}})),
            r#"spec.ipv4Config.prefix: Invalid value: 200: spec.ipv4Config.prefix in body should be less than or equal to 128"#,
        ),
        case(
            "cluster without DNS servers",
            no_dns,
            r#"[spec.dnsServers: Required value, <nil>: Invalid value: "null": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation]"#,
        ),
        case(
            "cluster zone name with a space",
            cluster(
                "c-zone",
                json!({"zoneConfig": [{"zone": "zone a", "dnsServers": ["10.0.0.1"]}]}),
            ),
            r#"spec.zoneConfig[0].zone: Invalid value: "zone a": spec.zoneConfig[0].zone in body should match '^[a-z0-9A-Z](?:[a-z0-9A-Z-_.]{0,61}[a-z0-9A-Z])?$'"#,
        ),
        case(
            "cluster negative memory adjustment",
            cluster("c-mem", json!({"schedulerHints": {"memoryAdjustment": -1}})),
            r#"spec.schedulerHints.memoryAdjustment: Invalid value: -1: spec.schedulerHints.memoryAdjustment in body should be greater than or equal to 0"#,
        ),
        case(
            "machine template NIC mtu out of range",
            template(
                "ProxmoxMachineTemplate",
                "mt-mtu",
                machine("x", nic(json!({"mtu": 100}))),
            ),
            r#"spec.template.spec.network.networkDevices[0].mtu: Invalid value: "integer": invalid MTU value"#,
        ),
        case(
            "cluster template prefix 0",
            template(
                "ProxmoxClusterTemplate",
                "ct-prefix",
                cluster("x", json!({"ipv4Config": {"prefix": 0}})),
            ),
            r#"spec.template.spec.ipv4Config.prefix: Invalid value: 0: spec.template.spec.ipv4Config.prefix in body should be greater than or equal to 1"#,
        ),
        case(
            "v1alpha1 machine NIC mtu out of range",
            json!({
                "apiVersion": V1, "kind": "ProxmoxMachine", "metadata": {"name": "m-v1mtu"},
                "spec": {"sourceNode": "pve1", "templateID": 100,
                         "network": {"default": {"bridge": "vmbr0", "mtu": 100}}},
            }),
            r#"spec.network.default.mtu: Invalid value: "integer": invalid MTU value"#,
        ),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_objects_are_refused_whole_and_the_controllers_keep_running() {
    let h = Harness::start().await;
    let _hooks = webhook_support::setup(&h.env).await;
    let c = h.client.clone();
    for case in corpus() {
        let name = case.object["metadata"]["name"].as_str().unwrap().to_owned();
        let (code, _, body) =
            webhook_support::create_raw(&c, NS, case.kind, case.version, &case.object, "").await;
        assert_eq!(code, 422, "{}: {body}", case.what);
        assert_eq!(body["reason"], "Invalid", "{}: {body}", case.what);
        let message = body["message"].as_str().unwrap();
        assert_eq!(
            message,
            format!(
                "{}.{} \"{name}\" is invalid: {}",
                case.kind,
                webhook_support::GROUP,
                case.message
            ),
            "{}",
            case.what
        );
        // Every cause names its field; the first one is the message's first field.
        let causes = body["details"]["causes"].as_array().unwrap();
        let first = case.message.trim_start_matches('[').split(": ").next().unwrap();
        assert!(
            causes.iter().any(|c| c["field"] == first),
            "{}: no cause for {first} in {body}",
            case.what
        );
        // Nothing was stored, in neither version.
        for version in ["v1alpha1", "v1alpha2"] {
            let api = webhook_support::api(&c, NS, case.kind, version);
            assert!(
                api.get_opt(&name).await.unwrap().is_none(),
                "{}: stored although refused",
                case.what
            );
        }
        assert!(h.controllers_alive(), "{}: a controller died", case.what);
    }

    // A refused update leaves the object untouched: the boot volume is immutable.
    let pms = webhook_support::api(&c, NS, "ProxmoxMachine", "v1alpha2");
    let valid = machine(
        "m-immutable",
        json!({"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}}}),
    );
    let created = pms
        .create(&Default::default(), &webhook_support::obj(valid))
        .await
        .unwrap();
    let patch = json!({"spec": {"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 40}}}});
    let err = webhook_support::api_err(
        pms.patch("m-immutable", &PatchParams::default(), &Patch::Merge(&patch))
            .await,
    );
    assert_eq!(err.code, 422);
    assert!(
        err.message
            .contains("spec.disks.bootVolume: Invalid value: \"object\": Value is immutable"),
        "{}",
        err.message
    );
    let after = pms.get("m-immutable").await.unwrap();
    assert_eq!(after.data["spec"]["disks"], created.data["spec"]["disks"]);
    pms.delete("m-immutable", &Default::default()).await.unwrap();

    // The controllers still work: a valid machine provisions.
    assert!(h.controllers_alive());
    h.create_cluster("ok", json!({})).await;
    h.create_machine(
        "ok",
        "ok-0",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({}),
    )
    .await;
    h.wait_provisioned("ok-0", 90).await;
    assert!(h.controllers_alive());
    h.stop().await;
}
