//! Storage upload/content/delete and guest-agent calls against pve-sim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "proxmox_common.rs"]
mod common;

use bytes::Bytes;
use capmox::proxmox::{AgentExecRequest, Client, CloneRequest, ConfigUpdate, Error, ErrorClass};
use common::*;

async fn running_clone(client: &Client, name: &str) -> u32 {
    let newid = client.next_id().await.unwrap();
    let mut req = CloneRequest::new(newid);
    req.name = Some(name.into());
    let upid = client.clone_vm("pve1", 100, &req).await.unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let upid = client.start_vm("pve1", newid, &Default::default()).await.unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    newid
}

#[tokio::test]
async fn iso_upload_list_get_delete() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
    let upid = client
        .upload_iso("pve1", "local", "user-data-9999.iso", Bytes::from(data.clone()))
        .await
        .unwrap();
    assert_eq!(upid.task_type, "imgcopy");
    assert_eq!(upid.id, "");
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();

    let volid = "local:iso/user-data-9999.iso";
    assert_eq!(
        sim.state().volume_bytes("pve1", volid).as_deref(),
        Some(data.as_slice())
    );
    let content = client
        .storage_content("pve1", "local", Some("iso"))
        .await
        .unwrap();
    let entry = content
        .iter()
        .find(|c| c.volid == volid)
        .expect("uploaded ISO listed");
    assert_eq!(entry.size, Some(data.len() as u64));
    let info = client.storage_volume("pve1", "local", volid).await.unwrap();
    assert_eq!(info.size, Some(data.len() as u64));

    if let Some(upid) = client
        .delete_storage_volume("pve1", "local", volid)
        .await
        .unwrap()
    {
        assert_eq!(upid.task_type, "imgdel");
        if upid.id.contains(':') {
            // pve-sim puts the volid into the imgdel UPID's id (PVE's UPID syntax forbids ':'),
            // and then cannot parse that UPID on the status endpoint; wait on the state instead.
            let deadline = std::time::Instant::now() + TASK_TIMEOUT;
            while sim.state().volume_bytes("pve1", volid).is_some() && std::time::Instant::now() < deadline {
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
        } else {
            client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
        }
    }
    assert!(sim.state().volume_bytes("pve1", volid).is_none());
    let err = client.storage_volume("pve1", "local", volid).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn upload_with_wrong_extension_is_parameter_error() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let err = client
        .upload_iso("pve1", "local", "notes.txt", Bytes::from_static(b"hello"))
        .await
        .unwrap_err();
    match &err {
        Error::ParameterVerification { errors, .. } => {
            assert_eq!(
                errors.get("filename").map(String::as_str),
                Some("wrong file extension"),
                "{errors:?}"
            );
        }
        other => panic!("unexpected {other:?}"),
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn ticket_client_can_upload() {
    let sim = start_sim().await;
    let client = password_client(&sim);
    let upid = client
        .upload_iso("pve2", "local", "ticket.iso", Bytes::from_static(b"iso-bytes"))
        .await
        .unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    assert_eq!(
        sim.state()
            .volume_bytes("pve2", "local:iso/ticket.iso")
            .as_deref(),
        Some(&b"iso-bytes"[..])
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn agent_calls_on_running_vm() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let vmid = running_clone(&client, "agent").await;

    let os = client.agent_os_info("pve1", vmid).await.unwrap();
    assert!(os.id.is_some() || os.name.is_some(), "{os:?}");

    let ifaces = client.agent_network_interfaces("pve1", vmid).await.unwrap();
    assert!(ifaces.iter().any(|i| i.name == "lo"), "{ifaces:?}");

    let pid = client
        .agent_exec("pve1", vmid, &AgentExecRequest::new(&["cloud-init", "status"]))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + TASK_TIMEOUT;
    let status = loop {
        let st = client.agent_exec_status("pve1", vmid, pid).await.unwrap();
        if st.exited || std::time::Instant::now() > deadline {
            break st;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    assert!(status.exited);
    assert_eq!(status.exitcode, Some(0));
    assert!(
        status.out_data.as_deref().is_some_and(|o| o.contains("done")),
        "{status:?}"
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn agent_error_classes() {
    let sim = start_sim().await;
    let client = token_client(&sim);

    // Stopped VM: "VM N is not running".
    let newid = client.next_id().await.unwrap();
    let upid = client
        .clone_vm("pve1", 100, &CloneRequest::new(newid))
        .await
        .unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let err = client.agent_os_info("pve1", newid).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::WrongState, "{err:?}");
    assert_eq!(err.message(), format!("VM {newid} is not running"));
    assert!(err.is_retryable());

    // Agent not configured (checked before the power state; applied directly on a stopped VM).
    let upid = client
        .update_vm_config("pve1", newid, &ConfigUpdate::new().delete(&["agent"]))
        .await
        .unwrap();
    if let Some(upid) = upid {
        client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    }
    let err = client.agent_os_info("pve1", newid).await.unwrap_err();
    assert!(matches!(err, Error::AgentNotConfigured { .. }), "{err:?}");
    assert!(!err.is_retryable());

    // Agent not up yet on a freshly started VM.
    sim.state().set_latency(pve_sim::LatencySpec {
        agent_ready_ms: Some(600_000),
        ..Default::default()
    });
    let other = client.next_id().await.unwrap();
    let upid = client
        .clone_vm("pve1", 100, &CloneRequest::new(other))
        .await
        .unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let upid = client.start_vm("pve1", other, &Default::default()).await.unwrap();
    client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let err = client.agent_os_info("pve1", other).await.unwrap_err();
    assert!(matches!(err, Error::AgentNotReady { .. }), "{err:?}");
    assert!(err.is_retryable());

    // Missing VM.
    let err = client.agent_network_interfaces("pve1", 4242).await.unwrap_err();
    assert!(err.is_not_found(), "{err:?}");
    sim.shutdown().await;
}
