//! One pass of a ProxmoxVirtualMachine that is not being deleted: the adoption of an existing
//! VM (recorded, nothing cloned), the template (by ID, selector or name), the refusal of an
//! explicit VMID someone else holds, then one pass of the lifecycle — provisioning, then
//! operation — mapped back onto the working copy's status.

use std::sync::Arc;
use std::time::Duration;

use capmox_api::vm::{
    self as api, OWNER_TAG_PREFIX, POWER_REQUEST_ANNOTATION, ProxmoxVirtualMachine, RESTARTED_AT_ANNOTATION,
};
use kube::ResourceExt;

use super::adapter::VmAdapter;
use super::addresses::PoolAddresses;
use super::error::VirtualMachineError;
use super::record::{apply, record_of};
use super::status::{Shown, console_url, event, show, show_pool_addresses};
use crate::proxmox::types::ClusterResource;
use crate::proxmox::view::{Freshness, ProxmoxView, Snapshot};
use crate::vm::decide::{Failure, Reason, Step};
use crate::vm::template::{Selector, TemplateSource};
use crate::vm::{Next, Settings, VmRecord};

/// How often a VM whose NICs wait for their IPAM addresses looks at its claims again (the claims
/// are not watched).
pub const ADDRESS_POLL: Duration = Duration::from_secs(2);

/// What a pass did.
#[derive(Debug)]
pub struct PassOutcome {
    /// The lifecycle's step (`None`: an adoption was recorded).
    pub step: Option<Step>,
    /// When to look again.
    pub next: Next,
    /// Events to publish: `(warning, reason, message)`.
    pub events: Vec<(bool, String, String)>,
    /// The step's error (already shown in `Ready`).
    pub error: Option<VirtualMachineError>,
}

impl PassOutcome {
    /// Whether the status this pass changed may be written together with the next pass's.
    pub fn status_can_wait(&self) -> bool {
        self.step.as_ref().is_some_and(Step::record_can_wait)
    }
}

/// Inputs of a pass besides the object.
pub struct PassInputs<'a> {
    /// Kubernetes client.
    pub kube: &'a kube::Client,
    /// The view of the VM's Proxmox cluster.
    pub view: &'a Arc<ProxmoxView>,
    /// Timing.
    pub settings: &'a Settings,
    /// VMIDs recorded by the other ProxmoxVirtualMachines.
    pub taken: Vec<i64>,
}

/// The Proxmox tags of a listed VM.
fn tags(r: &ClusterResource) -> Vec<String> {
    r.tags
        .as_deref()
        .map(crate::proxmox::types::split_tags)
        .unwrap_or_default()
}

/// The owner tag of another ProxmoxVirtualMachine on a listed VM.
fn foreign_owner(r: &ClusterResource, mine: &str) -> Option<String> {
    tags(r)
        .into_iter()
        .find(|t| t.starts_with(OWNER_TAG_PREFIX) && t != mine)
}

fn refusal(message: String, retry: Duration) -> Failure {
    Failure {
        reason: Reason::VmFailed,
        message,
        retry_after: Some(retry),
    }
}

/// Takes the VM `spec.vmid` over: records it (created and delivered, nothing to clone); the
/// operation then tags and powers it. `Err`: why it cannot be taken.
fn adopt(pvm: &ProxmoxVirtualMachine, snap: &Snapshot, record: &mut VmRecord) -> Result<String, String> {
    let vmid = pvm
        .spec
        .vmid
        .and_then(|v| u32::try_from(v).ok())
        .ok_or("spec.adopt needs spec.vmid")?;
    let r = snap
        .vm(vmid)
        .ok_or_else(|| format!("VM {vmid} does not exist: nothing to adopt"))?;
    if r.template {
        return Err(format!("VM {vmid} is a template: templates are not adopted"));
    }
    let mine = api::owner_tag(&pvm.namespace().unwrap_or_default(), &pvm.name_any());
    if let Some(other) = foreign_owner(r, &mine) {
        return Err(format!(
            "VM {vmid} is managed by another ProxmoxVirtualMachine (tag {other})"
        ));
    }
    let name = r
        .name
        .clone()
        .ok_or_else(|| format!("VM {vmid} has no name yet; waiting"))?;
    record.vmid = Some(vmid);
    record.node.clone_from(&r.node);
    record.bootstrap_delivered = true;
    record.provisioned = true;
    Ok(name)
}

/// The template to clone: by ID with its node, by selector, or by ID or name found in the list.
fn template(pvm: &ProxmoxVirtualMachine, snap: &Snapshot) -> Result<TemplateSource, String> {
    let spec = &pvm.spec;
    if let Some(sel) = &spec.template_selector {
        let selector = Selector {
            tags: &sel.match_tags,
            policy: sel.match_policy.map(|p| match p {
                capmox_api::v1alpha2::TemplateMatchPolicy::Exact => crate::vm::template::MatchPolicy::Exact,
                capmox_api::v1alpha2::TemplateMatchPolicy::UniqueSubset => {
                    crate::vm::template::MatchPolicy::UniqueSubset
                }
                capmox_api::v1alpha2::TemplateMatchPolicy::BestSubset => {
                    crate::vm::template::MatchPolicy::BestSubset
                }
            }),
        };
        return TemplateSource::new(None, None, Some(selector)).map_err(|e| e.to_string());
    }
    if let (Some(id), Some(node)) = (spec.template_id, spec.source_node.as_deref()) {
        return TemplateSource::new(Some(id), Some(node), None).map_err(|e| e.to_string());
    }
    let templates = snap
        .resources
        .iter()
        .filter(|r| r.resource_type == "qemu" && r.template);
    let found: Vec<&ClusterResource> = match (&spec.template_id, &spec.template_name) {
        (Some(id), _) => templates
            .filter(|r| r.vmid.and_then(|v| i32::try_from(v).ok()) == Some(*id))
            .collect(),
        (None, Some(name)) => templates.filter(|r| r.name.as_deref() == Some(name)).collect(),
        (None, None) => return Err("set templateID, templateSelector, templateName or imageRef".into()),
    };
    let what = match (&spec.template_id, &spec.template_name) {
        (Some(id), _) => format!("template {id}"),
        (None, n) => format!("template named {:?}", n.as_deref().unwrap_or_default()),
    };
    match found.as_slice() {
        [one] => {
            let vmid = one.vmid.and_then(|v| i32::try_from(v).ok());
            TemplateSource::new(vmid, one.node.as_deref(), None).map_err(|e| e.to_string())
        }
        [] => Err(format!("no {what} in the Proxmox cluster")),
        many => Err(format!(
            "{} templates match {what}: {}",
            many.len(),
            many.iter()
                .filter_map(|r| r.vmid.map(|v| v.to_string()))
                .collect::<Vec<_>>()
                .join(", ")
        )),
    }
}

/// The template to clone before the VM exists: the image's (a refusal waits for it while it is
/// not ready), or the one the spec names.
async fn source(
    inp: &PassInputs<'_>,
    pvm: &ProxmoxVirtualMachine,
    snap: Option<&Snapshot>,
    refused: &mut Option<Failure>,
) -> Result<Result<TemplateSource, String>, VirtualMachineError> {
    let Some(snap) = snap else {
        return Ok(Err("the VM exists: no template needed".into()));
    };
    let Some(image) = &pvm.spec.image_ref else {
        return Ok(template(pvm, snap));
    };
    let ns = pvm.namespace().unwrap_or_default();
    let prefer = pvm.spec.allowed_nodes.clone().unwrap_or_default();
    let found = crate::image::resolve::resolve(inp.kube, &ns, image, &prefer, |action, e| {
        VirtualMachineError::kube(action)(e)
    })
    .await?;
    if let Err(message) = &found
        && refused.is_none()
    {
        *refused = Some(crate::image::resolve::waiting(
            message.clone(),
            inp.settings.retry_delay,
        ));
    }
    Ok(found.map(TemplateSource::Fixed))
}

/// Runs one pass on `pvm` (a working copy that receives the status).
pub async fn provision(
    inp: &PassInputs<'_>,
    pvm: &mut ProxmoxVirtualMachine,
) -> Result<PassOutcome, VirtualMachineError> {
    let mut record = record_of(pvm);
    let retry = inp.settings.retry_delay;
    if record.vmid.is_none() {
        // Requests written before the VM existed are not requests to act on.
        let annotation = |k: &str| pvm.annotations().get(k).cloned();
        record.operation.restarted = annotation(RESTARTED_AT_ANNOTATION);
        record.operation.power_request = annotation(POWER_REQUEST_ANNOTATION);
    }
    let before_creation = !record.provisioned && !record.bootstrap_delivered;
    let snap = if before_creation {
        let fresh = Freshness::within(inp.settings.observe_interval);
        Some(inp.view.snapshot(fresh).await?.1)
    } else {
        None
    };
    let mut refused = None;
    if let Some(snap) = &snap
        && record.vmid.is_none()
    {
        if pvm.spec.adopts() {
            match adopt(pvm, snap, &mut record) {
                Ok(name) => {
                    let vmid = record.vmid;
                    pvm.status.get_or_insert_with(Default::default).vm_name = Some(name.clone());
                    apply(pvm.status.get_or_insert_with(Default::default), &record);
                    show(pvm, &record, &Shown::default(), None);
                    return Ok(PassOutcome {
                        step: None,
                        next: Next::Now,
                        events: vec![(
                            false,
                            super::reasons::ADOPTED_REASON.into(),
                            format!("took VM {} ({name}) over", vmid.unwrap_or_default()),
                        )],
                        error: None,
                    });
                }
                Err(message) => refused = Some(refusal(message, retry)),
            }
        } else if let Some(v) = pvm.spec.vmid.and_then(|v| u32::try_from(v).ok())
            && snap.vm(v).is_some()
        {
            refused = Some(refusal(
                format!("VM {v} already exists; set spec.adopt: true to take it over"),
                retry,
            ));
        }
    }
    let source = source(inp, pvm, snap.as_deref(), &mut refused).await?;
    let name = pvm
        .status
        .as_ref()
        .and_then(|s| s.vm_name.clone())
        .unwrap_or_else(|| pvm.name_any());
    let spec = super::spec::vm_spec(pvm, name, source, refused, pvm.spec.adopts());
    // Read only while they matter: until the bootstrap data is delivered (the status keeps them).
    let pools = if before_creation {
        PoolAddresses::load(inp.kube, pvm).await?
    } else {
        PoolAddresses::default()
    };
    let adapter = VmAdapter {
        kube: inp.kube,
        pvm,
        taken: inp.taken.clone(),
        retry_delay: retry,
        pools: &pools,
    };
    let owner = super::owner_of(pvm);
    let task_before = record.task.clone();
    let out = crate::vm::pass::provision(inp.view, &owner, inp.settings, &spec, &adapter, record).await?;
    let vmid = out.record.vmid;
    let console = match (vmid, out.record.node.as_deref()) {
        (Some(v), Some(n)) => Some(console_url(inp.view.client().base_url(), v, n)),
        _ => None,
    };
    apply(pvm.status.get_or_insert_with(Default::default), &out.record);
    let shown = Shown {
        step: Some(&out.step),
        task_before: task_before.as_deref(),
        power: out.power,
        report: Some(&out.report),
        guest: out.guest.as_ref(),
        error: out.error.as_ref().map(ToString::to_string),
    };
    show(pvm, &out.record, &shown, console);
    let mut next =
        super::drift::after_pass(inp.view, pvm, &spec, out.next, inp.settings.task_poll_max).await?;
    if pools.version.is_some() {
        let waiting = pools.waiting() && !out.record.bootstrap_delivered;
        show_pool_addresses(pvm, &pools, waiting);
        if waiting && next == Next::Watch {
            next = Next::After(ADDRESS_POLL);
        }
    }
    let mut events = Vec::new();
    if let Some((warning, reason, message)) = event(&out.step, vmid) {
        events.push((warning, reason.to_owned(), message));
    }
    if let Some((reason, message)) = &out.report.warning {
        events.push((
            true,
            crate::machine::record::reason(*reason).to_owned(),
            message.clone(),
        ));
    }
    Ok(PassOutcome {
        step: Some(out.step),
        next,
        events,
        error: out.error,
    })
}
