//! Writing a ProxmoxVirtualMachine back: its finalizers and its status as merge patches of what
//! changed, each remembered as this controller's latest copy; Events; the phase metric.

use std::sync::Arc;

use capmox_api::vm::ProxmoxVirtualMachine;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::{FIELD_MANAGER, VmCtx, key_of};
use crate::controllers::events::{Event, EventType};
use crate::virtual_machine::VirtualMachineError;

fn api(vc: &VmCtx, pvm: &ProxmoxVirtualMachine) -> Api<ProxmoxVirtualMachine> {
    Api::namespaced(vc.ctx.client.clone(), &pvm.namespace().unwrap_or_default())
}

fn remember(
    vc: &VmCtx,
    old: &Arc<ProxmoxVirtualMachine>,
    written: Result<ProxmoxVirtualMachine, kube::Error>,
    action: &str,
) -> Result<Arc<ProxmoxVirtualMachine>, VirtualMachineError> {
    match written {
        Ok(mut w) => {
            w.metadata.managed_fields = None;
            vc.latest.record(w.clone());
            Ok(Arc::new(w))
        }
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(Arc::clone(old)),
        Err(e) => Err(VirtualMachineError::kube(format!("{action} {}", key_of(old)))(e)),
    }
}

/// Patches the finalizers when they changed.
pub(super) async fn persist_meta(
    vc: &VmCtx,
    old: &Arc<ProxmoxVirtualMachine>,
    new: &ProxmoxVirtualMachine,
) -> Result<Arc<ProxmoxVirtualMachine>, VirtualMachineError> {
    if old.finalizers() == new.finalizers() {
        return Ok(Arc::clone(old));
    }
    let body = json!({"metadata": {"finalizers": new.finalizers()}});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let written = api(vc, old)
        .patch(&old.name_any(), &params, &Patch::Merge(&body))
        .await;
    remember(vc, old, written, "patching ProxmoxVirtualMachine")
}

/// Merge-patches the status when it changed (removed fields as `null`).
pub(super) async fn persist_status(
    vc: &VmCtx,
    old: &Arc<ProxmoxVirtualMachine>,
    new: &ProxmoxVirtualMachine,
) -> Result<Arc<ProxmoxVirtualMachine>, VirtualMachineError> {
    let unchanged = |a: &ProxmoxVirtualMachine, b: &ProxmoxVirtualMachine| {
        let strip = |p: &ProxmoxVirtualMachine| {
            p.status.clone().map(|mut s| {
                s.last_updated = None;
                s
            })
        };
        strip(a) == strip(b)
    };
    if unchanged(old, new) {
        return Ok(Arc::clone(old));
    }
    let mut new = new.clone();
    new.status.get_or_insert_with(Default::default).last_updated = Some(crate::machine::now());
    let new = &new;
    let to_value = |p: &ProxmoxVirtualMachine| serde_json::to_value(&p.status).unwrap_or(Value::Null);
    let body = json!({"status": crate::merge_patch::diff(&to_value(old), &to_value(new))});
    let params = PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    };
    let written = api(vc, old)
        .patch_status(&old.name_any(), &params, &Patch::Merge(&body))
        .await;
    remember(vc, old, written, "patching status of ProxmoxVirtualMachine")
}

/// Writes finalizers and status.
pub(super) async fn persist(
    vc: &VmCtx,
    old: &Arc<ProxmoxVirtualMachine>,
    new: &ProxmoxVirtualMachine,
) -> Result<Arc<ProxmoxVirtualMachine>, VirtualMachineError> {
    let after = persist_meta(vc, old, new).await?;
    persist_status(vc, &after, new).await
}

/// Publishes an Event about `pvm`.
pub(super) async fn publish(
    vc: &VmCtx,
    pvm: &ProxmoxVirtualMachine,
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
    if let Err(e) = vc.recorder.publish(&ev, &pvm.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing event failed");
    }
}

/// The phase metric of `pvm`.
pub(super) fn record_phase(vc: &VmCtx, pvm: &ProxmoxVirtualMachine) {
    let status = pvm.status.as_ref();
    let phase = status.and_then(|s| s.phase).map_or("Pending", |p| p.as_str());
    let node = status.and_then(|s| s.node.clone()).unwrap_or_default();
    vc.ctx.metrics.set_virtual_machine_phase(
        &pvm.namespace().unwrap_or_default(),
        &pvm.name_any(),
        phase,
        &node,
    );
}
