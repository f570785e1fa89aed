//! The client's trace output never contains credentials. Kept in its own test binary so no
//! parallel test caches tracing callsite interest before the capturing subscriber is set.

#![allow(clippy::unwrap_used, clippy::expect_used)]

#[path = "proxmox_common.rs"]
mod common;

use std::sync::{Arc, Mutex};

use capmox::proxmox::{ApiPath, Client, ClientConfig, CloneRequest, Credentials};
use common::*;

#[derive(Clone, Default)]
struct SharedBuf(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for SharedBuf {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

#[tokio::test]
async fn trace_logs_carry_no_secrets() {
    let buf = SharedBuf::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let _guard = tracing::subscriber::set_default(subscriber);

    let sim = start_sim().await;
    let tickets = password_client(&sim);
    tickets.version().await.unwrap();
    let upid = tickets
        .clone_vm("pve1", 100, &CloneRequest::new(tickets.next_id().await.unwrap()))
        .await
        .unwrap();
    tickets.wait_for_task(&upid, TASK_TIMEOUT).await.unwrap();
    let tokens = token_client(&sim);
    tokens.version().await.unwrap();
    let _ = tokens
        .request_json(http::Method::GET, &ApiPath::root().lit("nope"), &[], None)
        .await;
    let mut bad = token_config(&sim);
    bad.credentials = Credentials::password(sim.user(), "definitely-wrong-pw");
    let _ = Client::new(bad).unwrap().version().await;
    let _ = Client::new(ClientConfig {
        get_retries: 0,
        ..token_config(&sim)
    })
    .unwrap()
    .version()
    .await;

    let out = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    assert!(
        out.contains("proxmox request"),
        "expected request logs, got: {out}"
    );
    for secret in [
        sim.password(),
        sim.token_secret(),
        "definitely-wrong-pw",
        "PVEAuthCookie",
        "PVEAPIToken",
        "PVE:",
    ] {
        assert!(!out.contains(secret), "{secret:?} leaked into logs:\n{out}");
    }
    sim.shutdown().await;
}
