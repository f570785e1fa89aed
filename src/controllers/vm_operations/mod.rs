//! The controllers of the operations on ProxmoxVirtualMachines, one per kind: [`snapshot`]
//! (ProxmoxVMSnapshot), [`restore`] (ProxmoxVMRestore) and [`clone`] (ProxmoxVMClone). Each
//! watches its kind and the ProxmoxVirtualMachines (a change of the VM an object names wakes the
//! object), runs passes of the adapter ([`crate::virtual_machine::operations`]) and persists
//! each pass's status before the next. Snapshots and restores of one VM take turns: within this
//! process through a lock per VM held across a pass and its write, across passes through the
//! statuses (an operation in progress goes first) and Proxmox's own VM lock.
//!
//! Each controller starts once its CRD is served (an installation without it keeps working).

pub mod clone;
pub mod restore;
pub mod snapshot;

use std::fmt::Debug;
use std::sync::Arc;
use std::time::Duration;

use capmox_api::vm::{GROUP, ProxmoxVirtualMachine, VERSION};
use futures::StreamExt;
use futures::stream::BoxStream;
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::events::{Event, EventType, Recorder};
use crate::context::Context;
use crate::machine::latest::Latest;
use crate::proxmox::Client;
use crate::virtual_machine::VirtualMachineError;
use crate::virtual_machine::operations::Again;

/// The watches of one operation controller: its own kind `K` (reflected through `writer` into
/// the store `index` reads) and a related kind `R` in the same scope, whose changes wake the
/// objects of the same namespace that `wakes` says the changed one concerns.
#[allow(clippy::type_complexity)] // Two boxed streams: what the controller is built from.
pub fn watches<K, R>(
    ctx: &Context,
    writer: Writer<K>,
    index: Store<K>,
    wakes: impl Fn(&K, &R) -> bool + Send + Sync + 'static,
) -> (
    BoxStream<'static, Result<K, watcher::Error>>,
    BoxStream<'static, ObjectRef<K>>,
)
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
    R: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let client = &ctx.client;
    let settings = &ctx.settings;
    let wc = || watcher::Config::default().any_semantic();
    let own = super::scope::watch(
        settings,
        |ns| match ns {
            Some(ns) => Api::<K>::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        },
        settings.primary_watch(wc()),
    )
    .default_backoff()
    .reflect(writer)
    .touched_objects()
    .boxed();
    let related = super::scope::watch(
        settings,
        |ns| match ns {
            Some(ns) => Api::<R>::namespaced(client.clone(), ns),
            None => Api::all(client.clone()),
        },
        wc(),
    )
    .default_backoff()
    .touched_objects();
    let woken = related
        .filter_map(|r| async move { r.ok() })
        .flat_map(move |r| {
            let ns = r.namespace();
            let refs: Vec<ObjectRef<K>> = index
                .state()
                .iter()
                .filter(|k| k.namespace() == ns && wakes(k, &r))
                .map(|k| ObjectRef::from_obj(k.as_ref()))
                .collect();
            futures::stream::iter(refs)
        })
        .boxed();
    (own, woken)
}

/// How often a missing CRD is looked for.
const CRD_POLL: Duration = Duration::from_secs(60);

/// What every operation controller shares.
pub struct OpCtx<K: Resource<DynamicType = ()> + Clone> {
    /// The manager's context (its views are the ProxmoxVirtualMachine controller's).
    pub ctx: Arc<Context>,
    /// Events.
    pub recorder: Recorder,
    /// This controller's last writes.
    pub latest: Latest<K>,
    /// Field manager of its patches.
    pub manager: &'static str,
    /// The turns of the VMs.
    pub turns: crate::context::VmTurns,
}

impl<K> OpCtx<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + Serialize
        + DeserializeOwned,
{
    /// A context for the controller `manager`.
    pub fn new(ctx: Arc<Context>, manager: &'static str) -> Self {
        Self {
            recorder: super::recorder(ctx.client.clone()),
            latest: Latest::default(),
            manager,
            turns: Arc::clone(&ctx.vm_turns),
            ctx,
        }
    }

    /// The API of `obj`'s namespace.
    pub fn api(&self, obj: &K) -> Api<K> {
        Api::namespaced(self.ctx.client.clone(), &obj.namespace().unwrap_or_default())
    }

    /// The newest copy of `cached`: the cache's or this controller's last write.
    pub fn current(&self, cached: Arc<K>) -> Arc<K> {
        self.latest.pick(cached)
    }

    fn params(&self) -> PatchParams {
        PatchParams {
            field_manager: Some(self.manager.to_owned()),
            ..PatchParams::default()
        }
    }

    fn remember(
        &self,
        old: &K,
        written: Result<K, kube::Error>,
        what: &str,
    ) -> Result<K, VirtualMachineError> {
        match written {
            Ok(mut w) => {
                w.meta_mut().managed_fields = None;
                self.latest.record(w.clone());
                Ok(w)
            }
            Err(kube::Error::Api(e)) if e.code == 404 => Ok(old.clone()),
            Err(e) => Err(VirtualMachineError::kube(format!(
                "{what} {}/{}",
                old.namespace().unwrap_or_default(),
                old.name_any()
            ))(e)),
        }
    }

    /// Merge-patches the status of `old` to `new`'s when it changed.
    pub async fn persist_status(&self, old: &K, new: &K) -> Result<K, VirtualMachineError> {
        let status = |k: &K| {
            serde_json::to_value(k)
                .ok()
                .and_then(|v| v.get("status").cloned())
                .unwrap_or(Value::Null)
        };
        let (a, b) = (status(old), status(new));
        if a == b {
            return Ok(old.clone());
        }
        let body = json!({"status": crate::merge_patch::diff(&a, &b)});
        let written = self
            .api(old)
            .patch_status(&old.name_any(), &self.params(), &Patch::Merge(&body))
            .await;
        self.remember(old, written, "patching the status of")
    }

    /// Adds (`true`) or removes `finalizer`.
    pub async fn finalizer(&self, old: &K, finalizer: &str, present: bool) -> Result<K, VirtualMachineError> {
        let has = old.finalizers().iter().any(|f| f == finalizer);
        if has == present {
            return Ok(old.clone());
        }
        let mut list: Vec<String> = old
            .finalizers()
            .iter()
            .filter(|f| *f != finalizer)
            .cloned()
            .collect();
        if present {
            list.push(finalizer.to_owned());
        }
        let body = json!({"metadata": {"finalizers": list, "resourceVersion": old.resource_version()}});
        let written = self
            .api(old)
            .patch(&old.name_any(), &self.params(), &Patch::Merge(&body))
            .await;
        self.remember(old, written, "patching the finalizers of")
    }

    /// Publishes an event about `obj`.
    pub async fn publish(&self, obj: &K, warning: bool, reason: &str, note: String) {
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
        if let Err(e) = self.recorder.publish(&ev, &obj.object_ref(&())).await {
            tracing::debug!(error = %e, "publishing event failed");
        }
    }

    /// The turn of VM `pvm` in `namespace`.
    pub fn turn(&self, namespace: &str, pvm: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self
            .turns
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        Arc::clone(turns.entry(format!("{namespace}/{pvm}")).or_default())
    }
}

/// The ProxmoxVirtualMachine `name` in `namespace` (`None`: it does not exist).
pub async fn pvm(
    ctx: &Context,
    namespace: &str,
    name: &str,
) -> Result<Option<ProxmoxVirtualMachine>, VirtualMachineError> {
    Api::<ProxmoxVirtualMachine>::namespaced(ctx.client.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(VirtualMachineError::kube(format!(
            "getting ProxmoxVirtualMachine {namespace}/{name}"
        )))
}

/// The Proxmox client of `pvm`: its credentials Secret, else the manager's global one.
pub async fn client_of(
    ctx: &Context,
    pvm: Option<&ProxmoxVirtualMachine>,
) -> Result<Client, VirtualMachineError> {
    let Some((ns, r)) = pvm.and_then(|p| {
        Some((
            p.namespace().unwrap_or_default(),
            p.spec.credentials_ref.as_ref()?,
        ))
    }) else {
        return ctx.proxmox.global().cloned().ok_or_else(|| {
            VirtualMachineError::Credentials(
                "no Proxmox credentials: set the ProxmoxVirtualMachine's spec.credentialsRef or the manager's PROXMOX_URL"
                    .into(),
            )
        });
    };
    let secret = Api::<Secret>::namespaced(ctx.client.clone(), &ns)
        .get_opt(&r.name)
        .await
        .map_err(VirtualMachineError::kube(format!(
            "getting credentials Secret {ns}/{}",
            r.name
        )))?
        .ok_or_else(|| {
            VirtualMachineError::Credentials(format!("credentials Secret {ns}/{} not found", r.name))
        })?;
    Ok(ctx.proxmox.for_secret(&secret)?)
}

/// A pass's [`Again`] as a controller action.
pub fn action(again: Again, resync: Duration) -> Action {
    match again {
        Again::Now => Action::requeue(Duration::from_millis(1)),
        Again::After(d) => Action::requeue(d),
        Again::Watch => Action::requeue(resync),
    }
}

/// Whether `plural` of `vm.capmox-rs.io/v1alpha1` is served.
pub async fn served(client: &kube::Client, plural: &str) -> bool {
    match client
        .list_api_group_resources(&format!("{GROUP}/{VERSION}"))
        .await
    {
        Ok(list) => list.resources.iter().any(|r| r.name == plural),
        Err(e) => {
            tracing::debug!(error = %e, "API discovery failed");
            false
        }
    }
}

/// Waits until `plural` is served (`false`: `stop` came first).
pub async fn wait_served(
    client: &kube::Client,
    plural: &str,
    stop: impl std::future::Future<Output = ()>,
) -> bool {
    let mut logged = false;
    tokio::pin!(stop);
    while !served(client, plural).await {
        if !logged {
            tracing::info!("{plural}.{GROUP} is not served; its controller waits for it");
            logged = true;
        }
        tokio::select! {
            () = tokio::time::sleep(CRD_POLL) => {}
            () = &mut stop => return false,
        }
    }
    true
}

/// The error policy of the operation controllers: retried with the task poll's backoff.
pub fn retry(ctx: &Context, controller: &str, err: &VirtualMachineError) -> Action {
    let s = &ctx.settings.machine;
    ctx.metrics.reconcile_error(controller, err.class());
    tracing::warn!(controller, error = %err, "reconcile failed");
    Action::requeue(s.task_poll_max.max(Duration::from_millis(500)))
}
