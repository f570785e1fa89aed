//! Shared helpers for the client-against-simulator tests (included with `#[path]`).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use capmox::proxmox::{Client, ClientConfig, Credentials, RequestObserver, TaskPollPolicy};
use pve_sim::{SimConfig, SimServer};

/// Starts the default simulator (HTTPS, instant profile).
pub async fn start_sim() -> SimServer {
    let _ = rustls::crypto::ring::default_provider().install_default();
    SimServer::start(SimConfig::default())
        .await
        .expect("simulator starts")
}

/// Fast task polling for tests.
pub fn fast_poll(mut cfg: ClientConfig) -> ClientConfig {
    cfg.task_poll = TaskPollPolicy {
        initial: Duration::from_millis(10),
        max: Duration::from_millis(100),
    };
    cfg.retry_base = Duration::from_millis(10);
    cfg
}

/// Token config trusting the simulator's CA.
pub fn token_config(sim: &SimServer) -> ClientConfig {
    let cfg = ClientConfig::new(sim.url(), Credentials::token(sim.token_id(), sim.token_secret()));
    let cfg = match sim.ca_pem() {
        Some(pem) => cfg.with_ca_pem(pem),
        None => cfg,
    };
    fast_poll(cfg)
}

/// A token client trusting the simulator's CA.
pub fn token_client(sim: &SimServer) -> Client {
    Client::new(token_config(sim)).expect("client builds")
}

/// A username/password (ticket) client trusting the simulator's CA.
pub fn password_client(sim: &SimServer) -> Client {
    let cfg = ClientConfig::new(sim.url(), Credentials::password(sim.user(), sim.password()));
    let cfg = match sim.ca_pem() {
        Some(pem) => cfg.with_ca_pem(pem),
        None => cfg,
    };
    Client::new(fast_poll(cfg)).expect("client builds")
}

/// Deadline for task waits in tests.
pub const TASK_TIMEOUT: Duration = Duration::from_secs(20);

/// Records every observed request.
#[derive(Default)]
pub struct Recorder {
    /// (method, template, status)
    pub seen: Mutex<Vec<(String, String, Option<u16>)>>,
}

impl RequestObserver for Recorder {
    fn observe(&self, method: &str, endpoint_template: &str, status: Option<u16>, _elapsed: Duration) {
        self.seen
            .lock()
            .unwrap()
            .push((method.to_owned(), endpoint_template.to_owned(), status));
    }
}

impl Recorder {
    /// A new shared recorder.
    pub fn shared() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Snapshot of what was seen.
    pub fn entries(&self) -> Vec<(String, String, Option<u16>)> {
        self.seen.lock().unwrap().clone()
    }
}
