//! The ProxmoxMachine controller: watches ProxmoxMachines and what their progress depends on
//! (owner Machines, their IPAddressClaims and IPAddresses, ProxmoxClusters, Clusters and bootstrap
//! Secrets), fetches the owner objects, applies pause rules and the finalizer, runs one pass of
//! the lifecycle ([`crate::machine`]) and persists the working copy with at most one metadata/spec
//! patch and one status patch.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use capmox_api::capi::views::{ClusterView, MachineView};
use capmox_api::capi::{
    CLUSTER_GROUP, CLUSTER_KIND, CLUSTER_PLURAL, IPAM_GROUP, MACHINE_KIND, MACHINE_PLURAL,
};
use capmox_api::consts::{CLUSTER_NAME_LABEL, GROUP, MACHINE_FINALIZER, PAUSED_ANNOTATION};
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ApiResource, DynamicObject, PartialObjectMeta, Patch, PatchParams};
use kube::core::GroupVersionKind;
use kube::runtime::controller::{Action, Config};
use kube::runtime::events::{Event, EventType, Recorder};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::cluster::Backoff;
use crate::cluster;
use crate::conditions;
use crate::context::Context;
use crate::ipam::IpamApiVersion;
use crate::machine::delete::delete;
use crate::machine::reconcile::{PassInputs, provision};
use crate::machine::state::Step;
use crate::machine::steps::Next;
use crate::machine::{MachineError, MachineSettings};
use crate::proxmox::Client;

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxmachine";
/// Field manager of this controller's patches.
pub const FIELD_MANAGER: &str = "capmox-proxmoxmachine";

struct MachineCtx {
    ctx: Arc<Context>,
    recorder: Recorder,
    /// Error backoff per machine.
    errors: Backoff,
    /// Task/lock poll backoff per machine.
    polls: Backoff,
    machine_ar: ApiResource,
    cluster_ar: ApiResource,
    /// The IPAM API version served, discovered once at startup.
    ipam_version: IpamApiVersion,
}

fn key(pm: &ProxmoxMachine) -> String {
    format!("{}/{}", pm.namespace().unwrap_or_default(), pm.name_any())
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

    let pms: Api<ProxmoxMachine> = api_for(&client, &ns);
    let pcs: Api<ProxmoxCluster> = api_for(&client, &ns);
    let secrets: Api<PartialObjectMeta<Secret>> = api_for(&client, &ns);

    let stop = super::shutdown_signal(shutdown);
    let mc = Arc::new(MachineCtx {
        recorder: super::recorder(client.clone()),
        errors: Backoff::default(),
        polls: Backoff::default(),
        machine_ar: machine_ar.clone(),
        cluster_ar: cluster_ar.clone(),
        ipam_version,
        ctx: ctx.clone(),
    });

    let wc = watcher::Config::default().any_semantic();
    let controller = Controller::new(pms, wc.clone());
    let store = controller.store();
    let (s1, s2, s3) = (store.clone(), store.clone(), store);
    controller
        .watches_with(dyn_api(&machine_ar), machine_ar.clone(), wc.clone(), |m| {
            machine_to_pm(&m)
        })
        .owns_with(dyn_api(&claim_ar), claim_ar.clone(), wc.clone())
        .watches_with(
            dyn_api(&address_ar),
            address_ar.clone(),
            wc.clone(),
            address_to_pm,
        )
        .watches(pcs, wc.clone(), move |pc| {
            let cluster = cluster::cluster_name(&pc, None);
            by_cluster(&s1, pc.namespace(), &cluster)
        })
        .watches_with(dyn_api(&cluster_ar), cluster_ar.clone(), wc.clone(), move |c| {
            by_cluster(&s2, c.namespace(), &c.name_any())
        })
        .watches(
            secrets,
            watcher::Config::default()
                .any_semantic()
                .labels(CLUSTER_NAME_LABEL),
            move |s| {
                let cluster = s.labels().get(CLUSTER_NAME_LABEL).cloned().unwrap_or_default();
                unprovisioned(&s3, s.namespace(), &cluster)
            },
        )
        .with_config(Config::default().concurrency(ctx.settings.concurrency))
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, mc)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "proxmoxmachine reconcile failed");
            }
        })
        .await;
}

/// Machine → its ProxmoxMachine via `spec.infrastructureRef`.
fn machine_to_pm(m: &DynamicObject) -> Option<ObjectRef<ProxmoxMachine>> {
    let view = MachineView::from_dynamic(m);
    let r = view.infrastructure_ref?;
    (r.kind == "ProxmoxMachine" && r.api_group.as_deref().is_none_or(|g| g == GROUP))
        .then(|| ObjectRef::new(&r.name).within(&view.namespace))
}

/// The ProxmoxMachine name in a claim name `<machine>-<netN>-<NN>-inet`.
pub fn machine_of_claim(claim: &str) -> Option<&str> {
    let rest = claim.strip_suffix("-inet")?;
    let (rest, offset) = rest.rsplit_once('-')?;
    if offset.len() != 2 || !offset.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (machine, net) = rest.rsplit_once('-')?;
    let n = net.strip_prefix("net")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !machine.is_empty()).then_some(machine)
}

/// IPAddress → the ProxmoxMachine of its claim.
fn address_to_pm(a: DynamicObject) -> Option<ObjectRef<ProxmoxMachine>> {
    let claim = a.data.pointer("/spec/claimRef/name").and_then(Value::as_str)?;
    let ns = a.namespace()?;
    machine_of_claim(claim).map(|m| ObjectRef::new(m).within(&ns))
}

fn by_cluster(
    store: &Store<ProxmoxMachine>,
    ns: Option<String>,
    cluster: &str,
) -> Vec<ObjectRef<ProxmoxMachine>> {
    store
        .state()
        .into_iter()
        .filter(|pm| {
            pm.namespace() == ns && pm.labels().get(CLUSTER_NAME_LABEL).map(String::as_str) == Some(cluster)
        })
        .map(|pm| ObjectRef::from_obj(pm.as_ref()))
        .collect()
}

fn unprovisioned(
    store: &Store<ProxmoxMachine>,
    ns: Option<String>,
    cluster: &str,
) -> Vec<ObjectRef<ProxmoxMachine>> {
    store
        .state()
        .into_iter()
        .filter(|pm| !pm.is_provisioned())
        .filter(|pm| {
            pm.namespace() == ns && pm.labels().get(CLUSTER_NAME_LABEL).map(String::as_str) == Some(cluster)
        })
        .map(|pm| ObjectRef::from_obj(pm.as_ref()))
        .collect()
}

/// The owner Machine, read in the version of the ownerRef.
async fn owner_machine(mc: &MachineCtx, pm: &ProxmoxMachine) -> Result<Option<MachineView>, MachineError> {
    let Some(r) = pm.owner_references().iter().find(|r| {
        r.kind == MACHINE_KIND && capmox_api::capi::api_version_in_group(&r.api_version, CLUSTER_GROUP)
    }) else {
        return Ok(None);
    };
    let ns = pm.namespace().unwrap_or_default();
    let api: Api<DynamicObject> = Api::namespaced_with(mc.ctx.client.clone(), &ns, &mc.machine_ar);
    let obj = api
        .get_opt(&r.name)
        .await
        .map_err(MachineError::kube(format!("getting Machine {ns}/{}", r.name)))?;
    Ok(obj.map(|o| MachineView::from_dynamic(&o)))
}

async fn owner_cluster(mc: &MachineCtx, ns: &str, name: &str) -> Result<Option<ClusterView>, MachineError> {
    let api: Api<DynamicObject> = Api::namespaced_with(mc.ctx.client.clone(), ns, &mc.cluster_ar);
    let obj = api
        .get_opt(name)
        .await
        .map_err(MachineError::kube(format!("getting Cluster {ns}/{name}")))?;
    Ok(obj.map(|o| ClusterView::from_dynamic(&o)))
}

/// The Proxmox client of a ProxmoxCluster (same precedence as the cluster controller; read-only).
async fn proxmox_client(ctx: &Context, pc: &ProxmoxCluster) -> Result<Client, MachineError> {
    if let Some(g) = ctx.proxmox.global() {
        return Ok(g.clone());
    }
    let Some((ns, name)) = cluster::secret_key(pc) else {
        return Err(MachineError::Invalid(
            "no Proxmox credentials: neither PROXMOX_URL nor the ProxmoxCluster's credentialsRef".into(),
        ));
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let secret = api
        .get_opt(&name)
        .await
        .map_err(MachineError::kube(format!(
            "getting credentials Secret {ns}/{name}"
        )))?
        .ok_or_else(|| MachineError::Invalid(format!("credentials secret {ns}/{name} not found")))?;
    ctx.proxmox
        .for_secret(&secret)
        .map_err(|e| MachineError::Credentials(e.into()))
}

/// One reconcile. An error that stops it outside a provisioning step (those record their own
/// reasons) is published as a Warning event and, unless the machine is provisioned, shown as
/// `VirtualMachineProvisioned=False` with the error's reason (`DeletionFailed` while deleting).
async fn reconcile(cached: Arc<ProxmoxMachine>, mc: Arc<MachineCtx>) -> Result<Action, MachineError> {
    let result = reconcile_inner(cached.clone(), mc.clone()).await;
    if let Err(e) = &result {
        report_failure(&mc, &cached, e).await;
    }
    result
}

async fn report_failure(mc: &MachineCtx, cached: &ProxmoxMachine, e: &MachineError) {
    let deleting = cached.metadata.deletion_timestamp.is_some();
    let reason = if deleting {
        api::DELETION_FAILED_REASON
    } else {
        e.reason()
    };
    publish(&mc.recorder, cached, true, reason, e.to_string()).await;
    let api_ =
        Api::<ProxmoxMachine>::namespaced(mc.ctx.client.clone(), &cached.namespace().unwrap_or_default());
    let Ok(Some(fresh)) = api_.get_opt(&cached.name_any()).await else {
        return;
    };
    if fresh.is_provisioned() && !deleting {
        return;
    }
    let mut work = fresh.clone();
    crate::machine::set_failure_condition(&mut work, reason, e.to_string());
    if let Err(pe) = persist_status(&mc.ctx, &fresh, &work).await {
        tracing::debug!(object = %key(cached), error = %pe, "recording the failure in the status failed");
    }
}

async fn reconcile_inner(cached: Arc<ProxmoxMachine>, mc: Arc<MachineCtx>) -> Result<Action, MachineError> {
    let ctx = &mc.ctx;
    let _timer = ctx.metrics.reconcile_started(CONTROLLER);
    let ns = cached.namespace().unwrap_or_default();
    // Read the machine fresh: the cache may not show this controller's last write yet, and every
    // decision (above all "no VMID recorded yet") must see it.
    let Some(pm) = Api::<ProxmoxMachine>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&cached.name_any())
        .await
        .map_err(MachineError::kube(format!(
            "getting ProxmoxMachine {}",
            key(&cached)
        )))?
    else {
        ctx.metrics.remove_machine(&ns, &cached.name_any());
        return Ok(Action::await_change());
    };
    let deleting = pm.metadata.deletion_timestamp.is_some();
    let has_finalizer = pm.finalizers().iter().any(|f| f == MACHINE_FINALIZER);
    if deleting && !has_finalizer {
        ctx.metrics.remove_machine(&ns, &pm.name_any());
        return Ok(Action::await_change());
    }
    let machine = owner_machine(&mc, &pm).await?;
    let cluster_name = machine
        .as_ref()
        .and_then(|m| m.cluster_name.clone())
        .or_else(|| pm.labels().get(CLUSTER_NAME_LABEL).cloned());
    let cluster = match &cluster_name {
        Some(c) => owner_cluster(&mc, &ns, c).await?,
        None => None,
    };
    let paused = cluster.as_ref().is_some_and(|c| c.paused)
        || machine.as_ref().is_some_and(|m| m.paused)
        || pm.annotations().contains_key(PAUSED_ANNOTATION);
    let mut work = pm.clone();
    set_paused(&mut work, cluster.as_ref().is_some_and(|c| c.paused), paused);
    if paused {
        persist(ctx, &pm, &work).await?;
        return Ok(Action::await_change());
    }
    let pc_name = cluster
        .as_ref()
        .and_then(|c| c.infrastructure_ref.as_ref())
        .map(|r| r.name.clone());
    let pcs = Api::<ProxmoxCluster>::namespaced(ctx.client.clone(), &ns);
    let pc = match (&pc_name, &cluster_name) {
        (Some(n), _) => pcs
            .get_opt(n)
            .await
            .map_err(MachineError::kube(format!("getting ProxmoxCluster {ns}/{n}")))?,
        // The Cluster is gone (e.g. deleted before its machines): find its ProxmoxCluster by label.
        (None, Some(c)) => pcs
            .list(&kube::api::ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={c}")))
            .await
            .map_err(MachineError::kube(format!(
                "listing ProxmoxClusters of cluster {ns}/{c}"
            )))?
            .items
            .into_iter()
            .next(),
        (None, None) => None,
    };
    let settings = &ctx.settings.machine;
    if deleting {
        let px = match &pc {
            Some(pc) => proxmox_client(ctx, pc).await.ok(),
            None => ctx.proxmox.global().cloned(),
        };
        let out = delete(
            &ctx.client,
            mc.ipam_version,
            px.as_ref(),
            pc.as_ref(),
            settings,
            &mut work,
        )
        .await?;
        if out.finished {
            work.finalizers_mut().retain(|f| f != MACHINE_FINALIZER);
            persist_status(ctx, &pm, &work).await?;
            persist_meta(ctx, &pm, &work).await?;
            ctx.metrics.remove_machine(&ns, &pm.name_any());
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
        persist(ctx, &pm, &work).await?;
        return Ok(action(
            &mc,
            &work,
            out.next,
            matches!(
                out.step,
                crate::machine::state::DeleteStep::PollTask
                    | crate::machine::state::DeleteStep::WaitForUnlock(_)
            ),
            settings,
        ));
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
        persist_meta(ctx, &pm, &work).await?;
    }
    let proxmox = proxmox_client(ctx, &pc).await?;
    let inputs = PassInputs {
        kube: &ctx.client,
        proxmox: &proxmox,
        machine: &machine,
        cluster_infrastructure_ready: cluster.infrastructure_provisioned,
        pc: &pc,
        settings,
        ipam_version: mc.ipam_version,
    };
    let was_provisioned = pm.is_provisioned();
    let outcome = provision(&inputs, &mut work).await?;
    let phase = work
        .condition(api::VIRTUAL_MACHINE_PROVISIONED_CONDITION)
        .map(|c| c.reason.clone())
        .unwrap_or_default();
    record_phase(ctx, &work, &phase);
    persist(ctx, &pm, &work).await?;
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
        let delay = mc.errors.next_jittered(
            &key(&pm),
            settings.task_poll_initial,
            settings.task_poll_max.max(Duration::from_secs(60)),
        );
        tracing::warn!(object = %key(&pm), error = %err, retry_in = ?delay, "proxmoxmachine step failed");
        return Ok(Action::requeue(delay));
    }
    mc.errors.reset(&key(&pm));
    let polling = matches!(outcome.step, Step::PollTask | Step::WaitForUnlock(_));
    Ok(action(&mc, &work, outcome.next, polling, settings))
}

/// Turns a pass's `Next` into a controller action; task polls back off per task.
fn action(mc: &MachineCtx, pm: &ProxmoxMachine, next: Next, polling: bool, s: &MachineSettings) -> Action {
    let poll_key = format!(
        "{}#{}",
        key(pm),
        pm.status
            .as_ref()
            .and_then(|st| st.task_ref.clone())
            .unwrap_or_default()
    );
    if !polling {
        mc.polls.reset(&poll_key);
    }
    match next {
        Next::Now => Action::requeue(Duration::from_millis(1)),
        Next::After(_) if polling => {
            Action::requeue(mc.polls.next(&poll_key, s.task_poll_initial, s.task_poll_max))
        }
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

async fn persist(ctx: &Context, old: &ProxmoxMachine, new: &ProxmoxMachine) -> Result<(), MachineError> {
    persist_meta(ctx, old, new).await?;
    persist_status(ctx, old, new).await
}

/// Patches labels, finalizers, `spec.virtualMachineID` and `spec.providerID` when they changed.
async fn persist_meta(ctx: &Context, old: &ProxmoxMachine, new: &ProxmoxMachine) -> Result<(), MachineError> {
    let same = old.labels() == new.labels()
        && old.finalizers() == new.finalizers()
        && old.spec.virtual_machine_id == new.spec.virtual_machine_id
        && old.spec.provider_id == new.spec.provider_id;
    if same {
        return Ok(());
    }
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
    let api: Api<ProxmoxMachine> = Api::namespaced(ctx.client.clone(), &old.namespace().unwrap_or_default());
    match api
        .patch(&old.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(MachineError::kube(format!(
            "patching ProxmoxMachine {}",
            key(old)
        ))(e)),
    }
}

/// Merge-patches the whole status when it changed.
async fn persist_status(
    ctx: &Context,
    old: &ProxmoxMachine,
    new: &ProxmoxMachine,
) -> Result<(), MachineError> {
    if old.status == new.status {
        return Ok(());
    }
    // A merge patch of the new status alone cannot clear fields (`None` is not serialised), so a
    // cleared `taskRef` or `retryAfter` would come back on the next read: send the difference,
    // with `null` for every removed field.
    let to_value = |pm: &ProxmoxMachine| serde_json::to_value(&pm.status).unwrap_or(Value::Null);
    let body = json!({ "status": merge_diff(&to_value(old), &to_value(new)) });
    let api: Api<ProxmoxMachine> = Api::namespaced(ctx.client.clone(), &old.namespace().unwrap_or_default());
    match api
        .patch_status(&old.name_any(), &PatchParams::default(), &Patch::Merge(&body))
        .await
    {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(()),
        Err(e) => Err(MachineError::kube(format!(
            "patching status of ProxmoxMachine {}",
            key(old)
        ))(e)),
    }
}

/// The JSON merge patch (RFC 7396) that turns `old` into `new`: changed and added keys with their
/// new values, removed keys as `null`, objects diffed recursively.
fn merge_diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in n {
                match o.get(k) {
                    Some(ov) if ov == v => {}
                    Some(ov) => {
                        out.insert(k.clone(), merge_diff(ov, v));
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
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

fn error_policy(pm: Arc<ProxmoxMachine>, err: &MachineError, mc: Arc<MachineCtx>) -> Action {
    let s = &mc.ctx.settings.machine;
    mc.ctx.metrics.reconcile_error(CONTROLLER, err.class());
    let delay = mc.errors.next_jittered(
        &key(&pm),
        s.task_poll_initial,
        s.task_poll_max.max(Duration::from_secs(60)),
    );
    tracing::warn!(object = %key(&pm), error = %err, retry_in = ?delay, "proxmoxmachine reconcile failed");
    Action::requeue(delay)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_diff_clears_removed_fields() {
        let old = json!({"taskRef": "UPID:x", "vmStatus": "pending", "initialization": {"provisioned": false}, "conditions": [1]});
        let new =
            json!({"vmStatus": "pending", "initialization": {"provisioned": true}, "conditions": [1, 2]});
        assert_eq!(
            merge_diff(&old, &new),
            json!({"taskRef": null, "initialization": {"provisioned": true}, "conditions": [1, 2]})
        );
        assert_eq!(merge_diff(&Value::Null, &json!({"a": 1})), json!({"a": 1}));
    }

    #[test]
    fn claim_names_map_back_to_machines() {
        assert_eq!(machine_of_claim("m1-net0-00-inet"), Some("m1"));
        assert_eq!(machine_of_claim("my-cp-abc12-net12-03-inet"), Some("my-cp-abc12"));
        assert_eq!(machine_of_claim("m1-net0-0-inet"), None);
        assert_eq!(machine_of_claim("m1-eth0-00-inet"), None);
        assert_eq!(machine_of_claim("net0-00-inet"), None);
        assert_eq!(machine_of_claim("m1-net0-00"), None);
    }

    #[test]
    fn machines_map_to_their_infrastructure_ref() {
        let ar = ApiResource::erase::<capmox_api::capi::v1beta2::Machine>(&());
        let mut m = DynamicObject::new("m", &ar);
        m.metadata.namespace = Some("ns".into());
        m.data = json!({"spec": {"infrastructureRef": {"apiGroup": GROUP, "kind": "ProxmoxMachine", "name": "pm"}}});
        assert_eq!(machine_to_pm(&m), Some(ObjectRef::new("pm").within("ns")));
        m.data = json!({"spec": {"infrastructureRef": {"apiGroup": "other", "kind": "ProxmoxMachine", "name": "pm"}}});
        assert_eq!(machine_to_pm(&m), None);
    }
}
