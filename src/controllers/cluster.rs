//! The ProxmoxCluster controller: watches ProxmoxClusters, their Clusters, credentials Secrets,
//! created InClusterIPPools and the cluster's ProxmoxMachines; each reconcile fetches the owner
//! Cluster, applies pause and managed-by rules, calls the service ([`crate::cluster`]) and writes
//! the status back in one patch when it changed.

use std::collections::HashMap;
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::controllers::events::{Event, EventType, Recorder};
use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::capi::{
    CLUSTER_GROUP, CLUSTER_KIND, CLUSTER_PLURAL, MANAGED_BY_ANNOTATION, api_version_in_group,
};
use capmox_api::consts::{CLUSTER_NAME_LABEL, GROUP, PAUSED_ANNOTATION};
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxClusterStatus, ProxmoxMachine};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::decoded::{self, Decoded};
use super::instrument::{Instrument, RunInstrumented};
use super::scope;
use super::triggers::{changes, hash_of};
use crate::cluster::pool_schema::PoolFieldSupport;
use crate::cluster::{self, ClusterError, FIELD_MANAGER, readiness};
use crate::context::Context;

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxcluster";

/// Per-object exponential backoff after errors, reset by a successful reconcile.
#[derive(Debug, Default)]
pub struct Backoff {
    attempts: Mutex<HashMap<String, u32>>,
}

impl Backoff {
    /// The delay before the next retry of `key`, doubling from `base` up to `cap`.
    pub fn next(&self, key: &str, base: Duration, cap: Duration) -> Duration {
        let mut m = self
            .attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let n = m.entry(key.to_owned()).or_insert(0);
        let delay = base.saturating_mul(2u32.saturating_pow((*n).min(16))).min(cap);
        *n = n.saturating_add(1);
        delay
    }

    /// [`Backoff::next`] plus up to 10 % random jitter, so failing objects spread out.
    pub fn next_jittered(&self, key: &str, base: Duration, cap: Duration) -> Duration {
        use rand::Rng;
        let delay = self.next(key, base, cap);
        let max_ms = u64::try_from(delay.as_millis() / 10).unwrap_or(u64::MAX);
        delay + Duration::from_millis(rand::rng().random_range(0..=max_ms))
    }

    /// Forgets the error streak of `key`.
    pub fn reset(&self, key: &str) {
        self.attempts
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(key);
    }
}

/// What the controller's reconcile function gets: the shared context plus this controller's
/// event recorder and backoff state.
struct ClusterCtx {
    ctx: Arc<Context>,
    recorder: Recorder,
    backoff: Backoff,
    /// When each cluster's node inventory was last refreshed.
    inventory_at: Mutex<HashMap<String, Instant>>,
    /// What the served InClusterIPPool CRD declares (read once, refreshed now and then).
    pool_fields: PoolFieldSupport,
    /// Pools applied and probes done lately, per cluster.
    memo: Arc<cluster::Memo>,
}

impl ClusterCtx {
    /// Fresh per-controller state around `ctx`, remembering applied pools through `memo`.
    fn new(ctx: Arc<Context>, memo: Arc<cluster::Memo>) -> Self {
        Self {
            recorder: super::recorder(ctx.client.clone()),
            backoff: Backoff::default(),
            inventory_at: Mutex::new(HashMap::new()),
            pool_fields: PoolFieldSupport::default(),
            memo,
            ctx,
        }
    }

    /// Whether the node inventory of `key` is due. Keeping the refresh on its own clock stops
    /// inventory-only status writes from re-triggering refreshes.
    fn inventory_due(&self, key: &str) -> bool {
        let m = self
            .inventory_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        m.get(key)
            .is_none_or(|t| t.elapsed() >= self.ctx.settings.cluster.inventory_interval)
    }

    /// Records that the inventory of `key` was refreshed now.
    fn inventory_refreshed(&self, key: &str) {
        self.inventory_at
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .insert(key.to_owned(), Instant::now());
    }
}

/// A watched ProxmoxCluster (see [`decoded`]: one that cannot be read does not stop the others).
type Watched = Decoded<ProxmoxCluster>;

fn key<K: kube::Resource>(pc: &K) -> String {
    format!("{}/{}", pc.namespace().unwrap_or_default(), pc.name_any())
}

/// Runs the ProxmoxCluster controller until `shutdown` completes (then finishes in-flight
/// reconciles and returns).
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let c = ctx.client.clone();
    let settings = &ctx.settings;
    let cluster_ar = cluster_api_resource(&c).await;
    let inst = Instrument::new(&ctx, CONTROLLER, settings.cluster_concurrency());

    let stop = super::shutdown_signal(shutdown);
    let (pool_cache, pool_writer) = kube::runtime::reflector::store::<InClusterIPPool>();
    let memo = Arc::new(cluster::Memo::with_pools(pool_cache));
    let cctx = Arc::new(ClusterCtx::new(ctx.clone(), Arc::clone(&memo)));

    let wc = watcher::Config::default().any_semantic();
    // Only what a ProxmoxCluster depends on triggers it: a Cluster's pause, readiness, endpoint,
    // references and deletion; a pool's spec or deletion (then it is applied again); a
    // ProxmoxMachine being deleted or gone (a deletion waits for them) — not their status.
    let cluster_events = changes(
        scope::watch(settings, |ns| scoped_dyn(&c, ns, &cluster_ar), wc.clone()).default_backoff(),
        cluster_fingerprint,
        |_| true,
    );
    let pool_events = changes(
        scope::watch(settings, |ns| scoped::<InClusterIPPool>(&c, ns), wc.clone())
            .default_backoff()
            .reflect(pool_writer),
        |p: &InClusterIPPool| {
            hash_of((
                p.metadata.generation,
                p.labels().iter().collect::<Vec<_>>(),
                p.annotations().iter().collect::<Vec<_>>(),
                p.metadata.deletion_timestamp.is_some(),
            ))
        },
        |_| true,
    );
    let probe = Arc::clone(inst.probe());
    let pool_events = pool_events.inspect(move |p| {
        for o in p
            .iter()
            .flat_map(|p| p.owner_references())
            .filter(|o| o.kind == "ProxmoxCluster")
        {
            probe.triggered(p.as_ref().ok().and_then(|p| p.namespace()).as_deref(), &o.name);
        }
    });
    let machine_events = changes(
        scope::watch(
            settings,
            |ns| scoped::<PartialObjectMeta<ProxmoxMachine>>(&c, ns),
            wc.clone(),
        )
        .default_backoff(),
        |m: &PartialObjectMeta<ProxmoxMachine>| hash_of(m.metadata.deletion_timestamp.is_some()),
        |_| false,
    );
    // The ProxmoxClusters themselves trigger on what a reconcile reads of them — spec
    // (generation), metadata and deletion — not on status writes (the machine controller writes
    // `status.nodeLocations` with every reservation). With `--watch-filter` only the labelled
    // ones are watched.
    let (store, pc_writer) = kube::runtime::reflector::store::<Watched>();
    let pc_events = changes(
        scope::watch(
            settings,
            |ns| scoped::<Watched>(&c, ns),
            settings.primary_watch(wc.clone()),
        )
        .default_backoff()
        .reflect(pc_writer),
        |pc: &Watched| {
            hash_of((
                pc.meta().generation,
                pc.labels().iter().collect::<Vec<_>>(),
                pc.annotations().iter().collect::<Vec<_>>(),
                pc.finalizers(),
                pc.owner_references()
                    .iter()
                    .map(|o| o.uid.clone())
                    .collect::<Vec<_>>(),
                pc.meta().deletion_timestamp.is_some(),
            ))
        },
        |_| true,
    );
    let secret_events = scope::watch(
        settings,
        |ns| scoped::<PartialObjectMeta<Secret>>(&c, ns),
        wc.clone(),
    )
    .default_backoff()
    .touched_objects();
    let controller = Controller::for_stream(inst.objects(pc_events), store.clone());
    let (s1, s2, s3) = (store.clone(), store.clone(), store);
    controller
        .watches_stream_with(
            cluster_events,
            inst.mapper(move |c| cluster_to_pcs(&c, &s1)),
            cluster_ar,
        )
        .owns_stream(pool_events)
        .watches_stream(machine_events, inst.mapper(move |m| machine_to_pcs(&m, &s2)))
        .watches_stream(secret_events, inst.mapper(move |s| secret_to_pcs(&s, &s3)))
        .with_config(Config::default().concurrency(ctx.settings.cluster_concurrency()))
        .graceful_shutdown_on(stop)
        .run_instrumented(&inst, reconcile, error_policy, cctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "proxmoxcluster reconcile failed");
            }
        })
        .await;
}

/// The API of a namespaced kind in `ns` (`None`: all namespaces).
fn scoped<K>(c: &kube::Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<Scope = k8s_openapi::NamespaceResourceScope>,
    <K as Resource>::DynamicType: Default,
{
    match ns {
        Some(ns) => Api::namespaced(c.clone(), ns),
        None => Api::all(c.clone()),
    }
}

/// The API of a dynamic kind in `ns` (`None`: all namespaces).
fn scoped_dyn(c: &kube::Client, ns: Option<&str>, ar: &ApiResource) -> Api<DynamicObject> {
    match ns {
        Some(ns) => Api::namespaced_with(c.clone(), ns, ar),
        None => Api::all_with(c.clone(), ar),
    }
}

/// What a ProxmoxCluster reads of its Cluster: pause, deletion, references and endpoint.
fn cluster_fingerprint(c: &DynamicObject) -> u64 {
    let view = capmox_api::capi::views::ClusterView::from_dynamic(c);
    hash_of((
        view.paused,
        view.deleting,
        view.infrastructure_provisioned,
        c.data.pointer("/spec/infrastructureRef").map(Value::to_string),
        c.data.pointer("/spec/controlPlaneEndpoint").map(Value::to_string),
        c.metadata.uid.as_deref(),
    ))
}

/// The Cluster API resource to watch: `v1beta2` when served, else `v1beta1`.
async fn cluster_api_resource(client: &kube::Client) -> ApiResource {
    let version = match client.list_api_groups().await {
        Ok(groups) => groups
            .groups
            .iter()
            .find(|g| g.name == CLUSTER_GROUP)
            .and_then(|g| {
                let served: Vec<&str> = g.versions.iter().map(|v| v.version.as_str()).collect();
                ["v1beta2", "v1beta1"].into_iter().find(|v| served.contains(v))
            })
            .unwrap_or("v1beta2"),
        Err(e) => {
            tracing::warn!(error = %e, "API discovery failed; watching cluster.x-k8s.io/v1beta2 Clusters");
            "v1beta2"
        }
    };
    ApiResource::from_gvk_with_plural(
        &GroupVersionKind::gvk(CLUSTER_GROUP, version, CLUSTER_KIND),
        CLUSTER_PLURAL,
    )
}

/// Cluster → its ProxmoxCluster: by `spec.infrastructureRef` (v1beta2 `apiGroup` or v1beta1
/// `apiVersion`) and by ProxmoxClusters whose owner is this Cluster.
fn cluster_to_pcs(c: &DynamicObject, store: &Store<Watched>) -> Vec<ObjectRef<Watched>> {
    let ns = c.namespace().unwrap_or_default();
    let mut out = Vec::new();
    if let Some(r) = c.data.pointer("/spec/infrastructureRef") {
        let s = |k: &str| r.get(k).and_then(Value::as_str);
        let ours =
            s("apiGroup") == Some(GROUP) || s("apiVersion").is_some_and(|v| api_version_in_group(v, GROUP));
        if ours
            && s("kind") == Some("ProxmoxCluster")
            && let Some(name) = s("name")
        {
            out.push(ObjectRef::new(name).within(s("namespace").unwrap_or(&ns)));
        }
    }
    let name = c.name_any();
    for pc in store.state() {
        if pc.namespace().as_deref() == Some(ns.as_str())
            && cluster::owner::owner_ref(pc.meta()).is_some_and(|(_, n)| n == name)
        {
            out.push(ObjectRef::from_obj(pc.as_ref()));
        }
    }
    out
}

/// ProxmoxMachine → the ProxmoxCluster(s) of its `cluster.x-k8s.io/cluster-name` (a deletion
/// waiting for machines continues as soon as the last one is gone).
fn machine_to_pcs(m: &PartialObjectMeta<ProxmoxMachine>, store: &Store<Watched>) -> Vec<ObjectRef<Watched>> {
    let Some(cluster_name) = m.labels().get(CLUSTER_NAME_LABEL) else {
        return Vec::new();
    };
    let ns = m.namespace();
    store
        .state()
        .into_iter()
        .filter(|pc| {
            pc.namespace() == ns
                && pc
                    .ok()
                    .is_some_and(|pc| cluster::cluster_name(pc, None) == *cluster_name)
        })
        .map(|pc| ObjectRef::from_obj(pc.as_ref()))
        .collect()
}

/// Secret → the ProxmoxClusters referencing it, as their own or a zone's credentials (a created or
/// rotated Secret is picked up at once).
fn secret_to_pcs(s: &PartialObjectMeta<Secret>, store: &Store<Watched>) -> Vec<ObjectRef<Watched>> {
    let key = (s.namespace().unwrap_or_default(), s.name_any());
    store
        .state()
        .into_iter()
        .filter(|pc| {
            pc.ok()
                .is_some_and(|pc| cluster::secret_key(pc).as_ref() == Some(&key) || zone_secret(pc, &key))
        })
        .map(|pc| ObjectRef::from_obj(pc.as_ref()))
        .collect()
}

/// One reconcile of `pc` exactly as given, with fresh controller state (no memo of applied pools
/// or probes, no backoff). A watch cache can hand the controller a copy older than the object;
/// this lets tests and tools show what a reconcile of such a copy does. The controller itself
/// runs [`run`].
pub async fn reconcile_copy(ctx: Arc<Context>, pc: ProxmoxCluster) -> Result<Action, ClusterError> {
    let (pools, _writer) = kube::runtime::reflector::store::<InClusterIPPool>();
    let cctx = Arc::new(ClusterCtx::new(ctx, Arc::new(cluster::Memo::with_pools(pools))));
    reconcile(Arc::new(Decoded::Ok(Arc::new(pc))), cctx).await
}

/// Whether a zone of `pc` names the Secret `key` as its own credentials.
fn zone_secret(pc: &ProxmoxCluster, key: &(String, String)) -> bool {
    cluster::zones::zones_with_credentials(pc).iter().any(|z| {
        crate::machine::zone::zone_credentials(pc, z)
            .is_some_and(|r| r.namespace.as_ref() == Some(&key.0) && r.name.as_ref() == Some(&key.1))
    })
}

/// One reconcile; every error is also published as a Warning event on the object (its status
/// already carries the failed step's reason, see [`cluster::record_failure`]), except a conflict:
/// the copy was out of date and the newer copy's reconcile follows.
async fn reconcile(watched: Arc<Watched>, cc: Arc<ClusterCtx>) -> Result<Action, ClusterError> {
    let pc = match watched.as_ref() {
        Decoded::Ok(pc) => pc.clone(),
        Decoded::Unreadable(u) => {
            decoded::report(&cc.recorder, &watched, u).await;
            return Ok(Action::await_change());
        }
    };
    let result = reconcile_inner(&pc, &cc).await;
    if let Some(e) = result.as_ref().err().filter(|e| !e.is_conflict()) {
        publish(
            &cc.recorder,
            &pc,
            readiness::Transition {
                warning: true,
                reason: e.reason(),
                note: e.to_string(),
            },
        )
        .await;
    }
    result
}

async fn reconcile_inner(pc: &ProxmoxCluster, cc: &ClusterCtx) -> Result<Action, ClusterError> {
    let ctx = &cc.ctx;
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    if pc.annotations().contains_key(MANAGED_BY_ANNOTATION) {
        tracing::debug!(object = %key(pc), "externally managed; skipping");
        return Ok(Action::await_change());
    }
    if pc.annotations().contains_key(super::DELETE_FOR_MOVE_ANNOTATION) {
        tracing::debug!(object = %key(pc), "moved by clusterctl; leaving the source object alone");
        return Ok(Action::await_change());
    }
    let ns = pc.namespace().unwrap_or_default();
    let owner = match cluster::owner::fetch(&ctx.client, &ns, &pc.metadata).await {
        Ok(o) => o,
        Err(e) => {
            let mut status = pc.status.clone().unwrap_or_default();
            cluster::record_failure(&mut status, &e, pc.metadata.generation);
            write_status(ctx, pc, &status).await?;
            return Err(e);
        }
    };
    let annotation_paused = pc.annotations().contains_key(PAUSED_ANNOTATION);
    let cluster_paused = owner.as_ref().is_some_and(|o| o.paused);
    if annotation_paused || cluster_paused {
        let mut status = pc.status.clone().unwrap_or_default();
        readiness::apply_paused(
            &mut status,
            cluster_paused,
            annotation_paused,
            pc.metadata.generation,
            &now(),
        );
        write_status(ctx, pc, &status).await?;
        return Ok(Action::await_change());
    }
    let outcome = if pc.metadata.deletion_timestamp.is_some() {
        cc.memo.forget(&key(pc));
        cluster::reconcile_delete(ctx, pc, owner.as_ref()).await
    } else {
        let Some(owner) = owner else {
            tracing::info!(object = %key(pc), "Waiting for Cluster Controller to set OwnerRef on ProxmoxCluster");
            return Ok(Action::await_change());
        };
        let due = cc.inventory_due(&key(pc));
        let outcome = cluster::reconcile_normal(ctx, pc, &owner, due, &cc.pool_fields, &cc.memo).await;
        let ready = outcome.status.initialization.as_ref().and_then(|i| i.provisioned) == Some(true)
            && outcome.result.is_ok();
        if due && ready {
            cc.inventory_refreshed(&key(pc));
        }
        outcome
    };
    if outcome.result.as_ref().is_err_and(ClusterError::is_conflict) {
        // The copy was out of date (its status too): nothing of it is written.
        return outcome.result;
    }
    let old = pc.status.clone().unwrap_or_default();
    write_status(ctx, pc, &outcome.status).await?;
    for t in readiness::transitions(&old, &outcome.status)
        .into_iter()
        .chain(outcome.events)
    {
        publish(&cc.recorder, pc, t).await;
    }
    if outcome.result.is_ok() {
        cc.backoff.reset(&key(pc));
    }
    outcome.result
}

fn now() -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Time {
    k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(k8s_openapi::jiff::Timestamp::now())
}

/// Merge-patches the owned status fields `status` changed relative to the copy `pc` the
/// reconcile started from (see [`cluster::status_patch`]: an old copy never puts old values back).
async fn write_status(
    ctx: &Context,
    pc: &ProxmoxCluster,
    status: &ProxmoxClusterStatus,
) -> Result<(), ClusterError> {
    let before = pc.status.clone().unwrap_or_default();
    let Some(body) = cluster::status_patch::status_patch(&before, status) else {
        return Ok(());
    };
    let api: Api<ProxmoxCluster> = Api::namespaced(ctx.client.clone(), &pc.namespace().unwrap_or_default());
    match api
        .patch_status(
            &pc.name_any(),
            &PatchParams::apply(FIELD_MANAGER),
            &Patch::Merge(&body),
        )
        .await
    {
        Ok(_) => Ok(()),
        // The object went away (finalizer removed and deleted) in the meantime.
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(source) => Err(ClusterError::Kube {
            reason: cluster::error::STATUS_PATCH_FAILED_REASON,
            action: "patching ProxmoxCluster status".into(),
            source,
        }),
    }
}

async fn publish(recorder: &Recorder, pc: &ProxmoxCluster, t: readiness::Transition) {
    let ev = Event {
        type_: if t.warning {
            EventType::Warning
        } else {
            EventType::Normal
        },
        reason: t.reason.to_owned(),
        note: Some(t.note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &pc.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing event failed");
    }
}

fn error_policy(pc: Arc<Watched>, err: &ClusterError, cc: Arc<ClusterCtx>) -> Action {
    let s = &cc.ctx.settings.cluster;
    cc.ctx.metrics.reconcile_error(CONTROLLER, err.reason());
    // Refused credentials are not retried hot: up to 5 minutes apart (a rotated Secret requeues
    // the cluster at once through the Secret watch).
    let cap = match err.kind() {
        cluster::ErrorKind::Auth => cluster::error::AUTH_BACKOFF_CAP.max(s.backoff_cap),
        _ => s.backoff_cap,
    };
    let delay = cc.backoff.next_jittered(&key(pc.as_ref()), s.backoff_base, cap);
    if err.is_conflict() {
        tracing::debug!(object = %key(pc.as_ref()), error = %err, retry_in = ?delay, "proxmoxcluster copy out of date");
        return Action::requeue(delay);
    }
    tracing::warn!(object = %key(pc.as_ref()), error = %err, retry_in = ?delay, "proxmoxcluster reconcile failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zone_secrets_map_to_their_cluster() {
        let mut pc = ProxmoxCluster::new("c", Default::default());
        pc.metadata.namespace = Some("ns".into());
        pc.spec.zone_config = Some(vec![capmox_api::v1alpha2::ZoneConfigSpec {
            zone: "b".into(),
            credentials_ref: Some(k8s_openapi::api::core::v1::SecretReference {
                name: Some("pve-b".into()),
                namespace: None,
            }),
            ..Default::default()
        }]);
        assert!(zone_secret(&pc, &("ns".into(), "pve-b".into())));
        assert!(!zone_secret(&pc, &("other".into(), "pve-b".into())));
        assert!(!zone_secret(&pc, &("ns".into(), "pve-a".into())));
    }

    #[test]
    fn backoff_doubles_caps_and_resets() {
        let b = Backoff::default();
        let (base, cap) = (Duration::from_secs(5), Duration::from_secs(60));
        let seq: Vec<_> = (0..6).map(|_| b.next("a", base, cap).as_secs()).collect();
        assert_eq!(seq, [5, 10, 20, 40, 60, 60]);
        assert_eq!(b.next("b", base, cap).as_secs(), 5);
        b.reset("a");
        assert_eq!(b.next("a", base, cap).as_secs(), 5);
        for _ in 0..20 {
            let j = b.next_jittered("c", base, cap);
            assert!(
                j >= Duration::from_secs(5) && j <= Duration::from_secs(66),
                "{j:?}"
            );
        }
    }

    #[test]
    fn cluster_maps_through_either_ref_shape() {
        let (store, _w) = {
            let (r, w) = kube::runtime::reflector::store::<Watched>();
            (r, w)
        };
        let mut c = DynamicObject::new(
            "c1",
            &ApiResource::erase::<capmox_api::capi::v1beta2::Cluster>(&()),
        );
        c.metadata.namespace = Some("ns".into());
        c.data = serde_json::json!({"spec": {"infrastructureRef": {"apiGroup": GROUP, "kind": "ProxmoxCluster", "name": "pc1"}}});
        assert_eq!(
            cluster_to_pcs(&c, &store),
            vec![ObjectRef::new("pc1").within("ns")]
        );
        c.data = serde_json::json!({"spec": {"infrastructureRef": {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxCluster", "name": "pc2"}}});
        assert_eq!(
            cluster_to_pcs(&c, &store),
            vec![ObjectRef::new("pc2").within("ns")]
        );
        c.data = serde_json::json!({"spec": {"infrastructureRef": {"apiGroup": "other.io", "kind": "ProxmoxCluster", "name": "x"}}});
        assert!(cluster_to_pcs(&c, &store).is_empty());
    }
}
