//! Issue 14 item 7 end to end (capmox #370): a zone with its own `credentialsRef` is another
//! Proxmox cluster. Two simulators: zone `default` uses the manager's Proxmox (the harness's
//! simulator), zone `b` a second simulator reached through its own Secret. One machine per zone is
//! provisioned in its own simulator and deleted from it (no VM, no ISO left in either), and a zone
//! whose Secret Proxmox refuses gives the machine a reason and a message naming the zone. Runs on
//! the in-tree and the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use machine_support::*;
use serde_json::json;

/// VMIDs of the non-template VMs of `sim` named `name`.
fn vms_named(sim: &pve_sim::SimServer, name: &str) -> Vec<u32> {
    sim.state().with(|c| {
        c.vms
            .iter()
            .filter(|(_, vm)| vm.config.get("name").map(String::as_str) == Some(name))
            .map(|(id, _)| *id)
            .collect()
    })
}

/// Bootstrap ISOs left on `sim`.
fn isos(sim: &pve_sim::SimServer) -> Vec<String> {
    sim.state()
        .file_volumes()
        .into_iter()
        .filter(|v| v.volid.contains("user-data-"))
        .map(|v| v.volid)
        .collect()
}

fn zone_b(secret: &str) -> serde_json::Value {
    json!({"zoneConfig": [{
        "zone": "b",
        "dnsServers": ["10.20.0.1"],
        "ipv4Config": {"addresses": ["10.20.0.10-10.20.0.20"], "prefix": 24, "gateway": "10.20.0.1"},
        "credentialsRef": {"name": secret},
    }]})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_zone_lives_in_its_own_proxmox_cluster() {
    let h = Harness::start().await;
    let other = pve_sim::SimServer::start(pve_sim::SimConfig::default())
        .await
        .unwrap();
    h.create_credentials_secret_for(&other, "pve-b", other.token_secret())
        .await;
    h.create_cluster("zones", zone_b("pve-b")).await;
    let bootstrap = Some((CLOUD_CONFIG, Some("cloud-config")));
    h.create_machine("zones", "in-a", false, bootstrap, json!({}))
        .await;
    h.create_machine(
        "zones",
        "in-b",
        false,
        bootstrap,
        json!({"network": {"zone": "b"}}),
    )
    .await;
    let a = h.wait_provisioned("in-a", 120).await;
    let b = h.wait_provisioned("in-b", 120).await;
    assert_eq!(
        vms_named(&h.sim, "in-a").len(),
        1,
        "in-a is in the default Proxmox"
    );
    assert!(vms_named(&other, "in-a").is_empty());
    assert_eq!(vms_named(&other, "in-b").len(), 1, "in-b is in zone b's Proxmox");
    assert!(vms_named(&h.sim, "in-b").is_empty());
    assert_eq!(
        vms_named(&other, "in-b")[0] as i64,
        b.spec.virtual_machine_id.unwrap()
    );
    // Where the VM was created is recorded: only for the zone with its own credentials.
    assert_eq!(a.status.as_ref().unwrap().credentials_ref, None);
    let recorded = b.status.as_ref().unwrap().credentials_ref.clone().unwrap();
    assert_eq!(recorded.name.as_deref(), Some("pve-b"));
    assert_eq!(recorded.namespace.as_deref(), Some(NS));

    // A later zoneConfig change cannot orphan the VM: it is deleted where it was created.
    h.pcs()
        .patch(
            "zones",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(json!({"spec": {"zoneConfig": [{
                "zone": "b",
                "dnsServers": ["10.20.0.1"],
                "ipv4Config": {"addresses": ["10.20.0.10-10.20.0.20"], "prefix": 24, "gateway": "10.20.0.1"},
            }]}})),
        )
        .await
        .unwrap();
    h.delete_machine("in-a", 120).await;
    h.delete_machine("in-b", 120).await;
    let (vms, left_isos, ipam) = h.settled_leftovers().await;
    assert!(vms.is_empty(), "VMs left in the default Proxmox: {vms:?}");
    assert!(
        left_isos.is_empty(),
        "ISOs left in the default Proxmox: {left_isos:?}"
    );
    assert_eq!(ipam, 0, "IPAM objects left");
    let other_vms = other.state().non_template_vmids();
    assert!(
        other_vms.is_empty(),
        "VMs left in zone b's Proxmox: {other_vms:?}"
    );
    assert!(isos(&other).is_empty(), "ISOs left in zone b's Proxmox");
    other.shutdown().await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_zone_credentials_name_the_zone() {
    let h = Harness::start().await;
    let other = pve_sim::SimServer::start(pve_sim::SimConfig::default())
        .await
        .unwrap();
    h.create_credentials_secret_for(&other, "pve-b", "not-the-secret")
        .await;
    h.create_cluster("badzone", zone_b("pve-b")).await;
    h.create_machine(
        "badzone",
        "refused",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({"network": {"zone": "b"}}),
    )
    .await;
    let pm = h.wait_reason("refused", "ProxmoxAuthenticationFailed", 60).await;
    let message = pm
        .condition("VirtualMachineProvisioned")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(
        message.contains("zone b") && message.contains(&format!("{NS}/pve-b")),
        "the message names the zone and its Secret: {message}"
    );
    assert!(other.state().non_template_vmids().is_empty());
    assert!(
        h.sim.state().non_template_vmids().is_empty(),
        "nothing created in the default Proxmox"
    );
    // Fixed credentials are picked up (the Secret change requeues the machine).
    h.create_credentials_secret_for(&other, "pve-b", other.token_secret())
        .await;
    h.wait_provisioned("refused", 120).await;
    assert_eq!(vms_named(&other, "refused").len(), 1);
    h.delete_machine("refused", 120).await;
    assert!(other.state().non_template_vmids().is_empty());
    other.shutdown().await;
    h.stop().await;
}
