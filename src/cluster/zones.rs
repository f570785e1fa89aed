//! Zones of a ProxmoxCluster (pure rules): which zone a failure domain names, which nodes a zone
//! narrows placement to, which credentials Secret a zone's own Proxmox cluster is reached with.
//!
//! The Proxmox clusters of zones with their own `credentialsRef` (issue 14 item 7): each is
//! probed with the ProxmoxCluster. A zone whose Secret is missing or whose Proxmox does not answer
//! gives a Warning event naming the zone, but does not make the ProxmoxCluster unavailable: the
//! other zones (and the default Proxmox) keep working, and the zone's machines report the failure
//! themselves (`VirtualMachineProvisioned` names the zone).

use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxClusterSpec};
use k8s_openapi::api::core::v1::{Secret, SecretReference};
use kube::api::Api;

use super::readiness::Transition;
use crate::context::Context;

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

/// `ns/name` of a Secret reference (for messages).
pub fn secret_label(r: &SecretReference) -> String {
    format!(
        "{}/{}",
        r.namespace.as_deref().unwrap_or_default(),
        r.name.as_deref().unwrap_or_default()
    )
}

/// Event reason of a zone whose own Proxmox cluster cannot be used.
pub const ZONE_PROXMOX_UNAVAILABLE_REASON: &str = "ZoneProxmoxUnavailable";

/// The zones of `pc` with their own credentials Secret, in spec order.
pub fn zones_with_credentials(pc: &ProxmoxCluster) -> Vec<String> {
    pc.spec
        .zone_config
        .as_deref()
        .unwrap_or_default()
        .iter()
        .filter(|z| zone_credentials(pc, &z.zone).is_some())
        .map(|z| z.zone.clone())
        .collect()
}

/// Probes each zone's own Proxmox cluster; one Warning per zone that failed.
pub async fn probe(ctx: &Context, pc: &ProxmoxCluster) -> Vec<Transition> {
    let mut out = Vec::new();
    for zone in zones_with_credentials(pc) {
        if let Err(note) = probe_zone(ctx, pc, &zone).await {
            out.push(Transition {
                warning: true,
                reason: ZONE_PROXMOX_UNAVAILABLE_REASON,
                note,
            });
        }
    }
    out
}

async fn probe_zone(ctx: &Context, pc: &ProxmoxCluster, zone: &str) -> Result<(), String> {
    let Some(r) = zone_credentials(pc, zone) else {
        return Ok(());
    };
    let label = secret_label(&r);
    let fail = |what: String| format!("zone {zone} (credentials Secret {label}): {what}");
    let (Some(ns), Some(name)) = (r.namespace.as_deref(), r.name.as_deref()) else {
        return Ok(());
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), ns);
    let secret = api
        .get_opt(name)
        .await
        .map_err(|e| fail(format!("getting the Secret: {e}")))?
        .ok_or_else(|| fail("the Secret does not exist".to_owned()))?;
    let client = ctx.proxmox.for_secret(&secret).map_err(|e| fail(e.to_string()))?;
    client
        .version()
        .await
        .map(|_| ())
        .map_err(|e| fail(format!("Proxmox did not answer: {e}")))
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
    fn only_zones_with_a_secret_are_probed() {
        let mut pc = ProxmoxCluster::new("c", Default::default());
        pc.metadata.namespace = Some("ns".into());
        let zone = |name: &str, secret: Option<&str>| ZoneConfigSpec {
            zone: name.into(),
            credentials_ref: secret.map(|s| SecretReference {
                name: Some(s.into()),
                namespace: None,
            }),
            ..Default::default()
        };
        pc.spec.zone_config = Some(vec![
            zone("a", None),
            zone("b", Some("pve-b")),
            zone("c", Some("")),
        ]);
        assert_eq!(zones_with_credentials(&pc), vec!["b".to_owned()]);
    }
}
