//! The ProxmoxMachine controller end to end against pve-sim and the in-tree control plane:
//! provisioning to Ready and deletion without leaks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use machine_support::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cloud_config_machine_reaches_ready_and_deletes_cleanly() {
    let h = Harness::start().await;
    h.create_cluster("c1", json!({})).await;
    h.create_machine(
        "c1",
        "c1-cp-0",
        true,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({}),
    )
    .await;
    let pm = h.wait_provisioned("c1-cp-0", 60).await;
    let status = pm.status.clone().unwrap();
    let vmid = u32::try_from(pm.spec.virtual_machine_id.unwrap()).unwrap();
    assert!(pm.spec.provider_id.as_deref().unwrap().starts_with("proxmox://"));
    assert_eq!(status.bootstrap_data_provided, Some(true));
    assert_eq!(status.vm_status.as_deref(), Some("ready"));
    assert_eq!(reason_of(&pm).as_deref(), Some("Provisioned"));
    let addresses = status.addresses.unwrap();
    assert_eq!(addresses[0].address, "c1-cp-0");
    assert_eq!(addresses[1].address, "10.10.10.10");
    // The v1beta1 contract: read as v1alpha1 (what CAPI v1.10 asks for), the machine is ready.
    let v1 = capmox_api::conversion::convert_value(
        serde_json::to_value(&pm).unwrap(),
        "infrastructure.cluster.x-k8s.io/v1alpha1",
    )
    .unwrap();
    assert_eq!(v1["status"]["ready"], json!(true), "{v1}");
    assert_eq!(v1["spec"]["providerID"], json!(pm.spec.provider_id));
    // Metrics: the machine gauge by phase and node, reconcile durations, Proxmox requests.
    let node = status.proxmox_node.clone().unwrap();
    let metrics = h.metrics.render();
    assert!(
        metrics.contains(&format!(
            "capmox_machines{{phase=\"Provisioned\",node=\"{node}\"}} 1"
        )),
        "{metrics}"
    );
    assert!(metrics.contains("capmox_reconcile_duration_seconds_count{controller=\"proxmoxmachine\"}"));
    assert!(
        metrics.contains("endpoint=\"/nodes/{node}/qemu/{vmid}/clone\""),
        "{metrics}"
    );
    let vm = h.sim.state().vm(vmid).expect("the VM exists");
    assert_eq!(vm.config.get("name").map(String::as_str), Some("c1-cp-0"));
    // The CAPI stand-in sets the nodeRef; the ISO is then detached and deleted.
    let (vms, isos, ipam) = {
        h.wait_pm("c1-cp-0", 30, "ISO removed", |_| {
            h.sim
                .state()
                .file_volumes()
                .iter()
                .all(|v| !v.volid.contains("user-data-"))
        })
        .await;
        h.leftovers().await
    };
    assert_eq!(vms, vec![vmid]);
    assert!(isos.is_empty());
    assert_eq!(ipam, 2, "one claim and one address");
    h.delete_machine("c1-cp-0", 60).await;
    let pm_gone = h.pms().get_opt("c1-cp-0").await.unwrap();
    assert!(pm_gone.is_none());
    assert!(
        !h.metrics
            .render()
            .contains("capmox_machines{phase=\"Provisioned\",node=\"pve1\"} 1"),
        "a deleted machine leaves the gauge"
    );
    wait_for(30, "no leftovers", || async {
        let l = h.leftovers().await;
        (l.0.is_empty() && l.1.is_empty() && l.2 == 0).then_some(())
    })
    .await;
    h.stop().await;
}

/// Progress is driven by watches: with the safety-net resync set to an hour, a machine whose
/// Machine gets its bootstrap data later still provisions (Machine watch), and its IP claim,
/// fulfilled by the IPAM stand-in, moves it on (IPAddressClaim/IPAddress watches).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_driven_by_watches_not_by_resync() {
    let settings = capmox::machine::MachineSettings {
        resync: std::time::Duration::from_secs(3600),
        ..fast_machine_settings()
    };
    let h = Harness::start_with(pve_sim::SimConfig::default(), settings).await;
    h.create_cluster("w1", json!({})).await;
    h.create_machine("w1", "w1-m", false, None, json!({})).await;
    h.wait_reason("w1-m", "WaitingForBootstrapData", 30).await;
    let secret = capmox_standins::capi::objects::bootstrap_secret(NS, "w1-m-data", CLOUD_CONFIG, None);
    kube::Api::<k8s_openapi::api::core::v1::Secret>::namespaced(h.client.clone(), NS)
        .create(&Default::default(), &secret)
        .await
        .unwrap();
    let patch = json!({"spec": {"bootstrap": {"dataSecretName": "w1-m-data"}}});
    h.machines()
        .patch(
            "w1-m",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&patch),
        )
        .await
        .unwrap();
    let pm = h.wait_provisioned("w1-m", 60).await;
    assert_eq!(pm.status.unwrap().bootstrap_data_provided, Some(true));
    h.stop().await;
}

/// Every persisted `VirtualMachineProvisioned` reason, in order, from a watch on the machine.
fn record_reasons(h: &Harness, name: &str) -> tokio::task::JoinHandle<Vec<String>> {
    use futures::StreamExt;
    let api = h.pms();
    let cfg = kube::runtime::watcher::Config::default().fields(&format!("metadata.name={name}"));
    tokio::spawn(async move {
        let mut out: Vec<String> = Vec::new();
        let mut stream = kube::runtime::watcher(api, cfg).boxed();
        while let Some(ev) = stream.next().await {
            let Ok(kube::runtime::watcher::Event::Apply(pm) | kube::runtime::watcher::Event::InitApply(pm)) =
                ev
            else {
                continue;
            };
            if let Some(r) = reason_of(&pm)
                && out.last() != Some(&r)
            {
                let done = r == "Deleting";
                out.push(r);
                if done {
                    break;
                }
            }
        }
        out
    })
}

/// The machine walks capmox's reasons in order, and a failed Proxmox task (here the `qmconfig`
/// task that allocates a data disk) shows `TaskFailed` with the task's exit status before it is
/// retried to success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasons_in_order_and_a_failed_task_is_reported_then_retried() {
    let h = Harness::start().await;
    let st = h.sim.state();
    let quick_config = pve_sim::LatencySpec {
        cloud_init_done_ms: Some(500),
        ..Default::default()
    };
    let mut latency = quick_config.clone();
    latency.tasks.insert("qmconfig".into(), 1500);
    st.set_latency(latency);
    h.create_cluster("r1", json!({})).await;
    let reasons = record_reasons(&h, "r1-m");
    h.create_machine(
        "r1",
        "r1-m",
        false,
        Some((CLOUD_CONFIG, None)),
        json!({"disks": {"additionalVolumes": [{"disk": "scsi1", "sizeGb": 4}]}}),
    )
    .await;
    h.wait_pm("r1-m", 30, "qmconfig task in flight", |pm| {
        pm.status
            .as_ref()
            .and_then(|s| s.task_ref.as_deref())
            .is_some_and(|t| t.contains(":qmconfig:"))
    })
    .await;
    st.set_faults(pve_sim::FaultSpec {
        task_failure_rate: 1.0,
        ..Default::default()
    });
    let failed = h.wait_reason("r1-m", "TaskFailed", 30).await;
    let cond = failed.condition("VirtualMachineProvisioned").unwrap();
    assert!(cond.message.starts_with("qmconfig: "), "{}", cond.message);
    st.set_faults(pve_sim::FaultSpec::default());
    st.set_latency(quick_config);
    h.wait_provisioned("r1-m", 60).await;
    h.delete_machine("r1-m", 60).await;
    let seen = reasons.await.unwrap();
    let expected = [
        "Cloning",
        "WaitingForDiskReconciliation",
        "TaskFailed",
        // (WaitingForStaticIPAllocation shows only when IPAM is slower than the clone: the
        // claims are asked for with it.)
        "WaitingForBootstrapDataReconciliation",
        "WaitingForVMPowerUp",
        "WaitingForCloudInit",
        "Provisioned",
        "Deleting",
    ];
    // Each expected reason shows up, in this order (the failed task may repeat a reason).
    let mut at = 0;
    for r in &seen {
        if at < expected.len() && r == expected[at] {
            at += 1;
        }
    }
    assert_eq!(at, expected.len(), "reasons seen: {seen:?}");
    h.stop().await;
}

/// A pool whose gateway-metric annotation is not a number stops the machine at
/// `WaitingForBootstrapDataReconciliation` with a message naming it; nothing is booted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_pool_metric_annotation_blocks_bootstrap_data() {
    let h = Harness::start().await;
    h.create_cluster("b1", json!({})).await;
    let pool: capmox_api::capi::ipam::InClusterIPPool = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2",
        "kind": "InClusterIPPool",
        "metadata": {"name": "extra", "namespace": NS,
                     "annotations": {"ipam.capmox.cluster.x-k8s.io/gateway-metric": "fast"}},
        "spec": {"addresses": ["10.20.0.10-10.20.0.20"], "prefix": 24, "gateway": "10.20.0.1"},
    }))
    .unwrap();
    kube::Api::<capmox_api::capi::ipam::InClusterIPPool>::namespaced(h.client.clone(), NS)
        .create(&Default::default(), &pool)
        .await
        .unwrap();
    let nics = json!({"network": {"networkDevices": [
        {"name": "net0", "bridge": "vmbr0", "model": "virtio", "defaultIPv4": true},
        {"name": "net1", "bridge": "vmbr0", "model": "virtio",
         "ipPoolRef": [{"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "extra"}]}
    ]}});
    h.create_machine("b1", "b1-m", false, Some((CLOUD_CONFIG, None)), nics)
        .await;
    let pm = h
        .wait_reason("b1-m", "WaitingForBootstrapDataReconciliation", 30)
        .await;
    let cond = pm.condition("VirtualMachineProvisioned").unwrap();
    assert!(cond.message.contains("extra"), "{}", cond.message);
    assert_ne!(pm.status.as_ref().unwrap().bootstrap_data_provided, Some(true));
    let vmid = u32::try_from(pm.spec.virtual_machine_id.unwrap()).unwrap();
    assert_eq!(
        h.sim.state().vm(vmid).unwrap().power,
        pve_sim::PowerState::Stopped
    );
    h.stop().await;
}

/// Node locations changed by many reservations at once are written in batches: every change is
/// in the ProxmoxCluster's status once its `update` returns, none is lost to a concurrent one,
/// and a forget waits for the placements before it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_locations_written_in_batches_lose_nothing() {
    use std::sync::Arc;
    let h = Harness::start().await;
    let pc = Arc::new(h.create_cluster("loc", json!({})).await);
    let locations = Arc::new(capmox::machine::locations::Locations::default());
    let writes = (0..30).map(|i| {
        let (locations, pc, client) = (locations.clone(), pc.clone(), h.client.clone());
        async move {
            let node = format!("pve{}", i % 3 + 1);
            let name = format!("m{i:02}");
            let placed = locations
                .update(&client, &pc, |l| {
                    capmox::machine::locations::place(l, &name, &node, None, i % 10 == 0)
                })
                .await
                .unwrap();
            assert!(placed, "{name} was not placed before");
        }
    });
    futures::future::join_all(writes).await;
    locations.forget(&h.client, &pc, "m05").await.unwrap();
    let written = h.pcs().get("loc").await.unwrap();
    let l = written.status.unwrap().node_locations.unwrap();
    let names = |v: &Option<Vec<capmox_api::v1alpha2::NodeLocation>>| {
        v.iter()
            .flatten()
            .map(|e| e.machine.name.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(names(&l.control_plane), ["m00", "m10", "m20"]);
    let mut workers = names(&l.workers);
    workers.sort();
    assert_eq!(workers.len(), 26, "{workers:?}");
    assert!(!workers.contains(&"m05".to_owned()));
    // A ProxmoxCluster that is gone has nothing to record: no error.
    let mut gone = (*pc).clone();
    gone.metadata.name = Some("gone".into());
    gone.metadata.uid = Some("00000000-0000-0000-0000-000000000000".into());
    let gone = Arc::new(gone);
    locations
        .record(&h.client, &gone, "m99", "pve1", None, false)
        .await
        .unwrap();
    assert!(h.pcs().get_opt("gone").await.unwrap().is_none());
    h.stop().await;
}
