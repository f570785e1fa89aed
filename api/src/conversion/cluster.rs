//! ProxmoxCluster and ProxmoxClusterTemplate conversion.

use k8s_openapi::api::core::v1 as corev1;

use super::Body;
use super::common::{
    conditions_down, conditions_up, i64_to_i32, i64_to_u64, local_ref_down, local_ref_up, ready_down,
    ready_up, restore_hub_conditions, restore_spoke_conditions, template_meta_down, template_meta_up,
    u64_to_i64,
};
use crate::{v1alpha1, v1alpha2};

/// v1alpha1 cluster spec → v1alpha2 (`cloneSpec` is dropped).
pub fn spec_up(s: &v1alpha1::ProxmoxClusterSpec) -> v1alpha2::ProxmoxClusterSpec {
    v1alpha2::ProxmoxClusterSpec {
        allowed_nodes: s.allowed_nodes.clone(),
        control_plane_endpoint: s.control_plane_endpoint.as_ref().and_then(|e| {
            let host = (!e.host.is_empty()).then(|| e.host.clone());
            let port = (e.port != 0).then_some(e.port);
            (host.is_some() || port.is_some()).then_some(v1alpha2::ApiEndpoint { host, port })
        }),
        credentials_ref: s.credentials_ref.as_ref().map(|r| corev1::SecretReference {
            name: r.name.clone(),
            namespace: r.namespace.clone(),
        }),
        dns_servers: s.dns_servers.clone(),
        external_managed_control_plane: s.external_managed_control_plane,
        ipv4_config: s.ipv4_config.as_ref().map(ip_config_up),
        ipv6_config: s.ipv6_config.as_ref().map(ip_config_up),
        scheduler_hints: s.scheduler_hints.as_ref().map(|h| v1alpha2::SchedulerHints {
            memory_adjustment: h.memory_adjustment.map(u64_to_i64),
        }),
        zone_config: None,
        failure_domains_from_zones: None,
    }
}

/// v1alpha2 cluster spec → v1alpha1.
pub fn spec_down(h: &v1alpha2::ProxmoxClusterSpec) -> v1alpha1::ProxmoxClusterSpec {
    v1alpha1::ProxmoxClusterSpec {
        control_plane_endpoint: h.control_plane_endpoint.as_ref().map(|e| v1alpha1::ApiEndpoint {
            host: e.host.clone().unwrap_or_default(),
            port: e.port.unwrap_or_default(),
        }),
        external_managed_control_plane: h.external_managed_control_plane,
        allowed_nodes: h.allowed_nodes.clone(),
        scheduler_hints: h.scheduler_hints.as_ref().map(|s| v1alpha1::SchedulerHints {
            memory_adjustment: s.memory_adjustment.map(i64_to_u64),
        }),
        ipv4_config: h.ipv4_config.as_ref().map(ip_config_down),
        ipv6_config: h.ipv6_config.as_ref().map(ip_config_down),
        dns_servers: h.dns_servers.clone(),
        clone_spec: None,
        credentials_ref: h.credentials_ref.as_ref().map(|r| v1alpha1::SecretReference {
            name: r.name.clone(),
            namespace: r.namespace.clone(),
        }),
    }
}

fn ip_config_up(c: &v1alpha1::IpConfigSpec) -> v1alpha2::IpConfigSpec {
    v1alpha2::IpConfigSpec {
        addresses: c.addresses.clone(),
        gateway: c.gateway.clone().unwrap_or_default(),
        metric: c.metric.map(super::common::u32_to_i32),
        prefix: i64_to_i32(c.prefix),
    }
}

fn ip_config_down(c: &v1alpha2::IpConfigSpec) -> v1alpha1::IpConfigSpec {
    v1alpha1::IpConfigSpec {
        addresses: c.addresses.clone(),
        prefix: i64::from(c.prefix),
        gateway: (!c.gateway.is_empty()).then(|| c.gateway.clone()),
        metric: c.metric.map(super::common::i32_to_u32),
    }
}

/// v1alpha1 cluster status → v1alpha2 (`failureReason`/`failureMessage` are dropped).
pub fn status_up(s: &v1alpha1::ProxmoxClusterStatus) -> v1alpha2::ProxmoxClusterStatus {
    let locations = |l: &Option<Vec<v1alpha1::NodeLocation>>| {
        l.as_ref().map(|l| {
            l.iter()
                .map(|n| v1alpha2::NodeLocation {
                    machine: local_ref_up(&n.machine),
                    node: n.node.clone(),
                    zone: None,
                })
                .collect()
        })
    };
    v1alpha2::ProxmoxClusterStatus {
        conditions: conditions_up(&s.conditions),
        in_cluster_ip_pool_ref: s
            .in_cluster_ip_pool_ref
            .as_ref()
            .map(|r| r.iter().map(local_ref_up).collect()),
        in_cluster_zone_ref: None,
        failure_domains: failure_domains_up(s.failure_domains.as_ref()),
        initialization: ready_up(s.ready),
        node_inventory: None,
        node_locations: s.node_locations.as_ref().map(|n| v1alpha2::NodeLocations {
            control_plane: locations(&n.control_plane),
            workers: locations(&n.workers),
        }),
    }
}

/// v1alpha2 cluster status → v1alpha1.
pub fn status_down(h: &v1alpha2::ProxmoxClusterStatus) -> v1alpha1::ProxmoxClusterStatus {
    let locations = |l: &Option<Vec<v1alpha2::NodeLocation>>| {
        l.as_ref().map(|l| {
            l.iter()
                .map(|n| v1alpha1::NodeLocation {
                    machine: local_ref_down(&n.machine),
                    node: n.node.clone(),
                })
                .collect()
        })
    };
    v1alpha1::ProxmoxClusterStatus {
        ready: ready_down(&h.initialization),
        in_cluster_ip_pool_ref: h
            .in_cluster_ip_pool_ref
            .as_ref()
            .map(|r| r.iter().map(local_ref_down).collect()),
        node_locations: h.node_locations.as_ref().map(|n| v1alpha1::NodeLocations {
            control_plane: locations(&n.control_plane),
            workers: locations(&n.workers),
        }),
        failure_reason: None,
        failure_message: None,
        conditions: conditions_down(&h.conditions),
        failure_domains: failure_domains_down(h.failure_domains.as_ref()),
    }
}

/// v1beta1 failure-domain map → v1beta2 list (sorted by name).
fn failure_domains_up(
    m: Option<&std::collections::BTreeMap<String, v1alpha1::FailureDomainSpec>>,
) -> Option<Vec<v1alpha2::FailureDomain>> {
    m.map(|m| {
        m.iter()
            .map(|(name, d)| v1alpha2::FailureDomain {
                name: name.clone(),
                control_plane: d.control_plane,
                attributes: d.attributes.clone(),
            })
            .collect()
    })
}

/// v1beta2 failure-domain list → v1beta1 map (a later duplicate name wins).
fn failure_domains_down(
    l: Option<&Vec<v1alpha2::FailureDomain>>,
) -> Option<std::collections::BTreeMap<String, v1alpha1::FailureDomainSpec>> {
    l.map(|l| {
        l.iter()
            .map(|d| {
                let spec = v1alpha1::FailureDomainSpec {
                    control_plane: d.control_plane,
                    attributes: d.attributes.clone(),
                };
                (d.name.clone(), spec)
            })
            .collect()
    })
}

fn restore_hub_spec(hub: &mut v1alpha2::ProxmoxClusterSpec, restored: &v1alpha2::ProxmoxClusterSpec) {
    if hub.zone_config.is_none() {
        hub.zone_config = restored.zone_config.clone();
    }
    if hub.failure_domains_from_zones.is_none() {
        hub.failure_domains_from_zones = restored.failure_domains_from_zones;
    }
}

fn restore_hub_status(hub: &mut v1alpha2::ProxmoxClusterStatus, restored: &v1alpha2::ProxmoxClusterStatus) {
    if hub.in_cluster_zone_ref.is_none() {
        hub.in_cluster_zone_ref = restored.in_cluster_zone_ref.clone();
    }
    if hub.node_inventory.is_none() {
        hub.node_inventory = restored.node_inventory.clone();
    }
    if failure_domains_down(hub.failure_domains.as_ref())
        == failure_domains_down(restored.failure_domains.as_ref())
    {
        hub.failure_domains = restored.failure_domains.clone();
    }
    restore_hub_conditions(&mut hub.conditions, &restored.conditions);
    let (Some(locations), Some(old)) = (hub.node_locations.as_mut(), restored.node_locations.as_ref()) else {
        return;
    };
    let all_old: Vec<&v1alpha2::NodeLocation> = old
        .control_plane
        .iter()
        .flatten()
        .chain(old.workers.iter().flatten())
        .collect();
    for loc in locations
        .control_plane
        .iter_mut()
        .flatten()
        .chain(locations.workers.iter_mut().flatten())
    {
        if let Some(o) = all_old
            .iter()
            .find(|o| o.machine.name == loc.machine.name && o.node == loc.node)
        {
            loc.zone = o.zone.clone();
        }
    }
}

/// `s` without what only v1alpha1 has (`cloneSpec`): the most [`spec_down`] can give back.
fn spoke_core(s: &v1alpha1::ProxmoxClusterSpec) -> v1alpha1::ProxmoxClusterSpec {
    v1alpha1::ProxmoxClusterSpec {
        clone_spec: None,
        ..s.clone()
    }
}

/// `h` without what only v1alpha2 has (zones): the most [`spec_up`] can give back.
fn hub_core(h: &v1alpha2::ProxmoxClusterSpec) -> v1alpha2::ProxmoxClusterSpec {
    v1alpha2::ProxmoxClusterSpec {
        zone_config: None,
        failure_domains_from_zones: None,
        ..h.clone()
    }
}

fn restore_spoke_spec(spoke: &mut v1alpha1::ProxmoxClusterSpec, restored: &v1alpha1::ProxmoxClusterSpec) {
    if spoke.clone_spec.is_none() {
        spoke.clone_spec = restored.clone_spec.clone();
    }
}

/// ProxmoxCluster body: spec and optional status.
pub(crate) struct ClusterBody;

impl Body for ClusterBody {
    type Spoke = (
        v1alpha1::ProxmoxClusterSpec,
        Option<v1alpha1::ProxmoxClusterStatus>,
    );
    type Hub = (
        v1alpha2::ProxmoxClusterSpec,
        Option<v1alpha2::ProxmoxClusterStatus>,
    );

    fn up(s: &Self::Spoke) -> Self::Hub {
        (spec_up(&s.0), s.1.as_ref().map(status_up))
    }

    fn down(h: &Self::Hub) -> Self::Spoke {
        (spec_down(&h.0), h.1.as_ref().map(status_down))
    }

    // The stored object is taken whole when it converts to what arrived, apart from what the
    // arriving version cannot express: values the other version writes ambiguously (an empty
    // `controlPlaneEndpoint`) would otherwise change on every round trip.
    fn restore_hub(hub: &mut Self::Hub, restored: &Self::Hub, spoke: &Self::Spoke) {
        if spec_down(&restored.0) == spoke_core(&spoke.0) {
            hub.0 = restored.0.clone();
        } else {
            restore_hub_spec(&mut hub.0, &restored.0);
        }
        if restored.1.as_ref().map(status_down) == spoke.1 {
            hub.1 = restored.1.clone();
        } else if let (Some(status), Some(old)) = (hub.1.as_mut(), restored.1.as_ref()) {
            restore_hub_status(status, old);
        }
    }

    fn restore_spoke(spoke: &mut Self::Spoke, restored: &Self::Spoke, hub: &Self::Hub) {
        if spec_up(&restored.0) == hub_core(&hub.0) {
            spoke.0 = restored.0.clone();
        } else {
            restore_spoke_spec(&mut spoke.0, &restored.0);
        }
        if restored.1.as_ref().map(status_up) == hub.1 {
            spoke.1 = restored.1.clone();
        } else if let (Some(status), Some(old)) = (spoke.1.as_mut(), restored.1.as_ref()) {
            restore_spoke_conditions(&mut status.conditions, &old.conditions);
        }
    }
}

/// ProxmoxClusterTemplate body: the spec, plus v1alpha1's (field-less) status.
pub(crate) struct ClusterTemplateBody;

impl Body for ClusterTemplateBody {
    type Spoke = (
        v1alpha1::ProxmoxClusterTemplateSpec,
        Option<v1alpha1::ProxmoxClusterTemplateStatus>,
    );
    type Hub = v1alpha2::ProxmoxClusterTemplateSpec;

    fn up(s: &Self::Spoke) -> Self::Hub {
        v1alpha2::ProxmoxClusterTemplateSpec {
            template: v1alpha2::ProxmoxClusterTemplateResource {
                metadata: template_meta_up(&s.0.template.metadata),
                spec: spec_up(&s.0.template.spec),
            },
        }
    }

    fn down(h: &Self::Hub) -> Self::Spoke {
        let spec = v1alpha1::ProxmoxClusterTemplateSpec {
            template: v1alpha1::ProxmoxClusterTemplateResource {
                metadata: template_meta_down(&h.template.metadata),
                spec: spec_down(&h.template.spec),
            },
        };
        (spec, None)
    }

    // As for ProxmoxCluster: the stored object is taken whole when it converts to what arrived
    // (apart from what the arriving version cannot express).
    fn restore_hub(hub: &mut Self::Hub, restored: &Self::Hub, spoke: &Self::Spoke) {
        let mut arrived = spoke.0.clone();
        arrived.template.spec = spoke_core(&arrived.template.spec);
        if Self::down(restored).0 == arrived {
            *hub = restored.clone();
        } else {
            restore_hub_spec(&mut hub.template.spec, &restored.template.spec);
        }
    }

    fn restore_spoke(spoke: &mut Self::Spoke, restored: &Self::Spoke, hub: &Self::Hub) {
        let mut arrived = hub.clone();
        arrived.template.spec = hub_core(&arrived.template.spec);
        if Self::up(restored) == arrived {
            spoke.0 = restored.0.clone();
        } else {
            restore_spoke_spec(&mut spoke.0.template.spec, &restored.0.template.spec);
        }
    }
}
