//! VM status, config, clone, resize and delete.

use super::{opt_upid, upid};
use crate::proxmox::error::Error;
use crate::proxmox::path::ApiPath;
use crate::proxmox::task::Upid;
use crate::proxmox::types::{CloneRequest, ConfigUpdate, DeleteVmOptions, ResizeRequest, VmConfig, VmStatus};
use crate::proxmox::{Client, to_body, to_query};

impl Client {
    /// `GET /nodes/{node}/qemu/{vmid}/status/current`.
    pub async fn vm_status(&self, node: &str, vmid: u32) -> Result<VmStatus, Error> {
        self.get(&ApiPath::vm(node, vmid).lit("status/current"), &[])
            .await
    }

    /// `GET /nodes/{node}/qemu/{vmid}/config`.
    pub async fn vm_config(&self, node: &str, vmid: u32) -> Result<VmConfig, Error> {
        self.get(&ApiPath::vm(node, vmid).lit("config"), &[]).await
    }

    /// `POST /nodes/{node}/qemu/{vmid}/clone`; the task's id is the source VMID.
    pub async fn clone_vm(&self, node: &str, vmid: u32, req: &CloneRequest) -> Result<Upid, Error> {
        upid(
            self.post(&ApiPath::vm(node, vmid).lit("clone"), to_body(req)?)
                .await?,
        )
    }

    /// `POST /nodes/{node}/qemu/{vmid}/config` (asynchronous update, returns the `qmconfig` task).
    pub async fn update_vm_config(
        &self,
        node: &str,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<Option<Upid>, Error> {
        if update.is_empty() {
            return Err(Error::Invalid {
                what: "config update",
                message: "no options specified".into(),
            });
        }
        opt_upid(
            self.post(&ApiPath::vm(node, vmid).lit("config"), to_body(update)?)
                .await?,
        )
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/config` (synchronous update).
    pub async fn update_vm_config_sync(
        &self,
        node: &str,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<(), Error> {
        if update.is_empty() {
            return Err(Error::Invalid {
                what: "config update",
                message: "no options specified".into(),
            });
        }
        let _: serde_json::Value = self
            .put(&ApiPath::vm(node, vmid).lit("config"), to_body(update)?)
            .await?;
        Ok(())
    }

    /// `PUT /nodes/{node}/qemu/{vmid}/resize` (a `resize` task in PVE 8).
    pub async fn resize_disk(
        &self,
        node: &str,
        vmid: u32,
        req: &ResizeRequest,
    ) -> Result<Option<Upid>, Error> {
        opt_upid(
            self.put(&ApiPath::vm(node, vmid).lit("resize"), to_body(req)?)
                .await?,
        )
    }

    /// `POST /nodes/{node}/qemu`: creates VM `vmid` with `config` (disks as `<storage>:<GiB>` or
    /// `<storage>:0,import-from=<volid>`); returns the `qmcreate` task.
    pub async fn create_vm(&self, node: &str, vmid: u32, config: &ConfigUpdate) -> Result<Upid, Error> {
        let mut body = to_body(config)?;
        if let serde_json::Value::Object(m) = &mut body {
            m.insert("vmid".to_owned(), vmid.into());
        }
        upid(self.post(&ApiPath::node(node).lit("qemu"), body).await?)
    }

    /// `POST /nodes/{node}/qemu/{vmid}/template`: converts the stopped VM into a template
    /// (`qmtemplate`).
    pub async fn convert_to_template(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        upid(
            self.post(
                &ApiPath::vm(node, vmid).lit("template"),
                serde_json::Value::Object(serde_json::Map::new()),
            )
            .await?,
        )
    }

    /// `DELETE /nodes/{node}/qemu/{vmid}` with options in the query string.
    pub async fn delete_vm(&self, node: &str, vmid: u32, opts: &DeleteVmOptions) -> Result<Upid, Error> {
        upid(self.delete(&ApiPath::vm(node, vmid), &to_query(opts)?).await?)
    }
}
