//! `/nodes/{node}/qemu/{vmid}/snapshot*`.

use super::upid;
use crate::proxmox::error::Error;
use crate::proxmox::path::ApiPath;
use crate::proxmox::task::Upid;
use crate::proxmox::types::{CreateSnapshotRequest, RollbackRequest, Snapshot};
use crate::proxmox::{Client, to_body};

impl Client {
    /// `GET .../snapshot` (includes the synthetic `current` entry).
    pub async fn snapshots(&self, node: &str, vmid: u32) -> Result<Vec<Snapshot>, Error> {
        self.get(&ApiPath::vm(node, vmid).lit("snapshot"), &[]).await
    }

    /// `POST .../snapshot` (`qmsnapshot`).
    pub async fn create_snapshot(
        &self,
        node: &str,
        vmid: u32,
        req: &CreateSnapshotRequest,
    ) -> Result<Upid, Error> {
        upid(
            self.post(&ApiPath::vm(node, vmid).lit("snapshot"), to_body(req)?)
                .await?,
        )
    }

    /// `DELETE .../snapshot/{snapname}[?force=1]` (`qmdelsnapshot`).
    pub async fn delete_snapshot(
        &self,
        node: &str,
        vmid: u32,
        snapname: &str,
        force: bool,
    ) -> Result<Upid, Error> {
        let q = if force {
            vec![("force".to_owned(), "1".to_owned())]
        } else {
            Vec::new()
        };
        upid(
            self.delete(
                &ApiPath::vm(node, vmid)
                    .lit("snapshot")
                    .param("snapname", snapname),
                &q,
            )
            .await?,
        )
    }

    /// `POST .../snapshot/{snapname}/rollback` (`qmrollback`): the VM is stopped, its disks and
    /// config rolled back; a snapshot with memory resumes it, `start` starts one without.
    pub async fn rollback_snapshot(
        &self,
        node: &str,
        vmid: u32,
        snapname: &str,
        req: &RollbackRequest,
    ) -> Result<Upid, Error> {
        upid(
            self.post(
                &ApiPath::vm(node, vmid)
                    .lit("snapshot")
                    .param("snapname", snapname)
                    .lit("rollback"),
                to_body(req)?,
            )
            .await?,
        )
    }
}
