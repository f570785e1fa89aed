//! The ProxmoxMachine controller: watches ProxmoxMachines and what their progress depends on
//! (owner Machines, their IPAddressClaims and IPAddresses, ProxmoxClusters, Clusters and bootstrap
//! Secrets) into caches ([`watches`]), reads the owner objects from them, applies pause rules and
//! the finalizer, runs passes of the lifecycle ([`crate::machine`]) — several in a row while each
//! says "go on", persisting after each — and persists the working copy with at most one
//! metadata/spec patch and one status patch per pass. Reads see this controller's own writes
//! (the objects its writes returned) without a GET.

mod clients;
mod watches;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::controllers::events::{Event, EventType, Recorder};
use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::capi::views::{ClusterView, MachineView};
use capmox_api::capi::{
    CLUSTER_GROUP, CLUSTER_KIND, CLUSTER_PLURAL, IPAM_GROUP, MACHINE_KIND, MACHINE_PLURAL,
};
use capmox_api::consts::{CLUSTER_NAME_LABEL, MACHINE_FINALIZER, PAUSED_ANNOTATION};
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::cluster::Backoff;
use super::decoded::{self, Decoded};
use super::triggers::changes;
use crate::cluster;
use crate::conditions;
use crate::context::Context;
use crate::ipam::IpamApiVersion;
use crate::machine::delete::{DeleteInputs, delete};
use crate::machine::latest::Latest;
use crate::machine::locations::Locations;
use crate::machine::reconcile::{PassInputs, provision};
use crate::machine::steps::Next;
use crate::machine::view::{ProxmoxView, ViewSettings, Views};
use crate::machine::zone;
use crate::machine::{MachineError, MachineSettings};
use crate::proxmox::Client;
use clients::{proxmox_client, recorded_credentials, rotation_secret};
use watches::Stores;

pub use watches::machine_of_claim;

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxmachine";
/// Field manager of this controller's patches.
pub const FIELD_MANAGER: &str = "capmox-proxmoxmachine";

/// Passes one reconcile runs in a row while each step says "go on now".
const MAX_CHAINED_PASSES: usize = 8;
/// How long a Proxmox client built from a credentials Secret is used before the Secret is read
/// again (rotations are picked up within this time).
const CREDENTIALS_TTL: Duration = Duration::from_secs(60);

struct MachineCtx {
    ctx: Arc<Context>,
    recorder: Recorder,
    /// Error backoff per machine.
    errors: Backoff,
    stores: Stores,
    /// ProxmoxMachines as this controller last wrote them.
    latest: Arc<Latest<ProxmoxMachine>>,
    /// The node-location writer.
    locations: Locations,
    /// What is known about each Proxmox cluster.
    views: Views,
    /// The IPAM API version served, discovered once at startup.
    ipam_version: IpamApiVersion,
    /// Proxmox clients of credentials Secrets, by Secret, with when they were built.
    credentials: Mutex<std::collections::HashMap<(String, String), (Client, Instant)>>,
    /// Whether every cache has its initial list. One reconcile at a time waits for it: a
    /// store's readiness wakes only its last waiter.
    caches_ready: tokio::sync::Mutex<bool>,
}

impl MachineCtx {
    /// Waits until every cache holds its initial list.
    async fn caches_ready(&self) -> Result<(), MachineError> {
        let mut ready = self.caches_ready.lock().await;
        if !*ready {
            self.stores
                .ready()
                .await
                .map_err(|_| MachineError::Invalid("the watch caches stopped".into()))?;
            *ready = true;
        }
        Ok(())
    }
}

/// A watched ProxmoxMachine (see [`decoded`]: one that cannot be read does not stop the others).
pub(crate) type Watched = Decoded<ProxmoxMachine>;
/// A watched ProxmoxCluster.
pub(crate) type WatchedPc = Decoded<ProxmoxCluster>;

fn key(pm: &ProxmoxMachine) -> String {
    key_of(pm)
}

fn key_of<K: Resource>(obj: &K) -> String {
    format!("{}/{}", obj.namespace().unwrap_or_default(), obj.name_any())
}

/// The served version of `group` among `preferred` (first match), or the first preference.
async fn served_version(client: &kube::Client, group: &str, preferred: &[&'static str]) -> &'static str {
    let first = preferred.first().copied().unwrap_or("v1beta2");
    match client.list_api_groups().await {
        Ok(groups) => groups
            .groups
            .iter()
            .find(|g| g.name == group)
            .and_then(|g| {
                preferred
                    .iter()
                    .copied()
                    .find(|p| g.versions.iter().any(|v| v.version == *p))
            })
            .unwrap_or(first),
        Err(e) => {
            tracing::warn!(error = %e, group, "API discovery failed; assuming {first}");
            first
        }
    }
}

fn resource(group: &str, version: &str, kind: &str, plural: &str) -> ApiResource {
    ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk(group, version, kind), plural)
}

/// Runs the ProxmoxMachine controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let ns = ctx.settings.namespace.clone();
    fn api_for<K>(c: &kube::Client, ns: &Option<String>) -> Api<K>
    where
        K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        match ns {
            Some(ns) => Api::namespaced(c.clone(), ns),
            None => Api::all(c.clone()),
        }
    }
    let dyn_api = |ar: &ApiResource| -> Api<DynamicObject> {
        match &ns {
            Some(ns) => Api::namespaced_with(client.clone(), ns, ar),
            None => Api::all_with(client.clone(), ar),
        }
    };
    let capi = served_version(&client, CLUSTER_GROUP, &["v1beta2", "v1beta1"]).await;
    let ipam_version = crate::ipam::served_ipam_version(&client).await;
    let ipam = match ipam_version {
        IpamApiVersion::V1beta2 => "v1beta2",
        IpamApiVersion::V1beta1 => "v1beta1",
    };
    let machine_ar = resource(CLUSTER_GROUP, capi, MACHINE_KIND, MACHINE_PLURAL);
    let cluster_ar = resource(CLUSTER_GROUP, capi, CLUSTER_KIND, CLUSTER_PLURAL);
    let claim_ar = resource(IPAM_GROUP, ipam, "IPAddressClaim", "ipaddressclaims");
    let address_ar = resource(IPAM_GROUP, ipam, "IPAddress", "ipaddresses");

    let wc = || watcher::Config::default().any_semantic();
    let (pms, pm_writer) = reflector::store::<Watched>();
    let dyn_store = |ar: &ApiResource| {
        let w = reflector::store::Writer::<DynamicObject>::new(ar.clone());
        (w.as_reader(), w)
    };
    let (machines, machine_writer) = dyn_store(&machine_ar);
    let (clusters, cluster_writer) = dyn_store(&cluster_ar);
    let (pcs, pc_writer) = reflector::store::<WatchedPc>();
    let (claims, claim_writer) = dyn_store(&claim_ar);
    let (addresses, address_writer) = dyn_store(&address_ar);
    let (pools, pool_writer) = reflector::store::<InClusterIPPool>();
    let stores = Stores {
        pms: pms.clone(),
        machines,
        clusters,
        pcs,
        claims,
        addresses,
        pools,
        machine_ar: machine_ar.clone(),
        cluster_ar: cluster_ar.clone(),
        claim_ar: claim_ar.clone(),
        address_ar: address_ar.clone(),
    };
    let latest: Arc<Latest<ProxmoxMachine>> = Arc::default();
    let (wake, woken) = futures::channel::mpsc::unbounded();
    let settings = &ctx.settings.machine;
    let mc = Arc::new(MachineCtx {
        recorder: super::recorder(client.clone()),
        errors: Backoff::default(),
        stores: stores.clone(),
        latest: Arc::clone(&latest),
        locations: Locations::default(),
        views: Views::new(
            ViewSettings {
                observe_interval: settings.observe_interval,
                look_min: settings.task_poll_initial,
                look_max: settings.task_poll_max,
            },
            wake,
        ),
        ipam_version,
        credentials: Mutex::default(),
        caches_ready: tokio::sync::Mutex::new(false),
        ctx: ctx.clone(),
    });

    let pm_stream = watcher(api_for::<Watched>(&client, &ns), wc())
        .default_backoff()
        .modify(|pm| watches::trim_meta(pm.meta_mut()))
        .reflect(pm_writer)
        .applied_objects();
    let pm_stream = watches::not_own_writes(pm_stream, Arc::clone(&latest));
    let machine_stream = watcher(dyn_api(&machine_ar), wc())
        .default_backoff()
        .modify(watches::trim_machine)
        .reflect(machine_writer);
    let machine_stream = changes(machine_stream, watches::machine_fingerprint, |_| true);
    let cluster_stream = watcher(dyn_api(&cluster_ar), wc())
        .default_backoff()
        .modify(|c| watches::trim_status(c, &["initialization", "infrastructureReady"]))
        .reflect(cluster_writer);
    let cluster_stream = changes(cluster_stream, watches::cluster_fingerprint, |_| true);
    let pc_stream = watcher(api_for::<WatchedPc>(&client, &ns), wc())
        .default_backoff()
        .modify(|pc| watches::trim_meta(pc.meta_mut()))
        .reflect(pc_writer);
    let pc_stream = changes(pc_stream, watches::pc_fingerprint, |_| true);
    let claim_stream = watcher(dyn_api(&claim_ar), wc())
        .default_backoff()
        .modify(|c| watches::trim_meta(&mut c.metadata))
        .reflect(claim_writer);
    let claim_stream = changes(claim_stream, watches::claim_fingerprint, |c: &DynamicObject| {
        c.data.pointer("/status/addressRef/name").is_some()
    });
    let address_stream = watcher(dyn_api(&address_ar), wc())
        .default_backoff()
        .modify(|a| watches::trim_meta(&mut a.metadata))
        .reflect(address_writer);
    let address_stream = changes(address_stream, |_| 0, |_| true);
    // Cached only: the stream is polled by the controller but never triggers.
    let pool_stream = watcher(api_for::<InClusterIPPool>(&client, &ns), wc())
        .default_backoff()
        .modify(|p| watches::trim_meta(&mut p.metadata))
        .reflect(pool_writer)
        .applied_objects()
        .filter(|_| futures::future::ready(false));
    let secret_stream = watcher(
        api_for::<PartialObjectMeta<Secret>>(&client, &ns),
        watcher::Config::default()
            .any_semantic()
            .labels(CLUSTER_NAME_LABEL),
    )
    .default_backoff();
    let secret_stream = changes(
        secret_stream,
        |s: &PartialObjectMeta<Secret>| super::triggers::hash_of(&s.metadata.resource_version),
        |_| true,
    );

    // Any Secret may hold credentials (they carry no label): metadata only, and a change requeues
    // just the machines whose credentials Proxmox refused (they would otherwise wait out a backoff
    // of up to 5 minutes).
    let credentials_stream = changes(
        watcher(
            api_for::<PartialObjectMeta<Secret>>(&client, &ns),
            watcher::Config::default().any_semantic(),
        )
        .default_backoff(),
        |s: &PartialObjectMeta<Secret>| super::triggers::hash_of(&s.metadata.resource_version),
        |_| true,
    );
    let clients = ctx.proxmox.clone();
    let mc_secrets = Arc::clone(&mc);

    let stop = super::shutdown_signal(shutdown);
    let (s1, s2, s3, s4, s5, s6) = (
        stores.clone(),
        stores.clone(),
        stores.clone(),
        stores.clone(),
        stores.clone(),
        stores.clone(),
    );
    Controller::for_stream(pm_stream, pms)
        .watches_stream_with(machine_stream, |m| watches::machine_to_pm(&m), machine_ar.clone())
        .watches_stream_with(
            claim_stream,
            move |c| watches::claim_to_pm(&c, &s1),
            claim_ar.clone(),
        )
        .watches_stream_with(
            address_stream,
            move |a| watches::address_to_pm(&a, &s2),
            address_ar.clone(),
        )
        .watches_stream(pc_stream, move |pc| watches::pc_to_pms(&pc, &s3.pms))
        .watches_stream_with(
            cluster_stream,
            move |c| watches::by_cluster(&s4.pms, c.namespace(), &c.name_any()),
            cluster_ar.clone(),
        )
        .watches_stream(secret_stream, move |s| watches::secret_to_pm(&s, &s5))
        .watches_stream(credentials_stream, move |s| {
            let (ns, name) = (s.namespace().unwrap_or_default(), s.name_any());
            // A changed Secret may hold rotated credentials: the next pass builds its client anew.
            mc_secrets
                .credentials
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .remove(&(ns.clone(), name.clone()));
            clients
                .take_rotation_waiters(&ns, &name)
                .into_iter()
                .map(|(ns, name)| ObjectRef::<Watched>::new(&name).within(&ns))
                .collect::<Vec<_>>()
        })
        .watches_stream(pool_stream, move |_| {
            let _ = &s6;
            None::<ObjectRef<Watched>>
        })
        .reconcile_on(woken.map(|r| watches::retype(&r)))
        .with_config(Config::default().concurrency(ctx.settings.machine_concurrency()))
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, mc)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "proxmoxmachine reconcile failed");
            }
        })
        .await;
}

/// The owner Machine (from the cache).
fn owner_machine(mc: &MachineCtx, pm: &ProxmoxMachine) -> Option<MachineView> {
    let r = pm.owner_references().iter().find(|r| {
        r.kind == MACHINE_KIND && capmox_api::capi::api_version_in_group(&r.api_version, CLUSTER_GROUP)
    })?;
    let ns = pm.namespace().unwrap_or_default();
    mc.stores
        .machine(&ns, &r.name)
        .map(|o| MachineView::from_dynamic(&o))
}

/// The newest copy of the machine: the cache's or this controller's last write.
fn current(mc: &MachineCtx, cached: &ProxmoxMachine) -> Option<Arc<ProxmoxMachine>> {
    let r = ObjectRef::from_obj(cached);
    let from_cache = mc.stores.pm(&r)?;
    Some(mc.latest.pick(from_cache))
}

/// One reconcile. An error that stops it outside a provisioning step (those record their own
/// reasons) is published as a Warning event and, unless the machine is provisioned, shown as
/// `VirtualMachineProvisioned=False` with the error's reason (`DeletionFailed` while deleting).
async fn reconcile(watched: Arc<Watched>, mc: Arc<MachineCtx>) -> Result<Action, MachineError> {
    let cached = match watched.as_ref() {
        Decoded::Ok(pm) => pm.clone(),
        Decoded::Unreadable(u) => {
            decoded::report(&mc.recorder, &watched, u).await;
            return Ok(Action::await_change());
        }
    };
    let result = reconcile_inner(cached.clone(), mc.clone()).await;
    if let Err(e) = &result {
        report_failure(&mc, &cached, e).await;
    }
    result
}

async fn report_failure(mc: &MachineCtx, cached: &ProxmoxMachine, e: &MachineError) {
    let deleting = cached.metadata.deletion_timestamp.is_some();
    let reason = if deleting && !e.is_auth() {
        api::DELETION_FAILED_REASON
    } else {
        e.reason()
    };
    publish(&mc.recorder, cached, true, reason, e.to_string()).await;
    let Some(fresh) = current(mc, cached) else {
        return;
    };
    if fresh.is_provisioned() && !deleting {
        return;
    }
    let mut work = (*fresh).clone();
    crate::machine::set_failure_condition(&mut work, reason, e.to_string());
    if let Err(pe) = persist_status(mc, &fresh, &work).await {
        tracing::debug!(object = %key(cached), error = %pe, "recording the failure in the status failed");
    }
}

async fn reconcile_inner(cached: Arc<ProxmoxMachine>, mc: Arc<MachineCtx>) -> Result<Action, MachineError> {
    let ctx = &mc.ctx;
    mc.caches_ready().await?;
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    let ns = cached.namespace().unwrap_or_default();
    // The newest copy, not the one that triggered this pass: every decision (above all "no VMID
    // recorded yet") must see this controller's last write.
    let Some(pm) = current(&mc, &cached) else {
        ctx.metrics.remove_machine(&ns, &cached.name_any());
        mc.latest.forget(&ObjectRef::from_obj(cached.as_ref()));
        return Ok(Action::await_change());
    };
    let mut pm = pm;
    // One line per pass; the kube-runtime span around it names what triggered the pass.
    tracing::debug!(object = %key(&pm), "proxmoxmachine pass");
    let deleting = pm.metadata.deletion_timestamp.is_some();
    let has_finalizer = pm.finalizers().iter().any(|f| f == MACHINE_FINALIZER);
    if deleting && !has_finalizer {
        ctx.metrics.remove_machine(&ns, &pm.name_any());
        return Ok(Action::await_change());
    }
    let machine = owner_machine(&mc, &pm);
    let cluster_name = machine
        .as_ref()
        .and_then(|m| m.cluster_name.clone())
        .or_else(|| pm.labels().get(CLUSTER_NAME_LABEL).cloned());
    let cluster = cluster_name
        .as_ref()
        .and_then(|c| mc.stores.cluster(&ns, c))
        .map(|o| ClusterView::from_dynamic(&o));
    let paused = cluster.as_ref().is_some_and(|c| c.paused)
        || machine.as_ref().is_some_and(|m| m.paused)
        || pm.annotations().contains_key(PAUSED_ANNOTATION);
    let mut work = (*pm).clone();
    set_paused(&mut work, cluster.as_ref().is_some_and(|c| c.paused), paused);
    if paused {
        persist(&mc, &pm, &work).await?;
        return Ok(Action::await_change());
    }
    let pc_name = cluster
        .as_ref()
        .and_then(|c| c.infrastructure_ref.as_ref())
        .map(|r| r.name.clone());
    let pc = match (&pc_name, &cluster_name) {
        (Some(n), _) => mc.stores.pc(&ns, n),
        // The Cluster is gone (e.g. deleted before its machines): find its ProxmoxCluster by label.
        (None, Some(c)) => mc.stores.readable_pcs().into_iter().find(|pc| {
            pc.namespace().as_deref() == Some(ns.as_str()) && pc.labels().get(CLUSTER_NAME_LABEL) == Some(c)
        }),
        (None, None) => None,
    }
    .map(|pc| mc.locations.latest.pick(pc));
    let settings = &ctx.settings.machine;
    if deleting {
        // The VM is deleted where it was created (`status.credentialsRef`), not where its zone
        // points now.
        let recorded = recorded_credentials(&pm);
        let rotation = rotation_secret(ctx, pc.as_deref(), recorded.as_ref());
        // Without the ProxmoxCluster a recorded zone Secret still reaches the VM.
        let view = match (&pc, &recorded) {
            (None, None) => ctx.proxmox.global().cloned(),
            _ => proxmox_client(&mc, pc.as_deref(), recorded.as_ref()).await.ok(),
        }
        .map(|c| mc.views.of(&ctx.proxmox, &c));
        return delete_passes(&mc, pm, view.as_ref(), pc.as_ref(), rotation.as_ref()).await;
    }
    let Some(machine) = machine else {
        tracing::info!(object = %key(&pm), "Machine Controller has not yet set OwnerRef");
        return Ok(Action::await_change());
    };
    let (Some(cluster), Some(pc)) = (cluster, pc) else {
        tracing::info!(object = %key(&pm), "waiting for the Cluster and its ProxmoxCluster");
        return Ok(Action::requeue(settings.resync));
    };
    if !has_finalizer {
        work.finalizers_mut().push(MACHINE_FINALIZER.to_owned());
        // Written with the reservation (before any Proxmox write); a machine that already has a
        // VMID gets it at once.
        if work.spec.virtual_machine_id.is_some() {
            pm = persist_meta(&mc, &pm, &work).await?;
            work = (*pm).clone();
        }
    }
    // The machine's zone (the failure domain's, when it selects one) decides its Proxmox cluster;
    // where the VM is created is recorded in the status before any VMID is reserved.
    let _ = zone::apply(&mut work.spec, &pc.spec, machine.failure_domain.as_deref());
    if zone::pin_credentials(&mut work, &pc) {
        pm = persist_status(&mc, &pm, &work).await?;
    }
    let zone_secret = zone::machine_credentials(&work, &pc);
    let zone_label = zone_secret
        .as_ref()
        .map(|r| (zone::machine_zone(&work.spec).to_owned(), zone::secret_label(r)));
    let in_zone = |e: MachineError| match &zone_label {
        Some((z, s)) => e.in_zone(z, s),
        None => e,
    };
    let rotation = rotation_secret(ctx, Some(&pc), zone_secret.as_ref());
    let proxmox = proxmox_client(&mc, Some(&pc), zone_secret.as_ref()).await?;
    let view = mc.views.of(&ctx.proxmox, &proxmox);
    let inputs = PassInputs {
        kube: &ctx.client,
        view: &view,
        machine: &machine,
        cluster_infrastructure_ready: cluster.infrastructure_provisioned,
        pc: &pc,
        settings,
        ipam_version: mc.ipam_version,
        caches: &mc.stores,
        locations: &mc.locations,
    };
    for pass in 1.. {
        let was_provisioned = pm.is_provisioned();
        let mut outcome = provision(&inputs, &mut work)
            .await
            .map_err(in_zone)
            .inspect_err(|e| note_auth_failure(ctx, rotation.as_ref(), &pm, e))?;
        outcome.error = outcome.error.map(in_zone);
        if let Some(err) = outcome.error.as_ref().filter(|e| e.is_auth())
            && !work.is_provisioned()
        {
            crate::machine::set_failure_condition(&mut work, err.reason(), err.to_string());
        }
        let phase = work
            .condition(api::VIRTUAL_MACHINE_PROVISIONED_CONDITION)
            .map(|c| c.reason.clone())
            .unwrap_or_default();
        record_phase(ctx, &work, &phase);
        let go_on = outcome.next == Next::Now && pass < MAX_CHAINED_PASSES && outcome.error.is_none();
        if go_on && outcome.step.status_can_wait() {
            // Metadata and spec (a reserved VMID) now; the status with the next step's.
            pm = persist_meta(&mc, &pm, &work).await?;
            view.arm(&ObjectRef::from_obj(pm.as_ref()));
            if let Some((reason, note)) = &outcome.warning {
                publish(&mc.recorder, &pm, true, reason, note.clone()).await;
            }
            continue;
        }
        pm = persist(&mc, &pm, &work).await?;
        view.arm(&ObjectRef::from_obj(pm.as_ref()));
        if let Some((reason, note)) = &outcome.warning {
            publish(&mc.recorder, &pm, true, reason, note.clone()).await;
        }
        if !was_provisioned && work.is_provisioned() {
            publish(
                &mc.recorder,
                &pm,
                false,
                api::PROVISIONED_REASON,
                "VM is provisioned".into(),
            )
            .await;
        }
        if let Some(err) = &outcome.error {
            ctx.metrics.reconcile_error(CONTROLLER, err.class());
            if err.is_auth() {
                note_auth_failure(ctx, rotation.as_ref(), &pm, err);
                publish(&mc.recorder, &pm, true, err.reason(), err.to_string()).await;
            }
            let delay = mc.errors.next_jittered(
                &key(&pm),
                settings.task_poll_initial,
                error_backoff_cap(err, settings),
            );
            tracing::warn!(object = %key(&pm), error = %err, retry_in = ?delay, "proxmoxmachine step failed");
            return Ok(Action::requeue(delay));
        }
        mc.errors.reset(&key(&pm));
        if outcome.next == Next::Now && pass < MAX_CHAINED_PASSES {
            work = (*pm).clone();
            continue;
        }
        return Ok(action(outcome.next, settings));
    }
    Ok(Action::await_change())
}

/// Deletion passes, several in a row while each says "go on now".
async fn delete_passes(
    mc: &MachineCtx,
    mut pm: Arc<ProxmoxMachine>,
    view: Option<&Arc<ProxmoxView>>,
    pc: Option<&Arc<ProxmoxCluster>>,
    rotation: Option<&(String, String)>,
) -> Result<Action, MachineError> {
    let ctx = &mc.ctx;
    let ns = pm.namespace().unwrap_or_default();
    let inputs = DeleteInputs {
        kube: &ctx.client,
        ipam_version: mc.ipam_version,
        view,
        pc,
        settings: &ctx.settings.machine,
        caches: &mc.stores,
        locations: &mc.locations,
    };
    for pass in 1.. {
        let mut work = (*pm).clone();
        let out = delete(&inputs, &mut work)
            .await
            .inspect_err(|e| note_auth_failure(ctx, rotation, &pm, e))?;
        if out.finished {
            work.finalizers_mut().retain(|f| f != MACHINE_FINALIZER);
            pm = persist_status(mc, &pm, &work).await?;
            persist_meta(mc, &pm, &work).await?;
            ctx.metrics.remove_machine(&ns, &pm.name_any());
            mc.latest.forget(&ObjectRef::from_obj(pm.as_ref()));
            publish(
                &mc.recorder,
                &pm,
                false,
                "Deleted",
                "VM, bootstrap ISO and IP claims removed".into(),
            )
            .await;
            return Ok(Action::await_change());
        }
        record_phase(ctx, &work, "Deleting");
        pm = persist(mc, &pm, &work).await?;
        if let Some(view) = view {
            view.arm(&ObjectRef::from_obj(pm.as_ref()));
        }
        if out.next == Next::Now && pass < MAX_CHAINED_PASSES {
            continue;
        }
        return Ok(action(out.next, &ctx.settings.machine));
    }
    Ok(Action::await_change())
}

/// Turns a pass's `Next` into a controller action.
fn action(next: Next, s: &MachineSettings) -> Action {
    match next {
        Next::Now => Action::requeue(Duration::from_millis(1)),
        Next::After(d) => Action::requeue(d),
        Next::Watch => Action::requeue(s.resync),
    }
}

fn record_phase(ctx: &Context, pm: &ProxmoxMachine, phase: &str) {
    let node = pm
        .status
        .as_ref()
        .and_then(|s| s.proxmox_node.clone())
        .unwrap_or_default();
    ctx.metrics
        .set_machine_phase(&pm.namespace().unwrap_or_default(), &pm.name_any(), phase, &node);
}

fn set_paused(pm: &mut ProxmoxMachine, cluster_paused: bool, paused: bool) {
    let generation = pm.metadata.generation;
    let status = pm.status.get_or_insert_with(Default::default);
    let list = status.conditions.get_or_insert_with(Vec::new);
    let annotation = paused && !cluster_paused;
    let desired = conditions::paused(cluster_paused, annotation, "ProxmoxMachine");
    conditions::set(list, &desired, generation, &crate::machine::now());
}

/// Writes metadata/spec and status changes; returns the newest copy (what the last write returned).
async fn persist(
    mc: &MachineCtx,
    old: &Arc<ProxmoxMachine>,
    new: &ProxmoxMachine,
) -> Result<Arc<ProxmoxMachine>, MachineError> {
    let after_meta = persist_meta(mc, old, new).await?;
    persist_status(mc, &after_meta, new).await
}

/// Patches labels, finalizers, `spec.virtualMachineID` and `spec.providerID` when they changed.
async fn persist_meta(
    mc: &MachineCtx,
    old: &Arc<ProxmoxMachine>,
    new: &ProxmoxMachine,
) -> Result<Arc<ProxmoxMachine>, MachineError> {
    let same = old.labels() == new.labels()
        && old.finalizers() == new.finalizers()
        && old.spec.virtual_machine_id == new.spec.virtual_machine_id
        && old.spec.provider_id == new.spec.provider_id;
    if same {
        return Ok(Arc::clone(old));
    }
    // The state this write leaves: the old object with the new metadata and spec.
    let mut expected = (**old).clone();
    expected.metadata.labels.clone_from(&new.metadata.labels);
    expected.metadata.finalizers = Some(new.finalizers().to_vec());
    expected.spec.virtual_machine_id = new.spec.virtual_machine_id;
    expected.spec.provider_id.clone_from(&new.spec.provider_id);
    mc.latest.expect(
        &ObjectRef::from_obj(old.as_ref()),
        watches::pm_fingerprint(&expected),
    );
    let body = json!({
        "metadata": {
            "labels": new.metadata.labels,
            "finalizers": new.finalizers(),
        },
        "spec": {
            "virtualMachineID": new.spec.virtual_machine_id,
            "providerID": new.spec.provider_id,
        }
    });
    let api: Api<ProxmoxMachine> =
        Api::namespaced(mc.ctx.client.clone(), &old.namespace().unwrap_or_default());
    let written = api
        .patch(&old.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await;
    remember_write(mc, old, written, "patching ProxmoxMachine")
}

/// Records a patch's result as this controller's latest copy (trimmed as the cache keeps it);
/// a machine that is gone keeps `old`.
fn remember_write(
    mc: &MachineCtx,
    old: &Arc<ProxmoxMachine>,
    written: Result<ProxmoxMachine, kube::Error>,
    action: &str,
) -> Result<Arc<ProxmoxMachine>, MachineError> {
    match written {
        Ok(mut written) => {
            watches::trim_meta(&mut written.metadata);
            mc.latest.record(written.clone());
            Ok(Arc::new(written))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Arc::clone(old)),
        Err(e) => Err(MachineError::kube(format!("{action} {}", key(old)))(e)),
    }
}

/// Merge-patches the status when it changed.
async fn persist_status(
    mc: &MachineCtx,
    old: &Arc<ProxmoxMachine>,
    new: &ProxmoxMachine,
) -> Result<Arc<ProxmoxMachine>, MachineError> {
    if old.status == new.status {
        return Ok(Arc::clone(old));
    }
    // A merge patch of the new status alone cannot clear fields (`None` is not serialised), so a
    // cleared `taskRef` or `retryAfter` would come back on the next read: send the difference,
    // with `null` for every removed field.
    let to_value = |pm: &ProxmoxMachine| serde_json::to_value(&pm.status).unwrap_or(Value::Null);
    let body = json!({ "status": crate::merge_patch::diff(&to_value(old), &to_value(new)) });
    let mut expected = (**old).clone();
    expected.status.clone_from(&new.status);
    mc.latest.expect(
        &ObjectRef::from_obj(old.as_ref()),
        watches::pm_fingerprint(&expected),
    );
    let api: Api<ProxmoxMachine> =
        Api::namespaced(mc.ctx.client.clone(), &old.namespace().unwrap_or_default());
    let written = api
        .patch_status(&old.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await;
    remember_write(mc, old, written, "patching status of ProxmoxMachine")
}

async fn publish(recorder: &Recorder, pm: &ProxmoxMachine, warning: bool, reason: &str, note: String) {
    let ev = Event {
        type_: if warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: reason.to_owned(),
        note: Some(note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &pm.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing event failed");
    }
}

/// The longest a machine waits after a streak of errors: 5 minutes when Proxmox refused the
/// credentials (a rotated Secret requeues the machine at once); else the longest task poll, at
/// least 5 s (faults come in bursts; a machine that failed a few times in a row must not sit out
/// a minute once Proxmox answers again — the shared list keeps the request rate low anyway).
fn error_backoff_cap(err: &MachineError, s: &MachineSettings) -> Duration {
    if err.is_auth() {
        cluster::error::AUTH_BACKOFF_CAP.max(s.task_poll_max)
    } else {
        s.task_poll_max.max(Duration::from_secs(5))
    }
}

/// Remembers that Proxmox refused the credentials `pm` uses, so that a change of that credentials
/// Secret (`secret`, see [`rotation_secret`]) requeues it at once.
fn note_auth_failure(
    ctx: &Context,
    secret: Option<&(String, String)>,
    pm: &ProxmoxMachine,
    e: &MachineError,
) {
    if !e.is_auth() {
        return;
    }
    if let Some(secret) = secret.cloned() {
        let object = (pm.namespace().unwrap_or_default(), pm.name_any());
        ctx.proxmox.wait_for_rotation(secret, object);
    }
}

fn error_policy(pm: Arc<Watched>, err: &MachineError, mc: Arc<MachineCtx>) -> Action {
    let s = &mc.ctx.settings.machine;
    mc.ctx.metrics.reconcile_error(CONTROLLER, err.class());
    let delay = mc.errors.next_jittered(
        &key_of(pm.as_ref()),
        s.task_poll_initial,
        error_backoff_cap(err, s),
    );
    tracing::warn!(object = %key_of(pm.as_ref()), error = %err, retry_in = ?delay, "proxmoxmachine reconcile failed");
    Action::requeue(delay)
}
