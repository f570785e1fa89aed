//! One provisioning pass of a ProxmoxMachine: the CAPI gates (the Cluster's infrastructure, the
//! Machine's bootstrap data), then one pass of the lifecycle ([`crate::vm::pass::provision`]) on
//! the machine's [`crate::vm::VmSpec`] and record, and its outcome mapped back onto the working
//! copy. The caller (the controller) persists the copy afterwards (and runs the next pass at once
//! when the outcome says so).

use std::sync::Arc;

use capmox_api::capi::views::MachineView;
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;

use super::adapter::MachineAdapter;
use super::caches::Caches;
use super::error::MachineError;
use super::locations::Locations;
use super::record::{self, record_of};
use crate::conditions::Desired;
use crate::ipam;
use crate::proxmox::view::{Power, ProxmoxView};
use crate::vm::{AddressFacts, Failure, Next, Phase, Reason, Report, Settings, Step};

/// What a provisioning pass did.
#[derive(Debug)]
pub struct PassOutcome {
    /// The lifecycle's step that ran (`None`: a CAPI gate held the machine).
    pub step: Option<Step>,
    /// When to look again.
    pub next: Next,
    /// A Warning event to record: `(reason, message)`.
    pub warning: Option<(String, String)>,
    /// Normal events to record: `(reason, message)`.
    pub notices: Vec<(String, String)>,
    /// The step's error (already reflected in the condition message).
    pub error: Option<MachineError>,
}

impl PassOutcome {
    /// Whether the status this pass changed may be written together with the next pass's (see
    /// [`Step::record_can_wait`]).
    pub fn status_can_wait(&self) -> bool {
        self.step.as_ref().is_some_and(Step::record_can_wait)
    }
}

/// Inputs of a pass besides the machine itself.
pub struct PassInputs<'a> {
    /// Kubernetes client.
    pub kube: &'a kube::Client,
    /// What the manager knows about the machine's Proxmox cluster.
    pub view: &'a Arc<ProxmoxView>,
    /// The owner Machine.
    pub machine: &'a MachineView,
    /// The owner Cluster's infrastructure is provisioned.
    pub cluster_infrastructure_ready: bool,
    /// The machine's ProxmoxCluster.
    pub pc: &'a Arc<ProxmoxCluster>,
    /// Timing.
    pub settings: &'a Settings,
    /// The IPAM API version the API server serves (discovered once at startup).
    pub ipam_version: ipam::IpamApiVersion,
    /// Watch caches.
    pub caches: &'a dyn Caches,
    /// The node-location writer.
    pub locations: &'a Locations,
}

/// The CAPI gate that holds a machine whose VM has not had its bootstrap data yet.
fn gate(inp: &PassInputs<'_>) -> Option<&'static str> {
    if !inp.cluster_infrastructure_ready {
        Some(api::WAITING_FOR_CLUSTER_INFRASTRUCTURE_READY_REASON)
    } else if inp.machine.bootstrap_data_secret_name.is_none() {
        Some(api::WAITING_FOR_BOOTSTRAP_DATA_REASON)
    } else {
        None
    }
}

/// Runs one provisioning pass on `pm` (a working copy that receives every spec/status change).
pub async fn provision(inp: &PassInputs<'_>, pm: &mut ProxmoxMachine) -> Result<PassOutcome, MachineError> {
    // The failure domain CAPI chose selects the zone (pools, meta-data, nodes) in the working copy.
    let unknown_domain =
        super::zone::apply(&mut pm.spec, &inp.pc.spec, inp.machine.failure_domain.as_deref()).err();
    let before = record_of(pm);
    // Gates before a VM has our data; once it has, CAPI may flip them without affecting the VM.
    if !before.provisioned
        && !before.bootstrap_delivered
        && let Some(reason) = gate(inp)
    {
        show(pm, Shown::Reason(reason), &Report::default(), None, None);
        return Ok(PassOutcome {
            step: None,
            next: Next::Watch,
            warning: None,
            notices: Vec::new(),
            error: None,
        });
    }
    let refusal = unknown_domain.map(|e| Failure {
        reason: Reason::Owner(api::UNKNOWN_FAILURE_DOMAIN_REASON),
        message: e.to_string(),
        retry_after: Some(inp.settings.retry_delay),
    });
    let mut spec = super::spec::vm_spec(pm, &inp.pc.spec, inp.machine, refusal);
    image_source(inp, pm, &before, &mut spec).await?;
    let adapter = MachineAdapter::new(
        inp.kube,
        pm,
        inp.pc,
        inp.machine,
        inp.ipam_version,
        inp.caches,
        inp.locations,
        inp.settings.retry_delay,
    );
    let owner = super::owner_of(pm);
    let out =
        crate::vm::pass::provision(inp.view, &owner, inp.settings, &spec, &adapter, before.clone()).await?;
    let resolution = adapter.resolution();
    let mut notices = Vec::new();
    if let Some(taken) = adopt_claims(inp, pm, resolution.as_ref()).await? {
        notices.push(taken);
    }
    if let (Step::Adopt { .. }, Some(vmid)) = (&out.step, out.record.vmid) {
        notices.push((
            capmox_api::consts::EVENT_RECOVERED_IP_ADDRESS_STATUS.to_owned(),
            format!(
                "adopted VM {vmid}: it ran with this machine's bootstrap data; status rebuilt from the \
                 VM and the IP address claims without writing to the VM"
            ),
        ));
    }
    record::apply(pm, &before, &out.record);
    if let Some(p) = &out.provisioned {
        provisioned(pm, p, resolution.as_ref());
    }
    let ready = out
        .addresses
        .as_ref()
        .is_some_and(|a| a.facts == AddressFacts::Ready);
    // A VM that ran with the machine's data keeps the address it was configured with.
    let ran = out.record.bootstrap_delivered || out.record.provisioned;
    let mismatch = match (&resolution, &out.vm_tags) {
        (Some(r), Some(tags)) if ready && ran => super::restore::vm_addresses(r, tags),
        _ => None,
    };
    let addresses = match &mismatch {
        Some((shown, _)) => Some(shown),
        None => resolution.as_ref().filter(|_| ready),
    };
    let phase = out.step.phase();
    show(pm, Shown::Phase(phase), &out.report, addresses, out.power);
    let mut warning = out.report.warning.map(|(r, m)| (record::reason(r).to_owned(), m));
    // Said once the addresses were compared (a pass that did not look keeps what was said).
    if ready && out.vm_tags.is_some() {
        let message = mismatch.as_ref().map(|(_, m)| m.as_str());
        if super::restore::show_mismatch(pm, message)
            && let Some(m) = message
        {
            warning.get_or_insert_with(|| (super::restore::ADDRESS_MISMATCH_REASON.to_owned(), m.to_owned()));
        }
    }
    Ok(PassOutcome {
        step: Some(out.step),
        next: out.next,
        warning,
        notices,
        error: out.error,
    })
}

/// `spec.imageRef`: until the VM has the machine's data, the template to clone is the image's
/// (on one of the nodes the machine may go to, when it has several). While the image has none
/// and nothing was made in Proxmox yet, the machine waits (`WaitingForImage`) instead of any
/// step; once a VMID is recorded the lifecycle goes on and only a clone still to be made needs
/// the template.
async fn image_source(
    inp: &PassInputs<'_>,
    pm: &ProxmoxMachine,
    before: &crate::vm::VmRecord,
    spec: &mut crate::vm::VmSpec,
) -> Result<(), MachineError> {
    let Some(image) = &pm.spec.image_ref else {
        return Ok(());
    };
    if before.provisioned || before.bootstrap_delivered {
        return Ok(());
    }
    let prefer = spec
        .placement
        .allowed_nodes
        .clone()
        .ok()
        .flatten()
        .unwrap_or_default();
    let ns = pm.namespace().unwrap_or_default();
    let found = crate::image::resolve::resolve(inp.kube, &ns, image, &prefer, |action, e| {
        MachineError::kube(action)(e)
    })
    .await?;
    if let Err(message) = &found
        && before.vmid.is_none()
        && spec.refusal.is_none()
    {
        spec.refusal = Some(crate::image::resolve::waiting(
            message.clone(),
            inp.settings.retry_delay,
        ));
    }
    spec.source = found.map(crate::vm::template::TemplateSource::Fixed);
    Ok(())
}

/// Takes over the claims an earlier ProxmoxMachine of this name controlled (their addresses are
/// the machine's): a Normal event naming them, `None` when there were none.
async fn adopt_claims(
    inp: &PassInputs<'_>,
    pm: &ProxmoxMachine,
    resolution: Option<&ipam::Resolution>,
) -> Result<Option<(String, String)>, MachineError> {
    let Some(r) = resolution.filter(|r| !r.adopt.is_empty()) else {
        return Ok(None);
    };
    let ns = pm.namespace().unwrap_or_default();
    let taken = ipam::adopt_claims(inp.kube, inp.ipam_version, &ns, &r.adopt).await?;
    Ok((!taken.is_empty()).then(|| {
        (
            ADOPTED_CLAIMS_REASON.to_owned(),
            format!(
                "took over IPAddressClaim(s) {} (with their addresses) from an earlier ProxmoxMachine {}",
                taken.join(", "),
                pm.name_any()
            ),
        )
    }))
}

/// Reason of the Normal event of claims taken over from an earlier ProxmoxMachine of this name.
pub const ADOPTED_CLAIMS_REASON: &str = "AdoptedIPAddressClaims";

/// The machine became provisioned: its provider ID (`proxmox://<SMBIOS UUID>`), the zone label,
/// and with DHCP/SLAAC NICs its addresses (static default-pool ones and the learnt ones).
fn provisioned(pm: &mut ProxmoxMachine, p: &crate::vm::Provisioned, resolution: Option<&ipam::Resolution>) {
    if let Some(uuid) = &p.uuid {
        pm.spec.provider_id = Some(format!("{}{uuid}", capmox_api::consts::PROVIDER_ID_PREFIX));
    }
    let name = pm.name_any();
    if pm.spec.network.uses_dynamic_addresses() {
        let defaults: Vec<std::net::IpAddr> = resolution
            .map(|r| {
                r.resolved
                    .iter()
                    .filter(|a| a.is_default_pool)
                    .map(|a| a.address)
                    .collect()
            })
            .unwrap_or_default();
        pm.status.get_or_insert_with(Default::default).addresses =
            Some(super::addresses::dynamic_addresses(&name, &defaults, &p.learnt));
    }
    let zone = pm.spec.network.zone_or_default().to_owned();
    pm.labels_mut()
        .insert(capmox_api::consts::PROXMOX_ZONE_LABEL.to_owned(), zone);
}

/// The reason a pass shows when it shows no failure.
enum Shown {
    /// A gate's reason.
    Reason(&'static str),
    /// The step's phase (`None`: keep the current reason).
    Phase(Option<Phase>),
}

/// Sets the condition, addresses and `vmStatus` that follow from the pass.
fn show(
    pm: &mut ProxmoxMachine,
    shown: Shown,
    report: &Report,
    resolution: Option<&ipam::Resolution>,
    power: Option<Power>,
) {
    let name = pm.name_any();
    let dynamic = pm.spec.network.uses_dynamic_addresses();
    let current = record::current_condition(pm);
    let status = pm.status.get_or_insert_with(Default::default);
    let provisioned = status.initialization.as_ref().and_then(|i| i.provisioned) == Some(true);
    if let Some(resolution) = resolution {
        status.ip_addresses = Some(ipam::ip_addresses_status(&resolution.resolved));
        // With DHCP/SLAAC NICs the guest check writes the addresses (static and learnt).
        if power == Some(Power::Running)
            && !dynamic
            && let Ok(addresses) = ipam::machine_addresses(&name, &resolution.resolved)
        {
            status.addresses = Some(addresses);
        }
    }
    status.vm_status = Some(if provisioned { "ready" } else { "pending" }.to_owned());
    let condition = api::VIRTUAL_MACHINE_PROVISIONED_CONDITION;
    let phase_reason = |phase: Option<Phase>| report.phase.or(phase).map(record::phase_reason);
    let desired = match (&report.failure, provisioned) {
        (Some(f), _) => Some(Desired::falsy(
            condition,
            record::reason(f.reason),
            f.message.clone(),
        )),
        (None, true) => Some(Desired::truthy(condition, api::PROVISIONED_REASON, "")),
        // A pass that came early keeps what the last look said (the dynamic-address wait too).
        (None, false) if report.keep => {
            let (reason, message) = current.unwrap_or_default();
            let reason = if reason == api::WAITING_FOR_DYNAMIC_ADDRESS_REASON {
                Some(api::WAITING_FOR_DYNAMIC_ADDRESS_REASON)
            } else if let Shown::Phase(p) = shown {
                phase_reason(p)
            } else {
                None
            };
            reason.map(|r| Desired::falsy(condition, r, message))
        }
        (None, false) => match shown {
            Shown::Reason(r) => Some(Desired::falsy(condition, r, report.message.clone())),
            Shown::Phase(p) => phase_reason(p).map(|r| Desired::falsy(condition, r, report.message.clone())),
        },
    };
    match desired {
        Some(d) => record::set_condition(pm, &d),
        None => record::refresh_ready(pm),
    }
}
