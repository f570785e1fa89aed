//! ProxmoxCluster controller against the test control plane and pve-sim over HTTPS: ready path,
//! credentials, Proxmox reachability, pause, externally managed objects.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster_support;

use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::consts::{CLUSTER_FINALIZER, SECRET_FINALIZER};
use capmox_api::v1alpha1;
use cluster_support::{Harness, NS, cond, spec, wait_for};
use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn ready_path_with_secret_credentials() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    let c = h.create_cluster("demo", false).await;
    h.create_pc("demo", Some(&c), spec(Some("creds")), json!({}))
        .await;

    let pc = h.wait_available("demo", "True", "Provisioned").await;
    let s = pc.status.as_ref().unwrap();
    assert_eq!(s.initialization.as_ref().unwrap().provisioned, Some(true));
    assert_eq!(cond(s, "Ready").unwrap().status, "True");
    assert_eq!(cond(s, "Paused").unwrap().reason, "NotPaused");
    assert_eq!(
        cond(s, "Ready").unwrap().observed_generation,
        pc.metadata.generation
    );
    assert!(pc.finalizers().iter().any(|f| f == CLUSTER_FINALIZER));
    assert_eq!(s.in_cluster_ip_pool_ref.as_ref().unwrap()[0].name, "demo-v4-icip");

    // v1alpha1 readers (CAPI v1beta1 contract) see status.ready through the conversion.
    let v1: v1alpha1::ProxmoxCluster = capmox_api::conversion::from_hub(&pc).unwrap();
    assert_eq!(v1.status.as_ref().and_then(|s| s.ready), Some(true));

    // The Secret is adopted: non-controller ownerRef + finalizer.
    let secret = h.secrets().get("creds").await.unwrap();
    let owner = secret
        .owner_references()
        .iter()
        .find(|r| r.kind == "ProxmoxCluster")
        .expect("ownerRef to the ProxmoxCluster");
    assert_eq!(owner.api_version, "infrastructure.cluster.x-k8s.io/v1alpha2");
    assert_eq!(owner.name, "demo");
    assert_ne!(owner.controller, Some(true));
    assert!(secret.finalizers().iter().any(|f| f == SECRET_FINALIZER));

    // Proxmox is probed on every reconcile (resync), through one cached client.
    let before = h.sim.state().request_count("GET /version");
    let reconciles = h.ctx.metrics.reconcile_count("proxmoxcluster");
    wait_for(30, "two more probes", || async {
        (h.sim.state().request_count("GET /version") >= before + 2).then_some(())
    })
    .await;
    assert!(h.ctx.metrics.reconcile_count("proxmoxcluster") > reconciles);
    assert_eq!(h.ctx.proxmox.clients_built(), 1, "one client per secret version");
    assert_eq!(h.connected_gauge("demo"), Some(1));

    // Status is written only on change: the ready timestamp does not move on resyncs, and once
    // settled (a reconcile started before the first answer may still write), two more resyncs
    // leave the object as it was.
    let t0 = cond(s, "Ready").unwrap().last_transition_time.clone();
    let rv0 = h.pcs().get("demo").await.unwrap().resource_version();
    let probes = h.sim.state().request_count("GET /version");
    wait_for(30, "two more probes after settling", || async {
        (h.sim.state().request_count("GET /version") >= probes + 2).then_some(())
    })
    .await;
    let later = h.pcs().get("demo").await.unwrap();
    assert_eq!(
        cond(later.status.as_ref().unwrap(), "Ready")
            .unwrap()
            .last_transition_time,
        t0
    );
    assert_eq!(
        later.resource_version(),
        rv0,
        "resyncs do not rewrite an unchanged status"
    );

    // A "Ready" event was recorded.
    let events: Api<Event> = Api::namespaced(h.client.clone(), NS);
    wait_for(30, "Ready event", || async {
        let list = events.list(&ListParams::default()).await.unwrap();
        list.items
            .iter()
            .any(|e| {
                e.reason.as_deref() == Some("Ready")
                    && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("demo")
            })
            .then_some(())
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn global_client_is_used_without_credentials_ref() {
    let h = Harness::start_with(true).await;
    let c = h.create_cluster("g", false).await;
    h.create_pc("g", Some(&c), spec(None), json!({})).await;
    h.wait_available("g", "True", "Provisioned").await;
    assert_eq!(h.ctx.proxmox.clients_built(), 0);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_credentials_at_all() {
    let h = Harness::start().await;
    let c = h.create_cluster("nocreds", false).await;
    h.create_pc("nocreds", Some(&c), spec(None), json!({})).await;
    let pc = h.wait_available("nocreds", "False", "CredentialsNotFound").await;
    let s = pc.status.unwrap();
    assert_eq!(
        cond(&s, "ProxmoxAvailable").unwrap().message,
        "No credentials found, ProxmoxCluster missing credentialsRef"
    );
    assert_eq!(cond(&s, "Ready").unwrap().reason, "CredentialsNotFound");
    assert_ne!(s.initialization.and_then(|i| i.provisioned), Some(true));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn missing_secret_then_created() {
    let h = Harness::start().await;
    let c = h.create_cluster("late", false).await;
    h.create_pc("late", Some(&c), spec(Some("late-creds")), json!({}))
        .await;
    let pc = h.wait_available("late", "False", "CredentialsNotFound").await;
    assert!(
        cond(pc.status.as_ref().unwrap(), "ProxmoxAvailable")
            .unwrap()
            .message
            .contains("late-creds")
    );

    h.create_secret("late-creds").await;
    h.wait_available("late", "True", "Provisioned").await;
    let secret = h.secrets().get("late-creds").await.unwrap();
    assert!(
        secret
            .owner_references()
            .iter()
            .any(|r| r.kind == "ProxmoxCluster" && r.name == "late")
    );
    assert!(secret.finalizers().iter().any(|f| f == SECRET_FINALIZER));
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn proxmox_unreachable_and_recovery() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    let c = h.create_cluster("flaky", false).await;
    h.create_pc("flaky", Some(&c), spec(Some("creds")), json!({}))
        .await;
    h.wait_available("flaky", "True", "Provisioned").await;
    assert_eq!(h.connected_gauge("flaky"), Some(1));

    h.proxy.set_up(false);
    let pc = h.wait_available("flaky", "False", "ProxmoxUnreachable").await;
    let s = pc.status.as_ref().unwrap();
    assert!(!cond(s, "ProxmoxAvailable").unwrap().message.is_empty());
    assert_eq!(cond(s, "Ready").unwrap().status, "False");
    assert_eq!(h.connected_gauge("flaky"), Some(0));

    h.proxy.set_up(true);
    h.wait_available("flaky", "True", "Provisioned").await;
    assert_eq!(h.connected_gauge("flaky"), Some(1));
    assert_eq!(
        h.ctx.proxmox.clients_built(),
        1,
        "the cached client survives the outage"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn paused_cluster_only_gets_paused_condition() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    let c = h.create_cluster("sleepy", true).await;
    h.create_pc("sleepy", Some(&c), spec(Some("creds")), json!({}))
        .await;
    let pc = h
        .wait_status("sleepy", "Paused=True", |s| {
            cond(s, "Paused").is_some_and(|c| c.status == "True")
        })
        .await;
    let s = pc.status.as_ref().unwrap();
    assert_eq!(cond(s, "Paused").unwrap().reason, "Paused");
    assert!(cond(s, "Paused").unwrap().message.contains("spec.paused"));
    assert!(cond(s, "ProxmoxAvailable").is_none());
    assert!(
        pc.finalizers().is_empty(),
        "nothing but the condition while paused"
    );
    let pools: Api<InClusterIPPool> = Api::namespaced(h.client.clone(), NS);
    assert!(pools.list(&ListParams::default()).await.unwrap().items.is_empty());

    // Unpausing the Cluster triggers a reconcile through the Cluster watch.
    h.clusters()
        .patch(
            "sleepy",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    let pc = h.wait_available("sleepy", "True", "Provisioned").await;
    assert_eq!(
        cond(pc.status.as_ref().unwrap(), "Paused").unwrap().reason,
        "NotPaused"
    );

    // The paused annotation on the ProxmoxCluster pauses it as well.
    h.pcs()
        .patch(
            "sleepy",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"annotations": {"cluster.x-k8s.io/paused": ""}}})),
        )
        .await
        .unwrap();
    let pc = h
        .wait_status("sleepy", "Paused=True by annotation", |s| {
            cond(s, "Paused").is_some_and(|c| c.status == "True")
        })
        .await;
    assert!(
        cond(pc.status.as_ref().unwrap(), "Paused")
            .unwrap()
            .message
            .contains("annotation")
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn externally_managed_is_left_alone() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    let ext = h.create_cluster("ext", false).await;
    h.create_pc(
        "ext",
        Some(&ext),
        spec(Some("creds")),
        json!({"cluster.x-k8s.io/managed-by": "kamaji"}),
    )
    .await;
    // A normal cluster created afterwards becomes ready: the controller is working.
    let c = h.create_cluster("normal", false).await;
    h.create_pc("normal", Some(&c), spec(Some("creds")), json!({}))
        .await;
    h.wait_available("normal", "True", "Provisioned").await;
    let pc = h.pcs().get("ext").await.unwrap();
    assert!(
        pc.status.is_none(),
        "no status writes on externally managed objects"
    );
    assert!(pc.finalizers().is_empty());
    let pools: Api<InClusterIPPool> = Api::namespaced(h.client.clone(), NS);
    assert!(pools.get_opt("ext-v4-icip").await.unwrap().is_none());
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn no_owner_cluster_waits() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    h.create_pc("orphan", None, spec(Some("creds")), json!({})).await;
    let c = h.create_cluster("other", false).await;
    h.create_pc("other", Some(&c), spec(Some("creds")), json!({}))
        .await;
    h.wait_available("other", "True", "Provisioned").await;
    let pc = h.pcs().get("orphan").await.unwrap();
    assert!(pc.status.is_none() && pc.finalizers().is_empty());

    // Once the Cluster exists and owns it, it is reconciled.
    let oc = h.create_cluster("orphan", false).await;
    h.pcs()
        .patch(
            "orphan",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": [{
                "apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "orphan",
                "uid": oc.metadata.uid.clone().unwrap(),
            }]}})),
        )
        .await
        .unwrap();
    h.wait_available("orphan", "True", "Provisioned").await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn capi_v1beta1_cluster_is_watched_and_read() {
    use capmox_api::capi::v1beta1;
    use k8s_openapi::api::core::v1::ObjectReference;
    use kube::api::PostParams;

    // CAPI v1.10: only cluster.x-k8s.io/v1beta1 is served; refs carry an apiVersion.
    let h = Harness::start_opts(false, true).await;
    h.create_secret("creds").await;
    let clusters: Api<v1beta1::Cluster> = Api::namespaced(h.client.clone(), NS);
    let mut c = v1beta1::Cluster::new(
        "old",
        v1beta1::ClusterSpec {
            paused: Some(true),
            infrastructure_ref: Some(ObjectReference {
                api_version: Some("infrastructure.cluster.x-k8s.io/v1alpha1".into()),
                kind: Some("ProxmoxCluster".into()),
                name: Some("old".into()),
                namespace: Some(NS.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
    );
    c.metadata.namespace = Some(NS.into());
    let c = clusters.create(&PostParams::default(), &c).await.unwrap();
    let owner = json!({"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "Cluster", "name": "old",
        "uid": c.metadata.uid.clone().unwrap(), "controller": true});
    h.create_pc("old", None, spec(Some("creds")), json!({})).await;
    h.pcs()
        .patch(
            "old",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"ownerReferences": [owner]}})),
        )
        .await
        .unwrap();
    h.wait_status("old", "Paused=True", |s| {
        cond(s, "Paused").is_some_and(|c| c.status == "True")
    })
    .await;

    // Unpausing the v1beta1 Cluster reaches the ProxmoxCluster through the v1beta1 watch.
    clusters
        .patch(
            "old",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    let pc = h.wait_available("old", "True", "Provisioned").await;
    let v1: v1alpha1::ProxmoxCluster = capmox_api::conversion::from_hub(&pc).unwrap();
    assert_eq!(v1.status.as_ref().and_then(|s| s.ready), Some(true));
    h.stop().await;
}

/// A watch cache can hand the controller a copy older than the object. A reconcile of such a copy
/// must put nothing of it back: a finalizer write that conflicts writes nothing at all (no status,
/// no Warning event), and a failure recorded on a copy from before the first status write keeps
/// `initialization`, the zone references and the node inventory (machines look their pools up in
/// the zone references; a provisioned infrastructure never goes back).
#[tokio::test(flavor = "multi_thread")]
async fn reconciles_of_out_of_date_copies_lose_nothing() {
    use capmox::controllers::cluster::reconcile_copy;
    let mut h = Harness::start_with(true).await;
    let c = h.create_cluster("stale", false).await;
    let created = h.create_pc("stale", Some(&c), spec(None), json!({})).await;
    h.wait_available("stale", "True", "Provisioned").await;
    h.stop_controller().await;
    let settled = h.pcs().get("stale").await.unwrap();
    let s = settled.status.clone().unwrap();
    assert!(s.in_cluster_zone_ref.is_some(), "{s:?}");
    assert!(s.node_inventory.is_some(), "{s:?}");

    // The copy from before the finalizer: its write conflicts and nothing else is written.
    let err = reconcile_copy(h.ctx.clone(), created.clone()).await.unwrap_err();
    assert!(err.is_conflict(), "{err}");
    let after = h.pcs().get("stale").await.unwrap();
    assert_eq!(
        after.resource_version(),
        settled.resource_version(),
        "nothing written"
    );
    let events: Api<Event> = Api::namespaced(h.client.clone(), NS);
    let warnings: Vec<String> = events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("stale"))
        .filter(|e| e.type_.as_deref() == Some("Warning"))
        .filter_map(|e| e.reason)
        .collect();
    assert!(
        warnings.is_empty(),
        "no Warning for an out-of-date copy: {warnings:?}"
    );

    // A copy with the finalizer but without any status, while Proxmox is unreachable: the
    // failure is recorded, and nothing the copy lacks is cleared.
    let mut old = settled.clone();
    old.status = None;
    h.proxy.set_up(false);
    let err = reconcile_copy(h.ctx.clone(), old).await.unwrap_err();
    assert_eq!(err.reason(), "ProxmoxUnreachable", "{err}");
    let after = h.pcs().get("stale").await.unwrap();
    let a = after.status.clone().unwrap();
    assert_eq!(cond(&a, "ProxmoxAvailable").unwrap().reason, "ProxmoxUnreachable");
    assert_eq!(
        a.initialization.as_ref().and_then(|i| i.provisioned),
        Some(true),
        "provisioned never goes back"
    );
    assert_eq!(a.in_cluster_zone_ref, s.in_cluster_zone_ref);
    assert_eq!(a.in_cluster_ip_pool_ref, s.in_cluster_ip_pool_ref);
    assert_eq!(a.node_inventory, s.node_inventory);
    assert_eq!(a.failure_domains, s.failure_domains);
    h.proxy.set_up(true);
    h.stop().await;
}
