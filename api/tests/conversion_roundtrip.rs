//! Property-based round trips of the v1alpha1 ⇄ v1alpha2 conversion for all four kinds.
//!
//! Two generator modes per version:
//! * `full`: anything the version can express (hub-only data such as zones, queues, `is6`,
//!   extra pools, observedGeneration; spoke-only data such as `cloneSpec`, `target`,
//!   failure fields, condition severities). Round trips must be exact; the
//!   `cluster.x-k8s.io/conversion-data` annotation carries what the other version cannot hold.
//! * `canonical`: objects the plain mapping expresses on its own (NICs `net0..netN` in order
//!   with `net0` as the default NIC, IPv4 pools named `*-inet` and IPv6 pools `*-inet6`,
//!   non-zero route metrics/tables, non-empty condition reasons and messages, ...). Their
//!   conversion must not need the annotation at all.

// Generator helpers outside `#[test]` functions panic on impossible inputs like tests do.
#![allow(clippy::expect_used)]

use capmox_api::consts::CONVERSION_DATA_ANNOTATION;
use capmox_api::conversion::{Convertible, convert_value};
use capmox_api::{v1alpha1 as s, v1alpha2 as h};
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use proptest::prelude::*;

mod conversion_gen;

use conversion_gen::*;

// ---------------------------------------------------------------- properties

fn has_conversion_data(meta: &metav1::ObjectMeta) -> bool {
    meta.annotations
        .as_ref()
        .is_some_and(|a| a.contains_key(CONVERSION_DATA_ANNOTATION))
}

/// hub → spoke → hub is the identity; the intermediate spoke survives a trip through JSON.
fn check_hub_round_trip<T>(hub: &T::Hub) -> Result<(), TestCaseError>
where
    T: Convertible + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
    T::Hub: PartialEq + std::fmt::Debug + serde::Serialize,
{
    let spoke = T::from_hub(hub).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let json = serde_json::to_value(&spoke).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let spoke: T = serde_json::from_value(json).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back = spoke.to_hub().map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, hub);
    Ok(())
}

/// spoke → hub → spoke is the identity.
fn check_spoke_round_trip<T>(spoke: &T) -> Result<(), TestCaseError>
where
    T: Convertible + PartialEq + std::fmt::Debug,
    T::Hub: serde::Serialize + serde::de::DeserializeOwned,
{
    let hub = spoke.to_hub().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let json = serde_json::to_value(&hub).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let hub: T::Hub = serde_json::from_value(json).map_err(|e| TestCaseError::fail(e.to_string()))?;
    let back = T::from_hub(&hub).map_err(|e| TestCaseError::fail(e.to_string()))?;
    prop_assert_eq!(&back, spoke);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn machine_hub_round_trip(hub in hub_machine(true)) {
        check_hub_round_trip::<s::ProxmoxMachine>(&hub)?;
    }

    #[test]
    fn machine_template_hub_round_trip(hub in hub_machine_template(true)) {
        check_hub_round_trip::<s::ProxmoxMachineTemplate>(&hub)?;
    }

    #[test]
    fn cluster_hub_round_trip(hub in hub_cluster(true)) {
        check_hub_round_trip::<s::ProxmoxCluster>(&hub)?;
    }

    #[test]
    fn cluster_template_hub_round_trip(hub in hub_cluster_template(true)) {
        check_hub_round_trip::<s::ProxmoxClusterTemplate>(&hub)?;
    }

    #[test]
    fn machine_spoke_round_trip(spoke in spoke_machine(true)) {
        check_spoke_round_trip(&spoke)?;
    }

    #[test]
    fn machine_template_spoke_round_trip(spoke in spoke_machine_template(true)) {
        check_spoke_round_trip(&spoke)?;
    }

    #[test]
    fn cluster_spoke_round_trip(spoke in spoke_cluster(true)) {
        check_spoke_round_trip(&spoke)?;
    }

    #[test]
    fn cluster_template_spoke_round_trip(spoke in spoke_cluster_template(true)) {
        check_spoke_round_trip(&spoke)?;
    }

    /// Canonical hub objects convert down without needing the annotation.
    #[test]
    fn canonical_hub_needs_no_annotation(
        m in hub_machine(false),
        mt in hub_machine_template(false),
        c in hub_cluster(false),
        ct in hub_cluster_template(false),
    ) {
        let sm = down::<s::ProxmoxMachine>(&m);
        let smt = down::<s::ProxmoxMachineTemplate>(&mt);
        let sc = down::<s::ProxmoxCluster>(&c);
        let sct = down::<s::ProxmoxClusterTemplate>(&ct);
        prop_assert!(!has_conversion_data(&sm.metadata), "machine: {:?}", sm.metadata.annotations);
        prop_assert!(!has_conversion_data(&smt.metadata), "machine template: {:?}", smt.metadata.annotations);
        prop_assert!(!has_conversion_data(&sc.metadata), "cluster: {:?}", sc.metadata.annotations);
        prop_assert!(!has_conversion_data(&sct.metadata), "cluster template: {:?}", sct.metadata.annotations);
        prop_assert_eq!(sm.to_hub().map_err(|e| TestCaseError::fail(e.to_string()))?, m);
        prop_assert_eq!(sc.to_hub().map_err(|e| TestCaseError::fail(e.to_string()))?, c);
    }

    /// Canonical spoke objects convert up without needing the annotation.
    #[test]
    fn canonical_spoke_needs_no_annotation(
        m in spoke_machine(false),
        mt in spoke_machine_template(false),
        c in spoke_cluster(false),
        ct in spoke_cluster_template(false),
    ) {
        let to_hub_err = |e: capmox_api::conversion::ConversionError| TestCaseError::fail(e.to_string());
        prop_assert!(!has_conversion_data(&m.to_hub().map_err(to_hub_err)?.metadata));
        prop_assert!(!has_conversion_data(&mt.to_hub().map_err(to_hub_err)?.metadata));
        prop_assert!(!has_conversion_data(&c.to_hub().map_err(to_hub_err)?.metadata));
        prop_assert!(!has_conversion_data(&ct.to_hub().map_err(to_hub_err)?.metadata));
    }

    /// `convert_value` agrees with the typed conversion in both directions.
    #[test]
    fn convert_value_matches_typed(hub in hub_machine(true), c in hub_cluster(true)) {
        let expected = serde_json::to_value(down::<s::ProxmoxMachine>(&hub)).expect("json");
        let got = convert_value(serde_json::to_value(&hub).expect("json"), s::API_VERSION)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&got, &expected);
        let up = convert_value(got, h::API_VERSION).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(up, serde_json::to_value(&hub).expect("json"));
        let spoke = convert_value(serde_json::to_value(&c).expect("json"), s::API_VERSION)
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let up = convert_value(spoke, h::API_VERSION).map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(up, serde_json::to_value(&c).expect("json"));
    }

    /// A v1alpha1 client edits the down-converted object: the edit wins and hub-only data
    /// (zones, queues, default-pool flags, observedGeneration) comes back from the annotation.
    #[test]
    fn edited_spoke_keeps_hub_only_data(m in hub_machine(true), c in hub_cluster(true)) {
        let mut sm = down::<s::ProxmoxMachine>(&m);
        sm.spec.num_cores = Some(77);
        let back = sm.to_hub().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(back.spec.num_cores, Some(77));
        prop_assert_eq!(&back.spec.network.zone, &m.spec.network.zone);
        prop_assert_eq!(&back.spec.cloud_init_storage, &m.spec.cloud_init_storage);
        prop_assert_eq!(back.spec.network_config_format, m.spec.network_config_format);
        for device in &back.spec.network.network_devices {
            let old = m.spec.network.network_devices.iter().find(|d| d.name == device.name).expect("same names");
            prop_assert_eq!(device.queues, old.queues);
            prop_assert_eq!(device.default_ipv4, old.default_ipv4);
            prop_assert_eq!(device.ipv4, old.ipv4);
            prop_assert_eq!(device.ipv6, old.ipv6);
        }

        let mut sc = down::<s::ProxmoxCluster>(&c);
        sc.spec.dns_servers = vec!["192.0.2.53".into()];
        let back = sc.to_hub().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(&back.spec.dns_servers, &vec!["192.0.2.53".to_string()]);
        prop_assert_eq!(&back.spec.zone_config, &c.spec.zone_config);
        if let (Some(new), Some(old)) = (back.status.as_ref(), c.status.as_ref()) {
            prop_assert_eq!(&new.in_cluster_zone_ref, &old.in_cluster_zone_ref);
        }
    }
}
