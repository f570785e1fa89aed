//! Writing a ProxmoxMachine back: metadata and spec (labels, finalizers, `virtualMachineID`,
//! `providerID`) and status as merge patches of what changed, each recorded as this controller's
//! latest copy (its watch event is then recognised as its own); Events; the phase metric.

use std::sync::Arc;

use capmox_api::v1alpha2::ProxmoxMachine;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::{MachineCtx, key_of, watches};
use crate::conditions;
use crate::context::Context;
use crate::controllers::events::{Event, EventType, Recorder};
use crate::machine::MachineError;

pub(super) fn record_phase(ctx: &Context, pm: &ProxmoxMachine, phase: &str) {
    let node = pm
        .status
        .as_ref()
        .and_then(|s| s.proxmox_node.clone())
        .unwrap_or_default();
    ctx.metrics
        .set_machine_phase(&pm.namespace().unwrap_or_default(), &pm.name_any(), phase, &node);
}

pub(super) fn set_paused(pm: &mut ProxmoxMachine, cluster_paused: bool, paused: bool) {
    let generation = pm.metadata.generation;
    let status = pm.status.get_or_insert_with(Default::default);
    let list = status.conditions.get_or_insert_with(Vec::new);
    let annotation = paused && !cluster_paused;
    let desired = conditions::paused(cluster_paused, annotation, "ProxmoxMachine");
    conditions::set(list, &desired, generation, &crate::machine::now());
}

/// Writes metadata/spec and status changes; returns the newest copy (what the last write returned).
pub(super) async fn persist(
    mc: &MachineCtx,
    old: &Arc<ProxmoxMachine>,
    new: &ProxmoxMachine,
) -> Result<Arc<ProxmoxMachine>, MachineError> {
    let after_meta = persist_meta(mc, old, new).await?;
    if let Some((was, now)) = own_generation(old, new, &after_meta) {
        let mut stamped = new.clone();
        restamp(&mut stamped, was, now);
        return persist_status(mc, &after_meta, &stamped).await;
    }
    persist_status(mc, &after_meta, new).await
}

/// When this controller's own spec patch (`virtualMachineID`, `providerID`: what `work` changed
/// against `before`) raised the generation by one to `after`'s: `(was, now)`. The conditions
/// `work` computed for `was` describe `now` — the spec they were computed with is the one written.
pub(super) fn own_generation(
    before: &ProxmoxMachine,
    work: &ProxmoxMachine,
    after: &ProxmoxMachine,
) -> Option<(i64, i64)> {
    let ours = before.spec.virtual_machine_id != work.spec.virtual_machine_id
        || before.spec.provider_id != work.spec.provider_id;
    let (was, now) = (before.metadata.generation?, after.metadata.generation?);
    (ours && now == was + 1).then_some((was, now))
}

/// Moves `pm` and the conditions it stamped with generation `was` to generation `now`.
pub(super) fn restamp(pm: &mut ProxmoxMachine, was: i64, now: i64) {
    pm.metadata.generation = Some(now);
    let conditions = pm.status.as_mut().and_then(|s| s.conditions.as_mut());
    for c in conditions.into_iter().flatten() {
        if c.observed_generation == Some(was) {
            c.observed_generation = Some(now);
        }
    }
}

/// Patches labels, finalizers, `spec.virtualMachineID` and `spec.providerID` when they changed.
pub(super) async fn persist_meta(
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
        Err(e) => Err(MachineError::kube(format!("{action} {}", key_of(old.as_ref())))(
            e,
        )),
    }
}

/// Merge-patches the status when it changed.
pub(super) async fn persist_status(
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

pub(super) async fn publish(
    recorder: &Recorder,
    pm: &ProxmoxMachine,
    warning: bool,
    reason: &str,
    note: String,
) {
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
