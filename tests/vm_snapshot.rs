//! Snapshots and restores of a ProxmoxVirtualMachine against pve-sim, on the in-tree API server
//! or the real kube-apiserver (`KUBEBUILDER_ASSETS`): a snapshot without and one with memory →
//! `Succeeded` (the second on top of the first); the VM changed → restored to the memory
//! snapshot (config back, running, `SpecDrift` names what differs and nothing is re-applied) →
//! restored to the other (stopped by the rollback, started again by `runStrategy: Always`);
//! deleting a snapshot object deletes the Proxmox snapshot, `Retain` keeps it. Bad input gets a
//! clear condition or an admission error, and nothing is left in Proxmox; two snapshots of one VM
//! at once are taken one after the other.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod vm_support;

use capmox_api::vm::{
    OperationPhase, ProxmoxVMRestore, ProxmoxVMSnapshot, READY_CONDITION, RESTORED_ANNOTATION,
    SPEC_DRIFT_CONDITION, VmPhase,
};
use pve_sim::PowerState;
use serde_json::json;
use vm_support::ops::cond;
use vm_support::*;

fn spec() -> serde_json::Value {
    json!({
        "templateID": 100, "sourceNode": "pve1", "memoryMiB": 2048, "numCores": 2,
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0",
            "ipv4Addresses": ["10.30.0.5/24"], "gateway": "10.30.0.1"}]}
    })
}

async fn running_vm(h: &Harness, name: &str) -> u32 {
    h.create(name, spec()).await;
    let p = h.wait_phase(name, VmPhase::Running, 60).await;
    u32::try_from(p.status.unwrap().vmid.unwrap()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn snapshots_and_restores() {
    let h = Harness::start_ops(pve_sim::SimConfig::default(), fast_settings()).await;
    let st = h.sim.state();
    let vmid = running_vm(&h, "db").await;

    // A snapshot without memory, then one with memory on top of it.
    h.create_op::<ProxmoxVMSnapshot>(
        "ProxmoxVMSnapshot",
        "disk-only",
        json!({"source": {"name": "db"}, "description": "disks"}),
    )
    .await
    .unwrap();
    let first = h.snap_phase("disk-only", OperationPhase::Succeeded).await;
    let fs = first.status.clone().unwrap();
    let first_name = fs.snapshot_name.clone().unwrap();
    assert_eq!((fs.ready_to_use, fs.memory), (Some(true), Some(false)));
    assert!(fs.creation_time.is_some());
    assert_eq!(cond(fs.conditions.as_ref(), READY_CONDITION).unwrap().0, "True");
    h.create_op::<ProxmoxVMSnapshot>(
        "ProxmoxVMSnapshot",
        "with-ram",
        json!({"source": {"name": "db"}, "includeMemory": true}),
    )
    .await
    .unwrap();
    let second = h.snap_phase("with-ram", OperationPhase::Succeeded).await;
    let ss = second.status.clone().unwrap();
    let ram_name = ss.snapshot_name.clone().unwrap();
    assert_eq!(ss.memory, Some(true));
    assert_eq!(
        ss.parent.as_deref(),
        Some(first_name.as_str()),
        "the tree has parents"
    );
    assert_eq!(h.proxmox_snapshots(vmid), [first_name.clone(), ram_name.clone()]);
    let taken = st.with(|c| c.vms[&vmid].snapshots[1].clone());
    assert!(taken.vmstate && taken.description.is_empty());

    // The VM changes: more memory (applied live).
    h.patch("db", json!({"spec": {"memoryMiB": 4096}})).await.unwrap();
    let applied = h
        .wait("db", 60, "memory applied", |p| {
            p.status.as_ref().and_then(|s| s.applied_generation) == p.metadata.generation
        })
        .await;
    assert!(applied.metadata.generation.unwrap() > 1);
    assert_eq!(h.proxmox_config(vmid, "memory").as_deref(), Some("4096"));

    // Restored to the memory snapshot: config back, running, the spec not re-applied.
    h.create_op::<ProxmoxVMRestore>(
        "ProxmoxVMRestore",
        "back",
        json!({"target": {"name": "db"}, "snapshotName": "with-ram"}),
    )
    .await
    .unwrap();
    let r = h.restore_done("back").await;
    let rs = r.status.clone().unwrap();
    assert_eq!(rs.complete, Some(true), "{rs:?}");
    assert!(rs.restore_time.is_some());
    let uid = r.metadata.uid.clone().unwrap();
    let p = h
        .wait("db", 60, "the restore compared", |p| {
            p.status.as_ref().and_then(|s| s.restored.as_ref()) == Some(&uid)
        })
        .await;
    assert_eq!(p.metadata.annotations.unwrap()[RESTORED_ANNOTATION], uid);
    let (status, reason, message) = cond(
        p.status.as_ref().unwrap().conditions.as_ref(),
        SPEC_DRIFT_CONDITION,
    )
    .unwrap();
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "RestoredState"),
        "{message}"
    );
    assert!(message.contains("memory"), "{message}");
    assert_eq!(p.status.unwrap().spec_drift.unwrap(), ["memory"]);
    assert_eq!(
        h.proxmox_config(vmid, "memory").as_deref(),
        Some("2048"),
        "the snapshot's config"
    );
    assert_eq!(
        h.proxmox_config(vmid, "parent").as_deref(),
        Some(ram_name.as_str())
    );
    assert_eq!(
        st.vm(vmid).unwrap().power,
        PowerState::Running,
        "resumed with its memory"
    );

    // Restored to the snapshot without memory: stopped by the rollback, started again (Always).
    h.create_op::<ProxmoxVMRestore>(
        "ProxmoxVMRestore",
        "disks",
        json!({"target": {"name": "db"}, "snapshotName": "disk-only"}),
    )
    .await
    .unwrap();
    assert_eq!(h.restore_done("disks").await.status.unwrap().complete, Some(true));
    assert_eq!(
        st.vm(vmid).unwrap().power,
        PowerState::Running,
        "started by the rollback"
    );
    assert_eq!(
        h.proxmox_config(vmid, "parent").as_deref(),
        Some(first_name.as_str())
    );
    let rollbacks = st.request_count("POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback");
    assert_eq!(rollbacks, 2, "one rollback per restore");
    // A spec change applies the spec again and clears the drift.
    h.patch("db", json!({"spec": {"numCores": 3}})).await.unwrap();
    let p = h
        .wait("db", 60, "drift cleared", |p| {
            p.status
                .as_ref()
                .is_some_and(|s| s.spec_drift.is_none() && s.applied_generation == p.metadata.generation)
        })
        .await;
    assert_eq!(
        cond(p.status.unwrap().conditions.as_ref(), SPEC_DRIFT_CONDITION)
            .unwrap()
            .0,
        "False"
    );
    assert_eq!(h.proxmox_config(vmid, "memory").as_deref(), Some("4096"));

    // Deleting the objects: Delete removes the Proxmox snapshot, Retain keeps it.
    h.patch_snap("with-ram", json!({"spec": {"deletionPolicy": "Retain"}}))
        .await;
    h.snaps().delete("disk-only", &Default::default()).await.unwrap();
    h.snaps().delete("with-ram", &Default::default()).await.unwrap();
    for n in ["disk-only", "with-ram"] {
        let api = h.snaps();
        testenv::wait::wait_for(60, &format!("{n} gone"), || async {
            api.get_opt(n).await.ok().flatten().is_none().then_some(())
        })
        .await;
    }
    assert_eq!(
        h.proxmox_snapshots(vmid),
        std::slice::from_ref(&ram_name),
        "Retain keeps its snapshot"
    );
    let kept = st.with(|c| c.vms[&vmid].snapshots[0].parent.clone());
    assert_eq!(kept, None, "its parent was deleted: the tree is relinked");
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn bad_snapshots_and_restores_are_refused_clearly() {
    let h = Harness::start_ops(pve_sim::SimConfig::default(), fast_settings()).await;
    let vmid = running_vm(&h, "app").await;
    let other = running_vm(&h, "other").await;

    // Unknown source: waits, saying so; nothing in Proxmox.
    h.create_op::<ProxmoxVMSnapshot>("ProxmoxVMSnapshot", "ghost", json!({"source": {"name": "nope"}}))
        .await
        .unwrap();
    let s = h
        .wait_op(&h.snaps(), "ghost", 30, "SourceNotFound", |s| {
            cond(
                s.status.as_ref().and_then(|s| s.conditions.as_ref()),
                READY_CONDITION,
            )
            .is_some_and(|c| c.1 == "SourceNotFound")
        })
        .await;
    let status = s.status.unwrap();
    assert_eq!(status.phase, Some(OperationPhase::Pending));
    assert!(
        cond(status.conditions.as_ref(), READY_CONDITION)
            .unwrap()
            .2
            .contains("vms/nope not found")
    );

    // includeMemory of a stopped VM: Failed with the reason; no snapshot taken.
    h.patch("other", json!({"spec": {"runStrategy": "Halted"}}))
        .await
        .unwrap();
    h.wait_phase("other", VmPhase::Stopped, 60).await;
    h.create_op::<ProxmoxVMSnapshot>(
        "ProxmoxVMSnapshot",
        "ram-of-stopped",
        json!({"source": {"name": "other"}, "includeMemory": true}),
    )
    .await
    .unwrap();
    let s = h
        .snap_phase("ram-of-stopped", OperationPhase::Failed)
        .await
        .status
        .unwrap();
    let (_, reason, message) = cond(s.conditions.as_ref(), READY_CONDITION).unwrap();
    assert_eq!(reason, "VMNotRunning");
    assert!(message.contains("includeMemory needs a running VM"), "{message}");
    assert!(h.proxmox_snapshots(other).is_empty());

    // A restore of another VM's snapshot: failed, nothing rolled back.
    h.create_op::<ProxmoxVMSnapshot>(
        "ProxmoxVMSnapshot",
        "of-other",
        json!({"source": {"name": "other"}}),
    )
    .await
    .unwrap();
    h.snap_phase("of-other", OperationPhase::Succeeded).await;
    h.create_op::<ProxmoxVMRestore>(
        "ProxmoxVMRestore",
        "wrong",
        json!({"target": {"name": "app"}, "snapshotName": "of-other"}),
    )
    .await
    .unwrap();
    let r = h.restore_done("wrong").await.status.unwrap();
    assert_eq!(r.failed, Some(true));
    let (_, reason, message) = cond(r.conditions.as_ref(), READY_CONDITION).unwrap();
    assert_eq!(reason, "Invalid");
    assert!(
        message.contains("is a snapshot of ProxmoxVirtualMachine other, not of app"),
        "{message}"
    );
    let st = h.sim.state();
    assert_eq!(
        st.request_count("POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback"),
        0
    );
    assert!(
        h.proxmox_snapshots(vmid).is_empty(),
        "nothing rolled back or taken"
    );

    // Two snapshots of one VM at once: taken one after the other (the second on top of the first).
    for n in ["one", "two"] {
        h.create_op::<ProxmoxVMSnapshot>("ProxmoxVMSnapshot", n, json!({"source": {"name": "app"}}))
            .await
            .unwrap();
    }
    let one = h
        .snap_phase("one", OperationPhase::Succeeded)
        .await
        .status
        .unwrap();
    let two = h
        .snap_phase("two", OperationPhase::Succeeded)
        .await
        .status
        .unwrap();
    let mut parents = [one.parent.clone(), two.parent.clone()];
    parents.sort();
    let first = if one.parent.is_none() { &one } else { &two };
    assert_eq!(
        parents,
        [None, first.snapshot_name.clone()],
        "one on top of the other"
    );
    assert_eq!(h.proxmox_snapshots(vmid).len(), 2);

    // The API server refuses a changed source and a restore's changed spec.
    let e = h
        .patch_snap_err("of-other", json!({"spec": {"source": {"name": "app"}}}))
        .await;
    assert!(e.contains("source cannot be changed"), "{e}");
    let e = h
        .restores()
        .patch(
            "wrong",
            &Default::default(),
            &kube::api::Patch::Merge(json!({"spec": {"snapshotName": "x"}})),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(e.contains("spec cannot be changed"), "{e}");
    h.stop().await;
}

impl Harness {
    async fn patch_snap(&self, name: &str, patch: serde_json::Value) {
        self.snaps()
            .patch(name, &Default::default(), &kube::api::Patch::Merge(&patch))
            .await
            .unwrap();
    }

    async fn patch_snap_err(&self, name: &str, patch: serde_json::Value) -> String {
        self.snaps()
            .patch(name, &Default::default(), &kube::api::Patch::Merge(&patch))
            .await
            .unwrap_err()
            .to_string()
    }
}
