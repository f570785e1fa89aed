//! Objects the API accepts but Proxmox refuses: an unknown template, source node, allowed node,
//! target storage, resource pool or bridge, and a template selector nothing matches. Each machine
//! ends with a failed `VirtualMachineProvisioned` condition whose reason names the step and whose
//! message names the offending value (an unknown bridge, which PVE only reports in the start task's
//! log, included), is never marked provisioned, and leaves no VM, ISO or IP claim behind once
//! deleted — a machine whose `sourceNode` names no node of the cluster used to stay in deletion
//! forever (every read of its VM and ISO on that node failed). pve-sim plays a cluster whose nodes
//! list their bridges and pools. Runs on the in-tree and the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use machine_support::*;
use serde_json::{Value, json};

/// A machine spec change and what its failure must look like.
struct Case {
    name: &'static str,
    spec: Value,
    /// Accepted `VirtualMachineProvisioned` reasons.
    reasons: &'static [&'static str],
    /// Text the condition message must contain.
    names: &'static str,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "bad-template",
            spec: json!({"templateID": 999}),
            reasons: &["CloningFailed"],
            names: "999",
        },
        Case {
            name: "bad-source-node",
            spec: json!({"sourceNode": "pve9"}),
            reasons: &["CloningFailed"],
            names: "pve9",
        },
        Case {
            name: "bad-allowed-node",
            spec: json!({"allowedNodes": ["pve9"]}),
            reasons: &["VMProvisionFailed"],
            names: "pve9",
        },
        Case {
            name: "bad-storage",
            spec: json!({"full": true, "storage": "nope"}),
            reasons: &["CloningFailed"],
            names: "storage 'nope' does not exist",
        },
        Case {
            name: "bad-pool",
            spec: json!({"pool": "nope"}),
            reasons: &["CloningFailed"],
            names: "pool 'nope' does not exist",
        },
        Case {
            name: "bad-bridge",
            spec: json!({"network": {"networkDevices": [{"name": "net0", "bridge": "vmbr9", "model": "virtio", "defaultIPv4": true}]}}),
            reasons: &["PoweringOnFailed"],
            names: "bridge 'vmbr9' does not exist",
        },
        Case {
            name: "bad-selector",
            spec: json!({"sourceNode": null, "templateID": null, "templateSelector": {"matchTags": ["no-such-tag"]}}),
            reasons: &["VMProvisionFailed"],
            names: "no-such-tag",
        },
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxmox_refusals_are_clear_conditions_and_leak_nothing() {
    let mut config = pve_sim::SimConfig::default();
    config.scenario.pools = vec!["capi".to_owned()];
    for node in &mut config.scenario.nodes {
        node.bridges = vec!["vmbr0".to_owned(), "vmbr1".to_owned()];
    }
    let h = Harness::start_with(config, fast_machine_settings()).await;
    h.create_cluster("rej", json!({})).await;
    let cases = cases();
    for c in &cases {
        h.create_machine(
            "rej",
            c.name,
            false,
            Some((CLOUD_CONFIG, Some("cloud-config"))),
            c.spec.clone(),
        )
        .await;
    }
    for c in &cases {
        let pm = h
            .wait_pm(
                c.name,
                60,
                &format!("a {:?} failure naming {:?}", c.reasons, c.names),
                |pm| {
                    pm.condition("VirtualMachineProvisioned").is_some_and(|cond| {
                        cond.status == "False"
                            && c.reasons.contains(&cond.reason.as_str())
                            && cond.message.contains(c.names)
                    })
                },
            )
            .await;
        let cond = pm.condition("VirtualMachineProvisioned").unwrap();
        assert!(
            c.reasons.contains(&cond.reason.as_str()),
            "{}: reason {} ({})",
            c.name,
            cond.reason,
            cond.message
        );
        assert!(!pm.is_provisioned(), "{}", c.name);
    }
    assert!(h.controllers_alive());
    // Only the bridge case got as far as a VM (cloned, configured, never started).
    for c in &cases {
        h.delete_machine(c.name, 60).await;
    }
    wait_for(60, "nothing left behind", || async {
        let (vms, isos, ipam) = h.leftovers().await;
        (vms.is_empty() && isos.is_empty() && ipam == 0).then_some(())
    })
    .await;
    assert!(
        h.sim.state().leftovers().is_empty(),
        "{:?}",
        h.sim.state().leftovers()
    );
    h.stop().await;
}
