//! Cloud-init outcomes, guest checks and their timeouts, Proxmox faults retried to success, task
//! failures, dropped connections and VMs that vanish.

use std::collections::BTreeMap;

use kube::api::{Patch, PatchParams};
use pve_sim::{CloudInitResult, FaultSpec};
use serde_json::json;

use crate::common::*;
use crate::machine_support::*;

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
    // Terminal: further passes (the safety-net resync is 2 s) keep the failure and do not look
    // into the guest again (capmox: "Error state detected").
    let seen = st.request_count(AGENT_EXEC);
    let passes = h.metrics.reconcile_count("proxmoxmachine");
    wait_for(30, "more reconciles", || async {
        (h.metrics.reconcile_count("proxmoxmachine") >= passes + 4).then_some(())
    })
    .await;
    assert_eq!(
        st.request_count(AGENT_EXEC),
        seen,
        "no cloud-init look after a terminal failure"
    );
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
    assert!(!wait_warnings(&h, "tf-m", "CloningFailed").await.is_empty());
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
    assert!(!wait_warnings(&h, "sfr-m", "PoweringOnFailed").await.is_empty());
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

/// A VM migrated to another node is followed: `status.proxmoxNode` and the ProxmoxCluster's node
/// locations move with it, and deletion removes it from its new node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn migrated_vm_is_followed() {
    let h = Harness::start().await;
    let st = h.sim.state();
    h.create_cluster("mig", json!({})).await;
    h.create_machine("mig", "mig-m", false, cloud_config(), json!({}))
        .await;
    let pm = h.wait_provisioned("mig-m", 60).await;
    let vmid = vmid_of(&pm);
    // Wait until the bootstrap ISO is gone (a VM with a local ISO attached cannot migrate).
    wait_for(30, "ISO detached", || async {
        let vm = st.vm(vmid).unwrap();
        (!vm.config.get("ide0").is_some_and(|v| v.contains("user-data"))).then_some(())
    })
    .await;
    st.with(|c| c.vms.get_mut(&vmid).unwrap().node = "pve2".to_owned());
    h.machines()
        .patch(
            "mig-m",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"poke": "1"}}})),
        )
        .await
        .unwrap();
    h.wait_pm("mig-m", 30, "node followed", |pm| {
        pm.status.as_ref().and_then(|s| s.proxmox_node.as_deref()) == Some("pve2")
    })
    .await;
    wait_for(30, "node location followed", || async {
        let pc = h.pcs().get("mig").await.unwrap();
        let workers = pc.status?.node_locations?.workers?;
        workers
            .iter()
            .any(|l| l.machine.name == "mig-m" && l.node == "pve2")
            .then_some(())
    })
    .await;
    let pm = h.pms().get("mig-m").await.unwrap();
    assert!(pm.is_provisioned());
    h.delete_machine("mig-m", 60).await;
    assert!(st.non_template_vmids().is_empty());
    h.stop().await;
}

/// The VM's node going offline mid-provisioning (Proxmox answers 595) is survived: the errors are
/// counted and the machine provisions once the node is back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_offline_during_provisioning_is_survived() {
    let h = Harness::start().await;
    let st = h.sim.state();
    st.set_faults(agent_stalled());
    h.create_cluster("off", json!({})).await;
    h.create_machine("off", "off-m", false, cloud_config(), json!({}))
        .await;
    let pm = wait_stalled_at_guest(&h, "off-m").await;
    let node = st.vm(vmid_of(&pm)).unwrap().node;
    let before = machine_errors(&h);
    assert!(st.set_node_online(&node, false));
    st.set_faults(FaultSpec::default());
    wait_for(30, "errors while the node is offline", || async {
        (machine_errors(&h) >= before + 2.0).then_some(())
    })
    .await;
    assert!(!h.pms().get("off-m").await.unwrap().is_provisioned());
    assert!(st.set_node_online(&node, true));
    h.wait_provisioned("off-m", 60).await;
    h.stop().await;
}

/// An error outside a provisioning step (here: Proxmox failing every look at the VM during
/// deletion) reaches the object as `VirtualMachineProvisioned=False/DeletionFailed` and a
/// Warning event; once Proxmox answers again the deletion finishes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_outside_steps_are_conditions_and_warning_events() {
    let h = Harness::start().await;
    h.create_cluster("oe", json!({})).await;
    h.create_machine("oe", "oe-m", false, cloud_config(), json!({}))
        .await;
    h.wait_provisioned("oe-m", 60).await;
    let st = h.sim.state();
    // What the deletion reads first: where the VM is and in which state.
    let resources = "GET /cluster/resources";
    st.set_faults(FaultSpec {
        endpoints: vec![fault(resources, 1.0, 500, "injected outage", 0)],
        ..FaultSpec::default()
    });
    h.machines()
        .delete("oe-m", &kube::api::DeleteParams::default())
        .await
        .unwrap();
    let pm = h.wait_reason("oe-m", "DeletionFailed", 60).await;
    let c = pm.condition("VirtualMachineProvisioned").unwrap();
    assert!(c.message.contains("injected outage"), "{c:?}");
    let events = wait_for(30, "DeletionFailed warning", || async {
        let e = warnings(&h, "oe-m", "DeletionFailed").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    assert!(
        events[0]
            .note
            .as_deref()
            .unwrap_or_default()
            .contains("injected outage")
    );
    st.set_faults(FaultSpec::default());
    wait_for(60, "machine deleted", || async {
        h.pms().get_opt("oe-m").await.unwrap().is_none().then_some(())
    })
    .await;
    let (vms, isos, claims) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && claims == 0,
        "{vms:?} {isos:?} {claims}"
    );
    h.stop().await;
}
