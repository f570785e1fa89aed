//! Startup helpers: binding the HTTP listeners, probing the global Proxmox client, waiting for
//! the capmox CRDs.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use kube::Api;
use kube::api::{ApiResource, DynamicObject, ListParams};

use super::{CRD_POLL_INTERVAL, ManagerError, PROXMOX_PROBE_INTERVAL};
use crate::credentials::ProxmoxClients;
use crate::health::{self, HealthState, ProxmoxProbe};
use crate::proxmox;

pub(super) async fn bind_opt(
    what: &'static str,
    addr: Option<SocketAddr>,
) -> Result<Option<tokio::net::TcpListener>, ManagerError> {
    match addr {
        Some(addr) => health::bind(addr)
            .await
            .map(Some)
            .map_err(|source| ManagerError::Bind { what, addr, source }),
        None => Ok(None),
    }
}

/// Probes the global Proxmox client now and then every [`PROXMOX_PROBE_INTERVAL`]. Once the
/// version is known, a `/cluster/resources` list the controllers read successfully within two
/// intervals stands for a probe (no request of its own: at rest the machine controller reads
/// that list once per resync).
pub(super) async fn probe_loop(
    client: proxmox::Client,
    clients: Arc<ProxmoxClients>,
    health: Arc<HealthState>,
) {
    let mut interval = tokio::time::interval(PROXMOX_PROBE_INTERVAL);
    let mut last_ok: Option<bool> = None;
    let mut known: Option<String> = None;
    loop {
        interval.tick().await;
        if let Some(v) = &known
            && clients.listed_within(&client, PROXMOX_PROBE_INTERVAL * 2)
        {
            health.set_proxmox(ProxmoxProbe::Reachable(v.clone()));
            continue;
        }
        match client.version().await {
            Ok(v) => {
                if last_ok != Some(true) {
                    tracing::info!(version = %v.version, url = %client.base_url(), "global Proxmox API reachable");
                }
                last_ok = Some(true);
                known = Some(v.version.clone());
                health.set_proxmox(ProxmoxProbe::Reachable(v.version));
            }
            Err(e) => {
                if last_ok != Some(false) {
                    tracing::error!(error = %e, url = %client.base_url(),
                        "global Proxmox API unreachable; continuing, clusters using it report ProxmoxAvailable=False");
                }
                last_ok = Some(false);
                known = None;
                health.set_proxmox(ProxmoxProbe::Unreachable(e.to_string()));
            }
        }
    }
}

/// Waits until the capmox v1alpha2 CRDs are served, listing each with `limit=1`.
///
/// With a watch `namespace` the list is namespaced, so a manager whose RBAC is limited to that
/// namespace can start.
pub async fn wait_for_crds(
    client: &kube::Client,
    namespace: Option<&str>,
    timeout: Duration,
) -> Result<(), ManagerError> {
    let resources = [
        ApiResource::erase::<ProxmoxCluster>(&()),
        ApiResource::erase::<ProxmoxMachine>(&()),
    ];
    let deadline = tokio::time::Instant::now() + timeout;
    for ar in resources {
        let api: Api<DynamicObject> = match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        };
        let crd = format!("{}.{}/{}", ar.plural, ar.group, ar.version);
        let mut logged = false;
        loop {
            match api.list(&ListParams::default().limit(1)).await {
                Ok(_) => {
                    tracing::debug!(%crd, "CRD served");
                    break;
                }
                Err(e) => {
                    if !logged {
                        tracing::warn!(%crd, error = %e, ?timeout, "waiting for CRD to be served");
                        logged = true;
                    }
                    if tokio::time::Instant::now() + CRD_POLL_INTERVAL > deadline {
                        return Err(ManagerError::CrdsMissing {
                            crd,
                            timeout,
                            last_error: e.to_string(),
                        });
                    }
                    tokio::time::sleep(CRD_POLL_INTERVAL).await;
                }
            }
        }
    }
    Ok(())
}
