//! VM list, delete, clone, resize, template, snapshots.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use super::config::{conf_missing, find_missing};
use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::Params;
use crate::propstr;
use crate::state::{Cluster, Vm};
use crate::tasks::{self, TaskSpec};

/// `GET /nodes/{node}/qemu`.
pub fn list(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    ctx.state.with(|c| {
        let items = c
            .vms
            .values()
            .filter(|v| v.node == node)
            .filter(|v| c.can(&ctx.user, &format!("/vms/{}", v.vmid), &["VM.Audit"], false))
            .map(|v| {
                let mut s = v.status_json(None, c.version);
                if let Some(obj) = s.as_object_mut() {
                    obj.remove("ha");
                    obj.remove("agent");
                    if !v.is_running() {
                        obj.remove("qmpstatus");
                    }
                }
                s
            })
            .collect();
        Ok(Reply::data(Value::Array(items)))
    })
}

/// What identifies a task to start.
pub(crate) struct Tk<'a> {
    pub(crate) node: &'a str,
    pub(crate) kind: &'static str,
    pub(crate) id: String,
    pub(crate) latency: &'a str,
    pub(crate) log: Vec<String>,
}

pub(crate) fn start_task(
    ctx: &Ctx,
    c: &mut Cluster,
    t: Tk<'_>,
    run: tasks::TaskRun,
    rollback: Option<tasks::TaskRollback>,
) -> String {
    let spec = TaskSpec {
        node: t.node.to_string(),
        kind: t.kind,
        id: t.id,
        user: ctx.user.clone(),
        latency_key: t.latency.to_string(),
        log: t.log,
    };
    tasks::start(&ctx.state, c, spec, run, rollback)
}

/// `DELETE /nodes/{node}/qemu/{vmid}`.
pub fn delete(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let purge = p.bool("purge").unwrap_or(false);
    if p.has("skiplock") && ctx.user != "root@pam" {
        return Err(ApiError::param("skiplock", "Only root may use this option."));
    }
    let skiplock = p.bool("skiplock").unwrap_or(false);
    ctx.state.with(|c| {
        let vm = c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        if vm.config.get("protection").is_some_and(|v| v == "1") {
            return Err(ApiError::server(format!(
                "can't remove VM {vmid} - protection mode enabled"
            )));
        }
        if c.ha.contains_key(&vmid) && !purge {
            return Err(ApiError::server(format!(
                "unable to remove VM {vmid} - used in HA resources and purge parameter not set."
            )));
        }
        if vm.is_running() {
            return Err(ApiError::server(format!("VM {vmid} is running - destroy failed")));
        }
        let n = node.clone();
        let upid = start_task(
            ctx,
            c,
            Tk {
                node: &node,
                kind: "qmdestroy",
                id: vmid.to_string(),
                latency: "qmdestroy",
                log: Vec::new(),
            },
            Box::new(move |c: &mut Cluster| {
                let vm = c.vm_on(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                if !skiplock {
                    vm.check_lock()?;
                }
                let disks: Vec<String> = vm.disks().into_iter().map(|(k, _)| k).collect();
                if vm.is_template() && c.vms.values().any(|other| other.linked_base == Some(vmid)) {
                    let base = disks
                        .first()
                        .and_then(|d| vm.config.get(d))
                        .and_then(|v| propstr::to_map(v, Some("file")).get("file").cloned())
                        .map(|f| f.split_once(':').map(|(_, n)| n.to_string()).unwrap_or(f))
                        .unwrap_or_default();
                    return Err(format!("base volume '{base}' is still in use by linked clones"));
                }
                c.vms.remove(&vmid);
                // `PVE::AccessControl::remove_vm_access`: the VM's ACL entries go with it.
                let path = format!("/vms/{vmid}");
                c.access.acl.retain(|e| e.path != path);
                let was_ha = purge && c.remove_ha_resource(vmid, c.version.is_9()).is_some();
                let mut log: Vec<String> = disks
                    .iter()
                    .map(|d| format!("Removing image: 100% complete...done. ({d})"))
                    .collect();
                if purge {
                    log.push(format!("purging VM {vmid} from related configurations.."));
                }
                if was_ha {
                    log.push(format!("NOTE: removed VM {vmid} from HA resource configuration."));
                }
                Ok(log)
            }),
            None,
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// Where clone disks go: (storage, shared).
fn disk_storages(c: &Cluster, node: &str, vm: &Vm) -> Vec<(String, String, bool)> {
    vm.disks()
        .into_iter()
        .filter_map(|(k, _)| {
            let v = vm.config.get(&k)?;
            let file = propstr::to_map(v, Some("file")).get("file").cloned()?;
            let (storage, _) = file.split_once(':')?;
            let shared = c.storage_on(node, storage).is_some_and(|s| s.shared);
            Some((k, storage.to_string(), shared))
        })
        .collect()
}

/// `POST /nodes/{node}/qemu/{vmid}/clone`.
pub fn clone(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let newid = u32::try_from(p.int("newid").unwrap_or(0)).unwrap_or(0);
    let target = p.str("target").unwrap_or_else(|| node.clone());
    ctx.state.with(|c| {
        let src = c
            .vm_on(&node, vmid)
            .ok_or_else(|| ApiError::server(find_missing(&node, vmid)))?
            .clone();
        src.check_lock().map_err(ApiError::server)?;
        // A clone of a snapshot copies the VM as the snapshot has it (its config, its disks).
        let src = match p.str("snapname") {
            Some(snap) => {
                let taken = src
                    .snapshots
                    .iter()
                    .find(|s| s.name == snap)
                    .ok_or_else(|| ApiError::server(format!("snapshot '{snap}' does not exist")))?;
                let mut at = src.clone();
                at.config = taken.config.clone();
                at
            }
            None => src,
        };
        let full = p.bool("full").unwrap_or(!src.is_template());
        let storage = p.str("storage");
        if !full {
            if storage.is_some() {
                return Err(ApiError::server(
                    "parameter 'storage' not allowed for linked clones",
                ));
            }
            if p.has("format") {
                return Err(ApiError::server(
                    "parameter 'format' not allowed for linked clones",
                ));
            }
            if !src.is_template()
                && let Some((disk, _)) = src.disks().first()
            {
                let volid = propstr::to_map(
                    src.config.get(disk).map(String::as_str).unwrap_or(""),
                    Some("file"),
                )
                .get("file")
                .cloned()
                .unwrap_or_default();
                return Err(ApiError::server(format!(
                    "Linked clone feature is not supported for '{volid}' ({disk})"
                )));
            }
        }
        let pool = p.str("pool");
        c.check_pool(pool.as_deref())?;
        crate::access::vmconfig::check_clone(c, &ctx.user, &src.config, storage.as_deref())?;
        if !c.nodes.contains_key(&target) {
            return Err(ApiError::server(format!("no such cluster node '{target}'")));
        }
        let disks = disk_storages(c, &node, &src);
        if let Some(s) = &storage {
            let st = c
                .storage_on(&target, s)
                .ok_or_else(|| ApiError::server(format!("storage '{s}' does not exist")))?;
            if !st.allows("images") {
                return Err(ApiError::status(
                    400,
                    format!("storage '{s}' does not support vm images"),
                ));
            }
            if target != node && !st.shared {
                return Err(ApiError::server(format!(
                    "can't clone to non-shared storage '{s}'"
                )));
            }
        } else if target != node && disks.iter().any(|(_, _, shared)| !shared) {
            return Err(ApiError::server(format!(
                "can't clone VM to node '{target}' (VM uses local storage)"
            )));
        }
        if let Some(existing) = c.vms.get(&newid)
            && existing.node == node
        {
            return Err(ApiError::server(format!(
                "unable to create VM {newid}: config file already exists"
            )));
        }
        let taken_elsewhere = c.vms.contains_key(&newid);
        // Storage lock contention on node-local target storages.
        let targets: Vec<String> = match &storage {
            Some(s) => vec![s.clone()],
            None => disks.iter().map(|(_, s, _)| s.clone()).collect(),
        };
        let local_targets: Vec<(String, String)> = targets
            .iter()
            .filter(|s| c.storage_on(&target, s).is_some_and(|st| !st.shared))
            .map(|s| (target.clone(), s.clone()))
            .collect();
        let contended = local_targets
            .iter()
            .find(|k| c.active_local_clones.get(*k).copied().unwrap_or(0) > 0)
            .cloned();
        let rate = c.faults.storage_lock_contention;
        let lock_failure = match contended {
            Some((_, s)) if c.fault_roll("storage-lock", rate) => Some(s),
            _ => None,
        };
        for k in &local_targets {
            *c.active_local_clones.entry(k.clone()).or_insert(0) += 1;
        }
        if !taken_elsewhere {
            let mut cfg = BTreeMap::new();
            cfg.insert("lock".to_string(), "clone".to_string());
            cfg.insert("description".to_string(), " qmclone temporary file".to_string());
            c.vms.insert(newid, Vm::new(newid, &target, cfg));
        }
        let name = p.str("name").unwrap_or_else(|| {
            format!(
                "Copy-of-VM-{}",
                src.config
                    .get("name")
                    .cloned()
                    .unwrap_or_else(|| vmid.to_string())
            )
        });
        let description = p.str("description");
        let kind = if full { "full" } else { "linked" };
        let log: Vec<String> = disks
            .iter()
            .map(|(k, _, _)| {
                format!(
                    "create {kind} clone of drive {k} ({})",
                    src.config.get(k).cloned().unwrap_or_default()
                )
            })
            .collect();
        let release = local_targets.clone();
        let release_rb = local_targets;
        let target_rb = target.clone();
        let run = Box::new(move |c: &mut Cluster| {
            for k in &release {
                if let Some(n) = c.active_local_clones.get_mut(k) {
                    *n = n.saturating_sub(1);
                }
            }
            if taken_elsewhere {
                return Err(format!("unable to create VM {newid}: config file already exists"));
            }
            if let Some(s) = lock_failure {
                c.vms.remove(&newid);
                return Err(format!(
                    "clone failed: can't lock file '/var/lock/pve-manager/pve-storage-{s}' - got timeout"
                ));
            }
            let cfg = clone_config(
                c,
                &src,
                newid,
                &name,
                description.as_deref(),
                full,
                storage.as_deref(),
            );
            match c.vm_on_mut(&target, newid) {
                Some(vm) => {
                    // The copies of the source's OS disks carry its OS; nothing else does.
                    vm.os_disks = src
                        .os_disks
                        .iter()
                        .filter(|k| cfg.contains_key(*k))
                        .cloned()
                        .collect();
                    vm.config = cfg;
                    vm.linked_base = if full { None } else { Some(src.vmid) };
                    vm.pool = pool;
                    vm.touch();
                    c.clone_history.push((newid, name.clone()));
                    Ok(Vec::new())
                }
                None => Err("clone failed: target config vanished".to_string()),
            }
        });
        let rollback = Box::new(move |c: &mut Cluster| {
            for k in &release_rb {
                if let Some(n) = c.active_local_clones.get_mut(k) {
                    *n = n.saturating_sub(1);
                }
            }
            if !taken_elsewhere
                && c.vm_on(&target_rb, newid)
                    .is_some_and(|v| v.lock() == Some("clone"))
            {
                c.vms.remove(&newid);
            }
        });
        let latency = if full { "qmclone-full" } else { "qmclone-linked" };
        let upid = start_task(
            ctx,
            c,
            Tk {
                node: &node,
                kind: "qmclone",
                id: vmid.to_string(),
                latency,
                log,
            },
            run,
            Some(rollback),
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// Builds the new VM's config from the source: new MACs, new smbios1 uuid, new disks, name, no template.
fn clone_config(
    c: &mut Cluster,
    src: &Vm,
    newid: u32,
    name: &str,
    description: Option<&str>,
    full: bool,
    storage: Option<&str>,
) -> BTreeMap<String, String> {
    let mut cfg = BTreeMap::new();
    let mut disk_n = 0;
    for (k, v) in &src.config {
        if matches!(
            k.as_str(),
            "template"
                | "lock"
                | "parent"
                | "vmstate"
                | "runningmachine"
                | "runningcpu"
                | "description"
                | "name"
        ) || propstr::family(k) == Some("unused")
        {
            continue;
        }
        let value = if propstr::family(k) == Some("net") {
            let props = propstr::parse(v, Some("model")).unwrap_or_default();
            let mac = c.new_mac();
            props
                .into_iter()
                .map(|(pk, pv)| {
                    if propstr::NET_MODELS.contains(&pk.as_str()) || pk == "model" {
                        let model = if pk == "model" { pv } else { pk };
                        format!("{model}={mac}")
                    } else if pk == "macaddr" {
                        format!("macaddr={mac}")
                    } else {
                        format!("{pk}={pv}")
                    }
                })
                .collect::<Vec<_>>()
                .join(",")
        } else if k == "smbios1" {
            let uuid = c.new_uuid();
            propstr::set_key(v, "uuid", &uuid)
        } else if k == "vmgenid" {
            c.new_uuid()
        } else if crate::validate::is_disk_key(k) {
            let props = propstr::parse(v, Some("file")).unwrap_or_default();
            let file = propstr::get(&props, "file").unwrap_or_default().to_string();
            let is_cdrom = propstr::get(&props, "media") == Some("cdrom");
            match file.split_once(':') {
                Some((st, vol)) if vol.contains("cloudinit") => {
                    v.replace(&file, &format!("{st}:vm-{newid}-cloudinit"))
                }
                Some((st, _)) if !is_cdrom => {
                    let st = if full { storage.unwrap_or(st) } else { st };
                    let newvol = format!("{st}:vm-{newid}-disk-{disk_n}");
                    disk_n += 1;
                    v.replacen(&file, &newvol, 1)
                }
                _ => v.clone(),
            }
        } else {
            v.clone()
        };
        cfg.insert(k.clone(), value);
    }
    cfg.insert("name".into(), name.to_string());
    if let Some(d) = description {
        cfg.insert("description".into(), d.to_string());
    }
    cfg
}

/// `PUT .../resize` (asynchronous `resize` task; every check runs in the task).
pub fn resize(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let disk = p.str("disk").unwrap_or_default();
    if !crate::validate::is_disk_key(&disk) {
        return Err(ApiError::param(
            "disk",
            format!(
                "value '{disk}' does not have a value in the enumeration '{}'",
                crate::validate::DISK_ENUM.join(", ")
            ),
        ));
    }
    let size = p.str("size").unwrap_or_default();
    let (grow, amount) = match size.strip_prefix('+') {
        Some(rest) => (true, rest.to_string()),
        None => (false, size.clone()),
    };
    let Some(bytes) = propstr::parse_size(&amount) else {
        return Err(ApiError::param("size", "value does not match the regex pattern"));
    };
    let digest = p.str("digest");
    ctx.state.with(|c| {
        c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        let n = node.clone();
        let who = ctx.user.clone();
        let upid = start_task(
            ctx,
            c,
            Tk {
                node: &node,
                kind: "resize",
                id: vmid.to_string(),
                latency: "resize",
                log: Vec::new(),
            },
            Box::new(move |c: &mut Cluster| {
                let vm = c.vm_on_mut(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                vm.check_lock()?;
                if digest.as_ref().is_some_and(|d| *d != vm.digest()) {
                    return Err("checksum mismatch (file change by other user?)".into());
                }
                let value = vm
                    .config
                    .get(&disk)
                    .cloned()
                    .ok_or_else(|| format!("disk '{disk}' does not exist"))?;
                let props = propstr::to_map(&value, Some("file"));
                if props.get("media").is_some_and(|m| m == "cdrom") {
                    return Err("you can't resize a cdrom".into());
                }
                if let Some((storage, _)) = props.get("file").and_then(|f| f.split_once(':')) {
                    c.check(&who, &format!("/storage/{storage}"), &["Datastore.AllocateSpace"])
                        .map_err(|e| e.message)?;
                }
                let Some(vm) = c.vm_on_mut(&n, vmid) else {
                    return Err(find_missing(&n, vmid));
                };
                let current = props
                    .get("size")
                    .and_then(|s| propstr::parse_size(s))
                    .unwrap_or(0);
                let new = if grow { current + bytes } else { bytes };
                if new < current {
                    return Err("shrinking disks is not supported".into());
                }
                if new == current {
                    return Ok(vec![format!(
                        "disk '{disk}' already has size {}",
                        propstr::format_size(new)
                    )]);
                }
                vm.config.insert(
                    disk.clone(),
                    propstr::set_key(&value, "size", &propstr::format_size(new)),
                );
                vm.touch();
                Ok(vec![format!(
                    "Size of logical volume changed to {}",
                    propstr::format_size(new)
                )])
            }),
            None,
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// `POST .../template`.
pub fn template(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    ctx.state.with(|c| {
        let vm = c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        vm.check_lock().map_err(ApiError::server)?;
        if !vm.snapshots.is_empty() {
            return Err(ApiError::server(
                "unable to create template, because VM contains snapshots",
            ));
        }
        if vm.is_template() {
            return Err(ApiError::server("you can't convert a template to a template"));
        }
        if vm.is_running() {
            return Err(ApiError::server(
                "you can't convert a VM to template if VM is running",
            ));
        }
        let n = node.clone();
        let upid = start_task(
            ctx,
            c,
            Tk {
                node: &node,
                kind: "qmtemplate",
                id: vmid.to_string(),
                latency: "qmtemplate",
                log: Vec::new(),
            },
            Box::new(move |c: &mut Cluster| {
                let vm = c.vm_on_mut(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                let from = format!("vm-{vmid}-disk-");
                let to = format!("base-{vmid}-disk-");
                for (_, v) in vm.config.iter_mut() {
                    if v.contains(&from) {
                        *v = v.replace(&from, &to);
                    }
                }
                vm.config.insert("template".into(), "1".into());
                vm.touch();
                Ok(Vec::new())
            }),
            None,
        );
        Ok(Reply::data(json!(upid)))
    })
}
