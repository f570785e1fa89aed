//! Bootstrap ISO content and storage, template selection, scheduling, VMID ranges, waiting
//! reasons, pausing and IPAM conflicts.

use capmox_api::capi::ipam_claims::v1beta2::{IPAddress, IPAddressClaim};
use capmox_api::consts::PAUSED_ANNOTATION;
use capmox_api::v1alpha2::ProxmoxMachine;
use capmox_standins::capi::objects;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use pve_sim::FaultSpec;
use serde_json::json;

use crate::common::*;
use crate::machine_support::*;

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
    let (v2_volid, iso) = bootstrap_iso(&h, vmid_of(&v2));
    // Without cloudInitStorage the first ISO-capable storage by name is used, every time (#782).
    assert_eq!(v2_volid, format!("local:iso/user-data-{}.iso", vmid_of(&v2)));
    let nc = iso_file(&iso, "network-config");
    assert!(nc.starts_with("version: 2"), "{nc}");
    assert!(!nc.lines().any(|l| l.starts_with("network:")), "{nc}");
    // The default format nests it under `network:` (shown by the shared-storage machine).
    let (_, iso) = bootstrap_iso(&h, vmid);
    assert!(iso_file(&iso, "network-config").starts_with("network:"));

    // Deleting machines before their node joined removes the ISO from the storage it went to.
    let lvm_vmid = vmid_of(&lvm);
    h.delete_machine("iso-shared", 60).await;
    h.delete_machine("iso-lvm", 60).await;
    let st = h.sim.state();
    for gone in [vmid, lvm_vmid] {
        assert!(st.vm(gone).is_none(), "VM {gone} deleted");
        let file = format!("user-data-{gone}.iso");
        assert!(
            !st.file_volumes().iter().any(|v| v.volid.ends_with(&file)),
            "{file} deleted"
        );
    }

    // Let the agent answer: the remaining machines provision.
    st.set_faults(FaultSpec::default());
    for name in ["iso-ign", "iso-v2"] {
        h.wait_provisioned(name, 60).await;
    }
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

/// Three workers reserved at the same time still land on three nodes: a node is only recorded if
/// the node locations it was chosen from are still current.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_reservations_spread_over_nodes() {
    let h = Harness::start().await;
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
    assert!(!wait_warnings(&h, "rng-steal", "VMIDTaken").await.is_empty());
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

/// An IPAddress that survived without its claim (e.g. restored from a backup) is kept: the claim is
/// recreated with an `OrphanedIPAddress` warning and the machine gets that very address.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn orphaned_ip_address_is_reused() {
    let h = Harness::start().await;
    h.create_cluster("orph", json!({})).await;
    let address: IPAddress = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1beta2",
        "kind": "IPAddress",
        "metadata": {"name": "orph-m-net0-00-inet", "namespace": NS},
        "spec": {
            "claimRef": {"name": "orph-m-net0-00-inet"},
            "poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "orph-v4-icip"},
            "address": "10.10.10.42",
            "prefix": 24,
            "gateway": "10.10.10.1",
        },
    }))
    .unwrap();
    Api::<IPAddress>::namespaced(h.client.clone(), NS)
        .create(&PostParams::default(), &address)
        .await
        .unwrap();
    h.create_machine("orph", "orph-m", false, cloud_config(), json!({}))
        .await;
    let pm = h.wait_provisioned("orph-m", 60).await;
    let addresses = pm.status.clone().unwrap().addresses.unwrap();
    assert_eq!(addresses[1].address, "10.10.10.42");
    let tags = h.sim.state().vm(vmid_of(&pm)).unwrap().config["tags"].clone();
    assert!(tags.contains("ip_net0_10.10.10.42"), "{tags}");
    assert!(!wait_warnings(&h, "orph-m", "OrphanedIPAddress").await.is_empty());
    h.stop().await;
}

/// `spec.pool`: a pool Proxmox knows is used for the clone; an unknown one (Proxmox answers 403)
/// is reported as `CloningFailed` and nothing is created.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resource_pool_is_used_and_unknown_pool_reported() {
    let mut config = pve_sim::SimConfig::default();
    config.scenario.pools = vec!["capi".to_owned()];
    let h = Harness::start_with(config, fast_machine_settings()).await;
    let st = h.sim.state();
    h.create_cluster("pool", json!({})).await;
    h.create_machine("pool", "pool-ok", false, cloud_config(), json!({"pool": "capi"}))
        .await;
    h.create_machine("pool", "pool-bad", false, cloud_config(), json!({"pool": "nope"}))
        .await;
    let ok = h.wait_provisioned("pool-ok", 60).await;
    let in_pool = st.with(|c| c.vms[&vmid_of(&ok)].pool.clone());
    assert_eq!(in_pool.as_deref(), Some("capi"));
    let bad = h
        .wait_pm("pool-bad", 30, "unknown pool reported", |pm| {
            failed_with(pm, "CloningFailed", "nope")
        })
        .await;
    assert!(
        st.vm(vmid_of(&bad)).is_none(),
        "nothing cloned for the unknown pool"
    );
    assert_eq!(st.non_template_vmids(), vec![vmid_of(&ok)]);
    h.stop().await;
}

/// A bootstrap Secret without its `value` key is reported (capmox's message) and the machine goes
/// on once the Secret is fixed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bootstrap_secret_without_value_is_reported_then_fixed() {
    let h = Harness::start().await;
    h.create_cluster("nov", json!({})).await;
    let secrets: Api<Secret> = Api::namespaced(h.client.clone(), NS);
    let mut secret = objects::bootstrap_secret(NS, "nov-m-data", CLOUD_CONFIG, Some("cloud-config"));
    secret.data.as_mut().unwrap().remove("value");
    secrets.create(&PostParams::default(), &secret).await.unwrap();
    h.create_machine("nov", "nov-m", false, None, json!({})).await;
    h.machines()
        .patch(
            "nov-m",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"bootstrap": {"dataSecretName": "nov-m-data"}}})),
        )
        .await
        .unwrap();
    let pm = h
        .wait_pm("nov-m", 60, "missing value reported", |pm| {
            failed_with(pm, "CloningFailed", "error retrieving bootstrap data")
        })
        .await;
    assert_eq!(
        message_of(&pm),
        "error retrieving bootstrap data: secret `value` key is missing"
    );
    assert_eq!(pm.status.unwrap().bootstrap_data_provided, None);
    assert_eq!(h.sim.state().request_count(START), 0);
    secrets
        .patch(
            "nov-m-data",
            &PatchParams::default(),
            &Patch::Merge(json!({"stringData": {"value": CLOUD_CONFIG}})),
        )
        .await
        .unwrap();
    h.wait_provisioned("nov-m", 60).await;
    h.stop().await;
}
