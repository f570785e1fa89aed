//! What the restore tests share: a ProxmoxMachine's backup and re-creation, the claims and
//! addresses IPAM holds for it, and the Proxmox writes since a point.

use std::collections::BTreeMap;

use capmox_api::capi::ipam_claims::v1beta2::{IPAddress, IPAddressClaim};
use capmox_api::v1alpha2::ProxmoxMachine;
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use serde_json::json;

use super::{Harness, NS, wait_for};

/// Proxmox requests that change something (everything but reads and the guest agent, whose
/// exec reads cloud-init's state) between `before` and now.
pub fn writes_since(h: &Harness, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    h.sim
        .state()
        .request_counts()
        .into_iter()
        .filter(|(k, _)| !k.starts_with("GET ") && !k.contains("/agent/"))
        .filter_map(|(k, v)| {
            let d = v - before.get(&k).copied().unwrap_or(0);
            (d > 0).then_some((k, d))
        })
        .collect()
}

pub fn vmid(pm: &ProxmoxMachine) -> u32 {
    u32::try_from(pm.spec.virtual_machine_id.unwrap()).unwrap()
}

/// The machine's `InternalIP`.
pub fn address(pm: &ProxmoxMachine) -> Option<String> {
    pm.status
        .as_ref()?
        .addresses
        .as_ref()?
        .iter()
        .find(|a| a.type_ == capmox_api::v1alpha2::MachineAddressType::InternalIp)
        .map(|a| a.address.clone())
}

pub fn claims(h: &Harness) -> Api<IPAddressClaim> {
    Api::namespaced(h.client.clone(), NS)
}

/// The controller UID of claim `name`.
pub async fn claim_owner(h: &Harness, name: &str) -> Option<String> {
    let c = claims(h).get_opt(name).await.unwrap()?;
    c.owner_references()
        .iter()
        .find(|o| o.controller == Some(true))
        .map(|o| o.uid.clone())
}

/// The address IPAM gave claim `name`.
pub async fn claimed_address(h: &Harness, name: &str) -> Option<String> {
    let c = claims(h).get_opt(name).await.unwrap()?;
    let a = c.status?.address_ref?.name;
    let addr = Api::<IPAddress>::namespaced(h.client.clone(), NS)
        .get_opt(&a)
        .await
        .unwrap()?;
    Some(addr.spec.address)
}

/// What a backup of a ProxmoxMachine holds: metadata (labels, annotations, owner references,
/// finalizers) and spec — no status, no UID, no resourceVersion.
pub fn backup(pm: &ProxmoxMachine) -> ProxmoxMachine {
    let mut b = ProxmoxMachine::new(&pm.name_any(), pm.spec.clone());
    b.metadata.namespace = pm.namespace();
    b.metadata.labels = pm.metadata.labels.clone();
    b.metadata.annotations = pm.metadata.annotations.clone();
    b.metadata.owner_references = pm.metadata.owner_references.clone();
    b.metadata.finalizers = pm.metadata.finalizers.clone();
    b
}

/// Deletes a ProxmoxMachine the way a restore starts (its finalizers stripped first, so nothing
/// runs its deletion) and waits until it is gone.
pub async fn drop_object(h: &Harness, name: &str) {
    let pms = h.pms();
    pms.patch(
        name,
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    pms.delete(name, &DeleteParams::default()).await.unwrap();
    wait_for(30, &format!("{name} gone"), || {
        let pms = pms.clone();
        async move { pms.get_opt(name).await.unwrap().is_none().then_some(()) }
    })
    .await;
}

/// Re-creates a ProxmoxMachine from its backup (a new UID); returns it.
pub async fn restore(h: &Harness, backup: &ProxmoxMachine) -> ProxmoxMachine {
    h.pms().create(&PostParams::default(), backup).await.unwrap()
}
