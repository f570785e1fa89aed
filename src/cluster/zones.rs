//! The Proxmox clusters of zones with their own `credentialsRef` (issue 14 item 7): each is
//! probed with the ProxmoxCluster. A zone whose Secret is missing or whose Proxmox does not answer
//! gives a Warning event naming the zone, but does not make the ProxmoxCluster unavailable: the
//! other zones (and the default Proxmox) keep working, and the zone's machines report the failure
//! themselves (`VirtualMachineProvisioned` names the zone).

use capmox_api::v1alpha2::ProxmoxCluster;
use k8s_openapi::api::core::v1::Secret;
use kube::api::Api;

use super::readiness::Transition;
use crate::context::Context;
use crate::machine::zone::{secret_label, zone_credentials};

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
    use k8s_openapi::api::core::v1::SecretReference;

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
