//! VM config: `GET/POST/PUT .../config`, `GET .../pending`, and their parameter verification.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use super::specs::CONTROL;
use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::{Params, value_text};
use crate::propstr;
use crate::state::{Cluster, Vm};
use crate::tasks::{self, TaskSpec};

/// `Configuration file 'nodes/<node>/qemu-server/<vmid>.conf' does not exist`.
pub fn conf_missing(node: &str, vmid: u32) -> ApiError {
    ApiError::server(format!(
        "Configuration file 'nodes/{node}/qemu-server/{vmid}.conf' does not exist"
    ))
}

/// `unable to find configuration file for VM <vmid> on node '<node>'`.
pub fn find_missing(node: &str, vmid: u32) -> String {
    format!("unable to find configuration file for VM {vmid} on node '{node}'")
}

/// `GET .../config`.
pub fn config_get(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    if p.has("snapshot") && p.has("current") {
        return Err(ApiError::param(
            "snapshot",
            "option conflicts with option 'current'",
        ));
    }
    ctx.state.with(|c| {
        let vm = c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        if let Some(snap) = p.str("snapshot") {
            let s = vm
                .snapshots
                .iter()
                .find(|s| s.name == snap)
                .ok_or_else(|| ApiError::server(format!("snapshot '{snap}' does not exist")))?;
            let mut out = Map::new();
            for (k, v) in &s.config {
                out.insert(k.clone(), Vm::typed_value(k, v));
            }
            return Ok(Reply::data(Value::Object(out)));
        }
        Ok(Reply::data(vm.config_json(p.bool("current").unwrap_or(false))))
    })
}

/// `GET .../pending`.
pub fn pending(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    ctx.state.with(|c| {
        let vm = c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        let keys: BTreeSet<&String> = vm
            .config
            .keys()
            .chain(vm.pending.keys())
            .chain(vm.pending_delete.iter())
            .collect();
        let items = keys
            .into_iter()
            .map(|k| {
                let mut e = json!({"key": k});
                if let Some(obj) = e.as_object_mut() {
                    if let Some(v) = vm.config.get(k) {
                        obj.insert("value".into(), Vm::typed_value(k, v));
                    }
                    if let Some(v) = vm.pending.get(k) {
                        obj.insert("pending".into(), Vm::typed_value(k, v));
                    }
                    if vm.pending_delete.contains(k) {
                        obj.insert("delete".into(), json!(1));
                    }
                }
                e
            })
            .collect();
        Ok(Reply::data(Value::Array(items)))
    })
}

/// Normalises a value before storing: MACs for nets, allocated disks, tags.
pub(crate) fn normalise(
    c: &mut Cluster,
    node: &str,
    vmid: u32,
    key: &str,
    value: &str,
    config: &BTreeMap<String, String>,
) -> Result<String, ApiError> {
    if key == "tags" {
        return Ok(propstr::normalise_tags(value));
    }
    if propstr::family(key) == Some("net") {
        let props = propstr::parse(value, Some("model")).map_err(|e| ApiError::param(key, e))?;
        let mut model = None;
        let mut mac = None;
        let mut rest = Vec::new();
        for (k, v) in props {
            if propstr::NET_MODELS.contains(&k.as_str()) {
                model = Some(k);
                mac = Some(v);
            } else if k == "model" {
                model = Some(v);
            } else if k == "macaddr" {
                mac = Some(v);
            } else {
                rest.push((k, v));
            }
        }
        let model = model.unwrap_or_else(|| "virtio".into());
        let mac = match mac {
            Some(m) if !m.is_empty() => m.to_uppercase(),
            _ => c.new_mac(),
        };
        rest.sort();
        let mut out = format!("{model}={mac}");
        for (k, v) in rest {
            out.push_str(&format!(",{k}={v}"));
        }
        return Ok(out);
    }
    if key == "efidisk0"
        || key == "tpmstate0"
        || matches!(propstr::family(key), Some("ide" | "sata" | "scsi" | "virtio"))
    {
        let props = propstr::parse(value, Some("file")).map_err(|e| ApiError::param(key, e))?;
        let file = propstr::get(&props, "file").unwrap_or_default().to_string();
        if let Some((storage, vol)) = file.split_once(':') {
            let Some(st) = c.storage_on(node, storage).cloned() else {
                return Err(ApiError::server(format!("storage '{storage}' does not exist")));
            };
            let rest: Vec<String> = props
                .iter()
                .filter(|(k, _)| k != "file" && k != "size")
                .map(|(k, v)| format!("{k}={v}"))
                .collect();
            if vol == "cloudinit" {
                if let Some((other, _)) = config.iter().find(|(k, v)| *k != key && v.contains("-cloudinit")) {
                    return Err(ApiError::server(format!(
                        "{file} - cloud-init drive is already attached at '{other}'"
                    )));
                }
                return Ok(format!("{storage}:vm-{vmid}-cloudinit,media=cdrom"));
            }
            if let Ok(gib) = vol.parse::<f64>() {
                if !st.allows("images") {
                    return Err(ApiError::status(
                        400,
                        format!("storage '{storage}' does not support vm images"),
                    ));
                }
                let used: BTreeSet<String> = config.values().cloned().collect();
                let n = (0..)
                    .find(|i| !used.iter().any(|v| v.contains(&format!("vm-{vmid}-disk-{i}"))))
                    .unwrap_or(0);
                let size = propstr::format_size((gib * (1u64 << 30) as f64) as u64);
                let mut out = format!("{storage}:vm-{vmid}-disk-{n}");
                for r in rest {
                    out.push_str(&format!(",{r}"));
                }
                out.push_str(&format!(",size={size}"));
                return Ok(out);
            }
            if vol.starts_with("iso/") && c.find_volume(node, &file).is_none() {
                return Err(ApiError::server(format!("volume '{file}' does not exist")));
            }
        }
    }
    Ok(value.to_string())
}

/// Applies a config update to a VM (used synchronously by PUT and inside the task for POST).
fn apply_update(
    c: &mut Cluster,
    node: &str,
    vmid: u32,
    changes: &[(String, String)],
    deletes: &[String],
) -> Result<Vec<String>, ApiError> {
    let Some(vm) = c.vm_on(node, vmid) else {
        return Err(conf_missing(node, vmid));
    };
    let running = vm.is_running();
    let mut merged = vm.config.clone();
    let mut log = Vec::new();
    let mut normalised = Vec::new();
    for (k, v) in changes {
        let nv = normalise(c, node, vmid, k, v, &merged)?;
        merged.insert(k.clone(), nv.clone());
        normalised.push((k.clone(), nv));
    }
    for d in deletes {
        if !merged.contains_key(d) {
            log.push(format!("cannot delete '{d}' - not set in current configuration!"));
        }
        merged.remove(d);
    }
    // Deleting a device drops it from the boot order (unless the order is being set now).
    let mut boot_fix = None;
    if !deletes.is_empty()
        && !changes.iter().any(|(k, _)| k == "boot")
        && let Some(boot) = merged.get("boot")
    {
        let devices = propstr::boot_devices(boot);
        if devices.iter().any(|d| deletes.contains(d)) {
            let kept: Vec<String> = devices.into_iter().filter(|d| !deletes.contains(d)).collect();
            let value = format!("order={}", kept.join(";"));
            merged.insert("boot".into(), value.clone());
            boot_fix = Some(value);
        }
    }
    if let Some(boot) = merged.get("boot") {
        for dev in propstr::boot_devices(boot) {
            if !merged.contains_key(&dev) {
                return Err(ApiError::param(
                    "boot",
                    format!("invalid bootorder: device '{dev}' does not exist'"),
                ));
            }
        }
    }
    if let (Some(b), Some(m)) = (merged.get("balloon"), merged.get("memory"))
        && let (Ok(b), Some(m)) = (
            b.parse::<u64>(),
            propstr::to_map(m, Some("current"))
                .get("current")
                .and_then(|x| x.parse::<u64>().ok()),
        )
        && b > m
    {
        return Err(ApiError::server(
            "balloon value too large (must be smaller than assigned memory)",
        ));
    }
    let Some(vm) = c.vm_on_mut(node, vmid) else {
        return Err(conf_missing(node, vmid));
    };
    let volume = |v: &str| propstr::to_map(v, Some("file")).get("file").cloned();
    for (k, v) in &normalised {
        // A disk replaced by another volume no longer holds the OS.
        if vm.os_disks.contains(k) && vm.config.get(k).and_then(|old| volume(old)) != volume(v) {
            vm.os_disks.remove(k);
        }
        // PVE keeps a replaced disk volume as `unusedN` (it is destroyed with the VM).
        if let Some(old) = vm.config.get(k).and_then(|old| replaced_volume(k, old, v)) {
            let n = (0..)
                .find(|i| !vm.config.contains_key(&format!("unused{i}")))
                .unwrap_or(0);
            log.push(format!("update VM {vmid}: -unused{n} {old}"));
            vm.config.insert(format!("unused{n}"), old);
        }
    }
    for d in deletes {
        vm.os_disks.remove(d);
    }
    for (k, v) in normalised {
        if running && !super::hotplug::applies_live(&k, &v, &vm.config) {
            vm.pending.insert(k, v);
        } else {
            log.push(format!("update VM {vmid}: -{k} {v}"));
            vm.pending.remove(&k);
            vm.config.insert(k, v);
        }
    }
    for d in deletes {
        if running && !super::hotplug::deletes_live(d, &vm.config) {
            vm.pending_delete.push(d.clone());
        } else {
            vm.config.remove(d);
        }
    }
    if let Some(boot) = boot_fix {
        vm.config.insert("boot".into(), boot);
    }
    vm.touch();
    Ok(log)
}

/// The volume of disk `key`'s old value when `new` puts another volume there (`None` for
/// CD-ROMs, empty drives and other keys).
fn replaced_volume(key: &str, old: &str, new: &str) -> Option<String> {
    if !crate::validate::is_disk_key(key) {
        return None;
    }
    let old = propstr::to_map(old, Some("file"));
    if old.get("media").is_some_and(|m| m == "cdrom") {
        return None;
    }
    let file = old.get("file").filter(|f| f.contains(':'))?;
    let new_file = propstr::to_map(new, Some("file")).get("file").cloned();
    (new_file.as_ref() != Some(file)).then(|| file.clone())
}

/// Whether `value` asks PVE to allocate a new volume (`<storage>:<GiB>`).
fn allocates(key: &str, value: &str) -> bool {
    crate::validate::is_disk_key(key)
        && propstr::parse(value, Some("file")).is_ok_and(|props| {
            propstr::get(&props, "file")
                .and_then(|f| f.split_once(':'))
                .is_some_and(|(_, vol)| vol.parse::<f64>().is_ok())
        })
}

struct Update {
    node: String,
    vmid: u32,
    changes: Vec<(String, String)>,
    deletes: Vec<String>,
}

fn prepare(ctx: &Ctx, p: &Params) -> Result<Update, ApiError> {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let skiplock = p.bool("skiplock").unwrap_or(false);
    if p.has("skiplock") && ctx.user != "root@pam" {
        return Err(ApiError::param("skiplock", "Only root may use this option."));
    }
    let mut changes = Vec::new();
    for (k, v) in &p.0 {
        if CONTROL.contains(&k.as_str()) {
            continue;
        }
        let text = match v {
            Value::Bool(b) => {
                if *b {
                    "1".into()
                } else {
                    "0".into()
                }
            }
            other => value_text(other),
        };
        changes.push((k.clone(), text));
    }
    let deletes: Vec<String> = p.list("delete");
    if changes.is_empty() && deletes.is_empty() && !p.has("revert") {
        return Err(ApiError::server("no options specified"));
    }
    if let Some(dup) = changes.iter().find(|(k, _)| deletes.contains(k)) {
        return Err(ApiError::param(
            "delete",
            format!("you can't change and delete the same option '{}'", dup.0),
        ));
    }
    ctx.state.with(|c| {
        let current = c
            .vm_on(&node, vmid)
            .map(|vm| vm.config.clone())
            .unwrap_or_default();
        crate::access::vmconfig::check_update(c, &ctx.user, vmid, &current, &changes, &deletes)?;
        let vm = c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        if let Some(d) = p.str("digest")
            && d != vm.digest()
        {
            return Err(ApiError::server("checksum mismatch (file change by other user?)"));
        }
        if !skiplock {
            vm.check_lock().map_err(ApiError::server)?;
        }
        let wanted = crate::devices::mappings_in(changes.iter().map(|(k, v)| (k, v)));
        if let Some(e) = crate::devices::missing_on_node(&c.pci_mappings, &wanted, &node) {
            return Err(ApiError::server(e));
        }
        Ok(())
    })?;
    Ok(Update {
        node,
        vmid,
        changes,
        deletes,
    })
}

/// `PUT .../config`: synchronous update.
pub fn config_put(ctx: &Ctx, p: &Params) -> HandlerResult {
    let u = prepare(ctx, p)?;
    ctx.state
        .with(|c| apply_update(c, &u.node, u.vmid, &u.changes, &u.deletes))?;
    Ok(Reply::data(Value::Null))
}

/// `POST .../config`: asynchronous update (`qmconfig` task), or synchronous with `background_delay`.
pub fn config_post(ctx: &Ctx, p: &Params) -> HandlerResult {
    let u = prepare(ctx, p)?;
    if p.has("background_delay") {
        ctx.state
            .with(|c| apply_update(c, &u.node, u.vmid, &u.changes, &u.deletes))
            .map_err(|e| ApiError::server(format!("failed to update VM {}: {}", u.vmid, e.message)))?;
        return Ok(Reply::data(Value::Null));
    }
    // Check the values now (storage existence etc.) so such errors stay synchronous.
    ctx.state.with(|c| {
        let vm = c
            .vm_on(&u.node, u.vmid)
            .ok_or_else(|| conf_missing(&u.node, u.vmid))?;
        let cfg = vm.config.clone();
        for (k, v) in &u.changes {
            let mut scratch = cfg.clone();
            scratch.remove(k);
            if propstr::family(k) != Some("net") {
                normalise(c, &u.node, u.vmid, k, v, &scratch)?;
            }
        }
        if let Some((_, boot)) = u.changes.iter().find(|(k, _)| k == "boot") {
            let mut merged = cfg;
            merged.extend(u.changes.iter().cloned());
            for d in &u.deletes {
                merged.remove(d);
            }
            if let Some(dev) = propstr::boot_devices(boot)
                .into_iter()
                .find(|d| !merged.contains_key(d))
            {
                return Err(ApiError::param(
                    "boot",
                    format!("invalid bootorder: device '{dev}' does not exist'"),
                ));
            }
        }
        Ok::<(), ApiError>(())
    })?;
    // Like PVE, new disks are allocated before the call returns and the config shows them as
    // pending (its digest changes); the task applies them.
    let mut u = u;
    ctx.state.with(|c| {
        for i in 0..u.changes.len() {
            let (k, v) = u.changes[i].clone();
            if !allocates(&k, &v) {
                continue;
            }
            // Every volume the VM holds, so the new one gets a free `vm-<vmid>-disk-<n>`.
            let known = c
                .vm_on(&u.node, u.vmid)
                .map(|vm| {
                    let mut all = vm.config.clone();
                    all.extend(
                        vm.pending
                            .iter()
                            .map(|(pk, pv)| (format!("pending-{pk}"), pv.clone())),
                    );
                    all
                })
                .unwrap_or_default();
            let allocated = normalise(c, &u.node, u.vmid, &k, &v, &known)?;
            if let Some(vm) = c.vm_on_mut(&u.node, u.vmid) {
                vm.pending.insert(k.clone(), allocated.clone());
                vm.touch();
            }
            u.changes[i].1 = allocated;
        }
        Ok::<(), ApiError>(())
    })?;
    let state = ctx.state.clone();
    let upid = ctx.state.with(|c| {
        let spec = TaskSpec {
            node: u.node.clone(),
            kind: "qmconfig",
            id: u.vmid.to_string(),
            user: ctx.user.clone(),
            latency_key: "qmconfig".into(),
            log: Vec::new(),
        };
        let Update {
            node,
            vmid,
            changes,
            deletes,
        } = u;
        tasks::start(
            &state,
            c,
            spec,
            Box::new(move |c: &mut Cluster| {
                if let Some(vm) = c.vm_on(&node, vmid) {
                    vm.check_lock()?;
                }
                apply_update(c, &node, vmid, &changes, &deletes).map_err(|e| match e.errors {
                    Some(errors) => errors
                        .iter()
                        .map(|(k, v)| format!("{k}: {v}"))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    None => e.message,
                })
            }),
            None,
        )
    });
    Ok(Reply::data(json!(upid)))
}
