//! `cloud-init status` inside the guest, run through the QEMU guest agent.
//!
//! Exit codes (cloud-init ≥ 23.4): 0 = done (or still running, shown in the output), 1 = error,
//! 2 = done with recoverable errors ("degraded"), which we accept with a warning where capmox fails
//! the machine.

use std::time::{Duration, Instant};

use super::MachineSettings;
use super::error::MachineError;
use super::state::VmFacts;
use crate::proxmox::types::{AgentExecRequest, AgentExecStatus};
use crate::proxmox::{Client, ErrorClass};

/// What `cloud-init status` said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CloudInit {
    /// Still running.
    Running,
    /// The command did not finish within the poll window.
    NoAnswerYet,
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
        format!("{} {}", out.trim(), err.trim()).trim().to_owned()
    };
    match status.exitcode.unwrap_or(0) {
        0 if out.contains("running") => CloudInit::Running,
        0 => CloudInit::Done,
        2 => CloudInit::Degraded(text()),
        _ => CloudInit::Failed(text()),
    }
}

/// Runs `cloud-init status` and waits up to `settings.exec_poll_window` for its answer.
pub async fn cloud_init_status(
    proxmox: &Client,
    vm: &VmFacts,
    settings: &MachineSettings,
) -> Result<CloudInit, MachineError> {
    let mut request = AgentExecRequest::new(&["cloud-init", "status"]);
    request.input_data = Some(String::new());
    let pid = match proxmox.agent_exec(&vm.node, vm.vmid, &request).await {
        Ok(pid) => pid,
        Err(e) if e.class() == ErrorClass::AgentNotReady => return Ok(CloudInit::NoAnswerYet),
        Err(e) => {
            return Err(MachineError::proxmox(format!(
                "running cloud-init status in VM {}",
                vm.vmid
            ))(e));
        }
    };
    let started = Instant::now();
    loop {
        let status =
            proxmox
                .agent_exec_status(&vm.node, vm.vmid, pid)
                .await
                .map_err(MachineError::proxmox(format!(
                    "reading cloud-init status of VM {}",
                    vm.vmid
                )))?;
        if status.exited {
            return Ok(interpret(&status));
        }
        if started.elapsed() >= settings.exec_poll_window {
            return Ok(CloudInit::NoAnswerYet);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
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
        assert_eq!(
            interpret(&status(2, "status: degraded done\n")),
            CloudInit::Degraded("status: degraded done".into())
        );
        assert_eq!(
            interpret(&status(1, "status: error\n")),
            CloudInit::Failed("status: error".into())
        );
    }
}
