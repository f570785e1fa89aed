//! The VM demo's snapshot → change → restore → clone: a snapshot with memory
//! (ProxmoxVMSnapshot), more memory, the restore (ProxmoxVMRestore: the memory back, `SpecDrift`
//! naming it), a linked clone (ProxmoxVMClone: a second VM with a new MAC), then the clone and
//! the snapshot deleted.

use std::fmt::Debug;
use std::io::Write;
use std::time::{Duration, Instant};

use capmox_api::vm::{
    OperationPhase, ProxmoxVMClone, ProxmoxVMRestore, ProxmoxVMSnapshot, ProxmoxVirtualMachine,
};
use kube::Resource;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::DemoError;
use crate::progress::Printer;

pub(crate) fn kube_err(action: String) -> impl FnOnce(kube::Error) -> DemoError {
    move |source| DemoError::Kube { action, source }
}

/// Creates `value` (an object of the namespace `ns`).
pub(crate) async fn create<K>(
    client: &kube::Client,
    ns: &str,
    value: serde_json::Value,
) -> Result<(), DemoError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + Debug
        + serde::Serialize
        + DeserializeOwned,
{
    let obj: K = serde_json::from_value(value)?;
    let name = obj.meta().name.clone().unwrap_or_default();
    Api::<K>::namespaced(client.clone(), ns)
        .create(&PostParams::default(), &obj)
        .await
        .map(|_| ())
        .map_err(kube_err(format!("creating {name}")))
}

/// Polls `name` until `done` holds, for at most `limit`.
pub(crate) async fn until<K>(
    api: &Api<K>,
    name: &str,
    step: &'static str,
    limit: Duration,
    done: impl Fn(&K) -> bool,
) -> Result<K, DemoError>
where
    K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
{
    let deadline = Instant::now() + limit;
    loop {
        let obj = api
            .get_opt(name)
            .await
            .map_err(kube_err(format!("reading {name}")))?;
        if let Some(o) = obj.as_ref().filter(|o| done(o)) {
            return Ok(o.clone());
        }
        if Instant::now() >= deadline {
            return Err(DemoError::Timeout {
                step,
                after: limit,
                detail: format!("{obj:?}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub(crate) fn object(kind: &str, name: &str, ns: &str, spec: serde_json::Value) -> serde_json::Value {
    json!({"apiVersion": capmox_api::vm::API_VERSION, "kind": kind,
        "metadata": {"name": name, "namespace": ns}, "spec": spec})
}

/// Snapshot, change, restore and clone of the running ProxmoxVirtualMachine `vm` (VMID `vmid`).
pub async fn snapshot_restore_clone<W: Write>(
    p: &mut Printer<W>,
    client: &kube::Client,
    sim: &pve_sim::SimServer,
    (ns, vm, vmid): (&str, &str, u32),
) -> Result<(), DemoError> {
    let limit = Duration::from_secs(120);
    let memory = |id: u32| {
        sim.state()
            .with(|c| c.vms.get(&id).and_then(|v| v.config.get("memory").cloned()))
    };
    let snap = format!("{vm}-before");
    p.line(format!(
        "snapshot {snap} with memory (capmox vm snapshot {vm} --memory)"
    ))?;
    let spec = json!({"source": {"name": vm}, "includeMemory": true, "description": "demo"});
    create::<ProxmoxVMSnapshot>(client, ns, object("ProxmoxVMSnapshot", &snap, ns, spec)).await?;
    let snaps: Api<ProxmoxVMSnapshot> = Api::namespaced(client.clone(), ns);
    let s = until(&snaps, &snap, "the snapshot", limit, |s| {
        s.status.as_ref().and_then(|s| s.phase) == Some(OperationPhase::Succeeded)
    })
    .await?;
    let name = s.status.and_then(|s| s.snapshot_name).unwrap_or_default();
    p.line(format!(
        "{snap}: Succeeded (Proxmox snapshot {name} of VM {vmid})"
    ))?;
    p.line("changing the VM: 6144 MiB")?;
    let pvms: Api<ProxmoxVirtualMachine> = Api::namespaced(client.clone(), ns);
    pvms.patch(
        vm,
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"memoryMiB": 6144}})),
    )
    .await
    .map_err(kube_err(format!("patching {vm}")))?;
    until(&pvms, vm, "the change", limit, |_| {
        memory(vmid).as_deref() == Some("6144")
    })
    .await?;
    let restore = format!("{vm}-undo");
    p.line(format!("restoring {snap} (capmox vm restore {vm} {snap})"))?;
    let spec = json!({"target": {"name": vm}, "snapshotName": snap});
    create::<ProxmoxVMRestore>(client, ns, object("ProxmoxVMRestore", &restore, ns, spec)).await?;
    let restores: Api<ProxmoxVMRestore> = Api::namespaced(client.clone(), ns);
    until(&restores, &restore, "the restore", limit, |r| {
        r.status.as_ref().and_then(|s| s.complete) == Some(true)
    })
    .await?;
    let uid = restores
        .get(&restore)
        .await
        .map_err(kube_err(format!("reading {restore}")))?
        .metadata
        .uid;
    let o = until(&pvms, vm, "the restored VM compared with its spec", limit, |o| {
        o.status.as_ref().and_then(|s| s.restored.clone()) == uid
    })
    .await?;
    let drift = o.status.and_then(|s| s.spec_drift).unwrap_or_default().join(", ");
    p.line(format!(
        "{vm}: rolled back, {} MiB, running; SpecDrift: {drift} (kept until the spec changes)",
        memory(vmid).unwrap_or_default()
    ))?;
    let clone = format!("{vm}-copy");
    p.line(format!(
        "linked clone {clone} (capmox vm clone {vm} {clone} --linked)"
    ))?;
    let spec = json!({"source": {"name": vm}, "target": {"name": clone}, "linked": true});
    create::<ProxmoxVMClone>(client, ns, object("ProxmoxVMClone", &clone, ns, spec)).await?;
    let clones: Api<ProxmoxVMClone> = Api::namespaced(client.clone(), ns);
    let c = until(&clones, &clone, "the clone", limit, |c| {
        c.status.as_ref().and_then(|s| s.phase) == Some(OperationPhase::Succeeded)
    })
    .await?;
    let target = c.status.and_then(|s| s.target_vmid).unwrap_or_default();
    p.line(format!("{clone}: Succeeded, a second running VM (VMID {target})"))?;
    for (api, what) in [(&pvms, &clone)] {
        api.delete(what, &Default::default())
            .await
            .map_err(kube_err(format!("deleting {what}")))?;
    }
    snaps
        .delete(&snap, &Default::default())
        .await
        .map_err(kube_err(format!("deleting {snap}")))?;
    let deadline = Instant::now() + limit;
    loop {
        let left = pvms
            .get_opt(&clone)
            .await
            .map_err(kube_err(format!("reading {clone}")))?
            .is_some()
            || snaps
                .get_opt(&snap)
                .await
                .map_err(kube_err(format!("reading {snap}")))?
                .is_some();
        if !left {
            break;
        }
        if Instant::now() >= deadline {
            return Err(DemoError::Timeout {
                step: "the clone's and the snapshot's deletion",
                after: limit,
                detail: String::new(),
            });
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    p.line(format!(
        "deleted {clone} and {snap} (the Proxmox snapshot with it)"
    ))?;
    Ok(())
}
