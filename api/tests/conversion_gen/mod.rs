//! Proptest generators of realistic v1alpha1 and v1alpha2 objects for the conversion tests.
//!
//! `full` generators produce anything the version can express; `canonical` ones (`full ==
//! false`) only what the plain mapping expresses without the conversion-data annotation.

mod hub;
mod spoke;

pub use hub::*;
pub use spoke::*;

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use proptest::collection::{btree_map, btree_set};
use proptest::option::of as opt;
use proptest::prelude::*;

// ---------------------------------------------------------------- shared pieces

pub fn word() -> BoxedStrategy<String> {
    "[a-z][a-z0-9]{0,6}".boxed()
}

pub fn ip() -> BoxedStrategy<String> {
    (1u8..=254, 0u8..=255, 1u8..=254)
        .prop_map(|(a, b, c)| format!("10.{a}.{b}.{c}"))
        .boxed()
}

pub fn time() -> BoxedStrategy<metav1::Time> {
    (1_500_000_000i64..2_000_000_000)
        .prop_map(|secs| metav1::Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("in range")))
        .boxed()
}

pub fn meta() -> BoxedStrategy<metav1::ObjectMeta> {
    (
        word(),
        opt(word()),
        opt(btree_map("[a-z]{1,5}", word(), 1..3)),
        opt(btree_map("example\\.com/[a-z]{1,5}", word(), 1..3)),
    )
        .prop_map(|(name, namespace, labels, annotations)| metav1::ObjectMeta {
            name: Some(name),
            namespace,
            labels,
            annotations,
            ..Default::default()
        })
        .boxed()
}

pub fn condition_types() -> BoxedStrategy<Vec<String>> {
    btree_set(
        prop_oneof![
            Just("Ready".to_string()),
            Just("ProxmoxAvailable".to_string()),
            Just("VirtualMachineProvisioned".to_string()),
            "[A-Z][a-zA-Z]{2,10}",
        ],
        0..4,
    )
    .prop_map(|set| set.into_iter().collect())
    .boxed()
}

pub fn status_word() -> BoxedStrategy<String> {
    prop_oneof![Just("True"), Just("False"), Just("Unknown")]
        .prop_map(String::from)
        .boxed()
}

pub fn pool_ref(suffix: &'static str) -> BoxedStrategy<corev1::TypedLocalObjectReference> {
    // Pool base names never contain an `i`, so only the suffix decides the address family.
    (
        "[a-hj-z][a-hj-z0-9]{0,5}",
        prop_oneof![Just("InClusterIPPool"), Just("GlobalInClusterIPPool")],
    )
        .prop_map(move |(n, kind)| corev1::TypedLocalObjectReference {
            api_group: Some("ipam.cluster.x-k8s.io".into()),
            kind: kind.into(),
            name: format!("{n}{suffix}"),
        })
        .boxed()
}

pub fn mtu() -> BoxedStrategy<i32> {
    prop_oneof![Just(1), 576..=65520].boxed()
}

pub fn nonzero_u31() -> BoxedStrategy<i32> {
    (1..=i32::MAX).boxed()
}
