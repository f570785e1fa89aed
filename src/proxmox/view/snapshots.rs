//! Snapshots through the view: taking, deleting and rolling back to one, each recorded as a write
//! that changes what the shared list shows (the VM is locked while the task runs; a rollback
//! stops the VM and may start it again), and a rollback makes the cached config stale (the VM's
//! config is the snapshot's now). The snapshot listing is read from Proxmox each time (it is
//! small and only read while a snapshot operation waits).

use super::ProxmoxView;
use crate::proxmox::endpoints::operate::TaskEntry;
use crate::proxmox::types::{CreateSnapshotRequest, RollbackRequest, Snapshot};
use crate::proxmox::{Error, Upid};

impl ProxmoxView {
    /// Takes snapshot `req.snapname` of VM `vmid` (the `qmsnapshot` task).
    pub async fn take_snapshot(
        &self,
        node: &str,
        vmid: u32,
        req: &CreateSnapshotRequest,
    ) -> Result<Upid, Error> {
        let result = self.client.create_snapshot(node, vmid, req).await;
        // Whatever the answer, the VM may be locked now (an answer can be lost).
        self.sent_vm_task(vmid, result)
    }

    /// Deletes snapshot `snapname` of VM `vmid` (the `qmdelsnapshot` task).
    pub async fn delete_snapshot(&self, node: &str, vmid: u32, snapname: &str) -> Result<Upid, Error> {
        let result = self.client.delete_snapshot(node, vmid, snapname, false).await;
        self.sent_vm_task(vmid, result)
    }

    /// Rolls VM `vmid` back to snapshot `snapname`, starting it afterwards when `start` (the
    /// `qmrollback` task). The VM's config is read again afterwards.
    pub async fn rollback(&self, node: &str, vmid: u32, snapname: &str, start: bool) -> Result<Upid, Error> {
        let req = RollbackRequest {
            start: start.then_some(true),
        };
        let result = self.client.rollback_snapshot(node, vmid, snapname, &req).await;
        self.forget_config(vmid);
        self.sent_vm_task(vmid, result)
    }

    /// The snapshots of VM `vmid` on `node` (without the synthetic `current` entry), and the
    /// snapshot the VM's current state descends from. `None`: no such VM on that node.
    pub async fn snapshots(
        &self,
        node: &str,
        vmid: u32,
    ) -> Result<Option<(Vec<Snapshot>, Option<String>)>, Error> {
        match self.client.snapshots(node, vmid).await {
            Ok(list) => {
                let current = list
                    .iter()
                    .find(|s| s.is_current())
                    .and_then(|s| s.parent.clone());
                Ok(Some((
                    list.into_iter().filter(|s| !s.is_current()).collect(),
                    current,
                )))
            }
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// The newest task of type `task_type` of VM `vmid` on `node`, leaving out tasks that found
    /// the VM locked (they did nothing): what a rollback whose answer a crash lost is found by.
    pub async fn newest_task(
        &self,
        node: &str,
        vmid: u32,
        task_type: &str,
    ) -> Result<Option<TaskEntry>, Error> {
        let tasks = self.client.vm_tasks(node, vmid, 20).await?;
        Ok(tasks
            .into_iter()
            .filter(|t| t.status.as_deref().is_none_or(|s| !s.contains("is locked")))
            .find(|t| t.task_type == task_type))
    }
}
