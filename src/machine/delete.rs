//! One deletion pass of a ProxmoxMachine: the lifecycle deletes the VM, its HA resource and its
//! bootstrap ISO ([`crate::vm::pass::delete`]); once they are gone the machine releases its IPAM
//! claims and its place in the ProxmoxCluster's node locations, and the controller drops the
//! finalizer.

use std::sync::Arc;

use capmox_api::capi::IPAM_GROUP;
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject};
use kube::core::GroupVersionKind;

use super::caches::Caches;
use super::error::MachineError;
use super::locations::Locations;
use super::record::{self, record_of};
use crate::ipam::IpamApiVersion;
use crate::proxmox::view::ProxmoxView;
use crate::vm::decide::DeleteStep;
use crate::vm::{Next, Settings};

/// What a deletion pass did.
#[derive(Debug)]
pub struct DeleteOutcome {
    /// The step that ran.
    pub step: DeleteStep,
    /// When to look again (ignored when `finished`).
    pub next: Next,
    /// Everything is gone: the controller may drop the finalizer.
    pub finished: bool,
}

/// Inputs of a deletion pass besides the machine.
pub struct DeleteInputs<'a> {
    /// Kubernetes client.
    pub kube: &'a kube::Client,
    /// The IPAM API version served.
    pub ipam_version: IpamApiVersion,
    /// The view of the machine's Proxmox cluster; `None` when no credentials are available (then
    /// only a machine that never got a VMID can finish).
    pub view: Option<&'a Arc<ProxmoxView>>,
    /// The machine's ProxmoxCluster.
    pub pc: Option<&'a Arc<ProxmoxCluster>>,
    /// Timing.
    pub settings: &'a Settings,
    /// Watch caches.
    pub caches: &'a dyn Caches,
    /// The node-location writer.
    pub locations: &'a Locations,
}

/// The IPAddressClaim API in the served `version`.
fn claims_api(kube: &kube::Client, version: IpamApiVersion, ns: &str) -> Api<DynamicObject> {
    let version = match version {
        IpamApiVersion::V1beta2 => "v1beta2",
        IpamApiVersion::V1beta1 => "v1beta1",
    };
    let gvk = GroupVersionKind::gvk(IPAM_GROUP, version, "IPAddressClaim");
    Api::namespaced_with(
        kube.clone(),
        ns,
        &ApiResource::from_gvk_with_plural(&gvk, "ipaddressclaims"),
    )
}

/// Deletes the machine's IPAddressClaims (from the watch cache; one that is gone counts as deleted).
async fn release_claims(inp: &DeleteInputs<'_>, pm: &ProxmoxMachine) -> Result<(), MachineError> {
    let ns = pm.namespace().unwrap_or_default();
    let names = inp
        .caches
        .claims_of(&ns, &pm.name_any(), &pm.uid().unwrap_or_default());
    let api = claims_api(inp.kube, inp.ipam_version, &ns);
    for name in &names {
        match api.delete(name, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => return Err(MachineError::kube(format!("deleting IPAddressClaim {ns}/{name}"))(e)),
        }
    }
    Ok(())
}

fn deleting(pm: &mut ProxmoxMachine, reason: &str, message: String) {
    super::set_failure_condition(pm, reason, message);
}

/// Runs one deletion pass on `pm`.
pub async fn delete(inp: &DeleteInputs<'_>, pm: &mut ProxmoxMachine) -> Result<DeleteOutcome, MachineError> {
    let before = record_of(pm);
    let out = match (inp.view, before.vmid) {
        (Some(view), _) => {
            let owner = super::owner_of(pm);
            let out = crate::vm::pass::delete(
                view,
                &owner,
                inp.settings,
                &pm.name_any(),
                pm.spec.ha.is_some(),
                before.clone(),
            )
            .await?;
            record::apply(pm, &before, &out.record);
            out
        }
        (None, Some(id)) => {
            deleting(
                pm,
                api::DELETION_FAILED_REASON,
                format!("no Proxmox credentials to delete VM {id}; waiting for them"),
            );
            return Ok(DeleteOutcome {
                step: DeleteStep::PollTask,
                next: Next::After(inp.settings.retry_delay),
                finished: false,
            });
        }
        (None, None) => crate::vm::DeleteOutcome {
            step: DeleteStep::Finish,
            record: before,
            next: Next::Now,
            message: String::new(),
            failure: None,
            finished: true,
        },
    };
    if let Some(f) = &out.failure {
        deleting(
            pm,
            api::DELETION_FAILED_REASON,
            format!("Proxmox task failed: {f}"),
        );
        return Ok(DeleteOutcome {
            step: out.step,
            next: out.next,
            finished: false,
        });
    }
    // The condition keeps showing the failure until the retry.
    if matches!(out.step, DeleteStep::WaitForRetry(_)) {
        return Ok(DeleteOutcome {
            step: out.step,
            next: out.next,
            finished: false,
        });
    }
    if !out.finished {
        deleting(pm, api::DELETING_REASON, out.message);
        return Ok(DeleteOutcome {
            step: out.step,
            next: out.next,
            finished: false,
        });
    }
    // The VM and its ISO are gone: the claims and the machine's place go too.
    release_claims(inp, pm).await?;
    if let Some(pc) = inp.pc {
        inp.locations.forget(inp.kube, pc, &pm.name_any()).await?;
    }
    deleting(pm, api::DELETING_REASON, String::new());
    Ok(DeleteOutcome {
        step: DeleteStep::Finish,
        next: Next::Now,
        finished: true,
    })
}
