//! The zone a machine lives in (pure): with `failureDomainsFromZones`, the CAPI Machine's
//! `spec.failureDomain` names it; otherwise `spec.network.zone` (default `default`). The zone
//! decides the default IP pools, the `zone` meta-data and label, and — when its `zoneConfig`
//! entry lists `nodes` — the Proxmox nodes the machine may be placed on — and, when the entry
//! names a `credentialsRef`, the Proxmox cluster (one per zone) the machine's VM lives in.

use capmox_api::consts::DEFAULT_ZONE;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxClusterSpec, ProxmoxMachine, ProxmoxMachineSpec};
use k8s_openapi::api::core::v1::SecretReference;

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

/// The credentials Secret of `zone`'s own Proxmox cluster (its `zoneConfig` entry's
/// `credentialsRef`, the namespace defaulting to the ProxmoxCluster's); `None`: the zone uses the
/// ProxmoxCluster's credentials.
pub fn zone_credentials(pc: &ProxmoxCluster, zone: &str) -> Option<SecretReference> {
    let r = pc
        .spec
        .zone_config
        .as_deref()
        .unwrap_or_default()
        .iter()
        .find(|z| z.zone == zone)?
        .credentials_ref
        .as_ref()?;
    let name = r.name.clone().filter(|n| !n.is_empty())?;
    let namespace = r
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| pc.metadata.namespace.clone());
    Some(SecretReference {
        name: Some(name),
        namespace,
    })
}

/// The zone of a machine (after [`apply`]): `spec.network.zone`, default `default`.
pub fn machine_zone(spec: &ProxmoxMachineSpec) -> &str {
    spec.network
        .zone
        .as_deref()
        .filter(|z| !z.is_empty())
        .unwrap_or(DEFAULT_ZONE)
}

/// The credentials Secret the machine's Proxmox cluster is reached with (`None`: the
/// ProxmoxCluster's). Once a VMID is recorded it is the one recorded in `status.credentialsRef`
/// (where the VM was created, whatever `zoneConfig` says since); before, its zone's.
pub fn machine_credentials(pm: &ProxmoxMachine, pc: &ProxmoxCluster) -> Option<SecretReference> {
    if super::observe::recorded_vmid(pm).is_some() {
        return pm.status.as_ref().and_then(|s| s.credentials_ref.clone());
    }
    zone_credentials(pc, machine_zone(&pm.spec))
}

/// Records in the working copy's `status.credentialsRef` where the machine's VM is (to be)
/// created. Returns whether the status changed: the caller persists it before any VMID is
/// reserved, so the VM can always be found again.
pub fn pin_credentials(pm: &mut ProxmoxMachine, pc: &ProxmoxCluster) -> bool {
    if super::observe::recorded_vmid(pm).is_some() {
        return false;
    }
    let want = zone_credentials(pc, machine_zone(&pm.spec));
    let current = pm.status.as_ref().and_then(|s| s.credentials_ref.as_ref());
    if current == want.as_ref() {
        return false;
    }
    pm.status.get_or_insert_with(Default::default).credentials_ref = want;
    true
}

/// `ns/name` of a Secret reference (for messages).
pub fn secret_label(r: &SecretReference) -> String {
    format!(
        "{}/{}",
        r.namespace.as_deref().unwrap_or_default(),
        r.name.as_deref().unwrap_or_default()
    )
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

    fn zoned_pc() -> ProxmoxCluster {
        let mut pc = ProxmoxCluster::new("c", Default::default());
        pc.metadata.namespace = Some("ns".into());
        pc.spec.zone_config = Some(vec![
            ZoneConfigSpec {
                zone: "a".into(),
                ..Default::default()
            },
            ZoneConfigSpec {
                zone: "b".into(),
                credentials_ref: Some(SecretReference {
                    name: Some("pve-b".into()),
                    namespace: None,
                }),
                ..Default::default()
            },
        ]);
        pc
    }

    #[test]
    fn zone_credentials_default_to_the_cluster_namespace() {
        let pc = zoned_pc();
        assert_eq!(zone_credentials(&pc, "a"), None);
        assert_eq!(zone_credentials(&pc, "default"), None);
        let b = zone_credentials(&pc, "b").unwrap();
        assert_eq!(secret_label(&b), "ns/pve-b");
    }

    #[test]
    fn credentials_are_pinned_until_the_vmid_is_recorded() {
        let pc = zoned_pc();
        let mut pm = ProxmoxMachine::new("m", Default::default());
        pm.spec.network.zone = Some("b".into());
        assert!(pin_credentials(&mut pm, &pc));
        assert!(!pin_credentials(&mut pm, &pc), "pinning twice changes nothing");
        let pinned = machine_credentials(&pm, &pc);
        assert_eq!(pinned.as_ref().map(secret_label).as_deref(), Some("ns/pve-b"));
        // Once the VMID is recorded a later zoneConfig change does not move the machine.
        pm.spec.virtual_machine_id = Some(150);
        let mut changed = pc.clone();
        changed.spec.zone_config = None;
        assert!(!pin_credentials(&mut pm, &changed));
        assert_eq!(machine_credentials(&pm, &changed), pinned);
        // Before it, the machine follows its zone (back to the cluster's credentials here).
        pm.spec.virtual_machine_id = None;
        assert!(pin_credentials(&mut pm, &changed));
        assert_eq!(machine_credentials(&pm, &changed), None);
        assert_eq!(pm.status.as_ref().unwrap().credentials_ref, None);
        // A VM recorded before zones had credentials stays with the cluster's.
        let mut old = ProxmoxMachine::new("o", Default::default());
        old.spec.network.zone = Some("b".into());
        old.spec.virtual_machine_id = Some(151);
        assert_eq!(machine_credentials(&old, &pc), None);
    }
}
