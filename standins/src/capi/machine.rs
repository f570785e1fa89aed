//! The Machine half of the core CAPI stand-in: finalizer, ProxmoxMachine ownership, providerID,
//! the simulated node join and deletion of the infrastructure machine.

use std::sync::Arc;

use capmox_api::capi::v1beta2::Machine;
use capmox_api::capi::{CONTROL_PLANE_LABEL, MachineAddress};
use capmox_api::consts::{CLUSTER_NAME_LABEL, GROUP};
use capmox_api::v1alpha2::{MachineAddressType, ProxmoxMachine};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::api::{Api, Patch};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;

use super::cluster::delete_ignoring_missing;
use super::objects::{PROXMOX_MACHINE_KIND, controlled_by, set_machine_owner};
use super::{DELETE_POLL, ERROR_RETRY, MACHINE_FINALIZER, scoped};
use crate::error::{StandInError, kube_err, log_retry};
use crate::handle::StopSignal;
use crate::meta::{add_finalizer, controller_owner, describe, patch_params, remove_finalizer};

struct Ctx {
    client: kube::Client,
}

pub(super) async fn run(client: kube::Client, namespace: Option<String>, stop: StopSignal) {
    let ns = namespace.as_deref();
    let wc = watcher::Config::default().any_semantic();
    let controller = Controller::new(scoped::<Machine>(&client, ns), wc.clone());
    let store = controller.store();
    controller
        .watches(scoped::<ProxmoxMachine>(&client, ns), wc, move |pm| {
            machines_of_infra(&store, &pm)
        })
        .graceful_shutdown_on(stop.wait())
        .run(reconcile, error_policy, Arc::new(Ctx { client }))
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "CAPI stand-in (Machine) reconcile failed");
            }
        })
        .await;
}

/// The Machine owning this ProxmoxMachine, or those whose `spec.infrastructureRef` names it.
fn machines_of_infra(store: &Store<Machine>, pm: &ProxmoxMachine) -> Vec<ObjectRef<Machine>> {
    let ns = pm.namespace().unwrap_or_default();
    if let Some(o) = controller_owner(pm.owner_references(), "cluster.x-k8s.io", "Machine") {
        return vec![ObjectRef::new(&o.name).within(&ns)];
    }
    store
        .state()
        .into_iter()
        .filter(|m| m.namespace() == pm.namespace() && infra_name(m) == Some(pm.name_any()))
        .map(|m| ObjectRef::from_obj(m.as_ref()))
        .collect()
}

/// Name of the Machine's ProxmoxMachine, when its infrastructure is one.
fn infra_name(m: &Machine) -> Option<String> {
    let r = &m.spec.infrastructure_ref;
    (r.api_group == GROUP && r.kind == PROXMOX_MACHINE_KIND && !r.name.is_empty()).then(|| r.name.clone())
}

fn error_policy(_m: Arc<Machine>, err: &StandInError, _ctx: Arc<Ctx>) -> Action {
    log_retry("CAPI Machine", err);
    Action::requeue(crate::error::retry_delay(err, ERROR_RETRY))
}

async fn reconcile(m: Arc<Machine>, ctx: Arc<Ctx>) -> Result<Action, StandInError> {
    let Some(infra) = infra_name(&m) else {
        return Ok(Action::await_change());
    };
    let ns = m.namespace().unwrap_or_default();
    let machines: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let pms: Api<ProxmoxMachine> = Api::namespaced(ctx.client.clone(), &ns);

    if m.meta().deletion_timestamp.is_some() {
        return delete(&ctx.client, &machines, &pms, &m, &infra).await;
    }
    if add_finalizer(&machines, &m, MACHINE_FINALIZER).await? {
        return Ok(Action::await_change());
    }
    let Some(pm) = pms
        .get_opt(&infra)
        .await
        .map_err(kube_err(format!("reading ProxmoxMachine {ns}/{infra}")))?
    else {
        return Ok(Action::await_change());
    };
    let labels_ok = pm.labels().get(CLUSTER_NAME_LABEL) == Some(&m.spec.cluster_name)
        && (!m.labels().contains_key(CONTROL_PLANE_LABEL) || pm.labels().contains_key(CONTROL_PLANE_LABEL));
    if !controlled_by(&pm.metadata, m.as_ref()) || !labels_ok {
        let mut meta = pm.metadata.clone();
        set_machine_owner(&mut meta, &m);
        let patch = json!({"metadata": {
            "ownerReferences": meta.owner_references,
            "labels": meta.labels,
            "resourceVersion": pm.resource_version(),
        }});
        pms.patch(&infra, &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err(format!("adopting {}", describe(&pm))))?;
        tracing::info!(machine = %m.name_any(), proxmox_machine = %infra, "ProxmoxMachine owned by its Machine");
        return Ok(Action::await_change());
    }

    let status = pm.status.as_ref();
    let provisioned = status
        .and_then(|s| s.initialization.as_ref())
        .and_then(|i| i.provisioned)
        .unwrap_or(false);
    if !provisioned {
        return Ok(Action::await_change());
    }
    let name = m.name_any();
    if let Some(id) = pm.spec.provider_id.as_ref().filter(|id| !id.is_empty())
        && m.spec.provider_id.as_ref() != Some(id)
    {
        let patch = json!({"spec": {"providerID": id}});
        machines
            .patch(&name, &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err(format!(
                "setting the providerID of {}",
                describe(m.as_ref())
            )))?;
    }
    let addresses: Vec<MachineAddress> = status
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .map(|a| MachineAddress {
            type_: address_type(a.type_).to_owned(),
            address: a.address.clone(),
        })
        .collect();
    let current = m.status.as_ref();
    let joined = current
        .and_then(|s| s.node_ref.as_ref())
        .is_some_and(|n| n.name == pm.name_any())
        && current.and_then(|s| s.addresses.as_ref()) == Some(&addresses);
    if !joined {
        let patch = json!({"status": {
            "nodeRef": {"name": pm.name_any()},
            "addresses": addresses,
            "initialization": {"infrastructureProvisioned": true, "bootstrapDataSecretCreated": true},
            "conditions": [condition("Ready"), condition("Available")],
            "phase": "Running",
        }});
        machines
            .patch_status(&name, &patch_params(), &Patch::Merge(&patch))
            .await
            .map_err(kube_err(format!(
                "setting the status of {}",
                describe(m.as_ref())
            )))?;
        tracing::info!(machine = %name, node = %pm.name_any(), "machine's node joined");
    }
    Ok(Action::await_change())
}

/// A `True` condition of a running machine.
fn condition(type_: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: "True".to_owned(),
        reason: type_.to_owned(),
        message: String::new(),
        last_transition_time: Time(k8s_openapi::jiff::Timestamp::now()),
        observed_generation: None,
    }
}

/// CAPI's spelling of an address type.
fn address_type(t: MachineAddressType) -> &'static str {
    match t {
        MachineAddressType::Hostname => "Hostname",
        MachineAddressType::ExternalIp => "ExternalIP",
        MachineAddressType::InternalIp => "InternalIP",
        MachineAddressType::ExternalDns => "ExternalDNS",
        MachineAddressType::InternalDns => "InternalDNS",
    }
}

/// Deletes the ProxmoxMachine, waits until it is gone, deletes the bootstrap Secret and releases
/// the Machine.
async fn delete(
    client: &kube::Client,
    machines: &Api<Machine>,
    pms: &Api<ProxmoxMachine>,
    m: &Machine,
    infra: &str,
) -> Result<Action, StandInError> {
    if !m.finalizers().iter().any(|f| f == MACHINE_FINALIZER) {
        return Ok(Action::await_change());
    }
    if let Some(pm) = pms
        .get_opt(infra)
        .await
        .map_err(kube_err(format!("reading ProxmoxMachine {infra}")))?
    {
        if pm.meta().deletion_timestamp.is_none() {
            delete_ignoring_missing(pms, infra, describe(&pm)).await?;
        }
        return Ok(Action::requeue(DELETE_POLL));
    }
    if let Some(secret) = m.spec.bootstrap.data_secret_name.as_deref() {
        let secrets: Api<Secret> = Api::namespaced(client.clone(), &m.namespace().unwrap_or_default());
        delete_ignoring_missing(&secrets, secret, format!("bootstrap Secret {secret}")).await?;
    }
    remove_finalizer(machines, m, MACHINE_FINALIZER).await?;
    tracing::info!(machine = %m.name_any(), "machine deleted");
    Ok(Action::await_change())
}
