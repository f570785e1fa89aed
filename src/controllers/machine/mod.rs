//! The ProxmoxMachine controller: watches ProxmoxMachines and what their progress depends on
//! (owner Machines, their IPAddressClaims and IPAddresses, ProxmoxClusters, Clusters and bootstrap
//! Secrets) into caches ([`watches`]), and reconciles each machine ([`reconcile`]): the owner
//! objects from the caches, pause rules and the finalizer, then passes of the machine adapter
//! ([`crate::machine`]) — several in a row while each says "go on" — persisting the working copy
//! after each with at most one metadata/spec patch and one status patch ([`persist`]). Reads see
//! this controller's own writes (the objects its writes returned) without a GET.

mod clients;
mod persist;
mod reconcile;
mod watches;

use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::controllers::events::Recorder;
use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::capi::{
    CLUSTER_GROUP, CLUSTER_KIND, CLUSTER_PLURAL, IPAM_GROUP, MACHINE_KIND, MACHINE_PLURAL,
};
use capmox_api::consts::CLUSTER_NAME_LABEL;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

use super::cluster::Backoff;
use super::decoded::Decoded;
use super::instrument::{Instrument, RunInstrumented};
use super::scope;
use super::triggers::changes;
use crate::context::{Context, ControllerSettings};
use crate::ipam::IpamApiVersion;
use crate::machine::MachineError;
use crate::machine::latest::Latest;
use crate::machine::locations::Locations;
use crate::proxmox::Client;
use watches::Stores;

pub use watches::machine_of_claim;

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxmachine";
/// Field manager of this controller's patches.
pub const FIELD_MANAGER: &str = "capmox-proxmoxmachine";

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

/// A watched ProxmoxMachine (see [`super::decoded`]: one that cannot be read does not stop the others).
pub(crate) type Watched = Decoded<ProxmoxMachine>;
/// A watched ProxmoxCluster.
pub(crate) type WatchedPc = Decoded<ProxmoxCluster>;

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

/// The kinds of the dynamic caches, in the versions the API server serves.
struct Kinds {
    machine: ApiResource,
    cluster: ApiResource,
    claim: ApiResource,
    address: ApiResource,
    ipam_version: IpamApiVersion,
}

async fn discover(client: &kube::Client) -> Kinds {
    let capi = served_version(client, CLUSTER_GROUP, &["v1beta2", "v1beta1"]).await;
    let ipam_version = crate::ipam::served_ipam_version(client).await;
    let ipam = match ipam_version {
        IpamApiVersion::V1beta2 => "v1beta2",
        IpamApiVersion::V1beta1 => "v1beta1",
    };
    Kinds {
        machine: resource(CLUSTER_GROUP, capi, MACHINE_KIND, MACHINE_PLURAL),
        cluster: resource(CLUSTER_GROUP, capi, CLUSTER_KIND, CLUSTER_PLURAL),
        claim: resource(IPAM_GROUP, ipam, "IPAddressClaim", "ipaddressclaims"),
        address: resource(IPAM_GROUP, ipam, "IPAddress", "ipaddresses"),
        ipam_version,
    }
}

/// The API of a namespaced kind, in the watched namespace or all of them.
fn api_for<K>(c: &kube::Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(c.clone(), ns),
        None => Api::all(c.clone()),
    }
}

/// The API of a dynamic kind, in the watched namespace or all of them.
fn dyn_api(c: &kube::Client, ns: Option<&str>, ar: &ApiResource) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(c.clone(), ns, ar),
        None => Api::all_with(c.clone(), ar),
    }
}

/// A reflector of a dynamic kind: its store and watch stream, trimmed as `trim` says.
fn dyn_reflector(
    client: &kube::Client,
    settings: &ControllerSettings,
    ar: &ApiResource,
    trim: impl FnMut(&mut DynamicObject) + Send + 'static,
) -> (
    reflector::Store<DynamicObject>,
    impl futures::Stream<Item = Result<watcher::Event<DynamicObject>, watcher::Error>> + Send + 'static,
) {
    let writer = reflector::store::Writer::<DynamicObject>::new(ar.clone());
    let store = writer.as_reader();
    let stream = scope::watch(
        settings,
        |ns| dyn_api(client, ns, ar),
        watcher::Config::default().any_semantic(),
    )
    .default_backoff()
    .modify(trim)
    .reflect(writer);
    (store, stream)
}

/// Runs the ProxmoxMachine controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let ns = &ctx.settings;
    let inst = Instrument::new(&ctx, CONTROLLER, ctx.settings.machine_concurrency());
    let kinds = discover(&client).await;
    let wc = || watcher::Config::default().any_semantic();
    let (pms, pm_writer) = reflector::store::<Watched>();
    let (pcs, pc_writer) = reflector::store::<WatchedPc>();
    let (pools, pool_writer) = reflector::store::<InClusterIPPool>();
    let (machines, machine_stream) = dyn_reflector(&client, ns, &kinds.machine, watches::trim_machine);
    let (clusters, cluster_stream) = dyn_reflector(&client, ns, &kinds.cluster, |c| {
        watches::trim_status(c, &["initialization", "infrastructureReady"]);
    });
    let (claims, claim_stream) =
        dyn_reflector(&client, ns, &kinds.claim, |c| watches::trim_meta(&mut c.metadata));
    let (addresses, address_stream) = dyn_reflector(&client, ns, &kinds.address, |a| {
        watches::trim_meta(&mut a.metadata)
    });
    let stores = Stores {
        pms: pms.clone(),
        machines,
        clusters,
        pcs,
        claims,
        addresses,
        pools,
        machine_ar: kinds.machine.clone(),
        cluster_ar: kinds.cluster.clone(),
        claim_ar: kinds.claim.clone(),
        address_ar: kinds.address.clone(),
    };
    let latest: Arc<Latest<ProxmoxMachine>> = Arc::default();
    let woken = ctx.views.subscribe(crate::machine::OWNER_KIND);
    let mc = Arc::new(MachineCtx {
        recorder: super::recorder(client.clone()),
        errors: Backoff::default(),
        stores: stores.clone(),
        latest: Arc::clone(&latest),
        locations: Locations::default(),
        ipam_version: kinds.ipam_version,
        credentials: Mutex::default(),
        caches_ready: tokio::sync::Mutex::new(false),
        ctx: ctx.clone(),
    });

    // With `--watch-filter` only the labelled ProxmoxMachines are watched (and reconciled).
    let pm_stream = scope::watch(ns, |ns| api_for::<Watched>(&client, ns), ns.primary_watch(wc()))
        .default_backoff()
        .modify(|pm| watches::trim_meta(pm.meta_mut()))
        .reflect(pm_writer)
        .applied_objects();
    let pm_stream = inst.objects(watches::not_own_writes(pm_stream, Arc::clone(&latest)));
    let machine_stream = changes(machine_stream, watches::machine_fingerprint, |_| true);
    let cluster_stream = changes(cluster_stream, watches::cluster_fingerprint, |_| true);
    let pc_stream = scope::watch(ns, |ns| api_for::<WatchedPc>(&client, ns), wc())
        .default_backoff()
        .modify(|pc| watches::trim_meta(pc.meta_mut()))
        .reflect(pc_writer);
    let pc_stream = changes(pc_stream, watches::pc_fingerprint, |_| true);
    let claim_stream = changes(claim_stream, watches::claim_fingerprint, |c: &DynamicObject| {
        c.data.pointer("/status/addressRef/name").is_some()
    });
    let address_stream = changes(address_stream, |_| 0, |_| true);
    // Cached only: the stream is polled by the controller but never triggers.
    let pool_stream = scope::watch(ns, |ns| api_for::<InClusterIPPool>(&client, ns), wc())
        .default_backoff()
        .modify(|p| watches::trim_meta(&mut p.metadata))
        .reflect(pool_writer)
        .applied_objects()
        .filter(|_| futures::future::ready(false));
    let (secret_stream, credentials_stream) = secret_streams(&client, ns);
    let mc_secrets = Arc::clone(&mc);
    let stop = super::shutdown_signal(shutdown);
    let [s1, s2, s3, s4, s5, s6] = std::array::from_fn(|_| stores.clone());
    Controller::for_stream(pm_stream, pms)
        .watches_stream_with(
            machine_stream,
            inst.mapper(|m| watches::machine_to_pm(&m)),
            kinds.machine.clone(),
        )
        .watches_stream_with(
            claim_stream,
            inst.mapper(move |c| watches::claim_to_pm(&c, &s1)),
            kinds.claim.clone(),
        )
        .watches_stream_with(
            address_stream,
            inst.mapper(move |a| watches::address_to_pm(&a, &s2)),
            kinds.address.clone(),
        )
        .watches_stream(pc_stream, inst.mapper(move |pc| watches::pc_to_pms(&pc, &s3.pms)))
        .watches_stream_with(
            cluster_stream,
            inst.mapper(move |c: DynamicObject| watches::by_cluster(&s4.pms, c.namespace(), &c.name_any())),
            kinds.cluster.clone(),
        )
        .watches_stream(
            secret_stream,
            inst.mapper(move |s| watches::secret_to_pm(&s, &s5)),
        )
        .watches_stream(credentials_stream, inst.mapper(move |s| rotated(&mc_secrets, &s)))
        .watches_stream(pool_stream, move |_| {
            let _ = &s6;
            None::<ObjectRef<Watched>>
        })
        .reconcile_on(inst.refs(woken.map(|o| ObjectRef::<Watched>::new(&o.name).within(&o.namespace))))
        .with_config(Config::default().concurrency(ctx.settings.machine_concurrency()))
        .graceful_shutdown_on(stop)
        .run_instrumented(&inst, reconcile::reconcile, error_policy, mc)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "proxmoxmachine reconcile failed");
            }
        })
        .await;
}

/// Bootstrap Secrets (labelled with their cluster) and every Secret's metadata: any Secret may
/// hold credentials (they carry no label), and a change requeues just the machines whose
/// credentials Proxmox refused (they would otherwise wait out a backoff of up to 5 minutes).
fn secret_streams(
    client: &kube::Client,
    ns: &ControllerSettings,
) -> (
    impl futures::Stream<Item = Result<PartialObjectMeta<Secret>, watcher::Error>> + Send + 'static,
    impl futures::Stream<Item = Result<PartialObjectMeta<Secret>, watcher::Error>> + Send + 'static,
) {
    let wc = || watcher::Config::default().any_semantic();
    let hash = |s: &PartialObjectMeta<Secret>| super::triggers::hash_of(&s.metadata.resource_version);
    let bootstrap = changes(
        scope::watch(
            ns,
            |ns| api_for::<PartialObjectMeta<Secret>>(client, ns),
            wc().labels(CLUSTER_NAME_LABEL),
        )
        .default_backoff(),
        hash,
        |_| true,
    );
    let credentials = changes(
        scope::watch(ns, |ns| api_for::<PartialObjectMeta<Secret>>(client, ns), wc()).default_backoff(),
        hash,
        |_| true,
    );
    (bootstrap, credentials)
}

/// A Secret changed: it may hold rotated credentials, so the next pass builds its client anew,
/// and the machines whose credentials Proxmox refused are requeued.
fn rotated(mc: &MachineCtx, s: &PartialObjectMeta<Secret>) -> Vec<ObjectRef<Watched>> {
    let (ns, name) = (s.namespace().unwrap_or_default(), s.name_any());
    mc.credentials
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .remove(&(ns.clone(), name.clone()));
    mc.ctx
        .proxmox
        .take_rotation_waiters(&ns, &name)
        .into_iter()
        .map(|(ns, name)| ObjectRef::<Watched>::new(&name).within(&ns))
        .collect()
}

fn error_policy(pm: Arc<Watched>, err: &MachineError, mc: Arc<MachineCtx>) -> Action {
    let s = &mc.ctx.settings.machine;
    mc.ctx.metrics.reconcile_error(CONTROLLER, err.class());
    let delay = mc.errors.next_jittered(
        &key_of(pm.as_ref()),
        s.task_poll_initial,
        reconcile::error_backoff_cap(err, s),
    );
    tracing::warn!(object = %key_of(pm.as_ref()), error = %err, retry_in = ?delay, "proxmoxmachine reconcile failed");
    Action::requeue(delay)
}
