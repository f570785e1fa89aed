//! `/cluster/ha/resources`, `/cluster/ha/groups` and `/cluster/mapping/pci`.

use crate::proxmox::error::Error;
use crate::proxmox::path::ApiPath;
use crate::proxmox::types::{HaGroup, HaResource, HaResourceRequest, PciMapping};
use crate::proxmox::{Client, to_body};

fn resource_path(sid: &str) -> ApiPath {
    ApiPath::root().lit("cluster/ha/resources").param("sid", sid)
}

impl Client {
    /// `GET /cluster/ha/resources?type=vm`.
    pub async fn ha_resources(&self) -> Result<Vec<HaResource>, Error> {
        self.get(
            &ApiPath::root().lit("cluster/ha/resources"),
            &[("type".to_owned(), "vm".to_owned())],
        )
        .await
    }

    /// `GET /cluster/mapping/pci`: the cluster's PCI resource mappings.
    pub async fn pci_mappings(&self) -> Result<Vec<PciMapping>, Error> {
        self.get(&ApiPath::root().lit("cluster/mapping/pci"), &[]).await
    }

    /// `GET /cluster/ha/groups`.
    pub async fn ha_groups(&self) -> Result<Vec<HaGroup>, Error> {
        self.get(&ApiPath::root().lit("cluster/ha/groups"), &[]).await
    }

    /// `POST /cluster/ha/resources` (`req.sid` required). An existing resource is
    /// [`Error::AlreadyExists`] (`resource ID 'vm:N' already defined`).
    pub async fn create_ha_resource(&self, req: &HaResourceRequest) -> Result<(), Error> {
        let _: serde_json::Value = self
            .post(&ApiPath::root().lit("cluster/ha/resources"), to_body(req)?)
            .await?;
        Ok(())
    }

    /// `PUT /cluster/ha/resources/{sid}` (`req.sid` is ignored). A missing resource is
    /// [`Error::NotFound`].
    pub async fn update_ha_resource(&self, sid: &str, req: &HaResourceRequest) -> Result<(), Error> {
        let mut body = to_body(req)?;
        if let Some(m) = body.as_object_mut() {
            m.remove("sid");
        }
        let _: serde_json::Value = self.put(&resource_path(sid), body).await?;
        Ok(())
    }

    /// `DELETE /cluster/ha/resources/{sid}`. A resource that is not there is [`Error::NotFound`].
    pub async fn delete_ha_resource(&self, sid: &str) -> Result<(), Error> {
        let _: serde_json::Value = self.delete(&resource_path(sid), &[]).await?;
        Ok(())
    }
}
