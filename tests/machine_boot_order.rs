//! The VM stays bootable from its disk when the NoCloud ISO is attached. On Proxmox VE only the
//! devices of a VM's boot order are bootable; a template without a `boot` key (and without
//! `bootdisk`) boots no disk under PVE's legacy default, and the seed ISO used to be written as
//! the only boot device (`boot: order=ide0`), so such a VM never came up. pve-sim plays PVE's boot
//! rules (a VM whose order reaches no disk with an OS never starts its guest agent): the machine
//! cloned from a template without `boot` must become Ready with its disk first in the order, and
//! one cloned from a template with `boot: order=scsi0;net0` must keep exactly that order. Runs on
//! the in-tree and the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use machine_support::*;
use serde_json::json;

fn boot_of(h: &Harness, vmid: u32) -> Option<String> {
    h.sim
        .state()
        .with(|c| c.vms.get(&vmid).and_then(|vm| vm.config.get("boot").cloned()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_iso_never_takes_the_disk_out_of_the_boot_order() {
    let mut config = pve_sim::SimConfig::default();
    for t in &mut config.scenario.templates {
        match t.vmid {
            100 => {
                t.config.remove("boot");
                t.config.remove("bootdisk");
            }
            102 => {
                // Legacy form whose letters leave the disk out: `d` (the seed ISO) and `n` only.
                t.config.insert("boot".into(), "dn".into());
                t.config.insert("bootdisk".into(), "scsi0".into());
            }
            _ => {}
        }
    }
    let node_of = |vmid: u32| {
        config
            .scenario
            .templates
            .iter()
            .find(|t| t.vmid == vmid)
            .map(|t| t.node.clone())
            .unwrap()
    };
    let cases = [
        ("no-boot-key", 100u32),
        ("explicit-order", 101),
        ("legacy-dn", 102),
    ];
    let nodes: Vec<String> = cases.iter().map(|(_, t)| node_of(*t)).collect();
    let h = Harness::start_with(config, fast_machine_settings()).await;
    assert_eq!(boot_of(&h, 100), None, "template 100 has no boot key");
    assert_eq!(boot_of(&h, 101).as_deref(), Some("order=scsi0;net0"));
    h.create_cluster("boot", json!({})).await;
    for ((name, template), node) in cases.iter().zip(&nodes) {
        h.create_machine(
            "boot",
            name,
            false,
            Some((CLOUD_CONFIG, Some("cloud-config"))),
            json!({"sourceNode": node, "templateID": template}),
        )
        .await;
    }
    let mut vmids = Vec::new();
    for (name, _) in &cases {
        let pm = h.wait_provisioned(name, 90).await;
        vmids.push(pm.spec.virtual_machine_id.unwrap() as u32);
    }
    // No boot key: PVE's default would boot no disk; the boot disk comes first, the ISO is not in it.
    assert_eq!(boot_of(&h, vmids[0]).as_deref(), Some("order=scsi0;net0"));
    // An explicit order is the template's, untouched (the ISO is not appended).
    assert_eq!(boot_of(&h, vmids[1]).as_deref(), Some("order=scsi0;net0"));
    // Legacy `dn`: the disk first, then what the letters made bootable (the network).
    assert_eq!(boot_of(&h, vmids[2]).as_deref(), Some("order=scsi0;net0"));
    for vmid in &vmids {
        let booted = h
            .sim
            .state()
            .with(|c| c.vms.get(vmid).is_some_and(|vm| vm.booted_os));
        assert!(booted, "VM {vmid} booted its OS");
    }
    for (name, _) in &cases {
        h.delete_machine(name, 60).await;
    }
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}
