//! The ProxmoxCluster service: the rules of the normal and delete paths (finalizers, IP pools,
//! credentials, the Proxmox probe, readiness), called by the thin controller.

pub mod error;
pub mod failure_domains;
pub mod inventory;
pub mod memo;
pub mod owner;
pub mod pool_schema;
pub mod pools;
pub mod readiness;
pub mod secret;
pub mod status_patch;
pub mod zones;

use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::consts::{CLUSTER_FINALIZER, CLUSTER_NAME_LABEL};
use capmox_api::v1alpha2::{self, ProxmoxCluster, ProxmoxClusterStatus, ProxmoxMachine};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{OwnerReference, Time};
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::{Resource, ResourceExt};
use serde_json::json;

pub use error::{ClusterError, ErrorKind};
pub use memo::Memo;
pub use owner::OwnerCluster;
use pool_schema::{FieldSupport, PoolFieldSupport};
use readiness::Availability;
pub use secret::secret_key;

use crate::context::Context;

/// Field manager of every write of the ProxmoxCluster controller.
pub const FIELD_MANAGER: &str = "capmox-proxmoxcluster";

pub use crate::context::ClusterSettings;

/// Result of a reconcile: the status to write and what to do next.
#[derive(Debug)]
pub struct Outcome {
    /// The desired status (written by the controller when it differs from the stored one).
    pub status: ProxmoxClusterStatus,
    /// Next action, or the error for the error policy.
    pub result: Result<Action, ClusterError>,
    /// Events to record besides those derived from the status change (e.g. `ProxmoxTLSInsecure`
    /// when the cluster's Proxmox client stops verifying certificates).
    pub events: Vec<readiness::Transition>,
}

/// Event reason when a ProxmoxCluster's Proxmox client does not verify the server certificate.
pub const TLS_INSECURE_REASON: &str = "ProxmoxTLSInsecure";

fn now() -> Time {
    Time(k8s_openapi::jiff::Timestamp::now())
}

/// The ownerRef every object created for a ProxmoxCluster carries.
pub fn owner_reference(pc: &ProxmoxCluster, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: v1alpha2::API_VERSION.to_owned(),
        kind: "ProxmoxCluster".to_owned(),
        name: pc.name_any(),
        uid: pc.metadata.uid.clone().unwrap_or_default(),
        controller: controller.then_some(true),
        block_owner_deletion: controller.then_some(true),
    }
}

/// The CAPI cluster name of a ProxmoxCluster: the owner Cluster's name, else the
/// `cluster.x-k8s.io/cluster-name` label, else the object's own name.
pub fn cluster_name(pc: &ProxmoxCluster, owner: Option<&OwnerCluster>) -> String {
    owner
        .map(|o| o.name.clone())
        .or_else(|| owner::owner_ref(&pc.metadata).map(|(_, n)| n))
        .or_else(|| pc.labels().get(CLUSTER_NAME_LABEL).cloned())
        .unwrap_or_else(|| pc.name_any())
}

fn api(ctx: &Context, ns: &str) -> Api<ProxmoxCluster> {
    Api::namespaced(ctx.client.clone(), ns)
}

/// Sets the object's finalizer list (guarded by resourceVersion). An object that is already gone
/// needs no finalizer change: that is success (the release raced with its own deletion).
async fn patch_finalizers(
    ctx: &Context,
    pc: &ProxmoxCluster,
    finalizers: Vec<String>,
) -> Result<(), ClusterError> {
    let ns = pc.namespace().unwrap_or_default();
    let patch = json!({"metadata": {
        "finalizers": finalizers,
        "resourceVersion": pc.resource_version(),
    }});
    match api(ctx, &ns)
        .patch(&pc.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => {
            tracing::debug!(namespace = %ns, name = %pc.name_any(), "ProxmoxCluster already gone; no finalizer to change");
            Ok(())
        }
        Err(e) => Err(ClusterError::kube(
            error::FINALIZER_PATCH_FAILED_REASON,
            "patching ProxmoxCluster finalizers",
        )(e)),
    }
}

/// The normal path: finalizer, control-plane endpoint wait, IP pools, credentials, probe,
/// failure domains, node inventory (when `refresh_inventory`), ready. A failed step is recorded
/// in the status as `ProxmoxAvailable=False` with the step's reason (see [`record_failure`]).
///
/// `memo` keeps this from repeating work for reconciles triggered by something unrelated: the
/// pools are applied only when they changed, and Proxmox is probed once per resync period.
pub async fn reconcile_normal(
    ctx: &Context,
    pc: &ProxmoxCluster,
    owner: &OwnerCluster,
    refresh_inventory: bool,
    pool_fields: &PoolFieldSupport,
    memo: &Memo,
) -> Outcome {
    let mut status = pc.status.clone().unwrap_or_default();
    let mut events = Vec::new();
    let result = normal_steps(
        ctx,
        pc,
        owner,
        refresh_inventory,
        pool_fields,
        memo,
        Leaves {
            status: &mut status,
            events: &mut events,
        },
    )
    .await;
    if let Err(e) = &result {
        record_failure(&mut status, e, pc.metadata.generation);
    }
    Outcome {
        status,
        result,
        events,
    }
}

/// Records whether the cluster's client verifies certificates (metric) and, when it just stopped
/// doing so, the Warning event to publish (once per cluster and transition, not per reconcile).
fn tls_signal(
    ctx: &Context,
    pc: &ProxmoxCluster,
    client: &crate::proxmox::Client,
) -> Option<readiness::Transition> {
    let insecure = !client.config().verifies_tls();
    let ns = pc.namespace().unwrap_or_default();
    if !ctx
        .metrics
        .set_cluster_tls_insecure(&ns, &pc.name_any(), insecure)
    {
        return None;
    }
    let source = match secret_key(pc) {
        Some((sns, sname)) if ctx.proxmox.global().is_none() => format!(
            "the key `insecure` of the credentials Secret {sns}/{sname} is absent or true (capmox's reading); set it to false and put the server's CA into `root_ca`"
        ),
        _ => "the manager's PROXMOX_INSECURE is true (its default, as in capmox); set it to false and give --proxmox-root-cert-file".to_owned(),
    };
    Some(readiness::Transition {
        warning: true,
        reason: TLS_INSECURE_REASON,
        note: format!(
            "TLS certificate verification of the Proxmox API {} is disabled: {source}",
            client.config().url
        ),
    })
}

/// Records a failed reconcile step in the status: `ProxmoxAvailable=False` (and so `Ready=False`)
/// with the error's reason and message, so `kubectl describe` shows what went wrong.
pub fn record_failure(status: &mut ProxmoxClusterStatus, e: &ClusterError, generation: Option<i64>) {
    let a = Availability::Failed {
        reason: e.reason().to_owned(),
        message: e.to_string(),
    };
    readiness::apply(status, &a, generation, &now());
}

/// What the steps of a reconcile leave behind: the status and the events to publish.
struct Leaves<'a> {
    status: &'a mut ProxmoxClusterStatus,
    events: &'a mut Vec<readiness::Transition>,
}

async fn normal_steps(
    ctx: &Context,
    pc: &ProxmoxCluster,
    owner: &OwnerCluster,
    refresh_inventory: bool,
    pool_fields: &PoolFieldSupport,
    memo: &Memo,
    out: Leaves<'_>,
) -> Result<Action, ClusterError> {
    let Leaves { status, events } = out;
    let settings = &ctx.settings.cluster;
    let generation = pc.metadata.generation;
    let ns = pc.namespace().unwrap_or_default();
    let name = pc.name_any();
    if !pc.finalizers().iter().any(|f| f == CLUSTER_FINALIZER) {
        let mut f = pc.finalizers().to_vec();
        f.push(CLUSTER_FINALIZER.to_owned());
        patch_finalizers(ctx, pc, f).await?;
    }

    status.failure_domains = failure_domains::from_zones(&pc.spec);

    if readiness::waiting_for_endpoint(&pc.spec) {
        tracing::info!(namespace = %ns, name = %name, cluster = %owner.name, "waiting for an external control plane to set spec.controlPlaneEndpoint");
        readiness::apply(status, &Availability::MissingEndpoint, generation, &now());
        // The endpoint patch is a spec change and triggers the next reconcile.
        return Ok(Action::requeue(settings.resync));
    }

    let key = format!("{ns}/{name}");
    let desired = pools::desired_pools(&name, &pc.spec);
    let applied = desired
        .iter()
        .all(|p| memo.pool_applied(&pools::pool_object(p, &ns, owner_reference(pc, true))));
    if !applied {
        apply_pools(ctx, pc, &desired, pool_fields).await?;
    }
    let (refs, zones) = pools::status_refs(&desired);
    status.in_cluster_ip_pool_ref = (!refs.is_empty()).then_some(refs);
    status.in_cluster_zone_ref = (!zones.is_empty()).then_some(zones);

    let client = secret::resolve_client(ctx, pc).await?;
    events.extend(tls_signal(ctx, pc, &client));
    let client_id = format!("{} {:?}", client.base_url(), client.config().credentials);
    let available = status.conditions.as_ref().is_some_and(|c| {
        c.iter()
            .any(|c| c.type_ == v1alpha2::PROXMOX_AVAILABLE_CONDITION && c.status == "True")
    });
    // Probed once per resync period (a little early, so the resync's reconcile probes), not on
    // every reconcile some watched object triggers.
    let probe_every = settings.resync.mul_f64(0.9);
    // A resource list the machine controller read successfully within the period is as good as
    // a probe (at rest that list is read once per resync; no request of its own then).
    let listed = available && ctx.proxmox.listed_within(&client, settings.resync);
    if !available || (memo.probe_due(&key, &client_id, probe_every) && !listed) {
        if let Err(source) = probe(ctx, &client).await {
            memo.probe_failed(&key);
            ctx.metrics.set_cluster_connected(&ns, &name, false);
            return Err(probe_error(ctx, pc, source));
        }
        memo.probed(&key, &client_id);
    }
    ctx.metrics.set_cluster_connected(&ns, &name, true);
    // Zones with their own Proxmox cluster: a failing one is reported, it does not block the rest.
    events.extend(zones::probe(ctx, pc).await);
    if refresh_inventory {
        let allowed = pc.spec.allowed_nodes.as_deref().unwrap_or_default();
        // A list the machine controller read within the interval will do.
        let max_age = settings.inventory_interval;
        match inventory::collect(&ctx.proxmox, &client, allowed, max_age).await {
            Ok(inv) => status.node_inventory = (!inv.is_empty()).then_some(inv),
            Err(e) => {
                tracing::warn!(namespace = %ns, name = %name, error = %e, "node inventory refresh failed")
            }
        }
    }
    readiness::apply(status, &Availability::Available, generation, &now());
    Ok(Action::requeue(settings.resync))
}

/// Asks Proxmox whether it answers and knows the credentials. The first probe of a Proxmox
/// cluster reads its name (`GET /cluster/status`, which machines need for their meta-data and so
/// do not read themselves); later probes read `GET /version`, as capmox does.
async fn probe(ctx: &Context, client: &crate::proxmox::Client) -> Result<(), crate::proxmox::Error> {
    let name = ctx.proxmox.cluster_name(client);
    if name.initialized() {
        return client.version().await.map(|_| ());
    }
    name.get_or_try_init(|| client.cluster_name()).await.map(|_| ())
}

/// The error of a failed probe: an auth error names where the credentials come from and what
/// fixes them (a rotated Secret is picked up at once; the global credentials need a restart).
fn probe_error(ctx: &Context, pc: &ProxmoxCluster, source: crate::proxmox::Error) -> ClusterError {
    if error::auth_reason(&source).is_none() {
        return ClusterError::ProxmoxUnreachable { source };
    }
    let (credentials, remedy) = match secret_key(pc) {
        Some((sns, sname)) if ctx.proxmox.global().is_none() => (
            format!("credentials Secret {sns}/{sname}"),
            "put a valid token (and its privileges) into the Secret: the change is picked up at once",
        ),
        _ => (
            "the manager (PROXMOX_TOKEN)".to_owned(),
            "fix the token in the manager's environment and restart the manager",
        ),
    };
    ClusterError::ProxmoxAuth {
        credentials,
        remedy,
        source,
    }
}

/// Server-side applies the cluster's InClusterIPPools. `spec.addressReuseGracePeriodSeconds` is
/// only sent when the served IPAM CRD declares it (or cannot tell); a refusal of a pool that
/// carried it is retried once without it.
async fn apply_pools(
    ctx: &Context,
    pc: &ProxmoxCluster,
    desired: &[pools::DesiredPool],
    pool_fields: &PoolFieldSupport,
) -> Result<(), ClusterError> {
    let ns = pc.namespace().unwrap_or_default();
    let pool_api: Api<InClusterIPPool> = Api::namespaced(ctx.client.clone(), &ns);
    let params = PatchParams::apply(FIELD_MANAGER).force();
    for p in desired {
        let mut obj = pools::pool_object(p, &ns, owner_reference(pc, true));
        let support = if obj.spec.address_reuse_grace_period_seconds.is_some() {
            pool_fields.reuse_grace_period(&ctx.client).await
        } else {
            FieldSupport::Missing
        };
        if support == FieldSupport::Missing {
            obj.spec.address_reuse_grace_period_seconds = None;
        }
        let mut result = pool_api.patch(&p.name, &params, &Patch::Apply(&obj)).await;
        if support == FieldSupport::Unknown
            && matches!(&result, Err(kube::Error::Api(e)) if matches!(e.code, 400 | 422 | 500))
        {
            pool_fields.refused();
            obj.spec.address_reuse_grace_period_seconds = None;
            result = pool_api.patch(&p.name, &params, &Patch::Apply(&obj)).await;
        }
        // A pool still controlled by an earlier ProxmoxCluster of this name (a restore, a quick
        // re-create before garbage collection) is taken over instead of refused forever.
        if matches!(&result, Err(kube::Error::Api(e)) if e.code == 422)
            && drop_stale_owner(&pool_api, &p.name, pc).await?
        {
            result = pool_api.patch(&p.name, &params, &Patch::Apply(&obj)).await;
        }
        result.map_err(ClusterError::kube(
            error::IP_POOL_RECONCILIATION_FAILED_REASON,
            format!("applying InClusterIPPool {ns}/{}", p.name),
        ))?;
    }
    Ok(())
}

/// Removes from pool `name` the owner references to an earlier ProxmoxCluster of `pc`'s name
/// (another UID, gone: two cannot exist at once); whether there were any.
async fn drop_stale_owner(
    api: &Api<InClusterIPPool>,
    name: &str,
    pc: &ProxmoxCluster,
) -> Result<bool, ClusterError> {
    let failed = |what: &str| {
        ClusterError::kube(
            error::IP_POOL_RECONCILIATION_FAILED_REASON,
            format!(
                "{what} InClusterIPPool {}/{name}",
                pc.namespace().unwrap_or_default()
            ),
        )
    };
    let Some(pool) = api.get_opt(name).await.map_err(failed("reading"))? else {
        return Ok(false);
    };
    let ours = owner_reference(pc, true);
    let stale = |r: &OwnerReference| {
        r.kind == ours.kind
            && r.name == ours.name
            && r.uid != ours.uid
            && capmox_api::capi::api_version_in_group(&r.api_version, capmox_api::consts::GROUP)
    };
    if !pool.owner_references().iter().any(stale) {
        return Ok(false);
    }
    let kept: Vec<&OwnerReference> = pool.owner_references().iter().filter(|r| !stale(r)).collect();
    let body = serde_json::json!({"metadata": {
        "ownerReferences": kept,
        "resourceVersion": pool.resource_version(),
    }});
    api.patch(name, &PatchParams::default(), &Patch::Merge(&body))
        .await
        .map_err(failed("taking over"))?;
    tracing::info!(pool = name, cluster = %pc.name_any(), "took over an InClusterIPPool of an earlier ProxmoxCluster of this name");
    Ok(true)
}

/// The delete path: refuse while the owner Cluster lives, wait for the cluster's ProxmoxMachines,
/// release the credentials Secret and drop the finalizer.
pub async fn reconcile_delete(ctx: &Context, pc: &ProxmoxCluster, owner: Option<&OwnerCluster>) -> Outcome {
    let mut status = pc.status.clone().unwrap_or_default();
    let result = delete_steps(ctx, pc, owner, &mut status).await;
    if let Err(e) = &result {
        record_failure(&mut status, e, pc.metadata.generation);
    }
    Outcome {
        status,
        result,
        events: Vec::new(),
    }
}

async fn delete_steps(
    ctx: &Context,
    pc: &ProxmoxCluster,
    owner: Option<&OwnerCluster>,
    status: &mut ProxmoxClusterStatus,
) -> Result<Action, ClusterError> {
    let ns = pc.namespace().unwrap_or_default();
    let name = pc.name_any();
    if !pc.finalizers().iter().any(|f| f == CLUSTER_FINALIZER) {
        return Ok(Action::await_change());
    }
    if let Some(o) = owner
        && !o.deleting
    {
        let a = Availability::Deleting(format!(
            "deletion waits for the owning Cluster {} to be deleted",
            o.name
        ));
        let before = status.conditions.clone();
        readiness::apply(status, &a, pc.metadata.generation, &now());
        // Logged as an error once, not at every look again.
        if status.conditions != before {
            tracing::error!(namespace = %ns, name = %name, cluster = %o.name, "deletion was requested but owning cluster wasn't deleted");
        } else {
            tracing::debug!(namespace = %ns, name = %name, cluster = %o.name, "deletion still waits for the owning cluster");
        }
        // The Cluster's deletion event wakes this at once; the requeue is for the event a watch
        // can miss (a relist after a dropped watch reports no deletions), which would otherwise
        // leave the deletion waiting for good.
        return Ok(Action::requeue(ctx.settings.cluster.machine_wait));
    }
    let cluster = cluster_name(pc, owner);
    let machines: Api<ProxmoxMachine> = Api::namespaced(ctx.client.clone(), &ns);
    let left = machines
        .list_metadata(&ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={cluster}")))
        .await
        .map_err(ClusterError::kube(
            error::MACHINE_LIST_FAILED_REASON,
            "listing ProxmoxMachines",
        ))?;
    if !left.items.is_empty() {
        let a = Availability::Deleting(format!(
            "waiting for {} ProxmoxMachine(s) of cluster {cluster} to be deleted",
            left.items.len()
        ));
        readiness::apply(status, &a, pc.metadata.generation, &now());
        return Ok(Action::requeue(ctx.settings.cluster.machine_wait));
    }
    secret::release(ctx, pc).await?;
    let rest: Vec<String> = pc
        .finalizers()
        .iter()
        .filter(|f| *f != CLUSTER_FINALIZER)
        .cloned()
        .collect();
    patch_finalizers(ctx, pc, rest).await?;
    ctx.metrics.remove_cluster(&ns, &name);
    tracing::info!(namespace = %ns, name = %name, "ProxmoxCluster released");
    Ok(Action::await_change())
}

/// A reference for events and logs.
pub fn object_ref(pc: &ProxmoxCluster) -> k8s_openapi::api::core::v1::ObjectReference {
    pc.object_ref(&())
}
