//! The zone a machine lives in (pure): with `failureDomainsFromZones`, the CAPI Machine's
//! `spec.failureDomain` names it; otherwise `spec.network.zone` (default `default`). The zone
//! decides the default IP pools, the `zone` meta-data and label, and — when its `zoneConfig`
//! entry lists `nodes` — the Proxmox nodes the machine may be placed on.

use capmox_api::v1alpha2::{ProxmoxClusterSpec, ProxmoxMachineSpec};

/// The Machine's failure domain names no zone the ProxmoxCluster publishes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "failure domain {domain:?} names no zone of the ProxmoxCluster (its failure domains: [{}])",
    .known.join(", ")
)]
pub struct UnknownFailureDomain {
    /// The Machine's `spec.failureDomain`.
    pub domain: String,
    /// The zones the ProxmoxCluster publishes as failure domains.
    pub known: Vec<String>,
}

/// The zone of a machine whose CAPI Machine has `failure_domain`: `Some(zone)` when the failure
/// domain selects it (it overrides `spec.network.zone`), `None` when the machine keeps its
/// network zone (no failure domain, or the cluster does not publish its zones as failure domains).
pub fn failure_domain_zone(
    cluster: &ProxmoxClusterSpec,
    failure_domain: Option<&str>,
) -> Result<Option<String>, UnknownFailureDomain> {
    let Some(domain) = failure_domain.filter(|d| !d.is_empty()) else {
        return Ok(None);
    };
    if cluster.failure_domains_from_zones != Some(true) {
        return Ok(None);
    }
    let zones = cluster.zone_config.as_deref().unwrap_or_default();
    if zones.iter().any(|z| z.zone == domain) {
        return Ok(Some(domain.to_owned()));
    }
    Err(UnknownFailureDomain {
        domain: domain.to_owned(),
        known: zones.iter().map(|z| z.zone.clone()).collect(),
    })
}

/// Applies the failure domain's zone to a working copy of the machine's spec (never persisted:
/// only `virtualMachineID` and `providerID` of the spec are written back).
pub fn apply(
    spec: &mut ProxmoxMachineSpec,
    cluster: &ProxmoxClusterSpec,
    failure_domain: Option<&str>,
) -> Result<(), UnknownFailureDomain> {
    if let Some(zone) = failure_domain_zone(cluster, failure_domain)? {
        spec.network.zone = Some(zone);
    }
    Ok(())
}

/// The Proxmox nodes of `zone` (its `zoneConfig` entry's `nodes`; `None`: not restricted).
pub fn zone_nodes<'a>(cluster: &'a ProxmoxClusterSpec, zone: &str) -> Option<&'a [String]> {
    cluster
        .zone_config
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|z| z.zone == zone)
        .and_then(|z| z.nodes.as_deref())
        .filter(|n| !n.is_empty())
}

/// The nodes a machine of `zone` may be placed on: the zone's nodes, narrowed to `allowed` (the
/// machine's or cluster's allowed nodes) when both are given. `Err` when they have no node in
/// common.
pub fn restrict(
    allowed: Option<&[String]>,
    zone: &str,
    zone_nodes: Option<&[String]>,
) -> Result<Option<Vec<String>>, String> {
    match (allowed, zone_nodes) {
        (None, None) => Ok(None),
        (Some(a), None) => Ok(Some(a.to_vec())),
        (None, Some(z)) => Ok(Some(z.to_vec())),
        (Some(a), Some(z)) => {
            let both: Vec<String> = z.iter().filter(|n| a.contains(n)).cloned().collect();
            if both.is_empty() {
                Err(format!(
                    "no node of zone {zone} [{}] is among the allowed nodes [{}]",
                    z.join(", "),
                    a.join(", ")
                ))
            } else {
                Ok(Some(both))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmox_api::v1alpha2::ZoneConfigSpec;

    fn cluster(on: bool) -> ProxmoxClusterSpec {
        ProxmoxClusterSpec {
            failure_domains_from_zones: Some(on),
            zone_config: Some(vec![
                ZoneConfigSpec {
                    zone: "a".into(),
                    nodes: Some(vec!["pve1".into()]),
                    ..Default::default()
                },
                ZoneConfigSpec {
                    zone: "b".into(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        }
    }

    #[test]
    fn failure_domain_selects_zone_only_when_published() {
        assert_eq!(
            failure_domain_zone(&cluster(true), Some("a")),
            Ok(Some("a".into()))
        );
        assert_eq!(failure_domain_zone(&cluster(true), None), Ok(None));
        assert_eq!(failure_domain_zone(&cluster(true), Some("")), Ok(None));
        assert_eq!(failure_domain_zone(&cluster(false), Some("nope")), Ok(None));
        let err = failure_domain_zone(&cluster(true), Some("c")).unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"failure domain "c" names no zone of the ProxmoxCluster (its failure domains: [a, b])"#
        );
    }

    #[test]
    fn apply_overrides_the_network_zone() {
        let mut spec = ProxmoxMachineSpec::default();
        spec.network.zone = Some("b".into());
        apply(&mut spec, &cluster(true), Some("a")).unwrap();
        assert_eq!(spec.network.zone.as_deref(), Some("a"));
        apply(&mut spec, &cluster(false), Some("b")).unwrap();
        assert_eq!(spec.network.zone.as_deref(), Some("a"));
    }

    #[test]
    fn zone_nodes_narrow_the_allowed_nodes() {
        let c = cluster(true);
        assert_eq!(zone_nodes(&c, "a"), Some(&["pve1".to_owned()][..]));
        assert_eq!(zone_nodes(&c, "b"), None);
        assert_eq!(zone_nodes(&c, "default"), None);
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let (z, a) = (names(&["pve1", "pve2"]), names(&["pve2", "pve3"]));
        assert_eq!(restrict(None, "a", None), Ok(None));
        assert_eq!(restrict(Some(&a), "a", None), Ok(Some(a.clone())));
        assert_eq!(restrict(None, "a", Some(&z)), Ok(Some(z.clone())));
        assert_eq!(restrict(Some(&a), "a", Some(&z)), Ok(Some(names(&["pve2"]))));
        let err = restrict(Some(&names(&["pve3"])), "a", Some(&z)).unwrap_err();
        assert_eq!(
            err,
            "no node of zone a [pve1, pve2] is among the allowed nodes [pve3]"
        );
    }
}
