//! Client transport, auth, TLS, read endpoints and error classes against pve-sim over HTTPS.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "proxmox_common.rs"]
mod common;

use std::sync::Arc;

use capmox::proxmox::{
    ApiPath, Client, ClientConfig, Credentials, Error, ErrorClass, ResourceType, StorageListQuery,
};
use common::*;

#[tokio::test]
async fn token_auth_version_and_base_url_variants() {
    let sim = start_sim().await;
    for suffix in ["", "/", "/api2/json", "/api2/json/"] {
        let mut cfg = token_config(&sim);
        cfg.url = format!("{}{suffix}", sim.url());
        let client = Client::new(cfg).unwrap();
        let v = client.version().await.unwrap();
        assert!(!v.version.is_empty() && !v.release.is_empty(), "{v:?}");
    }
    sim.shutdown().await;
}

#[tokio::test]
async fn ticket_auth_reads_and_writes_with_csrf() {
    let sim = start_sim().await;
    let client = password_client(&sim);
    client.login().await.unwrap();
    let v = client.version().await.unwrap();
    assert!(!v.version.is_empty());
    // A write (needs the CSRF header) through ticket auth.
    let upid = client.start_vm("pve1", 100, &Default::default()).await;
    // Starting a template fails inside the task, but the call itself must be accepted.
    let upid = upid.unwrap();
    let err = client.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::TaskFailed, "{err:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn bad_credentials_are_auth_errors() {
    let sim = start_sim().await;
    let mut cfg = token_config(&sim);
    cfg.credentials = Credentials::token(sim.token_id(), "wrong-secret");
    let err = Client::new(cfg).unwrap().version().await.unwrap_err();
    assert!(matches!(err, Error::Auth { status: 401, .. }), "{err:?}");
    assert!(!err.is_retryable());

    let mut cfg = token_config(&sim);
    cfg.credentials = Credentials::password(sim.user(), "wrong-password");
    let err = Client::new(cfg).unwrap().version().await.unwrap_err();
    assert!(matches!(err, Error::Auth { status: 401, .. }), "{err:?}");
    assert!(!format!("{err:?}").contains("wrong-password"));
    sim.shutdown().await;
}

#[tokio::test]
async fn tls_verification_modes() {
    let sim = start_sim().await;
    // Without the CA the self-signed chain is rejected.
    let mut cfg = token_config(&sim);
    cfg.tls = capmox::proxmox::TlsVerification::Verify;
    cfg.get_retries = 0;
    let err = Client::new(cfg).unwrap().version().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Network, "{err:?}");
    // Explicit insecure opt-out accepts it.
    let cfg = token_config(&sim).insecure();
    Client::new(cfg).unwrap().version().await.unwrap();
    sim.shutdown().await;
}

#[tokio::test]
async fn connection_refused_is_network_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let mut cfg = fast_poll(ClientConfig::new(
        format!("https://127.0.0.1:{port}"),
        Credentials::token("a@pve!b", "c"),
    ));
    cfg.get_retries = 1;
    let rec = Recorder::shared();
    let client = Client::with_observer(cfg, rec.clone()).unwrap();
    let err = client.version().await.unwrap_err();
    assert!(matches!(err, Error::Network { .. }), "{err:?}");
    assert!(err.is_retryable());
    // One initial attempt plus one retry, both without a status.
    assert_eq!(
        rec.entries(),
        vec![
            ("GET".into(), "/version".into(), None),
            ("GET".into(), "/version".into(), None)
        ]
    );
}

#[tokio::test]
async fn plain_http_simulator() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig {
        tls: false,
        ..Default::default()
    })
    .await
    .unwrap();
    assert!(sim.url().starts_with("http://") && sim.ca_pem().is_none());
    let client = token_client(&sim);
    assert!(!client.version().await.unwrap().version.is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn cluster_and_node_reads() {
    let sim = start_sim().await;
    let client = token_client(&sim);

    let status = client.cluster_status().await.unwrap();
    assert!(
        status.iter().any(|e| e.entry_type == "node" && e.name == "pve1"),
        "{status:?}"
    );

    let vms = client.cluster_resources(Some(ResourceType::Vm)).await.unwrap();
    let tpl = vms
        .iter()
        .find(|r| r.vmid == Some(100))
        .expect("template 100 listed");
    assert!(tpl.template && tpl.is_qemu());
    assert_eq!(tpl.node.as_deref(), Some("pve1"));
    assert!(tpl.tag_list().contains(&"capmox".to_owned()));
    let all = client.cluster_resources(None).await.unwrap();
    assert!(all.len() > vms.len());
    let storages = client
        .cluster_resources(Some(ResourceType::Storage))
        .await
        .unwrap();
    assert!(storages.iter().all(|r| r.resource_type == "storage") && !storages.is_empty());

    assert_eq!(client.locate_vm(101).await.unwrap().as_deref(), Some("pve2"));
    assert_eq!(client.locate_vm(4242).await.unwrap(), None);

    let next = client.next_id().await.unwrap();
    assert!(next >= 100 && ![100, 101, 102].contains(&next), "{next}");
    assert!(client.is_vmid_free(next).await.unwrap());
    assert!(!client.is_vmid_free(100).await.unwrap());

    let nodes = client.nodes().await.unwrap();
    let mut names: Vec<_> = nodes.iter().map(|n| n.node.clone()).collect();
    names.sort();
    assert_eq!(names, vec!["pve1", "pve2", "pve3"]);

    let ns = client.node_status("pve1").await.unwrap();
    assert!(ns.memory.total > 0);

    let list = client.node_vms("pve1").await.unwrap();
    assert!(list.iter().any(|v| v.vmid == 100 && v.template));
    let _containers = client.node_containers("pve1").await.unwrap();

    let st = client
        .node_storages("pve1", &StorageListQuery::default())
        .await
        .unwrap();
    assert!(
        st.iter().any(|s| s.storage == "local" && s.supports("iso")),
        "{st:?}"
    );
    let iso_only = client
        .node_storages(
            "pve1",
            &StorageListQuery {
                content: Some("iso".into()),
                ..Default::default()
            },
        )
        .await
        .unwrap();
    assert!(iso_only.iter().all(|s| s.supports("iso")) && !iso_only.is_empty());
    sim.shutdown().await;
}

#[tokio::test]
async fn nextid_taken_is_already_exists_with_field() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let err = client
        .request_json(
            http::Method::GET,
            &ApiPath::root().lit("cluster/nextid"),
            &[("vmid".into(), "100".into())],
            None,
        )
        .await
        .unwrap_err();
    assert_eq!(err.class(), ErrorClass::AlreadyExists, "{err:?}");
    assert!(err.message().contains("VM 100 already exists"), "{err:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn parameter_verification_and_rejected() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    // Unknown parameter.
    let err = client
        .request_json(
            http::Method::GET,
            &ApiPath::root().lit("cluster/resources"),
            &[("bogus".into(), "1".into())],
            None,
        )
        .await
        .unwrap_err();
    match &err {
        Error::ParameterVerification { errors, .. } => assert!(errors.contains_key("bogus"), "{errors:?}"),
        other => panic!("unexpected {other:?}"),
    }
    assert!(!err.is_retryable());
    // Unknown path: 501.
    let err = client
        .request_json(
            http::Method::GET,
            &ApiPath::root().lit("no/such/thing"),
            &[],
            None,
        )
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Rejected { status: 501, .. }), "{err:?}");
    sim.shutdown().await;
}

#[tokio::test]
async fn observer_sees_templates_and_statuses() {
    let sim = start_sim().await;
    let rec = Recorder::shared();
    let client = Client::with_observer(token_config(&sim), rec.clone()).unwrap();
    client.vm_config("pve1", 100).await.unwrap();
    let _ = client.vm_config("pve1", 999).await.unwrap_err();
    let seen = rec.entries();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0],
        ("GET".into(), "/nodes/{node}/qemu/{vmid}/config".into(), Some(200))
    );
    assert_eq!(
        seen[1],
        ("GET".into(), "/nodes/{node}/qemu/{vmid}/config".into(), Some(500))
    );
    assert_eq!(
        sim.state().request_count("GET /nodes/{node}/qemu/{vmid}/config"),
        2
    );
    sim.shutdown().await;
}

#[tokio::test]
async fn injected_faults_map_to_classes() {
    let sim = start_sim().await;
    let client = token_client(&sim);
    let fault = |status: u16, message: &str| pve_sim::FaultSpec {
        endpoints: vec![pve_sim::EndpointFault {
            endpoint: "GET /version".into(),
            error_rate: 1.0,
            status,
            message: message.into(),
            latency_ms: 0,
            ..Default::default()
        }],
        ..Default::default()
    };
    sim.state().set_faults(fault(500, "injected fault"));
    let err = client.version().await.unwrap_err();
    assert!(matches!(err, Error::Server { status: 500, .. }), "{err:?}");
    assert_eq!(err.message(), "injected fault");
    assert!(err.is_retryable());

    sim.state().set_faults(fault(409, "resource busy"));
    let err = client.version().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Locked, "{err:?}");

    sim.state().set_faults(fault(
        500,
        "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
    ));
    let err = client.version().await.unwrap_err();
    assert_eq!(err.class(), ErrorClass::Locked, "{err:?}");

    sim.state().set_faults(pve_sim::FaultSpec::default());
    client.version().await.unwrap();
    sim.shutdown().await;
}

#[tokio::test]
async fn clients_are_shareable_across_tasks() {
    let sim = start_sim().await;
    let client = Arc::new(token_client(&sim));
    let mut handles = Vec::new();
    for _ in 0..8 {
        let c = client.clone();
        handles.push(tokio::spawn(async move { c.version().await }));
    }
    for h in handles {
        h.await.unwrap().unwrap();
    }
    assert_eq!(sim.state().request_count("GET /version"), 8);
    sim.shutdown().await;
}
