//! `/cluster/ha/resources`, `/cluster/ha/groups`, `/cluster/ha/rules` (PVE 9) and `/cluster/mapping/pci`.

use crate::proxmox::error::Error;
use crate::proxmox::path::ApiPath;
use crate::proxmox::types::{
    HaGroup, HaResource, HaResourceRequest, HaRule, HaRuleCreate, HaRuleUpdate, PciMapping,
};
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

    /// `GET /cluster/ha/groups/{group}`: the group, or [`Error::NotFound`] (`no such ha group`).
    pub async fn ha_group(&self, group: &str) -> Result<serde_json::Value, Error> {
        self.get(
            &ApiPath::root().lit("cluster/ha/groups").param("group", group),
            &[],
        )
        .await
    }

    /// `GET /cluster/ha/rules?type=<kind>` (PVE 9): the HA rules of one type.
    pub async fn ha_rules(&self, kind: &str) -> Result<Vec<HaRule>, Error> {
        self.get(
            &ApiPath::root().lit("cluster/ha/rules"),
            &[("type".to_owned(), kind.to_owned())],
        )
        .await
    }

    /// `POST /cluster/ha/rules` (PVE 9).
    pub async fn create_ha_rule(&self, req: &HaRuleCreate) -> Result<(), Error> {
        let _: serde_json::Value = self
            .post(&ApiPath::root().lit("cluster/ha/rules"), to_body(req)?)
            .await?;
        Ok(())
    }

    /// `DELETE /cluster/ha/rules/{rule}` (PVE 9).
    pub async fn delete_ha_rule(&self, rule: &str) -> Result<(), Error> {
        let _: serde_json::Value = self
            .delete(&ApiPath::root().lit("cluster/ha/rules").param("rule", rule), &[])
            .await?;
        Ok(())
    }

    /// `PUT /cluster/ha/rules/{rule}` (PVE 9).
    pub async fn update_ha_rule(&self, rule: &str, req: &HaRuleUpdate) -> Result<(), Error> {
        let _: serde_json::Value = self
            .put(
                &ApiPath::root().lit("cluster/ha/rules").param("rule", rule),
                to_body(req)?,
            )
            .await?;
        Ok(())
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
