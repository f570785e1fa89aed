//! Generators of v1alpha2 (hub) objects.

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;
use proptest::collection::{btree_map, btree_set, vec};
use proptest::option::of as opt;
use proptest::prelude::*;

use super::*;
use capmox_api::v1alpha2 as h;

// ---------------------------------------------------------------- hub (v1alpha2) generators

pub fn hub_conditions(full: bool) -> BoxedStrategy<Option<Vec<metav1::Condition>>> {
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

pub fn hub_route(full: bool) -> BoxedStrategy<h::RouteSpec> {
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

pub fn hub_policy(full: bool) -> BoxedStrategy<h::RoutingPolicySpec> {
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

pub fn hub_pools(full: bool) -> BoxedStrategy<Option<Vec<corev1::TypedLocalObjectReference>>> {
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
pub fn hub_device(full: bool, index: usize) -> BoxedStrategy<h::NetworkDevice> {
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
    // Hub-only (capmox-rs): only in full objects, which carry the conversion-data annotation.
    let modes = if full {
        (
            opt(prop_oneof![Just(h::Ipv4Mode::Static), Just(h::Ipv4Mode::Dhcp)]),
            opt(prop_oneof![
                Just(h::Ipv6Mode::Static),
                Just(h::Ipv6Mode::Dhcp),
                Just(h::Ipv6Mode::Slaac)
            ]),
        )
            .boxed()
    } else {
        Just((None, None)).boxed()
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
        modes,
    )
        .prop_map(
            move |(
                (bridge, default_ipv4, default_ipv6, dns_servers, ip_pool_ref, link_mtu),
                (model, mtu, queues, routes, routing_policy, vlan),
                (ipv4, ipv6),
            )| h::NetworkDevice {
                name: Some(format!("net{index}")),
                ipv4,
                ipv6,
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

pub fn hub_network(full: bool) -> BoxedStrategy<h::NetworkSpec> {
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

pub fn hub_machine_spec(full: bool) -> BoxedStrategy<h::ProxmoxMachineSpec> {
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
    // Hub-only fields: only `full` objects carry them (they need the conversion-data annotation).
    let hub_only = if full {
        (
            opt(word()),
            opt(prop_oneof![
                Just(h::NetworkConfigFormat::Capmox),
                Just(h::NetworkConfigFormat::V2)
            ]),
            opt(vec(hub_volume(), 1..3)),
            opt(hub_ha()),
            opt(hub_cpu()),
            opt(vec(hub_pci_device(), 1..3)),
            opt(any::<bool>()),
        )
            .boxed()
    } else {
        Just((None, None, None, None, None, None, None)).boxed()
    };
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
        (opt((100..1000i64, 0..1000i64)), opt(word())),
        hub_only,
    )
        .prop_map(
            |(
                (allowed_nodes, checks, description, disks),
                (format, full, memory_mib, provider_id_injection, network),
                (num_cores, num_sockets, pool, provider_id),
                (snap_name, source_node, storage, tags, template_id, template_selector, virtual_machine_id),
                (range, image),
                (
                    cloud_init_storage,
                    network_config_format,
                    additional_volumes,
                    ha,
                    cpu,
                    pci_devices,
                    on_boot,
                ),
            )| h::ProxmoxMachineSpec {
                allowed_nodes,
                checks: checks.map(|(a, b)| h::ProxmoxMachineChecks {
                    skip_cloud_init_status: a,
                    skip_qemu_guest_agent: b,
                }),
                cloud_init_storage,
                cpu,
                description,
                disks: match (disks, additional_volumes) {
                    (None, None) => None,
                    (d, additional_volumes) => Some(h::Storage {
                        additional_volumes,
                        boot_volume: d.flatten().map(|(disk, size_gb)| h::DiskSize { disk, size_gb }),
                    }),
                },
                ha,
                format,
                full,
                image_ref: image.map(|name| capmox_api::vm::ImageRef { name }),
                memory_mib,
                metadata_settings: provider_id_injection.map(|p| h::MetadataSettings {
                    provider_id_injection: p,
                }),
                network,
                network_config_format,
                num_cores,
                num_sockets,
                on_boot,
                pci_devices,
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

fn hub_volume() -> BoxedStrategy<h::AdditionalVolume> {
    (
        (0..30u32).prop_map(|n| format!("scsi{}", n + 1)),
        1..500i32,
        opt(word()),
        opt(prop_oneof![
            Just(h::TargetFileStorageFormat::Raw),
            Just(h::TargetFileStorageFormat::Qcow2)
        ]),
        (opt(any::<bool>()), opt(any::<bool>()), opt(any::<bool>())),
        opt(prop_oneof![
            Just(h::DiskCache::None),
            Just(h::DiskCache::Writeback)
        ]),
    )
        .prop_map(
            |(disk, size_gb, storage, format, (discard, ssd, iothread), cache)| h::AdditionalVolume {
                disk,
                size_gb,
                storage,
                format,
                discard,
                ssd,
                iothread,
                cache,
            },
        )
        .boxed()
}

fn hub_cpu() -> BoxedStrategy<h::CpuSpec> {
    (
        opt(prop_oneof![Just("host"), Just("x86-64-v2-AES"), Just("custom-a")].prop_map(String::from)),
        opt(vec(
            prop_oneof![Just("+aes"), Just("-pcid")].prop_map(String::from),
            1..3,
        )),
        opt(any::<bool>()),
    )
        .prop_map(|(cpu_type, flags, numa)| h::CpuSpec {
            cpu_type,
            flags,
            numa,
        })
        .boxed()
}

fn hub_pci_device() -> BoxedStrategy<h::PciDevice> {
    (word(), opt(any::<bool>()), opt(any::<bool>()))
        .prop_map(|(mapping, pcie, x_vga)| h::PciDevice { mapping, pcie, x_vga })
        .boxed()
}

fn hub_ha() -> BoxedStrategy<h::HaSpec> {
    (
        opt(word()),
        opt(prop_oneof![
            Just(h::HaState::Started),
            Just(h::HaState::Stopped),
            Just(h::HaState::Ignored)
        ]),
        opt(0..5i32),
        opt(0..5i32),
    )
        .prop_map(|(group, state, max_restart, max_relocate)| h::HaSpec {
            group,
            state,
            max_restart,
            max_relocate,
        })
        .boxed()
}

pub fn hub_addresses() -> BoxedStrategy<Option<Vec<h::MachineAddress>>> {
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

pub fn hub_ip_addresses(full: bool) -> BoxedStrategy<Option<Vec<h::IpAddressesSpec>>> {
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

pub fn hub_machine_status(full: bool) -> BoxedStrategy<h::ProxmoxMachineStatus> {
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
    // Hub-only: only `full` objects carry it.
    let ha_resource = if full {
        opt((100..9999u32, hub_ha()).prop_map(|(vmid, ha)| ha.resource(vmid))).boxed()
    } else {
        Just(None).boxed()
    };
    // Hub-only as well: the zone credentials Secret the VM was created with.
    let ha_resource = if full {
        (ha_resource, opt((opt(word()), opt(word()))))
            .prop_map(|(ha, creds)| {
                (
                    ha,
                    creds.map(|(name, namespace)| corev1::SecretReference { name, namespace }),
                )
            })
            .boxed()
    } else {
        ha_resource.prop_map(|ha| (ha, None)).boxed()
    };
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
        ha_resource,
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
                (ha_resource, credentials_ref),
            )| h::ProxmoxMachineStatus {
                addresses,
                bootstrap_data_provided,
                conditions,
                credentials_ref,
                ha_resource,
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

pub fn hub_ip_config() -> BoxedStrategy<h::IpConfigSpec> {
    (vec(ip(), 1..3), "10\\.0\\.0\\.[1-9]", opt(0..1000i32), 1..=128i32)
        .prop_map(|(addresses, gateway, metric, prefix)| h::IpConfigSpec {
            addresses,
            gateway,
            metric,
            prefix,
        })
        .boxed()
}

pub fn hub_cluster_spec(full: bool) -> BoxedStrategy<h::ProxmoxClusterSpec> {
    let zones = if full {
        opt(btree_map(
            word(),
            (
                vec(ip(), 1..2),
                opt(hub_ip_config()),
                opt(hub_ip_config()),
                opt(vec(word(), 1..3)),
                opt((opt(word()), opt(word()))),
            ),
            1..3,
        )
        .prop_map(|m| {
            m.into_iter()
                .map(
                    |(zone, (dns_servers, ipv4_config, ipv6_config, nodes, creds))| h::ZoneConfigSpec {
                        zone,
                        credentials_ref: creds
                            .map(|(name, namespace)| corev1::SecretReference { name, namespace }),
                        nodes,
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
                    failure_domains_from_zones: None,
                }
            },
        )
        .boxed()
}

pub fn hub_locations(full: bool) -> BoxedStrategy<Option<Vec<h::NodeLocation>>> {
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

pub fn hub_cluster_status(full: bool) -> BoxedStrategy<h::ProxmoxClusterStatus> {
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
    let (failure_domains, node_inventory) = if full {
        (
            opt(vec(
                (word(), opt(any::<bool>())).prop_map(|(name, control_plane)| h::FailureDomain {
                    name,
                    control_plane,
                    attributes: None,
                }),
                1..3,
            ))
            .boxed(),
            opt(vec(
                (word(), any::<bool>(), opt(0..64i64)).prop_map(|(node, online, cpus)| h::NodeInventory {
                    node,
                    online,
                    cpus,
                    ..Default::default()
                }),
                1..3,
            ))
            .boxed(),
        )
    } else {
        (Just(None).boxed(), Just(None).boxed())
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
        failure_domains,
        node_inventory,
    )
        .prop_map(
            |(
                conditions,
                in_cluster_ip_pool_ref,
                in_cluster_zone_ref,
                initialization,
                locations,
                failure_domains,
                node_inventory,
            )| {
                h::ProxmoxClusterStatus {
                    conditions,
                    in_cluster_ip_pool_ref,
                    in_cluster_zone_ref,
                    failure_domains,
                    initialization,
                    node_inventory,
                    node_locations: locations.map(|(control_plane, workers)| h::NodeLocations {
                        control_plane,
                        workers,
                    }),
                }
            },
        )
        .boxed()
}

pub fn hub_template_meta() -> BoxedStrategy<Option<h::TemplateObjectMeta>> {
    opt((
        opt(btree_map("[a-z]{1,4}", word(), 1..2)),
        opt(btree_map("[a-z]{1,4}", word(), 1..2)),
    ))
    .prop_map(|m| m.map(|(labels, annotations)| h::TemplateObjectMeta { labels, annotations }))
    .boxed()
}

pub fn hub_machine(full: bool) -> BoxedStrategy<h::ProxmoxMachine> {
    (meta(), hub_machine_spec(full), opt(hub_machine_status(full)))
        .prop_map(|(metadata, spec, status)| h::ProxmoxMachine {
            metadata,
            spec,
            status,
        })
        .boxed()
}

pub fn hub_machine_template(full: bool) -> BoxedStrategy<h::ProxmoxMachineTemplate> {
    (
        meta(),
        hub_template_meta(),
        hub_machine_spec(full),
        opt(hub_machine_template_status()),
    )
        .prop_map(|(metadata, tm, spec, status)| h::ProxmoxMachineTemplate {
            metadata,
            spec: h::ProxmoxMachineTemplateSpec {
                template: h::ProxmoxMachineTemplateResource { metadata: tm, spec },
            },
            status,
        })
        .boxed()
}

/// The autoscaling status of a template (the same type in both versions).
fn hub_machine_template_status() -> BoxedStrategy<h::ProxmoxMachineTemplateStatus> {
    let quantity = prop_oneof![
        (1u32..64).prop_map(|n| n.to_string()),
        (1u32..65536).prop_map(|n| format!("{n}Mi")),
    ]
    .prop_map(k8s_openapi::apimachinery::pkg::api::resource::Quantity);
    let capacity = btree_map(
        prop_oneof![Just("cpu".to_owned()), Just("memory".to_owned())],
        quantity,
        0..3,
    );
    let node_info = (
        opt(prop_oneof![Just("amd64".to_owned()), Just("arm64".to_owned())]),
        opt(Just("linux".to_owned())),
    )
        .prop_map(|(architecture, operating_system)| h::NodeInfo {
            architecture,
            operating_system,
        });
    (opt(capacity), opt(node_info))
        .prop_map(|(capacity, node_info)| h::ProxmoxMachineTemplateStatus { capacity, node_info })
        .boxed()
}

pub fn hub_cluster(full: bool) -> BoxedStrategy<h::ProxmoxCluster> {
    (meta(), hub_cluster_spec(full), opt(hub_cluster_status(full)))
        .prop_map(|(metadata, spec, status)| h::ProxmoxCluster {
            metadata,
            spec,
            status,
        })
        .boxed()
}

pub fn hub_cluster_template(full: bool) -> BoxedStrategy<h::ProxmoxClusterTemplate> {
    (meta(), hub_template_meta(), hub_cluster_spec(full))
        .prop_map(|(metadata, tm, spec)| h::ProxmoxClusterTemplate {
            metadata,
            spec: h::ProxmoxClusterTemplateSpec {
                template: h::ProxmoxClusterTemplateResource { metadata: tm, spec },
            },
        })
        .boxed()
}
