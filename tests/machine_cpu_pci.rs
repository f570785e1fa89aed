//! Issue 14 item 2 end to end against pve-sim: the CPU model, flags and NUMA (`spec.cpu`,
//! capmox #899) and PCI passthrough by Proxmox resource mapping (`spec.pciDevices`, capmox #834),
//! with `spec.onBoot` (issue 22: the option added through the VM lifecycle layer).
//! A machine goes create → provisioned with `cpu`/`numa`/`hostpci0`/`onboot` in its VM config, lands on
//! the only node that has its mapping, a mapping no node has gives `PCIMappingUnavailable`, and
//! deletion leaves nothing. Runs on the in-tree and the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use machine_support::*;
use serde_json::json;

fn config_of(h: &Harness, vmid: u32) -> std::collections::BTreeMap<String, String> {
    h.sim
        .state()
        .with(|c| c.vms.get(&vmid).map(|vm| vm.config.clone()).unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cpu_and_pci_mapping_place_and_shape_the_vm() {
    let h = Harness::start_with(pve_sim::SimConfig::default(), fast_machine_settings()).await;
    // The GPU exists only on pve2; template 101 (shared storage, clonable to any node) uses the
    // q35 chipset PCIe needs.
    h.sim.state().add_pci_mapping("gpu", &["pve2"]);
    h.sim.state().with(|c| {
        c.vms
            .get_mut(&101)
            .expect("template 101")
            .config
            .insert("machine".into(), "q35".into())
    });
    h.create_cluster("pci", json!({})).await;
    h.create_machine(
        "pci",
        "gpu-node",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({
            "sourceNode": "pve2",
            "templateID": 101,
            "allowedNodes": ["pve1", "pve3", "pve2"],
            "cpu": {"type": "x86-64-v2-AES", "flags": ["+aes", "-pcid"], "numa": true},
            "pciDevices": [{"mapping": "gpu", "pcie": true, "xVga": true}],
            "onBoot": true,
        }),
    )
    .await;
    h.create_machine(
        "pci",
        "no-mapping",
        false,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({"sourceNode": "pve2", "templateID": 101, "pciDevices": [{"mapping": "tpu"}]}),
    )
    .await;

    let pm = h.wait_provisioned("gpu-node", 90).await;
    let vmid = pm.spec.virtual_machine_id.unwrap() as u32;
    assert_eq!(
        pm.status.as_ref().and_then(|s| s.proxmox_node.as_deref()),
        Some("pve2"),
        "the only node with the mapping"
    );
    let config = config_of(&h, vmid);
    assert_eq!(
        config.get("cpu").map(String::as_str),
        Some("x86-64-v2-AES,flags=+aes;-pcid"),
        "{config:?}"
    );
    assert_eq!(config.get("numa").map(String::as_str), Some("1"), "{config:?}");
    assert_eq!(config.get("onboot").map(String::as_str), Some("1"), "{config:?}");
    assert_eq!(
        config.get("hostpci0").map(String::as_str),
        Some("mapping=gpu,pcie=1,x-vga=1"),
        "{config:?}"
    );
    assert_eq!(h.sim.state().with(|c| c.vms[&vmid].node.clone()), "pve2");

    let bad = h.wait_reason("no-mapping", "PCIMappingUnavailable", 60).await;
    let message = bad
        .condition("VirtualMachineProvisioned")
        .map(|c| c.message.clone())
        .unwrap_or_default();
    assert!(message.contains("\"tpu\""), "{message}");
    assert!(bad.spec.virtual_machine_id.is_none(), "nothing reserved");

    h.delete_machine("gpu-node", 60).await;
    h.delete_machine("no-mapping", 60).await;
    let (vms, isos, ipam) = h.settled_leftovers().await;
    assert!(
        vms.is_empty() && isos.is_empty() && ipam == 0,
        "{vms:?} {isos:?} {ipam}"
    );
    h.stop().await;
}
