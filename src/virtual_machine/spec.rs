//! A ProxmoxVirtualMachine as the lifecycle's [`VmSpec`]: its clone options, placement and
//! hardware (the fields a ProxmoxMachine has, plus MAC and firewall per NIC, OS type, protection,
//! the guest agent), its NoCloud ISO, and its [`Operation`] — run strategy, pause, restart and
//! power requests, live reconfiguration.

use std::time::Duration;

use capmox_api::v1alpha2::{AdditionalVolume, HaSpec};
use capmox_api::vm::{
    self as api, POWER_REQUEST_ANNOTATION, ProxmoxVirtualMachine, ProxmoxVirtualMachineSpec,
    RESTARTED_AT_ANNOTATION, RunStrategy,
};
use kube::ResourceExt;

use crate::vm::VmSpec;
use crate::vm::decide::Failure;
use crate::vm::desired::{Cpu, DesiredNic, DesiredVm, PciDevice, Volume};
use crate::vm::ha::HaWish;
use crate::vm::operate::{self, Operation, PowerRequest};
use crate::vm::scheduling::requested_memory_bytes;
use crate::vm::spec::{BootstrapSpec, CloneOptions, GuestChecks, PlacementSpec};
use crate::vm::template::TemplateSource;
use crate::vm::vmid::VmidRange;

/// Default `spec.shutdownTimeout`.
pub const DEFAULT_SHUTDOWN_TIMEOUT: Duration = Duration::from_secs(180);

/// Memory from which a created VM gets memory hot-plug (Proxmox needs at least 1024 MiB of static
/// memory for it, and NUMA).
pub const MEMORY_HOTPLUG_MIN_MIB: i32 = 1024;

/// The VM `pvm` wants: cloned from `source`, named `name` in Proxmox; `refusal` is reported
/// instead of any step until it is created.
pub fn vm_spec(
    pvm: &ProxmoxVirtualMachine,
    name: String,
    source: Result<TemplateSource, String>,
    refusal: Option<Failure>,
    adopted: bool,
) -> VmSpec {
    let spec = &pvm.spec;
    VmSpec {
        name,
        source,
        clone: CloneOptions {
            full: spec.full != Some(false),
            storage: spec.storage.clone(),
            format: spec.format.map(|f| f.as_str().to_owned()),
            pool: spec.pool.clone(),
            snap_name: spec.snap_name.clone(),
        },
        placement: PlacementSpec {
            allowed_nodes: Ok(spec.allowed_nodes.clone().filter(|n| !n.is_empty())),
            memory_adjustment: None,
            requested_memory: requested_memory_bytes(spec.memory_mib),
            vmid_range: vmid_range(spec),
        },
        desired: desired_vm(pvm, adopted),
        bootstrap: BootstrapSpec {
            iso_storage: spec.cloud_init_storage.clone(),
            // The NoCloud ISO stays attached: cloud-init reads it again on each boot (per instance
            // it only acts once), as KubeVirt keeps its cloud-init disk.
            consumed: false,
        },
        // The VM counts as created once started: the guest is read afterwards, by the operation.
        guest: GuestChecks {
            skip_agent: true,
            skip_cloud_init: true,
            dynamic_nics: Vec::new(),
        },
        ha: spec.ha.as_ref().map(ha_wish),
        refusal,
        operation: Some(operation(pvm)),
    }
}

/// An explicit VMID is the only one the VM may get; else `vmIDRange`.
fn vmid_range(spec: &ProxmoxVirtualMachineSpec) -> Option<VmidRange> {
    match spec.vmid {
        Some(v) => Some(VmidRange { start: v, end: v }),
        None => spec.vm_id_range.as_ref().map(|r| VmidRange {
            start: r.start,
            end: r.end,
        }),
    }
}

/// `spec.ha` as the lifecycle's HA wish.
fn ha_wish(ha: &HaSpec) -> HaWish {
    HaWish {
        group: ha.group.clone(),
        state: ha.state.map(|s| s.as_str().to_owned()),
        max_restart: ha.max_restart.and_then(|v| u32::try_from(v).ok()),
        max_relocate: ha.max_relocate.and_then(|v| u32::try_from(v).ok()),
    }
}

/// A Go duration (`3m`, `90s`) as a [`Duration`], the default when unset or unreadable.
pub fn shutdown_timeout(spec: &ProxmoxVirtualMachineSpec) -> Duration {
    spec.shutdown_timeout
        .as_deref()
        .and_then(|d| crate::duration::parse_duration(d).ok())
        .unwrap_or(DEFAULT_SHUTDOWN_TIMEOUT)
}

/// What the VM is operated by once created.
pub fn operation(pvm: &ProxmoxVirtualMachine) -> Operation {
    let spec = &pvm.spec;
    let annotation = |k: &str| pvm.annotations().get(k).cloned().filter(|v| !v.is_empty());
    Operation {
        run: match spec.run_strategy() {
            RunStrategy::Always => operate::RunStrategy::Always,
            RunStrategy::RerunOnFailure => operate::RunStrategy::RerunOnFailure,
            RunStrategy::Halted => operate::RunStrategy::Halted,
            RunStrategy::Manual => operate::RunStrategy::Manual,
        },
        paused: spec.paused == Some(true),
        restart: annotation(RESTARTED_AT_ANNOTATION),
        power_request: annotation(POWER_REQUEST_ANNOTATION).and_then(|v| power_request(&v)),
        shutdown_timeout: shutdown_timeout(spec),
        restart_on_change: spec.restart_on_change == Some(true),
        agent: spec.agent_enabled(),
        revision: pvm.metadata.generation.unwrap_or(0),
        nics: spec.nics().iter().map(|n| n.name.clone()).collect(),
    }
}

/// `start@<time>` / `stop@<time>`.
pub fn power_request(value: &str) -> Option<PowerRequest> {
    let (verb, _) = value.split_once('@')?;
    let start = match verb {
        "start" => true,
        "stop" => false,
        _ => return None,
    };
    Some(PowerRequest {
        start,
        token: value.to_owned(),
    })
}

/// The options a ProxmoxVirtualMachine's spec asks for (`adopted`: the VM was taken over as it is:
/// no hot-plug settings are forced on it).
pub fn desired_vm(pvm: &ProxmoxVirtualMachine, adopted: bool) -> DesiredVm {
    let spec = &pvm.spec;
    let positive = |v: Option<i32>| v.and_then(|n| u32::try_from(n).ok()).filter(|n| *n > 0);
    let nics = spec
        .nics()
        .iter()
        .filter_map(|d| {
            let index = d.name.strip_prefix("net")?.parse().ok()?;
            Some(DesiredNic {
                index,
                model: d.model.unwrap_or_default().as_str().to_owned(),
                bridge: d.bridge.clone().filter(|b| !b.is_empty()),
                vlan: d.vlan.and_then(|v| u16::try_from(v).ok()),
                mtu: d.mtu.and_then(|v| u32::try_from(v).ok()),
                queues: d.queues.and_then(|v| u32::try_from(v).ok()),
                mac: d.mac_address.clone(),
                firewall: d.firewall,
            })
        })
        .collect();
    let mut tags = spec.tags.clone().unwrap_or_default();
    tags.push(api::owner_tag(
        &pvm.namespace().unwrap_or_default(),
        &pvm.name_any(),
    ));
    DesiredVm {
        sockets: positive(spec.num_sockets),
        cores: positive(spec.num_cores),
        memory_mib: positive(spec.memory_mib).map(u64::from),
        description: spec.description.clone(),
        nics,
        tags,
        boot_disk: spec
            .boot_volume()
            .and_then(|b| Some((b.disk.clone(), u64::try_from(b.size_gb).ok()?))),
        volumes: spec.additional_volumes().iter().map(volume).collect(),
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
        options: options(spec, adopted),
    }
}

/// `protection`, `ostype`, `agent` and — for a VM this controller creates — the hot-plug
/// settings that let Proxmox apply CPU and memory changes live.
fn options(spec: &ProxmoxVirtualMachineSpec, adopted: bool) -> Vec<(String, String)> {
    let flag = |b: bool| if b { "1" } else { "0" }.to_owned();
    let mut out = Vec::new();
    if let Some(p) = spec.protection {
        out.push(("protection".to_owned(), flag(p)));
    }
    if let Some(os) = spec.os_type {
        out.push(("ostype".to_owned(), os.as_str().to_owned()));
    }
    if let Some(a) = spec.agent {
        out.push(("agent".to_owned(), flag(a)));
    }
    if !adopted {
        // Memory hot-plug needs NUMA and at least 1024 MiB (qemu-server refuses to start the VM
        // otherwise); CPU hot-plug adds vCPUs live (sockets and cores stay pending).
        if spec.memory_mib.is_some_and(|m| m >= MEMORY_HOTPLUG_MIN_MIB) {
            out.push(("hotplug".to_owned(), "network,disk,usb,cpu,memory".to_owned()));
            if spec.cpu.as_ref().and_then(|c| c.numa).is_none() {
                out.push(("numa".to_owned(), "1".to_owned()));
            }
        } else {
            out.push(("hotplug".to_owned(), "network,disk,usb,cpu".to_owned()));
        }
    }
    out
}

fn volume(v: &AdditionalVolume) -> Volume {
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
    use serde_json::json;

    fn pvm(spec: serde_json::Value) -> ProxmoxVirtualMachine {
        serde_json::from_value(json!({
            "apiVersion": api::API_VERSION, "kind": api::KIND,
            "metadata": {"name": "db-1", "namespace": "apps", "generation": 3,
                         "annotations": {RESTARTED_AT_ANNOTATION: "2026-01-01T00:00:00Z",
                                         POWER_REQUEST_ANNOTATION: "start@2026-01-01T00:00:00Z"}},
            "spec": spec
        }))
        .unwrap()
    }

    #[test]
    fn hardware_options_and_operation() {
        let p = pvm(json!({
            "templateID": 100, "sourceNode": "pve1", "vmid": 555, "memoryMiB": 2048, "numCores": 2,
            "protection": true, "osType": "l26", "runStrategy": "Halted", "shutdownTimeout": "90s",
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0",
                "macAddress": "bc:24:11:aa:bb:cc", "firewall": true}]},
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}}
        }));
        let s = vm_spec(&p, "db-1".into(), Err("x".into()), None, false);
        assert_eq!(s.placement.vmid_range, Some(VmidRange { start: 555, end: 555 }));
        assert!(s.desired.tags.contains(&"capmox-vm_apps_db-1".to_owned()));
        assert_eq!(s.desired.nics[0].mac.as_deref(), Some("bc:24:11:aa:bb:cc"));
        assert!(s.desired.options.contains(&("protection".into(), "1".into())));
        assert!(
            s.desired
                .options
                .contains(&("hotplug".into(), "network,disk,usb,cpu,memory".into()))
        );
        assert!(s.desired.options.contains(&("numa".into(), "1".into())));
        let op = s.operation.unwrap();
        assert_eq!(op.run, operate::RunStrategy::Halted);
        assert_eq!(op.shutdown_timeout, Duration::from_secs(90));
        assert_eq!(op.revision, 3);
        assert_eq!(op.restart.as_deref(), Some("2026-01-01T00:00:00Z"));
        assert!(op.power_request.unwrap().start);
        let adopted = desired_vm(&p, true);
        assert!(!adopted.options.iter().any(|(k, _)| k == "hotplug"));
        assert_eq!(power_request("reboot@x"), None);
    }
}
