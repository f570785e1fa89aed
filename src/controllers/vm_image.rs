//! The ProxmoxVMImage controller: watches ProxmoxVMImages (triggered by their generation,
//! deletion and finalizers, not by its own status writes) and reconciles each — finalizer,
//! credentials, then passes of [`crate::image::pass`] in a row while each says "go on",
//! persisting the status after each (a pass records its Proxmox task or VMID before the next
//! one writes again); while the object is being deleted, the deletion passes, then the
//! finalizer goes. It starts once the `proxmoxvmimages.vm.capmox-rs.io` CRD is served.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use capmox_api::vm::{
    GROUP, IMAGE_FINALIZER, IMAGE_PLURAL, IMAGE_READY_CONDITION, ImagePhase, ProxmoxVMImage, VERSION,
};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde_json::{Value, json};

use super::events::{Event, EventType, Recorder};
use super::triggers::{changes, hash_of};
use crate::conditions::{self, Desired};
use crate::context::Context;
use crate::image::ImageError;
use crate::image::pass::{Inputs, Outcome, delete, provision};
use crate::proxmox::Client;
use crate::vm::Next;

/// Controller name used for metrics and logs.
pub const CONTROLLER: &str = "proxmoxvmimage";
/// Field manager of this controller's patches.
pub const FIELD_MANAGER: &str = "capmox-proxmoxvmimage";
/// How often a missing CRD is looked for.
const CRD_POLL: Duration = Duration::from_secs(60);
/// Passes one reconcile runs in a row while each says "go on now".
const MAX_CHAINED_PASSES: usize = 16;

struct ImgCtx {
    ctx: Arc<Context>,
    recorder: Recorder,
    store: Store<ProxmoxVMImage>,
}

fn key_of(img: &ProxmoxVMImage) -> String {
    format!("{}/{}", img.namespace().unwrap_or_default(), img.name_any())
}

fn fingerprint(img: &ProxmoxVMImage) -> u64 {
    hash_of((
        img.metadata.generation,
        img.metadata.deletion_timestamp.is_some(),
        img.finalizers(),
    ))
}

async fn crd_served(client: &kube::Client) -> bool {
    match client
        .list_api_group_resources(&format!("{GROUP}/{VERSION}"))
        .await
    {
        Ok(list) => list.resources.iter().any(|r| r.name == IMAGE_PLURAL),
        Err(_) => false,
    }
}

/// Runs the ProxmoxVMImage controller until `shutdown` completes.
pub async fn run(ctx: Arc<Context>, shutdown: impl Future<Output = ()> + Send + 'static) {
    let client = ctx.client.clone();
    let stop = futures::FutureExt::shared(super::shutdown_signal(shutdown));
    let mut logged = false;
    while !crd_served(&client).await {
        if !logged {
            tracing::info!(
                "{IMAGE_PLURAL}.{GROUP} is not served; the ProxmoxVMImage controller waits for it"
            );
            logged = true;
        }
        tokio::select! {
            () = tokio::time::sleep(CRD_POLL) => {}
            () = stop.clone() => return,
        }
    }
    let settings = &ctx.settings;
    let (store, writer) = reflector::store::<ProxmoxVMImage>();
    let events = super::scope::watch(
        settings,
        |ns| match ns {
            Some(ns) => Api::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        },
        settings.primary_watch(watcher::Config::default().any_semantic()),
    )
    .default_backoff()
    .modify(|p: &mut ProxmoxVMImage| p.metadata.managed_fields = None)
    .reflect(writer);
    let triggers = changes(events, fingerprint, |_| true);
    let ic = Arc::new(ImgCtx {
        recorder: super::recorder(client.clone()),
        store: store.clone(),
        ctx: ctx.clone(),
    });
    Controller::for_stream(triggers, store)
        .with_config(Config::default().concurrency(ctx.settings.machine_concurrency()))
        .graceful_shutdown_on(stop)
        .run(reconcile, error_policy, ic)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "proxmoxvmimage reconcile failed");
            }
        })
        .await;
}

fn error_policy(img: Arc<ProxmoxVMImage>, err: &ImageError, ic: Arc<ImgCtx>) -> Action {
    let s = &ic.ctx.settings.machine;
    tracing::warn!(object = %key_of(&img), error = %err, "proxmoxvmimage reconcile failed");
    Action::requeue(s.task_poll_max.max(Duration::from_secs(1)))
}

/// The Proxmox client of `img`: its credentials Secret, else the global one.
async fn client(ic: &ImgCtx, img: &ProxmoxVMImage) -> Result<Client, ImageError> {
    let ctx = &ic.ctx;
    let Some(r) = img.spec.credentials_ref.as_ref() else {
        return ctx.proxmox.global().cloned().ok_or_else(|| {
            ImageError::Credentials(
                "no Proxmox credentials: set spec.credentialsRef or the manager's PROXMOX_URL".into(),
            )
        });
    };
    let ns = img.namespace().unwrap_or_default();
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&r.name)
        .await
        .map_err(ImageError::kube(format!(
            "getting credentials Secret {ns}/{}",
            r.name
        )))?
        .ok_or_else(|| ImageError::Credentials(format!("credentials Secret {ns}/{} not found", r.name)))?;
    ctx.proxmox
        .for_secret(&secret)
        .map_err(|e| ImageError::Credentials(e.to_string()))
}

fn api(ic: &ImgCtx, img: &ProxmoxVMImage) -> Api<ProxmoxVMImage> {
    Api::namespaced(ic.ctx.client.clone(), &img.namespace().unwrap_or_default())
}

fn params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// Writes the finalizers (when changed) and the status (when changed, as a merge patch).
async fn persist(
    ic: &ImgCtx,
    old: &ProxmoxVMImage,
    new: &ProxmoxVMImage,
) -> Result<ProxmoxVMImage, ImageError> {
    let mut current = old.clone();
    if old.finalizers() != new.finalizers() {
        let body = json!({"metadata": {"finalizers": new.finalizers()}});
        match api(ic, old)
            .patch(&old.name_any(), &params(), &Patch::Merge(&body))
            .await
        {
            Ok(w) => current = w,
            Err(kube::Error::Api(e)) if e.code == 404 => return Ok(current),
            Err(e) => return Err(ImageError::kube(format!("patching {}", key_of(old)))(e)),
        }
    }
    let strip = |p: &ProxmoxVMImage| {
        p.status.clone().map(|mut s| {
            s.last_updated = None;
            s
        })
    };
    if strip(&current) == strip(new) {
        return Ok(current);
    }
    let mut status = new.status.clone().unwrap_or_default();
    status.last_updated = Some(crate::machine::now());
    let to_value =
        |s: &Option<capmox_api::vm::ProxmoxVMImageStatus>| serde_json::to_value(s).unwrap_or(Value::Null);
    let body =
        json!({"status": crate::merge_patch::diff(&to_value(&current.status), &to_value(&Some(status)))});
    match api(ic, old)
        .patch_status(&old.name_any(), &params(), &Patch::Merge(&body))
        .await
    {
        Ok(w) => Ok(w),
        Err(kube::Error::Api(e)) if e.code == 404 => Ok(current),
        Err(e) => Err(ImageError::kube(format!("patching status of {}", key_of(old)))(e)),
    }
}

async fn publish(ic: &ImgCtx, img: &ProxmoxVMImage, warning: bool, reason: &str, note: String) {
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
    if let Err(e) = ic.recorder.publish(&ev, &img.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing event failed");
    }
}

fn action(next: Next, resync: Duration) -> Action {
    match next {
        Next::Now => Action::requeue(Duration::from_millis(1)),
        Next::After(d) => Action::requeue(d),
        Next::Watch => Action::requeue(resync),
    }
}

/// VMIDs the other images recorded.
fn taken(ic: &ImgCtx, img: &ProxmoxVMImage) -> Vec<i64> {
    ic.store
        .state()
        .iter()
        .filter(|o| o.metadata.uid != img.metadata.uid)
        .flat_map(|o| {
            o.status
                .iter()
                .flat_map(|s| s.templates.iter().flatten())
                .filter_map(|t| t.template_vmid)
                .collect::<Vec<_>>()
        })
        .collect()
}

async fn reconcile(cached: Arc<ProxmoxVMImage>, ic: Arc<ImgCtx>) -> Result<Action, ImageError> {
    let Some(fresh) = ic.store.get(&ObjectRef::from_obj(cached.as_ref())) else {
        return Ok(Action::await_change());
    };
    let mut img = (*fresh).clone();
    let result = reconcile_inner(&ic, &mut img).await;
    if let Err(e) = &result {
        let mut work = img.clone();
        let generation = work.metadata.generation;
        let status = work.status.get_or_insert_with(Default::default);
        status.phase.get_or_insert(ImagePhase::Pending);
        conditions::set(
            status.conditions.get_or_insert_with(Vec::new),
            &Desired::falsy(IMAGE_READY_CONDITION, e.reason(), e.to_string()),
            generation,
            &crate::machine::now(),
        );
        if let Err(pe) = persist(&ic, &img, &work).await {
            tracing::debug!(object = %key_of(&img), error = %pe, "recording the failure failed");
        }
    }
    result
}

async fn reconcile_inner(ic: &ImgCtx, img: &mut ProxmoxVMImage) -> Result<Action, ImageError> {
    let settings = &ic.ctx.settings.machine;
    let deleting = img.metadata.deletion_timestamp.is_some();
    let has_finalizer = img.finalizers().iter().any(|f| f == IMAGE_FINALIZER);
    if deleting && !has_finalizer {
        return Ok(Action::await_change());
    }
    if !deleting && !has_finalizer {
        let mut work = img.clone();
        work.finalizers_mut().push(IMAGE_FINALIZER.to_owned());
        *img = persist(ic, img, &work).await?;
    }
    let client = client(ic, img).await;
    let view = match (client, deleting) {
        (Ok(c), _) => Some(ic.ctx.view(&c)),
        // Without credentials a deleted image can only let go.
        (Err(_), true) => None,
        (Err(e), false) => return Err(e),
    };
    for pass in 1..=MAX_CHAINED_PASSES {
        let mut work = img.clone();
        let out: Outcome = match &view {
            Some(view) => {
                let inp = Inputs {
                    view,
                    settings,
                    taken: taken(ic, img),
                };
                if deleting {
                    delete(&inp, &mut work).await?
                } else {
                    provision(&inp, &mut work).await?
                }
            }
            None => Outcome {
                next: Next::Watch,
                events: Vec::new(),
                finished: true,
            },
        };
        if deleting && out.finished {
            work.finalizers_mut().retain(|f| f != IMAGE_FINALIZER);
            persist(ic, img, &work).await?;
            publish(
                ic,
                img,
                false,
                "Deleted",
                "the image's template and file are gone (or retained)".into(),
            )
            .await;
            return Ok(Action::await_change());
        }
        *img = persist(ic, img, &work).await?;
        for (warning, reason, message) in out.events {
            publish(ic, img, warning, &reason, message).await;
        }
        if out.next != Next::Now || pass == MAX_CHAINED_PASSES {
            return Ok(action(out.next, settings.resync));
        }
    }
    Ok(Action::requeue(Duration::from_millis(1)))
}
