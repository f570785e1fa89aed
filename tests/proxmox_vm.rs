//! VM lifecycle against pve-sim: clone, config, resize, power, snapshots, delete, and the
//! error classes PVE reports on the call or inside the task.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "proxmox_common.rs"]
mod common;

use capmox::proxmox::{
    Client, CloneRequest, ConfigUpdate, CreateSnapshotRequest, DeleteVmOptions, Error, ErrorClass, NetDevice,
    RebootRequest, ResizeRequest, ShutdownRequest, StopRequest, Upid,
};
use common::*;

async fn clone_from_template(client: &Client, name: &str) -> u32 {
    let newid = client.next_id().await.unwrap();
    let mut req = CloneRequest::new(newid);
    req.name = Some(name.into());
    let upid = client.clone_vm("pve1", 100, &req).await.unwrap();
    assert_eq!(upid.node, "pve1");
    assert_eq!(upid.task_type, "qmclone");
    assert_eq!(upid.id, "100", "qmclone's id is the source VMID");
    let st = client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    assert!(st.is_success(), "{st:?}");
    newid
}

#[tokio::test]
async fn clone_gives_new_identity() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let tpl = client.vm_config("pve1", 100).await.unwrap();
    assert!(tpl.template);
    let tpl_uuid = tpl.smbios_uuid.clone().expect("template has smbios uuid");

    let vmid = clone_from_template(&client, "capi-md-0").await;
    let cfg = client.vm_config("pve1", vmid).await.unwrap();
    assert_eq!(cfg.name.as_deref(), Some("capi-md-0"));
    assert!(!cfg.template);
    let uuid = cfg.smbios_uuid.clone().expect("clone has smbios uuid");
    assert_ne!(uuid, tpl_uuid);
    assert_ne!(cfg.nets[&0].mac, tpl.nets[&0].mac);
    assert_eq!(cfg.nets[&0].bridge.as_deref(), Some("vmbr0"));
    assert!(cfg.disks.contains_key("scsi0"));
    assert!(cfg.digest.is_some());
    assert!(cfg.lock.is_none());

    let st = client.vm_status("pve1", vmid).await.unwrap();
    assert_eq!(st.status, "stopped");
    assert!(!st.is_running());
    sim.shutdown().await;
}

#[tokio::test]
async fn config_update_resize_and_readback() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let vmid = clone_from_template(&client, "capi-cp-0").await;

    let update = ConfigUpdate::new()
        .cores(4)
        .sockets(2)
        .memory_mib(8192)
        .description("managed by capmox-rs")
        .net(
            0,
            &NetDevice {
                tag: Some(100),
                mtu: Some(1450),
                ..NetDevice::new("virtio", "vmbr0")
            },
        )
        .tags(&["capmox", "cluster-a"]);
    if let Some(upid) = client.update_vm_config("pve1", vmid, &update).await.unwrap() {
        client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    }
    let cfg = client.vm_config("pve1", vmid).await.unwrap();
    assert_eq!(
        (cfg.cores, cfg.sockets, cfg.memory),
        (Some(4), Some(2), Some(8192))
    );
    assert_eq!(cfg.description.as_deref(), Some("managed by capmox-rs"));
    let net = &cfg.nets[&0];
    assert_eq!((net.tag, net.mtu), (Some(100), Some(1450)));
    assert!(net.mac.is_some(), "PVE generates a MAC");
    assert!(cfg.tags.contains(&"cluster-a".to_owned()) && cfg.tags.contains(&"capmox".to_owned()));

    client
        .update_vm_config_sync("pve1", vmid, &ConfigUpdate::new().ide0("none,media=cdrom"))
        .await
        .unwrap();
    let cfg = client.vm_config("pve1", vmid).await.unwrap();
    assert!(cfg.ide0.as_deref().is_some_and(|v| v.contains("media=cdrom")));

    if let Some(upid) = client
        .resize_disk("pve1", vmid, &ResizeRequest::to_gib("scsi0", 32))
        .await
        .unwrap()
    {
        client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    }
    let cfg = client.vm_config("pve1", vmid).await.unwrap();
    assert_eq!(cfg.disks["scsi0"].size_bytes(), Some(32 << 30));

    // Shrinking fails inside the task.
    let upid = client
        .resize_disk("pve1", vmid, &ResizeRequest::to_gib("scsi0", 8))
        .await
        .unwrap()
        .expect("resize task");
    let err = client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap_err();
    match err {
        Error::TaskFailed {
            exitstatus,
            task_type,
            ..
        } => {
            assert_eq!(task_type, "resize");
            assert!(
                exitstatus.contains("shrinking disks is not supported"),
                "{exitstatus}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn power_cycle_and_state_errors() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let vmid = clone_from_template(&client, "power").await;

    // Reboot of a stopped VM fails on the call.
    let err = client
        .reboot_vm("pve1", vmid, &RebootRequest::default())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::WrongState, "{err:?}");
    assert!(err.message().contains("not running"));
    // Stop of a stopped VM ends OK.
    let upid = client
        .stop_vm("pve1", vmid, &StopRequest::default())
        .await
        .unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();

    let upid = client.start_vm("pve1", vmid, &Default::default()).await.unwrap();
    assert_eq!(upid.task_type, "qmstart");
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    assert!(client.vm_status("pve1", vmid).await.unwrap().is_running());

    // Start of a running VM fails inside the task.
    let upid = client.start_vm("pve1", vmid, &Default::default()).await.unwrap();
    let err = client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap_err();
    match &err {
        Error::TaskFailed { exitstatus, .. } => {
            assert!(exitstatus.contains("already running"), "{exitstatus}")
        }
        other => panic!("unexpected {other:?}"),
    }
    assert!(!err.is_retryable());

    let upid = client
        .reboot_vm("pve1", vmid, &RebootRequest::default())
        .await
        .unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let upid = client.reset_vm("pve1", vmid).await.unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let upid = client.suspend_vm("pve1", vmid).await.unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    assert!(client.vm_status("pve1", vmid).await.unwrap().is_paused());
    let upid = client.resume_vm("pve1", vmid).await.unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    assert!(!client.vm_status("pve1", vmid).await.unwrap().is_paused());

    // Deleting a running VM fails on the call.
    let err = client
        .delete_vm("pve1", vmid, &DeleteVmOptions::default())
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::WrongState, "{err:?}");

    let upid = client
        .shutdown_vm(
            "pve1",
            vmid,
            &ShutdownRequest {
                timeout: Some(30),
                force_stop: Some(true),
            },
        )
        .await
        .unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    assert!(!client.vm_status("pve1", vmid).await.unwrap().is_running());

    let opts = DeleteVmOptions {
        purge: Some(true),
        destroy_unreferenced_disks: Some(true),
    };
    let upid = client.delete_vm("pve1", vmid, &opts).await.unwrap();
    assert_eq!(upid.task_type, "qmdestroy");
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    assert!(client.is_vmid_free(vmid).await.unwrap());
    let err = client.vm_config("pve1", vmid).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn not_found_variants() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    // "Configuration file ... does not exist"
    let err = client.vm_config("pve1", 4242).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    assert!(!err.is_retryable());
    let err = client.vm_status("pve1", 4242).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    // A VM on another node looks missing.
    let err = client.vm_config("pve2", 100).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    // "unable to find configuration file" (clone source, reboot).
    let err = client
        .clone_vm("pve1", 4242, &CloneRequest::new(4243))
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    let err = client
        .reboot_vm("pve1", 4242, &RebootRequest::default())
        .await
        .unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    // Unknown task.
    let fake = Upid::parse("UPID:pve1:00001234:00005678:6740A1B2:qmstart:100:root@pam:").unwrap();
    let err = client.task_status(&fake).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn clone_errors_on_the_call() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    // newid below 100: parameter verification with the field kept.
    let err = client
        .clone_vm("pve1", 100, &CloneRequest::new(5))
        .await
        .unwrap_err();
    match &err {
        Error::ParameterVerification { errors, .. } => assert!(errors.contains_key("newid"), "{errors:?}"),
        other => panic!("unexpected {other:?}"),
    }
    // newid taken on this node.
    let vmid = clone_from_template(&client, "taken").await;
    let err = client
        .clone_vm("pve1", 100, &CloneRequest::new(vmid))
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::AlreadyExists, "{err:?}");
    // Linked clone of a non-template.
    let mut req = CloneRequest::new(client.next_id().await.unwrap());
    req.full = Some(false);
    let err = client.clone_vm("pve1", vmid, &req).await.unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 500, .. }), "{err:?}");
    assert!(!err.is_retryable());
    assert!(
        err.message().contains("Linked clone feature is not supported"),
        "{err:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn locked_vm_rejects_config_update() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let vmid = clone_from_template(&client, "locked").await;
    assert!(sim.state().set_config(vmid, "lock", "clone"));
    let cfg = client.vm_config("pve1", vmid).await.unwrap();
    assert_eq!(cfg.lock.as_deref(), Some("clone"));
    let err = client
        .update_vm_config("pve1", vmid, &ConfigUpdate::new().cores(2))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err:?}");
    assert!(err.is_retryable());
    assert!(err.message().contains("VM is locked (clone)"));
    // Start fails inside the task with the lock message, classified the same way.
    let upid = client.start_vm("pve1", vmid, &Default::default()).await.unwrap();
    match client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap_err() {
        Error::TaskFailed { exitstatus, .. } => {
            assert_eq!(
                capmox::proxmox::error::classify_task_exitstatus(&exitstatus),
                Some(ErrorClass::Locked),
                "{exitstatus}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn stale_digest_is_rejected() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let vmid = clone_from_template(&client, "digest").await;
    let err = client
        .update_vm_config(
            "pve1",
            vmid,
            &ConfigUpdate::new()
                .cores(2)
                .digest("0000000000000000000000000000000000000000"),
        )
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::Locked, "{err:?}");
    assert!(err.is_retryable());
    assert!(err.message().contains("checksum mismatch"), "{err:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn snapshots_and_task_log() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let vmid = clone_from_template(&client, "snap").await;
    let before = client.snapshots("pve1", vmid).await.unwrap();
    assert!(before.iter().any(|s| s.is_current()));

    let req = CreateSnapshotRequest {
        snapname: "pre-upgrade".into(),
        description: Some("before".into()),
        vmstate: Some(false),
    };
    let upid = client.create_snapshot("pve1", vmid, &req).await.unwrap();
    assert_eq!(upid.task_type, "qmsnapshot");
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let log = client.task_log(&upid, 0, 50).await.unwrap();
    assert!(log.last().is_some_and(|l| l.t == "TASK OK"), "{log:?}");
    assert_eq!(log.first().map(|l| l.n), Some(1));

    let snaps = client.snapshots("pve1", vmid).await.unwrap();
    assert!(snaps.iter().any(|s| s.name == "pre-upgrade"));

    let upid = client
        .delete_snapshot("pve1", vmid, "pre-upgrade", false)
        .await
        .unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let snaps = client.snapshots("pve1", vmid).await.unwrap();
    assert!(!snaps.iter().any(|s| s.name == "pre-upgrade"));
    sim.shutdown().await;
}

#[tokio::test]
async fn task_wait_times_out() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut scenario = pve_sim::Scenario::default();
    scenario.latency.tasks.insert("qmclone-linked".into(), 60_000);
    scenario.latency.tasks.insert("qmclone-full".into(), 60_000);
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig {
        scenario,
        ..Default::default()
    })
    .await
    .unwrap();
    let client = token_client(&sim);
    let newid = client.next_id().await.unwrap();
    let upid = client
        .clone_vm("pve1", 100, &CloneRequest::new(newid))
        .await
        .unwrap();
    let err = client
        .wait_for_task(&upid, std::time::Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::TaskTimeout { .. }), "{err:?}");
    assert!(err.is_retryable());
    let st = client.task_status(&upid).await.unwrap();
    assert_eq!(st.status, "running");
    // While the clone runs, the new VM exists with lock "clone".
    let cfg = client.vm_config("pve1", newid).await.unwrap();
    assert_eq!(cfg.lock.as_deref(), Some("clone"));
    assert!(!client.is_vmid_free(newid).await.unwrap());
    sim.shutdown().await;
}

#[tokio::test]
async fn ha_managed_vm_needs_purge() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let vmid = clone_from_template(&client, "ha").await;
    let ha = capmox::proxmox::ApiPath::root().lit("cluster/ha/resources");
    client
        .request_json(
            http::Method::POST,
            &ha,
            &[],
            Some(serde_json::json!({ "sid": format!("vm:{vmid}"), "state": "stopped" })),
        )
        .await
        .unwrap();
    assert!(client.vm_status("pve1", vmid).await.unwrap().ha.managed);
    let err = client
        .delete_vm("pve1", vmid, &DeleteVmOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 500, .. }), "{err:?}");
    assert!(err.message().contains("purge parameter not set"), "{err:?}");
    let upid = client
        .delete_vm(
            "pve1",
            vmid,
            &DeleteVmOptions {
                purge: Some(true),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    assert!(client.is_vmid_free(vmid).await.unwrap());
    sim.shutdown().await;
}
