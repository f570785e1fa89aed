//! ProxmoxMachine and ProxmoxMachineTemplate conversion.

use super::Body;
use super::common::{
    address_down, address_up, conditions_down, conditions_up, ready_down, ready_up, restore_hub_conditions,
    restore_spoke_conditions, template_meta_down, template_meta_up,
};
use super::network::{network_down, network_up, restore_network};
use crate::consts::CONVERSION_DATA_ANNOTATION;
use crate::{v1alpha1, v1alpha2};

/// v1alpha1 machine spec → v1alpha2.
pub fn spec_up(s: &v1alpha1::ProxmoxMachineSpec) -> v1alpha2::ProxmoxMachineSpec {
    // In v1alpha1 `target` overrides `allowedNodes`, so it replaces them (as capmox does).
    let allowed_nodes = match &s.target {
        Some(target) => Some(vec![target.clone()]),
        None => s.allowed_nodes.clone(),
    };
    v1alpha2::ProxmoxMachineSpec {
        allowed_nodes,
        checks: s.checks.as_ref().map(|c| v1alpha2::ProxmoxMachineChecks {
            skip_cloud_init_status: c.skip_cloud_init_status,
            skip_qemu_guest_agent: c.skip_qemu_guest_agent,
        }),
        cloud_init_storage: None,
        cpu: None,
        description: s.description.clone(),
        disks: s.disks.as_ref().map(|d| v1alpha2::Storage {
            additional_volumes: None,
            boot_volume: d.boot_volume.as_ref().map(|b| v1alpha2::DiskSize {
                disk: b.disk.clone(),
                size_gb: b.size_gb,
            }),
        }),
        format: s.format.map(format_up),
        full: s.full,
        ha: None,
        image_ref: s.image_ref.clone(),
        memory_mib: s.memory_mib,
        metadata_settings: s.metadata_settings.as_ref().map(|m| v1alpha2::MetadataSettings {
            provider_id_injection: m.provider_id_injection.unwrap_or(false),
        }),
        network: network_up(&s.network),
        network_config_format: None,
        num_cores: s.num_cores,
        num_sockets: s.num_sockets,
        on_boot: None,
        pci_devices: None,
        pool: s.pool.clone(),
        provider_id: s.provider_id.clone(),
        snap_name: s.snap_name.clone(),
        source_node: s.source_node.clone(),
        storage: s.storage.clone(),
        tags: s.tags.clone(),
        template_id: s.template_id,
        template_selector: s.template_selector.as_ref().map(|t| v1alpha2::TemplateSelector {
            match_policy: t.match_policy.map(policy_up),
            match_tags: t.match_tags.clone(),
        }),
        virtual_machine_id: s.virtual_machine_id,
        vm_id_range: s.vm_id_range.as_ref().map(|r| v1alpha2::VmIdRange {
            end: r.end,
            start: r.start,
        }),
    }
}

/// v1alpha2 machine spec → v1alpha1.
pub fn spec_down(h: &v1alpha2::ProxmoxMachineSpec) -> v1alpha1::ProxmoxMachineSpec {
    v1alpha1::ProxmoxMachineSpec {
        source_node: h.source_node.clone(),
        template_id: h.template_id,
        template_selector: h.template_selector.as_ref().map(|t| v1alpha1::TemplateSelector {
            match_tags: t.match_tags.clone(),
            match_policy: t.match_policy.map(policy_down),
        }),
        image_ref: h.image_ref.clone(),
        description: h.description.clone(),
        format: h.format.map(format_down),
        full: h.full,
        pool: h.pool.clone(),
        snap_name: h.snap_name.clone(),
        storage: h.storage.clone(),
        target: None,
        provider_id: h.provider_id.clone(),
        virtual_machine_id: h.virtual_machine_id,
        num_sockets: h.num_sockets,
        num_cores: h.num_cores,
        memory_mib: h.memory_mib,
        disks: h.disks.as_ref().map(|d| v1alpha1::Storage {
            boot_volume: d.boot_volume.as_ref().map(|b| v1alpha1::DiskSize {
                disk: b.disk.clone(),
                size_gb: b.size_gb,
            }),
        }),
        network: network_down(&h.network),
        vm_id_range: h.vm_id_range.as_ref().map(|r| v1alpha1::VmIdRange {
            start: r.start,
            end: r.end,
        }),
        checks: h.checks.as_ref().map(|c| v1alpha1::ProxmoxMachineChecks {
            skip_cloud_init_status: c.skip_cloud_init_status,
            skip_qemu_guest_agent: c.skip_qemu_guest_agent,
        }),
        metadata_settings: h.metadata_settings.as_ref().map(|m| v1alpha1::MetadataSettings {
            provider_id_injection: Some(m.provider_id_injection),
        }),
        allowed_nodes: h.allowed_nodes.clone(),
        tags: h.tags.clone(),
    }
}

fn format_up(f: v1alpha1::TargetFileStorageFormat) -> v1alpha2::TargetFileStorageFormat {
    use v1alpha1::TargetFileStorageFormat as S;
    use v1alpha2::TargetFileStorageFormat as H;
    match f {
        S::Raw => H::Raw,
        S::Qcow2 => H::Qcow2,
        S::Vmdk => H::Vmdk,
    }
}

fn format_down(f: v1alpha2::TargetFileStorageFormat) -> v1alpha1::TargetFileStorageFormat {
    use v1alpha1::TargetFileStorageFormat as S;
    use v1alpha2::TargetFileStorageFormat as H;
    match f {
        H::Raw => S::Raw,
        H::Qcow2 => S::Qcow2,
        H::Vmdk => S::Vmdk,
    }
}

fn policy_up(p: v1alpha1::TemplateMatchPolicy) -> v1alpha2::TemplateMatchPolicy {
    use v1alpha1::TemplateMatchPolicy as S;
    use v1alpha2::TemplateMatchPolicy as H;
    match p {
        S::Exact => H::Exact,
        S::UniqueSubset => H::UniqueSubset,
        S::BestSubset => H::BestSubset,
    }
}

fn policy_down(p: v1alpha2::TemplateMatchPolicy) -> v1alpha1::TemplateMatchPolicy {
    use v1alpha1::TemplateMatchPolicy as S;
    use v1alpha2::TemplateMatchPolicy as H;
    match p {
        H::Exact => S::Exact,
        H::UniqueSubset => S::UniqueSubset,
        H::BestSubset => S::BestSubset,
    }
}

/// Restores hub-only machine spec data after the v1alpha1 object changed: the network extras,
/// `cloudInitStorage`, `networkConfigFormat`, `disks.additionalVolumes`, `ha`, `cpu`, `pciDevices` and
/// `onBoot` (none of them exists in v1alpha1).
fn restore_hub_spec(hub: &mut v1alpha2::ProxmoxMachineSpec, restored: &v1alpha2::ProxmoxMachineSpec) {
    restore_network(&mut hub.network, &restored.network);
    if hub.cloud_init_storage.is_none() {
        hub.cloud_init_storage = restored.cloud_init_storage.clone();
    }
    if hub.network_config_format.is_none() {
        hub.network_config_format = restored.network_config_format;
    }
    if hub.ha.is_none() {
        hub.ha = restored.ha.clone();
    }
    if hub.cpu.is_none() {
        hub.cpu = restored.cpu.clone();
    }
    if hub.pci_devices.is_none() {
        hub.pci_devices = restored.pci_devices.clone();
    }
    if hub.on_boot.is_none() {
        hub.on_boot = restored.on_boot;
    }
    if let Some(volumes) = restored
        .disks
        .as_ref()
        .and_then(|d| d.additional_volumes.as_ref())
    {
        let disks = hub.disks.get_or_insert_with(Default::default);
        if disks.additional_volumes.is_none() {
            disks.additional_volumes = Some(volumes.clone());
        }
    }
}

/// Restores v1alpha1-only machine spec data: `target` (and the `allowedNodes` it replaced)
/// while the hub still allows exactly that node.
fn restore_spoke_spec(spoke: &mut v1alpha1::ProxmoxMachineSpec, restored: &v1alpha1::ProxmoxMachineSpec) {
    if let Some(target) = &restored.target
        && spoke.allowed_nodes.as_deref() == Some(std::slice::from_ref(target))
    {
        spoke.target = Some(target.clone());
        spoke.allowed_nodes = restored.allowed_nodes.clone();
    }
}

/// v1alpha1 machine status → v1alpha2.
pub fn status_up(s: &v1alpha1::ProxmoxMachineStatus) -> v1alpha2::ProxmoxMachineStatus {
    v1alpha2::ProxmoxMachineStatus {
        addresses: s.addresses.as_ref().map(|a| a.iter().map(address_up).collect()),
        bootstrap_data_provided: s.bootstrap_data_provided,
        conditions: conditions_up(&s.conditions),
        credentials_ref: None,
        ha_resource: None,
        initialization: ready_up(s.ready),
        ip_addresses: s.ip_addresses.as_ref().map(|map| {
            map.iter()
                .map(|(net, ip)| {
                    let list = |a: &Option<String>| a.clone().filter(|a| !a.is_empty()).map(|a| vec![a]);
                    v1alpha2::IpAddressesSpec {
                        net: net.clone(),
                        ipv4: list(&ip.ipv4),
                        ipv6: list(&ip.ipv6),
                    }
                })
                .collect()
        }),
        network: s.network.as_ref().map(|n| {
            n.iter()
                .map(|n| v1alpha2::NetworkStatus {
                    connected: n.connected.unwrap_or(false),
                    ip_addrs: n.ip_addrs.clone(),
                    mac_addr: n.mac_addr.clone(),
                    network_name: n.network_name.clone(),
                })
                .collect()
        }),
        proxmox_node: s.proxmox_node.clone(),
        retry_after: s.retry_after.clone(),
        task_ref: s.task_ref.clone(),
        vm_status: s.vm_status.clone().filter(|v| !v.is_empty()),
    }
}

/// v1alpha2 machine status → v1alpha1.
pub fn status_down(h: &v1alpha2::ProxmoxMachineStatus) -> v1alpha1::ProxmoxMachineStatus {
    v1alpha1::ProxmoxMachineStatus {
        ready: ready_down(&h.initialization),
        addresses: h.addresses.as_ref().map(|a| a.iter().map(address_down).collect()),
        vm_status: h.vm_status.clone(),
        bootstrap_data_provided: h.bootstrap_data_provided,
        ip_addresses: h.ip_addresses.as_ref().map(|list| {
            list.iter()
                .map(|ip| {
                    let first = |v: &Option<Vec<String>>| v.as_ref().and_then(|v| v.first().cloned());
                    (
                        ip.net.clone(),
                        v1alpha1::IpAddress {
                            ipv4: first(&ip.ipv4),
                            ipv6: first(&ip.ipv6),
                        },
                    )
                })
                .collect()
        }),
        network: h.network.as_ref().map(|n| {
            n.iter()
                .map(|n| v1alpha1::NetworkStatus {
                    connected: Some(n.connected),
                    ip_addrs: n.ip_addrs.clone(),
                    mac_addr: n.mac_addr.clone(),
                    network_name: n.network_name.clone(),
                })
                .collect()
        }),
        proxmox_node: h.proxmox_node.clone(),
        task_ref: h.task_ref.clone(),
        retry_after: h.retry_after.clone(),
        failure_reason: None,
        failure_message: None,
        conditions: conditions_down(&h.conditions),
    }
}

/// ProxmoxMachine body: spec and optional status.
pub(crate) struct MachineBody;

impl Body for MachineBody {
    type Spoke = (
        v1alpha1::ProxmoxMachineSpec,
        Option<v1alpha1::ProxmoxMachineStatus>,
    );
    type Hub = (
        v1alpha2::ProxmoxMachineSpec,
        Option<v1alpha2::ProxmoxMachineStatus>,
    );

    fn up(s: &Self::Spoke) -> Self::Hub {
        (spec_up(&s.0), s.1.as_ref().map(status_up))
    }

    fn down(h: &Self::Hub) -> Self::Spoke {
        (spec_down(&h.0), h.1.as_ref().map(status_down))
    }

    fn restore_hub(hub: &mut Self::Hub, restored: &Self::Hub, spoke: &Self::Spoke) {
        if spec_down(&restored.0) == spoke.0 {
            hub.0 = restored.0.clone();
        } else {
            restore_hub_spec(&mut hub.0, &restored.0);
        }
        if restored.1.as_ref().map(status_down) == spoke.1 {
            hub.1 = restored.1.clone();
        } else if let (Some(status), Some(old)) = (hub.1.as_mut(), restored.1.as_ref()) {
            restore_hub_conditions(&mut status.conditions, &old.conditions);
            if status.ha_resource.is_none() {
                status.ha_resource = old.ha_resource.clone();
            }
            if status.credentials_ref.is_none() {
                status.credentials_ref = old.credentials_ref.clone();
            }
        }
    }

    fn restore_spoke(spoke: &mut Self::Spoke, restored: &Self::Spoke, hub: &Self::Hub) {
        if spec_up(&restored.0) == hub.0 {
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

/// ProxmoxMachineTemplate body: the spec and the (version-independent) autoscaling status.
///
/// CAPI v1.10 (v1beta1 contract) reads a template through `v1alpha1` and creates each
/// ProxmoxMachine from `spec.template` through `v1alpha1`, copying `spec.template.metadata`'s
/// annotations but not the template's own. So a down-conversion that cannot express the machine
/// spec also puts the hub ProxmoxMachine (`apiVersion`, `kind`, `spec`) into
/// `spec.template.metadata.annotations["cluster.x-k8s.io/conversion-data"]`: the machines CAPI
/// creates carry it, and their up-conversion restores what `v1alpha1` cannot hold (NIC `queues`,
/// pools beyond one per family, zones, ...). Up-conversion drops that entry again.
pub(crate) struct MachineTemplateBody;

/// The hub ProxmoxMachine's JSON for `spec.template.metadata` when `spec` does not survive a
/// down-conversion, else `None`.
fn machine_data(spec: &v1alpha2::ProxmoxMachineSpec, down: &v1alpha1::ProxmoxMachineSpec) -> Option<String> {
    if spec_up(down) == *spec {
        return None;
    }
    let machine = serde_json::json!({
        "apiVersion": v1alpha2::API_VERSION,
        "kind": "ProxmoxMachine",
        "spec": spec,
    });
    // Serialising derived types with string keys cannot fail.
    serde_json::to_string(&machine).ok()
}

impl Body for MachineTemplateBody {
    type Spoke = (
        v1alpha1::ProxmoxMachineTemplateSpec,
        Option<v1alpha1::ProxmoxMachineTemplateStatus>,
    );
    type Hub = (
        v1alpha2::ProxmoxMachineTemplateSpec,
        Option<v1alpha2::ProxmoxMachineTemplateStatus>,
    );

    fn up(s: &Self::Spoke) -> Self::Hub {
        (template_spec_up(&s.0), s.1.clone())
    }

    fn down(h: &Self::Hub) -> Self::Spoke {
        (template_spec_down(&h.0), h.1.clone())
    }

    // As for ProxmoxMachine: a stored object that converts to exactly what arrived is taken
    // whole, so values the other version writes ambiguously survive round trips. The status is
    // the same type in both versions and always comes from the arriving object.
    fn restore_hub(hub: &mut Self::Hub, restored: &Self::Hub, spoke: &Self::Spoke) {
        if template_spec_down(&restored.0) == spoke.0 {
            hub.0 = restored.0.clone();
        } else {
            restore_hub_spec(&mut hub.0.template.spec, &restored.0.template.spec);
        }
    }

    fn restore_spoke(spoke: &mut Self::Spoke, restored: &Self::Spoke, hub: &Self::Hub) {
        if template_spec_up(&restored.0) == hub.0 {
            spoke.0 = restored.0.clone();
        } else {
            restore_spoke_spec(&mut spoke.0.template.spec, &restored.0.template.spec);
        }
    }
}

/// Plain up-conversion of a template spec (drops the machine data `down` added).
fn template_spec_up(s: &v1alpha1::ProxmoxMachineTemplateSpec) -> v1alpha2::ProxmoxMachineTemplateSpec {
    let mut metadata = template_meta_up(&s.template.metadata);
    let mut emptied = false;
    if let Some(m) = metadata.as_mut()
        && let Some(a) = m.annotations.as_mut()
        && a.remove(CONVERSION_DATA_ANNOTATION).is_some()
        && a.is_empty()
    {
        m.annotations = None;
        emptied = m.labels.is_none();
    }
    if emptied {
        // Only the entry `down` added was there.
        metadata = None;
    }
    v1alpha2::ProxmoxMachineTemplateSpec {
        template: v1alpha2::ProxmoxMachineTemplateResource {
            metadata,
            spec: spec_up(&s.template.spec),
        },
    }
}

/// Plain down-conversion of a template spec (adds the hub machine when `v1alpha1` cannot hold it).
fn template_spec_down(h: &v1alpha2::ProxmoxMachineTemplateSpec) -> v1alpha1::ProxmoxMachineTemplateSpec {
    let spec = spec_down(&h.template.spec);
    let mut metadata = template_meta_down(&h.template.metadata);
    if let Some(data) = machine_data(&h.template.spec, &spec) {
        metadata
            .get_or_insert_with(Default::default)
            .annotations
            .get_or_insert_with(Default::default)
            .insert(CONVERSION_DATA_ANNOTATION.to_owned(), data);
    }
    v1alpha1::ProxmoxMachineTemplateSpec {
        template: v1alpha1::ProxmoxMachineTemplateResource { metadata, spec },
    }
}
