//! Credentials Proxmox refuses, and their rotation. The ProxmoxCluster uses a `credentialsRef`
//! Secret (no global credentials); pve-sim revokes the API token at runtime and answers `401
//! Authentication failed!` like PVE. A machine whose token is revoked mid-provisioning stops
//! progressing with `VirtualMachineProvisioned=False` reason `ProxmoxAuthenticationFailed`, a
//! Warning event of that reason and the cluster's `ProxmoxAvailable=False` with the same reason;
//! during the revoked window the controllers back off (Proxmox requests are counted) instead of
//! retrying hot. Rotating the token and the Secret recovers without anything else: the Secret watch
//! requeues the machine at once (sooner than its backoff would) and a new client is built from the
//! new Secret. The same for a deletion: it stalls with the reason, leaves the VM alone, and
//! completes after the rotation without leaking anything. Runs on the in-tree and the real API
//! server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use std::time::{Duration, Instant};

use capmox_api::v1alpha2::ProxmoxCluster;
use kube::api::{Api, DeleteParams, ListParams};
use machine_support::*;
use serde_json::json;

const AUTH_FAILED: &str = "ProxmoxAuthenticationFailed";

/// Machine settings whose error backoff starts at 500 ms, so the backoff after the revoked window
/// is clearly longer than the recovery through the Secret watch.
fn settings() -> capmox::machine::MachineSettings {
    let mut s = fast_machine_settings();
    s.task_poll_initial = Duration::from_millis(500);
    s
}

async fn start() -> Harness {
    let h = Harness::start_with_secret_credentials(pve_sim::SimConfig::default(), settings()).await;
    h.create_credentials_secret("creds", h.sim.token_secret()).await;
    h.create_cluster("auth", json!({"credentialsRef": {"name": "creds"}}))
        .await;
    h
}

/// Whether a Warning event with `reason` was recorded for the object `name`.
async fn warning_event(h: &Harness, name: &str, reason: &str) -> bool {
    let events: Api<k8s_openapi::api::core::v1::Event> = Api::namespaced(h.client.clone(), NS);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .iter()
        .any(|e| {
            e.involved_object.name.as_deref() == Some(name)
                && e.type_.as_deref() == Some("Warning")
                && e.reason.as_deref() == Some(reason)
        })
}

async fn wait_cluster_reason(h: &Harness, reason: &str) {
    let pcs: Api<ProxmoxCluster> = h.pcs();
    wait_for(60, &format!("ProxmoxAvailable reason {reason}"), || {
        let pcs = pcs.clone();
        async move {
            let pc = pcs.get("auth").await.unwrap();
            let cond = pc
                .status
                .as_ref()?
                .conditions
                .as_ref()?
                .iter()
                .find(|c| c.type_ == "ProxmoxAvailable")?
                .clone();
            (cond.reason == reason).then_some(())
        }
    })
    .await;
}

/// Rotates the token in Proxmox and in the Secret.
async fn rotate(h: &Harness) {
    h.sim.state().set_token(h.sim.token_id(), "rotated-secret");
    h.create_credentials_secret("creds", "rotated-secret").await;
}

/// Proxmox requests during an observation window of `secs` (a measurement, not a synchronisation).
async fn requests_during(h: &Harness, secs: u64) -> u64 {
    let before = h.sim.state().request_total();
    tokio::time::sleep(Duration::from_secs(secs)).await;
    h.sim.state().request_total() - before
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_revoked_mid_provisioning_backs_off_and_rotation_recovers() {
    let h = start().await;
    let st = h.sim.state();
    // Hold the clone task, so the token is revoked while the VM is being created.
    st.hold_tasks();
    h.create_machine(
        "auth",
        "m1",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({}),
    )
    .await;
    wait_for(60, "the clone started", || async {
        (!h.sim.state().non_template_vmids().is_empty()).then_some(())
    })
    .await;
    assert!(st.revoke_token(h.sim.token_id()));
    st.release_tasks();

    let pm = h.wait_reason("m1", AUTH_FAILED, 60).await;
    let cond = pm.condition("VirtualMachineProvisioned").unwrap();
    assert!(
        cond.message.contains("Authentication failed!"),
        "{}",
        cond.message
    );
    wait_cluster_reason(&h, AUTH_FAILED).await;
    wait_for(30, "Warning event ProxmoxAuthenticationFailed", || async {
        warning_event(&h, "m1", AUTH_FAILED).await.then_some(())
    })
    .await;

    // The revoked window: no progress, and no hot loop (the machine and the cluster back off
    // exponentially; a retry loop without backoff would send thousands of requests).
    let requests = requests_during(&h, 17).await;
    eprintln!("Proxmox requests during 17 s with a revoked token: {requests}");
    assert!(requests <= 60, "{requests} requests while the token was revoked");
    let pm = h.pms().get("m1").await.unwrap();
    assert!(!pm.is_provisioned());
    assert_eq!(reason_of(&pm).as_deref(), Some(AUTH_FAILED));

    // Rotation: the machine's next backoff is now well over 10 s; the Secret watch requeues it at once.
    let rotated = Instant::now();
    rotate(&h).await;
    h.wait_provisioned("m1", 60).await;
    let took = rotated.elapsed();
    eprintln!("provisioned {took:?} after the rotation");
    assert!(took < Duration::from_secs(12), "recovery took {took:?}");
    wait_cluster_reason(&h, "Provisioned").await;
    assert_eq!(
        st.request_count("POST /nodes/{node}/qemu/{vmid}/clone"),
        1,
        "one clone"
    );
    assert_eq!(st.non_template_vmids().len(), 1);
    assert!(h.controllers_alive());

    h.delete_machine("m1", 60).await;
    let (vms, isos, ipam) = h.leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn token_revoked_mid_deletion_stalls_and_rotation_completes_it() {
    let h = start().await;
    let st = h.sim.state();
    h.create_machine(
        "auth",
        "d1",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({}),
    )
    .await;
    h.wait_provisioned("d1", 60).await;
    assert_eq!(st.non_template_vmids().len(), 1);

    assert!(st.revoke_token(h.sim.token_id()));
    h.machines().delete("d1", &DeleteParams::default()).await.unwrap();
    let pm = h
        .wait_pm(
            "d1",
            60,
            "deleting with reason ProxmoxAuthenticationFailed",
            |pm| pm.metadata.deletion_timestamp.is_some() && reason_of(pm).as_deref() == Some(AUTH_FAILED),
        )
        .await;
    assert!(
        pm.condition("VirtualMachineProvisioned")
            .unwrap()
            .message
            .contains("Authentication failed!")
    );
    wait_for(30, "Warning event ProxmoxAuthenticationFailed", || async {
        warning_event(&h, "d1", AUTH_FAILED).await.then_some(())
    })
    .await;
    let requests = requests_during(&h, 6).await;
    eprintln!("Proxmox requests during 6 s of a stalled deletion: {requests}");
    assert!(requests <= 40, "{requests} requests while the token was revoked");
    assert_eq!(st.non_template_vmids().len(), 1, "the VM is left alone");
    assert!(
        h.pms().get_opt("d1").await.unwrap().is_some(),
        "the deletion stalls"
    );

    rotate(&h).await;
    wait_for(60, "d1 deleted", || async {
        let gone = h.pms().get_opt("d1").await.unwrap().is_none()
            && h.machines().get_opt("d1").await.unwrap().is_none();
        gone.then_some(())
    })
    .await;
    let (vms, isos, ipam) = h.leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    assert!(st.leftovers().is_empty(), "{:?}", st.leftovers());
    assert!(h.controllers_alive());
    h.stop().await;
}
