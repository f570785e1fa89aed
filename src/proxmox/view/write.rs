//! Every Proxmox write of the VM lifecycle, through the view: each records by itself what it
//! makes stale (the shared list after a clone, start, stop or destroy; a storage listing after an
//! ISO upload or deletion; the cached config after a failed or unpredictable config write) or
//! predictable (the config after a write whose result is known; the tags laid over older lists),
//! and remembers the task it started. Callers get the client's own error to classify.

use bytes::Bytes;

use super::writes::WriteKind;
use super::{CachedConfig, ProxmoxView, lock};
use crate::proxmox::types::{
    CloneRequest, ConfigUpdate, DeleteVmOptions, HaResourceRequest, HaRuleCreate, HaRuleUpdate, NetDevice,
    ResizeRequest, StartRequest, StopRequest, VmConfig, is_disk_key,
};
use crate::proxmox::{Error, ErrorClass, Upid, lenient};

/// Where a seed ISO lives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IsoLocation {
    /// Node the storage was listed on.
    pub node: String,
    /// Storage ID.
    pub storage: String,
    /// Volume ID (`<storage>:iso/<file>`).
    pub volid: String,
}

impl ProxmoxView {
    /// Clones template `template` on `node` into `req.newid` (the clone task).
    pub async fn clone_vm(&self, node: &str, template: u32, req: &CloneRequest) -> Result<Upid, Error> {
        let vmid = req.newid;
        let result = self.client.clone_vm(node, template, req).await;
        // Whatever the answer, the VMID may exist now (an answer can be lost).
        self.forget_config(vmid);
        self.record(vmid, WriteKind::Vm);
        if let Ok(upid) = &result {
            lock(&self.cloned).insert(vmid);
            self.task_started(upid.as_str());
        }
        result
    }

    /// Writes `update` to VM `vmid`'s config asynchronously (`POST …/config`: a `qmconfig` task
    /// when Proxmox runs one). The cached config follows when the result is predictable; after a
    /// failure (the write may have happened with its answer lost) it is read again.
    pub async fn configure(
        &self,
        node: &str,
        vmid: u32,
        update: &ConfigUpdate,
    ) -> Result<Option<Upid>, Error> {
        match self.client.update_vm_config(node, vmid, update).await {
            Ok(upid) => {
                self.config_updated(vmid, update);
                if let Some(u) = &upid {
                    self.started(u.as_str(), vmid);
                }
                Ok(upid)
            }
            Err(e) => {
                self.forget_config(vmid);
                Err(e)
            }
        }
    }

    /// Writes `update` to VM `vmid`'s config synchronously (`PUT …/config`).
    pub async fn configure_now(&self, node: &str, vmid: u32, update: &ConfigUpdate) -> Result<(), Error> {
        match self.client.update_vm_config_sync(node, vmid, update).await {
            Ok(()) => {
                self.config_updated(vmid, update);
                Ok(())
            }
            Err(e) => {
                self.forget_config(vmid);
                Err(e)
            }
        }
    }

    /// Resizes a disk of VM `vmid` (a `resize` task when Proxmox runs one).
    pub async fn resize(&self, node: &str, vmid: u32, req: &ResizeRequest) -> Result<Option<Upid>, Error> {
        let result = self.client.resize_disk(node, vmid, req).await;
        self.forget_config(vmid);
        if let Ok(Some(u)) = &result {
            self.started(u.as_str(), vmid);
        }
        result
    }

    /// Starts VM `vmid` (the start task).
    pub async fn start(&self, node: &str, vmid: u32, req: &StartRequest) -> Result<Upid, Error> {
        let upid = self.client.start_vm(node, vmid, req).await?;
        self.started(upid.as_str(), vmid);
        Ok(upid)
    }

    /// Resumes the paused VM `vmid` (the resume task).
    pub async fn resume(&self, node: &str, vmid: u32) -> Result<Upid, Error> {
        let upid = self.client.resume_vm(node, vmid).await?;
        self.started(upid.as_str(), vmid);
        Ok(upid)
    }

    /// Stops VM `vmid` (the stop task).
    pub async fn stop(&self, node: &str, vmid: u32, req: &StopRequest) -> Result<Upid, Error> {
        let result = self.client.stop_vm(node, vmid, req).await;
        self.sent_vm_task(vmid, result)
    }

    /// Destroys VM `vmid` (the destroy task).
    pub async fn destroy(&self, node: &str, vmid: u32, opts: &DeleteVmOptions) -> Result<Upid, Error> {
        let result = self.client.delete_vm(node, vmid, opts).await;
        self.sent_vm_task(vmid, result)
    }

    /// Uploads `image` as VM `vmid`'s seed ISO `file` to `storage` of `node` (the import task);
    /// where it goes is remembered ([`ProxmoxView::iso_at`]).
    pub async fn upload_iso(
        &self,
        node: &str,
        storage: &str,
        vmid: u32,
        file: &str,
        image: Vec<u8>,
    ) -> Result<Upid, Error> {
        let upid = self
            .client
            .upload_iso(node, storage, file, Bytes::from(image))
            .await?;
        self.started(upid.as_str(), vmid);
        self.iso_seen_at(vmid, node, storage);
        Ok(upid)
    }

    /// Starts deleting VM `vmid`'s seed ISO at `iso`: `Some(task)` (remembered until
    /// [`ProxmoxView::iso_deletion_done`]), `None` when it is gone already.
    pub async fn delete_iso(&self, vmid: u32, iso: &IsoLocation) -> Result<Option<Upid>, Error> {
        let result = self
            .client
            .delete_storage_volume(&iso.node, &iso.storage, &iso.volid)
            .await;
        self.record(vmid, WriteKind::Storage);
        match result {
            Ok(Some(upid)) => {
                self.started(upid.as_str(), vmid);
                lock(&self.iso_deletions).insert(vmid, upid.to_string());
                Ok(Some(upid))
            }
            Ok(None) => Ok(None),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates or updates the HA resource of VM `vmid`: an update when it is known to exist
    /// (`exists`), else a create that turns into an update when Proxmox has it already (and the
    /// other way round). The VM's `hastate` in the shared list changes.
    pub async fn put_ha(
        &self,
        vmid: u32,
        sid: &str,
        create: &HaResourceRequest,
        update: &HaResourceRequest,
        exists: bool,
    ) -> Result<(), Error> {
        let c = &self.client;
        let result = if exists {
            match c.update_ha_resource(sid, update).await {
                Err(e) if e.class() == ErrorClass::NotFound && !is_group_error(&e) => {
                    c.create_ha_resource(create).await
                }
                other => other,
            }
        } else {
            match c.create_ha_resource(create).await {
                Err(e) if e.class() == ErrorClass::AlreadyExists => c.update_ha_resource(sid, update).await,
                other => other,
            }
        };
        self.record(vmid, WriteKind::Vm);
        result
    }

    /// Removes the HA resource `sid` of VM `vmid`; one that is not there counts as removed.
    pub async fn delete_ha(&self, vmid: u32, sid: &str) -> Result<(), Error> {
        let result = match self.client.delete_ha_resource(sid).await {
            Err(e) if e.is_not_found() => Ok(()),
            other => other,
        };
        self.record(vmid, WriteKind::Vm);
        result
    }

    /// Changes the HA rule `rule` (PVE 9). Rules change nothing the shared list shows.
    pub async fn update_ha_rule(&self, rule: &str, update: &HaRuleUpdate) -> Result<(), Error> {
        self.client.update_ha_rule(rule, update).await
    }

    /// Creates an HA rule (PVE 9).
    pub async fn create_ha_rule(&self, rule: &HaRuleCreate) -> Result<(), Error> {
        self.client.create_ha_rule(rule).await
    }

    /// Deletes the HA rule `rule` (PVE 9).
    pub async fn delete_ha_rule(&self, rule: &str) -> Result<(), Error> {
        self.client.delete_ha_rule(rule).await
    }

    /// This process changed VM `vmid`'s config with `update` (successfully): the tags are laid
    /// over older lists, and the cached config follows when the result is predictable, else it is
    /// read again next time.
    fn config_updated(&self, vmid: u32, update: &ConfigUpdate) {
        lock(&self.writes).config(vmid, update);
        let mut configs = lock(&self.configs);
        match configs.get(&vmid).and_then(|c| applied(&c.config, update)) {
            Some(config) => {
                configs.insert(
                    vmid,
                    CachedConfig {
                        config: std::sync::Arc::new(config),
                        at: std::time::Instant::now(),
                    },
                );
            }
            None => {
                configs.remove(&vmid);
            }
        }
    }
}

/// Whether PVE refused the HA group (`HA group 'x' does not exist`), not the resource.
fn is_group_error(e: &Error) -> bool {
    e.message().to_ascii_lowercase().contains("group")
}

/// `config` after `update`, when Proxmox's result is predictable (no NIC without a MAC, no disk
/// allocation); `None` otherwise.
pub fn applied(config: &VmConfig, update: &ConfigUpdate) -> Option<VmConfig> {
    let mut raw = config.raw.clone();
    for (k, v) in update.params() {
        let text = lenient::value_to_string(v)?;
        match k.as_str() {
            "digest" => {}
            "delete" => {
                for key in text.split(',').map(str::trim) {
                    raw.remove(key);
                }
            }
            k if k.starts_with("net") => {
                // Proxmox generates a MAC for a NIC sent without one.
                let dev = NetDevice::parse(&text)?;
                dev.mac.as_ref()?;
                raw.insert(k.to_owned(), v.clone());
            }
            k if is_disk_key(k) && !text.contains("media=cdrom") => return None,
            _ => {
                raw.insert(k.clone(), v.clone());
            }
        }
    }
    raw.remove("digest");
    Some(VmConfig::from(raw))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(v: serde_json::Value) -> VmConfig {
        let raw: std::collections::BTreeMap<String, serde_json::Value> = serde_json::from_value(v).unwrap();
        VmConfig::from(raw)
    }

    #[test]
    fn own_updates_apply_when_predictable() {
        let c = config(json!({
            "name": "m", "cores": 1, "sockets": 1, "memory": "2048",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "tags": "a", "digest": "abc",
            "scsi0": "local-lvm:vm-200-disk-0,size=20G"
        }));
        let u = ConfigUpdate::new()
            .cores(2)
            .sockets(2)
            .tags(&["a", "b"])
            .ide0("local:iso/user-data-200.iso,media=cdrom");
        let after = applied(&c, &u).unwrap();
        assert_eq!((after.cores, after.sockets), (Some(2), Some(2)));
        assert_eq!(after.tags, vec!["a", "b"]);
        assert!(after.ide0.as_deref().unwrap().contains("user-data-200"));
        assert_eq!(after.digest, None);
        assert_eq!(
            after.nets.get(&0).and_then(|n| n.mac.clone()).as_deref(),
            Some("BC:24:11:00:00:01")
        );
        let nic = NetDevice::new("virtio", "vmbr1");
        assert!(
            applied(&c, &ConfigUpdate::new().net(1, &nic)).is_none(),
            "a new MAC is unknown"
        );
        assert!(applied(&c, &ConfigUpdate::new().set("scsi1", "local-lvm:10")).is_none());
        let deleted = applied(&c, &ConfigUpdate::new().delete(&["tags"])).unwrap();
        assert!(deleted.tags.is_empty());
    }
}
