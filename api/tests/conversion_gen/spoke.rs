//! Generators of v1alpha1 (spoke) objects: down-converted canonical hub objects, decorated
//! with v1alpha1-only data in `full` mode.

use std::collections::BTreeMap;

use capmox_api::conversion::Convertible;
use capmox_api::{v1alpha1 as s, v1alpha2 as h};
use proptest::collection::{btree_map, vec};
use proptest::option::of as opt;
use proptest::prelude::*;

use super::*;

// ---------------------------------------------------------------- spoke generators
//
// Spoke objects are generated as the down-conversion of a canonical hub object, then
// decorated with v1alpha1-only data in `full` mode. Down-converting a canonical hub yields
// exactly the canonical spoke domain (every canonical spoke is the image of one).

pub fn spoke_conditions_noise(
    conditions: &mut Option<Vec<s::Condition>>,
    severities: &[Option<String>],
    clear_reason: bool,
) {
    for (c, sev) in conditions.iter_mut().flatten().zip(severities) {
        c.severity = sev.clone();
        if clear_reason {
            c.reason = None;
            c.message = None;
        }
    }
}

pub fn severities() -> BoxedStrategy<Vec<Option<String>>> {
    vec(
        opt(prop_oneof![Just("Error"), Just("Warning"), Just("Info")].prop_map(String::from)),
        4,
    )
    .boxed()
}

pub fn down<T: Convertible>(hub: &T::Hub) -> T {
    T::from_hub(hub).expect("down-conversion")
}

pub fn spoke_machine(full: bool) -> BoxedStrategy<s::ProxmoxMachine> {
    let base = hub_machine(false).prop_map(|hub| down::<s::ProxmoxMachine>(&hub));
    if !full {
        return base.boxed();
    }
    (
        base,
        opt(word()),
        opt(word()),
        opt(word()),
        severities(),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(mut m, target, reason, message, sev, clear, drop_network)| {
            m.spec.target = target;
            if drop_network {
                m.spec.network = None;
            }
            if let Some(status) = m.status.as_mut() {
                status.failure_reason = reason;
                status.failure_message = message;
                spoke_conditions_noise(&mut status.conditions, &sev, clear);
            }
            m
        })
        .boxed()
}

pub fn spoke_machine_template(full: bool) -> BoxedStrategy<s::ProxmoxMachineTemplate> {
    let base = hub_machine_template(false).prop_map(|hub| down::<s::ProxmoxMachineTemplate>(&hub));
    if !full {
        return base.boxed();
    }
    (base, opt(word()))
        .prop_map(|(mut t, target)| {
            t.spec.template.spec.target = target;
            t
        })
        .boxed()
}

pub fn clone_spec() -> BoxedStrategy<Option<s::ProxmoxClusterCloneSpec>> {
    opt((
        btree_map(
            prop_oneof![Just("controlPlane"), Just("workerNode")].prop_map(String::from),
            hub_machine_spec(false),
            1..3,
        ),
        opt(vec("ssh-ed25519 [A-Za-z0-9]{8}", 1..2)),
        opt("eth[0-9]"),
    )
        .prop_map(|(specs, ssh_authorized_keys, virtual_ip_network_interface)| {
            s::ProxmoxClusterCloneSpec {
                machine_spec: specs
                    .iter()
                    .map(|(k, v)| {
                        let hub = h::ProxmoxMachine {
                            metadata: Default::default(),
                            spec: v.clone(),
                            status: None,
                        };
                        // capmox-rs reads no cloneSpec: its schema has no imageRef.
                        let mut spec = down::<s::ProxmoxMachine>(&hub).spec;
                        spec.image_ref = None;
                        (k.clone(), spec)
                    })
                    .collect::<BTreeMap<_, _>>(),
                ssh_authorized_keys,
                virtual_ip_network_interface,
            }
        }))
    .boxed()
}

pub fn spoke_cluster(full: bool) -> BoxedStrategy<s::ProxmoxCluster> {
    let base = hub_cluster(false).prop_map(|hub| down::<s::ProxmoxCluster>(&hub));
    if !full {
        return base.boxed();
    }
    (
        base,
        clone_spec(),
        opt(word()),
        opt(word()),
        severities(),
        any::<bool>(),
    )
        .prop_map(|(mut c, clone_spec, reason, message, sev, clear)| {
            c.spec.clone_spec = clone_spec;
            if let Some(status) = c.status.as_mut() {
                status.failure_reason = reason;
                status.failure_message = message;
                spoke_conditions_noise(&mut status.conditions, &sev, clear);
            }
            c
        })
        .boxed()
}

pub fn spoke_cluster_template(full: bool) -> BoxedStrategy<s::ProxmoxClusterTemplate> {
    let base = hub_cluster_template(false).prop_map(|hub| down::<s::ProxmoxClusterTemplate>(&hub));
    if !full {
        return base.boxed();
    }
    (base, clone_spec())
        .prop_map(|(mut t, clone_spec)| {
            t.spec.template.spec.clone_spec = clone_spec;
            t
        })
        .boxed()
}
