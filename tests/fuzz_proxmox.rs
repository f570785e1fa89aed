//! Fuzzing the Proxmox client with hostile answers: a stub server answers every call of every
//! endpoint with generated JSON (Proxmox field names with every JSON type in every place, missing
//! keys, huge numbers, lists where objects belong), raw bytes and random statuses. Every call
//! must return `Ok` or a typed error with a message — never panic or hang. Also the pure parsers
//! of outside input: property strings (`netN`, disks, `smbios1`, sizes, tags), UPIDs and task
//! exit statuses.
//!
//! `PROPTEST_CASES` raises the case count (`make fuzz`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod fuzz_support;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::StatusCode;
use bytes::Bytes;
use capmox::proxmox::types::{
    CloneRequest, ConfigUpdate, CreateSnapshotRequest, DeleteVmOptions, DiskDevice, NetDevice, ResizeRequest,
    StartRequest, StopRequest, StorageListQuery, is_disk_key, parse_size, smbios1_uuid, split_tags,
};
use capmox::proxmox::{AgentExecRequest, Client, ClientConfig, Credentials, Error, TaskPollPolicy, Upid};
use fuzz_support::{config, pve_data, pve_string};
use proptest::prelude::*;
use proptest::test_runner::TestRunner;

/// What the stub answers next: status and body.
type Answer = Arc<Mutex<(u16, Vec<u8>)>>;

async fn stub() -> (SocketAddr, Answer) {
    let answer: Answer = Arc::new(Mutex::new((200, b"{}".to_vec())));
    let a = Arc::clone(&answer);
    let app = axum::Router::new().fallback(move || {
        let a = Arc::clone(&a);
        async move {
            let (status, body) = a.lock().unwrap().clone();
            (
                StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR),
                [("content-type", "application/json;charset=UTF-8")],
                body,
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (addr, answer)
}

fn client(addr: SocketAddr) -> Client {
    let mut cfg = ClientConfig::new(
        format!("http://{addr}"),
        Credentials::token("capmox@pve!capi", "fuzz-secret"),
    );
    cfg.get_retries = 0;
    cfg.request_timeout = Duration::from_secs(10);
    cfg.task_poll = TaskPollPolicy {
        initial: Duration::from_millis(1),
        max: Duration::from_millis(2),
    };
    Client::new(cfg).unwrap()
}

fn check<T: std::fmt::Debug>(what: &str, r: Result<T, Error>) {
    if let Err(e) = r {
        assert!(!e.to_string().is_empty(), "{what}: empty error message");
        let _ = e.class();
        let _ = e.is_retryable();
    }
}

/// Calls every endpoint once against whatever the stub answers.
async fn every_endpoint(c: &Client) {
    let upid = Upid::parse("UPID:pve1:000A1B2C:0001E240:65A0B2F1:qmclone:100:root@pam:").unwrap();
    check("version", c.version().await);
    check("cluster_status", c.cluster_status().await);
    check("cluster_resources", c.cluster_resources(None).await);
    check("locate_vm", c.locate_vm(100).await);
    check("next_id", c.next_id().await);
    check("is_vmid_free", c.is_vmid_free(100).await);
    check("nodes", c.nodes().await);
    check("node_status", c.node_status("pve1").await);
    check("node_vms", c.node_vms("pve1").await);
    check("node_containers", c.node_containers("pve1").await);
    check("vm_status", c.vm_status("pve1", 100).await);
    check("vm_config", c.vm_config("pve1", 100).await);
    check("clone_vm", c.clone_vm("pve1", 100, &CloneRequest::new(101)).await);
    let update = ConfigUpdate::new().cores(2);
    check("update_vm_config", c.update_vm_config("pve1", 101, &update).await);
    check(
        "update_vm_config_sync",
        c.update_vm_config_sync("pve1", 101, &update).await,
    );
    let resize = ResizeRequest {
        disk: "scsi0".into(),
        size: "20G".into(),
        digest: None,
    };
    check("resize_disk", c.resize_disk("pve1", 101, &resize).await);
    check(
        "start_vm",
        c.start_vm("pve1", 101, &StartRequest::default()).await,
    );
    check("stop_vm", c.stop_vm("pve1", 101, &StopRequest::default()).await);
    check(
        "delete_vm",
        c.delete_vm("pve1", 101, &DeleteVmOptions::default()).await,
    );
    check("snapshots", c.snapshots("pve1", 101).await);
    let snap = CreateSnapshotRequest {
        snapname: "s".into(),
        description: None,
        vmstate: None,
    };
    check("create_snapshot", c.create_snapshot("pve1", 101, &snap).await);
    check(
        "node_storages",
        c.node_storages("pve1", &StorageListQuery::default()).await,
    );
    check(
        "storage_content",
        c.storage_content("pve1", "local", Some("iso")).await,
    );
    check(
        "storage_volume",
        c.storage_volume("pve1", "local", "local:iso/user-data-101.iso")
            .await,
    );
    check(
        "delete_storage_volume",
        c.delete_storage_volume("pve1", "local", "local:iso/user-data-101.iso")
            .await,
    );
    check(
        "upload_iso",
        c.upload_iso("pve1", "local", "user-data-101.iso", Bytes::from_static(b"iso"))
            .await,
    );
    check("agent_os_info", c.agent_os_info("pve1", 101).await);
    check(
        "agent_network_interfaces",
        c.agent_network_interfaces("pve1", 101).await,
    );
    check(
        "agent_exec",
        c.agent_exec("pve1", 101, &AgentExecRequest::new(&["cloud-init", "status"]))
            .await,
    );
    check("agent_exec_status", c.agent_exec_status("pve1", 101, 7).await);
    check("task_status", c.task_status(&upid).await);
    check("task_log", c.task_log(&upid, 0, 50).await);
    check(
        "wait_for_task",
        c.wait_for_task(&upid, Duration::from_millis(20)).await,
    );
    check("login", c.login().await);
}

fn answers() -> impl Strategy<Value = (u16, Vec<u8>)> {
    let status = prop_oneof![
        8 => Just(200u16),
        1 => Just(500u16),
        1 => Just(400u16),
        1 => Just(401u16),
        1 => 100u16..600,
    ];
    let body = prop_oneof![
        8 => pve_data().prop_map(|d| serde_json::to_vec(&serde_json::json!({"data": d})).unwrap()),
        1 => fuzz_support::pve_json().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => prop::collection::vec(any::<u8>(), 0..200),
        1 => Just(b"{\"data\":".to_vec()),
        1 => Just(Vec::new()),
    ];
    (status, body)
}

#[test]
fn fuzz_client_survives_hostile_answers() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Runtime::new().unwrap();
    let (addr, answer) = rt.block_on(stub());
    let c = client(addr);
    let mut runner = TestRunner::new(config(24));
    let result = runner.run(&answers(), |(status, body)| {
        *answer.lock().unwrap() = (status, body);
        rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(60), every_endpoint(&c))
                .await
                .expect("a call hung");
        });
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
}

fn mac() -> impl Strategy<Value = String> {
    "([0-9A-F]{2}:){5}[0-9A-F]{2}"
}

/// Property strings with the syntax's pieces mixed hostilely.
fn property_string() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        Just("virtio".to_owned()),
        mac().prop_map(|m| format!("virtio={m}")),
        Just("bridge=vmbr0".to_owned()),
        Just("tag=4095".to_owned()),
        Just("tag=99999".to_owned()),
        Just("mtu=-1".to_owned()),
        Just("queues=".to_owned()),
        Just("firewall=maybe".to_owned()),
        Just("model=e1000".to_owned()),
        Just("model=bogus".to_owned()),
        Just("macaddr=zz".to_owned()),
        Just("local-lvm:vm-100-disk-0".to_owned()),
        Just("size=1.5T".to_owned()),
        Just("size=99999999999999999999T".to_owned()),
        Just("media=cdrom".to_owned()),
        Just("file=".to_owned()),
        Just("=".to_owned()),
        Just("==".to_owned()),
        Just("uuid=6C3FA683-BEF9-4425-B413-EAA45A9D6191".to_owned()),
        Just("uuid=6c3fa683bef94425b413eaa45a9d6191".to_owned()),
        Just("uuid=--------------------------------------------".to_owned()),
        "[a-z]{1,8}=[a-zA-Z0-9:;.\\-]{0,20}",
        "\\PC{0,12}",
    ];
    prop::collection::vec(piece, 0..8).prop_map(|p| p.join(","))
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn fuzz_net_and_disk_property_strings(s in property_string()) {
        if let Some(d) = NetDevice::parse(&s) {
            let printed = d.to_property_string();
            // A NIC of a model PVE knows prints back to the same NIC.
            if capmox::proxmox::types::NET_MODELS.contains(&d.model.as_str()) {
                prop_assert_eq!(NetDevice::parse(&printed), Some(d));
            }
        }
        if let Some(d) = DiskDevice::parse(&s) {
            prop_assert!(!d.volume.is_empty());
            let _ = (d.size_bytes(), d.is_cdrom(), d.storage());
        }
        let _ = split_tags(&s);
    }

    #[test]
    fn fuzz_smbios1_gives_canonical_uuids_or_none(s in prop_oneof![property_string(), any::<String>()]) {
        if let Some(u) = smbios1_uuid(&s) {
            prop_assert_eq!(u.len(), 36);
            prop_assert!(u.char_indices().all(|(i, c)| if matches!(i, 8 | 13 | 18 | 23) { c == '-' } else { c.is_ascii_hexdigit() && !c.is_ascii_uppercase() }), "{}", u);
        }
    }

    #[test]
    fn fuzz_sizes_and_disk_keys(s in prop_oneof![pve_string(), "[+]?[0-9.]{0,25}[KMGTkmgt]?", any::<String>()]) {
        let _ = parse_size(&s);
        let _ = is_disk_key(&s);
    }

    #[test]
    fn fuzz_upids(s in prop_oneof![
        any::<String>(),
        "UPID:[a-z0-9\\-:]{0,20}:[0-9A-F]{0,9}:[0-9A-F]{0,9}:[0-9A-F]{0,9}:[a-z ]{0,8}:[0-9:]{0,5}:[a-z@!:]{0,12}:?",
    ]) {
        if let Ok(u) = Upid::parse(&s) {
            prop_assert_eq!(u.as_str(), s.as_str());
            prop_assert_eq!(Upid::parse(u.as_str()).unwrap(), u);
        }
    }

    #[test]
    fn fuzz_valid_upids_round_trip(
        node in "[a-z][a-z0-9\\-]{0,10}[a-z0-9]",
        pid in any::<u32>(),
        pstart in 0u64..0xF_FFFF_FFFF,
        start in any::<u32>(),
        ty in "[a-z]{1,10}",
        id in "[0-9a-z]{0,6}",
        user in "[a-z]{1,8}@(pam|pve)(![a-z]{1,6})?",
    ) {
        let s = format!("UPID:{node}:{pid:08X}:{pstart:08X}:{start:08X}:{ty}:{id}:{user}:");
        let u = Upid::parse(&s).unwrap();
        prop_assert_eq!((&u.node, u.pid, u.pstart, u64::from(start)), (&node, pid, pstart, u.starttime));
        prop_assert_eq!((&u.task_type, &u.id, &u.user), (&ty, &id, &user));
    }

    #[test]
    fn fuzz_task_exit_statuses(s in prop_oneof![pve_string(), "WARNINGS: [0-9a-z ]{0,4}"]) {
        let ok = capmox::proxmox::task::exitstatus_is_success(&s);
        prop_assert_eq!(ok, s == "OK" || s.strip_prefix("WARNINGS: ").is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit())));
        let _ = capmox::proxmox::error::classify_task_exitstatus(&s);
    }
}
