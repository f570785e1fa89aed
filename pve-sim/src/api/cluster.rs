//! `/version`, `/cluster/status`, `/cluster/resources`, `/cluster/nextid`, `/cluster/mapping/pci`.

use serde_json::{Value, json};

use super::{Ctx, HandlerResult, Reply};
use crate::error::ApiError;
use crate::params::Params;
use crate::state::Cluster;

/// `GET /version`.
pub fn version(ctx: &Ctx, _p: &Params) -> HandlerResult {
    Ok(Reply::data(ctx.version.version_data()))
}

/// `GET /cluster/status`.
pub fn status(ctx: &Ctx, _p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        let mut out = vec![json!({
            "type": "cluster",
            "id": "cluster",
            "name": c.name,
            "nodes": c.nodes.len(),
            "quorate": 1,
            "version": c.nodes.len() + 2,
        })];
        for (i, n) in c.nodes.values().enumerate() {
            out.push(json!({
                "type": "node",
                "id": format!("node/{}", n.name),
                "name": n.name,
                "nodeid": n.nodeid,
                "ip": format!("10.0.0.{}", i + 11),
                "local": if i == 0 { 1 } else { 0 },
                "online": if n.online { 1 } else { 0 },
                "level": "",
            }));
        }
        Ok(Reply::data(Value::Array(out)))
    })
}

/// Memory used on a node by running VMs.
pub fn node_mem_used(c: &Cluster, node: &str) -> u64 {
    let vms: u64 = c
        .vms
        .values()
        .filter(|v| v.node == node && v.is_running())
        .map(|v| v.memory_mib() * 1024 * 1024)
        .sum();
    2 * 1024 * 1024 * 1024 + vms
}

/// A VM in `/cluster/resources`: id, node, lock, tags, pool and HA state live; the rest from the
/// status cache of its node (`extract_vm_stats`), or only `status: unknown` without data.
fn vm_resource(c: &Cluster, vm: &crate::state::Vm) -> Value {
    let mut v = json!({
        "id": format!("qemu/{}", vm.vmid),
        "type": "qemu",
        "vmid": vm.vmid,
        "node": vm.node,
        "status": "unknown",
    });
    let Some(obj) = v.as_object_mut() else { return v };
    if let Some(s) = c.vm_stats(vm) {
        obj.insert("status".into(), json!(s.status));
        obj.insert("name".into(), json!(s.name));
        obj.insert("template".into(), json!(u8::from(s.template)));
        obj.insert("maxcpu".into(), json!(s.maxcpu));
        obj.insert("cpu".into(), json!(s.cpu));
        obj.insert("maxmem".into(), json!(s.maxmem));
        obj.insert("mem".into(), json!(s.mem));
        obj.insert("maxdisk".into(), json!(s.maxdisk));
        for k in ["disk", "netin", "netout", "diskread", "diskwrite"] {
            obj.insert(k.into(), json!(0));
        }
        obj.insert("uptime".into(), json!(s.uptime));
        if c.version.is_9() {
            obj.insert("memhost".into(), json!(s.mem));
        }
    }
    if let Some(l) = vm.lock() {
        obj.insert("lock".into(), json!(l));
    }
    if let Some(t) = vm.config.get("tags") {
        obj.insert("tags".into(), json!(t));
    }
    if let Some(h) = c.ha.get(&vm.vmid) {
        obj.insert("hastate".into(), json!(h.state));
    }
    if let Some(p) = &vm.pool {
        obj.insert("pool".into(), json!(p));
    }
    v
}

/// `GET /cluster/resources[?type=vm|node|storage|sdn]`.
pub fn resources(ctx: &Ctx, p: &Params) -> HandlerResult {
    let kind = p.str("type");
    ctx.state.with(|c| {
        let mut out = Vec::new();
        let want = |t: &str| kind.as_deref().is_none_or(|k| k == t);
        let who = ctx.user.as_str();
        if want("vm") {
            for vm in c.vms.values() {
                if !c.can(who, &format!("/vms/{}", vm.vmid), &["VM.Audit"], false) {
                    continue;
                }
                let mut entry = vm_resource(c, vm);
                if let Some(p) = &vm.pool
                    && !c.can(who, &format!("/pool/{p}"), &["Pool.Audit"], false)
                    && let Some(obj) = entry.as_object_mut()
                {
                    obj.remove("pool");
                }
                out.push(entry);
            }
        }
        if want("node") {
            for n in c.nodes.values() {
                if !c.can(who, &format!("/nodes/{}", n.name), &["Sys.Audit"], false) {
                    out.push(json!({
                        "id": format!("node/{}", n.name),
                        "type": "node",
                        "node": n.name,
                        "status": if n.online { "online" } else { "offline" },
                        "level": "",
                        "cgroup-mode": 2,
                    }));
                    continue;
                }
                out.push(json!({
                    "id": format!("node/{}", n.name),
                    "type": "node",
                    "node": n.name,
                    "status": if n.online { "online" } else { "offline" },
                    "level": "",
                    "cpu": 0.02,
                    "maxcpu": n.cpus,
                    "mem": node_mem_used(c, &n.name),
                    "maxmem": n.memory,
                    "disk": 10u64 * 1024 * 1024 * 1024,
                    "maxdisk": 100u64 * 1024 * 1024 * 1024,
                    "uptime": 86_400,
                    "cgroup-mode": 2,
                }));
            }
        }
        if kind.is_none() {
            let mut pools: Vec<String> = c.pools.iter().flatten().cloned().collect();
            pools.extend(c.vms.values().filter_map(|v| v.pool.clone()));
            pools.sort();
            pools.dedup();
            for p in pools {
                if c.can(who, &format!("/pool/{p}"), &["Pool.Audit"], false) {
                    out.push(json!({"id": format!("/pool/{p}"), "type": "pool", "pool": p}));
                }
            }
        }
        if want("storage") {
            for n in c.nodes.values() {
                for s in c
                    .storages
                    .iter()
                    .filter(|s| s.nodes.contains(&n.name))
                    .filter(|s| c.can(who, &format!("/storage/{}", s.name), &["Datastore.Audit"], false))
                {
                    out.push(json!({
                        "id": format!("storage/{}/{}", n.name, s.name),
                        "type": "storage",
                        "storage": s.name,
                        "node": n.name,
                        "plugintype": s.kind,
                        "status": "available",
                        "shared": if s.shared { 1 } else { 0 },
                        "content": s.content.join(","),
                        "disk": super::storage::used_bytes(c, &n.name, s),
                        "maxdisk": s.total,
                    }));
                }
            }
        }
        Ok(Reply::data(Value::Array(out)))
    })
}

/// `GET /cluster/nextid[?vmid=N]`: a JSON string, as PVE returns it.
pub fn nextid(ctx: &Ctx, p: &Params) -> HandlerResult {
    let used = ctx.state.with(|c| c.used_vmids());
    if let Some(vmid) = p.int("vmid") {
        let id = u32::try_from(vmid).unwrap_or(u32::MAX);
        if used.contains(&id) {
            return Err(ApiError::param("vmid", format!("VM {vmid} already exists")));
        }
        return Ok(Reply::data(json!(vmid.to_string())));
    }
    (100u32..1_000_000)
        .find(|id| !used.contains(id))
        .map(|id| Reply::data(json!(id.to_string())))
        .ok_or_else(|| ApiError::server("unable to get any free VMID in range [100, 999999]"))
}

/// `GET /cluster/mapping/pci`.
pub fn pci_mappings(ctx: &Ctx, _p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        let privs = ["Mapping.Modify", "Mapping.Use", "Mapping.Audit"];
        let items = c
            .pci_mappings
            .iter()
            .filter(|(id, _)| c.can(&ctx.user, &format!("/mapping/pci/{id}"), &privs, true))
            .map(|(id, map)| json!({"id": id, "map": map, "description": ""}))
            .collect();
        Ok(Reply::data(Value::Array(items)))
    })
}
