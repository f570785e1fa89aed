//! The credentials Secret of a ProxmoxCluster: resolving the Proxmox client, adopting the Secret
//! (non-controller ownerRef + finalizer, and the label `clusterctl move` moves it by) and releasing
//! it on delete. A reference to an earlier ProxmoxCluster of the same name (restored or moved with
//! a new UID) is rewritten to this one.

use capmox_api::consts::SECRET_FINALIZER;
use capmox_api::v1alpha2::ProxmoxCluster;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use serde_json::json;

use super::error::CREDENTIALS_SECRET_FAILED_REASON;
use super::{ClusterError, owner_reference, readiness};
use crate::context::Context;
use crate::proxmox::Client;

/// `(namespace, name)` of the credentials Secret, the namespace defaulting to the cluster's.
pub fn secret_key(pc: &ProxmoxCluster) -> Option<(String, String)> {
    let r = pc.spec.credentials_ref.as_ref()?;
    let name = r.name.clone().filter(|n| !n.is_empty())?;
    let ns = r
        .namespace
        .clone()
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| pc.namespace().unwrap_or_default());
    Some((ns, name))
}

/// The label that makes `clusterctl move` move an object (here: the credentials Secret, whatever
/// its owner references say).
pub const MOVE_LABEL: &str = "clusterctl.cluster.x-k8s.io/move";

fn is_ours(r: &OwnerReference, pc: &ProxmoxCluster) -> bool {
    r.kind == "ProxmoxCluster"
        && capmox_api::capi::api_version_in_group(&r.api_version, capmox_api::consts::GROUP)
        && r.name == pc.name_any()
}

async fn patch_meta(
    api: &Api<Secret>,
    s: &Secret,
    owners: Vec<OwnerReference>,
    finalizers: Vec<String>,
    move_label: bool,
) -> Result<Secret, ClusterError> {
    let mut patch = json!({"metadata": {
        "ownerReferences": owners,
        "finalizers": finalizers,
        "resourceVersion": s.resource_version(),
    }});
    if move_label {
        patch["metadata"]["labels"] = json!({ MOVE_LABEL: "" });
    }
    api.patch(&s.name_any(), &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .map_err(ClusterError::kube(
            CREDENTIALS_SECRET_FAILED_REASON,
            format!("patching credentials Secret {}", s.name_any()),
        ))
}

/// The Proxmox client for a ProxmoxCluster: the global client, else the one of its Secret. A
/// referenced Secret is adopted (ownerRef + finalizer) in both cases, as capmox does.
pub async fn resolve_client(ctx: &Context, pc: &ProxmoxCluster) -> Result<Client, ClusterError> {
    let Some((ns, name)) = secret_key(pc) else {
        return ctx
            .proxmox
            .global()
            .cloned()
            .ok_or_else(|| ClusterError::CredentialsNotFound {
                message: readiness::NO_CREDENTIALS_MESSAGE.to_owned(),
            });
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(mut secret) = api.get_opt(&name).await.map_err(ClusterError::kube(
        CREDENTIALS_SECRET_FAILED_REASON,
        format!("getting credentials Secret {ns}/{name}"),
    ))?
    else {
        ctx.proxmox.forget(&ns, &name);
        return Err(ClusterError::CredentialsNotFound {
            message: format!("credentials secret {ns}/{name} not found"),
        });
    };
    let mut finalizers = secret.finalizers().to_vec();
    let ours = owner_reference(pc, false);
    let (owners, owned) = adopted_owners(secret.owner_references(), pc, &ours);
    let finalized = finalizers.iter().any(|f| f == SECRET_FINALIZER);
    let labelled = secret.labels().contains_key(MOVE_LABEL);
    if !owned || !finalized || !labelled {
        if !finalized {
            finalizers.push(SECRET_FINALIZER.to_owned());
        }
        // Build the client from the patched Secret so its resourceVersion is the cached one.
        secret = patch_meta(&api, &secret, owners, finalizers, !labelled).await?;
    }
    match ctx.proxmox.global() {
        Some(g) => Ok(g.clone()),
        None => Ok(ctx.proxmox.for_secret(&secret)?),
    }
}

/// The Secret's owner references with ours in place — added, or replacing a reference to an
/// earlier ProxmoxCluster of our name (another UID) — and whether they were right already.
fn adopted_owners(
    current: &[OwnerReference],
    pc: &ProxmoxCluster,
    ours: &OwnerReference,
) -> (Vec<OwnerReference>, bool) {
    let mut owners: Vec<OwnerReference> = current.iter().filter(|r| !is_ours(r, pc)).cloned().collect();
    owners.push(ours.clone());
    let right = current.iter().any(|r| is_ours(r, pc) && r.uid == ours.uid)
        && current.iter().filter(|r| is_ours(r, pc)).count() == 1;
    if right {
        return (current.to_vec(), true);
    }
    (owners, false)
}

/// Removes our ownerRef from the credentials Secret, and its finalizer when we were its only owner.
pub async fn release(ctx: &Context, pc: &ProxmoxCluster) -> Result<(), ClusterError> {
    let Some((ns, name)) = secret_key(pc) else {
        return Ok(());
    };
    let api: Api<Secret> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(secret) = api.get_opt(&name).await.map_err(ClusterError::kube(
        CREDENTIALS_SECRET_FAILED_REASON,
        format!("getting credentials Secret {ns}/{name}"),
    ))?
    else {
        ctx.proxmox.forget(&ns, &name);
        return Ok(());
    };
    let before = secret.owner_references().to_vec();
    let only_owner = before.iter().all(|r| is_ours(r, pc));
    let owners: Vec<_> = before.iter().filter(|r| !is_ours(r, pc)).cloned().collect();
    let mut finalizers = secret.finalizers().to_vec();
    if only_owner {
        finalizers.retain(|f| f != SECRET_FINALIZER);
    }
    if owners.len() != before.len() || finalizers.len() != secret.finalizers().len() {
        patch_meta(&api, &secret, owners, finalizers, false).await?;
    }
    ctx.proxmox.forget(&ns, &name);
    Ok(())
}
