//! VM snapshots: list, create, delete, rollback, config — the tree of snapshots with their
//! parents, the VM's lock while a snapshot task runs, and the memory of a running VM.

use serde_json::{Value, json};

use super::config::{conf_missing, find_missing};
use super::qemu::{Tk, start_task};
use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::Params;
use crate::state::{Cluster, PowerState, Snapshot, Vm};
use crate::tasks::now_epoch;

/// Config keys a snapshot does not copy (`PVE::AbstractConfig::__snapshot_copy_config`).
fn copied(key: &str) -> bool {
    !matches!(
        key,
        "snapshots" | "snapstate" | "snaptime" | "vmstate" | "lock" | "digest" | "description"
    ) && crate::propstr::family(key) != Some("unused")
}

/// `GET .../snapshot`: every snapshot (with `snapstate` while one is being taken or deleted)
/// and `current`, whose parent is the config's `parent`.
pub fn list(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    ctx.state.with(|c| {
        let vm = c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        let mut items: Vec<Value> = vm
            .snapshots
            .iter()
            .map(|s| {
                let mut v = json!({"name": s.name, "description": s.description, "snaptime": s.snaptime, "vmstate": if s.vmstate { 1 } else { 0 }});
                if let Some(obj) = v.as_object_mut() {
                    if let Some(parent) = &s.parent {
                        obj.insert("parent".into(), json!(parent));
                    }
                    if let Some(state) = &s.snapstate {
                        obj.insert("snapstate".into(), json!(state));
                    }
                }
                v
            })
            .collect();
        let mut current = json!({"name": "current", "description": "You are here!", "digest": vm.digest(), "running": if vm.is_running() { 1 } else { 0 }});
        if let (Some(obj), Some(parent)) = (current.as_object_mut(), vm.config.get("parent")) {
            obj.insert("parent".into(), json!(parent));
        }
        items.push(current);
        Ok(Reply::data(Value::Array(items)))
    })
}

/// What `__snapshot_prepare` refuses (the task fails with it, nothing changed).
fn prepare_refusal(vm: &Vm, name: &str) -> Option<String> {
    if vm.is_template() {
        return Some("you can't take a snapshot if it's a template".into());
    }
    if let Err(e) = vm.check_lock() {
        return Some(e);
    }
    vm.snapshots
        .iter()
        .any(|s| s.name == name)
        .then(|| format!("snapshot name '{name}' already used"))
}

/// `POST .../snapshot` (`qmsnapshot`). As `snapshot_create` does, the worker first locks the VM
/// (`lock: snapshot`) and writes the snapshot with `snapstate: prepare` — the memory only of a
/// running VM (`vmstate` of a stopped one is ignored) — and at the end clears both and makes it
/// the current state's `parent`. A failed task removes what it made.
pub fn create(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let name = p.str("snapname").unwrap_or_default();
    if name == "current" || name.eq_ignore_ascii_case("pending") {
        return Err(ApiError::server(format!(
            "unable to use snapshot name '{name}' (reserved name)"
        )));
    }
    let description = p.str("description").unwrap_or_default();
    let vmstate = p.bool("vmstate").unwrap_or(false);
    ctx.state.with(|c| {
        let vm = c
            .vm_on_mut(&node, vmid)
            .ok_or_else(|| conf_missing(&node, vmid))?;
        let refusal = prepare_refusal(vm, &name);
        if refusal.is_none() {
            let config = vm
                .config
                .iter()
                .filter(|(k, _)| copied(k))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect();
            let snap = Snapshot {
                name: name.clone(),
                description,
                snaptime: now_epoch(),
                vmstate: vmstate && vm.is_running(),
                parent: vm.config.get("parent").cloned(),
                config,
                snapstate: Some("prepare".into()),
                power: vm.power,
            };
            vm.snapshots.push(snap);
            vm.config.insert("lock".into(), "snapshot".into());
            vm.touch();
        }
        let (n, n_rb, name_rb) = (node.clone(), node.clone(), name.clone());
        let upid = start_task(
            ctx,
            c,
            Tk {
                node: &node,
                kind: "qmsnapshot",
                id: vmid.to_string(),
                latency: "qmsnapshot",
                log: Vec::new(),
            },
            Box::new(move |c: &mut Cluster| {
                if let Some(e) = refusal {
                    return Err(e);
                }
                let vm = c.vm_on_mut(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                if vm.lock() != Some("snapshot") {
                    return Err("missing snapshot lock".into());
                }
                let snap = vm
                    .snapshots
                    .iter_mut()
                    .find(|s| s.name == name)
                    .ok_or_else(|| format!("snapshot '{name}' does not exist"))?;
                snap.snapstate = None;
                vm.config.remove("lock");
                vm.config.insert("parent".into(), name.clone());
                vm.touch();
                Ok(vec![format!("snapshotting '{name}'")])
            }),
            Some(Box::new(move |c: &mut Cluster| {
                if let Some(vm) = c.vm_on_mut(&n_rb, vmid)
                    && vm.lock() == Some("snapshot")
                {
                    vm.snapshots
                        .retain(|s| s.name != name_rb || s.snapstate.is_none());
                    vm.config.remove("lock");
                    vm.touch();
                }
            })),
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// `DELETE .../snapshot/{snapname}` (`qmdelsnapshot`): the worker locks the VM
/// (`snapshot-delete`) and marks the snapshot `snapstate: delete`; at the end the snapshot goes,
/// its children (and the current state) get its parent, and the lock is cleared.
pub fn delete(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let name = p.str("snapname").unwrap_or_default();
    ctx.state.with(|c| {
        let vm = c
            .vm_on_mut(&node, vmid)
            .ok_or_else(|| conf_missing(&node, vmid))?;
        let refusal = if !vm.snapshots.iter().any(|s| s.name == name) {
            Some(format!("snapshot '{name}' does not exist"))
        } else if let Err(e) = vm.check_lock() {
            Some(e)
        } else if vm.is_template() {
            Some("you can't delete a snapshot if vm is a template".into())
        } else {
            None
        };
        if refusal.is_none() {
            vm.config.insert("lock".into(), "snapshot-delete".into());
            if let Some(s) = vm.snapshots.iter_mut().find(|s| s.name == name) {
                s.snapstate = Some("delete".into());
            }
            vm.touch();
        }
        let n = node.clone();
        let upid = start_task(
            ctx,
            c,
            Tk {
                node: &node,
                kind: "qmdelsnapshot",
                id: vmid.to_string(),
                latency: "qmdelsnapshot",
                log: Vec::new(),
            },
            Box::new(move |c: &mut Cluster| {
                if let Some(e) = refusal {
                    return Err(e);
                }
                let vm = c.vm_on_mut(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                let pos = vm
                    .snapshots
                    .iter()
                    .position(|s| s.name == name)
                    .ok_or_else(|| format!("snapshot '{name}' does not exist"))?;
                let removed = vm.snapshots.remove(pos);
                for s in vm.snapshots.iter_mut() {
                    if s.parent.as_deref() == Some(name.as_str()) {
                        s.parent = removed.parent.clone();
                    }
                }
                if vm.config.get("parent") == Some(&name) {
                    match &removed.parent {
                        Some(p) => vm.config.insert("parent".into(), p.clone()),
                        None => vm.config.remove("parent"),
                    };
                }
                vm.config.remove("lock");
                vm.touch();
                Ok(Vec::new())
            }),
            None,
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// `POST .../snapshot/{snapname}/rollback` (`qmrollback`): as `snapshot_rollback` does, the
/// worker stops the VM and locks it (`rollback`); at the end the config is the snapshot's (the
/// description and unused disks kept, pending changes gone) with the snapshot as `parent`, the
/// lock is cleared, and the VM runs again when the snapshot holds its memory (it resumes where
/// it was) or `start` asks for it.
pub fn rollback(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let name = p.str("snapname").unwrap_or_default();
    let start = p.bool("start").unwrap_or(false);
    ctx.state.with(|c| {
        // The worker starts the VM itself: `start` needs VM.PowerMgmt up front.
        if start {
            c.check(&ctx.user, &format!("/vms/{vmid}"), &["VM.PowerMgmt"])?;
        }
        let vm = c
            .vm_on_mut(&node, vmid)
            .ok_or_else(|| conf_missing(&node, vmid))?;
        let refusal = if vm.is_template() {
            Some("you can't rollback if vm is a template".to_owned())
        } else {
            match vm.snapshots.iter().find(|s| s.name == name) {
                None => Some(format!("snapshot '{name}' does not exist")),
                Some(s) if s.snapstate.is_some() => Some(format!(
                    "unable to rollback to incomplete snapshot (snapstate = {})",
                    s.snapstate.clone().unwrap_or_default()
                )),
                Some(_) => vm.check_lock().err(),
            }
        };
        if refusal.is_none() {
            vm.set_power(PowerState::Stopped);
            vm.config.insert("lock".into(), "rollback".into());
            vm.touch();
        }
        let n = node.clone();
        let upid = start_task(
            ctx,
            c,
            Tk {
                node: &node,
                kind: "qmrollback",
                id: vmid.to_string(),
                latency: "qmrollback",
                log: Vec::new(),
            },
            Box::new(move |c: &mut Cluster| {
                if let Some(e) = refusal {
                    return Err(e);
                }
                let vm = c.vm_on_mut(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                if vm.lock() != Some("rollback") {
                    return Err("got wrong lock".into());
                }
                let snap = vm
                    .snapshots
                    .iter()
                    .find(|s| s.name == name)
                    .cloned()
                    .ok_or_else(|| format!("snapshot '{name}' does not exist"))?;
                let mut config: std::collections::BTreeMap<String, String> = vm
                    .config
                    .iter()
                    .filter(|(k, _)| *k == "description" || crate::propstr::family(k) == Some("unused"))
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect();
                config.extend(snap.config.clone());
                config.insert("parent".into(), name.clone());
                vm.config = config;
                vm.pending.clear();
                vm.pending_delete.clear();
                vm.touch();
                if snap.vmstate {
                    vm.set_power(snap.power);
                } else if start {
                    vm.set_power(PowerState::Running);
                }
                Ok(Vec::new())
            }),
            None,
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// `GET .../snapshot/{snapname}/config`.
pub fn config(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let name = p.str("snapname").unwrap_or_default();
    ctx.state.with(|c| {
        let vm = c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        let s = vm
            .snapshots
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| ApiError::server(format!("snapshot '{name}' does not exist")))?;
        let mut out = serde_json::Map::new();
        for (k, v) in &s.config {
            out.insert(k.clone(), Vm::typed_value(k, v));
        }
        Ok(Reply::data(Value::Object(out)))
    })
}
