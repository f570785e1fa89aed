//! Helpers for the snapshot, restore and clone tests: creating the objects, waiting on them, and
//! what pve-sim holds.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;
use std::time::Duration;

use capmox_api::vm::{OperationPhase, ProxmoxVMClone, ProxmoxVMRestore, ProxmoxVMSnapshot};
use kube::Resource;
use kube::api::{Api, PostParams};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use super::{Harness, NS};

impl Harness {
    pub fn snaps(&self) -> Api<ProxmoxVMSnapshot> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn restores(&self) -> Api<ProxmoxVMRestore> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn clones(&self) -> Api<ProxmoxVMClone> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates an object of `kind` named `name` with `spec` (`Err`: the API server's refusal).
    pub async fn create_op<K>(&self, kind: &str, name: &str, spec: Value) -> Result<K, kube::Error>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
            + Clone
            + Debug
            + Serialize
            + DeserializeOwned,
    {
        let obj: K = serde_json::from_value(json!({
            "apiVersion": capmox_api::vm::API_VERSION, "kind": kind,
            "metadata": {"name": name, "namespace": NS}, "spec": spec
        }))
        .unwrap();
        Api::<K>::namespaced(self.client.clone(), NS)
            .create(&PostParams::default(), &obj)
            .await
    }

    /// Waits until the object `name` of `api` satisfies `pred`.
    pub async fn wait_op<K>(
        &self,
        api: &Api<K>,
        name: &str,
        secs: u64,
        what: &str,
        pred: impl Fn(&K) -> bool,
    ) -> K
    where
        K: Resource<DynamicType = ()> + Clone + Debug + DeserializeOwned,
    {
        let last = std::sync::Mutex::new(None::<K>);
        testenv::wait::wait_for_explained(
            secs,
            Duration::from_millis(50),
            &format!("{name}: {what}"),
            || async {
                let o = api.get_opt(name).await.ok().flatten()?;
                let ok = pred(&o);
                *last.lock().unwrap() = Some(o.clone());
                ok.then_some(o)
            },
            || async { format!("last: {:?}", last.lock().unwrap()) },
        )
        .await
    }

    /// Waits until the snapshot `name` is in `phase`.
    pub async fn snap_phase(&self, name: &str, phase: OperationPhase) -> ProxmoxVMSnapshot {
        self.wait_op(&self.snaps(), name, 60, &format!("phase {phase:?}"), |s| {
            s.status.as_ref().and_then(|s| s.phase) == Some(phase)
        })
        .await
    }

    /// Waits until the restore `name` is complete or failed.
    pub async fn restore_done(&self, name: &str) -> ProxmoxVMRestore {
        self.wait_op(&self.restores(), name, 60, "complete or failed", |r| {
            r.status
                .as_ref()
                .is_some_and(|s| s.complete == Some(true) || s.failed == Some(true))
        })
        .await
    }

    /// Waits until the clone `name` is in `phase`.
    pub async fn clone_phase(&self, name: &str, phase: OperationPhase) -> ProxmoxVMClone {
        self.wait_op(&self.clones(), name, 90, &format!("phase {phase:?}"), |c| {
            c.status.as_ref().and_then(|s| s.phase) == Some(phase)
        })
        .await
    }

    /// The names of VM `vmid`'s snapshots in pve-sim.
    pub fn proxmox_snapshots(&self, vmid: u32) -> Vec<String> {
        self.sim.state().with(|c| {
            c.vms
                .get(&vmid)
                .map(|v| v.snapshots.iter().map(|s| s.name.clone()).collect())
                .unwrap_or_default()
        })
    }

    /// A config value of VM `vmid` in pve-sim.
    pub fn proxmox_config(&self, vmid: u32, key: &str) -> Option<String> {
        self.sim
            .state()
            .with(|c| c.vms.get(&vmid).and_then(|v| v.config.get(key).cloned()))
    }

    /// The MACs of VM `vmid`'s NICs in pve-sim.
    pub fn macs(&self, vmid: u32) -> Vec<String> {
        self.sim.state().with(|c| {
            let Some(vm) = c.vms.get(&vmid) else {
                return Vec::new();
            };
            vm.config
                .iter()
                .filter(|(k, _)| k.starts_with("net"))
                .filter_map(|(_, v)| {
                    v.split(',')
                        .find_map(|p| p.split_once('=').map(|(_, m)| m.to_owned()))
                        .filter(|m| m.len() == 17)
                })
                .collect()
        })
    }
}

/// The `(status, reason, message)` of condition `type_` in `conditions`.
pub fn cond(
    conditions: Option<&Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>>,
    type_: &str,
) -> Option<(String, String, String)> {
    conditions?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.reason.clone(), c.message.clone()))
}
