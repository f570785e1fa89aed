//! `/nodes/{node}/qemu/{vmid}/agent/*`.

use crate::proxmox::error::Error;
use crate::proxmox::path::ApiPath;
use crate::proxmox::types::{
    AgentExecPid, AgentExecRequest, AgentExecStatus, AgentResult, GuestNetworkInterface, OsInfo,
};
use crate::proxmox::{Client, to_body};

impl Client {
    /// `GET .../agent/get-osinfo`. [`Error::AgentNotReady`] until the agent answers.
    pub async fn agent_os_info(&self, node: &str, vmid: u32) -> Result<OsInfo, Error> {
        let r: AgentResult<OsInfo> = self
            .get(&ApiPath::vm(node, vmid).lit("agent/get-osinfo"), &[])
            .await?;
        Ok(r.result)
    }

    /// `GET .../agent/network-get-interfaces`.
    pub async fn agent_network_interfaces(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<Vec<GuestNetworkInterface>, Error> {
        let r: AgentResult<Vec<GuestNetworkInterface>> = self
            .get(&ApiPath::vm(node, vmid).lit("agent/network-get-interfaces"), &[])
            .await?;
        Ok(r.result)
    }

    /// `POST .../agent/exec`: starts a command in the guest and returns its pid.
    pub async fn agent_exec(&self, node: &str, vmid: u32, req: &AgentExecRequest) -> Result<u64, Error> {
        let r: AgentExecPid = self
            .post(&ApiPath::vm(node, vmid).lit("agent/exec"), to_body(req)?)
            .await?;
        Ok(r.pid)
    }

    /// `GET .../agent/exec-status?pid=N`.
    pub async fn agent_exec_status(&self, node: &str, vmid: u32, pid: u64) -> Result<AgentExecStatus, Error> {
        let q = vec![("pid".to_owned(), pid.to_string())];
        self.get(&ApiPath::vm(node, vmid).lit("agent/exec-status"), &q)
            .await
    }
}
