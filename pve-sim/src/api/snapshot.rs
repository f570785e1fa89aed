//! VM snapshots: list, create, delete, config.

use serde_json::{Value, json};

use super::config::{conf_missing, find_missing};
use super::qemu::{Tk, start_task};
use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::Params;
use crate::state::{Cluster, Snapshot, Vm};
use crate::tasks::now_epoch;

/// `GET .../snapshot`.
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
                if let (Some(obj), Some(parent)) = (v.as_object_mut(), &s.parent) {
                    obj.insert("parent".into(), json!(parent));
                }
                v
            })
            .collect();
        let mut current = json!({"name": "current", "description": "You are here!", "digest": vm.digest(), "running": if vm.is_running() { 1 } else { 0 }});
        if let (Some(obj), Some(last)) = (current.as_object_mut(), vm.snapshots.last()) {
            obj.insert("parent".into(), json!(last.name));
        }
        items.push(current);
        Ok(Reply::data(Value::Array(items)))
    })
}

/// `POST .../snapshot`.
pub fn create(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let name = p.str("snapname").unwrap_or_default();
    if name == "current" || name == "pending" {
        return Err(ApiError::server(format!("invalid snapshot name '{name}'")));
    }
    let description = p.str("description").unwrap_or_default();
    let vmstate = p.bool("vmstate").unwrap_or(false);
    ctx.state.with(|c| {
        c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        let n = node.clone();
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
                let vm = c.vm_on_mut(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                vm.check_lock()?;
                if vm.is_template() {
                    return Err("you can't take a snapshot if it's a template".into());
                }
                if vm.snapshots.iter().any(|s| s.name == name) {
                    return Err(format!("snapshot name '{name}' already used"));
                }
                let parent = vm.snapshots.last().map(|s| s.name.clone());
                let config = vm.config.clone();
                vm.snapshots.push(Snapshot {
                    name: name.clone(),
                    description,
                    snaptime: now_epoch(),
                    vmstate,
                    parent,
                    config,
                });
                vm.touch();
                Ok(vec![format!("snapshotting '{name}'")])
            }),
            None,
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// `DELETE .../snapshot/{snapname}`.
pub fn delete(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let name = p.str("snapname").unwrap_or_default();
    ctx.state.with(|c| {
        c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
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
                let vm = c.vm_on_mut(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                vm.check_lock()?;
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
                vm.touch();
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
