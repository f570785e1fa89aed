//! A ProxmoxMachine as the lifecycle's [`VmSpec`]: its spec (with the failure domain's zone
//! applied), its ProxmoxCluster's scheduling settings and zones, and its Machine's node join.

use capmox_api::capi::views::MachineView;
use capmox_api::v1alpha2::{self as api, ProxmoxClusterSpec, ProxmoxMachine, ProxmoxMachineSpec};
use kube::ResourceExt;

use crate::vm::VmSpec;
use crate::vm::decide::Failure;
use crate::vm::desired::{Cpu, DesiredNic, DesiredVm, PciDevice, Volume};
use crate::vm::dynamic::DynamicNicSpec;
use crate::vm::ha::HaWish;
use crate::vm::scheduling::{effective_allowed_nodes, requested_memory_bytes};
use crate::vm::spec::{BootstrapSpec, CloneOptions, GuestChecks, PlacementSpec};
use crate::vm::template::{MatchPolicy, Selector, TemplateSource};
use crate::vm::vmid::VmidRange;

/// The VM `pm` wants (its zone already applied), in its ProxmoxCluster `cluster`, for the CAPI
/// Machine `machine`; `refusal`: a failure to report instead of any step (an unknown failure
/// domain).
pub fn vm_spec(
    pm: &ProxmoxMachine,
    cluster: &ProxmoxClusterSpec,
    machine: &MachineView,
    refusal: Option<Failure>,
) -> VmSpec {
    let spec = &pm.spec;
    let checks = spec.checks.clone().unwrap_or_default();
    VmSpec {
        name: pm.name_any(),
        source: template_source(spec),
        clone: CloneOptions {
            full: spec.is_full_clone(),
            storage: spec.storage.clone(),
            format: spec.format.map(|f| f.as_str().to_owned()),
            pool: spec.pool.clone(),
            snap_name: spec.snap_name.clone(),
        },
        placement: placement(spec, cluster),
        desired: desired_vm(spec),
        bootstrap: BootstrapSpec {
            iso_storage: spec.cloud_init_storage.clone(),
            consumed: machine.node_ref.is_some(),
        },
        guest: GuestChecks {
            skip_agent: checks.skip_qemu_guest_agent == Some(true),
            skip_cloud_init: checks.skip_cloud_init_status == Some(true),
            dynamic_nics: spec
                .network
                .network_devices
                .iter()
                .filter(|n| n.uses_dynamic_addresses())
                .map(|n| DynamicNicSpec {
                    net: n.name_or_default().to_owned(),
                    v4: n.dhcp4(),
                    v6: n.dhcp6() || n.slaac(),
                })
                .collect(),
        },
        ha: spec.ha.as_ref().map(ha_wish),
        refusal,
        operation: None,
    }
}

/// The template: `templateID` (with `sourceNode`) wins over `templateSelector`. An `imageRef`'s
/// template is resolved by the pass (it reads the ProxmoxVMImage), which replaces this.
pub fn template_source(spec: &ProxmoxMachineSpec) -> Result<TemplateSource, String> {
    let selector = spec.template_selector.as_ref().map(|s| Selector {
        tags: &s.match_tags,
        policy: s.match_policy.map(|p| match p {
            api::TemplateMatchPolicy::Exact => MatchPolicy::Exact,
            api::TemplateMatchPolicy::UniqueSubset => MatchPolicy::UniqueSubset,
            api::TemplateMatchPolicy::BestSubset => MatchPolicy::BestSubset,
        }),
    });
    TemplateSource::new(spec.template_id, spec.source_node.as_deref(), selector).map_err(|e| e.to_string())
}

/// Where the VM may go: the machine's allowed nodes (else the cluster's), narrowed to its zone's
/// nodes; the cluster's memory adjustment; the machine's VMID range.
fn placement(spec: &ProxmoxMachineSpec, cluster: &ProxmoxClusterSpec) -> PlacementSpec {
    let allowed = effective_allowed_nodes(spec.allowed_nodes.as_deref(), cluster.allowed_nodes.as_deref());
    // A zone with `nodes` (e.g. the failure domain CAPI chose) narrows the choice to them.
    let zone = spec.network.zone_or_default();
    PlacementSpec {
        allowed_nodes: crate::cluster::zones::restrict(
            allowed,
            zone,
            crate::cluster::zones::zone_nodes(cluster, zone),
        ),
        memory_adjustment: cluster.scheduler_hints.as_ref().and_then(|h| h.memory_adjustment),
        requested_memory: requested_memory_bytes(spec.memory_mib),
        vmid_range: spec.vm_id_range.as_ref().map(|r| VmidRange {
            start: r.start,
            end: r.end,
        }),
    }
}

/// `spec.ha` as the lifecycle's HA wish.
fn ha_wish(ha: &api::HaSpec) -> HaWish {
    HaWish {
        group: ha.group.clone(),
        state: ha.state.map(|s| s.as_str().to_owned()),
        max_restart: ha.max_restart.and_then(|v| u32::try_from(v).ok()),
        max_relocate: ha.max_relocate.and_then(|v| u32::try_from(v).ok()),
    }
}

/// The VM options a `ProxmoxMachine` spec asks for.
pub fn desired_vm(spec: &ProxmoxMachineSpec) -> DesiredVm {
    let positive = |v: Option<i32>| v.and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0);
    let nics = spec
        .network
        .network_devices
        .iter()
        .filter_map(|d| {
            let index = d.name_or_default().strip_prefix("net")?.parse().ok()?;
            Some(DesiredNic {
                index,
                model: d.model_or_default().as_str().to_owned(),
                bridge: d.bridge.clone().filter(|b| !b.is_empty()),
                vlan: d.vlan.and_then(|v| u16::try_from(v).ok()),
                mtu: d.mtu.and_then(|v| u32::try_from(v).ok()),
                queues: d.queues.and_then(|v| u32::try_from(v).ok()),
                mac: None,
                firewall: None,
            })
        })
        .collect();
    let disks = spec.disks.as_ref();
    DesiredVm {
        sockets: positive(spec.num_sockets),
        cores: positive(spec.num_cores),
        memory_mib: positive(spec.memory_mib).map(u64::from),
        description: spec.description.clone(),
        nics,
        tags: spec.tags.clone().unwrap_or_default(),
        boot_disk: disks
            .and_then(|d| d.boot_volume.as_ref())
            .and_then(|b| Some((b.disk.clone(), u64::try_from(b.size_gb).ok()?))),
        volumes: disks
            .and_then(|d| d.additional_volumes.as_deref())
            .unwrap_or_default()
            .iter()
            .map(volume)
            .collect(),
        cpu: spec.cpu.as_ref().map(|c| Cpu {
            model: c.cpu_type.clone(),
            flags: c.flags.clone().unwrap_or_default(),
            numa: c.numa,
        }),
        pci_devices: spec
            .pci_devices
            .as_deref()
            .unwrap_or_default()
            .iter()
            .map(|d| PciDevice {
                mapping: d.mapping.clone(),
                pcie: d.pcie == Some(true),
                x_vga: d.x_vga == Some(true),
            })
            .collect(),
        on_boot: spec.on_boot,
        options: Vec::new(),
    }
}

fn volume(v: &api::AdditionalVolume) -> Volume {
    Volume {
        disk: v.disk.clone(),
        size_gib: u64::try_from(v.size_gb).unwrap_or(0),
        storage: v.storage.clone(),
        format: v.format.map(|f| f.as_str().to_owned()),
        discard: v.discard == Some(true),
        ssd: v.ssd == Some(true),
        iothread: v.iothread == Some(true),
        cache: v.cache.map(|c| c.as_str().to_owned()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vm::template::TemplateRef;
    use serde_json::json;

    fn spec(v: serde_json::Value) -> ProxmoxMachineSpec {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn the_template_comes_from_the_spec() {
        let s = spec(json!({"templateID": 100, "sourceNode": "pve2", "network": {"networkDevices": []}}));
        let want = TemplateRef {
            node: "pve2".into(),
            vmid: 100,
        };
        assert_eq!(template_source(&s).unwrap().select(&[]).unwrap(), want);
        let s = spec(json!({
            "templateSelector": {"matchPolicy": "uniqueSubset", "matchTags": ["Ubuntu"]},
            "network": {"networkDevices": []}
        }));
        let resources: Vec<crate::proxmox::types::ClusterResource> = serde_json::from_value(json!([
            {"id": "qemu/200", "type": "qemu", "vmid": 200, "node": "pve3", "template": 1, "tags": "ubuntu;v1.30"}
        ]))
        .unwrap();
        let got = template_source(&s).unwrap().select(&resources).unwrap();
        assert_eq!(
            got,
            TemplateRef {
                node: "pve3".into(),
                vmid: 200
            }
        );
        assert!(template_source(&spec(json!({"network": {"networkDevices": []}}))).is_err());
    }

    #[test]
    fn hardware_maps_every_field() {
        let d = desired_vm(&spec(json!({
            "numSockets": 2, "numCores": 4, "memoryMiB": 4096, "description": "d",
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}, "additionalVolumes": [
                {"disk": "scsi1", "sizeGb": 10, "discard": true, "ssd": true, "iothread": true,
                 "cache": "writeback", "format": "qcow2", "storage": "ceph"}
            ]},
            "tags": ["Team-A"],
            "cpu": {"type": "host", "flags": ["+aes"], "numa": true},
            "pciDevices": [{"mapping": "gpu", "pcie": true}],
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "vlan": 10, "mtu": 9000, "queues": 2}]}
        })));
        assert_eq!((d.sockets, d.cores, d.memory_mib), (Some(2), Some(4), Some(4096)));
        assert_eq!(d.boot_disk, Some(("scsi0".into(), 20)));
        assert_eq!(
            d.volumes,
            vec![Volume {
                disk: "scsi1".into(),
                size_gib: 10,
                storage: Some("ceph".into()),
                format: Some("qcow2".into()),
                discard: true,
                ssd: true,
                iothread: true,
                cache: Some("writeback".into()),
            }]
        );
        assert_eq!(d.nics[0].model, "virtio");
        assert_eq!(
            (d.nics[0].vlan, d.nics[0].mtu, d.nics[0].queues),
            (Some(10), Some(9000), Some(2))
        );
        assert_eq!(d.cpu.unwrap().render(None).as_deref(), Some("host,flags=+aes"));
        assert_eq!(d.pci_devices[0].render(), "mapping=gpu,pcie=1");
        let empty = desired_vm(&spec(json!({"numSockets": 0, "network": {"networkDevices": []}})));
        assert_eq!(empty.sockets, None, "0 keeps the template's");
    }
}
