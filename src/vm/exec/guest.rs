//! The guest checks: the QEMU guest agent, the addresses of DHCP/SLAAC NICs, and `cloud-init
//! status` inside the guest, run through the agent.
//!
//! One check is one look: `cloud-init status --wait` is started once (its pid is remembered in
//! the view) and each later check reads that process's status — one request — until it exits
//! with cloud-init's result. A guest whose agent does not answer yet costs one request per check.
//!
//! Exit codes (cloud-init ≥ 23.4): 0 = done (or still running, shown in the output), 1 = error,
//! 2 = done with recoverable errors ("degraded"), which we accept with a warning where capmox fails
//! the machine.

use std::time::{Duration, Instant};

use super::{Env, Next, StepResult};
use crate::proxmox::ErrorClass;
use crate::proxmox::types::{AgentExecRequest, AgentExecStatus};
use crate::proxmox::view::ProxmoxView;
use crate::proxmox::view::guests::Look;
use crate::vm::Settings;
use crate::vm::adapter::{Adapter, Provisioned};
use crate::vm::decide::{Phase, Reason, VmFacts};
use crate::vm::dynamic;
use crate::vm::error::VmError;
use crate::vm::spec::VmRecord;

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
async fn read(view: &ProxmoxView, vm: &VmFacts, pid: u64) -> Result<Option<CloudInit>, VmError> {
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
        Err(e) => Err(VmError::proxmox(format!(
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
    settings: &Settings,
    probably_done: bool,
) -> Result<(CloudInit, bool), VmError> {
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
            return Err(VmError::proxmox(format!(
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

/// The wait of a pass that came before the VM's next guest look is due: what the owner shows
/// keeps what the last look said.
fn early_pass(wait: Duration) -> StepResult {
    let mut r = StepResult::next(Next::After(wait));
    r.report.keep = true;
    r
}

/// Waits for the guest: when the next look is due (scouts look every `guest_poll`; the other
/// VMs are woken or look when guests of this cluster were done before) and the timeout failure
/// once the guest has been up too long.
fn not_yet<A: Adapter>(
    env: &Env<'_, A>,
    vm: &VmFacts,
    booted: Instant,
    what: &str,
    timeout: Duration,
) -> StepResult {
    let s = env.settings;
    if vm.uptime_secs > timeout.as_secs() {
        env.view.guests.forget(env.owner);
        return StepResult::failed(
            Reason::VmFailed,
            format!("{what} within {}s of boot", timeout.as_secs()),
            None,
        );
    }
    let next = env.view.guests.next_check(env.owner, booted, s.guest_poll);
    let message = if what.starts_with("cloud-init") {
        "cloud-init is running"
    } else {
        "waiting for the QEMU guest agent"
    };
    StepResult::next(Next::After(next)).with_message(message)
}

/// Reads the guest's interfaces once: `Ok(addresses)` when every DHCP/SLAAC NIC has its
/// address(es), else the wait (paced like the other guest checks) or the timeout failure.
async fn look_for_addresses<A: Adapter>(
    env: &Env<'_, A>,
    vm: &VmFacts,
    nics: &[dynamic::DynamicNic],
) -> Result<Result<Vec<std::net::IpAddr>, StepResult>, VmError> {
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
                if r.report.failure.is_none() {
                    r = r.with_message(format!("waiting for a DHCP/SLAAC address: {what}"));
                    r.report.phase = Some(Phase::WaitingForDynamicAddress);
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
        Err(e) => Err(VmError::proxmox(format!(
            "reading the network interfaces of VM {}",
            vm.vmid
        ))(e)),
    }
}

/// Checks the guest agent and cloud-init once; when they pass (or are skipped) the VM is
/// provisioned (recorded, and reported with its SMBIOS UUID and learnt addresses).
pub async fn check<A: Adapter>(env: &Env<'_, A>, record: &mut VmRecord) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    let checks = &env.spec.guest;
    let skip_agent = checks.skip_agent;
    let skip_cloud_init = skip_agent || checks.skip_cloud_init;
    let s = env.settings;
    let booted = env
        .booted
        .unwrap_or_else(|| Instant::now() - Duration::from_secs(vm.uptime_secs));
    if !skip_agent
        && let Some(wait) = env
            .view
            .guests
            .too_early(Duration::from_secs(vm.uptime_secs), s.guest_poll)
    {
        return Ok(StepResult::next(Next::After(wait)).with_message("waiting for the QEMU guest agent"));
    }
    // NICs on DHCP/SLAAC: their addresses come from the agent, looked at with the guest checks.
    let nics = if checks.dynamic_nics.is_empty() {
        Vec::new()
    } else {
        // The MACs are in the full config (read once, cached by the view).
        let config = env.view.config(&vm.node, vm.vmid).await?;
        dynamic::dynamic_nics(&checks.dynamic_nics, config.as_deref().unwrap_or(&vm.config))
    };
    let nics = if skip_agent { Vec::new() } else { nics };
    let mut learnt = Vec::new();
    if !skip_agent && skip_cloud_init {
        match agent_alone(env, vm, booted, &nics).await? {
            Ok(ips) => learnt = ips,
            Err(r) => return Ok(r),
        }
    }
    let mut warning = None;
    if !skip_cloud_init {
        match cloud_init(env, vm, booted, &nics).await? {
            Ok((ips, w)) => {
                learnt = ips;
                warning = w;
            }
            Err(r) => return Ok(r),
        }
    }
    env.view.guests.forget(env.owner);
    let uuid = env
        .view
        .config(&vm.node, vm.vmid)
        .await?
        .and_then(|c| c.smbios_uuid.clone())
        .filter(|u| !u.is_empty());
    record.provisioned = true;
    let mut r = StepResult::next(Next::Now);
    r.report.warning = warning;
    r.provisioned = Some(Provisioned { uuid, learnt });
    Ok(r)
}

/// The agent check when cloud-init is not checked: the agent answers (and the dynamic NICs have
/// their addresses).
async fn agent_alone<A: Adapter>(
    env: &Env<'_, A>,
    vm: &VmFacts,
    booted: Instant,
    nics: &[dynamic::DynamicNic],
) -> Result<Result<Vec<std::net::IpAddr>, StepResult>, VmError> {
    match env.view.client().agent_os_info(&vm.node, vm.vmid).await {
        Ok(_) if nics.is_empty() => Ok(Ok(Vec::new())),
        Ok(_) => look_for_addresses(env, vm, nics).await,
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
                AGENT_LATE,
                env.settings.agent_timeout,
            )))
        }
        Err(e) => Err(VmError::proxmox(format!(
            "querying the guest agent of VM {}",
            vm.vmid
        ))(e)),
    }
}

/// What the agent's failure to answer in time is called.
const AGENT_LATE: &str = "the QEMU guest agent did not start";

/// The cloud-init check (with the dynamic NICs' addresses, when there are such NICs): `Ok` with
/// the learnt addresses and a warning for a degraded cloud-init when it is done, else the wait or
/// failure to report.
async fn cloud_init<A: Adapter>(
    env: &Env<'_, A>,
    vm: &VmFacts,
    booted: Instant,
    nics: &[dynamic::DynamicNic],
) -> Result<Result<(Vec<std::net::IpAddr>, Option<(Reason, String)>), StepResult>, VmError> {
    let s = env.settings;
    let uptime = Duration::from_secs(vm.uptime_secs);
    match env.view.guests.should_look(env.owner, booted, uptime) {
        Look::Now => {}
        Look::NotYet => return Ok(Err(not_yet(env, vm, booted, AGENT_LATE, s.agent_timeout))),
        // Another trigger brought this pass early: the look waits until it is due.
        Look::Due(wait) => return Ok(Err(early_pass(wait))),
    }
    let mut learnt = Vec::new();
    if !nics.is_empty() {
        match look_for_addresses(env, vm, nics).await? {
            Ok(ips) => learnt = ips,
            Err(r) => return Ok(Err(r)),
        }
    }
    let likely_done = env.view.guests.likely_done(uptime);
    let look = cloud_init_status(env.view, vm, s, likely_done).await?;
    if look.0 == CloudInit::Running {
        env.view.guests.still_running(env.owner);
    }
    let warning = match look {
        (CloudInit::AgentNotReady, _) => {
            return Ok(Err(not_yet(env, vm, booted, AGENT_LATE, s.agent_timeout)));
        }
        // Guests of this cluster were done by this uptime: the process just started is read
        // again within the window — on a later pass, not by holding this worker.
        (CloudInit::Running, true) if likely_done => {
            let wait = env.view.guests.look_again_in(env.owner, s.exec_poll_window);
            return Ok(Err(
                StepResult::next(Next::After(wait)).with_message("cloud-init is running")
            ));
        }
        (CloudInit::Running, _) => {
            return Ok(Err(not_yet(
                env,
                vm,
                booted,
                "cloud-init did not finish",
                s.cloud_init_timeout,
            )));
        }
        (CloudInit::Failed(out), _) => {
            env.view.guests.forget(env.owner);
            return Ok(Err(StepResult::failed(
                Reason::VmFailed,
                format!("cloud-init failed execution: {out}"),
                None,
            )));
        }
        (CloudInit::Degraded(out), _) => Some((
            Reason::CloudInitDegraded,
            format!("cloud-init finished degraded: {out}"),
        )),
        (CloudInit::Done, _) => None,
    };
    // Guests of this cluster that booted no later are probably done too.
    for m in env.view.guests.done(env.owner, booted, s.guest_poll) {
        env.view.wake(m);
    }
    Ok(Ok((learnt, warning)))
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
