//! The Proxmox client of a ProxmoxMachine: its zone's credentials Secret, the one recorded where
//! its VM was created, or its ProxmoxCluster's (issue 14 item 7), and which Secret's change
//! requeues a machine whose credentials Proxmox refused.

use std::time::Instant;

use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use k8s_openapi::api::core::v1::{Secret, SecretReference};
use kube::api::Api;

use super::{CREDENTIALS_TTL, MachineCtx};
use crate::cluster::{self, ClusterError};
use crate::context::Context;
use crate::machine::MachineError;
use crate::proxmox::Client;

/// The Proxmox client of a machine: its zone's credentials Secret when `zone_secret` names one
/// (it wins over the global client: the zone is another Proxmox cluster), else the ProxmoxCluster's
/// (same precedence as the cluster controller; read-only). A client built from a credentials
/// Secret is reused for [`CREDENTIALS_TTL`].
pub(super) async fn proxmox_client(
    mc: &MachineCtx,
    pc: Option<&ProxmoxCluster>,
    zone_secret: Option<&SecretReference>,
) -> Result<Client, MachineError> {
    let ctx = &mc.ctx;
    let zone_key = zone_secret.and_then(|r| Some((r.namespace.clone()?, r.name.clone()?)));
    if zone_key.is_none()
        && let Some(g) = ctx.proxmox.global()
    {
        return Ok(g.clone());
    }
    let Some((ns, name)) = zone_key.clone().or_else(|| pc.and_then(cluster::secret_key)) else {
        return Err(MachineError::Invalid(
            "no Proxmox credentials: neither PROXMOX_URL nor the ProxmoxCluster's credentialsRef".into(),
        ));
    };
    let whose = if zone_key.is_some() {
        "zone credentials secret"
    } else {
        "credentials secret"
    };
    let cache_key = (ns.clone(), name.clone());
    if let Some((client, at)) = mc
        .credentials
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .get(&cache_key)
        && at.elapsed() < CREDENTIALS_TTL
    {
        return Ok(client.clone());
    }
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let secret = api
        .get_opt(&name)
        .await
        .map_err(MachineError::kube(format!("getting {whose} {ns}/{name}")))?
        .ok_or_else(|| MachineError::Invalid(format!("{whose} {ns}/{name} not found")))?;
    let client = ctx.proxmox.for_secret(&secret).map_err(|e| {
        let e = ClusterError::from(e);
        match &zone_key {
            Some(_) => MachineError::Invalid(format!("{whose} {ns}/{name}: {e}")),
            None => MachineError::Credentials(e),
        }
    })?;
    mc.credentials
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(cache_key, (client.clone(), Instant::now()));
    Ok(client)
}

/// The Secret whose change should requeue a machine Proxmox refused: its zone's, else its
/// ProxmoxCluster's (`None` with the global client, which only changes with a restart).
pub(super) fn rotation_secret(
    ctx: &Context,
    pc: Option<&ProxmoxCluster>,
    zone_secret: Option<&SecretReference>,
) -> Option<(String, String)> {
    if let Some(r) = zone_secret {
        return Some((r.namespace.clone()?, r.name.clone()?));
    }
    if ctx.proxmox.global().is_some() {
        return None;
    }
    pc.and_then(cluster::secret_key)
}

/// The zone credentials Secret recorded for the machine's VM (see [`zone::machine_credentials`]).
pub(super) fn recorded_credentials(pm: &ProxmoxMachine) -> Option<SecretReference> {
    pm.status.as_ref().and_then(|s| s.credentials_ref.clone())
}
