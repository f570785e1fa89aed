//! HTTP endpoints that run regardless of leadership: health probes (`/healthz`, `/readyz`, plain
//! HTTP) and Prometheus metrics (`/metrics`; served by [`crate::diagnostics`], over HTTPS with
//! authentication unless `--insecure-diagnostics`).
//!
//! - `/healthz` (liveness) answers 200 while the process runs and its controller tasks are alive;
//!   it turns 500 once a controller ended unexpectedly or leadership was lost (the manager exits
//!   right after).
//! - `/readyz` answers 200 once the manager has started (CRDs served, leader election running)
//!   and, when webhooks are enabled, the webhook server is serving (every replica serves them).
//!   Standby replicas are ready too, like controller-runtime's ping check. The body reports the
//!   leadership and the last probe of the global Proxmox client; a Proxmox outage does NOT fail
//!   readiness (it is per-ProxmoxCluster state reported in conditions, and restarting the pod
//!   would not help).

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::IntoResponse;
use axum::routing::get;

use crate::metrics::Metrics;

/// Result of the last `GET /version` of the global Proxmox client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ProxmoxProbe {
    /// No global client (credentials come from each ProxmoxCluster's secret).
    NotConfigured,
    /// Configured, not probed yet.
    Pending,
    /// The API answered with this version.
    Reachable(String),
    /// The probe failed with this error.
    Unreachable(String),
}

/// Shared state of the probe endpoints.
#[derive(Debug)]
pub struct HealthState {
    started: AtomicBool,
    alive: AtomicBool,
    leader: AtomicBool,
    webhooks_required: AtomicBool,
    webhooks_serving: AtomicBool,
    proxmox: Mutex<ProxmoxProbe>,
}

impl Default for HealthState {
    fn default() -> Self {
        Self {
            started: AtomicBool::new(false),
            alive: AtomicBool::new(true),
            leader: AtomicBool::new(false),
            webhooks_required: AtomicBool::new(false),
            webhooks_serving: AtomicBool::new(false),
            proxmox: Mutex::new(ProxmoxProbe::NotConfigured),
        }
    }
}

impl HealthState {
    /// Marks the manager as started (readiness).
    pub fn set_started(&self) {
        self.started.store(true, Ordering::SeqCst);
    }

    /// Whether the manager has started.
    pub fn is_started(&self) -> bool {
        self.started.load(Ordering::SeqCst)
    }

    /// Marks the controllers as dead (liveness fails).
    pub fn set_dead(&self) {
        self.alive.store(false, Ordering::SeqCst);
    }

    /// Whether liveness passes.
    pub fn is_alive(&self) -> bool {
        self.alive.load(Ordering::SeqCst)
    }

    /// Records whether this process currently leads.
    pub fn set_leader(&self, leader: bool) {
        self.leader.store(leader, Ordering::SeqCst);
    }

    /// Whether this process currently leads.
    pub fn is_leader(&self) -> bool {
        self.leader.load(Ordering::SeqCst)
    }

    /// Makes readiness wait for the webhook server.
    pub fn require_webhooks(&self) {
        self.webhooks_required.store(true, Ordering::SeqCst);
    }

    /// Records that the webhook server accepts connections.
    pub fn set_webhooks_serving(&self) {
        self.webhooks_serving.store(true, Ordering::SeqCst);
    }

    /// Whether readiness may pass as far as the webhook server is concerned.
    pub fn webhooks_ready(&self) -> bool {
        !self.webhooks_required.load(Ordering::SeqCst) || self.webhooks_serving.load(Ordering::SeqCst)
    }

    /// Records the global Proxmox probe result.
    pub fn set_proxmox(&self, probe: ProxmoxProbe) {
        match self.proxmox.lock() {
            Ok(mut g) => *g = probe,
            Err(poisoned) => *poisoned.into_inner() = probe,
        }
    }

    /// The last global Proxmox probe result.
    pub fn proxmox(&self) -> ProxmoxProbe {
        match self.proxmox.lock() {
            Ok(g) => g.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn readiness_body(&self) -> String {
        let proxmox = match self.proxmox() {
            ProxmoxProbe::NotConfigured => "not configured".to_owned(),
            ProxmoxProbe::Pending => "pending".to_owned(),
            ProxmoxProbe::Reachable(v) => format!("reachable (version {v})"),
            ProxmoxProbe::Unreachable(e) => format!("unreachable: {e}"),
        };
        let webhooks = if self.webhooks_required.load(Ordering::SeqCst) {
            "serving"
        } else {
            "disabled"
        };
        format!(
            "ok\nleader: {}\nwebhooks: {webhooks}\nglobal proxmox client: {proxmox}\n",
            self.is_leader()
        )
    }
}

async fn healthz(State(state): State<Arc<HealthState>>) -> impl IntoResponse {
    if state.is_alive() {
        (StatusCode::OK, "ok\n")
    } else {
        (StatusCode::INTERNAL_SERVER_ERROR, "controllers stopped\n")
    }
}

async fn readyz(State(state): State<Arc<HealthState>>) -> impl IntoResponse {
    if !state.is_alive() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "controllers stopped\n".to_owned(),
        )
    } else if !state.webhooks_ready() {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            "webhook server not serving yet\n".to_owned(),
        )
    } else if state.is_started() {
        (StatusCode::OK, state.readiness_body())
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "starting\n".to_owned())
    }
}

async fn metrics(State(metrics): State<Arc<Metrics>>) -> impl IntoResponse {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        metrics.render(),
    )
}

/// The probe router: `/healthz`, `/readyz`.
pub fn health_router(state: Arc<HealthState>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .with_state(state)
}

/// The metrics router: `/metrics`.
pub fn metrics_router(metrics: Arc<Metrics>) -> Router {
    Router::new()
        .route("/metrics", get(self::metrics))
        .with_state(metrics)
}

/// Binds `addr` (port 0 picks a free port).
pub async fn bind(addr: SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    tokio::net::TcpListener::bind(addr).await
}

/// Serves `router` on `listener` until `shutdown` completes.
pub async fn serve(
    listener: tokio::net::TcpListener,
    router: Router,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router)
        .with_graceful_shutdown(shutdown)
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn readiness_waits_for_the_webhook_server_when_enabled() {
        let s = HealthState::default();
        s.set_started();
        assert!(s.webhooks_ready());
        assert!(s.readiness_body().contains("webhooks: disabled"));
        s.require_webhooks();
        assert!(!s.webhooks_ready());
        s.set_webhooks_serving();
        assert!(s.webhooks_ready());
        assert!(s.readiness_body().contains("webhooks: serving"));
    }

    #[test]
    fn readiness_body_reports_leader_and_proxmox() {
        let s = HealthState::default();
        assert!(!s.is_started());
        assert!(s.is_alive());
        s.set_leader(true);
        s.set_proxmox(ProxmoxProbe::Unreachable("connection refused".into()));
        let body = s.readiness_body();
        assert!(body.contains("leader: true"), "{body}");
        assert!(body.contains("unreachable: connection refused"), "{body}");
        s.set_proxmox(ProxmoxProbe::Reachable("8.3.0".into()));
        assert!(s.readiness_body().contains("reachable (version 8.3.0)"));
    }
}
