//! capmox's admission webhooks through the API server (conversion and admission registered by
//! URL with the in-process webhook server): defaulting of `defaultIPv4`/`defaultIPv6`, and a
//! bad-input corpus with one case per webhook rule, each asserting capmox's message, field path,
//! code and reason in the API server's denial shape; `matchPolicy` Equivalent (v1alpha1 requests
//! are validated) and Exact (v1alpha1 ProxmoxClusterTemplates are not); warnings; the topology
//! dry-run exception of the template immutability. Runs on the in-tree and the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod webhook_support;

use kube::api::{Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use webhook_support::*;

const V2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";
const V1: &str = "infrastructure.cluster.x-k8s.io/v1alpha1";

fn cluster(name: &str, extra: Value) -> Value {
    let mut o = json!({
        "apiVersion": V2, "kind": "ProxmoxCluster", "metadata": {"name": name},
        "spec": {
            "dnsServers": ["8.8.8.8"],
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"},
            "controlPlaneEndpoint": {"host": "10.10.10.5", "port": 6443},
        },
    });
    merge(&mut o, json!({"spec": extra}));
    o
}

fn cluster_template(name: &str, extra: Value) -> Value {
    let mut spec = cluster(name, extra)["spec"].take();
    if spec.is_null() {
        spec = json!({});
    }
    json!({"apiVersion": V2, "kind": "ProxmoxClusterTemplate", "metadata": {"name": name},
           "spec": {"template": {"spec": spec}}})
}

fn machine(name: &str, network: Value, extra: Value) -> Value {
    let mut o = json!({
        "apiVersion": V2, "kind": "ProxmoxMachine", "metadata": {"name": name},
        "spec": {"sourceNode": "pve1", "templateID": 100, "network": network},
    });
    merge(&mut o, json!({"spec": extra}));
    o
}

fn nics(devices: Value) -> Value {
    json!({"networkDevices": devices})
}

fn machine_template(name: &str, extra: Value) -> Value {
    let mut spec = machine(name, nics(json!([{"name": "net0", "bridge": "vmbr0"}])), extra)["spec"].take();
    if spec.is_null() {
        spec = json!({});
    }
    json!({"apiVersion": V2, "kind": "ProxmoxMachineTemplate", "metadata": {"name": name},
           "spec": {"template": {"spec": spec}}})
}

/// What a denial must look like.
struct Want<'a> {
    webhook: &'a str,
    code: u16,
    reason: &'a str,
    /// The webhook's message after `denied the request: `.
    message: &'a str,
    /// Field of the first cause, when the webhook gives causes.
    field: Option<&'a str>,
}

fn check(case: &str, body: &Value, want: &Want<'_>) {
    assert_eq!(body["code"], want.code, "{case}: {body}");
    assert_eq!(
        body["reason"].as_str().unwrap_or_default(),
        want.reason,
        "{case}: {body}"
    );
    assert_eq!(
        body["message"].as_str().unwrap_or_default(),
        format!(
            "admission webhook \"{}\" denied the request: {}",
            want.webhook, want.message
        ),
        "{case}"
    );
    match want.field {
        Some(f) => {
            assert_eq!(body["details"]["causes"][0]["field"], f, "{case}: {body}");
            assert_eq!(body["details"]["group"], GROUP, "{case}");
        }
        None => assert!(body["details"]["causes"].is_null(), "{case}: {body}"),
    }
}

const VC: &str = "validation.proxmoxcluster.infrastructure.cluster.x-k8s.io";
const VCT: &str = "validation.proxmoxclustertemplate.infrastructure.cluster.x-k8s.io";
const VM: &str = "validation.proxmoxmachine.infrastructure.cluster.x-k8s.io";
const VMT: &str = "validation.proxmoxmachinetemplate.infrastructure.cluster.x-k8s.io";

fn invalid<'a>(webhook: &'a str, message: &'a str, field: &'a str) -> Want<'a> {
    Want {
        webhook,
        code: 422,
        reason: "Invalid",
        message,
        field: Some(field),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn create_corpus_one_case_per_rule() {
    let env = testenv::TestEnv::start().await.unwrap();
    let c = env.client();
    let _hooks = setup(&env).await;
    let ns = namespace(&c, "corpus").await;

    let ep = |host: &str| json!({"controlPlaneEndpoint": {"host": host, "port": 6443}});
    let v6 = json!({"ipv6Config": {"addresses": ["2001:db8::10-2001:db8::50"], "prefix": 64, "gateway": "2001:db8::1"}});
    let mut v6_endpoint = v6.clone();
    merge(&mut v6_endpoint, ep("2001:db8::20"));
    let dev = |extra: Value| {
        let mut d = json!({"name": "net0", "bridge": "vmbr0"});
        merge(&mut d, extra);
        d
    };
    let vrf = |extra: Value| {
        let mut v = json!({"name": "vrf-blue", "table": 500, "interfaces": ["net1"]});
        merge(&mut v, extra);
        nics(json!([{"name": "net0", "bridge": "vmbr0"}, {"name": "net1", "bridge": "vmbr1"}]))
            .as_object()
            .cloned()
            .map(|mut m| {
                m.insert("vrfs".into(), json!([v]));
                Value::Object(m)
            })
            .unwrap()
    };
    let cases: Vec<(&str, &str, Value, Want<'_>)> = vec![
        (
            "cluster endpoint is neither IP nor FQDN",
            "ProxmoxCluster",
            cluster("c-fqdn", ep("_this.is.a.txt.record")),
            invalid(
                VC,
                "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c-fqdn\" is invalid: spec.controlplaneEndpoint: Invalid value: \"_this.is.a.txt.record\": provided endpoint address is not a valid IP or FQDN",
                "spec.controlplaneEndpoint",
            ),
        ),
        (
            "cluster endpoint inside the IPv4 pool",
            "ProxmoxCluster",
            cluster("c-in4", ep("10.10.10.20")),
            invalid(
                VC,
                "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c-in4\" is invalid: spec.IPv4Config.addresses: Invalid value: [\"10.10.10.10-10.10.10.50\"]: addresses may not contain the endpoint IP",
                "spec.IPv4Config.addresses",
            ),
        ),
        (
            "cluster endpoint inside the IPv6 pool",
            "ProxmoxCluster",
            cluster("c-in6", v6_endpoint),
            invalid(
                VC,
                "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c-in6\" is invalid: spec.IPv6Config.addresses: Invalid value: [\"2001:db8::10-2001:db8::50\"]: addresses may not contain the endpoint IP",
                "spec.IPv6Config.addresses",
            ),
        ),
        (
            "cluster pool that does not parse",
            "ProxmoxCluster",
            cluster(
                "c-badpool",
                json!({"ipv4Config": {"addresses": ["10.10.10.50-10.10.10.10"]}}),
            ),
            invalid(
                VC,
                "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c-badpool\" is invalid: spec.IPv4Config.addresses: Invalid value: [\"10.10.10.50-10.10.10.10\"]: provided addresses are not valid IP addresses, ranges or CIDRs",
                "spec.IPv4Config.addresses",
            ),
        ),
        (
            "cluster failureDomainsFromZones without zones",
            "ProxmoxCluster",
            cluster("c-fd", json!({"failureDomainsFromZones": true})),
            invalid(
                VC,
                "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c-fd\" is invalid: spec.failureDomainsFromZones: Invalid value: true: requires at least one zoneConfig entry to publish as failure domains",
                "spec.failureDomainsFromZones",
            ),
        ),
        (
            "cluster template without IP pool config",
            "ProxmoxClusterTemplate",
            cluster_template(
                "ct-nopool",
                json!({"ipv4Config": null, "controlPlaneEndpoint": null}),
            ),
            Want {
                webhook: VCT,
                code: 403,
                reason: "Forbidden",
                message: "proxmox cluster must define at least one IP pool config (a cluster whose machines all use DHCP needs no IP pool, but a static controlPlaneEndpoint)",
                field: None,
            },
        ),
        (
            "cluster template endpoint (capmox reports the cluster's path)",
            "ProxmoxClusterTemplate",
            cluster_template("ct-fqdn", ep("bad_host")),
            invalid(
                VCT,
                "ProxmoxClusterTemplate.infrastructure.cluster.x-k8s.io \"ct-fqdn\" is invalid: spec.controlplaneEndpoint: Invalid value: \"bad_host\": provided endpoint address is not a valid IP or FQDN",
                "spec.controlplaneEndpoint",
            ),
        ),
        (
            "machine NIC names with a gap",
            "ProxmoxMachine",
            machine(
                "m-gap",
                nics(json!([dev(json!({})), dev(json!({"name": "net2"}))])),
                json!({}),
            ),
            invalid(
                VM,
                "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"m-gap\" is invalid: spec.network.networkDevices.1.name: Invalid value: \"net2\": Non-consecutive proxmox interface name",
                "spec.network.networkDevices.1.name",
            ),
        ),
        (
            "machine with two default IPv4 NICs",
            "ProxmoxMachine",
            machine(
                "m-2def",
                nics(json!([
                    dev(json!({"defaultIPv4": true})),
                    dev(json!({"name": "net1", "defaultIPv4": true}))
                ])),
                json!({}),
            ),
            Want {
                field: Some("spec.network.networkDevices.1"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine mtu below 1280",
            "ProxmoxMachine",
            machine("m-mtu", nics(json!([dev(json!({"mtu": 1000}))])), json!({})),
            Want {
                field: Some("spec.network.networkDevices.0.mtu"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine linkMtu below 1280",
            "ProxmoxMachine",
            machine(
                "m-linkmtu",
                nics(json!([dev(json!({"linkMtu": 1000}))])),
                json!({}),
            ),
            Want {
                field: Some("spec.network.networkDevices.0.linkMtu"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine routing policy without a table",
            "ProxmoxMachine",
            machine(
                "m-rptable",
                nics(json!([dev(
                    json!({"routingPolicy": [{"to": "10.50.0.0/16", "priority": 100}]})
                )])),
                json!({}),
            ),
            Want {
                field: Some("spec.network.networkDevices.0.routingPolicy"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine routing policy placeholder without is6",
            "ProxmoxMachine",
            machine(
                "m-rp6",
                nics(json!([dev(
                    json!({"routingPolicy": [{"to": "default", "table": 100, "priority": 100}]})
                )])),
                json!({}),
            ),
            Want {
                field: Some("spec.network.networkDevices.0.routingPolicy"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine route placeholder without via or is6",
            "ProxmoxMachine",
            machine(
                "m-route6",
                nics(json!([dev(json!({"routes": [{"to": "default"}]}))])),
                json!({}),
            ),
            Want {
                field: Some("spec.network.networkDevices.0.routes"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine VRF rule in another table",
            "ProxmoxMachine",
            machine(
                "m-vrftable",
                vrf(json!({"routingPolicy": [{"table": 501, "to": "10.60.0.0/16", "priority": 100}]})),
                json!({}),
            ),
            Want {
                field: Some("spec.network.VirtualNetworkDevices.VRFs.0.Table"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine VRF rule placeholder without is6",
            "ProxmoxMachine",
            machine(
                "m-vrf6",
                vrf(json!({"routingPolicy": [{"table": 500, "from": "all", "priority": 100}]})),
                json!({}),
            ),
            Want {
                field: Some("spec.network.VirtualNetworkDevices.VRFs.0.Table"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine VRF route placeholder without is6",
            "ProxmoxMachine",
            machine(
                "m-vrfroute",
                vrf(json!({"routes": [{"to": "default"}]})),
                json!({}),
            ),
            Want {
                field: Some("spec.network.VirtualNetworkDevices.VRFs.0.Table"),
                ..invalid(VM, "", "")
            },
        ),
        (
            "machine cloudInitStorage that is no storage ID",
            "ProxmoxMachine",
            machine(
                "m-storage",
                nics(json!([dev(json!({}))])),
                json!({"cloudInitStorage": "local/iso"}),
            ),
            invalid(
                VM,
                "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"m-storage\" is invalid: spec.cloudInitStorage: Invalid value: \"local/iso\": must be a Proxmox storage ID: a letter, then letters, digits, '-', '_' or '.', ending in a letter or digit",
                "spec.cloudInitStorage",
            ),
        ),
        (
            "machine template with a providerID",
            "ProxmoxMachineTemplate",
            machine_template(
                "mt-pid",
                json!({"providerID": "proxmox://6c3fa683-bef9-4425-b413-eaa45a9d6191"}),
            ),
            invalid(
                VMT,
                "ProxmoxMachineTemplate.infrastructure.cluster.x-k8s.io \"mt-pid\" is invalid: spec.template.spec.providerID: Forbidden: cannot be set in templates",
                "spec.template.spec.providerID",
            ),
        ),
        (
            "machine template cloudInitStorage that is no storage ID",
            "ProxmoxMachineTemplate",
            machine_template("mt-storage", json!({"cloudInitStorage": "-x"})),
            invalid(
                VMT,
                "ProxmoxMachineTemplate.infrastructure.cluster.x-k8s.io \"mt-storage\" is invalid: spec.template.spec.cloudInitStorage: Invalid value: \"-x\": must be a Proxmox storage ID: a letter, then letters, digits, '-', '_' or '.', ending in a letter or digit",
                "spec.template.spec.cloudInitStorage",
            ),
        ),
    ];
    // Details that depend on how a NIC prints: checked on the cause, not the whole message.
    let detail = |case: &str| -> Option<&str> {
        Some(match case {
            "machine with two default IPv4 NICs" => {
                "More than one default IPv4/IPv6 interface in NetworkDevices"
            }
            "machine mtu below 1280" => "mtu must be at least 1280 or 1, but was 1000",
            "machine linkMtu below 1280" => "mtu must be at least 1280, but was 1000",
            "machine routing policy without a table" => "routing policy [0] requires a table",
            "machine routing policy placeholder without is6" => {
                "routing policy [0]: is6 must be set when 'to'/'from' is a placeholder and neither provides an address family"
            }
            "machine route placeholder without via or is6" => {
                "route [0]: is6 must be set when 'to' is a placeholder and 'via' is unset"
            }
            "machine VRF rule in another table" => {
                "VRF vrf-blue: device/rule routing table mismatch 500 != 501"
            }
            "machine VRF rule placeholder without is6" => {
                "VRF vrf-blue: is6 must be set when 'to'/'from' is a placeholder and neither provides an address family"
            }
            "machine VRF route placeholder without is6" => {
                "VRF vrf-blue: route [0]: is6 must be set when 'to' is a placeholder and 'via' is unset"
            }
            _ => return None,
        })
    };
    for (case, kind, object, want) in &cases {
        let (code, warnings, body) = create_raw(&c, &ns, kind, "v1alpha2", object, "").await;
        assert_ne!(code, 201, "{case}: was admitted: {body}");
        match detail(case) {
            Some(d) => {
                assert_eq!(body["code"], want.code, "{case}: {body}");
                assert_eq!(body["reason"], want.reason, "{case}: {body}");
                let cause = &body["details"]["causes"][0];
                assert_eq!(cause["field"].as_str(), want.field, "{case}: {body}");
                assert_eq!(cause["reason"], "FieldValueInvalid", "{case}");
                let msg = cause["message"].as_str().unwrap();
                assert!(
                    msg.starts_with("Invalid value: {") && msg.ends_with(&format!("}}: {d}")),
                    "{case}: {msg}"
                );
                let name = object["metadata"]["name"].as_str().unwrap();
                let head = format!(
                    "admission webhook \"{}\" denied the request: {kind}.{GROUP} \"{name}\" is invalid: {}: Invalid value: ",
                    want.webhook,
                    want.field.unwrap()
                );
                assert!(
                    body["message"].as_str().unwrap().starts_with(&head),
                    "{case}: {body}"
                );
            }
            None => check(case, &body, want),
        }
        if *kind == "ProxmoxMachine" && !case.contains("cloudInitStorage") {
            let name = object["metadata"]["name"].as_str().unwrap();
            assert!(
                warnings.contains(&format!("299 - \"cannot create proxmox machine {name}\"")),
                "{case}: {warnings:?}"
            );
        }
    }

    // Through v1alpha1 (matchPolicy Equivalent): converted, then validated.
    // (A ProxmoxCluster without IP pool config and endpoint never reaches the webhook: the CRD's
    // CEL rule rejects it first, in both versions; the template has no such rule.)
    let old_cluster = json!({"apiVersion": V1, "kind": "ProxmoxCluster", "metadata": {"name": "c-v1-in4"},
        "spec": {"dnsServers": ["8.8.8.8"], "controlPlaneEndpoint": {"host": "10.10.10.20", "port": 6443},
                 "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"}}});
    let (_, warnings, body) = create_raw(&c, &ns, "ProxmoxCluster", "v1alpha1", &old_cluster, "").await;
    check(
        "v1alpha1 cluster with the endpoint in the pool",
        &body,
        &invalid(
            VC,
            "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c-v1-in4\" is invalid: spec.IPv4Config.addresses: Invalid value: [\"10.10.10.10-10.10.10.50\"]: addresses may not contain the endpoint IP",
            "spec.IPv4Config.addresses",
        ),
    );
    assert!(
        warnings.contains(&"299 - \"cannot create proxmox cluster c-v1-in4\"".to_owned()),
        "{warnings:?}"
    );
    let old_machine = json!({"apiVersion": V1, "kind": "ProxmoxMachine", "metadata": {"name": "m-v1-gap"},
        "spec": {"sourceNode": "pve1", "templateID": 100, "network": {"default": {"bridge": "vmbr0"},
            "additionalDevices": [{"name": "net2", "bridge": "vmbr0", "ipv4PoolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}}]}}});
    let (_, _, body) = create_raw(&c, &ns, "ProxmoxMachine", "v1alpha1", &old_machine, "").await;
    check(
        "v1alpha1 machine with a gap",
        &body,
        &invalid(
            VM,
            "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"m-v1-gap\" is invalid: spec.network.networkDevices.1.name: Invalid value: \"net2\": Non-consecutive proxmox interface name",
            "spec.network.networkDevices.1.name",
        ),
    );
    // ProxmoxClusterTemplate's webhooks are Exact: a v1alpha1 write is not validated (as in capmox).
    let old_template = json!({"apiVersion": V1, "kind": "ProxmoxClusterTemplate", "metadata": {"name": "ct-v1-nopool"},
        "spec": {"template": {"spec": {"dnsServers": ["8.8.8.8"], "controlPlaneEndpoint": {"host": "bad_host", "port": 6443}}}}});
    let (code, _, body) = create_raw(&c, &ns, "ProxmoxClusterTemplate", "v1alpha1", &old_template, "").await;
    assert_eq!(code, 201, "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn defaulting_updates_and_warnings() {
    let env = testenv::TestEnv::start().await.unwrap();
    let c = env.client();
    let _hooks = setup(&env).await;
    let ns = namespace(&c, "updates").await;

    // Defaulting: net0 gets defaultIPv4/defaultIPv6 when no NIC says anything; an explicit
    // opinion on any NIC is kept.
    let two = nics(json!([{"name": "net0", "bridge": "vmbr0"}, {"name": "net1", "bridge": "vmbr1"}]));
    let (code, warnings, body) = create_raw(
        &c,
        &ns,
        "ProxmoxMachine",
        "v1alpha2",
        &machine("m", two, json!({"tags": ["a"]})),
        "",
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert!(warnings.is_empty(), "{warnings:?}");
    let devices = &body["spec"]["network"]["networkDevices"];
    assert_eq!(devices[0]["defaultIPv4"], true);
    assert_eq!(devices[0]["defaultIPv6"], true);
    assert!(devices[1].get("defaultIPv4").is_none());
    let opinion = nics(
        json!([{"name": "net0", "bridge": "vmbr0", "defaultIPv4": false}, {"name": "net1", "bridge": "vmbr1", "defaultIPv4": true}]),
    );
    let (_, _, body) = create_raw(
        &c,
        &ns,
        "ProxmoxMachine",
        "v1alpha2",
        &machine("m-opinion", opinion, json!({})),
        "",
    )
    .await;
    let devices = &body["spec"]["network"]["networkDevices"];
    assert_eq!(devices[0]["defaultIPv4"], false);
    assert_eq!(devices[0]["defaultIPv6"], true);
    assert_eq!(devices[1]["defaultIPv4"], true);

    // Warnings for our additive fields, on an admitted object.
    let v2 = nics(
        json!([{"name": "net0", "bridge": "vmbr0", "routingPolicy": [{"to": "10.9.0.0/16", "table": 100, "priority": 100}]}]),
    );
    let (code, warnings, _) = create_raw(
        &c,
        &ns,
        "ProxmoxMachine",
        "v1alpha2",
        &machine("m-talos", v2, json!({"networkConfigFormat": "v2"})),
        "",
    )
    .await;
    assert_eq!(code, 201);
    assert_eq!(
        warnings,
        vec![
            "299 - \"spec.networkConfigFormat: v2 is meant for Talos, which ignores routingPolicy and vrfs\""
                .to_owned()
        ]
    );

    // Updates: tags are immutable (400 BadRequest, no causes); the network is validated again.
    let machines = api(&c, &ns, "ProxmoxMachine", "v1alpha2");
    let pp = PatchParams::default();
    let e = api_err(
        machines
            .patch("m", &pp, &Patch::Merge(json!({"spec": {"tags": ["b"]}})))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        e.message,
        format!("admission webhook \"{VM}\" denied the request: tags are immutable")
    );
    let e = api_err(
        machines
            .patch("m", &pp, &Patch::Merge(json!({"spec": {"network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "mtu": 1200}]}}})))
            .await,
    );
    assert_eq!(e.code, 422);
    assert_eq!(
        e.details.unwrap().causes[0].field,
        "spec.network.networkDevices.0.mtu"
    );
    machines
        .patch(
            "m",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();

    // Cluster updates: the endpoint is checked again.
    let clusters = api(&c, &ns, "ProxmoxCluster", "v1alpha2");
    clusters
        .create(&PostParams::default(), &obj(cluster("c", json!({}))))
        .await
        .unwrap();
    let e = api_err(
        clusters
            .patch(
                "c",
                &pp,
                &Patch::Merge(json!({"spec": {"controlPlaneEndpoint": {"host": "10.10.10.30"}}})),
            )
            .await,
    );
    assert_eq!(e.code, 422);
    assert_eq!(e.details.unwrap().causes[0].field, "spec.IPv4Config.addresses");
    clusters
        .patch("c", &pp, &Patch::Merge(json!({"spec": {"externalManagedControlPlane": true, "controlPlaneEndpoint": {"host": "10.10.10.30"}}})))
        .await
        .unwrap();

    // Machine templates are immutable, except for CAPI topology dry runs.
    let templates = api(&c, &ns, "ProxmoxMachineTemplate", "v1alpha2");
    templates
        .create(&PostParams::default(), &obj(machine_template("mt", json!({}))))
        .await
        .unwrap();
    let change = json!({"spec": {"template": {"spec": {"numCores": 8}}}});
    let e = api_err(templates.patch("mt", &pp, &Patch::Merge(change.clone())).await);
    assert_eq!(e.code, 422);
    assert_eq!(
        e.message,
        format!(
            "admission webhook \"{VMT}\" denied the request: ProxmoxMachineTemplate.{GROUP} \"mt\" is invalid: spec: Forbidden: ProxmoxMachineTemplate is immutable"
        )
    );
    let dry = PatchParams {
        dry_run: true,
        ..PatchParams::default()
    };
    let e = api_err(templates.patch("mt", &dry, &Patch::Merge(change.clone())).await);
    assert_eq!(
        e.code, 422,
        "a dry run without the topology annotation is still checked"
    );
    let mut topology = change.clone();
    merge(
        &mut topology,
        json!({"metadata": {"annotations": {"topology.cluster.x-k8s.io/dry-run": ""}}}),
    );
    let answered = templates
        .patch("mt", &dry, &Patch::Merge(topology))
        .await
        .unwrap();
    assert_eq!(answered.data["spec"]["template"]["spec"]["numCores"], 8);
    let stored = templates.get("mt").await.unwrap();
    assert!(stored.data["spec"]["template"]["spec"].get("numCores").is_none());
    templates
        .patch(
            "mt",
            &pp,
            &Patch::Merge(json!({"metadata": {"labels": {"x": "y"}}})),
        )
        .await
        .unwrap();
}
