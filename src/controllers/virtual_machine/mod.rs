//! The ProxmoxVirtualMachine controller: watches ProxmoxVirtualMachines into a cache (triggered
//! only by what a pass reads: the spec's generation, the annotations, deletion — not by its own
//! status writes) and by the view's wake-ups, and reconciles each object ([`reconcile`]): pause
//! annotation, finalizer, credentials, then passes of the adapter ([`crate::virtual_machine`]) in a
//! row while each says "go on", persisting the status after each ([`persist`]).
//!
//! The controller starts once the `proxmoxvirtualmachines.vm.capmox-rs.io` CRD is served (an
//! installation that lacks it keeps working; the controller waits for it, looking once a minute).

mod persist;
mod reconcile;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use capmox_api::vm::{GROUP, PLURAL, ProxmoxVirtualMachine, VERSION};
use futures::StreamExt;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};

use super::cluster::Backoff;
use super::events::Recorder;
use super::instrument::{Instrument, RunInstrumented};
use super::triggers::{changes, hash_of};
use crate::context::Context;
use crate::machine::latest::Latest;
use crate::proxmox::Client;
use crate::virtual_machine::{OWNER_KIND, VirtualMachineError};

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxvirtualmachine";
/// Field manager of this controller's patches.
pub const FIELD_MANAGER: &str = "capmox-proxmoxvirtualmachine";
/// How long a Proxmox client built from a credentials Secret is used before the Secret is read
/// again.
const CREDENTIALS_TTL: Duration = Duration::from_secs(60);
/// How often a missing CRD is looked for.
const CRD_POLL: Duration = Duration::from_secs(60);

struct VmCtx {
    ctx: Arc<Context>,
    recorder: Recorder,
    errors: Backoff,
    store: Store<ProxmoxVirtualMachine>,
    latest: Arc<Latest<ProxmoxVirtualMachine>>,
    /// Proxmox clients of credentials Secrets, by Secret, with when they were built.
    credentials: Mutex<std::collections::HashMap<(String, String), (Client, Instant)>>,
}

fn key_of(pvm: &ProxmoxVirtualMachine) -> String {
    format!("{}/{}", pvm.namespace().unwrap_or_default(), pvm.name_any())
}

/// What a pass reads of the object's metadata and spec: a change of it triggers a reconcile,
/// the controller's own status writes do not.
fn fingerprint(pvm: &ProxmoxVirtualMachine) -> u64 {
    let mut annotations = pvm.annotations().clone();
    annotations.remove("kubectl.kubernetes.io/last-applied-configuration");
    hash_of((
        pvm.metadata.generation,
        serde_json::to_string(&annotations).unwrap_or_default(),
        pvm.metadata.deletion_timestamp.is_some(),
        pvm.finalizers(),
    ))
}

/// Whether the CRD is served.
async fn crd_served(client: &kube::Client) -> bool {
    match client.list_api_groups().await {
        Ok(groups) => groups
            .groups
            .iter()
            .any(|g| g.name == GROUP && g.versions.iter().any(|v| v.version == VERSION)),
        Err(e) => {
            tracing::debug!(error = %e, "API discovery failed");
            false
        }
    }
}

/// Runs the ProxmoxVirtualMachine controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let stop = futures::FutureExt::shared(super::shutdown_signal(shutdown));
    let mut logged = false;
    while !crd_served(&client).await {
        if !logged {
            tracing::info!(
                "{PLURAL}.{GROUP} is not served; the ProxmoxVirtualMachine controller waits for it"
            );
            logged = true;
        }
        tokio::select! {
            () = tokio::time::sleep(CRD_POLL) => {}
            () = stop.clone() => return,
        }
    }
    let settings = &ctx.settings;
    let inst = Instrument::new(&ctx, CONTROLLER, settings.machine_concurrency());
    let (store, writer) = reflector::store::<ProxmoxVirtualMachine>();
    // With `--watch-filter` only the labelled ProxmoxVirtualMachines are watched (and reconciled).
    let events = super::scope::watch(
        settings,
        |ns| match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        },
        settings.primary_watch(watcher::Config::default().any_semantic()),
    )
    .default_backoff()
    .modify(|p: &mut ProxmoxVirtualMachine| {
        p.metadata.managed_fields = None;
        if let Some(a) = p.metadata.annotations.as_mut() {
            a.remove("kubectl.kubernetes.io/last-applied-configuration");
        }
    })
    .reflect(writer);
    let triggers = inst.objects(changes(events, fingerprint, |_| true));
    let woken = ctx.views.subscribe(OWNER_KIND);
    let vc = Arc::new(VmCtx {
        recorder: super::recorder(client.clone()),
        errors: Backoff::default(),
        store: store.clone(),
        latest: Arc::default(),
        credentials: Mutex::default(),
        ctx: ctx.clone(),
    });
    Controller::for_stream(triggers, store)
        .reconcile_on(
            inst.refs(woken.map(|o| ObjectRef::<ProxmoxVirtualMachine>::new(&o.name).within(&o.namespace))),
        )
        .with_config(Config::default().concurrency(ctx.settings.machine_concurrency()))
        .graceful_shutdown_on(stop)
        .run_instrumented(&inst, reconcile::reconcile, error_policy, vc)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "proxmoxvirtualmachine reconcile failed");
            }
        })
        .await;
}

fn error_policy(pvm: Arc<ProxmoxVirtualMachine>, err: &VirtualMachineError, vc: Arc<VmCtx>) -> Action {
    let s = &vc.ctx.settings.machine;
    vc.ctx.metrics.reconcile_error(CONTROLLER, err.class());
    let cap = if err.is_auth() {
        crate::cluster::error::AUTH_BACKOFF_CAP
    } else {
        s.task_poll_max.max(Duration::from_secs(5))
    };
    let delay = vc.errors.next_jittered(&key_of(&pvm), s.task_poll_initial, cap);
    tracing::warn!(object = %key_of(&pvm), error = %err, retry_in = ?delay, "proxmoxvirtualmachine reconcile failed");
    Action::requeue(delay)
}
