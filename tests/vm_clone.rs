//! Clones of a ProxmoxVirtualMachine against pve-sim, on the in-tree API server or the real
//! kube-apiserver (`KUBEBUILDER_ASSETS`): a full clone (a copy of the source VM's disks) and a
//! linked clone (of the source's template) → a second and third `Running` VM with new MACs and
//! the overrides; a clone of a snapshot → the VM as the snapshot has it; a linked clone of an
//! adopted VM (no template) and a clone onto an existing object → `Failed` with the reason and
//! nothing made in Proxmox.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod vm_support;

use capmox_api::vm::{
    CLONED_BY_LABEL, OperationPhase, ProxmoxVMClone, ProxmoxVMSnapshot, READY_CONDITION, VmPhase,
};
use pve_sim::PowerState;
use serde_json::json;
use vm_support::ops::cond;
use vm_support::*;

fn vmid_of(p: &capmox_api::vm::ProxmoxVirtualMachine) -> u32 {
    u32::try_from(p.status.as_ref().unwrap().vmid.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn full_linked_and_snapshot_clones() {
    let h = Harness::start_ops(pve_sim::SimConfig::default(), fast_settings()).await;
    let st = h.sim.state();
    h.create(
        "src",
        json!({"templateID": 100, "sourceNode": "pve1", "memoryMiB": 2048,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "macAddress": "BC:24:11:AA:BB:01",
                "ipv4Addresses": ["10.40.0.5/24"], "gateway": "10.40.0.1"}]},
            "cloudInit": {"userData": "#cloud-config\n"}}),
    )
    .await;
    let src = vmid_of(&h.wait_phase("src", VmPhase::Running, 60).await);
    let src_macs = h.macs(src);
    assert_eq!(src_macs, ["BC:24:11:AA:BB:01"]);

    // Full clone with a new address.
    h.create_op::<ProxmoxVMClone>(
        "ProxmoxVMClone",
        "full",
        json!({"source": {"name": "src"}, "target": {"name": "copy", "overrides": {
            "networkDevices": [{"name": "net0", "ipv4Addresses": ["10.40.0.6/24"], "gateway": "10.40.0.1"}],
            "labels": {"role": "copy"}}}}),
    )
    .await
    .unwrap();
    let c = h.clone_phase("full", OperationPhase::Succeeded).await;
    let copy = h.wait_phase("copy", VmPhase::Running, 60).await;
    let copy_id = vmid_of(&copy);
    assert_eq!(c.status.unwrap().target_vmid, Some(i64::from(copy_id)));
    assert_ne!(copy_id, src);
    assert_eq!(copy.metadata.labels.as_ref().unwrap()[CLONED_BY_LABEL], "full");
    assert_eq!(copy.metadata.labels.as_ref().unwrap()["role"], "copy");
    assert_eq!(
        copy.spec.nics()[0].ipv4_addresses.as_ref().unwrap(),
        &["10.40.0.6/24"]
    );
    assert_eq!(st.vm(copy_id).unwrap().power, PowerState::Running);
    let copy_macs = h.macs(copy_id);
    assert_eq!(copy_macs.len(), 1);
    assert_ne!(copy_macs, src_macs, "a new MAC");
    let linked_base = |id: u32| st.with(|c| c.vms[&id].linked_base);
    assert_eq!(linked_base(copy_id), None, "a full copy");
    assert_eq!(
        copy.spec.template_id,
        Some(i32::try_from(src).unwrap()),
        "cloned from the source VM"
    );

    // Linked clone: of the source's template.
    h.create_op::<ProxmoxVMClone>(
        "ProxmoxVMClone",
        "linked",
        json!({"source": {"name": "src"}, "target": {"name": "thin"}, "linked": true}),
    )
    .await
    .unwrap();
    h.clone_phase("linked", OperationPhase::Succeeded).await;
    let thin_id = vmid_of(&h.wait_phase("thin", VmPhase::Running, 60).await);
    assert_eq!(linked_base(thin_id), Some(100));
    let thin_macs = h.macs(thin_id);
    assert!(thin_macs.len() == 1 && thin_macs != src_macs && thin_macs != copy_macs);

    // A clone of a snapshot: the VM as the snapshot has it.
    h.create_op::<ProxmoxVMSnapshot>("ProxmoxVMSnapshot", "s1", json!({"source": {"name": "src"}}))
        .await
        .unwrap();
    h.snap_phase("s1", OperationPhase::Succeeded).await;
    h.patch("src", json!({"spec": {"memoryMiB": 3072}}))
        .await
        .unwrap();
    h.wait("src", 60, "memory applied", |p| {
        p.status.as_ref().and_then(|s| s.applied_generation) == p.metadata.generation
    })
    .await;
    h.create_op::<ProxmoxVMClone>(
        "ProxmoxVMClone",
        "from-snap",
        json!({"source": {"kind": "ProxmoxVMSnapshot", "name": "s1"}, "target": {"name": "past"}}),
    )
    .await
    .unwrap();
    h.clone_phase("from-snap", OperationPhase::Succeeded).await;
    let past = h.wait_phase("past", VmPhase::Running, 60).await;
    let snap_name = h.snaps().get("s1").await.unwrap().status.unwrap().snapshot_name;
    assert_eq!(past.spec.snap_name, snap_name);
    assert_eq!(past.spec.memory_mib, Some(3072), "the source's spec as it is now");
    assert_eq!(h.macs(vmid_of(&past)).len(), 1);
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_clones_are_refused_and_leave_nothing() {
    let h = Harness::start_ops(pve_sim::SimConfig::default(), fast_settings()).await;
    h.unmanaged_vm(400, "legacy").await;
    h.create("legacy", json!({"adopt": true, "vmid": 400})).await;
    h.wait_phase("legacy", VmPhase::Running, 60).await;
    let before = h.sim.state().vmids();

    // A linked clone of an adopted VM: no template to link to.
    h.create_op::<ProxmoxVMClone>(
        "ProxmoxVMClone",
        "thin",
        json!({"source": {"name": "legacy"}, "target": {"name": "legacy2"}, "linked": true}),
    )
    .await
    .unwrap();
    let c = h
        .clone_phase("thin", OperationPhase::Failed)
        .await
        .status
        .unwrap();
    let (_, reason, message) = cond(c.conditions.as_ref(), READY_CONDITION).unwrap();
    assert_eq!(reason, "Invalid");
    assert!(
        message.contains("a linked clone needs a source cloned from a template"),
        "{message}"
    );
    assert!(h.pvms().get_opt("legacy2").await.unwrap().is_none());

    // Onto an existing object.
    h.create_op::<ProxmoxVMClone>(
        "ProxmoxVMClone",
        "onto",
        json!({"source": {"name": "legacy"}, "target": {"name": "legacy"}}),
    )
    .await
    .unwrap();
    let c = h
        .clone_phase("onto", OperationPhase::Failed)
        .await
        .status
        .unwrap();
    assert!(
        cond(c.conditions.as_ref(), READY_CONDITION)
            .unwrap()
            .2
            .contains("exists already")
    );

    // An unknown source waits, saying so.
    h.create_op::<ProxmoxVMClone>(
        "ProxmoxVMClone",
        "ghost",
        json!({"source": {"name": "nope"}, "target": {"name": "n2"}}),
    )
    .await
    .unwrap();
    h.wait_op(&h.clones(), "ghost", 30, "SourceNotFound", |c| {
        cond(
            c.status.as_ref().and_then(|s| s.conditions.as_ref()),
            READY_CONDITION,
        )
        .is_some_and(|c| c.1 == "SourceNotFound")
    })
    .await;
    // storage with a linked clone: refused by the API server.
    let e = h
        .create_op::<ProxmoxVMClone>(
            "ProxmoxVMClone",
            "bad",
            json!({"source": {"name": "legacy"}, "target": {"name": "x"}, "linked": true, "storage": "local-lvm"}),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("storage needs a full clone"), "{e}");
    assert_eq!(h.sim.state().vmids(), before, "nothing made in Proxmox");
    assert_eq!(
        h.sim
            .state()
            .request_count("POST /nodes/{node}/qemu/{vmid}/clone"),
        1,
        "only the test's own clone"
    );
    h.stop().await;
}
