//! The ProxmoxCluster's InClusterIPPools against the in-cluster IPAM CRDs users run: v1.0 (no
//! `spec.addressReuseGracePeriodSeconds`) and v1.1 (with it). kube-apiserver refuses a
//! server-side apply of a field its CRD schema does not declare, so the field is only sent when
//! the served schema has it. A pool apply the server still refuses reaches the object as a
//! condition reason and a Warning event that `kubectl describe` shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster_support;

use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::v1alpha2::ProxmoxCluster;
use cluster_support::{Harness, IpamPoolCrd, NS, cond, spec, wait_for};
use k8s_openapi::api::core::v1::Event as CoreEvent;
use kube::api::{Api, ListParams};
use serde_json::json;

const POOL_FAILED: &str = "InClusterIPPoolReconciliationFailed";

async fn ready_pool(ipam: IpamPoolCrd) -> (Harness, InClusterIPPool) {
    let h = Harness::start_with_ipam(ipam).await;
    h.create_secret("creds").await;
    let c = h.create_cluster("pools", false).await;
    h.create_pc("pools", Some(&c), spec(Some("creds")), json!({}))
        .await;
    h.wait_available("pools", "True", "Provisioned").await;
    let pool = Api::<InClusterIPPool>::namespaced(h.client.clone(), NS)
        .get("pools-v4-icip")
        .await
        .unwrap();
    (h, pool)
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_apply_with_in_cluster_ipam_v1_0() {
    let (h, pool) = ready_pool(IpamPoolCrd::V1_0).await;
    assert_eq!(pool.spec.address_reuse_grace_period_seconds, None);
    assert_eq!(pool.spec.addresses, ["10.10.10.10-10.10.10.50"]);
    assert_eq!(pool.spec.gateway.as_deref(), Some("10.10.10.1"));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_apply_with_in_cluster_ipam_v1_1() {
    let (h, pool) = ready_pool(IpamPoolCrd::V1_1).await;
    assert_eq!(pool.spec.address_reuse_grace_period_seconds, Some(60));
    h.stop().await;
}

/// The very failure of the real-apiserver run (a pool field the served CRD does not declare):
/// `ProxmoxAvailable=False` and `Ready=False` with the step's reason, a Warning event, both shown
/// by `kubectl describe`; once the CRD is fixed the cluster becomes ready without a restart.
#[tokio::test(flavor = "multi_thread")]
async fn a_refused_pool_apply_is_a_condition_and_a_warning_event() {
    let h = Harness::start_with_ipam(IpamPoolCrd::WithoutGateway).await;
    h.create_secret("creds").await;
    let c = h.create_cluster("broken", false).await;
    h.create_pc("broken", Some(&c), spec(Some("creds")), json!({}))
        .await;
    let pc = h.wait_available("broken", "False", POOL_FAILED).await;
    let s = pc.status.as_ref().unwrap();
    let available = cond(s, "ProxmoxAvailable").unwrap();
    assert!(
        available
            .message
            .contains(&format!("applying InClusterIPPool {NS}/broken-v4-icip")),
        "{available:?}"
    );
    assert!(available.message.contains("gateway"), "{available:?}");
    let ready = cond(s, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", POOL_FAILED)
    );

    // The Warning event, read through core/v1 the way `kubectl describe` reads it.
    let events: Api<CoreEvent> = Api::namespaced(h.client.clone(), NS);
    let sel = ListParams::default().fields("involvedObject.name=broken,involvedObject.kind=ProxmoxCluster");
    let ev = wait_for(30, "Warning event", || async {
        let list = events.list(&sel).await.unwrap();
        list.items
            .into_iter()
            .find(|e| e.reason.as_deref() == Some(POOL_FAILED))
    })
    .await;
    assert_eq!(ev.type_.as_deref(), Some("Warning"));
    assert!(
        ev.message
            .as_deref()
            .unwrap_or_default()
            .contains("broken-v4-icip")
    );

    if let Some(out) = kubectl_describe(&h, "broken") {
        let conditions = out.split("Events:").next().unwrap_or_default();
        assert!(conditions.contains(POOL_FAILED), "{out}");
        let events = out.split("Events:").nth(1).unwrap_or_default();
        assert!(
            events.contains("Warning") && events.contains(POOL_FAILED),
            "{out}"
        );
    }

    // Fix the CRD: the controller retries with backoff and the cluster becomes ready. The backoff
    // has grown while the failure was examined (longer under load): allow for its next step.
    h.env.install_crds(vec![IpamPoolCrd::V1_0.crd()]).await.unwrap();
    let pcs: Api<ProxmoxCluster> = Api::namespaced(h.client.clone(), NS);
    wait_for(
        120,
        "ProxmoxAvailable=True/Provisioned after the CRD fix",
        || async {
            let pc = pcs.get_opt("broken").await.unwrap()?;
            let ok = cond(pc.status.as_ref()?, "ProxmoxAvailable")
                .is_some_and(|c| c.status == "True" && c.reason == "Provisioned");
            ok.then_some(())
        },
    )
    .await;
    h.stop().await;
}

/// `kubectl describe proxmoxcluster NAME`, or `None` (with one line) when kubectl is missing.
fn kubectl_describe(h: &Harness, name: &str) -> Option<String> {
    let out = std::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(h.env.kubeconfig_path())
        .args(["-n", NS, "describe", "proxmoxcluster", name])
        .output();
    match out {
        Ok(o) => {
            assert!(
                o.status.success(),
                "kubectl describe failed: {}",
                String::from_utf8_lossy(&o.stderr)
            );
            Some(String::from_utf8_lossy(&o.stdout).into_owned())
        }
        Err(_) => {
            eprintln!("skipped the kubectl describe check: kubectl is not on PATH");
            None
        }
    }
}
