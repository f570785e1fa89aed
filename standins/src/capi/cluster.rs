//! The Cluster half of the core CAPI stand-in: finalizer, ProxmoxCluster ownership, infrastructure
//! readiness, control-plane endpoint and deletion of the cluster's objects.

use std::sync::Arc;

use capmox_api::capi::v1beta2::{Cluster, Machine};
use capmox_api::consts::{CLUSTER_NAME_LABEL, GROUP};
use capmox_api::v1alpha2::ProxmoxCluster;
use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, Patch};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::objects::{PROXMOX_CLUSTER_KIND, controlled_by, set_cluster_owner};
use super::{CLUSTER_FINALIZER, DELETE_POLL, ERROR_RETRY, scoped};
use crate::error::{StandInError, is_not_found, kube_err, log_retry};
use crate::handle::StopSignal;
use crate::meta::{add_finalizer, describe, patch_params, remove_finalizer};

struct Ctx {
    client: kube::Client,
}

pub(super) async fn run(client: kube::Client, namespace: Option<String>, stop: StopSignal) {
    let ns = namespace.as_deref();
    let wc = watcher::Config::default().any_semantic();
    let controller = Controller::new(scoped::<Cluster>(&client, ns), wc.clone());
    let (s1, s2) = (controller.store(), controller.store());
    controller
        .watches(scoped::<ProxmoxCluster>(&client, ns), wc.clone(), move |pc| {
            clusters_of_infra(&s1, &pc)
        })
        .watches(scoped::<Machine>(&client, ns), wc, move |m| {
            let c = m.spec.cluster_name.clone();
            s2.get(&ObjectRef::new(&c).within(&m.namespace().unwrap_or_default()))
                .map(|c| ObjectRef::from_obj(c.as_ref()))
        })
        .graceful_shutdown_on(stop.wait())
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "CAPI stand-in (Cluster) reconcile failed");
            }
        })
        .await;
}

/// The Clusters whose `spec.infrastructureRef` names this ProxmoxCluster.
fn clusters_of_infra(store: &Store<Cluster>, pc: &ProxmoxCluster) -> Vec<ObjectRef<Cluster>> {
    store
        .state()
        .into_iter()
        .filter(|c| c.namespace() == pc.namespace() && infra_name(c) == Some(pc.name_any()))
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// Name of the Cluster's ProxmoxCluster, when its infrastructure is one.
fn infra_name(c: &Cluster) -> Option<String> {
    c.spec
        .infrastructure_ref
        .as_ref()
        .filter(|r| r.api_group == GROUP && r.kind == PROXMOX_CLUSTER_KIND)
        .map(|r| r.name.clone())
}

fn error_policy(_c: Arc<Cluster>, err: &StandInError, _ctx: Arc<Ctx>) -> Action {
    log_retry("CAPI Cluster", err);
    Action::requeue(crate::error::retry_delay(err, ERROR_RETRY))
}

async fn reconcile(c: Arc<Cluster>, ctx: Arc<Ctx>) -> Result<Action, StandInError> {
    let Some(infra) = infra_name(&c) else {
        return Ok(Action::await_change());
    };
    let ns = c.namespace().unwrap_or_default();
    let clusters: Api<Cluster> = Api::namespaced(ctx.client.clone(), &ns);
    let pcs: Api<ProxmoxCluster> = Api::namespaced(ctx.client.clone(), &ns);

    if c.meta().deletion_timestamp.is_some() {
        return delete(&ctx.client, &clusters, &pcs, &c, &infra).await;
    }
    if add_finalizer(&clusters, &c, CLUSTER_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let Some(pc) = pcs
        .get_opt(&infra)
        .await
        .map_err(kube_err(format!("reading ProxmoxCluster {ns}/{infra}")))?
    else {
        return Ok(Action::await_change());
    };
    if !controlled_by(&pc.metadata, c.as_ref()) || pc.labels().get(CLUSTER_NAME_LABEL) != Some(&c.name_any())
    {
        let mut meta = pc.metadata.clone();
        set_cluster_owner(&mut meta, &c);
        let patch = json!({"metadata": {
            "ownerReferences": meta.owner_references,
            "labels": meta.labels,
            "resourceVersion": pc.resource_version(),
        }});
        pcs.patch(&infra, &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err(format!("adopting {}", describe(&pc))))?;
        tracing::info!(cluster = %c.name_any(), proxmox_cluster = %infra, "ProxmoxCluster owned by its Cluster");
        return Ok(Action::await_change());
    }

    let provisioned = pc
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        .unwrap_or(false);
    if !provisioned {
        return Ok(Action::await_change());
    }
    let has_endpoint =
        c.spec.control_plane_endpoint.as_ref().is_some_and(|e| {
            e.host.as_deref().is_some_and(|h| !h.is_empty()) && e.port.is_some_and(|p| p > 0)
        });
    if !has_endpoint
        && let Some(ep) = pc.spec.control_plane_endpoint.as_ref()
        && ep.host.as_deref().is_some_and(|h| !h.is_empty())
    {
        let patch = json!({"spec": {"controlPlaneEndpoint": {"host": ep.host, "port": ep.port}}});
        clusters
            .patch(&c.name_any(), &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err(format!(
                "setting the endpoint of {}",
                describe(c.as_ref())
            )))?;
    }
    let done = c
        .status
        .as_ref()
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.infrastructure_provisioned)
        .unwrap_or(false);
    if !done {
        let patch = json!({"status": {
            "initialization": {"infrastructureProvisioned": true},
            "phase": "Provisioned",
        }});
        clusters
            .patch_status(&c.name_any(), &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err(format!(
                "setting the status of {}",
                describe(c.as_ref())
            )))?;
        tracing::info!(cluster = %c.name_any(), "cluster infrastructure provisioned");
    }
    Ok(Action::await_change())
}

/// Deletes the cluster's Machines, then its ProxmoxCluster, then releases the Cluster.
async fn delete(
    client: &kube::Client,
    clusters: &Api<Cluster>,
    pcs: &Api<ProxmoxCluster>,
    c: &Cluster,
    infra: &str,
) -> Result<Action, StandInError> {
    if !c.finalizers().iter().any(|f| f == CLUSTER_FINALIZER) {
        return Ok(Action::await_change());
    }
    let ns = c.namespace().unwrap_or_default();
    let name = c.name_any();
    let machines: Api<Machine> = Api::namespaced(client.clone(), &ns);
    let lp = ListParams::default().labels(&format!("{CLUSTER_NAME_LABEL}={name}"));
    let list = machines
        .list(&lp)
        .await
        .map_err(kube_err(format!("listing the Machines of {}", describe(c))))?;
    let mut waiting = false;
    for m in list.items.iter().filter(|m| m.spec.cluster_name == name) {
        waiting = true;
        if m.meta().deletion_timestamp.is_none() {
            delete_ignoring_missing(&machines, &m.name_any(), describe(m)).await?;
        }
    }
    if waiting {
        return Ok(Action::requeue(DELETE_POLL));
    }
    if let Some(pc) = pcs
        .get_opt(infra)
        .await
        .map_err(kube_err(format!("reading ProxmoxCluster {ns}/{infra}")))?
    {
        if pc.meta().deletion_timestamp.is_none() {
            delete_ignoring_missing(pcs, infra, describe(&pc)).await?;
        }
        return Ok(Action::requeue(DELETE_POLL));
    }
    remove_finalizer(clusters, c, CLUSTER_FINALIZER).await?;
    tracing::info!(cluster = %name, "cluster deleted");
    Ok(Action::await_change())
}

/// Deletes `name`, treating "already gone" as success.
pub(super) async fn delete_ignoring_missing<K>(
    api: &Api<K>,
    name: &str,
    what: String,
) -> Result<(), StandInError>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    match api.delete(name, &DeleteParams::default()).await {
        Ok(_) => Ok(()),
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(kube_err(format!("deleting {what}"))(e)),
    }
}
