//! The ProxmoxMachine controller's less travelled paths against pve-sim and the in-tree control
//! plane: Ignition bootstrap data, template selection by tags, scheduling and VMID ranges, the
//! waiting reasons, pausing, IPAM conflicts, cloud-init outcomes, bootstrap ISO storage and
//! network-config format, Proxmox faults retried to success and foreign VMs at a reserved VMID.
//!
//! Where a test needs to look at the bootstrap ISO it stalls the machines in `WaitingForCloudInit`
//! by making the guest agent answer "not running" (the CAPI stand-in sets the Machine's nodeRef as
//! soon as the machine is provisioned, after which the ISO is removed), reads the ISO from the
//! simulator and then lets the agent answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use std::collections::BTreeMap;

use capmox_api::capi::ipam_claims::v1beta2::IPAddressClaim;
use capmox_api::consts::PAUSED_ANNOTATION;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_standins::capi::objects;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use machine_support::*;
use pve_sim::{CloudInitResult, EndpointFault, FaultSpec};
use serde_json::json;

const AGENT_OSINFO: &str = "GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo";
const AGENT_EXEC: &str = "POST /nodes/{node}/qemu/{vmid}/agent/exec";
const AGENT_EXEC_STATUS: &str = "GET /nodes/{node}/qemu/{vmid}/agent/exec-status";
const CLONE: &str = "POST /nodes/{node}/qemu/{vmid}/clone";
const START: &str = "POST /nodes/{node}/qemu/{vmid}/status/start";
const MINIMAL_IGNITION: &str = r#"{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/motd","mode":420,"contents":{"source":"data:,hello"}}]}}"#;

fn fault(endpoint: &str, rate: f64, status: u16, message: &str, latency_ms: u64) -> EndpointFault {
    EndpointFault {
        endpoint: endpoint.to_owned(),
        error_rate: rate,
        status,
        message: message.to_owned(),
        latency_ms,
    }
}

/// The guest agent of every VM answers "not running": machines stop at `WaitingForCloudInit`.
fn agent_stalled() -> FaultSpec {
    FaultSpec {
        endpoints: vec![fault(
            AGENT_OSINFO,
            1.0,
            500,
            "QEMU guest agent is not running",
            0,
        )],
        ..FaultSpec::default()
    }
}

fn message_of(pm: &ProxmoxMachine) -> String {
    pm.condition("VirtualMachineProvisioned")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

fn vmid_of(pm: &ProxmoxMachine) -> u32 {
    u32::try_from(pm.spec.virtual_machine_id.expect("a VMID is recorded")).unwrap()
}

fn failed_with(pm: &ProxmoxMachine, reason: &str, needle: &str) -> bool {
    reason_of(pm).as_deref() == Some(reason) && message_of(pm).contains(needle)
}

/// Waits until the machine's VM waits for its guest agent with the bootstrap ISO attached.
async fn wait_stalled_at_guest(h: &Harness, name: &str) -> ProxmoxMachine {
    h.wait_pm(name, 60, "waiting for the guest agent", |pm| {
        reason_of(pm).as_deref() == Some("WaitingForCloudInit") && message_of(pm).contains("guest agent")
    })
    .await
}

/// The bootstrap ISO of `vmid`: its volid and bytes (read through the VM's node).
fn bootstrap_iso(h: &Harness, vmid: u32) -> (String, Vec<u8>) {
    let st = h.sim.state();
    let file = format!("user-data-{vmid}.iso");
    let vol = st
        .file_volumes()
        .into_iter()
        .find(|v| v.volid.ends_with(&file))
        .unwrap_or_else(|| panic!("no ISO {file} on any storage"));
    let node = st.vm(vmid).expect("the VM exists").node;
    let bytes = st.volume_bytes(&node, &vol.volid).expect("the ISO is readable");
    (vol.volid, bytes)
}

fn iso_file(iso: &[u8], name: &str) -> String {
    pve_sim::iso::read_file(iso, name).unwrap_or_else(|| panic!("the ISO has no {name}"))
}

/// Sum of `capmox_reconcile_errors_total` samples of the machine controller.
fn machine_errors(h: &Harness) -> f64 {
    h.metrics
        .render()
        .lines()
        .filter(|l| {
            l.starts_with("capmox_reconcile_errors_total{") && l.contains("controller=\"proxmoxmachine\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Warning events with `reason` about the ProxmoxMachine `name`.
async fn warnings(h: &Harness, name: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(h.client.clone(), NS)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}

/// Adds a non-template VM named `name` at `vmid` on pve1 directly in the simulator.
fn foreign_vm(h: &Harness, vmid: u32, name: &str) {
    h.sim.state().with(|c| {
        let config = BTreeMap::from([
            ("name".to_owned(), name.to_owned()),
            ("memory".to_owned(), "512".to_owned()),
            ("cores".to_owned(), "1".to_owned()),
        ]);
        c.vms.insert(vmid, pve_sim::state::Vm::new(vmid, "pve1", config));
    });
}

/// Creates a Cluster and a ProxmoxCluster carrying the paused annotation (the cluster controller
/// leaves it alone, so the Cluster's infrastructure never becomes provisioned).
async fn create_cluster_with_paused_infra(h: &Harness, name: &str) {
    let cluster = h
        .clusters()
        .create(&PostParams::default(), &objects::cluster(NS, name, name))
        .await
        .unwrap();
    let mut pc: ProxmoxCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": name, "namespace": NS, "annotations": {PAUSED_ANNOTATION: ""}},
        "spec": {
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {"addresses": ["10.10.20.10-10.10.20.50"], "prefix": 24, "gateway": "10.10.20.1"},
            "controlPlaneEndpoint": {"host": "10.10.20.5", "port": 6443},
        },
    }))
    .unwrap();
    objects::set_cluster_owner(&mut pc.metadata, &cluster);
    h.pcs().create(&PostParams::default(), &pc).await.unwrap();
}

/// Like [`Harness::create_machine`] with a cloud-config secret, but the ProxmoxMachine is created
/// with `annotations` already set.
async fn create_annotated_machine(h: &Harness, cluster: &str, name: &str, annotations: serde_json::Value) {
    let secret_name = format!("{name}-bootstrap");
    Api::<Secret>::namespaced(h.client.clone(), NS)
        .create(
            &PostParams::default(),
            &objects::bootstrap_secret(NS, &secret_name, CLOUD_CONFIG, Some("cloud-config")),
        )
        .await
        .unwrap();
    let machine = objects::machine(NS, name, cluster, false, Some(&secret_name), name, "v1.33.0");
    let machine = h
        .machines()
        .create(&PostParams::default(), &machine)
        .await
        .unwrap();
    let mut pm: ProxmoxMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": default_machine_spec(),
    }))
    .unwrap();
    objects::set_machine_owner(&mut pm.metadata, &machine);
    h.pms().create(&PostParams::default(), &pm).await.unwrap();
}

fn cloud_config() -> Option<(&'static str, Option<&'static str>)> {
    Some((CLOUD_CONFIG, Some("cloud-config")))
}

/// Ignition bootstrap data, `cloudInitStorage` (ISO-capable and not) and `networkConfigFormat: v2`:
/// what ends up in the ISO and where it is uploaded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_iso_content_storage_and_formats() {
    let h = Harness::start().await;
    h.sim.state().set_faults(agent_stalled());
    h.create_cluster("iso", json!({})).await;
    h.create_machine(
        "iso",
        "iso-ign",
        false,
        Some((MINIMAL_IGNITION, Some("ignition"))),
        json!({"checks": {"skipCloudInitStatus": true}}),
    )
    .await;
    h.create_machine(
        "iso",
        "iso-shared",
        false,
        cloud_config(),
        json!({"cloudInitStorage": "shared"}),
    )
    .await;
    h.create_machine(
        "iso",
        "iso-lvm",
        false,
        cloud_config(),
        json!({"cloudInitStorage": "local-lvm"}),
    )
    .await;
    h.create_machine(
        "iso",
        "iso-v2",
        false,
        cloud_config(),
        json!({"networkConfigFormat": "v2"}),
    )
    .await;

    // Ignition: enriched Ignition JSON as user-data, the empty v1 network-config.
    let ign = wait_stalled_at_guest(&h, "iso-ign").await;
    let (_, iso) = bootstrap_iso(&h, vmid_of(&ign));
    let user_data: serde_json::Value = serde_json::from_str(&iso_file(&iso, "user-data")).unwrap();
    assert_eq!(user_data["ignition"]["version"], "2.3.0");
    let files = user_data["storage"]["files"].as_array().unwrap();
    let paths: Vec<&str> = files.iter().filter_map(|f| f["path"].as_str()).collect();
    assert!(
        paths.contains(&"/etc/motd"),
        "the original file is kept: {paths:?}"
    );
    let hostname = files.iter().find(|f| f["path"] == "/etc/hostname").unwrap();
    assert_eq!(hostname["contents"]["source"], "data:,iso-ign");
    assert_eq!(iso_file(&iso, "network-config"), "version: 1\nconfig: []");

    // cloudInitStorage on an ISO-capable shared storage: uploaded there and attached from there.
    let shared = wait_stalled_at_guest(&h, "iso-shared").await;
    let vmid = vmid_of(&shared);
    let (volid, _) = bootstrap_iso(&h, vmid);
    assert_eq!(volid, format!("shared:iso/user-data-{vmid}.iso"));
    let ide0 = h
        .sim
        .state()
        .vm(vmid)
        .unwrap()
        .config
        .get("ide0")
        .cloned()
        .unwrap_or_default();
    assert!(ide0.starts_with(&volid), "ide0 = {ide0}");

    // cloudInitStorage without ISO content: a clear failure naming the storage, no power-on.
    let lvm = h
        .wait_pm("iso-lvm", 60, "cloudInitStorage rejected", |pm| {
            failed_with(pm, "VMProvisionFailed", "local-lvm")
        })
        .await;
    assert!(
        message_of(&lvm).contains("cloudInitStorage"),
        "{}",
        message_of(&lvm)
    );
    let lvm_vm = h.sim.state().vm(vmid_of(&lvm)).unwrap();
    assert_eq!(lvm_vm.power, pve_sim::PowerState::Stopped);
    assert!(!lvm_vm.config.get("ide0").is_some_and(|v| v.contains("user-data")));

    // networkConfigFormat v2: `version: 2` at the top level, no `network:` key.
    let v2 = wait_stalled_at_guest(&h, "iso-v2").await;
    let (_, iso) = bootstrap_iso(&h, vmid_of(&v2));
    let nc = iso_file(&iso, "network-config");
    assert!(nc.starts_with("version: 2"), "{nc}");
    assert!(!nc.lines().any(|l| l.starts_with("network:")), "{nc}");
    // The default format nests it under `network:` (shown by the shared-storage machine).
    let (_, iso) = bootstrap_iso(&h, vmid);
    assert!(iso_file(&iso, "network-config").starts_with("network:"));

    // Let the agent answer: all three good machines provision.
    h.sim.state().set_faults(FaultSpec::default());
    for name in ["iso-ign", "iso-shared", "iso-v2"] {
        h.wait_provisioned(name, 60).await;
    }
    let lvm = h.pms().get("iso-lvm").await.unwrap();
    assert!(!lvm.is_provisioned());
    h.stop().await;
}

/// `templateSelector`: a unique tag match is cloned; ambiguous and missing matches fail with
/// capmox's messages and clone nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn template_selector_by_tags() {
    let h = Harness::start().await;
    h.create_cluster("tpl", json!({})).await;
    let selector = |tags: &[&str], policy: &str| {
        json!({"templateID": null, "sourceNode": null,
               "templateSelector": {"matchTags": tags, "matchPolicy": policy}})
    };
    h.create_machine(
        "tpl",
        "tpl-flatcar",
        false,
        cloud_config(),
        selector(&["capmox", "flatcar", "template", "v1.33.0"], "exact"),
    )
    .await;
    h.create_machine(
        "tpl",
        "tpl-ambiguous",
        false,
        cloud_config(),
        selector(&["capmox", "v1.33.0"], "uniqueSubset"),
    )
    .await;
    h.create_machine(
        "tpl",
        "tpl-none",
        false,
        cloud_config(),
        selector(&["capmox", "v1.99.0"], "exact"),
    )
    .await;
    let pm = h.wait_provisioned("tpl-flatcar", 60).await;
    let vmid = vmid_of(&pm);
    let (node, sources) = h.sim.state().with(|c| {
        let sources: Vec<(String, String)> = c
            .tasks
            .values()
            .filter(|t| t.kind == "qmclone")
            .map(|t| (t.node.clone(), t.id.clone()))
            .collect();
        (c.vms[&vmid].node.clone(), sources)
    });
    assert_eq!(node, "pve3", "cloned next to template 102");
    assert_eq!(
        sources,
        [("pve3".to_owned(), "102".to_owned())],
        "only the flatcar template was cloned"
    );

    let amb = h
        .wait_pm("tpl-ambiguous", 30, "ambiguous selector", |pm| {
            failed_with(pm, "VMProvisionFailed", "found 2 VM templates with tags")
        })
        .await;
    assert!(
        message_of(&amb).contains("capmox;v1.33.0"),
        "{}",
        message_of(&amb)
    );
    let none = h
        .wait_pm("tpl-none", 30, "selector without match", |pm| {
            failed_with(pm, "VMProvisionFailed", "found 0 VM templates with tags")
        })
        .await;
    assert!(amb.spec.virtual_machine_id.is_none());
    assert!(none.spec.virtual_machine_id.is_none());
    assert_eq!(
        h.sim.state().request_count(CLONE),
        1,
        "only the unique match was cloned"
    );
    assert_eq!(h.sim.state().non_template_vmids(), vec![vmid]);
    h.stop().await;
}

/// allowedNodes: too much memory fails with capmox's `cannot reserve` message and creates no VM;
/// three workers spread round-robin over three nodes, recorded in the ProxmoxCluster.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scheduling_memory_and_round_robin() {
    let h = Harness::start().await;
    h.create_cluster("sch", json!({})).await;
    // Template 101 lives on shared storage, so it can be cloned to every node.
    let spread = json!({"sourceNode": "pve2", "templateID": 101, "allowedNodes": ["pve1", "pve2", "pve3"]});
    h.create_machine(
        "sch",
        "sch-huge",
        false,
        cloud_config(),
        json!({"allowedNodes": ["pve1", "pve2"], "memoryMiB": 100_000}),
    )
    .await;
    // One after the other: each worker is scheduled knowing where the previous ones went.
    for i in 0..3 {
        let name = format!("sch-w{i}");
        h.create_machine("sch", &name, false, cloud_config(), spread.clone())
            .await;
        h.wait_pm(&name, 30, "VMID reserved", |pm| {
            pm.spec.virtual_machine_id.is_some()
        })
        .await;
    }
    let huge = h
        .wait_pm("sch-huge", 30, "memory cannot be reserved", |pm| {
            failed_with(pm, "VMProvisionFailed", "cannot reserve")
        })
        .await;
    assert!(huge.spec.virtual_machine_id.is_none());
    let mut nodes = Vec::new();
    for i in 0..3 {
        let pm = h.wait_provisioned(&format!("sch-w{i}"), 60).await;
        let node = h.sim.state().vm(vmid_of(&pm)).unwrap().node;
        assert_eq!(
            pm.status.as_ref().unwrap().proxmox_node.as_deref(),
            Some(node.as_str())
        );
        nodes.push(node);
    }
    nodes.sort();
    assert_eq!(nodes, ["pve1", "pve2", "pve3"]);
    let pc = h.pcs().get("sch").await.unwrap();
    let workers = pc.status.unwrap().node_locations.unwrap().workers.unwrap();
    let mut recorded: Vec<(String, String)> = workers
        .iter()
        .map(|l| (l.machine.name.clone(), l.node.clone()))
        .collect();
    recorded.sort();
    assert_eq!(recorded.len(), 3, "{recorded:?}");
    let mut by_node: Vec<String> = recorded.iter().map(|(_, n)| n.clone()).collect();
    by_node.sort();
    assert_eq!(by_node, ["pve1", "pve2", "pve3"]);
    assert_eq!(
        h.sim.state().non_template_vmids().len(),
        3,
        "no VM for the huge machine"
    );
    h.stop().await;
}

/// Whether the control plane rejects a status update carrying a stale `resourceVersion` (the
/// optimistic concurrency the node-location bookkeeping relies on, as kube-apiserver does).
async fn status_updates_honour_resource_version(h: &Harness) -> bool {
    let pc: ProxmoxCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": "rv-probe", "namespace": NS, "annotations": {PAUSED_ANNOTATION: ""}},
        "spec": {
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {"addresses": ["10.10.30.10-10.10.30.20"], "prefix": 24, "gateway": "10.10.30.1"},
        },
    }))
    .unwrap();
    let stale = h.pcs().create(&PostParams::default(), &pc).await.unwrap();
    let mut changed = stale.clone();
    changed.status = Some(
        serde_json::from_value(
            json!({"nodeLocations": {"workers": [{"machine": {"name": "x"}, "node": "pve1"}]}}),
        )
        .unwrap(),
    );
    h.pcs()
        .replace_status("rv-probe", &PostParams::default(), &changed)
        .await
        .unwrap();
    let second = h
        .pcs()
        .replace_status("rv-probe", &PostParams::default(), &stale)
        .await;
    matches!(second, Err(kube::Error::Api(e)) if e.code == 409)
}

/// Three workers reserved at the same time still land on three nodes: a node is only recorded if
/// the node locations it was chosen from are still current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reservations_spread_over_nodes() {
    let h = Harness::start().await;
    if !status_updates_honour_resource_version(&h).await {
        eprintln!("skipped: the test control plane ignores resourceVersion on status updates");
        h.stop().await;
        return;
    }
    h.create_cluster("rr", json!({})).await;
    let spread = json!({"sourceNode": "pve2", "templateID": 101, "allowedNodes": ["pve1", "pve2", "pve3"]});
    let names: Vec<String> = (0..3).map(|i| format!("rr-w{i}")).collect();
    futures::future::join_all(
        names
            .iter()
            .map(|n| h.create_machine("rr", n, false, cloud_config(), spread.clone())),
    )
    .await;
    let mut nodes = Vec::new();
    for n in &names {
        let pm = h.wait_provisioned(n, 60).await;
        nodes.push(h.sim.state().vm(vmid_of(&pm)).unwrap().node);
    }
    nodes.sort();
    assert_eq!(nodes, ["pve1", "pve2", "pve3"]);
    let pc = h.pcs().get("rr").await.unwrap();
    let workers = pc.status.unwrap().node_locations.unwrap().workers.unwrap();
    assert_eq!(workers.len(), 3, "{workers:?}");
    h.stop().await;
}

/// vmIDRange: VMIDs come from the range; a range whose VMIDs are all taken fails with capmox's
/// message; a VM that appears at a reserved VMID before the clone is never adopted or touched —
/// the machine moves to another VMID of its range.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vmid_range_and_foreign_vm_at_reserved_vmid() {
    let h = Harness::start().await;
    let st = h.sim.state();
    h.create_cluster("rng", json!({})).await;
    foreign_vm(&h, 310, "someone-else-a");
    foreign_vm(&h, 311, "someone-else-b");
    h.create_machine(
        "rng",
        "rng-ok",
        false,
        cloud_config(),
        json!({"vmIDRange": {"start": 500, "end": 510}}),
    )
    .await;
    h.create_machine(
        "rng",
        "rng-full",
        false,
        cloud_config(),
        json!({"vmIDRange": {"start": 310, "end": 311}}),
    )
    .await;
    let ok = h.wait_provisioned("rng-ok", 60).await;
    assert!((500..=510).contains(&vmid_of(&ok)), "VMID {}", vmid_of(&ok));
    let full = h
        .wait_pm("rng-full", 30, "range exhausted", |pm| {
            failed_with(pm, "VMProvisionFailed", "No free vmid found in vmIDRange")
        })
        .await;
    assert!(full.spec.virtual_machine_id.is_none());

    // The clone of rng-steal fails until a foreign VM has taken its reserved VMID.
    let before_310 = st.vm(310).unwrap();
    st.set_faults(FaultSpec {
        endpoints: vec![fault(CLONE, 1.0, 500, "injected fault", 0)],
        ..FaultSpec::default()
    });
    let clones_before = st.request_count(CLONE);
    h.create_machine(
        "rng",
        "rng-steal",
        false,
        cloud_config(),
        json!({"vmIDRange": {"start": 600, "end": 601}}),
    )
    .await;
    h.wait_pm("rng-steal", 30, "VMID 600 reserved and clone tried", |pm| {
        pm.spec.virtual_machine_id == Some(600) && st.request_count(CLONE) > clones_before
    })
    .await;
    foreign_vm(&h, 600, "intruder");
    let intruder = st.vm(600).unwrap();
    st.set_faults(FaultSpec::default());
    let steal = h.wait_provisioned("rng-steal", 60).await;
    assert_eq!(vmid_of(&steal), 601, "moved to the next VMID of the range");
    assert_eq!(st.vm(600).unwrap(), intruder, "the foreign VM is untouched");
    assert_eq!(st.vm(310).unwrap(), before_310);
    assert!(!warnings(&h, "rng-steal", "VMIDTaken").await.is_empty());
    h.stop().await;
}

/// The waiting reasons before anything is cloned, and that the machines go on once the missing
/// piece arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiting_for_bootstrap_data_and_cluster_infrastructure() {
    let h = Harness::start().await;
    h.create_cluster("wt", json!({})).await;
    create_cluster_with_paused_infra(&h, "wt-infra").await;
    h.create_machine("wt", "wt-nodata", false, None, json!({})).await;
    h.create_machine("wt-infra", "wt-noinfra", false, cloud_config(), json!({}))
        .await;
    let nodata = h.wait_reason("wt-nodata", "WaitingForBootstrapData", 30).await;
    let noinfra = h
        .wait_reason("wt-noinfra", "WaitingForClusterInfrastructureReady", 30)
        .await;
    assert!(nodata.spec.virtual_machine_id.is_none());
    assert!(noinfra.spec.virtual_machine_id.is_none());
    assert_eq!(h.sim.state().request_count(CLONE), 0);

    // The bootstrap provider writes the data and names it on the Machine.
    Api::<Secret>::namespaced(h.client.clone(), NS)
        .create(
            &PostParams::default(),
            &objects::bootstrap_secret(NS, "wt-nodata-data", CLOUD_CONFIG, Some("cloud-config")),
        )
        .await
        .unwrap();
    h.machines()
        .patch(
            "wt-nodata",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bootstrap": {"dataSecretName": "wt-nodata-data"}}})),
        )
        .await
        .unwrap();
    h.wait_provisioned("wt-nodata", 60).await;

    // The infrastructure cluster is unpaused, gets provisioned, and the Cluster says so.
    let noinfra_still = h.pms().get("wt-noinfra").await.unwrap();
    assert_eq!(
        reason_of(&noinfra_still).as_deref(),
        Some("WaitingForClusterInfrastructureReady")
    );
    h.pcs()
        .patch(
            "wt-infra",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {PAUSED_ANNOTATION: null}}})),
        )
        .await
        .unwrap();
    h.wait_provisioned("wt-noinfra", 60).await;
    h.stop().await;
}

/// A paused Cluster or a paused ProxmoxMachine: `Paused=True`, nothing cloned; unpausing provisions.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paused_machines_do_nothing_until_unpaused() {
    let h = Harness::start().await;
    h.create_cluster("ps", json!({})).await;
    h.create_cluster("ps-run", json!({})).await;
    let pause = |paused: bool| Patch::Merge(json!({"spec": {"paused": paused}}));
    h.clusters()
        .patch("ps", &PatchParams::default(), &pause(true))
        .await
        .unwrap();
    h.create_machine("ps", "ps-cluster", false, cloud_config(), json!({}))
        .await;
    create_annotated_machine(&h, "ps-run", "ps-annotated", json!({PAUSED_ANNOTATION: "true"})).await;
    let paused = |pm: &ProxmoxMachine| pm.condition("Paused").is_some_and(|c| c.status == "True");
    let by_cluster = h.wait_pm("ps-cluster", 30, "Paused=True", paused).await;
    let by_annotation = h.wait_pm("ps-annotated", 30, "Paused=True", paused).await;
    assert!(message_of(&by_cluster).is_empty());
    assert!(
        by_cluster
            .condition("Paused")
            .unwrap()
            .message
            .contains("spec.paused"),
        "{:?}",
        by_cluster.condition("Paused")
    );
    assert!(
        by_annotation
            .condition("Paused")
            .unwrap()
            .message
            .contains("annotation"),
        "{:?}",
        by_annotation.condition("Paused")
    );
    // The unpaused machine of the other cluster is the yardstick: once it is provisioned the
    // paused ones have had every chance to start.
    h.create_machine("ps-run", "ps-yardstick", false, cloud_config(), json!({}))
        .await;
    let yard = h.wait_provisioned("ps-yardstick", 60).await;
    for name in ["ps-cluster", "ps-annotated"] {
        let pm = h.pms().get(name).await.unwrap();
        assert!(
            pm.spec.virtual_machine_id.is_none(),
            "{name} reserved a VMID while paused"
        );
    }
    assert_eq!(h.sim.state().non_template_vmids(), vec![vmid_of(&yard)]);

    h.clusters()
        .patch("ps", &PatchParams::default(), &pause(false))
        .await
        .unwrap();
    h.pms()
        .patch(
            "ps-annotated",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {PAUSED_ANNOTATION: null}}})),
        )
        .await
        .unwrap();
    for name in ["ps-cluster", "ps-annotated"] {
        let pm = h.wait_provisioned(name, 60).await;
        assert_eq!(pm.condition("Paused").map(|c| c.status.as_str()), Some("False"));
    }
    h.stop().await;
}

/// An IPAddressClaim with the machine's claim name that the machine does not control: an
/// actionable `WaitingForStaticIPAllocation` message and no power-on; deleting it as the message
/// says lets the machine provision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ipam_claim_conflict_blocks_power_on() {
    let h = Harness::start().await;
    h.create_cluster("ipc", json!({})).await;
    let claims: Api<IPAddressClaim> = Api::namespaced(h.client.clone(), NS);
    let foreign: IPAddressClaim = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2",
        "kind": "IPAddressClaim",
        "metadata": {"name": "ipc-m-net0-00-inet", "namespace": NS},
        "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "elsewhere"}},
    }))
    .unwrap();
    claims.create(&PostParams::default(), &foreign).await.unwrap();
    h.create_machine("ipc", "ipc-m", false, cloud_config(), json!({}))
        .await;
    let pm = h
        .wait_pm("ipc-m", 60, "claim conflict", |pm| {
            failed_with(pm, "WaitingForStaticIPAllocation", "ipc-m-net0-00-inet")
        })
        .await;
    let message = message_of(&pm);
    assert!(message.contains("not by ProxmoxMachine ipc-m"), "{message}");
    assert!(message.contains("delete or rename that claim"), "{message}");
    let vm = h.sim.state().vm(vmid_of(&pm)).unwrap();
    assert_eq!(vm.power, pve_sim::PowerState::Stopped);
    assert_eq!(h.sim.state().request_count(START), 0, "never powered on");

    claims
        .delete("ipc-m-net0-00-inet", &DeleteParams::default())
        .await
        .unwrap();
    h.wait_provisioned("ipc-m", 60).await;
    h.stop().await;
}

/// cloud-init `error` is a terminal `VMProvisionFailed`; `degraded` (exit 2) provisions with a
/// `CloudInitDegraded` warning.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_init_error_and_degraded() {
    let h = Harness::start().await;
    let st = h.sim.state();
    st.set_faults(agent_stalled());
    h.create_cluster("ci", json!({})).await;
    h.create_machine("ci", "ci-err", false, cloud_config(), json!({}))
        .await;
    h.create_machine("ci", "ci-deg", false, cloud_config(), json!({}))
        .await;
    let err = vmid_of(&wait_stalled_at_guest(&h, "ci-err").await);
    let deg = vmid_of(&wait_stalled_at_guest(&h, "ci-deg").await);
    st.set_cloud_init(Some(err), CloudInitResult::Error);
    st.set_cloud_init(Some(deg), CloudInitResult::Degraded);
    st.set_faults(FaultSpec::default());

    let failed = h
        .wait_pm("ci-err", 60, "cloud-init failed", |pm| {
            failed_with(pm, "VMProvisionFailed", "cloud-init failed execution")
        })
        .await;
    assert!(!failed.is_provisioned());
    h.wait_provisioned("ci-deg", 60).await;
    let events = wait_for(30, "CloudInitDegraded event", || async {
        let e = warnings(&h, "ci-deg", "CloudInitDegraded").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert!(events[0].note.as_deref().unwrap_or_default().contains("degraded"));
    assert!(warnings(&h, "ci-err", "CloudInitDegraded").await.is_empty());
    // Terminal: further passes (the safety-net resync is 2 s) keep the failure.
    let seen = st.request_count(AGENT_EXEC);
    wait_for(30, "another cloud-init look", || async {
        (st.request_count(AGENT_EXEC) > seen).then_some(())
    })
    .await;
    let still = h.pms().get("ci-err").await.unwrap();
    assert!(failed_with(
        &still,
        "VMProvisionFailed",
        "cloud-init failed execution"
    ));
    assert!(!still.is_provisioned());
    h.stop().await;
}

/// `skipQemuGuestAgent: true`: provisioned without a single guest agent call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn skip_qemu_guest_agent_makes_no_agent_calls() {
    let h = Harness::start().await;
    // Without the skip the agent would never answer and the machine would never provision.
    h.sim.state().set_faults(agent_stalled());
    h.create_cluster("na", json!({})).await;
    h.create_machine(
        "na",
        "na-m",
        false,
        cloud_config(),
        json!({"checks": {"skipQemuGuestAgent": true}}),
    )
    .await;
    h.wait_provisioned("na-m", 60).await;
    let st = h.sim.state();
    for ep in [AGENT_OSINFO, AGENT_EXEC, AGENT_EXEC_STATUS] {
        assert_eq!(st.request_count(ep), 0, "{ep}");
    }
    h.stop().await;
}

/// 5xx errors, added latency and lock contention on clone, config and start are retried until the
/// machine provisions, and the machine controller's error counter shows them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmox_faults_are_retried_to_success() {
    let h = Harness::start().await;
    let st = h.sim.state();
    st.set_faults(FaultSpec {
        endpoints: vec![
            fault(
                CLONE,
                0.5,
                500,
                "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
                100,
            ),
            fault(
                "POST /nodes/{node}/qemu/{vmid}/config",
                0.5,
                500,
                "VM is locked (clone)",
                50,
            ),
            fault(
                "PUT /nodes/{node}/qemu/{vmid}/config",
                0.5,
                500,
                "VM is locked (clone)",
                50,
            ),
            fault(START, 0.5, 503, "injected fault", 100),
            fault("GET /cluster/resources", 0.3, 500, "injected fault", 50),
        ],
        ..FaultSpec::default()
    });
    h.create_cluster("flt", json!({})).await;
    for i in 0..2 {
        h.create_machine("flt", &format!("flt-{i}"), false, cloud_config(), json!({}))
            .await;
    }
    for i in 0..2 {
        h.wait_provisioned(&format!("flt-{i}"), 80).await;
    }
    let errors = machine_errors(&h);
    assert!(errors >= 1.0, "errors counted: {errors}\n{}", h.metrics.render());
    assert_eq!(st.non_template_vmids().len(), 2, "no duplicate VMs");
    h.stop().await;
}

/// A clone task that fails is reported as `CloningFailed` and retried after `retryAfter`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_clone_task_is_reported_and_retried() {
    let h = Harness::start().await;
    let st = h.sim.state();
    st.set_faults(FaultSpec {
        task_failure_rate: 1.0,
        ..FaultSpec::default()
    });
    h.create_cluster("tf", json!({})).await;
    h.create_machine("tf", "tf-m", false, cloud_config(), json!({}))
        .await;
    let failed = h
        .wait_pm("tf-m", 30, "clone task failure reported", |pm| {
            failed_with(pm, "CloningFailed", "qmclone")
        })
        .await;
    assert!(failed.status.as_ref().unwrap().retry_after.is_some());
    assert!(
        st.non_template_vmids().is_empty(),
        "the failed clone left nothing"
    );
    assert!(!warnings(&h, "tf-m", "CloningFailed").await.is_empty());
    st.set_faults(FaultSpec::default());
    let pm = h.wait_provisioned("tf-m", 60).await;
    assert!(st.request_count(CLONE) >= 2, "cloned again");
    assert_eq!(st.non_template_vmids(), vec![vmid_of(&pm)]);
    h.stop().await;
}

/// Clones onto the same node-local storage at the same time fail in the task with PVE's storage
/// lock timeout; the machines report it and retry until every one is cloned and provisioned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn storage_lock_contention_is_retried() {
    let h = Harness::start().await;
    let st = h.sim.state();
    st.set_latency(pve_sim::LatencySpec {
        tasks: BTreeMap::from([("qmclone-full".to_owned(), 400)]),
        ..pve_sim::LatencySpec::default()
    });
    st.set_faults(FaultSpec {
        storage_lock_contention: 1.0,
        ..FaultSpec::default()
    });
    h.create_cluster("lck", json!({})).await;
    let names: Vec<String> = (0..3).map(|i| format!("lck-{i}")).collect();
    futures::future::join_all(
        names
            .iter()
            .map(|n| h.create_machine("lck", n, false, cloud_config(), json!({}))),
    )
    .await;
    for n in &names {
        h.wait_provisioned(n, 80).await;
    }
    let mut contended = 0;
    for n in &names {
        contended += warnings(&h, n, "CloningFailed")
            .await
            .iter()
            .filter(|e| e.note.as_deref().unwrap_or_default().contains("can't lock file"))
            .count();
    }
    assert!(contended >= 1, "at least one clone ran into the storage lock");
    assert_eq!(st.non_template_vmids().len(), 3);
    h.stop().await;
}

/// Requests whose connection drops without an answer (as on a network failure or a proxy timeout)
/// are retried: the machine provisions, exactly one VM exists, and the failed attempts are counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dropped_connections_are_retried() {
    let h = Harness::start().await;
    let st = h.sim.state();
    h.create_cluster("drp", json!({})).await;
    // Let the cluster controller settle first, then drop every 7th request of the machine's run.
    wait_for(30, "ProxmoxCluster provisioned", || async {
        let pc = h.pcs().get("drp").await.unwrap();
        pc.status
            .and_then(|s| s.initialization)
            .and_then(|i| i.provisioned)
            .filter(|p| *p)
    })
    .await;
    st.gate_after(7);
    h.create_machine("drp", "drp-m", false, cloud_config(), json!({}))
        .await;
    for _ in 0..4 {
        assert!(st.wait_gate_blocked(std::time::Duration::from_secs(20)).await);
        st.discard_blocked();
        st.gate_after(7);
    }
    st.open_gate();
    let pm = h.wait_provisioned("drp-m", 60).await;
    assert_eq!(st.non_template_vmids(), vec![vmid_of(&pm)], "no duplicate VM");
    let failed_attempts: f64 = h
        .metrics
        .render()
        .lines()
        .filter(|l| l.starts_with("capmox_proxmox_requests_total{") && !l.contains("status=\"2"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    assert!(failed_attempts >= 1.0, "{}", h.metrics.render());
    h.stop().await;
}

/// A spec the template already satisfies (nothing to configure or resize) still goes through
/// bootstrap delivery and power-on before it is provisioned (capmox marks such a VM ready without
/// ever starting it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_to_configure_still_delivers_bootstrap_and_powers_on() {
    let h = Harness::start().await;
    h.create_cluster("same", json!({})).await;
    h.create_machine(
        "same",
        "same-m",
        false,
        cloud_config(),
        json!({"numSockets": 1, "numCores": 2, "memoryMiB": 2048, "disks": null}),
    )
    .await;
    let pm = h.wait_provisioned("same-m", 60).await;
    let st = h.sim.state();
    assert_eq!(pm.status.as_ref().unwrap().bootstrap_data_provided, Some(true));
    assert_eq!(st.vm(vmid_of(&pm)).unwrap().power, pve_sim::PowerState::Running);
    assert_eq!(st.request_count(START), 1);
    assert!(st.request_count("POST /nodes/{node}/storage/{storage}/upload") >= 1);
    h.stop().await;
}

/// A `qmstart` task that fails although the VM runs (as PVE sometimes reports) is reported, and the
/// machine then goes on with the running VM instead of starting it again or failing for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_task_failing_while_vm_runs_still_provisions() {
    let h = Harness::start().await;
    let st = h.sim.state();
    st.set_faults(FaultSpec {
        start_fails_but_runs: 1.0,
        ..FaultSpec::default()
    });
    h.create_cluster("sfr", json!({})).await;
    h.create_machine("sfr", "sfr-m", false, cloud_config(), json!({}))
        .await;
    h.wait_provisioned("sfr-m", 60).await;
    assert_eq!(st.request_count(START), 1, "the running VM is not started again");
    assert!(!warnings(&h, "sfr-m", "PoweringOnFailed").await.is_empty());
    h.stop().await;
}

/// The guest checks give up after their timeouts: an agent that never answers and a cloud-init that
/// never finishes end in `VMProvisionFailed` naming the timeout.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn guest_check_timeouts_fail_the_machine() {
    let settings = capmox::machine::MachineSettings {
        agent_timeout: std::time::Duration::from_secs(1),
        cloud_init_timeout: std::time::Duration::from_secs(1),
        ..fast_machine_settings()
    };
    let h = Harness::start_with(pve_sim::SimConfig::default(), settings).await;
    let st = h.sim.state();
    st.set_latency(pve_sim::LatencySpec {
        cloud_init_done_ms: Some(3_600_000),
        ..pve_sim::LatencySpec::default()
    });
    h.create_cluster("to", json!({})).await;
    h.create_machine("to", "to-ci", false, cloud_config(), json!({}))
        .await;
    h.wait_pm("to-ci", 60, "cloud-init timeout", |pm| {
        failed_with(pm, "VMProvisionFailed", "cloud-init did not finish within 1s")
    })
    .await;
    st.set_faults(agent_stalled());
    h.create_machine("to", "to-agent", false, cloud_config(), json!({}))
        .await;
    h.wait_pm("to-agent", 60, "agent timeout", |pm| {
        failed_with(
            pm,
            "VMProvisionFailed",
            "QEMU guest agent did not start within 1s",
        )
    })
    .await;
    for name in ["to-ci", "to-agent"] {
        assert!(!h.pms().get(name).await.unwrap().is_provisioned());
    }
    h.stop().await;
}

/// A provisioned machine whose VM disappears from Proxmox reports it instead of cloning a new one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vanished_vm_is_reported_not_recreated() {
    let h = Harness::start().await;
    let st = h.sim.state();
    h.create_cluster("gone", json!({})).await;
    h.create_machine("gone", "gone-m", false, cloud_config(), json!({}))
        .await;
    let pm = h.wait_provisioned("gone-m", 60).await;
    let vmid = vmid_of(&pm);
    st.with(|c| c.vms.remove(&vmid));
    // Any change to the Machine makes the controller look again.
    h.machines()
        .patch(
            "gone-m",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"poke": "1"}}})),
        )
        .await
        .unwrap();
    let failed = h
        .wait_pm("gone-m", 30, "VM missing reported", |pm| {
            failed_with(pm, "VMProvisionFailed", "no longer exists")
        })
        .await;
    assert_eq!(vmid_of(&failed), vmid);
    assert_eq!(st.request_count(CLONE), 1, "no second clone");
    assert!(st.non_template_vmids().is_empty());
    h.stop().await;
}
