//! Carries out one [`Step`] of the provisioning state machine: the Proxmox and Kubernetes calls of
//! that step and the spec/status fields it records on the working copy of the ProxmoxMachine.
//! Every step either finishes with Proxmox's state changed (so the next decision moves on) or
//! records the task it started in `status.taskRef` before anything else happens.

use std::collections::BTreeMap;
use std::time::Duration;

use capmox_api::capi::views::MachineView;
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use super::desired::{merged_tags, tags_without};
use super::error::MachineError;
use super::placement;
use super::state::{Failure, Step, VmFacts};
use super::{MachineSettings, iso};
use crate::bootstrap::{
    self, BootstrapData, BootstrapError, CLOUD_INIT_TAG, ExtraMetadata, MachineBootstrapInput, ResolvedDevice,
};
use crate::ipam;
use crate::proxmox::types::{CloneRequest, ConfigUpdate, ResizeRequest, StartRequest};
use crate::proxmox::{Client, ErrorClass};

/// When the controller should look at the machine again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Next {
    /// Right away (the step changed something the next decision depends on).
    Now,
    /// After this delay (a task or the guest is busy).
    After(Duration),
    /// When a watched object changes; the controller adds a long safety-net requeue.
    Watch,
}

/// What a step did, besides the fields it set on the machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepResult {
    /// When to look again.
    pub next: Next,
    /// Condition message for the step's reason (empty: none).
    pub message: String,
    /// The step failed; the condition shows this instead of the step's reason.
    pub failure: Option<Failure>,
    /// A Warning event to record: `(reason, message)`.
    pub warning: Option<(String, String)>,
}

impl StepResult {
    /// A step that finished; look again per `next`.
    pub(super) fn next(next: Next) -> Self {
        Self {
            next,
            message: String::new(),
            failure: None,
            warning: None,
        }
    }

    /// The same result with a condition message.
    pub(super) fn with_message(mut self, message: impl Into<String>) -> Self {
        self.message = message.into();
        self
    }

    /// A failed step: the condition shows `reason`; retried after `retry_after` (`None`: terminal).
    pub(super) fn failed(
        reason: &'static str,
        message: impl Into<String>,
        retry_after: Option<Duration>,
    ) -> Self {
        let message = message.into();
        Self {
            next: retry_after.map_or(Next::Watch, Next::After),
            message: message.clone(),
            failure: Some(Failure {
                reason,
                message,
                retry_after,
            }),
            warning: None,
        }
    }
}

/// Everything a step may read.
pub struct StepEnv<'a> {
    /// Kubernetes client.
    pub kube: &'a kube::Client,
    /// Proxmox client of the machine's cluster.
    pub proxmox: &'a Client,
    /// The owner Machine.
    pub machine: &'a MachineView,
    /// The machine's ProxmoxCluster.
    pub pc: &'a ProxmoxCluster,
    /// Timeouts and delays.
    pub settings: &'a MachineSettings,
    /// The IPAM API version the API server serves.
    pub ipam_version: ipam::IpamApiVersion,
    /// The IPAM resolution of this pass, when the claims were looked at.
    pub resolution: Option<&'a ipam::Resolution>,
    /// The VM, when it exists.
    pub vm: Option<&'a VmFacts>,
}

impl StepEnv<'_> {
    fn vm(&self) -> Result<&VmFacts, MachineError> {
        self.vm
            .ok_or_else(|| MachineError::Invalid("the step needs the VM but it was not observed".into()))
    }
}

fn status(pm: &mut ProxmoxMachine) -> &mut api::ProxmoxMachineStatus {
    pm.status.get_or_insert_with(Default::default)
}

/// Records a started Proxmox task so the next passes poll it instead of repeating the call.
pub fn record_task(
    pm: &mut ProxmoxMachine,
    upid: Option<crate::proxmox::Upid>,
    settings: &MachineSettings,
) -> Next {
    match upid {
        Some(upid) => {
            status(pm).task_ref = Some(upid.to_string());
            Next::After(settings.task_poll_initial)
        }
        None => Next::Now,
    }
}

/// Runs `step` against Proxmox and Kubernetes, recording its results on `pm`.
pub async fn execute(
    step: &Step,
    env: &StepEnv<'_>,
    pm: &mut ProxmoxMachine,
) -> Result<StepResult, MachineError> {
    let s = env.settings;
    Ok(match step {
        Step::WaitForClusterInfrastructure | Step::WaitForBootstrapData | Step::WaitForIpAddresses => {
            StepResult::next(Next::Watch)
        }
        Step::Idle | Step::StayFailed => StepResult::next(Next::Watch),
        Step::WaitForRetry(left) => StepResult::next(Next::After(*left)),
        Step::PollTask => StepResult::next(Next::After(s.task_poll_initial)),
        Step::WaitForUnlock(lock) => {
            StepResult::next(Next::After(s.task_poll_initial)).with_message(format!("VM is locked ({lock})"))
        }
        Step::ForgetTask => {
            status(pm).task_ref = None;
            StepResult::next(Next::Now)
        }
        Step::HandleFailedTask { kind, exitstatus } => failed_task(pm, kind, exitstatus, s),
        Step::ReserveVm => placement::reserve(env, pm).await?,
        Step::CloneVm => clone(env, pm).await?,
        Step::ForgetVmid { holder } => {
            let vmid = pm.spec.virtual_machine_id.unwrap_or_default();
            pm.spec.virtual_machine_id = None;
            status(pm).proxmox_node = None;
            let mut r = StepResult::next(Next::Now);
            r.warning = Some((
                "VMIDTaken".into(),
                format!(
                    "VMID {vmid} was taken by VM {:?} before the clone; choosing another",
                    holder.as_deref().unwrap_or_default()
                ),
            ));
            r
        }
        Step::ConfigureVm(update) => {
            let vm = env.vm()?;
            let upid = env
                .proxmox
                .update_vm_config(&vm.node, vm.vmid, update)
                .await
                .map_err(MachineError::proxmox(format!("configuring VM {}", vm.vmid)))?;
            StepResult::next(record_task(pm, upid, s))
        }
        Step::ResizeBootDisk { disk, size_gib } => {
            let vm = env.vm()?;
            let upid = env
                .proxmox
                .resize_disk(&vm.node, vm.vmid, &ResizeRequest::to_gib(disk.clone(), *size_gib))
                .await
                .map_err(MachineError::proxmox(format!(
                    "resizing {disk} of VM {}",
                    vm.vmid
                )))?;
            StepResult::next(record_task(pm, upid, s))
        }
        Step::ClaimIpAddresses => claim_ips(env, pm).await?,
        Step::IpConflict(message) => {
            StepResult::next(Next::After(s.retry_delay)).with_message(message.clone())
        }
        Step::TagIpAddresses(tags) => {
            let vm = env.vm()?;
            let update = ConfigUpdate::new().tags(&merged_tags(&vm.config, tags));
            let upid = env
                .proxmox
                .update_vm_config(&vm.node, vm.vmid, &update)
                .await
                .map_err(MachineError::proxmox(format!("tagging VM {}", vm.vmid)))?;
            StepResult::next(record_task(pm, upid, s))
        }
        Step::DeliverBootstrapData => deliver_bootstrap(env, pm).await?,
        Step::PowerOn | Step::Resume => {
            let vm = env.vm()?;
            let upid = if *step == Step::Resume {
                env.proxmox.resume_vm(&vm.node, vm.vmid).await
            } else {
                env.proxmox
                    .start_vm(&vm.node, vm.vmid, &StartRequest::default())
                    .await
            }
            .map_err(MachineError::proxmox(format!("starting VM {}", vm.vmid)))?;
            StepResult::next(record_task(pm, Some(upid), s))
        }
        Step::CheckGuest => check_guest(env, pm).await?,
        Step::RemoveBootstrapIso => remove_iso(env).await?,
        Step::Fail(f) => {
            if let Some(delay) = f.retry_after {
                status(pm).retry_after = Some(super::later(delay));
            }
            StepResult::failed(f.reason, f.message.clone(), f.retry_after)
        }
    })
}

fn failed_task(pm: &mut ProxmoxMachine, kind: &str, exitstatus: &str, s: &MachineSettings) -> StepResult {
    // Lock contention and other transient task failures (e.g. parallel clones onto node-local
    // storage, capmox #389) are retried soon; anything else waits the full retry delay.
    let transient = crate::proxmox::error::classify_task_exitstatus(exitstatus)
        .is_some_and(|c| matches!(c, ErrorClass::Locked | ErrorClass::Server));
    let delay = if transient {
        s.retry_delay.min(s.task_poll_max)
    } else {
        s.retry_delay
    };
    let st = status(pm);
    st.task_ref = None;
    st.retry_after = Some(super::later(delay));
    let reason = match kind {
        "qmclone" => api::CLONING_FAILED_REASON,
        "qmstart" | "qmresume" => api::POWERING_ON_FAILED_REASON,
        _ => api::TASK_FAILED_REASON,
    };
    let mut r = StepResult::failed(reason, format!("{kind}: {exitstatus}"), Some(delay));
    r.warning = Some((
        reason.to_owned(),
        format!("Proxmox task {kind} failed: {exitstatus}"),
    ));
    r
}

async fn clone(env: &StepEnv<'_>, pm: &mut ProxmoxMachine) -> Result<StepResult, MachineError> {
    let (Some(vmid), Some(target)) = (
        super::observe::recorded_vmid(pm),
        pm.status.as_ref().and_then(|s| s.proxmox_node.clone()),
    ) else {
        // The VMID was recorded but the node was not (spec and status are two writes; a crash
        // can fall between them). No VM exists at that VMID, so reserving again is safe.
        return placement::reserve(env, pm).await;
    };
    let template = match placement::template(env, pm).await? {
        Ok(t) => t,
        Err(message) => {
            return Ok(StepResult::failed(
                api::VM_PROVISION_FAILED_REASON,
                message,
                Some(env.settings.retry_delay),
            ));
        }
    };
    let spec = &pm.spec;
    let mut req = CloneRequest::new(vmid);
    req.name = Some(pm.name_any());
    req.description = spec.description.clone();
    req.full = spec.is_full_clone().then_some(true);
    req.storage = spec.storage.clone();
    req.format = spec.format.map(|f| f.as_str().to_owned());
    req.pool = spec.pool.clone();
    req.snapname = spec.snap_name.clone();
    req.target = (target != template.node).then(|| target.clone());
    match env.proxmox.clone_vm(&template.node, template.vmid, &req).await {
        Ok(upid) => Ok(StepResult::next(record_task(pm, Some(upid), env.settings))),
        // Someone (or an interrupted earlier pass) created the VMID meanwhile: look again.
        Err(e) if e.class() == ErrorClass::AlreadyExists => Ok(StepResult::next(Next::Now)),
        Err(e) if e.is_retryable() => Err(MachineError::proxmox(format!(
            "cloning template {}",
            template.vmid
        ))(e)),
        Err(e) => Ok(StepResult::failed(
            api::CLONING_FAILED_REASON,
            format!("cloning template {} on {}: {e}", template.vmid, template.node),
            Some(env.settings.retry_delay),
        )),
    }
}

async fn claim_ips(env: &StepEnv<'_>, pm: &mut ProxmoxMachine) -> Result<StepResult, MachineError> {
    let ns = pm.namespace().unwrap_or_default();
    let mut desired = match ipam::desired_claims(pm, env.pc) {
        Ok(d) => d,
        Err(e) => {
            return Ok(StepResult::failed(
                api::WAITING_FOR_STATIC_IP_ALLOCATION_REASON,
                e.to_string(),
                Some(env.settings.retry_delay),
            ));
        }
    };
    let pools = ipam_pools(env.kube, &ns, &desired).await;
    ipam::apply_pool_zones(&mut desired, |p| {
        pools
            .get(&p.name)
            .and_then(|(labels, _)| labels.get(capmox_api::consts::PROXMOX_ZONE_LABEL))
            .map(String::as_str)
    });
    let out = ipam::ensure_claims(env.kube, env.ipam_version, &ns, &desired).await?;
    let mut r = StepResult::next(Next::Watch);
    if let Some(res) = env.resolution
        && !res.orphaned.is_empty()
    {
        r.warning = Some((
            capmox_api::consts::EVENT_ORPHANED_IP_ADDRESS.to_owned(),
            format!(
                "recreated claims for existing IPAddresses: {}",
                res.orphaned.join(", ")
            ),
        ));
    }
    Ok(r.with_message(format!(
        "waiting for {} IP address claim(s)",
        out.created.len() + out.existing.len()
    )))
}

type PoolMeta = (BTreeMap<String, String>, BTreeMap<String, String>);

/// Labels and annotations of the InClusterIPPools the claims reference (unreadable pools are skipped).
async fn ipam_pools(
    kube: &kube::Client,
    ns: &str,
    desired: &[ipam::DesiredClaim],
) -> BTreeMap<String, PoolMeta> {
    let api: Api<capmox_api::capi::ipam::InClusterIPPool> = Api::namespaced(kube.clone(), ns);
    let mut out = BTreeMap::new();
    for d in desired.iter().filter(|d| d.pool.kind == "InClusterIPPool") {
        if out.contains_key(&d.pool.name) {
            continue;
        }
        if let Ok(Some(p)) = api.get_opt(&d.pool.name).await {
            out.insert(d.pool.name.clone(), (p.labels().clone(), p.annotations().clone()));
        }
    }
    out
}

async fn bootstrap_data(env: &StepEnv<'_>, ns: &str) -> Result<Result<BootstrapData, String>, MachineError> {
    let Some(name) = env.machine.bootstrap_data_secret_name.as_deref() else {
        return Ok(Err("the Machine has no bootstrap data secret".into()));
    };
    let api: Api<Secret> = Api::namespaced(env.kube.clone(), ns);
    let secret = api.get_opt(name).await.map_err(MachineError::kube(format!(
        "getting bootstrap secret {ns}/{name}"
    )))?;
    let Some(secret) = secret else {
        return Ok(Err(format!("bootstrap secret {ns}/{name} not found")));
    };
    let data = secret.data.unwrap_or_default();
    Ok(BootstrapData::from_secret(
        data.get("value").map(|b| b.0.as_slice()),
        data.get("format").map(|b| b.0.as_slice()),
    )
    .map_err(|e| match e {
        // Its text already is capmox's full message.
        BootstrapError::MissingBootstrapValue => e.to_string(),
        e => format!("error retrieving bootstrap data: {e}"),
    }))
}

fn render_input(
    env: &StepEnv<'_>,
    pm: &ProxmoxMachine,
    vm: &VmFacts,
    bootstrap: BootstrapData,
    resolved: &[ipam::ResolvedAddress],
) -> Result<MachineBootstrapInput, BootstrapError> {
    let instance_id = vm
        .config
        .smbios_uuid
        .clone()
        .ok_or(BootstrapError::MissingInstanceId)?;
    let mut devices: BTreeMap<String, ResolvedDevice> = ipam::bootstrap_addresses(resolved)
        .into_iter()
        .map(|(net, addresses)| {
            (
                net,
                ResolvedDevice {
                    mac: String::new(),
                    addresses,
                },
            )
        })
        .collect();
    for nic in &pm.spec.network.network_devices {
        let net = nic.name_or_default();
        let index: Option<u32> = net.strip_prefix("net").and_then(|n| n.parse().ok());
        let mac = index
            .and_then(|i| vm.config.nets.get(&i))
            .and_then(|d| d.mac.clone())
            .unwrap_or_default();
        devices.entry(net.to_owned()).or_default().mac = mac;
    }
    let network = bootstrap::network_from_api(&pm.spec.network, &devices, &env.pc.spec.dns_servers)?;
    Ok(MachineBootstrapInput {
        hostname: pm.name_any(),
        instance_id,
        provider_id_injection: pm
            .spec
            .metadata_settings
            .as_ref()
            .is_some_and(|m| m.provider_id_injection),
        kubernetes_version: env.machine.version.clone(),
        network,
        bootstrap,
        extra_metadata: ExtraMetadata {
            proxmox_node: Some(vm.node.clone()),
            zone: Some(pm.spec.network.zone_or_default().to_owned()),
        },
    })
}

async fn deliver_bootstrap(env: &StepEnv<'_>, pm: &mut ProxmoxMachine) -> Result<StepResult, MachineError> {
    let vm = env.vm()?;
    let retry = Some(env.settings.retry_delay);
    let ns = pm.namespace().unwrap_or_default();
    let bootstrap = match bootstrap_data(env, &ns).await? {
        Ok(b) => b,
        Err(message) => return Ok(StepResult::failed(api::CLONING_FAILED_REASON, message, retry)),
    };
    let pools = ipam_pools(env.kube, &ns, &ipam::desired_claims(pm, env.pc)?).await;
    let mut resolved = env.resolution.map(|r| r.resolved.clone()).unwrap_or_default();
    // Pool annotations carry the default-route metric; a bad annotation is reported, not ignored.
    if let Err(e) = ipam::apply_gateway_metrics(&mut resolved, |p| pools.get(&p.name).map(|(_, a)| a)) {
        return Ok(StepResult::failed(
            api::WAITING_FOR_BOOTSTRAP_DATA_RECONCILIATION_REASON,
            e.to_string(),
            retry,
        ));
    }
    let input = match render_input(env, pm, vm, bootstrap, &resolved) {
        Ok(i) => i,
        Err(BootstrapError::MissingMacAddress { device }) => {
            return Ok(StepResult::next(Next::After(env.settings.task_poll_initial))
                .with_message(format!("waiting for the MAC address of {device}")));
        }
        Err(e) => {
            return Ok(StepResult::failed(
                api::VM_PROVISION_FAILED_REASON,
                e.to_string(),
                retry,
            ));
        }
    };
    let format = match pm.spec.network_config_format_or_default() {
        api::NetworkConfigFormat::Capmox => bootstrap::NetworkConfigFormat::CapmoxV2,
        api::NetworkConfigFormat::V2 => bootstrap::NetworkConfigFormat::NetplanV2Bare,
    };
    let image = match bootstrap::build_bootstrap_iso(&input, format) {
        Ok(i) => i,
        Err(e) => {
            return Ok(StepResult::failed(
                api::VM_PROVISION_FAILED_REASON,
                e.to_string(),
                retry,
            ));
        }
    };
    let storage =
        match iso::choose_storage(env.proxmox, &vm.node, pm.spec.cloud_init_storage.as_deref()).await? {
            Ok(s) => s,
            Err(message) => {
                return Ok(StepResult::failed(
                    api::VM_PROVISION_FAILED_REASON,
                    message,
                    retry,
                ));
            }
        };
    if let Some(upid) = iso::upload_if_missing(env.proxmox, &vm.node, &storage, vm.vmid, image).await? {
        return Ok(StepResult::next(record_task(pm, Some(upid), env.settings))
            .with_message(format!("uploading {}", iso::volid(&storage, vm.vmid))));
    }
    iso::attach(env.proxmox, vm, &storage).await?;
    status(pm).bootstrap_data_provided = Some(true);
    Ok(StepResult::next(Next::Now))
}

async fn check_guest(env: &StepEnv<'_>, pm: &mut ProxmoxMachine) -> Result<StepResult, MachineError> {
    let vm = env.vm()?;
    let checks = pm.spec.checks.clone().unwrap_or_default();
    let skip_agent = checks.skip_qemu_guest_agent == Some(true);
    let skip_cloud_init = skip_agent || checks.skip_cloud_init_status == Some(true);
    let s = env.settings;
    let mut warning = None;
    if !skip_agent {
        match env.proxmox.agent_os_info(&vm.node, vm.vmid).await {
            Ok(_) => {}
            Err(e)
                if matches!(
                    e.class(),
                    ErrorClass::AgentNotReady | ErrorClass::AgentNotConfigured
                ) =>
            {
                if vm.uptime_secs > s.agent_timeout.as_secs() {
                    return Ok(StepResult::failed(
                        api::VM_PROVISION_FAILED_REASON,
                        format!(
                            "the QEMU guest agent did not start within {}s of boot",
                            s.agent_timeout.as_secs()
                        ),
                        None,
                    ));
                }
                return Ok(StepResult::next(Next::After(s.guest_poll))
                    .with_message("waiting for the QEMU guest agent"));
            }
            Err(e) => {
                return Err(MachineError::proxmox(format!(
                    "querying the guest agent of VM {}",
                    vm.vmid
                ))(e));
            }
        }
    }
    if !skip_cloud_init {
        match super::guest::cloud_init_status(env.proxmox, vm, s).await? {
            super::guest::CloudInit::Running | super::guest::CloudInit::NoAnswerYet => {
                if vm.uptime_secs > s.cloud_init_timeout.as_secs() {
                    return Ok(StepResult::failed(
                        api::VM_PROVISION_FAILED_REASON,
                        format!(
                            "cloud-init did not finish within {}s of boot",
                            s.cloud_init_timeout.as_secs()
                        ),
                        None,
                    ));
                }
                return Ok(StepResult::next(Next::After(s.guest_poll)).with_message("cloud-init is running"));
            }
            super::guest::CloudInit::Failed(out) => {
                return Ok(StepResult::failed(
                    api::VM_PROVISION_FAILED_REASON,
                    format!("cloud-init failed execution: {out}"),
                    None,
                ));
            }
            super::guest::CloudInit::Degraded(out) => {
                warning = Some((
                    "CloudInitDegraded".to_owned(),
                    format!("cloud-init finished degraded: {out}"),
                ));
            }
            super::guest::CloudInit::Done => {}
        }
    }
    let st = status(pm);
    st.initialization = Some(api::InitializationStatus {
        provisioned: Some(true),
    });
    st.vm_status = Some("ready".to_owned());
    let zone = pm.spec.network.zone_or_default().to_owned();
    pm.labels_mut()
        .insert(capmox_api::consts::PROXMOX_ZONE_LABEL.to_owned(), zone);
    let mut r = StepResult::next(Next::Now);
    r.warning = warning;
    Ok(r)
}

async fn remove_iso(env: &StepEnv<'_>) -> Result<StepResult, MachineError> {
    let vm = env.vm()?;
    let file = bootstrap::iso_file_name(u64::from(vm.vmid));
    if vm.config.ide0.as_deref().is_some_and(|v| v.contains(&file)) {
        let update = ConfigUpdate::new().ide0("none,media=cdrom");
        env.proxmox
            .update_vm_config_sync(&vm.node, vm.vmid, &update)
            .await
            .map_err(MachineError::proxmox(format!(
                "detaching the bootstrap ISO of VM {}",
                vm.vmid
            )))?;
    }
    if let Some(found) = iso::find(env.proxmox, &vm.node, vm.vmid).await? {
        iso::delete(env.proxmox, &found).await?;
    }
    if vm
        .config
        .tags
        .iter()
        .any(|t| t.eq_ignore_ascii_case(CLOUD_INIT_TAG))
    {
        let update = ConfigUpdate::new().tags(&tags_without(&vm.config, CLOUD_INIT_TAG));
        env.proxmox
            .update_vm_config_sync(&vm.node, vm.vmid, &update)
            .await
            .map_err(MachineError::proxmox(format!("untagging VM {}", vm.vmid)))?;
    }
    Ok(StepResult::next(Next::Now))
}
