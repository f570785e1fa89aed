//! Unit tests of [`super`] (IPAM claim bookkeeping).

use std::collections::BTreeMap;

use capmox_api::capi::ipam_claims::{IpAddressClaimStatus, NameReference};
use capmox_api::v1alpha2::{
    InClusterZoneRef, NetworkDevice, NetworkSpec, ProxmoxClusterSpec, ProxmoxClusterStatus,
    ProxmoxMachineSpec,
};
use k8s_openapi::api::core::v1::TypedLocalObjectReference;

use super::*;

const UID: &str = "4f5e0c1a-0000-4000-8000-000000000001";

fn nic(name: &str, v4: bool, v6: bool, extra: &[(&str, &str)]) -> NetworkDevice {
    NetworkDevice {
        name: Some(name.to_owned()),
        default_ipv4: v4.then_some(true),
        default_ipv6: v6.then_some(true),
        ip_pool_ref: (!extra.is_empty()).then(|| {
            extra
                .iter()
                .map(|(kind, name)| TypedLocalObjectReference {
                    api_group: Some(IPAM_GROUP.to_owned()),
                    kind: (*kind).to_owned(),
                    name: (*name).to_owned(),
                })
                .collect()
        }),
        ..NetworkDevice::default()
    }
}

fn machine(devices: Vec<NetworkDevice>, zone: Option<&str>) -> ProxmoxMachine {
    let mut m = ProxmoxMachine::new(
        "m1",
        ProxmoxMachineSpec {
            network: NetworkSpec {
                network_devices: devices,
                zone: zone.map(str::to_owned),
                ..NetworkSpec::default()
            },
            ..ProxmoxMachineSpec::default()
        },
    );
    m.metadata.namespace = Some("ns".into());
    m.metadata.uid = Some(UID.into());
    m.metadata.labels = Some(BTreeMap::from([(CLUSTER_NAME_LABEL.to_owned(), "c1".to_owned())]));
    m
}

fn zone_ref(zone: Option<&str>, v4: Option<&str>, v6: Option<&str>) -> InClusterZoneRef {
    let r = |n: Option<&str>| n.map(|n| LocalObjectReference { name: n.to_owned() });
    InClusterZoneRef {
        in_cluster_ip_pool_ref_v4: r(v4),
        in_cluster_ip_pool_ref_v6: r(v6),
        zone: zone.map(str::to_owned),
    }
}

fn cluster(zones: Vec<InClusterZoneRef>) -> ProxmoxCluster {
    let mut c = ProxmoxCluster::new("pc1", ProxmoxClusterSpec::default());
    c.status = Some(ProxmoxClusterStatus {
        in_cluster_zone_ref: Some(zones),
        ..ProxmoxClusterStatus::default()
    });
    c
}

fn default_cluster() -> ProxmoxCluster {
    cluster(vec![
        zone_ref(Some("default"), Some("pc1-v4-icip"), Some("pc1-v6-icip")),
        zone_ref(Some("z1"), Some("pc1-z1-v4-icip"), None),
    ])
}

fn pool(kind: &str, name: &str) -> IpPoolReference {
    IpPoolReference {
        api_group: IPAM_GROUP.to_owned(),
        kind: kind.to_owned(),
        name: name.to_owned(),
    }
}

fn names(d: &[DesiredClaim]) -> Vec<&str> {
    d.iter().map(|c| c.name.as_str()).collect()
}

/// A claim as the API server would hold it after `ensure_claims`, optionally fulfilled.
fn claim_for(d: &DesiredClaim, address: Option<&str>) -> v1beta2::IPAddressClaim {
    let mut c = d.to_claim("ns");
    c.status = address.map(|a| IpAddressClaimStatus {
        address_ref: Some(NameReference { name: a.to_owned() }),
    });
    c
}

fn address_for(d: &DesiredClaim, ip: &str, prefix: i32, gw: Option<&str>) -> v1beta2::IPAddress {
    let mut a = v1beta2::IPAddress::new(
        &d.name,
        v1beta2::IPAddressSpec {
            claim_ref: NameReference { name: d.name.clone() },
            pool_ref: d.pool.clone(),
            address: ip.to_owned(),
            prefix,
            gateway: gw.map(str::to_owned),
        },
    );
    a.metadata.namespace = Some("ns".into());
    a
}

/// Desired claims for: net0 dual-stack default + one extra pool, net1 one extra pool.
fn dual_stack() -> Vec<DesiredClaim> {
    let m = machine(
        vec![
            nic("net0", true, true, &[("InClusterIPPool", "extra0")]),
            nic("net1", false, false, &[("GlobalInClusterIPPool", "g1")]),
        ],
        None,
    );
    desired_claims(&m, &default_cluster()).unwrap()
}

/// All claims fulfilled: net0 10.0.0.5/24 + fd00::5/64 (defaults), 192.168.1.5/24 (extra), net1 172.16.0.9/16.
fn fulfilled(desired: &[DesiredClaim]) -> (Vec<v1beta2::IPAddressClaim>, Vec<v1beta2::IPAddress>) {
    let ips = [
        ("10.0.0.5", 24, Some("10.0.0.1")),
        ("fd00::5", 64, Some("fd00::1")),
        ("192.168.1.5", 24, None),
        ("172.16.0.9", 16, None),
    ];
    let claims = desired.iter().map(|d| claim_for(d, Some(&d.name))).collect();
    let addrs = desired
        .iter()
        .zip(ips)
        .map(|(d, (ip, p, gw))| address_for(d, ip, p, gw))
        .collect();
    (claims, addrs)
}

#[test]
fn claim_names_use_two_digit_offsets() {
    assert_eq!(claim_name("m1", "net0", 0), "m1-net0-00-inet");
    assert_eq!(claim_name("m1", "net3", 7), "m1-net3-07-inet");
    assert_eq!(claim_name("m1", "net1", 12), "m1-net1-12-inet");
    let extra: Vec<(&str, String)> = (0..11).map(|i| ("InClusterIPPool", format!("p{i}"))).collect();
    let extra: Vec<(&str, &str)> = extra.iter().map(|(k, n)| (*k, n.as_str())).collect();
    let m = machine(vec![nic("net0", true, false, &extra)], None);
    let d = desired_claims(&m, &default_cluster()).unwrap();
    assert_eq!(d.len(), 12);
    assert_eq!(d[0].name, "m1-net0-00-inet");
    assert_eq!(d[9].name, "m1-net0-09-inet");
    assert_eq!(d[11].name, "m1-net0-11-inet");
    assert_eq!(d[11].annotations[POOL_REF_COUNTER_ANNOTATION], "11");
}

#[test]
fn default_pools_come_first_and_extra_pools_are_additive() {
    let d = dual_stack();
    assert_eq!(
        names(&d),
        vec![
            "m1-net0-00-inet",
            "m1-net0-01-inet",
            "m1-net0-02-inet",
            "m1-net1-00-inet"
        ]
    );
    assert_eq!(d[0].pool, pool("InClusterIPPool", "pc1-v4-icip"));
    assert_eq!(d[0].family, Some(IpFamily::V4));
    assert_eq!(d[1].pool, pool("InClusterIPPool", "pc1-v6-icip"));
    assert_eq!(d[1].family, Some(IpFamily::V6));
    assert_eq!(d[2].pool, pool("InClusterIPPool", "extra0"));
    assert_eq!(d[2].family, None);
    assert_eq!(d[3].pool, pool("GlobalInClusterIPPool", "g1"));
    assert_eq!(d[3].device_index, 1);
    assert_eq!(
        d.iter().map(|c| c.is_default_pool).collect::<Vec<_>>(),
        vec![true, true, false, false]
    );
}

#[test]
fn ipv6_only_default_takes_offset_zero() {
    let m = machine(vec![nic("net0", false, true, &[])], None);
    let d = desired_claims(&m, &default_cluster()).unwrap();
    assert_eq!(names(&d), vec!["m1-net0-00-inet"]);
    assert_eq!(d[0].pool.name, "pc1-v6-icip");
}

#[test]
fn nic_without_pools_needs_no_claim_and_name_defaults_to_net0() {
    let mut n = nic("x", true, false, &[]);
    n.name = None;
    let m = machine(vec![n, nic("net1", false, false, &[])], None);
    let d = desired_claims(&m, &default_cluster()).unwrap();
    assert_eq!(names(&d), vec!["m1-net0-00-inet"]);
}

#[test]
fn metadata_matches_capmox() {
    let d = dual_stack();
    let c = d[0].to_claim("ns");
    assert_eq!(c.metadata.name.as_deref(), Some("m1-net0-00-inet"));
    assert_eq!(c.metadata.namespace.as_deref(), Some("ns"));
    assert_eq!(
        c.metadata.labels.clone().unwrap(),
        BTreeMap::from([
            (CLUSTER_NAME_LABEL.to_owned(), "c1".to_owned()),
            (PROXMOX_ZONE_LABEL.to_owned(), "default".to_owned()),
        ])
    );
    assert_eq!(
        c.metadata.annotations.clone().unwrap(),
        BTreeMap::from([
            (POOL_REF_COUNTER_ANNOTATION.to_owned(), "0".to_owned()),
            (DEFAULT_GATEWAY_ANNOTATION.to_owned(), "true".to_owned()),
        ])
    );
    let owner = &c.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(owner.api_version, "infrastructure.cluster.x-k8s.io/v1alpha2");
    assert_eq!(owner.kind, "ProxmoxMachine");
    assert_eq!(owner.name, "m1");
    assert_eq!(owner.uid, UID);
    assert_eq!(owner.controller, Some(true));
    assert_eq!(owner.block_owner_deletion, Some(true));
    assert_eq!(c.spec.pool_ref, pool("InClusterIPPool", "pc1-v4-icip"));
    assert_eq!(c.spec.cluster_name.as_deref(), Some("c1"));
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["apiVersion"], "ipam.cluster.x-k8s.io/v1beta2");
    assert_eq!(json["kind"], "IPAddressClaim");
    assert_eq!(
        json["spec"]["poolRef"],
        serde_json::json!({"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "pc1-v4-icip"})
    );

    // Extra pools: counter annotation, no default-gateway annotation, no zone label until set.
    let mut extra = d[2].clone();
    assert_eq!(
        extra.annotations,
        BTreeMap::from([(POOL_REF_COUNTER_ANNOTATION.to_owned(), "2".to_owned())])
    );
    assert!(!extra.labels.contains_key(PROXMOX_ZONE_LABEL));
    extra.set_pool_zone("z9");
    assert_eq!(extra.labels[PROXMOX_ZONE_LABEL], "z9");
}

#[test]
fn missing_api_group_defaults_to_ipam_group() {
    let mut n = nic("net0", false, false, &[("InClusterIPPool", "p")]);
    if let Some(refs) = n.ip_pool_ref.as_mut() {
        refs[0].api_group = None;
    }
    let d = desired_claims(&machine(vec![n], None), &default_cluster()).unwrap();
    assert_eq!(d[0].pool.api_group, IPAM_GROUP);
}

#[test]
fn default_pools_follow_the_machine_zone() {
    let m = machine(vec![nic("net0", true, false, &[])], Some("z1"));
    let d = desired_claims(&m, &default_cluster()).unwrap();
    assert_eq!(d[0].pool.name, "pc1-z1-v4-icip");
    assert_eq!(d[0].labels[PROXMOX_ZONE_LABEL], "z1");

    // An entry without `zone` is the default zone.
    let c = cluster(vec![zone_ref(None, Some("pc1-v4-icip"), None)]);
    let m = machine(vec![nic("net0", true, false, &[])], None);
    assert_eq!(desired_claims(&m, &c).unwrap()[0].pool.name, "pc1-v4-icip");
}

#[test]
fn unknown_zone_is_an_error() {
    let m = machine(vec![nic("net0", true, false, &[])], Some("nowhere"));
    let e = desired_claims(&m, &default_cluster()).unwrap_err();
    assert_eq!(e.to_string(), "zone nowhere not found");
    // Also when the cluster has no zone status (yet) for a zone the spec gives pools.
    let m = machine(vec![nic("net0", true, false, &[])], None);
    let mut c = default_cluster();
    c.status = None;
    c.spec.ipv4_config = Some(capmox_api::v1alpha2::IpConfigSpec {
        addresses: vec!["10.0.0.10-10.0.0.20".into()],
        gateway: "10.0.0.1".into(),
        prefix: 24,
        metric: None,
    });
    assert_eq!(
        desired_claims(&m, &c).unwrap_err().to_string(),
        "zone default not found"
    );
    // A DHCP-only cluster (no pools in the spec) never gets a default pool: nothing to claim.
    c.spec.ipv4_config = None;
    assert!(desired_claims(&m, &c).unwrap().is_empty());
    // A zone is only needed when a NIC asks for a default pool.
    let m = machine(
        vec![nic("net0", false, false, &[("InClusterIPPool", "p")])],
        Some("nowhere"),
    );
    assert_eq!(desired_claims(&m, &default_cluster()).unwrap().len(), 1);
}

#[test]
fn zone_without_family_pool_is_skipped() {
    // capmox's defaulting webhook sets defaultIPv4 and defaultIPv6 on net0 of every machine; a
    // zone with only an IPv4 pool gives only the IPv4 claim (as capmox).
    let m = machine(vec![nic("net0", true, true, &[])], Some("z1"));
    let claims = desired_claims(&m, &default_cluster()).unwrap();
    assert_eq!(claims.len(), 1);
    assert_eq!(claims[0].family, Some(IpFamily::V4));
    assert!(claims[0].is_default_pool);
}

#[test]
fn machine_needs_uid_and_cluster_name() {
    let mut m = machine(vec![nic("net0", true, false, &[])], None);
    m.metadata.uid = None;
    assert!(
        desired_claims(&m, &default_cluster())
            .unwrap_err()
            .to_string()
            .contains("metadata.uid")
    );
    let mut m = machine(vec![nic("net0", true, false, &[])], None);
    m.metadata.labels = None;
    assert!(
        desired_claims(&m, &default_cluster())
            .unwrap_err()
            .to_string()
            .contains("cluster-name")
    );
    // Falls back to the ProxmoxCluster's cluster-name label.
    let mut c = default_cluster();
    c.metadata.labels = Some(BTreeMap::from([(CLUSTER_NAME_LABEL.to_owned(), "c2".to_owned())]));
    assert_eq!(desired_claims(&m, &c).unwrap()[0].cluster_name, "c2");
}

#[test]
fn missing_and_unfulfilled_claims_are_pending() {
    let d = dual_stack();
    let r = resolve(&d, &[], &[]);
    assert_eq!(r.pending, names(&d));
    assert_eq!(r.missing, names(&d));
    assert!(r.conflicts.is_empty() && r.resolved.is_empty() && !r.is_complete());

    assert!(r.orphaned.is_empty());

    // An IPAddress left behind by a deleted claim is reported as orphaned.
    let (_, addrs) = fulfilled(&d);
    let r = resolve(&d, &[], &addrs[..1]);
    assert_eq!(r.orphaned, vec!["m1-net0-00-inet"]);
    assert_eq!(r.missing.len(), 4);

    let claims: Vec<_> = d.iter().map(|c| claim_for(c, None)).collect();
    let r = resolve(&d, &claims, &[]);
    assert_eq!(r.pending, names(&d));
    assert!(r.missing.is_empty());
    assert_eq!(r.conflict_message(), None);
}

#[test]
fn fully_resolved() {
    let d = dual_stack();
    let (claims, addrs) = fulfilled(&d);
    let r = resolve(&d, &claims, &addrs);
    assert!(r.is_complete(), "{r:?}");
    assert_eq!(r.resolved.len(), 4);
    let a = &r.resolved[0];
    assert_eq!(a.net, "net0");
    assert_eq!(a.pool_offset, 0);
    assert_eq!(a.family, IpFamily::V4);
    assert_eq!(a.address.to_string(), "10.0.0.5");
    assert_eq!(a.prefix, 24);
    assert_eq!(a.gateway.as_deref(), Some("10.0.0.1"));
    assert!(a.is_default_pool);
    assert_eq!(a.ip_address_name, "m1-net0-00-inet");
    assert_eq!(r.resolved[1].family, IpFamily::V6);
    assert_eq!(r.resolved[3].net, "net1");
    assert!(!r.resolved[3].is_default_pool);
}

#[test]
fn claim_of_another_owner_conflicts() {
    let d = dual_stack();
    let (mut claims, addrs) = fulfilled(&d);
    if let Some(o) = claims[0].metadata.owner_references.as_mut() {
        o[0].uid = "other-uid".into();
        o[0].name = "m1-old".into();
    }
    claims[1].metadata.owner_references = None;
    let r = resolve(&d, &claims, &addrs);
    assert_eq!(r.conflicts.len(), 2);
    assert_eq!(r.conflicts[0].0, "m1-net0-00-inet");
    assert!(
        r.conflicts[0].1.contains("ProxmoxMachine m1-old"),
        "{}",
        r.conflicts[0].1
    );
    assert!(r.conflicts[0].1.contains("delete"), "{}", r.conflicts[0].1);
    assert!(r.conflicts[1].1.contains("has no controller"));
    assert_eq!(r.resolved.len(), 2);
    assert!(!r.is_complete());
    assert!(r.conflict_message().unwrap().contains("; "));
}

#[test]
fn claim_of_an_earlier_machine_of_the_same_name_is_adopted_with_its_address() {
    let d = dual_stack();
    let (mut claims, addrs) = fulfilled(&d);
    if let Some(o) = claims[0].metadata.owner_references.as_mut() {
        o[0].uid = "old-uid".into();
        o[0].api_version = "infrastructure.cluster.x-k8s.io/v1alpha1".into();
    }
    claims[0].metadata.resource_version = Some("42".into());
    let r = resolve(&d, &claims, &addrs);
    assert!(r.is_complete(), "{r:?}");
    assert_eq!(r.resolved[0].address.to_string(), "10.0.0.5");
    assert_eq!(r.adopt.len(), 1);
    let a = &r.adopt[0];
    assert_eq!(a.name, "m1-net0-00-inet");
    assert_eq!(a.resource_version.as_deref(), Some("42"));
    assert_eq!(a.owners.len(), 1);
    assert_eq!(a.owners[0].uid, UID);
    assert_eq!(a.owners[0].controller, Some(true));
    // A claim on its way out is waited for, never adopted.
    claims[0].metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::now(),
    ));
    let r = resolve(&d, &claims, &addrs);
    assert!(r.adopt.is_empty());
    assert_eq!(r.pending, ["m1-net0-00-inet"]);
}

#[test]
fn claim_with_wrong_pool_conflicts() {
    let d = dual_stack();
    let (mut claims, addrs) = fulfilled(&d);
    claims[2].spec.pool_ref.name = "elsewhere".into();
    let r = resolve(&d, &claims, &addrs);
    assert_eq!(r.conflicts.len(), 1);
    let m = &r.conflicts[0].1;
    assert!(
        m.contains("InClusterIPPool/elsewhere") && m.contains("InClusterIPPool/extra0"),
        "{m}"
    );
}

#[test]
fn v1beta1_claim_without_api_group_matches() {
    let d = dual_stack();
    let (mut claims, mut addrs) = fulfilled(&d);
    claims[0].spec.pool_ref.api_group.clear();
    addrs[0].spec.pool_ref.api_group.clear();
    assert!(resolve(&d, &claims, &addrs).is_complete());
}

#[test]
fn missing_or_foreign_ip_address_conflicts() {
    let d = dual_stack();
    let (claims, mut addrs) = fulfilled(&d);
    addrs.remove(0);
    addrs[0].spec.pool_ref.name = "other-pool".into();
    addrs[1].spec.claim_ref.name = "someone-else".into();
    let r = resolve(&d, &claims, &addrs);
    let msgs: Vec<&str> = r.conflicts.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(msgs.len(), 3, "{msgs:?}");
    assert!(msgs[0].contains("does not exist"), "{}", msgs[0]);
    assert!(msgs[1].contains("InClusterIPPool/other-pool"), "{}", msgs[1]);
    assert!(msgs[2].contains("someone-else"), "{}", msgs[2]);
    assert_eq!(r.resolved.len(), 1);
}

#[test]
fn invalid_addresses_conflict() {
    let d = dual_stack();
    let (claims, mut addrs) = fulfilled(&d);
    addrs[0].spec.address = "not-an-ip".into();
    addrs[2].spec.prefix = 33;
    // A default IPv4 pool handing out IPv6 is a broken pool.
    addrs[1].spec.address = "10.9.9.9".into();
    let r = resolve(&d, &claims, &addrs);
    assert_eq!(r.conflicts.len(), 3, "{r:?}");
    assert!(
        r.conflicts[1].1.contains("wrong address family"),
        "{:?}",
        r.conflicts
    );
    assert!(r.conflicts[2].1.contains("invalid prefix 33"));
}

#[test]
fn status_ip_addresses_per_net_plus_default() {
    let d = dual_stack();
    let (claims, addrs) = fulfilled(&d);
    let mut resolved = resolve(&d, &claims, &addrs).resolved;
    resolved.reverse(); // input order must not matter
    let s = ip_addresses_status(&resolved);
    let v = |x: &[&str]| Some(x.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>());
    assert_eq!(
        s,
        vec![
            IpAddressesSpec {
                ipv4: v(&["10.0.0.5"]),
                ipv6: v(&["fd00::5"]),
                net: "default".into()
            },
            IpAddressesSpec {
                ipv4: v(&["10.0.0.5", "192.168.1.5"]),
                ipv6: v(&["fd00::5"]),
                net: "net0".into()
            },
            IpAddressesSpec {
                ipv4: v(&["172.16.0.9"]),
                ipv6: None,
                net: "net1".into()
            },
        ]
    );
    assert!(ip_addresses_status(&[]).is_empty());
}

#[test]
fn machine_addresses_hostname_then_default_v4_then_v6() {
    let d = dual_stack();
    let (claims, addrs) = fulfilled(&d);
    let mut resolved = resolve(&d, &claims, &addrs).resolved;
    resolved.swap(0, 1);
    let a = machine_addresses("m1", &resolved).unwrap();
    let got: Vec<(MachineAddressType, &str)> = a.iter().map(|a| (a.type_, a.address.as_str())).collect();
    assert_eq!(
        got,
        vec![
            (MachineAddressType::Hostname, "m1"),
            (MachineAddressType::InternalIp, "10.0.0.5"),
            (MachineAddressType::InternalIp, "fd00::5"),
        ]
    );
    let extra_only: Vec<_> = resolved.into_iter().filter(|r| !r.is_default_pool).collect();
    assert_eq!(
        machine_addresses("m1", &extra_only).unwrap_err().to_string(),
        "Machine has no default IPAddresses"
    );
}

#[test]
fn gateway_metrics_from_pool_annotations() {
    let d = dual_stack();
    let (claims, addrs) = fulfilled(&d);
    let mut resolved = resolve(&d, &claims, &addrs).resolved;
    let v4 = BTreeMap::from([
        ("metric".to_owned(), "50".to_owned()),
        (
            "ipam.capmox.cluster.x-k8s.io/gateway-metric".to_owned(),
            "100".to_owned(),
        ),
    ]);
    let v6 = BTreeMap::from([("metric".to_owned(), "200".to_owned())]);
    apply_gateway_metrics(&mut resolved, |p| match p.name.as_str() {
        "pc1-v4-icip" => Some(&v4),
        "pc1-v6-icip" => Some(&v6),
        _ => None,
    })
    .unwrap();
    let metrics: Vec<_> = resolved.iter().map(|r| r.metric).collect();
    assert_eq!(metrics, vec![Some(100), Some(200), None, None]);

    let bad = BTreeMap::from([("metric".to_owned(), "lots".to_owned())]);
    let e = apply_gateway_metrics(&mut resolved, |_| Some(&bad)).unwrap_err();
    assert!(
        e.to_string().starts_with("pool InClusterIPPool/pc1-v4-icip"),
        "{e}"
    );

    let b = bootstrap_addresses(&resolved);
    assert_eq!(b["net0"].len(), 3);
    assert_eq!(b["net0"][0].name, "m1-net0-00-inet");
    assert_eq!(b["net0"][0].address, "10.0.0.5");
    assert_eq!(b["net0"][0].prefix, 24);
    assert!(b["net0"][0].is_default);
    assert_eq!(b["net1"][0].address, "172.16.0.9");
}

#[test]
fn vm_tags_for_default_ipv4_addresses() {
    let d = dual_stack();
    let (claims, addrs) = fulfilled(&d);
    let mut resolved = resolve(&d, &claims, &addrs).resolved;
    resolved.reverse();
    assert_eq!(default_ipv4_tags(&resolved), vec!["ip_net0_10.0.0.5"]);
    assert!(default_ipv4_tags(&[]).is_empty());
}

#[test]
fn extra_pool_claims_take_the_pool_zone_label() {
    let mut d = dual_stack();
    apply_pool_zones(&mut d, |p| (p.name == "extra0").then_some("z7"));
    assert_eq!(d[0].labels[PROXMOX_ZONE_LABEL], "default");
    assert_eq!(d[2].labels[PROXMOX_ZONE_LABEL], "z7");
    assert!(!d[3].labels.contains_key(PROXMOX_ZONE_LABEL));
}

#[test]
fn dhcp_and_slaac_families_claim_no_default_pool() {
    use capmox_api::v1alpha2::{Ipv4Mode, Ipv6Mode};
    let mut dhcp4 = nic("net0", true, true, &[("InClusterIPPool", "extra")]);
    dhcp4.ipv4 = Some(Ipv4Mode::Dhcp);
    let mut slaac = nic("net1", true, true, &[]);
    slaac.ipv6 = Some(Ipv6Mode::Slaac);
    let mut both = nic("net2", true, true, &[]);
    both.ipv4 = Some(Ipv4Mode::Dhcp);
    both.ipv6 = Some(Ipv6Mode::Dhcp);
    let m = machine(vec![dhcp4, slaac, both], None);
    let d = desired_claims(&m, &default_cluster()).unwrap();
    let got: Vec<(&str, &str)> = d
        .iter()
        .map(|c| (c.name.as_str(), c.pool.name.as_str()))
        .collect();
    assert_eq!(
        got,
        [
            ("m1-net0-00-inet", "pc1-v6-icip"),
            ("m1-net0-01-inet", "extra"),
            ("m1-net1-00-inet", "pc1-v4-icip"),
        ]
    );
}
