//! One ProxmoxVirtualMachine through its life against pve-sim, on the in-tree API server or the
//! real kube-apiserver (`KUBEBUILDER_ASSETS`): created → `Running` with VMID, node and the
//! guest's addresses; `runStrategy: Halted` → `Stopped` (pve-sim shows it stopped); `Always` →
//! `Running`; `paused` → `Paused` → resumed; memory and cores raised → memory live (the VM has
//! memory hot-plug), cores pending (`RestartRequired` names them) → applied by a restart through
//! the `restartedAt` annotation; the boot disk grown online; a shrink refused by the API server;
//! an unmanaged VM refused at its VMID, then adopted; `Retain` leaves it untagged; `Delete`
//! leaves nothing.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod vm_support;

use capmox_api::vm::{
    RESTART_REQUIRED_CONDITION, RESTARTED_AT_ANNOTATION, VM_CREATED_CONDITION, VmPhase, owner_tag,
};
use pve_sim::PowerState;
use serde_json::json;
use vm_support::*;

fn has_ips(p: &capmox_api::vm::ProxmoxVirtualMachine) -> bool {
    p.status
        .as_ref()
        .and_then(|s| s.ip_addresses.as_ref())
        .is_some_and(|i| !i.is_empty())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn one_vm_through_its_life() {
    let mut h = Harness::start().await;
    let st = h.sim.state();
    h.create(
        "web",
        json!({
            "templateID": 100, "sourceNode": "pve1",
            "memoryMiB": 2048, "numCores": 2,
            "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 25}},
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0",
                "ipv4Addresses": ["10.10.0.5/24"], "gateway": "10.10.0.1", "dnsServers": ["10.10.0.1"]}]},
            "cloudInit": {"userData": "#cloud-config\nruncmd:\n  - echo hello\n"},
            "tags": ["web"]
        }),
    )
    .await;
    // Created and running, with VMID, node and the guest's address.
    let p = h
        .wait("web", 60, "Running with addresses", |p| {
            p.status.as_ref().and_then(|s| s.phase) == Some(VmPhase::Running) && has_ips(p)
        })
        .await;
    let s = p.status.clone().unwrap();
    let vmid = u32::try_from(s.vmid.unwrap()).unwrap();
    assert_eq!(s.node.as_deref(), Some("pve1"));
    assert_eq!(s.ip_addresses.clone().unwrap(), ["10.10.0.5"]);
    assert_eq!(
        s.console_url.as_deref().unwrap(),
        format!(
            "https://127.0.0.1:{}/?console=kvm&novnc=1&vmid={vmid}&node=pve1",
            url::Url::parse(&h.sim.url()).unwrap().port().unwrap()
        )
    );
    assert_eq!(condition(&p, VM_CREATED_CONDITION).unwrap().0, "True");
    let vm = st.vm(vmid).unwrap();
    assert_eq!(vm.power, PowerState::Running);
    assert_eq!(vm.config.get("name").map(String::as_str), Some("web"));
    assert!(
        vm.config["tags"].contains(&owner_tag(NS, "web")),
        "{:?}",
        vm.config
    );
    assert_eq!(vm.config.get("numa").map(String::as_str), Some("1"));

    // Halted: shut down, and pve-sim shows it stopped.
    h.patch("web", json!({"spec": {"runStrategy": "Halted"}}))
        .await
        .unwrap();
    h.wait_phase("web", VmPhase::Stopped, 60).await;
    assert_eq!(st.vm(vmid).unwrap().power, PowerState::Stopped);
    // Always: running again.
    h.patch("web", json!({"spec": {"runStrategy": "Always"}}))
        .await
        .unwrap();
    h.wait_phase("web", VmPhase::Running, 60).await;
    assert_eq!(st.vm(vmid).unwrap().power, PowerState::Running);
    // Paused and resumed.
    h.patch("web", json!({"spec": {"paused": true}})).await.unwrap();
    h.wait_phase("web", VmPhase::Paused, 60).await;
    assert_eq!(st.vm(vmid).unwrap().power, PowerState::Paused);
    h.patch("web", json!({"spec": {"paused": false}})).await.unwrap();
    h.wait_phase("web", VmPhase::Running, 60).await;
    assert_eq!(st.vm(vmid).unwrap().power, PowerState::Running);

    // Memory and cores raised: memory is hot-plugged, cores wait for a restart.
    h.patch("web", json!({"spec": {"memoryMiB": 4096, "numCores": 4}}))
        .await
        .unwrap();
    let p = h
        .wait("web", 60, "RestartRequired", |p| {
            condition(p, RESTART_REQUIRED_CONDITION).is_some_and(|(s, _)| s == "True")
        })
        .await;
    let (_, message) = condition(&p, RESTART_REQUIRED_CONDITION).unwrap();
    assert!(
        message.contains("cores") && !message.contains("memory"),
        "{message}"
    );
    let vm = st.vm(vmid).unwrap();
    assert_eq!(vm.config["memory"], "4096", "memory applied live");
    assert_eq!(vm.config["cores"], "2", "cores pending");
    // A restart through the annotation applies them.
    let token = "2026-06-01T10:00:00Z";
    h.patch(
        "web",
        json!({"metadata": {"annotations": {RESTARTED_AT_ANNOTATION: token}}}),
    )
    .await
    .unwrap();
    h.wait("web", 60, "the restart done and nothing pending", |p| {
        let s = p.status.as_ref();
        s.and_then(|s| s.restarted_at.as_deref()) == Some(token)
            && condition(p, RESTART_REQUIRED_CONDITION).is_some_and(|(s, _)| s == "False")
            && s.and_then(|s| s.phase) == Some(VmPhase::Running)
    })
    .await;
    assert_eq!(st.vm(vmid).unwrap().config["cores"], "4");
    let tasks = h.proxmox().vm_tasks("pve1", vmid, 20).await.unwrap();
    assert!(
        tasks.iter().any(|t| t.task_type == "qmreboot"),
        "a guest reboot through Proxmox"
    );

    // The boot disk grows online.
    h.patch(
        "web",
        json!({"spec": {"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 30}}}}),
    )
    .await
    .unwrap();
    testenv::wait::wait_for(60, "scsi0 at 30G", || async {
        st.vm(vmid)
            .is_some_and(|v| v.config["scsi0"].contains("size=30G"))
            .then_some(())
    })
    .await;
    assert_eq!(st.vm(vmid).unwrap().power, PowerState::Running, "grown online");
    // A shrink is refused by the API server; nothing changes.
    let e = h
        .patch(
            "web",
            json!({"spec": {"disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}}}}),
        )
        .await
        .unwrap_err();
    let kube::Error::Api(s) = e else {
        panic!("expected an API error, got {e}")
    };
    assert_eq!(s.code, 422, "{s:?}");
    assert!(s.message.contains("disks cannot shrink"), "{}", s.message);

    // An unmanaged VM: its VMID is refused without adopt, taken over with it.
    h.unmanaged_vm(900, "legacy").await;
    h.create(
        "legacy",
        json!({"vmid": 900, "templateID": 100, "sourceNode": "pve1"}),
    )
    .await;
    let p = h
        .wait("legacy", 60, "the VMID refused", |p| {
            condition(p, "Ready").is_some_and(|(_, m)| m.contains("VM 900 already exists"))
        })
        .await;
    assert_eq!(p.status.unwrap().phase, Some(VmPhase::Pending));
    h.patch("legacy", json!({"spec": {"adopt": true}})).await.unwrap();
    let p = h
        .wait("legacy", 60, "adopted and running", |p| {
            p.status.as_ref().and_then(|s| s.phase) == Some(VmPhase::Running)
                && p.status.as_ref().and_then(|s| s.vmid) == Some(900)
        })
        .await;
    assert_eq!(condition(&p, VM_CREATED_CONDITION).unwrap().0, "True");
    testenv::wait::wait_for(60, "VM 900 tagged", || async {
        st.vm(900)
            .is_some_and(|v| {
                v.config
                    .get("tags")
                    .is_some_and(|t| t.contains(&owner_tag(NS, "legacy")))
            })
            .then_some(())
    })
    .await;
    assert_eq!(
        st.non_template_vmids().len(),
        2,
        "nothing cloned for the adoption"
    );
    // Retain: the object goes, the VM stays, untagged.
    h.patch("legacy", json!({"spec": {"deletionPolicy": "Retain"}}))
        .await
        .unwrap();
    h.pvms().delete("legacy", &Default::default()).await.unwrap();
    h.wait_gone("legacy", 60).await;
    let legacy = st.vm(900).expect("a retained VM stays");
    assert_eq!(legacy.power, PowerState::Running);
    assert!(
        !legacy.config.get("tags").is_some_and(|t| t.contains("capmox-vm")),
        "{:?}",
        legacy.config.get("tags")
    );

    // Delete: nothing of the VM is left.
    h.pvms().delete("web", &Default::default()).await.unwrap();
    h.wait_gone("web", 60).await;
    assert!(st.vm(vmid).is_none());
    assert_eq!(st.non_template_vmids(), [900], "only the retained VM");
    assert!(
        st.iso_volume_ids("pve1", "local")
            .iter()
            .all(|v| !v.contains(&vmid.to_string())),
        "the NoCloud ISO is gone"
    );
    assert_eq!(st.running_tasks(), 0);
    h.kill().await;
    h.stop().await;
}
