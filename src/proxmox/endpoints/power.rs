//! `/nodes/{node}/qemu/{vmid}/status/*` power actions. Each returns the task's UPID.

use super::upid;
use crate::proxmox::error::Error;
use crate::proxmox::path::ApiPath;
use crate::proxmox::task::Upid;
use crate::proxmox::types::{RebootRequest, ShutdownRequest, StartRequest, StopRequest};
use crate::proxmox::{Client, to_body};

impl Client {
    async fn power(
        &self,
        node: &str,
        vmid: u32,
        action: &str,
        body: serde_json::Value,
    ) -> Result<Upid, Error> {
        let path = ApiPath::vm(node, vmid).lit("status").lit(action);
        upid(self.post(&path, body).await?)
    }

    /// `POST .../status/start` (`qmstart`; "already running" fails inside the task).
    pub async fn start_vm(&self, node: &str, vmid: u32, req: &StartRequest) -> Result<Upid, Error> {
        self.power(node, vmid, "start", to_body(req)?).await
    }

    /// `POST .../status/stop` (`qmstop`; stopping a stopped VM ends OK).
    pub async fn stop_vm(&self, node: &str, vmid: u32, req: &StopRequest) -> Result<Upid, Error> {
        self.power(node, vmid, "stop", to_body(req)?).await
    }

    /// `POST .../status/shutdown` (`qmshutdown`).
    pub async fn shutdown_vm(&self, node: &str, vmid: u32, req: &ShutdownRequest) -> Result<Upid, Error> {
        self.power(node, vmid, "shutdown", to_body(req)?).await
    }

    /// `POST .../status/reboot` (`qmreboot`; a stopped VM fails on the call).
    pub async fn reboot_vm(&self, node: &str, vmid: u32, req: &RebootRequest) -> Result<Upid, Error> {
        self.power(node, vmid, "reboot", to_body(req)?).await
    }

    /// `POST .../status/reset` (`qmreset`).
    pub async fn reset_vm(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        self.power(node, vmid, "reset", serde_json::json!({})).await
    }

    /// `POST .../status/suspend` (`qmpause`).
    pub async fn suspend_vm(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        self.power(node, vmid, "suspend", serde_json::json!({})).await
    }

    /// `POST .../status/resume` (`qmresume`).
    pub async fn resume_vm(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        self.power(node, vmid, "resume", serde_json::json!({})).await
    }
}
