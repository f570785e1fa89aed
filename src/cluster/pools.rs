//! The InClusterIPPools a ProxmoxCluster needs (pure): one per IP family of the default zone and
//! of every `zoneConfig` entry, named, labelled and annotated like capmox's, and the status
//! references that point machines at them.

use std::collections::BTreeMap;
use std::net::IpAddr;

use capmox_api::capi::ipam::{InClusterIPPool, InClusterIPPoolSpec};
use capmox_api::consts::{
    DEFAULT_ZONE, GATEWAY_METRIC_ANNOTATION, IP_FAMILY_ANNOTATION, IP_FAMILY_IPV4, IP_FAMILY_IPV6,
    IPV4_POOL_SUFFIX, IPV6_POOL_SUFFIX, LEGACY_METRIC_ANNOTATION, PROXMOX_ZONE_LABEL,
};
use capmox_api::v1alpha2::{DEFAULT_GATEWAY_METRIC, InClusterZoneRef, IpConfigSpec, ProxmoxClusterSpec};
use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::ObjectMeta;

/// Seconds a released address stays reserved (capmox v0.9 value).
pub const ADDRESS_REUSE_GRACE_PERIOD_SECONDS: i32 = 60;

/// IP family of a pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

impl Family {
    fn annotation(self) -> &'static str {
        match self {
            Self::V4 => IP_FAMILY_IPV4,
            Self::V6 => IP_FAMILY_IPV6,
        }
    }

    fn suffix(self) -> &'static str {
        match self {
            Self::V4 => IPV4_POOL_SUFFIX,
            Self::V6 => IPV6_POOL_SUFFIX,
        }
    }
}

/// Detects the family from the first address entry (an IP, `first-last` range or CIDR);
/// `fallback` when it does not parse.
pub fn family_of(addresses: &[String], fallback: Family) -> Family {
    let Some(first) = addresses.first() else {
        return fallback;
    };
    let head = first.split(['-', '/']).next().unwrap_or_default().trim();
    match head.parse::<IpAddr>() {
        Ok(IpAddr::V4(_)) => Family::V4,
        Ok(IpAddr::V6(_)) => Family::V6,
        Err(_) => fallback,
    }
}

/// One pool the cluster needs.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredPool {
    /// Pool name.
    pub name: String,
    /// Zone name (`default` for the cluster-wide configuration).
    pub zone: String,
    /// IP family.
    pub family: Family,
    /// Route metric of the gateway, when configured.
    pub metric: Option<i32>,
    /// Pool spec.
    pub spec: InClusterIPPoolSpec,
}

fn pool_name(cluster: &str, zone: Option<&str>, family: Family) -> String {
    match zone {
        Some(z) => format!("{cluster}-{z}{}", family.suffix()),
        None => format!("{cluster}{}", family.suffix()),
    }
}

fn desired(cluster: &str, zone: Option<&str>, cfg: &IpConfigSpec, fallback: Family) -> DesiredPool {
    let family = family_of(&cfg.addresses, fallback);
    DesiredPool {
        name: pool_name(cluster, zone, family),
        zone: zone.unwrap_or(DEFAULT_ZONE).to_owned(),
        family,
        metric: cfg.metric,
        spec: InClusterIPPoolSpec {
            addresses: cfg.addresses.clone(),
            prefix: cfg.prefix,
            gateway: (!cfg.gateway.is_empty()).then(|| cfg.gateway.clone()),
            address_reuse_grace_period_seconds: Some(ADDRESS_REUSE_GRACE_PERIOD_SECONDS),
            ..Default::default()
        },
    }
}

/// The pools of a ProxmoxCluster named `cluster`, default zone first, then zones in spec order.
pub fn desired_pools(cluster: &str, spec: &ProxmoxClusterSpec) -> Vec<DesiredPool> {
    let mut out = Vec::new();
    let mut push = |zone: Option<&str>, v4: Option<&IpConfigSpec>, v6: Option<&IpConfigSpec>| {
        if let Some(c) = v4 {
            out.push(desired(cluster, zone, c, Family::V4));
        }
        if let Some(c) = v6 {
            out.push(desired(cluster, zone, c, Family::V6));
        }
    };
    push(None, spec.ipv4_config.as_ref(), spec.ipv6_config.as_ref());
    for z in spec.zone_config.iter().flatten() {
        push(Some(&z.zone), z.ipv4_config.as_ref(), z.ipv6_config.as_ref());
    }
    out
}

/// The object to apply for a pool: namespace of the cluster, zone label, family and metric
/// annotations, and a controller ownerRef to the ProxmoxCluster.
pub fn pool_object(pool: &DesiredPool, namespace: &str, owner: OwnerReference) -> InClusterIPPool {
    let metric = pool.metric.unwrap_or(DEFAULT_GATEWAY_METRIC).to_string();
    let mut annotations = BTreeMap::from([
        (
            IP_FAMILY_ANNOTATION.to_owned(),
            pool.family.annotation().to_owned(),
        ),
        (GATEWAY_METRIC_ANNOTATION.to_owned(), metric.clone()),
    ]);
    if pool.metric.is_some() {
        annotations.insert(LEGACY_METRIC_ANNOTATION.to_owned(), metric);
    }
    let mut obj = InClusterIPPool::new(&pool.name, pool.spec.clone());
    obj.metadata = ObjectMeta {
        name: Some(pool.name.clone()),
        namespace: Some(namespace.to_owned()),
        labels: Some(BTreeMap::from([(
            PROXMOX_ZONE_LABEL.to_owned(),
            pool.zone.clone(),
        )])),
        annotations: Some(annotations),
        owner_references: Some(vec![owner]),
        ..Default::default()
    };
    obj
}

/// Whether `current` (the pool as served) already is what applying `desired` would make it:
/// every spec field `desired` sets has its value (a field the served CRD does not declare —
/// `addressReuseGracePeriodSeconds` on older IPAM providers — may be absent), and the labels,
/// annotations and controller ownerRef are there.
pub fn is_applied(desired: &InClusterIPPool, current: &InClusterIPPool) -> bool {
    let (Ok(want), Ok(have)) = (
        serde_json::to_value(&desired.spec),
        serde_json::to_value(&current.spec),
    ) else {
        return false;
    };
    let spec_ok = want.as_object().is_some_and(|want| {
        want.iter().all(|(k, v)| match have.get(k) {
            Some(h) => h == v,
            None => v.is_null() || k == "addressReuseGracePeriodSeconds",
        })
    });
    let subset = |want: &Option<BTreeMap<String, String>>, have: &Option<BTreeMap<String, String>>| {
        want.iter()
            .flatten()
            .all(|(k, v)| have.as_ref().and_then(|h| h.get(k)) == Some(v))
    };
    let owned = desired.metadata.owner_references.iter().flatten().all(|o| {
        current
            .metadata
            .owner_references
            .iter()
            .flatten()
            .any(|c| c.uid == o.uid && c.controller == o.controller)
    });
    spec_ok
        && subset(&desired.metadata.labels, &current.metadata.labels)
        && subset(&desired.metadata.annotations, &current.metadata.annotations)
        && owned
}

/// `status.inClusterIPPoolRef` and `status.inClusterZoneRef` for the pools: every pool name, and
/// one zone entry per zone (in first-seen order) with its v4 and v6 pool.
pub fn status_refs(pools: &[DesiredPool]) -> (Vec<LocalObjectReference>, Vec<InClusterZoneRef>) {
    let refs = pools
        .iter()
        .map(|p| LocalObjectReference { name: p.name.clone() })
        .collect();
    let mut zones: Vec<InClusterZoneRef> = Vec::new();
    for p in pools {
        let idx = match zones
            .iter()
            .position(|z| z.zone.as_deref() == Some(p.zone.as_str()))
        {
            Some(i) => i,
            None => {
                zones.push(InClusterZoneRef {
                    zone: Some(p.zone.clone()),
                    ..Default::default()
                });
                zones.len() - 1
            }
        };
        let r = Some(LocalObjectReference { name: p.name.clone() });
        match p.family {
            Family::V4 => zones[idx].in_cluster_ip_pool_ref_v4 = r,
            Family::V6 => zones[idx].in_cluster_ip_pool_ref_v6 = r,
        }
    }
    (refs, zones)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmox_api::v1alpha2::ZoneConfigSpec;

    fn cfg(addr: &str, metric: Option<i32>) -> IpConfigSpec {
        IpConfigSpec {
            addresses: vec![addr.into()],
            gateway: "10.0.0.1".into(),
            metric,
            prefix: 24,
        }
    }

    #[test]
    fn family_detection() {
        assert_eq!(family_of(&["10.0.0.1-10.0.0.9".into()], Family::V6), Family::V4);
        assert_eq!(family_of(&["2001:db8::/64".into()], Family::V4), Family::V6);
        assert_eq!(family_of(&["fd00::10-fd00::20".into()], Family::V4), Family::V6);
        assert_eq!(family_of(&["garbage".into()], Family::V6), Family::V6);
        assert_eq!(family_of(&[], Family::V4), Family::V4);
    }

    #[test]
    fn names_zones_and_refs_for_three_zones() {
        let spec = ProxmoxClusterSpec {
            ipv4_config: Some(cfg("10.0.0.10-10.0.0.20", None)),
            ipv6_config: Some(cfg("fd00::10-fd00::20", Some(200))),
            zone_config: Some(vec![
                ZoneConfigSpec {
                    zone: "a".into(),
                    ipv4_config: Some(cfg("10.1.0.0/24", None)),
                    ..Default::default()
                },
                ZoneConfigSpec {
                    zone: "b".into(),
                    ipv4_config: Some(cfg("10.2.0.0/24", None)),
                    ipv6_config: Some(cfg("fd02::/64", None)),
                    ..Default::default()
                },
                ZoneConfigSpec {
                    zone: "c".into(),
                    ipv6_config: Some(cfg("fd03::/64", None)),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        let pools = desired_pools("demo", &spec);
        let names: Vec<_> = pools.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "demo-v4-icip",
                "demo-v6-icip",
                "demo-a-v4-icip",
                "demo-b-v4-icip",
                "demo-b-v6-icip",
                "demo-c-v6-icip"
            ]
        );
        assert_eq!(pools[0].spec.address_reuse_grace_period_seconds, Some(60));
        let (refs, zones) = status_refs(&pools);
        assert_eq!(refs.len(), 6);
        assert_eq!(zones.len(), 4);
        let z = |n: &str| zones.iter().find(|z| z.zone.as_deref() == Some(n)).unwrap();
        let name = |r: &Option<LocalObjectReference>| r.as_ref().map(|r| r.name.clone());
        assert_eq!(
            name(&z("default").in_cluster_ip_pool_ref_v6),
            Some("demo-v6-icip".into())
        );
        assert_eq!(
            name(&z("b").in_cluster_ip_pool_ref_v4),
            Some("demo-b-v4-icip".into())
        );
        assert_eq!(
            name(&z("b").in_cluster_ip_pool_ref_v6),
            Some("demo-b-v6-icip".into())
        );
        assert_eq!(name(&z("c").in_cluster_ip_pool_ref_v4), None);
        assert_eq!(
            name(&z("c").in_cluster_ip_pool_ref_v6),
            Some("demo-c-v6-icip".into())
        );
    }

    #[test]
    fn pool_object_metadata() {
        let spec = ProxmoxClusterSpec {
            ipv6_config: Some(cfg("fd00::/64", Some(200))),
            zone_config: Some(vec![ZoneConfigSpec {
                zone: "z1".into(),
                ipv4_config: Some(cfg("10.1.0.0/24", None)),
                ..Default::default()
            }]),
            ..Default::default()
        };
        let pools = desired_pools("c", &spec);
        let owner = OwnerReference {
            controller: Some(true),
            ..Default::default()
        };
        let v6 = pool_object(&pools[0], "ns", owner.clone());
        let ann = v6.metadata.annotations.unwrap();
        assert_eq!(ann[IP_FAMILY_ANNOTATION], "ipv6");
        assert_eq!(ann[GATEWAY_METRIC_ANNOTATION], "200");
        assert_eq!(ann[LEGACY_METRIC_ANNOTATION], "200");
        assert_eq!(v6.metadata.labels.unwrap()[PROXMOX_ZONE_LABEL], "default");
        let z = pool_object(&pools[1], "ns", owner);
        let ann = z.metadata.annotations.clone().unwrap();
        assert_eq!(ann[GATEWAY_METRIC_ANNOTATION], "100");
        assert!(!ann.contains_key(LEGACY_METRIC_ANNOTATION));
        assert_eq!(z.metadata.labels.clone().unwrap()[PROXMOX_ZONE_LABEL], "z1");
        assert_eq!(z.metadata.name.as_deref(), Some("c-z1-v4-icip"));
        let v = serde_json::to_value(&z).unwrap();
        assert_eq!(v["apiVersion"], "ipam.cluster.x-k8s.io/v1alpha2");
        assert_eq!(v["kind"], "InClusterIPPool");
        assert_eq!(v["spec"]["addressReuseGracePeriodSeconds"], 60);
    }
}
