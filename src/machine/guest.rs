//! `cloud-init status` inside the guest, run through the QEMU guest agent.
//!
//! One check is one look: `cloud-init status --wait` is started once (its pid is remembered in
//! the view) and each later check reads that process's status — one request — until it exits
//! with cloud-init's result. A guest whose agent does not answer yet costs one request per check.
//!
//! Exit codes (cloud-init ≥ 23.4): 0 = done (or still running, shown in the output), 1 = error,
//! 2 = done with recoverable errors ("degraded"), which we accept with a warning where capmox fails
//! the machine.

use std::time::{Duration, Instant};

use capmox_api::v1alpha2::{self as api, ProxmoxMachine};
use kube::ResourceExt;

use super::MachineSettings;
use super::dynamic;
use super::error::MachineError;
use super::state::VmFacts;
use super::steps::{Next, StepEnv, StepResult, status};
use super::view::ProxmoxView;
use super::view::guests::Look;
use crate::proxmox::ErrorClass;
use crate::proxmox::types::{AgentExecRequest, AgentExecStatus};

/// What `cloud-init status` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloudInit {
    /// Still running.
    Running,
    /// The QEMU guest agent does not answer yet.
    AgentNotReady,
    /// Finished successfully.
    Done,
    /// Finished with recoverable errors (exit code 2); the output.
    Degraded(String),
    /// Failed (any other non-zero exit code); the output.
    Failed(String),
}

/// Interprets a finished `cloud-init status` run.
pub fn interpret(status: &AgentExecStatus) -> CloudInit {
    let out = status.out_data.clone().unwrap_or_default();
    let text = || {
        let err = status.err_data.clone().unwrap_or_default();
        format!("{} {}", out.trim().trim_start_matches('.').trim(), err.trim())
            .trim()
            .to_owned()
    };
    match status.exitcode.unwrap_or(0) {
        0 if out.contains("running") => CloudInit::Running,
        0 => CloudInit::Done,
        2 => CloudInit::Degraded(text()),
        _ => CloudInit::Failed(text()),
    }
}

/// The delay before reading a just-started process's status: cloud-init that is already done
/// answers within a fraction of `window`.
fn first_read(window: Duration) -> Duration {
    window / 20
}

/// Reads the status of the `cloud-init status --wait` process `pid` (`None`: it has not exited).
async fn read(view: &ProxmoxView, vm: &VmFacts, pid: u64) -> Result<Option<CloudInit>, MachineError> {
    match view.client().agent_exec_status(&vm.node, vm.vmid, pid).await {
        Ok(s) if s.exited => {
            view.guests.set_pid(vm.vmid, None);
            Ok(Some(interpret(&s)))
        }
        Ok(_) => Ok(None),
        Err(e) if e.class() == ErrorClass::AgentNotReady => {
            view.guests.set_pid(vm.vmid, None);
            Ok(Some(CloudInit::AgentNotReady))
        }
        // The agent restarted (and forgot the process) or the VM rebooted: start again.
        Err(e) if e.class() == ErrorClass::Server => {
            view.guests.set_pid(vm.vmid, None);
            Ok(Some(CloudInit::Running))
        }
        Err(e) => Err(MachineError::proxmox(format!(
            "reading cloud-init status of VM {}",
            vm.vmid
        ))(e)),
    }
}

/// Looks at cloud-init once: reads the running `cloud-init status --wait` process, or starts one
/// — and, when the guest is `probably_done`, reads it after a twentieth of
/// `settings.exec_poll_window` (a process of a guest still booting is read at its next look:
/// reading it at once would only find it running). The second value says whether the process
/// was started in this look.
pub async fn cloud_init_status(
    view: &ProxmoxView,
    vm: &VmFacts,
    settings: &MachineSettings,
    probably_done: bool,
) -> Result<(CloudInit, bool), MachineError> {
    if let Some(pid) = view.guests.pid(vm.vmid) {
        tracing::debug!(vmid = vm.vmid, pid, "reading the cloud-init status process");
        return Ok((read(view, vm, pid).await?.unwrap_or(CloudInit::Running), false));
    }
    let mut request = AgentExecRequest::new(&["cloud-init", "status", "--wait"]);
    request.input_data = Some(String::new());
    let pid = match view.client().agent_exec(&vm.node, vm.vmid, &request).await {
        Ok(pid) => pid,
        Err(e) if e.class() == ErrorClass::AgentNotReady => return Ok((CloudInit::AgentNotReady, false)),
        Err(e) => {
            return Err(MachineError::proxmox(format!(
                "running cloud-init status in VM {}",
                vm.vmid
            ))(e));
        }
    };
    view.guests.set_pid(vm.vmid, Some(pid));
    if !probably_done {
        return Ok((CloudInit::Running, true));
    }
    tokio::time::sleep(first_read(settings.exec_poll_window)).await;
    Ok((read(view, vm, pid).await?.unwrap_or(CloudInit::Running), true))
}

/// The wait of a pass that came before the machine's next guest look is due: the condition keeps
/// what the last look said.
fn early_pass(pm: &ProxmoxMachine, wait: Duration) -> StepResult {
    let current = pm
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_deref())
        .and_then(|c| crate::conditions::get(c, api::VIRTUAL_MACHINE_PROVISIONED_CONDITION));
    let mut r = StepResult::next(Next::After(wait));
    if let Some(c) = current {
        r = r.with_message(c.message.clone());
        if c.reason == api::WAITING_FOR_DYNAMIC_ADDRESS_REASON {
            r.reason = Some(api::WAITING_FOR_DYNAMIC_ADDRESS_REASON);
        }
    }
    r
}

/// Waits for the guest: when the next look is due (scouts look every `guest_poll`; the other
/// machines are woken or look when guests of this cluster were done before) and the timeout
/// failure once the guest has been up too long.
fn not_yet(env: &StepEnv<'_>, vm: &VmFacts, booted: Instant, what: &str, timeout: Duration) -> StepResult {
    let s = env.settings;
    if vm.uptime_secs > timeout.as_secs() {
        env.view.guests.forget(&env.machine_ref);
        return StepResult::failed(
            api::VM_PROVISION_FAILED_REASON,
            format!("{what} within {}s of boot", timeout.as_secs()),
            None,
        );
    }
    let next = env.view.guests.next_check(&env.machine_ref, booted, s.guest_poll);
    let message = if what.starts_with("cloud-init") {
        "cloud-init is running"
    } else {
        "waiting for the QEMU guest agent"
    };
    StepResult::next(Next::After(next)).with_message(message)
}

/// Reads the guest's interfaces once: `Ok(addresses)` when every DHCP/SLAAC NIC has its
/// address(es), else the wait (paced like the other guest checks) or the timeout failure.
async fn look_for_addresses(
    env: &StepEnv<'_>,
    vm: &VmFacts,
    nics: &[dynamic::DynamicNic],
) -> Result<Result<Vec<std::net::IpAddr>, StepResult>, MachineError> {
    let s = env.settings;
    let booted = env
        .booted
        .unwrap_or_else(|| Instant::now() - Duration::from_secs(vm.uptime_secs));
    match env
        .view
        .client()
        .agent_network_interfaces(&vm.node, vm.vmid)
        .await
    {
        Ok(ifaces) => match dynamic::learn(nics, &ifaces) {
            dynamic::Learnt::Complete(ips) => Ok(Ok(ips)),
            dynamic::Learnt::Missing(what) => {
                let mut r = not_yet(
                    env,
                    vm,
                    booted,
                    "the guest got no DHCP/SLAAC address",
                    s.cloud_init_timeout,
                );
                if r.failure.is_none() {
                    r = r.with_message(format!("waiting for a DHCP/SLAAC address: {what}"));
                    r.reason = Some(api::WAITING_FOR_DYNAMIC_ADDRESS_REASON);
                }
                Ok(Err(r))
            }
        },
        Err(e)
            if matches!(
                e.class(),
                ErrorClass::AgentNotReady | ErrorClass::AgentNotConfigured
            ) =>
        {
            Ok(Err(not_yet(
                env,
                vm,
                booted,
                "the QEMU guest agent did not start",
                s.agent_timeout,
            )))
        }
        Err(e) => Err(MachineError::proxmox(format!(
            "reading the network interfaces of VM {}",
            vm.vmid
        ))(e)),
    }
}

/// Checks the guest agent and cloud-init once; when they pass (or are skipped) the machine is
/// marked provisioned, its `spec.providerID` set and the zone label added.
pub async fn check(env: &StepEnv<'_>, pm: &mut ProxmoxMachine) -> Result<StepResult, MachineError> {
    let Some(vm) = env.vm else {
        return Err(MachineError::Invalid("the guest check needs the VM".into()));
    };
    let checks = pm.spec.checks.clone().unwrap_or_default();
    let skip_agent = checks.skip_qemu_guest_agent == Some(true);
    let skip_cloud_init = skip_agent || checks.skip_cloud_init_status == Some(true);
    let s = env.settings;
    let booted = env
        .booted
        .unwrap_or_else(|| Instant::now() - Duration::from_secs(vm.uptime_secs));
    let agent_late = "the QEMU guest agent did not start";
    let mut warning = None;
    if !skip_agent
        && let Some(wait) = env
            .view
            .guests
            .too_early(Duration::from_secs(vm.uptime_secs), s.guest_poll)
    {
        return Ok(StepResult::next(Next::After(wait)).with_message("waiting for the QEMU guest agent"));
    }
    // NICs on DHCP/SLAAC: their addresses come from the agent, looked at with the guest checks.
    let nics = if pm.spec.network.uses_dynamic_addresses() {
        // The MACs are in the full config (read once, cached by the view).
        let config = env.view.config(&vm.node, vm.vmid).await?;
        dynamic::dynamic_nics(&pm.spec, config.as_deref().unwrap_or(&vm.config))
    } else {
        Vec::new()
    };
    let wants_addresses = !nics.is_empty() && !skip_agent;
    let mut learnt = Vec::new();
    if !skip_agent && skip_cloud_init {
        match env.view.client().agent_os_info(&vm.node, vm.vmid).await {
            Ok(_) => {
                if wants_addresses {
                    match look_for_addresses(env, vm, &nics).await? {
                        Ok(ips) => learnt = ips,
                        Err(r) => return Ok(r),
                    }
                }
            }
            Err(e)
                if matches!(
                    e.class(),
                    ErrorClass::AgentNotReady | ErrorClass::AgentNotConfigured
                ) =>
            {
                return Ok(not_yet(env, vm, booted, agent_late, s.agent_timeout));
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
        let uptime = Duration::from_secs(vm.uptime_secs);
        match env.view.guests.should_look(&env.machine_ref, booted, uptime) {
            Look::Now => {}
            Look::NotYet => return Ok(not_yet(env, vm, booted, agent_late, s.agent_timeout)),
            // Another trigger brought this pass early: the look waits until it is due.
            Look::Due(wait) => return Ok(early_pass(pm, wait)),
        }
        if wants_addresses {
            match look_for_addresses(env, vm, &nics).await? {
                Ok(ips) => learnt = ips,
                Err(r) => return Ok(r),
            }
        }
        let likely_done = env.view.guests.likely_done(uptime);
        let look = cloud_init_status(env.view, vm, s, likely_done).await?;
        if look.0 == CloudInit::Running {
            env.view.guests.still_running(&env.machine_ref);
        }
        match look {
            (CloudInit::AgentNotReady, _) => {
                return Ok(not_yet(env, vm, booted, agent_late, s.agent_timeout));
            }
            // Guests of this cluster were done by this uptime: the process just started is read
            // again within the window — on a later pass, not by holding this worker.
            (CloudInit::Running, true) if likely_done => {
                let wait = env
                    .view
                    .guests
                    .look_again_in(&env.machine_ref, s.exec_poll_window);
                return Ok(StepResult::next(Next::After(wait)).with_message("cloud-init is running"));
            }
            (CloudInit::Running, _) => {
                return Ok(not_yet(
                    env,
                    vm,
                    booted,
                    "cloud-init did not finish",
                    s.cloud_init_timeout,
                ));
            }
            (CloudInit::Failed(out), _) => {
                env.view.guests.forget(&env.machine_ref);
                return Ok(StepResult::failed(
                    api::VM_PROVISION_FAILED_REASON,
                    format!("cloud-init failed execution: {out}"),
                    None,
                ));
            }
            (CloudInit::Degraded(out), _) => {
                warning = Some((
                    "CloudInitDegraded".to_owned(),
                    format!("cloud-init finished degraded: {out}"),
                ));
            }
            (CloudInit::Done, _) => {}
        }
        // Guests of this cluster that booted no later are probably done too.
        for m in env.view.guests.done(&env.machine_ref, booted, s.guest_poll) {
            env.view.wake(m);
        }
    }
    env.view.guests.forget(&env.machine_ref);
    if let Some(uuid) = env
        .view
        .config(&vm.node, vm.vmid)
        .await?
        .and_then(|c| c.smbios_uuid.clone())
        .filter(|u| !u.is_empty())
    {
        pm.spec.provider_id = Some(format!("{}{uuid}", capmox_api::consts::PROVIDER_ID_PREFIX));
    }
    let pm_name = pm.name_any();
    let st = status(pm);
    st.initialization = Some(api::InitializationStatus {
        provisioned: Some(true),
    });
    st.vm_status = Some("ready".to_owned());
    if !nics.is_empty() {
        let defaults: Vec<std::net::IpAddr> = env
            .resolution
            .map(|r| {
                r.resolved
                    .iter()
                    .filter(|a| a.is_default_pool)
                    .map(|a| a.address)
                    .collect()
            })
            .unwrap_or_default();
        st.addresses = Some(dynamic::machine_addresses(&pm_name, &defaults, &learnt));
    }
    let zone = pm.spec.network.zone_or_default().to_owned();
    pm.labels_mut()
        .insert(capmox_api::consts::PROXMOX_ZONE_LABEL.to_owned(), zone);
    let mut r = StepResult::next(Next::Now);
    r.warning = warning;
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(code: i64, out: &str) -> AgentExecStatus {
        serde_json::from_value(serde_json::json!({"exited": 1, "exitcode": code, "out-data": out})).unwrap()
    }

    #[test]
    fn exit_codes_and_output() {
        assert_eq!(interpret(&status(0, "status: running\n")), CloudInit::Running);
        assert_eq!(interpret(&status(0, "status: done\n")), CloudInit::Done);
        assert_eq!(interpret(&status(0, "...\nstatus: done\n")), CloudInit::Done);
        assert_eq!(
            interpret(&status(2, "status: degraded done\n")),
            CloudInit::Degraded("status: degraded done".into())
        );
        assert_eq!(
            interpret(&status(1, ".\nstatus: error\n")),
            CloudInit::Failed("status: error".into())
        );
        assert_eq!(first_read(Duration::from_secs(2)), Duration::from_millis(100));
    }
}
