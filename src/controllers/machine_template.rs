//! The ProxmoxMachineTemplate controller: keeps each template's `status.capacity` and
//! `status.nodeInfo` equal to what its spec asks for ([`crate::autoscaling`]), so the
//! cluster-autoscaler's Cluster API provider can scale a MachineDeployment from zero. It makes no
//! Proxmox calls and writes the status (a merge patch on `/status`) only when it differs.

use std::future::Future;
use std::sync::Arc;

use crate::controllers::events::Recorder;
use capmox_api::v1alpha2::{ProxmoxMachineTemplate, ProxmoxMachineTemplateStatus};
use futures::StreamExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Map, Value};

use super::cluster::Backoff;
use super::decoded::{self, Decoded};
use super::instrument::{Instrument, RunInstrumented};
use crate::autoscaling;
use crate::context::Context;

/// Controller name used for metrics.
pub const CONTROLLER: &str = "proxmoxmachinetemplate";

/// Field manager of the status patches.
pub const FIELD_MANAGER: &str = "capmox-proxmoxmachinetemplate";

/// Reason (metrics, logs) of a failed status patch.
pub const STATUS_PATCH_FAILED_REASON: &str = "StatusPatchFailed";

/// Errors of a template reconcile.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The status patch was refused or did not reach the API server.
    #[error("patching the status of ProxmoxMachineTemplate {object}: {source}")]
    StatusPatch {
        /// `namespace/name` of the template.
        object: String,
        /// Underlying error.
        #[source]
        source: kube::Error,
    },
}

impl TemplateError {
    /// Short machine-readable reason (the `reason` label of the error counter).
    pub fn reason(&self) -> &'static str {
        match self {
            Self::StatusPatch { .. } => STATUS_PATCH_FAILED_REASON,
        }
    }
}

/// What the reconcile function gets: the shared context, an event recorder (for templates that
/// cannot be read) and the per-object error backoff.
struct TemplateCtx {
    ctx: Arc<Context>,
    recorder: Recorder,
    backoff: Backoff,
}

/// A watched template (see [`decoded`]: one that cannot be read does not stop the others).
type Watched = Decoded<ProxmoxMachineTemplate>;

fn key<K: Resource>(t: &K) -> String {
    format!("{}/{}", t.namespace().unwrap_or_default(), t.name_any())
}

/// Runs the ProxmoxMachineTemplate controller until `shutdown` completes (then finishes
/// in-flight reconciles and returns).
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let settings = &ctx.settings;
    let api = |ns: Option<&str>| match ns {
        Some(ns) => Api::<Watched>::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    };
    // A role without templates (capmox v0.9's: an image-only swap keeps it) turns the controller
    // off with one line, instead of a watch that retries its refused list forever.
    for ns in settings.watched_namespaces() {
        if let Some(message) = forbidden(&api(ns.as_deref())).await {
            tracing::warn!("{message}");
            shutdown.await;
            return;
        }
    }
    let wc = settings.primary_watch(watcher::Config::default().any_semantic());
    let templates = super::scope::watch(settings, api, wc);
    let inst = Instrument::new(&ctx, CONTROLLER, settings.concurrency);
    let (store, writer) = kube::runtime::reflector::store::<Watched>();
    let templates = inst.objects(templates.default_backoff().reflect(writer).touched_objects());
    let tctx = Arc::new(TemplateCtx {
        recorder: super::recorder(client),
        backoff: Backoff::default(),
        ctx: ctx.clone(),
    });
    Controller::for_stream(templates, store)
        .with_config(Config::default().concurrency(ctx.settings.concurrency))
        .graceful_shutdown_on(super::shutdown_signal(shutdown))
        .run_instrumented(&inst, reconcile, error_policy, tctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "proxmoxmachinetemplate reconcile failed");
            }
        })
        .await;
}

/// Why the controller cannot run (`None`: it may list templates, or the answer was another error
/// the watch retries): the manager's role refuses to list ProxmoxMachineTemplates.
async fn forbidden(templates: &Api<Watched>) -> Option<String> {
    match templates
        .list_metadata(&kube::api::ListParams::default().limit(1))
        .await
    {
        Err(kube::Error::Api(e)) if e.code == 403 => Some(format!(
            "ProxmoxMachineTemplate controller turned off: the manager may not list \
             proxmoxmachinetemplates ({}). It only fills status.capacity for the cluster-autoscaler's \
             scale from zero; with capmox v0.9's ClusterRole (an image-only swap) that is expected. \
             Apply capmox-rs's ClusterRole (get/list/watch on proxmoxmachinetemplates, get/patch on \
             proxmoxmachinetemplates/status) and restart the manager to turn it on",
            e.message
        )),
        _ => None,
    }
}

async fn reconcile(watched: Arc<Watched>, tc: Arc<TemplateCtx>) -> Result<Action, TemplateError> {
    let _timer = tc.ctx.metrics.reconcile_started(CONTROLLER);
    let template = match watched.as_ref() {
        Decoded::Ok(t) => t.clone(),
        Decoded::Unreadable(u) => {
            decoded::report(&tc.recorder, &watched, u).await;
            return Ok(Action::await_change());
        }
    };
    if template.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let desired = autoscaling::template_status(&template.spec.template.spec);
    if let Some(patch) = status_patch(template.status.as_ref(), &desired) {
        let api: Api<ProxmoxMachineTemplate> =
            Api::namespaced(tc.ctx.client.clone(), &template.namespace().unwrap_or_default());
        match api
            .patch_status(
                &template.name_any(),
                &PatchParams::apply(FIELD_MANAGER),
                &Patch::Merge(&patch),
            )
            .await
        {
            Ok(_) => {
                tracing::debug!(object = %key(template.as_ref()), "template status updated");
            }
            // Deleted in the meantime.
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(source) => {
                return Err(TemplateError::StatusPatch {
                    object: key(template.as_ref()),
                    source,
                });
            }
        }
    }
    tc.backoff.reset(&key(template.as_ref()));
    Ok(Action::await_change())
}

/// Retries with the ProxmoxCluster controller's backoff timing.
fn error_policy(t: Arc<Watched>, err: &TemplateError, tc: Arc<TemplateCtx>) -> Action {
    let s = &tc.ctx.settings.cluster;
    tc.ctx.metrics.reconcile_error(CONTROLLER, err.reason());
    let delay = tc
        .backoff
        .next_jittered(&key(t.as_ref()), s.backoff_base, s.backoff_cap);
    tracing::warn!(object = %key(t.as_ref()), error = %err, retry_in = ?delay, "proxmoxmachinetemplate reconcile failed");
    Action::requeue(delay)
}

/// The JSON merge patch that turns `current` into `desired`, or `None` when they are equal.
/// Absent fields and capacity entries no longer wanted are sent as `null` (a merge patch merges
/// maps, so a stale `cpu` would otherwise stay).
pub fn status_patch(
    current: Option<&ProxmoxMachineTemplateStatus>,
    desired: &ProxmoxMachineTemplateStatus,
) -> Option<Value> {
    let current = current.cloned().unwrap_or_default();
    if current == *desired {
        return None;
    }
    let capacity = match &desired.capacity {
        None => Value::Null,
        Some(want) => {
            let mut map = Map::new();
            for stale in current.capacity.iter().flatten().map(|(k, _)| k) {
                if !want.contains_key(stale) {
                    map.insert(stale.clone(), Value::Null);
                }
            }
            for (k, q) in want {
                map.insert(k.clone(), Value::String(q.0.clone()));
            }
            Value::Object(map)
        }
    };
    let node_info = desired
        .node_info
        .as_ref()
        .and_then(|n| serde_json::to_value(n).ok())
        .unwrap_or(Value::Null);
    Some(serde_json::json!({
        "status": {"capacity": capacity, "nodeInfo": node_info}
    }))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use capmox_api::v1alpha2::NodeInfo;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
    use serde_json::json;

    use super::*;

    fn status(capacity: &[(&str, &str)]) -> ProxmoxMachineTemplateStatus {
        ProxmoxMachineTemplateStatus {
            capacity: (!capacity.is_empty()).then(|| {
                capacity
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), Quantity((*v).to_owned())))
                    .collect::<BTreeMap<_, _>>()
            }),
            node_info: Some(NodeInfo {
                architecture: Some("amd64".into()),
                operating_system: Some("linux".into()),
            }),
        }
    }

    #[test]
    fn no_patch_when_equal() {
        let s = status(&[("cpu", "4"), ("memory", "4096Mi")]);
        assert_eq!(status_patch(Some(&s), &s), None);
    }

    #[test]
    fn first_patch_sets_everything() {
        let want = status(&[("cpu", "4"), ("memory", "4096Mi")]);
        assert_eq!(
            status_patch(None, &want),
            Some(json!({"status": {
                "capacity": {"cpu": "4", "memory": "4096Mi"},
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}
            }}))
        );
    }

    #[test]
    fn stale_entries_are_removed() {
        let had = status(&[("cpu", "4"), ("memory", "4096Mi")]);
        let want = status(&[("memory", "8192Mi")]);
        assert_eq!(
            status_patch(Some(&had), &want),
            Some(json!({"status": {
                "capacity": {"cpu": null, "memory": "8192Mi"},
                "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux"}
            }}))
        );
        let none = status(&[]);
        assert_eq!(
            status_patch(Some(&had), &none).and_then(|p| p.pointer("/status/capacity").cloned()),
            Some(Value::Null)
        );
    }
}
