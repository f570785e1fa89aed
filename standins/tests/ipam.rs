//! The in-cluster IPAM stand-in against the in-tree control plane.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use capmox_api::capi::ipam::{InClusterIPPool, InClusterIPPoolSpec};
use capmox_api::capi::ipam_claims::IpPoolReference;
use capmox_api::capi::ipam_claims::v1beta2::{IPAddress, IPAddressClaim, IPAddressClaimSpec};
use capmox_standins::InClusterIpamStandIn;
use capmox_standins::ipam::{PROTECT_ADDRESS_FINALIZER, RELEASE_ADDRESS_FINALIZER};
use kube::api::{Api, DeleteParams, PostParams};
use kube::{Resource, ResourceExt};
use support::{NS, wait_for};

/// The Cluster `c1` the test claims are linked to (as CAIP, the stand-in holds claims whose
/// Cluster is missing or paused); nothing where the API server serves no Cluster API v1beta2.
async fn ensure_cluster(client: &kube::Client, paused: bool) {
    let mut c = capmox_standins::capi::cluster(NS, "c1", "c1");
    c.spec.paused = Some(paused);
    match Api::<capmox_api::capi::v1beta2::Cluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &c)
        .await
    {
        // 409: created by an earlier call; 404: no `cluster.x-k8s.io/v1beta2` served.
        Ok(_) => {}
        Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => {}
        Err(e) => panic!("creating Cluster c1: {e}"),
    }
}

async fn create_pool(client: &kube::Client, name: &str, addresses: &[&str]) -> InClusterIPPool {
    ensure_cluster(client, false).await;
    let mut pool = InClusterIPPool::new(
        name,
        InClusterIPPoolSpec {
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
            prefix: 24,
            gateway: Some("10.5.0.1".into()),
            ..Default::default()
        },
    );
    pool.metadata.namespace = Some(NS.into());
    Api::<InClusterIPPool>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pool)
        .await
        .unwrap()
}

async fn create_claim(client: &kube::Client, name: &str, pool: &str) -> IPAddressClaim {
    let mut claim = IPAddressClaim::new(
        name,
        IPAddressClaimSpec {
            cluster_name: Some("c1".into()),
            pool_ref: IpPoolReference {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: pool.into(),
            },
        },
    );
    claim.metadata.namespace = Some(NS.into());
    claim.metadata.labels = Some([("cluster.x-k8s.io/cluster-name".to_owned(), "c1".to_owned())].into());
    Api::<IPAddressClaim>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &claim)
        .await
        .unwrap()
}

/// Waits until the claim is fulfilled and returns its IPAddress.
async fn address_of(client: &kube::Client, claim: &str) -> IPAddress {
    let claims = Api::<IPAddressClaim>::namespaced(client.clone(), NS);
    let addresses = Api::<IPAddress>::namespaced(client.clone(), NS);
    let name = wait_for(20, &format!("claim {claim} fulfilled"), || {
        let claims = claims.clone();
        async move {
            let c = claims.get(claim).await.unwrap();
            c.status?.address_ref.map(|r| r.name).filter(|n| !n.is_empty())
        }
    })
    .await;
    addresses.get(&name).await.unwrap()
}

#[tokio::test]
async fn claim_gets_an_address_with_prefix_gateway_owner_and_labels() {
    let env = support::start(false).await;
    let ipam = InClusterIpamStandIn::spawn(env.client.clone(), None);
    let pool = create_pool(&env.client, "p", &["10.5.0.1-10.5.0.3"]).await;
    let claim = create_claim(&env.client, "m1-net0-00-inet", "p").await;

    let a = address_of(&env.client, "m1-net0-00-inet").await;
    assert_eq!(a.name_any(), "m1-net0-00-inet");
    // 10.5.0.1 is the gateway.
    assert_eq!(a.spec.address, "10.5.0.2");
    assert_eq!(a.spec.prefix, 24);
    assert_eq!(a.spec.gateway.as_deref(), Some("10.5.0.1"));
    assert_eq!(a.spec.claim_ref.name, "m1-net0-00-inet");
    assert_eq!(a.spec.pool_ref.name, "p");
    assert_eq!(
        a.labels()
            .get("cluster.x-k8s.io/cluster-name")
            .map(String::as_str),
        Some("c1")
    );
    let owners = a.owner_references();
    let claim_owner = owners.iter().find(|o| o.kind == "IPAddressClaim").unwrap();
    assert_eq!(claim_owner.uid, claim.meta().uid.clone().unwrap());
    assert_eq!(claim_owner.controller, Some(true));
    let pool_owner = owners.iter().find(|o| o.kind == "InClusterIPPool").unwrap();
    assert_eq!(pool_owner.uid, pool.meta().uid.clone().unwrap());
    assert_eq!(pool_owner.controller, Some(false));
    assert!(a.finalizers().iter().any(|f| f == PROTECT_ADDRESS_FINALIZER));

    let c = Api::<IPAddressClaim>::namespaced(env.client.clone(), NS)
        .get("m1-net0-00-inet")
        .await
        .unwrap();
    assert!(c.finalizers().iter().any(|f| f == RELEASE_ADDRESS_FINALIZER));
    ipam.stop().await;
}

#[tokio::test]
async fn concurrent_claims_get_distinct_addresses_and_exhaustion_leaves_pending() {
    let env = support::start(false).await;
    let ipam = InClusterIpamStandIn::spawn(env.client.clone(), Some(NS.into()));
    create_pool(&env.client, "small", &["10.5.0.10", "10.5.0.20-10.5.0.21"]).await;
    for i in 0..4 {
        create_claim(&env.client, &format!("c{i}"), "small").await;
    }
    let mut got = Vec::new();
    let claims = Api::<IPAddressClaim>::namespaced(env.client.clone(), NS);
    // Exactly three of the four claims are fulfilled.
    let fulfilled = wait_for(20, "three claims fulfilled", || {
        let claims = claims.clone();
        async move {
            let list = claims.list(&Default::default()).await.unwrap();
            let done: Vec<String> = list
                .items
                .iter()
                .filter(|c| c.status.as_ref().and_then(|s| s.address_ref.as_ref()).is_some())
                .map(ResourceExt::name_any)
                .collect();
            (done.len() == 3).then_some(done)
        }
    })
    .await;
    for name in &fulfilled {
        got.push(address_of(&env.client, name).await.spec.address);
    }
    got.sort();
    assert_eq!(got, vec!["10.5.0.10", "10.5.0.20", "10.5.0.21"]);
    let pending: Vec<IPAddressClaim> = claims
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|c| c.status.as_ref().and_then(|s| s.address_ref.as_ref()).is_none())
        .collect();
    assert_eq!(pending.len(), 1, "the fourth claim stays pending");
    let addresses = Api::<IPAddress>::namespaced(env.client.clone(), NS)
        .list(&Default::default())
        .await
        .unwrap();
    assert_eq!(addresses.items.len(), 3);
    ipam.stop().await;
}

#[tokio::test]
async fn deleting_a_claim_releases_its_address_for_reuse() {
    let env = support::start(false).await;
    let ipam = InClusterIpamStandIn::spawn(env.client.clone(), None);
    create_pool(&env.client, "one", &["10.5.0.50"]).await;
    create_claim(&env.client, "first", "one").await;
    assert_eq!(address_of(&env.client, "first").await.spec.address, "10.5.0.50");
    create_claim(&env.client, "second", "one").await;

    let claims = Api::<IPAddressClaim>::namespaced(env.client.clone(), NS);
    let addresses = Api::<IPAddress>::namespaced(env.client.clone(), NS);
    claims.delete("first", &DeleteParams::default()).await.unwrap();
    // The claim and its address are gone (finalizers removed by the stand-in) ...
    wait_for(20, "claim and address of `first` deleted", || {
        let (claims, addresses) = (claims.clone(), addresses.clone());
        async move {
            let gone = claims.get_opt("first").await.unwrap().is_none()
                && addresses.get_opt("first").await.unwrap().is_none();
            gone.then_some(())
        }
    })
    .await;
    // ... and the pending claim gets the released address.
    assert_eq!(address_of(&env.client, "second").await.spec.address, "10.5.0.50");
    ipam.stop().await;
}

#[tokio::test]
async fn claims_of_other_pool_kinds_are_left_alone() {
    let env = support::start(false).await;
    let ipam = InClusterIpamStandIn::spawn(env.client.clone(), None);
    let mut claim = IPAddressClaim::new(
        "global",
        IPAddressClaimSpec {
            cluster_name: None,
            pool_ref: IpPoolReference {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "GlobalInClusterIPPool".into(),
                name: "g".into(),
            },
        },
    );
    claim.metadata.namespace = Some(NS.into());
    let claims = Api::<IPAddressClaim>::namespaced(env.client.clone(), NS);
    claims.create(&PostParams::default(), &claim).await.unwrap();
    // A claim of the pool kind handled is fulfilled; the other one is untouched by then.
    create_pool(&env.client, "p", &["10.5.0.9"]).await;
    create_claim(&env.client, "mine", "p").await;
    address_of(&env.client, "mine").await;
    let other = claims.get("global").await.unwrap();
    assert!(other.finalizers().is_empty());
    assert!(other.status.and_then(|s| s.address_ref).is_none());
    ipam.stop().await;
}

/// CAPI v1.10's CRDs serve claims and addresses in `v1beta1` only: the stand-in serves those.
#[tokio::test]
async fn claims_are_served_in_v1beta1_when_no_v1beta2_is_served() {
    use capmox_api::capi::ipam_claims::v1beta1;
    use kube::CustomResourceExt;
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start_with(testenv::TestEnvOptions {
        force_in_tree: true,
        ..Default::default()
    })
    .await
    .unwrap();
    env.install_crds(vec![
        capmox_api::capi::in_cluster_ip_pool_crd(),
        v1beta1::IPAddressClaim::crd(),
        v1beta1::IPAddress::crd(),
    ])
    .await
    .unwrap();
    let client = env.client();
    let ns: k8s_openapi::api::core::v1::Namespace =
        serde_json::from_value(serde_json::json!({"metadata": {"name": NS}})).unwrap();
    Api::<k8s_openapi::api::core::v1::Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let ipam = InClusterIpamStandIn::spawn(client.clone(), None);
    create_pool(&client, "p", &["10.5.0.1-10.5.0.3"]).await;
    let claims = Api::<v1beta1::IPAddressClaim>::namespaced(client.clone(), NS);
    let mut claim = v1beta1::IPAddressClaim::new(
        "m1-net0-00-inet",
        v1beta1::IPAddressClaimSpec {
            cluster_name: None,
            pool_ref: IpPoolReference {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: "p".into(),
            },
        },
    );
    claim.metadata.namespace = Some(NS.into());
    claims.create(&PostParams::default(), &claim).await.unwrap();
    let addresses = Api::<v1beta1::IPAddress>::namespaced(client.clone(), NS);
    let a = wait_for(20, "the v1beta1 claim fulfilled", || {
        let (claims, addresses) = (claims.clone(), addresses.clone());
        async move {
            let c = claims.get("m1-net0-00-inet").await.ok()?;
            let name = c.status?.address_ref?.name;
            addresses.get(&name).await.ok()
        }
    })
    .await;
    assert_eq!(a.spec.address, "10.5.0.2");
    assert_eq!(a.spec.prefix, 24);
    let owner = a
        .owner_references()
        .iter()
        .find(|o| o.kind == "IPAddressClaim")
        .cloned()
        .unwrap();
    assert_eq!(owner.api_version, "ipam.cluster.x-k8s.io/v1beta1");

    claims
        .delete("m1-net0-00-inet", &DeleteParams::default())
        .await
        .unwrap();
    wait_for(20, "the claim and its address released", || {
        let (claims, addresses) = (claims.clone(), addresses.clone());
        async move {
            let gone = claims.get_opt("m1-net0-00-inet").await.ok()?.is_none()
                && addresses.get_opt("m1-net0-00-inet").await.ok()?.is_none();
            gone.then_some(())
        }
    })
    .await;
    ipam.stop().await;
}

/// As CAIP: a claim whose Cluster is paused (what `clusterctl move` leaves the target's objects
/// in while it creates them, claims before their addresses) or missing waits; unpausing the
/// Cluster lets it go on.
#[tokio::test]
async fn claims_of_a_paused_or_missing_cluster_wait() {
    let env = support::start(false).await;
    let ipam = InClusterIpamStandIn::spawn(env.client.clone(), None);
    ensure_cluster(&env.client, true).await;
    create_pool(&env.client, "p", &["10.5.0.1-10.5.0.3"]).await;
    let claims = Api::<IPAddressClaim>::namespaced(env.client.clone(), NS);
    create_claim(&env.client, "m1-net0-00-inet", "p").await;
    create_claim(&env.client, "m2-net0-00-inet", "p").await;
    let elsewhere = serde_json::json!({"spec": {"clusterName": "nowhere"},
        "metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "nowhere"}}});
    claims
        .patch(
            "m2-net0-00-inet",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(&elsewhere),
        )
        .await
        .unwrap();
    // A claim of no Cluster, created after them, is served: the stand-in handles one claim at
    // a time, so the held ones were looked at before it (or not yet at all).
    let mut free = IPAddressClaim::new(
        "free",
        IPAddressClaimSpec {
            cluster_name: None,
            pool_ref: IpPoolReference {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: "p".into(),
            },
        },
    );
    free.metadata.namespace = Some(NS.into());
    claims.create(&PostParams::default(), &free).await.unwrap();
    assert_eq!(address_of(&env.client, "free").await.spec.address, "10.5.0.2");
    for name in ["m1-net0-00-inet", "m2-net0-00-inet"] {
        let held = claims.get(name).await.unwrap();
        // The finalizer is the first thing a handled claim gets.
        assert!(held.finalizers().is_empty() && held.status.is_none(), "{held:?}");
    }
    Api::<capmox_api::capi::v1beta2::Cluster>::namespaced(env.client.clone(), NS)
        .patch(
            "c1",
            &kube::api::PatchParams::default(),
            &kube::api::Patch::Merge(serde_json::json!({"spec": {"paused": false}})),
        )
        .await
        .unwrap();
    assert_eq!(
        address_of(&env.client, "m1-net0-00-inet").await.spec.address,
        "10.5.0.3"
    );
    let orphan = claims.get("m2-net0-00-inet").await.unwrap();
    assert!(
        orphan.status.is_none(),
        "a claim of a missing Cluster waits: {orphan:?}"
    );
    ipam.stop().await;
}
