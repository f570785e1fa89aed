//! The writes and reads a VM's operation needs beyond provisioning, through the view like every
//! other write: shutdown (with a hard stop after its timeout), reboot, pause — each recorded as a
//! write that changes what the shared list shows, its task remembered — and the reads of the
//! changes Proxmox keeps pending and of the VM's recent tasks.

use super::ProxmoxView;
use crate::proxmox::endpoints::operate::{PendingItem, TaskEntry};
use crate::proxmox::types::{RebootRequest, ShutdownRequest};
use crate::proxmox::{Error, Upid};

impl ProxmoxView {
    /// Shuts VM `vmid` down (ACPI or the guest agent), stopping it hard after `timeout_secs`
    /// (`forceStop`): the `qmshutdown` task.
    pub async fn shutdown(&self, node: &str, vmid: u32, timeout_secs: u64) -> Result<Upid, Error> {
        let req = ShutdownRequest {
            timeout: Some(timeout_secs),
            force_stop: Some(true),
        };
        let result = self.client.shutdown_vm(node, vmid, &req).await;
        self.sent_vm_task(vmid, result)
    }

    /// Reboots VM `vmid` (a shutdown and a start; applies pending changes): the `qmreboot` task.
    pub async fn reboot(&self, node: &str, vmid: u32, timeout_secs: u64) -> Result<Upid, Error> {
        let req = RebootRequest {
            timeout: Some(timeout_secs),
        };
        let upid = self.client.reboot_vm(node, vmid, &req).await?;
        self.forget_config(vmid);
        self.started(upid.as_str(), vmid);
        Ok(upid)
    }

    /// Pauses VM `vmid` (QEMU pause): the `qmpause` task.
    pub async fn pause(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        let upid = self.client.suspend_vm(node, vmid).await?;
        self.started(upid.as_str(), vmid);
        Ok(upid)
    }

    /// The config keys of VM `vmid` whose changes Proxmox keeps pending until the next restart.
    pub async fn pending(&self, node: &str, vmid: u32) -> Result<Vec<String>, Error> {
        let items: Vec<PendingItem> = self.client.vm_pending(node, vmid).await?;
        Ok(items
            .into_iter()
            .filter(PendingItem::is_pending)
            .map(|i| i.key)
            .collect())
    }

    /// The most recent tasks of VM `vmid` on `node`, newest first.
    pub async fn recent_tasks(&self, node: &str, vmid: u32) -> Result<Vec<TaskEntry>, Error> {
        self.client.vm_tasks(node, vmid, 10).await
    }
}
