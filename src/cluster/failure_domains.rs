//! CAPI failure domains from `zoneConfig` zones (pure; opt-in via `spec.failureDomainsFromZones`).

use capmox_api::v1alpha2::{FailureDomain, ProxmoxClusterSpec};

/// One failure domain per `zoneConfig` zone (control plane allowed), in spec order, when the
/// user opted in; `None` otherwise or when there are no zones.
pub fn from_zones(spec: &ProxmoxClusterSpec) -> Option<Vec<FailureDomain>> {
    if spec.failure_domains_from_zones != Some(true) {
        return None;
    }
    let domains: Vec<FailureDomain> = spec
        .zone_config
        .iter()
        .flatten()
        .map(|z| FailureDomain {
            name: z.zone.clone(),
            control_plane: Some(true),
            attributes: None,
        })
        .collect();
    (!domains.is_empty()).then_some(domains)
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmox_api::v1alpha2::ZoneConfigSpec;

    #[test]
    fn opt_in_only() {
        let mut spec = ProxmoxClusterSpec {
            zone_config: Some(vec![
                ZoneConfigSpec {
                    zone: "a".into(),
                    ..Default::default()
                },
                ZoneConfigSpec {
                    zone: "b".into(),
                    ..Default::default()
                },
            ]),
            ..Default::default()
        };
        assert_eq!(from_zones(&spec), None);
        spec.failure_domains_from_zones = Some(true);
        let names: Vec<_> = from_zones(&spec).unwrap().into_iter().map(|d| d.name).collect();
        assert_eq!(names, ["a", "b"]);
        spec.zone_config = None;
        assert_eq!(from_zones(&spec), None);
    }
}
