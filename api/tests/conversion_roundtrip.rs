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

use std::collections::BTreeMap;

use capmox_api::consts::CONVERSION_DATA_ANNOTATION;
use capmox_api::conversion::{Convertible, convert_value};
use capmox_api::{v1alpha1 as s, v1alpha2 as h};
use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use proptest::collection::{btree_map, btree_set, vec};
use proptest::option::of as opt;
use proptest::prelude::*;

// ---------------------------------------------------------------- shared pieces

fn word() -> BoxedStrategy<String> {
    "[a-z][a-z0-9]{0,6}".boxed()
}

fn ip() -> BoxedStrategy<String> {
    (1u8..=254, 0u8..=255, 1u8..=254)
        .prop_map(|(a, b, c)| format!("10.{a}.{b}.{c}"))
        .boxed()
}

fn time() -> BoxedStrategy<metav1::Time> {
    (1_500_000_000i64..2_000_000_000)
        .prop_map(|secs| metav1::Time(k8s_openapi::jiff::Timestamp::from_second(secs).expect("in range")))
        .boxed()
}

fn meta() -> BoxedStrategy<metav1::ObjectMeta> {
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

fn condition_types() -> BoxedStrategy<Vec<String>> {
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

fn status_word() -> BoxedStrategy<String> {
    prop_oneof![Just("True"), Just("False"), Just("Unknown")]
        .prop_map(String::from)
        .boxed()
}

fn pool_ref(suffix: &'static str) -> BoxedStrategy<corev1::TypedLocalObjectReference> {
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

fn mtu() -> BoxedStrategy<i32> {
    prop_oneof![Just(1), 576..=65520].boxed()
}

fn nonzero_u31() -> BoxedStrategy<i32> {
    (1..=i32::MAX).boxed()
}

// ---------------------------------------------------------------- hub (v1alpha2) generators

fn hub_conditions(full: bool) -> BoxedStrategy<Option<Vec<metav1::Condition>>> {
    opt(condition_types().prop_flat_map(move |types| {
        let n = types.len();
        let message = if full {
            "[a-z ]{0,12}".boxed()
        } else {
            "[a-z][a-z ]{0,12}".boxed()
        };
        let generation = if full {
            opt(0i64..100).boxed()
        } else {
            Just(None).boxed()
        };
        (
            Just(types),
            vec(
                (status_word(), "[A-Z][a-zA-Z]{0,10}", message, generation, time()),
                n,
            ),
        )
            .prop_map(|(types, rest)| {
                types
                    .into_iter()
                    .zip(rest)
                    .map(
                        |(type_, (status, reason, message, observed_generation, t))| metav1::Condition {
                            type_,
                            status,
                            reason,
                            message,
                            observed_generation,
                            last_transition_time: t,
                        },
                    )
                    .collect()
            })
    }))
    .boxed()
}

fn hub_route(full: bool) -> BoxedStrategy<h::RouteSpec> {
    let is6 = if full {
        opt(any::<bool>()).boxed()
    } else {
        Just(None).boxed()
    };
    let num = if full {
        opt(any::<i32>()).boxed()
    } else {
        opt(nonzero_u31()).boxed()
    };
    (opt(ip()), opt(ip()), num.clone(), num, is6)
        .prop_map(|(to, via, metric, table, is6)| h::RouteSpec {
            to,
            via,
            metric,
            table,
            is6,
        })
        .boxed()
}

fn hub_policy(full: bool) -> BoxedStrategy<h::RoutingPolicySpec> {
    let is6 = if full {
        opt(any::<bool>()).boxed()
    } else {
        Just(None).boxed()
    };
    let table = if full {
        opt(any::<i32>()).boxed()
    } else {
        opt(nonzero_u31()).boxed()
    };
    let prio = if full {
        opt(0i64..=4_294_967_295).boxed()
    } else {
        opt(1i64..=4_294_967_295).boxed()
    };
    (opt(ip()), opt(ip()), table, prio, is6)
        .prop_map(|(to, from, table, priority, is6)| h::RoutingPolicySpec {
            to,
            from,
            table,
            priority,
            is6,
        })
        .boxed()
}

fn hub_pools(full: bool) -> BoxedStrategy<Option<Vec<corev1::TypedLocalObjectReference>>> {
    if full {
        opt(vec(
            prop_oneof![pool_ref("-inet"), pool_ref("-inet6"), pool_ref("")],
            1..4,
        ))
        .boxed()
    } else {
        (opt(pool_ref("-inet")), opt(pool_ref("-inet6")))
            .prop_map(|(v4, v6)| {
                let list: Vec<_> = v4.into_iter().chain(v6).collect();
                (!list.is_empty()).then_some(list)
            })
            .boxed()
    }
}

/// One NIC; `index` 0 is `net0`.
fn hub_device(full: bool, index: usize) -> BoxedStrategy<h::NetworkDevice> {
    let is_default = index == 0;
    let bridge = if full {
        opt("vmbr[0-9]").boxed()
    } else {
        "vmbr[1-9]".prop_map(Some).boxed()
    };
    let small = if full {
        opt(any::<bool>()).boxed()
    } else {
        Just(Some(true)).boxed()
    };
    let flags = if full || is_default {
        small
    } else {
        Just(None).boxed()
    };
    let queues = if full {
        opt(1..=64i32).boxed()
    } else {
        Just(None).boxed()
    };
    let extras = full || !is_default;
    let routes = if extras {
        opt(vec(hub_route(full), 1..3)).boxed()
    } else {
        Just(None).boxed()
    };
    let policies = if extras {
        opt(vec(hub_policy(full), 1..3)).boxed()
    } else {
        Just(None).boxed()
    };
    let link_mtu = if extras {
        opt(mtu()).boxed()
    } else {
        Just(None).boxed()
    };
    let model = opt(prop_oneof![
        Just(h::NetworkModel::E1000),
        Just(h::NetworkModel::Virtio),
        Just(h::NetworkModel::Rtl8139),
        Just(h::NetworkModel::Vmxnet3)
    ]);
    (
        (
            bridge,
            flags.clone(),
            flags,
            opt(vec(ip(), 1..3)),
            hub_pools(full),
            link_mtu,
        ),
        (model, opt(mtu()), queues, routes, policies, opt(1..=4094i32)),
    )
        .prop_map(
            move |(
                (bridge, default_ipv4, default_ipv6, dns_servers, ip_pool_ref, link_mtu),
                (model, mtu, queues, routes, routing_policy, vlan),
            )| h::NetworkDevice {
                name: Some(format!("net{index}")),
                bridge,
                default_ipv4,
                default_ipv6,
                dns_servers,
                ip_pool_ref,
                link_mtu,
                model,
                mtu,
                queues,
                routes,
                routing_policy,
                vlan,
            },
        )
        .boxed()
}

fn hub_network(full: bool) -> BoxedStrategy<h::NetworkSpec> {
    let zone = if full {
        opt(word()).boxed()
    } else {
        Just(None).boxed()
    };
    let vrf_table = if full {
        any::<i32>().boxed()
    } else {
        nonzero_u31().boxed()
    };
    let vrfs = opt(vec(
        (
            opt(vec("net[0-9]", 1..3)),
            vrf_table,
            opt(vec(hub_route(full), 1..3)),
            opt(vec(hub_policy(full), 1..3)),
        ),
        1..3,
    ))
    .prop_map(|list| {
        list.map(|l| {
            l.into_iter()
                .enumerate()
                .map(|(i, (interfaces, table, routes, routing_policy))| h::VrfDevice {
                    interfaces,
                    name: format!("vrf{i}"),
                    table,
                    routes,
                    routing_policy,
                })
                .collect()
        })
    });
    let devices = (1usize..4).prop_flat_map(move |n| (0..n).map(|i| hub_device(full, i)).collect::<Vec<_>>());
    (devices, vrfs, zone)
        .prop_map(|(network_devices, vrfs, zone)| h::NetworkSpec {
            network_devices,
            vrfs,
            zone,
        })
        .boxed()
}

fn hub_machine_spec(full: bool) -> BoxedStrategy<h::ProxmoxMachineSpec> {
    let tags = opt(btree_set("[a-z0-9_]{1,6}", 1..3).prop_map(|s| s.into_iter().collect::<Vec<_>>()));
    let selector = opt((
        btree_set("[a-z]{1,5}", 1..3),
        opt(prop_oneof![
            Just(h::TemplateMatchPolicy::Exact),
            Just(h::TemplateMatchPolicy::UniqueSubset),
            Just(h::TemplateMatchPolicy::BestSubset)
        ]),
    ))
    .prop_map(|o| {
        o.map(|(tags, match_policy)| h::TemplateSelector {
            match_tags: tags.into_iter().collect(),
            match_policy,
        })
    });
    (
        (
            opt(vec(word(), 1..3)),
            opt((opt(any::<bool>()), opt(any::<bool>()))),
            opt("[a-z ]{0,10}"),
            opt(opt(("scsi[0-9]", 5..500i32))),
        ),
        (
            opt(prop_oneof![
                Just(h::TargetFileStorageFormat::Raw),
                Just(h::TargetFileStorageFormat::Qcow2),
                Just(h::TargetFileStorageFormat::Vmdk)
            ]),
            opt(any::<bool>()),
            opt((0..1024i32).prop_map(|m| m * 8)),
            opt(any::<bool>()),
            hub_network(full),
        ),
        (
            opt(1..16i32),
            opt(1..8i32),
            opt(word()),
            opt("[0-9a-f]{8}".prop_map(|u| format!("proxmox://{u}"))),
        ),
        (
            opt(word()),
            opt(word()),
            opt(word()),
            tags,
            opt(100..9999i32),
            selector,
            opt(100..99999i64),
        ),
        opt((100..1000i64, 0..1000i64)),
    )
        .prop_map(
            |(
                (allowed_nodes, checks, description, disks),
                (format, full, memory_mib, provider_id_injection, network),
                (num_cores, num_sockets, pool, provider_id),
                (snap_name, source_node, storage, tags, template_id, template_selector, virtual_machine_id),
                range,
            )| h::ProxmoxMachineSpec {
                allowed_nodes,
                checks: checks.map(|(a, b)| h::ProxmoxMachineChecks {
                    skip_cloud_init_status: a,
                    skip_qemu_guest_agent: b,
                }),
                description,
                disks: disks.map(|d| h::Storage {
                    boot_volume: d.map(|(disk, size_gb)| h::DiskSize { disk, size_gb }),
                }),
                format,
                full,
                memory_mib,
                metadata_settings: provider_id_injection.map(|p| h::MetadataSettings {
                    provider_id_injection: p,
                }),
                network,
                num_cores,
                num_sockets,
                pool,
                provider_id,
                snap_name,
                source_node,
                storage,
                tags,
                template_id,
                template_selector,
                virtual_machine_id,
                vm_id_range: range.map(|(start, extra)| h::VmIdRange {
                    start,
                    end: start + extra,
                }),
            },
        )
        .boxed()
}

fn hub_addresses() -> BoxedStrategy<Option<Vec<h::MachineAddress>>> {
    opt(vec(
        (
            prop_oneof![
                Just(h::MachineAddressType::Hostname),
                Just(h::MachineAddressType::InternalIp)
            ],
            ip(),
        )
            .prop_map(|(type_, address)| h::MachineAddress { address, type_ }),
        1..3,
    ))
    .boxed()
}

fn hub_ip_addresses(full: bool) -> BoxedStrategy<Option<Vec<h::IpAddressesSpec>>> {
    let ips = if full {
        opt(vec(ip(), 0..3)).boxed()
    } else {
        opt(vec(ip(), 1..=1)).boxed()
    };
    opt(btree_map(
        prop_oneof![Just("default".to_string()), "net[0-9]"],
        (ips.clone(), ips),
        1..3,
    ))
    .prop_map(|m| {
        m.map(|m| {
            m.into_iter()
                .map(|(net, (ipv4, ipv6))| h::IpAddressesSpec { net, ipv4, ipv6 })
                .collect()
        })
    })
    .boxed()
}

fn hub_machine_status(full: bool) -> BoxedStrategy<h::ProxmoxMachineStatus> {
    let init = if full {
        opt(opt(any::<bool>()).prop_map(|provisioned| h::InitializationStatus { provisioned })).boxed()
    } else {
        opt(any::<bool>().prop_map(|p| h::InitializationStatus { provisioned: Some(p) })).boxed()
    };
    let network = opt(vec(
        (
            any::<bool>(),
            opt(vec(ip(), 1..2)),
            "([0-9a-f]{2}:){5}[0-9a-f]{2}",
            opt(word()),
        )
            .prop_map(|(connected, ip_addrs, mac_addr, network_name)| h::NetworkStatus {
                connected,
                ip_addrs,
                mac_addr,
                network_name,
            }),
        1..3,
    ));
    (
        hub_addresses(),
        opt(any::<bool>()),
        hub_conditions(full),
        init,
        hub_ip_addresses(full),
        network,
        opt(word()),
        opt(time()),
        opt("UPID:[a-z0-9:]{5,12}"),
        opt(prop_oneof![Just("pending"), Just("ready")].prop_map(String::from)),
    )
        .prop_map(
            |(
                addresses,
                bootstrap_data_provided,
                conditions,
                initialization,
                ip_addresses,
                network,
                proxmox_node,
                retry_after,
                task_ref,
                vm_status,
            )| h::ProxmoxMachineStatus {
                addresses,
                bootstrap_data_provided,
                conditions,
                initialization,
                ip_addresses,
                network,
                proxmox_node,
                retry_after,
                task_ref,
                vm_status,
            },
        )
        .boxed()
}

fn hub_ip_config() -> BoxedStrategy<h::IpConfigSpec> {
    (vec(ip(), 1..3), "10\\.0\\.0\\.[1-9]", opt(0..1000i32), 1..=128i32)
        .prop_map(|(addresses, gateway, metric, prefix)| h::IpConfigSpec {
            addresses,
            gateway,
            metric,
            prefix,
        })
        .boxed()
}

fn hub_cluster_spec(full: bool) -> BoxedStrategy<h::ProxmoxClusterSpec> {
    let zones = if full {
        opt(btree_map(
            word(),
            (vec(ip(), 1..2), opt(hub_ip_config()), opt(hub_ip_config())),
            1..3,
        )
        .prop_map(|m| {
            m.into_iter()
                .map(
                    |(zone, (dns_servers, ipv4_config, ipv6_config))| h::ZoneConfigSpec {
                        zone,
                        dns_servers,
                        ipv4_config,
                        ipv6_config,
                    },
                )
                .collect::<Vec<_>>()
        }))
        .boxed()
    } else {
        Just(None).boxed()
    };
    let endpoint = opt(prop_oneof![
        ("[a-z]{1,8}\\.example", 1..65536i32).prop_map(|(h, p)| h::ApiEndpoint {
            host: Some(h),
            port: Some(p)
        }),
        "[a-z]{1,8}".prop_map(|h| h::ApiEndpoint {
            host: Some(h),
            port: None
        }),
    ]);
    (
        opt(vec(word(), 1..3)),
        endpoint,
        opt((opt(word()), opt(word()))),
        vec(ip(), 1..3),
        opt(any::<bool>()),
        opt(hub_ip_config()),
        opt(hub_ip_config()),
        opt(opt(0..400i64)),
        zones,
    )
        .prop_map(
            |(
                allowed_nodes,
                control_plane_endpoint,
                creds,
                dns_servers,
                emcp,
                ipv4_config,
                ipv6_config,
                hints,
                zone_config,
            )| {
                h::ProxmoxClusterSpec {
                    allowed_nodes,
                    control_plane_endpoint,
                    credentials_ref: creds
                        .map(|(name, namespace)| corev1::SecretReference { name, namespace }),
                    dns_servers,
                    external_managed_control_plane: emcp,
                    ipv4_config,
                    ipv6_config,
                    scheduler_hints: hints.map(|memory_adjustment| h::SchedulerHints { memory_adjustment }),
                    zone_config,
                }
            },
        )
        .boxed()
}

fn hub_locations(full: bool) -> BoxedStrategy<Option<Vec<h::NodeLocation>>> {
    let zone = if full {
        opt(word()).boxed()
    } else {
        Just(None).boxed()
    };
    opt(vec(
        (word(), word(), zone).prop_map(|(m, node, zone)| h::NodeLocation {
            machine: corev1::LocalObjectReference { name: m },
            node,
            zone,
        }),
        1..3,
    ))
    .boxed()
}

fn hub_cluster_status(full: bool) -> BoxedStrategy<h::ProxmoxClusterStatus> {
    let zone_refs = if full {
        opt(btree_map(word(), (opt(word()), opt(word())), 1..3).prop_map(|m| {
            m.into_iter()
                .map(|(zone, (v4, v6))| h::InClusterZoneRef {
                    zone: Some(zone),
                    in_cluster_ip_pool_ref_v4: v4.map(|name| corev1::LocalObjectReference { name }),
                    in_cluster_ip_pool_ref_v6: v6.map(|name| corev1::LocalObjectReference { name }),
                })
                .collect::<Vec<_>>()
        }))
        .boxed()
    } else {
        Just(None).boxed()
    };
    (
        hub_conditions(full),
        opt(vec(
            word().prop_map(|name| corev1::LocalObjectReference { name }),
            1..3,
        )),
        zone_refs,
        opt(any::<bool>().prop_map(|p| h::InitializationStatus { provisioned: Some(p) })),
        opt((hub_locations(full), hub_locations(full))),
    )
        .prop_map(
            |(conditions, in_cluster_ip_pool_ref, in_cluster_zone_ref, initialization, locations)| {
                h::ProxmoxClusterStatus {
                    conditions,
                    in_cluster_ip_pool_ref,
                    in_cluster_zone_ref,
                    initialization,
                    node_locations: locations.map(|(control_plane, workers)| h::NodeLocations {
                        control_plane,
                        workers,
                    }),
                }
            },
        )
        .boxed()
}

fn hub_template_meta() -> BoxedStrategy<Option<h::TemplateObjectMeta>> {
    opt((
        opt(btree_map("[a-z]{1,4}", word(), 1..2)),
        opt(btree_map("[a-z]{1,4}", word(), 1..2)),
    ))
    .prop_map(|m| m.map(|(labels, annotations)| h::TemplateObjectMeta { labels, annotations }))
    .boxed()
}

fn hub_machine(full: bool) -> BoxedStrategy<h::ProxmoxMachine> {
    (meta(), hub_machine_spec(full), opt(hub_machine_status(full)))
        .prop_map(|(metadata, spec, status)| h::ProxmoxMachine {
            metadata,
            spec,
            status,
        })
        .boxed()
}

fn hub_machine_template(full: bool) -> BoxedStrategy<h::ProxmoxMachineTemplate> {
    (meta(), hub_template_meta(), hub_machine_spec(full))
        .prop_map(|(metadata, tm, spec)| h::ProxmoxMachineTemplate {
            metadata,
            spec: h::ProxmoxMachineTemplateSpec {
                template: h::ProxmoxMachineTemplateResource { metadata: tm, spec },
            },
        })
        .boxed()
}

fn hub_cluster(full: bool) -> BoxedStrategy<h::ProxmoxCluster> {
    (meta(), hub_cluster_spec(full), opt(hub_cluster_status(full)))
        .prop_map(|(metadata, spec, status)| h::ProxmoxCluster {
            metadata,
            spec,
            status,
        })
        .boxed()
}

fn hub_cluster_template(full: bool) -> BoxedStrategy<h::ProxmoxClusterTemplate> {
    (meta(), hub_template_meta(), hub_cluster_spec(full))
        .prop_map(|(metadata, tm, spec)| h::ProxmoxClusterTemplate {
            metadata,
            spec: h::ProxmoxClusterTemplateSpec {
                template: h::ProxmoxClusterTemplateResource { metadata: tm, spec },
            },
        })
        .boxed()
}

// ---------------------------------------------------------------- spoke generators
//
// Spoke objects are generated as the down-conversion of a canonical hub object, then
// decorated with v1alpha1-only data in `full` mode. Down-converting a canonical hub yields
// exactly the canonical spoke domain (every canonical spoke is the image of one).

fn spoke_conditions_noise(
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

fn severities() -> BoxedStrategy<Vec<Option<String>>> {
    vec(
        opt(prop_oneof![Just("Error"), Just("Warning"), Just("Info")].prop_map(String::from)),
        4,
    )
    .boxed()
}

fn down<T: Convertible>(hub: &T::Hub) -> T {
    T::from_hub(hub).expect("down-conversion")
}

fn spoke_machine(full: bool) -> BoxedStrategy<s::ProxmoxMachine> {
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

fn spoke_machine_template(full: bool) -> BoxedStrategy<s::ProxmoxMachineTemplate> {
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

fn clone_spec() -> BoxedStrategy<Option<s::ProxmoxClusterCloneSpec>> {
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
                        (k.clone(), down::<s::ProxmoxMachine>(&hub).spec)
                    })
                    .collect::<BTreeMap<_, _>>(),
                ssh_authorized_keys,
                virtual_ip_network_interface,
            }
        }))
    .boxed()
}

fn spoke_cluster(full: bool) -> BoxedStrategy<s::ProxmoxCluster> {
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

fn spoke_cluster_template(full: bool) -> BoxedStrategy<s::ProxmoxClusterTemplate> {
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
}
