//! ProxmoxCluster controller: zones → InClusterIPPools, the Kamaji endpoint hand-over and the
//! delete path (waits for the owner Cluster and the cluster's ProxmoxMachines, releases the Secret).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster_support;

use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::consts::{CLUSTER_FINALIZER, SECRET_FINALIZER};
use capmox_api::v1alpha2::ProxmoxMachine;
use cluster_support::{Harness, NS, cond, spec, wait_for};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use serde_json::json;

#[tokio::test(flavor = "multi_thread")]
async fn zones_create_pools_with_names_labels_annotations_and_refs() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    let c = h.create_cluster("zoned", false).await;
    let mut s = spec(Some("creds"));
    s["ipv4Config"]["metric"] = json!(150);
    s["ipv6Config"] = json!({"addresses": ["fd00::10-fd00::50"], "prefix": 64, "gateway": "fd00::1"});
    s["zoneConfig"] = json!([
        {"zone": "zone-a", "dnsServers": ["10.0.0.1"],
         "ipv4Config": {"addresses": ["10.20.0.10-10.20.0.20"], "prefix": 24, "gateway": "10.20.0.1"}},
        {"zone": "zone-b", "dnsServers": ["10.0.0.1"],
         "ipv4Config": {"addresses": ["10.30.0.0/24"], "prefix": 24, "gateway": "10.30.0.1"},
         "ipv6Config": {"addresses": ["fd30::/64"], "prefix": 64, "gateway": "fd30::1"}},
        {"zone": "zone-c", "dnsServers": ["10.0.0.1"],
         "ipv6Config": {"addresses": ["fd40::10-fd40::20"], "prefix": 64, "gateway": "fd40::1"}},
    ]);
    let created = h.create_pc("zoned", Some(&c), s, json!({})).await;
    let pc = h.wait_available("zoned", "True", "Provisioned").await;
    let status = pc.status.as_ref().unwrap();

    let names: Vec<_> = status
        .in_cluster_ip_pool_ref
        .as_ref()
        .unwrap()
        .iter()
        .map(|r| r.name.clone())
        .collect();
    assert_eq!(
        names,
        [
            "zoned-v4-icip",
            "zoned-v6-icip",
            "zoned-zone-a-v4-icip",
            "zoned-zone-b-v4-icip",
            "zoned-zone-b-v6-icip",
            "zoned-zone-c-v6-icip"
        ]
    );
    let zones = status.in_cluster_zone_ref.as_ref().unwrap();
    let zone = |z: &str| zones.iter().find(|r| r.zone.as_deref() == Some(z)).unwrap();
    let n = |r: &Option<k8s_openapi::api::core::v1::LocalObjectReference>| r.as_ref().map(|r| r.name.clone());
    assert_eq!(zones.len(), 4);
    assert_eq!(
        n(&zone("default").in_cluster_ip_pool_ref_v4).as_deref(),
        Some("zoned-v4-icip")
    );
    assert_eq!(
        n(&zone("default").in_cluster_ip_pool_ref_v6).as_deref(),
        Some("zoned-v6-icip")
    );
    assert_eq!(
        n(&zone("zone-a").in_cluster_ip_pool_ref_v4).as_deref(),
        Some("zoned-zone-a-v4-icip")
    );
    assert_eq!(n(&zone("zone-a").in_cluster_ip_pool_ref_v6), None);
    assert_eq!(
        n(&zone("zone-b").in_cluster_ip_pool_ref_v4).as_deref(),
        Some("zoned-zone-b-v4-icip")
    );
    assert_eq!(
        n(&zone("zone-b").in_cluster_ip_pool_ref_v6).as_deref(),
        Some("zoned-zone-b-v6-icip")
    );
    assert_eq!(
        n(&zone("zone-c").in_cluster_ip_pool_ref_v6).as_deref(),
        Some("zoned-zone-c-v6-icip")
    );

    let pools: Api<InClusterIPPool> = Api::namespaced(h.client.clone(), NS);
    for (name, zone, family) in [
        ("zoned-v4-icip", "default", "ipv4"),
        ("zoned-v6-icip", "default", "ipv6"),
        ("zoned-zone-a-v4-icip", "zone-a", "ipv4"),
        ("zoned-zone-b-v4-icip", "zone-b", "ipv4"),
        ("zoned-zone-b-v6-icip", "zone-b", "ipv6"),
        ("zoned-zone-c-v6-icip", "zone-c", "ipv6"),
    ] {
        let p = pools.get(name).await.unwrap();
        assert_eq!(p.labels()["topology.kubernetes.io/proxmox-zone"], zone, "{name}");
        assert_eq!(
            p.annotations()["ipam.capmox.cluster.x-k8s.io/ip-family"],
            family,
            "{name}"
        );
        let owner = p
            .owner_references()
            .iter()
            .find(|r| r.kind == "ProxmoxCluster")
            .unwrap();
        assert_eq!(owner.controller, Some(true));
        assert_eq!(owner.uid, created.metadata.uid.clone().unwrap());
        assert_eq!(owner.api_version, "infrastructure.cluster.x-k8s.io/v1alpha2");
    }
    let v4 = pools.get("zoned-v4-icip").await.unwrap();
    assert_eq!(
        v4.annotations()["ipam.capmox.cluster.x-k8s.io/gateway-metric"],
        "150"
    );
    assert_eq!(v4.annotations()["metric"], "150");
    assert_eq!(v4.spec.addresses, ["10.10.10.10-10.10.10.50"]);
    assert_eq!(v4.spec.prefix, 24);
    assert_eq!(v4.spec.gateway.as_deref(), Some("10.10.10.1"));
    let b6 = pools.get("zoned-zone-b-v6-icip").await.unwrap();
    assert_eq!(b6.spec.addresses, ["fd30::/64"]);
    assert_eq!(b6.spec.prefix, 64);

    // A pool changed behind our back is put back (create-or-update).
    pools
        .patch(
            "zoned-zone-a-v4-icip",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"prefix": 16}})),
        )
        .await
        .unwrap();
    wait_for(30, "pool restored", || async {
        (pools.get("zoned-zone-a-v4-icip").await.unwrap().spec.prefix == 24).then_some(())
    })
    .await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn kamaji_patches_endpoint_then_ready() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    let c = h.create_cluster("tenant", false).await;
    let mut s = spec(Some("creds"));
    s.as_object_mut().unwrap().remove("controlPlaneEndpoint");
    s["externalManagedControlPlane"] = json!(true);
    h.create_pc("tenant", Some(&c), s, json!({})).await;

    let pc = h
        .wait_available("tenant", "False", "MissingControlPlaneEndpoint")
        .await;
    let st = pc.status.as_ref().unwrap();
    assert_eq!(
        cond(st, "ProxmoxAvailable").unwrap().message,
        "The ProxmoxCluster is missing or waiting for a ControlPlaneEndpoint"
    );
    assert_eq!(cond(st, "Ready").unwrap().status, "False");
    assert_ne!(st.initialization.as_ref().and_then(|i| i.provisioned), Some(true));
    let pools: Api<InClusterIPPool> = Api::namespaced(h.client.clone(), NS);
    assert!(pools.get_opt("tenant-v4-icip").await.unwrap().is_none());

    // What Kamaji does: a merge patch of spec.controlPlaneEndpoint only (port as a JSON number).
    h.pcs()
        .patch(
            "tenant",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"controlPlaneEndpoint": {"host": "192.0.2.10", "port": 443}}})),
        )
        .await
        .unwrap();
    let pc = h.wait_available("tenant", "True", "Provisioned").await;
    assert_eq!(
        pc.status
            .as_ref()
            .unwrap()
            .initialization
            .as_ref()
            .unwrap()
            .provisioned,
        Some(true)
    );
    let ep = pc.spec.control_plane_endpoint.unwrap();
    assert_eq!(
        (ep.host.as_deref(), ep.port),
        (Some("192.0.2.10"), Some(443)),
        "endpoint kept as patched"
    );
    assert!(pools.get_opt("tenant-v4-icip").await.unwrap().is_some());
    h.stop().await;
}

async fn create_machine(h: &Harness, name: &str, cluster: &str) {
    let m: ProxmoxMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "namespace": NS, "labels": {"cluster.x-k8s.io/cluster-name": cluster}},
        "spec": {"sourceNode": "pve1", "templateID": 100, "network": {"networkDevices": [{"bridge": "vmbr0"}]}},
    }))
    .unwrap();
    Api::<ProxmoxMachine>::namespaced(h.client.clone(), NS)
        .create(&PostParams::default(), &m)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn delete_waits_for_cluster_and_machines_then_releases_secret() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    let c = h.create_cluster("doomed", false).await;
    h.create_pc("doomed", Some(&c), spec(Some("creds")), json!({}))
        .await;
    h.wait_available("doomed", "True", "Provisioned").await;
    create_machine(&h, "doomed-m1", "doomed").await;
    create_machine(&h, "other-m1", "other").await;

    // Deleting only the ProxmoxCluster while its Cluster lives is refused.
    h.pcs().delete("doomed", &DeleteParams::default()).await.unwrap();
    let pc = h
        .wait_status("doomed", "Deleting (cluster alive)", |s| {
            cond(s, "ProxmoxAvailable")
                .is_some_and(|c| c.reason == "Deleting" && c.message.contains("owning Cluster"))
        })
        .await;
    assert!(pc.metadata.deletion_timestamp.is_some());
    assert!(pc.finalizers().iter().any(|f| f == CLUSTER_FINALIZER));
    // It looks again on its own: a relisting watch reports no deletion, so the Cluster's
    // deletion event alone is not enough (a CI run under load once waited for good).
    let again = capmox::controllers::cluster::reconcile_copy(h.ctx.clone(), pc.clone())
        .await
        .unwrap();
    assert_eq!(
        again,
        Action::requeue(cluster_support::fast_settings().machine_wait)
    );

    // With the Cluster gone, it waits for the cluster's ProxmoxMachines (not other clusters').
    h.clusters()
        .delete("doomed", &DeleteParams::default())
        .await
        .unwrap();
    let pc = h
        .wait_status("doomed", "Deleting (machines)", |s| {
            cond(s, "ProxmoxAvailable").is_some_and(|c| c.message.contains("1 ProxmoxMachine"))
        })
        .await;
    assert!(pc.finalizers().iter().any(|f| f == CLUSTER_FINALIZER));
    let secret = h.secrets().get("creds").await.unwrap();
    assert!(
        secret.finalizers().iter().any(|f| f == SECRET_FINALIZER),
        "secret held while deleting"
    );

    Api::<ProxmoxMachine>::namespaced(h.client.clone(), NS)
        .delete("doomed-m1", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(30, "ProxmoxCluster gone", || async {
        h.pcs().get_opt("doomed").await.unwrap().is_none().then_some(())
    })
    .await;
    let secret = h.secrets().get("creds").await.unwrap();
    assert!(
        !secret
            .owner_references()
            .iter()
            .any(|r| r.kind == "ProxmoxCluster"),
        "ownerRef removed"
    );
    assert!(
        !secret.finalizers().iter().any(|f| f == SECRET_FINALIZER),
        "finalizer removed"
    );
    let left = Api::<ProxmoxMachine>::namespaced(h.client.clone(), NS)
        .list(&ListParams::default())
        .await
        .unwrap();
    assert_eq!(left.items.len(), 1, "other clusters' machines are untouched");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn shared_secret_keeps_finalizer_for_remaining_owner() {
    let h = Harness::start().await;
    h.create_secret("shared").await;
    let a = h.create_cluster("a", false).await;
    let b = h.create_cluster("b", false).await;
    h.create_pc("a", Some(&a), spec(Some("shared")), json!({})).await;
    h.create_pc("b", Some(&b), spec(Some("shared")), json!({})).await;
    h.wait_available("a", "True", "Provisioned").await;
    h.wait_available("b", "True", "Provisioned").await;
    wait_for(30, "two owners on the secret", || async {
        let s = h.secrets().get("shared").await.unwrap();
        (s.owner_references().len() == 2).then_some(())
    })
    .await;
    h.clusters().delete("a", &DeleteParams::default()).await.unwrap();
    h.pcs().delete("a", &DeleteParams::default()).await.unwrap();
    wait_for(30, "ProxmoxCluster a gone", || async {
        h.pcs().get_opt("a").await.unwrap().is_none().then_some(())
    })
    .await;
    let s = h.secrets().get("shared").await.unwrap();
    let owners: Vec<_> = s.owner_references().iter().map(|r| r.name.clone()).collect();
    assert_eq!(owners, ["b"]);
    assert!(
        s.finalizers().iter().any(|f| f == SECRET_FINALIZER),
        "b still needs the secret"
    );
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn failure_domains_and_node_inventory() {
    let h = Harness::start().await;
    h.create_secret("creds").await;
    let c = h.create_cluster("fd", false).await;
    let mut s = spec(Some("creds"));
    s["allowedNodes"] = json!(["pve1", "pve2"]);
    s["zoneConfig"] = json!([
        {"zone": "rack-1", "dnsServers": ["10.0.0.1"],
         "ipv4Config": {"addresses": ["10.20.0.10-10.20.0.20"], "prefix": 24, "gateway": "10.20.0.1"}},
        {"zone": "rack-2", "dnsServers": ["10.0.0.1"],
         "ipv4Config": {"addresses": ["10.30.0.10-10.30.0.20"], "prefix": 24, "gateway": "10.30.0.1"}},
    ]);
    h.create_pc("fd", Some(&c), s, json!({})).await;
    let pc = h
        .wait_status("fd", "ready with inventory", |s| {
            cond(s, "Ready").is_some_and(|c| c.status == "True") && s.node_inventory.is_some()
        })
        .await;
    let st = pc.status.as_ref().unwrap();
    assert!(st.failure_domains.is_none(), "failure domains are opt-in");
    let inv = st.node_inventory.as_ref().unwrap();
    assert_eq!(
        inv.iter().map(|n| n.node.as_str()).collect::<Vec<_>>(),
        ["pve1", "pve2"]
    );
    assert!(inv.iter().all(|n| n.online && n.cpus == Some(16)));
    assert_eq!(inv[0].memory_total_bytes, Some(64 * 1024 * 1024 * 1024));
    assert_eq!(inv[0].vm_count, Some(0), "templates are not counted");

    // The inventory is refreshed: a node going offline shows up.
    h.sim.state().set_node_online("pve2", false);
    h.wait_status("fd", "pve2 offline in inventory", |s| {
        s.node_inventory
            .as_ref()
            .is_some_and(|i| i.iter().any(|n| n.node == "pve2" && !n.online))
    })
    .await;

    // Opting in publishes the zones as failure domains (list in v1alpha2, map in v1alpha1).
    h.pcs()
        .patch(
            "fd",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"failureDomainsFromZones": true}})),
        )
        .await
        .unwrap();
    let pc = h
        .wait_status("fd", "failure domains", |s| s.failure_domains.is_some())
        .await;
    let fds = pc.status.as_ref().unwrap().failure_domains.clone().unwrap();
    assert_eq!(
        fds.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
        ["rack-1", "rack-2"]
    );
    assert!(fds.iter().all(|d| d.control_plane == Some(true)));
    let v1: capmox_api::v1alpha1::ProxmoxCluster = capmox_api::conversion::from_hub(&pc).unwrap();
    let map = v1.status.as_ref().unwrap().failure_domains.as_ref().unwrap();
    assert_eq!(map.keys().collect::<Vec<_>>(), ["rack-1", "rack-2"]);
    assert_eq!(map["rack-1"].control_plane, Some(true));
    // The new fields survive a v1alpha1 round trip.
    let back: capmox_api::v1alpha2::ProxmoxCluster = capmox_api::conversion::to_hub(&v1).unwrap();
    assert_eq!(back.spec, pc.spec);
    assert_eq!(back.status, pc.status);
    h.stop().await;
}
