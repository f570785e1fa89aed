//! Carries out one [`Step`] of the provisioning state machine: the Proxmox and Kubernetes calls of
//! that step and the spec/status fields it records on the working copy of the ProxmoxMachine.
//! Every step either finishes with Proxmox's state changed (so the next decision moves on) or
//! records the task it started in `status.taskRef` before anything else happens.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use capmox_api::capi::views::MachineView;
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;
use kube::runtime::reflector::ObjectRef;

use super::caches::Caches;
use super::desired::{DesiredVm, tags_without};
use super::error::MachineError;
use super::locations::Locations;
use super::observe::effect_of;
use super::placement;
use super::state::{Failure, Step, VmFacts};
use super::view::watch::Expect;
use super::view::{Freshness, ProxmoxView, timing};
use super::{MachineSettings, iso};
use crate::bootstrap::{
    self, BootstrapData, BootstrapError, CLOUD_INIT_TAG, ExtraMetadata, MachineBootstrapInput, ResolvedDevice,
};
use crate::ipam;
use crate::proxmox::types::{CloneRequest, ConfigUpdate, ResizeRequest, StartRequest};
use crate::proxmox::{ErrorClass, Upid};

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
    /// Condition reason instead of the step's own (`None`: the step's).
    pub reason: Option<&'static str>,
}

impl StepResult {
    /// A step that finished; look again per `next`.
    pub(super) fn next(next: Next) -> Self {
        Self {
            next,
            message: String::new(),
            failure: None,
            warning: None,
            reason: None,
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
            reason: None,
        }
    }
}

/// Everything a step may read.
pub struct StepEnv<'a> {
    /// Kubernetes client.
    pub kube: &'a kube::Client,
    /// What the controller knows about the machine's Proxmox cluster (and its client).
    pub view: &'a Arc<ProxmoxView>,
    /// How fresh this pass's shared reads must be.
    pub fresh: Freshness,
    /// The owner Machine.
    pub machine: &'a MachineView,
    /// This ProxmoxMachine (to be woken by the view).
    pub machine_ref: ObjectRef<ProxmoxMachine>,
    /// The machine's ProxmoxCluster.
    pub pc: &'a Arc<ProxmoxCluster>,
    /// Timeouts and delays.
    pub settings: &'a MachineSettings,
    /// The IPAM API version the API server serves.
    pub ipam_version: ipam::IpamApiVersion,
    /// The IPAM resolution of this pass, when the claims were looked at.
    pub resolution: Option<&'a ipam::Resolution>,
    /// The VM, when it exists.
    pub vm: Option<&'a VmFacts>,
    /// When the VM booted (running VMs).
    pub booted: Option<Instant>,
    /// Watch caches.
    pub caches: &'a dyn Caches,
    /// The node-location writer.
    pub locations: &'a Locations,
}

impl StepEnv<'_> {
    pub(super) fn vm(&self) -> Result<&VmFacts, MachineError> {
        self.vm
            .ok_or_else(|| MachineError::Invalid("the step needs the VM but it was not observed".into()))
    }

    /// The timing key of a task type (clones by kind).
    pub fn timing_key(&self, pm: &ProxmoxMachine, task_type: &str) -> String {
        if task_type == "qmclone" {
            timing::clone_key(pm.spec.is_full_clone()).to_owned()
        } else {
            task_type.to_owned()
        }
    }
}

/// The status of `pm`, created when absent.
pub(super) fn status(pm: &mut ProxmoxMachine) -> &mut api::ProxmoxMachineStatus {
    pm.status.get_or_insert_with(Default::default)
}

/// When to look at a task of `task_type` (timing key `key`) that has run for `age` again. A task
/// whose effect shows in the shared VM list — or, for ISO imports and deletions, in the listing
/// of `iso` (`(node, storage)`) — also makes the view wake the machine when it does (the
/// returned delay is then only a safety net).
pub fn wait_for_task(
    env: &StepEnv<'_>,
    vmid: Option<u32>,
    task_type: &str,
    key: &str,
    age: Duration,
    iso: Option<(String, String)>,
) -> Next {
    let s = env.settings;
    let look = env.view.next_look(key, age);
    let expect = match (task_type, iso) {
        ("imgcopy", Some((node, storage))) => Some(Expect::IsoPresent { node, storage }),
        ("imgdel", Some((node, storage))) => Some(Expect::IsoGone { node, storage }),
        _ => effect_of(task_type),
    };
    match (expect, vmid) {
        (Some(expect), Some(vmid)) => {
            env.view.expect(vmid, env.machine_ref.clone(), expect, key, age);
            Next::After(look * 3 + s.task_poll_max)
        }
        _ => Next::After(look),
    }
}

/// Records a task this pass started so the next passes wait for it instead of repeating the
/// call (`iso`: where the ISO an import or deletion works on lives).
pub fn record_task(
    pm: &mut ProxmoxMachine,
    env: &StepEnv<'_>,
    vmid: u32,
    upid: &Upid,
    iso: Option<(String, String)>,
) -> Next {
    env.view.started(upid.as_str(), vmid);
    status(pm).task_ref = Some(upid.to_string());
    let key = env.timing_key(pm, &upid.task_type);
    wait_for_task(env, Some(vmid), &upid.task_type, &key, Duration::ZERO, iso)
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
        // The pass computes when to look at the task again.
        Step::PollTask => StepResult::next(Next::After(s.task_poll_initial)),
        Step::WaitForUnlock(lock) => {
            let vm = env.vm()?;
            let next = if lock == "clone" {
                let key = env.timing_key(pm, "qmclone");
                wait_for_task(env, Some(vm.vmid), "qmclone", &key, Duration::ZERO, None)
            } else {
                Next::After(s.task_poll_max)
            };
            StepResult::next(next).with_message(format!("VM is locked ({lock})"))
        }
        Step::ForgetTask => {
            status(pm).task_ref = None;
            StepResult::next(Next::Now)
        }
        Step::HandleFailedTask { kind, exitstatus } => {
            if let Some(vmid) = super::observe::recorded_vmid(pm) {
                // A failed config task may have applied nothing: read the config again.
                env.view.forget_config(vmid);
            }
            failed_task(pm, kind, exitstatus, s)
        }
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
            let upid = match env
                .view
                .client()
                .update_vm_config(&vm.node, vm.vmid, update)
                .await
            {
                Ok(upid) => upid,
                Err(e) => {
                    // The write may have happened with its answer lost: the next pass reads the
                    // config again instead of trusting the copy (a data disk is never allocated
                    // twice: its slot then exists).
                    env.view.forget_config(vm.vmid);
                    if update.sets_disks() && !e.is_retryable() {
                        return Ok(super::ha::warned(StepResult::failed(
                            api::ADDITIONAL_VOLUMES_FAILED_REASON,
                            format!("creating the additional volumes of VM {}: {e}", vm.vmid),
                            Some(s.retry_delay),
                        )));
                    }
                    return Err(MachineError::proxmox(format!("configuring VM {}", vm.vmid))(e));
                }
            };
            // The VM is stopped and the task applies exactly this: the cached config follows
            // (a failed task makes the next pass read it again).
            env.view.config_updated(vm.vmid, update);
            StepResult::next(match upid {
                Some(upid) => record_task(pm, env, vm.vmid, &upid, None),
                None => Next::Now,
            })
        }
        Step::ResizeBootDisk { disk, size_gib } => {
            let vm = env.vm()?;
            let upid = env
                .view
                .client()
                .resize_disk(&vm.node, vm.vmid, &ResizeRequest::to_gib(disk.clone(), *size_gib))
                .await
                .map_err(MachineError::proxmox(format!(
                    "resizing {disk} of VM {}",
                    vm.vmid
                )))?;
            env.view.forget_config(vm.vmid);
            StepResult::next(match upid {
                Some(upid) => record_task(pm, env, vm.vmid, &upid, None),
                None => Next::Now,
            })
        }
        Step::ClaimIpAddresses => claim_ips(env, pm).await?,
        Step::IpConflict(message) => {
            StepResult::next(Next::After(s.retry_delay)).with_message(message.clone())
        }
        Step::DeliverBootstrapData => deliver_bootstrap(env, pm).await?,
        Step::PowerOn | Step::Resume => {
            let vm = env.vm()?;
            let client = env.view.client();
            let upid = if *step == Step::Resume {
                client.resume_vm(&vm.node, vm.vmid).await
            } else {
                client.start_vm(&vm.node, vm.vmid, &StartRequest::default()).await
            }
            .map_err(MachineError::proxmox(format!("starting VM {}", vm.vmid)))?;
            StepResult::next(record_task(pm, env, vm.vmid, &upid, None))
        }
        Step::ApplyHa(wanted) => super::ha::apply(env, pm, wanted).await?,
        Step::RemoveHa(applied) => super::ha::remove(env, pm, applied).await?,
        Step::CheckGuest => super::guest::check(env, pm).await?,
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
    let result = env
        .view
        .client()
        .clone_vm(&template.node, template.vmid, &req)
        .await;
    env.view.forget_config(vmid);
    env.view.wrote(vmid);
    match result {
        Ok(upid) => {
            env.view.cloned_here(vmid);
            Ok(StepResult::next(record_task(pm, env, vmid, &upid, None)))
        }
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
    let pools = ipam_pools(env.caches, &ns, &desired);
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

/// Labels and annotations of the InClusterIPPools the claims reference (from the watch cache;
/// unknown pools are skipped).
fn ipam_pools(
    caches: &dyn Caches,
    ns: &str,
    desired: &[ipam::DesiredClaim],
) -> BTreeMap<String, super::caches::Meta> {
    desired
        .iter()
        .filter(|d| d.pool.kind == "InClusterIPPool")
        .filter_map(|d| Some((d.pool.name.clone(), caches.pool(ns, &d.pool.name)?)))
        .collect()
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
    region: Option<String>,
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
            region,
        },
    })
}

/// Renders the NoCloud ISO of the machine (reads the bootstrap Secret): `Err` is the failure to
/// report.
async fn render_iso(
    env: &StepEnv<'_>,
    pm: &ProxmoxMachine,
    vm: &VmFacts,
) -> Result<Result<Vec<u8>, StepResult>, MachineError> {
    let retry = Some(env.settings.retry_delay);
    let ns = pm.namespace().unwrap_or_default();
    let bootstrap = match bootstrap_data(env, &ns).await? {
        Ok(b) => b,
        Err(message) => {
            return Ok(Err(StepResult::failed(
                api::CLONING_FAILED_REASON,
                message,
                retry,
            )));
        }
    };
    let pools = ipam_pools(env.caches, &ns, &ipam::desired_claims(pm, env.pc)?);
    let mut resolved = env.resolution.map(|r| r.resolved.clone()).unwrap_or_default();
    // Pool annotations carry the default-route metric; a bad annotation is reported, not ignored.
    if let Err(e) = ipam::apply_gateway_metrics(&mut resolved, |p| pools.get(&p.name).map(|(_, a)| a)) {
        return Ok(Err(StepResult::failed(
            api::WAITING_FOR_BOOTSTRAP_DATA_RECONCILIATION_REASON,
            e.to_string(),
            retry,
        )));
    }
    let region = env.view.cluster_name().await?;
    let input = match render_input(env, pm, vm, bootstrap, &resolved, region) {
        Ok(i) => i,
        Err(BootstrapError::MissingMacAddress { device }) => {
            env.view.forget_config(vm.vmid);
            return Ok(Err(StepResult::next(Next::After(env.settings.task_poll_max))
                .with_message(format!("waiting for the MAC address of {device}"))));
        }
        Err(e) => {
            return Ok(Err(StepResult::failed(
                api::VM_PROVISION_FAILED_REASON,
                e.to_string(),
                retry,
            )));
        }
    };
    let format = match pm.spec.network_config_format_or_default() {
        api::NetworkConfigFormat::Capmox => bootstrap::NetworkConfigFormat::CapmoxV2,
        api::NetworkConfigFormat::V2 => bootstrap::NetworkConfigFormat::NetplanV2Bare,
    };
    Ok(bootstrap::build_bootstrap_iso(&input, format)
        .map_err(|e| StepResult::failed(api::VM_PROVISION_FAILED_REASON, e.to_string(), retry)))
}

/// The bootstrap data: the ISO is uploaded unless it is on the storage already (an upload is a
/// task the next passes wait for); once it is there, one config write attaches it, tags the VM
/// with its default IPv4 addresses and `go-proxmox+cloud-init`, and the data counts as delivered.
async fn deliver_bootstrap(env: &StepEnv<'_>, pm: &mut ProxmoxMachine) -> Result<StepResult, MachineError> {
    let vm = env.vm()?;
    let retry = Some(env.settings.retry_delay);
    let (_, snap) = env.view.snapshot(env.fresh).await?;
    let storage = match iso::choose_storage(&snap, &vm.node, pm.spec.cloud_init_storage.as_deref()) {
        Ok(s) => s,
        Err(message) => {
            return Ok(StepResult::failed(
                api::VM_PROVISION_FAILED_REASON,
                message,
                retry,
            ));
        }
    };
    // The storage is listed unless no ISO of this VM can be there yet (cloned by this process,
    // nothing put since): then the upload goes out at once.
    let there = !env.view.no_iso_put_yet(vm.vmid)
        && iso::present(env.view, &vm.node, &storage, vm.vmid, env.fresh).await?;
    if !there {
        let image = match render_iso(env, pm, vm).await? {
            Ok(i) => i,
            Err(result) => return Ok(result),
        };
        let upid = iso::upload(env.view, &vm.node, &storage, vm.vmid, image).await?;
        let at = Some((vm.node.clone(), storage.clone()));
        return Ok(StepResult::next(record_task(pm, env, vm.vmid, &upid, at))
            .with_message(format!("uploading {}", iso::volid(&storage, vm.vmid))));
    }
    let ip_tags = env
        .resolution
        .map(|r| ipam::default_ipv4_tags(&r.resolved))
        .unwrap_or_default();
    let update = iso::delivery_update(&DesiredVm::from_spec(&pm.spec), vm, &storage, &ip_tags);
    env.view
        .client()
        .update_vm_config_sync(&vm.node, vm.vmid, &update)
        .await
        .map_err(MachineError::proxmox(format!(
            "configuring VM {} and attaching {}",
            vm.vmid,
            iso::volid(&storage, vm.vmid)
        )))?;
    env.view.config_updated(vm.vmid, &update);
    env.view.iso_is_at(vm.vmid, &vm.node, &storage);
    status(pm).bootstrap_data_provided = Some(true);
    Ok(StepResult::next(Next::Now))
}

/// The node joined: the bootstrap ISO is deleted first (a task the view wakes the machine for;
/// it is not recorded in the status: after a crash the ISO is simply deleted again) while the
/// VM keeps its `go-proxmox+cloud-init` tag, so a crash comes back here; then one config write
/// detaches it and drops the tag.
async fn remove_iso(env: &StepEnv<'_>) -> Result<StepResult, MachineError> {
    let vm = env.vm()?;
    let view = env.view;
    let config = view.config(&vm.node, vm.vmid).await?.ok_or_else(|| {
        MachineError::Invalid(format!("VM {} left node {} while it was read", vm.vmid, vm.node))
    })?;
    let file = bootstrap::iso_file_name(u64::from(vm.vmid));
    let attached = config.ide0.as_deref().filter(|v| v.contains(&file));
    // Where the ISO is: known to the view, named by the attached volume, or looked for on every
    // ISO storage of the node.
    let known = view
        .iso_at(vm.vmid)
        .filter(|(node, _)| *node == vm.node)
        .map(|(_, s)| s)
        .or_else(|| {
            attached
                .and_then(|v| v.split_once(':'))
                .map(|(s, _)| s.to_owned())
        });
    // Put or seen there by this process and no deletion started yet: deleted without listing
    // first (a deletion of a file that is gone answers "not found", which counts as done).
    let remembered = view.iso_at(vm.vmid).is_some_and(|(node, _)| node == vm.node)
        && view.iso_deletion_of(vm.vmid).is_none();
    let found = match known {
        Some(storage) if remembered => Some(super::state::IsoLocation {
            node: vm.node.clone(),
            volid: iso::volid(&storage, vm.vmid),
            storage,
        }),
        Some(storage) if iso::present(view, &vm.node, &storage, vm.vmid, env.fresh).await? => {
            Some(super::state::IsoLocation {
                node: vm.node.clone(),
                volid: iso::volid(&storage, vm.vmid),
                storage,
            })
        }
        Some(_) => None,
        None => {
            let (_, snap) = view.snapshot(env.fresh).await?;
            iso::find(view, &snap, &vm.node, vm.vmid, env.fresh).await?
        }
    };
    if let Some(found) = found {
        view.iso_is_at(vm.vmid, &found.node, &found.storage);
        let at = Some((found.node.clone(), found.storage.clone()));
        // A deletion of this controller still runs: wait for it instead of deleting again.
        if let Some(upid) = view.iso_deletion_of(vm.vmid) {
            let age = Upid::parse(&upid).map_or(Duration::ZERO, |u| view.task_age(&upid, u.starttime));
            if age < (view.timing.estimate("imgdel") * 3).max(env.settings.task_poll_max) {
                let next = wait_for_task(env, Some(vm.vmid), "imgdel", "imgdel", age, at);
                return Ok(StepResult::next(next));
            }
        }
        if let Some(upid) = iso::delete(view, vm.vmid, &found).await? {
            view.iso_deletion(vm.vmid, Some(upid.as_str()));
            let next = wait_for_task(env, Some(vm.vmid), "imgdel", "imgdel", Duration::ZERO, at);
            return Ok(StepResult::next(next));
        }
    }
    if let Some(upid) = view.iso_deletion_of(vm.vmid) {
        if let Some(took) = view.finished(&upid) {
            view.task_done("imgdel", took);
        }
        view.iso_deletion(vm.vmid, None);
    }
    let mut update = ConfigUpdate::new();
    if attached.is_some() {
        update = update.ide0("none,media=cdrom");
    }
    if config.tags.iter().any(|t| t.eq_ignore_ascii_case(CLOUD_INIT_TAG)) {
        update = update.tags(&tags_without(&config, CLOUD_INIT_TAG));
    }
    if !update.is_empty() {
        view.client()
            .update_vm_config_sync(&vm.node, vm.vmid, &update)
            .await
            .map_err(MachineError::proxmox(format!(
                "detaching the bootstrap ISO of VM {}",
                vm.vmid
            )))?;
        // The tags show in the shared list: they are laid over lists read before this write.
        view.config_written(vm.vmid, &update);
    }
    // Nothing more is configured on this VM; its deletion need not look for the ISO.
    view.forget_config(vm.vmid);
    view.iso_removed(vm.vmid);
    Ok(StepResult::next(Next::Now))
}
