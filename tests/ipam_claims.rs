//! `capmox::ipam::ensure_claims` / `load` against the in-tree test control plane, with the CAPI IPAM
//! CRDs of CAPI v1.12 (v1beta2) and v1.10 (v1beta1 only) from `../shared/compat` when present
//! (`CAPMOX_SHARED_DIR` overrides), otherwise the CRDs generated from our own small types.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::collections::BTreeMap;
use std::path::PathBuf;

use capmox::ipam::{self, DesiredClaim};
use capmox_api::capi::ipam_claims::{IpAddressClaimStatus, NameReference, v1beta1, v1beta2};
use capmox_api::consts::{
    CLUSTER_NAME_LABEL, DEFAULT_GATEWAY_ANNOTATION, POOL_REF_COUNTER_ANNOTATION, PROXMOX_ZONE_LABEL,
};
use capmox_api::v1alpha2::{
    InClusterZoneRef, NetworkDevice, NetworkSpec, ProxmoxCluster, ProxmoxClusterSpec, ProxmoxClusterStatus,
    ProxmoxMachine, ProxmoxMachineSpec,
};
use k8s_openapi::api::core::v1::{LocalObjectReference, TypedLocalObjectReference};
use kube::api::{Api, Patch, PatchParams, PostParams};
use kube::{CustomResourceExt, ResourceExt};
use testenv::TestEnv;

const NS: &str = "default";

fn shared_dir() -> PathBuf {
    std::env::var_os("CAPMOX_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// Installs our CRDs and the IPAM claim/address CRDs of `release` (`capi-v1.12` or `capi-v1.10`).
async fn start(release: &str) -> TestEnv {
    let env = TestEnv::start().await.unwrap();
    env.install_crds(capmox_api::crd::all().unwrap()).await.unwrap();
    let dir = shared_dir().join("compat").join(release);
    let files = [
        dir.join("ipam.cluster.x-k8s.io_ipaddressclaims.yaml"),
        dir.join("ipam.cluster.x-k8s.io_ipaddresses.yaml"),
    ];
    if files.iter().all(|f| f.exists()) {
        for f in files {
            env.install_crds_from_path(&f).await.unwrap();
        }
    } else {
        eprintln!(
            "note: {} not found; using CRDs generated from capmox_api::capi::ipam_claims",
            dir.display()
        );
        let crds = if release == "capi-v1.10" {
            vec![v1beta1::IPAddressClaim::crd(), v1beta1::IPAddress::crd()]
        } else {
            vec![v1beta2::IPAddressClaim::crd(), v1beta2::IPAddress::crd()]
        };
        env.install_crds(crds).await.unwrap();
    }
    env
}

fn pool_ref(name: &str) -> TypedLocalObjectReference {
    TypedLocalObjectReference {
        api_group: Some("ipam.cluster.x-k8s.io".into()),
        kind: "InClusterIPPool".into(),
        name: name.into(),
    }
}

/// Creates a ProxmoxMachine `m1` (net0: default IPv4 + one extra pool; net1: default IPv6) and returns
/// it with the in-memory ProxmoxCluster whose default pools it uses.
async fn machine(client: &kube::Client) -> (ProxmoxMachine, ProxmoxCluster) {
    let mut m = ProxmoxMachine::new(
        "m1",
        ProxmoxMachineSpec {
            source_node: Some("pve1".into()),
            template_id: Some(100),
            network: NetworkSpec {
                network_devices: vec![
                    NetworkDevice {
                        name: Some("net0".into()),
                        bridge: Some("vmbr0".into()),
                        default_ipv4: Some(true),
                        ip_pool_ref: Some(vec![pool_ref("extra")]),
                        ..NetworkDevice::default()
                    },
                    NetworkDevice {
                        name: Some("net1".into()),
                        bridge: Some("vmbr1".into()),
                        default_ipv6: Some(true),
                        ..NetworkDevice::default()
                    },
                ],
                ..NetworkSpec::default()
            },
            ..ProxmoxMachineSpec::default()
        },
    );
    m.metadata.labels = Some(BTreeMap::from([(CLUSTER_NAME_LABEL.to_owned(), "c1".to_owned())]));
    let api: Api<ProxmoxMachine> = Api::namespaced(client.clone(), NS);
    let m = api.create(&PostParams::default(), &m).await.unwrap();

    let mut c = ProxmoxCluster::new("pc1", ProxmoxClusterSpec::default());
    c.status = Some(ProxmoxClusterStatus {
        in_cluster_zone_ref: Some(vec![InClusterZoneRef {
            in_cluster_ip_pool_ref_v4: Some(LocalObjectReference {
                name: "pc1-v4-icip".into(),
            }),
            in_cluster_ip_pool_ref_v6: Some(LocalObjectReference {
                name: "pc1-v6-icip".into(),
            }),
            zone: Some("default".into()),
        }]),
        ..ProxmoxClusterStatus::default()
    });
    (m, c)
}

fn check_claim_metadata(
    m: &ProxmoxMachine,
    d: &DesiredClaim,
    meta: &kube::core::ObjectMeta,
    pool: &capmox_api::capi::ipam_claims::IpPoolReference,
) {
    assert_eq!(pool, &d.pool);
    let labels = meta.labels.clone().unwrap_or_default();
    assert_eq!(labels[CLUSTER_NAME_LABEL], "c1");
    let annotations = meta.annotations.clone().unwrap_or_default();
    assert_eq!(
        annotations[POOL_REF_COUNTER_ANNOTATION],
        d.pool_offset.to_string()
    );
    if d.is_default_pool {
        assert_eq!(labels[PROXMOX_ZONE_LABEL], "default");
        assert_eq!(annotations[DEFAULT_GATEWAY_ANNOTATION], "true");
    } else {
        assert!(!annotations.contains_key(DEFAULT_GATEWAY_ANNOTATION));
    }
    let owners = meta.owner_references.clone().unwrap_or_default();
    assert_eq!(owners.len(), 1);
    assert_eq!(owners[0].kind, "ProxmoxMachine");
    assert_eq!(owners[0].name, "m1");
    assert_eq!(Some(&owners[0].uid), m.metadata.uid.as_ref());
    assert_eq!(owners[0].controller, Some(true));
}

#[tokio::test]
async fn ensure_claims_creates_v1beta2_claims_once_and_load_resolves() {
    let env = start("capi-v1.12").await;
    let client = env.client();
    let (m, c) = machine(&client).await;
    let desired = ipam::desired_claims(&m, &c).unwrap();
    let names: Vec<&str> = desired.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(
        names,
        vec!["m1-net0-00-inet", "m1-net0-01-inet", "m1-net1-00-inet"]
    );

    let first = ipam::ensure_claims(&client, ipam::served_ipam_version(&client).await, NS, &desired)
        .await
        .unwrap();
    assert_eq!(first.created, names);
    assert!(first.existing.is_empty());

    let api: Api<v1beta2::IPAddressClaim> = Api::namespaced(client.clone(), NS);
    let mut versions = Vec::new();
    for d in &desired {
        let claim = api.get(&d.name).await.unwrap();
        check_claim_metadata(&m, d, &claim.metadata, &claim.spec.pool_ref);
        assert_eq!(claim.spec.cluster_name.as_deref(), Some("c1"));
        versions.push(claim.resource_version());
    }

    // Idempotent: nothing created, nothing modified.
    let second = ipam::ensure_claims(&client, ipam::served_ipam_version(&client).await, NS, &desired)
        .await
        .unwrap();
    assert!(second.created.is_empty());
    assert_eq!(second.existing, names);
    for (d, v) in desired.iter().zip(&versions) {
        assert_eq!(&api.get(&d.name).await.unwrap().resource_version(), v);
    }

    // Nothing fulfilled yet: all pending, none missing.
    let (claims, addresses) = ipam::load(&client, ipam::served_ipam_version(&client).await, NS, &desired)
        .await
        .unwrap();
    assert_eq!(claims.len(), 3);
    assert!(addresses.is_empty());
    let r = ipam::resolve(&desired, &claims, &addresses);
    assert_eq!(r.pending, names);
    assert!(r.missing.is_empty());

    // Fulfil the first claim the way an IPAM provider does.
    let d = &desired[0];
    let addrs: Api<v1beta2::IPAddress> = Api::namespaced(client.clone(), NS);
    let a = v1beta2::IPAddress::new(
        &d.name,
        v1beta2::IPAddressSpec {
            claim_ref: NameReference { name: d.name.clone() },
            pool_ref: d.pool.clone(),
            address: "10.0.0.5".into(),
            prefix: 24,
            gateway: Some("10.0.0.1".into()),
        },
    );
    addrs.create(&PostParams::default(), &a).await.unwrap();
    let status = serde_json::json!({"status": IpAddressClaimStatus {
        address_ref: Some(NameReference { name: d.name.clone() }),
    }});
    api.patch_status(&d.name, &PatchParams::default(), &Patch::Merge(&status))
        .await
        .unwrap();

    let (claims, addresses) = ipam::load(&client, ipam::served_ipam_version(&client).await, NS, &desired)
        .await
        .unwrap();
    assert_eq!(addresses.len(), 1);
    let r = ipam::resolve(&desired, &claims, &addresses);
    assert_eq!(r.pending, vec!["m1-net0-01-inet", "m1-net1-00-inet"]);
    assert_eq!(r.resolved.len(), 1);
    assert_eq!(r.resolved[0].address.to_string(), "10.0.0.5");
    assert_eq!(r.resolved[0].gateway.as_deref(), Some("10.0.0.1"));
}

#[tokio::test]
async fn ensure_claims_falls_back_to_v1beta1_on_capi_1_10() {
    let env = start("capi-v1.10").await;
    let client = env.client();
    let (m, c) = machine(&client).await;
    let desired = ipam::desired_claims(&m, &c).unwrap();
    assert_eq!(
        ipam::served_ipam_version(&client).await,
        ipam::IpamApiVersion::V1beta1
    );

    let first = ipam::ensure_claims(&client, ipam::served_ipam_version(&client).await, NS, &desired)
        .await
        .unwrap();
    assert_eq!(first.created.len(), 3);
    let api: Api<v1beta1::IPAddressClaim> = Api::namespaced(client.clone(), NS);
    for d in &desired {
        let claim = api.get(&d.name).await.unwrap();
        check_claim_metadata(&m, d, &claim.metadata, &claim.spec.pool_ref);
    }
    let second = ipam::ensure_claims(&client, ipam::served_ipam_version(&client).await, NS, &desired)
        .await
        .unwrap();
    assert_eq!(second.existing.len(), 3);
    assert!(second.created.is_empty());

    let (claims, addresses) = ipam::load(&client, ipam::served_ipam_version(&client).await, NS, &desired)
        .await
        .unwrap();
    assert_eq!(claims.len(), 3);
    assert!(addresses.is_empty());
    assert_eq!(claims[0].name_any(), "m1-net0-00-inet");
}

#[tokio::test]
async fn load_reports_an_ip_address_left_without_its_claim() {
    let env = start("capi-v1.12").await;
    let client = env.client();
    let (m, c) = machine(&client).await;
    let desired = ipam::desired_claims(&m, &c).unwrap();
    let d = &desired[1];
    let addrs: Api<v1beta2::IPAddress> = Api::namespaced(client.clone(), NS);
    let a = v1beta2::IPAddress::new(
        &d.name,
        v1beta2::IPAddressSpec {
            claim_ref: NameReference { name: d.name.clone() },
            pool_ref: d.pool.clone(),
            address: "192.168.7.7".into(),
            prefix: 24,
            gateway: None,
        },
    );
    addrs.create(&PostParams::default(), &a).await.unwrap();

    let (claims, addresses) = ipam::load(&client, ipam::served_ipam_version(&client).await, NS, &desired)
        .await
        .unwrap();
    assert!(claims.is_empty());
    assert_eq!(addresses.len(), 1);
    let r = ipam::resolve(&desired, &claims, &addresses);
    assert_eq!(r.orphaned, vec!["m1-net0-01-inet"]);
    assert_eq!(r.missing.len(), 3);
}
