//! The zone a machine lives in (pure): with `failureDomainsFromZones`, the CAPI Machine's
//! `spec.failureDomain` names it; otherwise `spec.network.zone` (default `default`). The zone
//! decides the default IP pools, the `zone` meta-data and label, and — when its `zoneConfig`
//! entry lists `nodes` — the Proxmox nodes the machine may be placed on — and, when the entry
//! names a `credentialsRef`, the Proxmox cluster (one per zone) the machine's VM lives in.

use capmox_api::consts::DEFAULT_ZONE;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxClusterSpec, ProxmoxMachine, ProxmoxMachineSpec};
use k8s_openapi::api::core::v1::SecretReference;

pub use crate::cluster::zones::{
    UnknownFailureDomain, failure_domain_zone, restrict, secret_label, zone_credentials, zone_nodes,
};

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
    if super::record::recorded_vmid(pm).is_some() {
        return pm.status.as_ref().and_then(|s| s.credentials_ref.clone());
    }
    zone_credentials(pc, machine_zone(&pm.spec))
}

/// Records in the working copy's `status.credentialsRef` where the machine's VM is (to be)
/// created. Returns whether the status changed: the caller persists it before any VMID is
/// reserved, so the VM can always be found again.
pub fn pin_credentials(pm: &mut ProxmoxMachine, pc: &ProxmoxCluster) -> bool {
    if super::record::recorded_vmid(pm).is_some() {
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
    fn apply_overrides_the_network_zone() {
        let mut spec = ProxmoxMachineSpec::default();
        spec.network.zone = Some("b".into());
        apply(&mut spec, &cluster(true), Some("a")).unwrap();
        assert_eq!(spec.network.zone.as_deref(), Some("a"));
        apply(&mut spec, &cluster(false), Some("b")).unwrap();
        assert_eq!(spec.network.zone.as_deref(), Some("a"));
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
