//! `/version`, `/cluster/status`, `/cluster/resources`, `/cluster/nextid`, `/cluster/ha/resources`,
//! `/cluster/ha/groups`.

use serde_json::{Value, json};

use super::{Ctx, HandlerResult, Reply};
use crate::error::ApiError;
use crate::params::Params;
use crate::state::{Cluster, HaResource};

/// `GET /version`.
pub fn version(_ctx: &Ctx, _p: &Params) -> HandlerResult {
    Ok(Reply::data(
        json!({"version": "8.4.1", "release": "8.4", "repoid": "2a5fa54a8503f96d"}),
    ))
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

fn vm_resource(c: &Cluster, vm: &crate::state::Vm) -> Value {
    let mut v = json!({
        "id": format!("qemu/{}", vm.vmid),
        "type": "qemu",
        "vmid": vm.vmid,
        "node": vm.node,
    });
    let Some(obj) = v.as_object_mut() else { return v };
    let fresh = vm.created_at.elapsed() < c.latency.rrd_delay();
    if fresh {
        obj.insert("status".into(), json!("unknown"));
    } else {
        let status = match vm.power {
            crate::state::PowerState::Stopped => "stopped",
            crate::state::PowerState::Running => "running",
            crate::state::PowerState::Paused => "paused",
        };
        let maxmem = vm.memory_mib() * 1024 * 1024;
        let running = vm.is_running();
        obj.insert("status".into(), json!(status));
        obj.insert(
            "name".into(),
            json!(
                vm.config
                    .get("name")
                    .cloned()
                    .unwrap_or_else(|| format!("VM {}", vm.vmid))
            ),
        );
        obj.insert("template".into(), json!(if vm.is_template() { 1 } else { 0 }));
        obj.insert("maxcpu".into(), json!(vm.cpus()));
        obj.insert("cpu".into(), json!(if running { 0.01 } else { 0.0 }));
        obj.insert("maxmem".into(), json!(maxmem));
        obj.insert("mem".into(), json!(if running { maxmem / 4 } else { 0 }));
        obj.insert("maxdisk".into(), json!(vm.maxdisk()));
        for k in ["disk", "netin", "netout", "diskread", "diskwrite"] {
            obj.insert(k.into(), json!(0));
        }
        obj.insert("uptime".into(), json!(vm.uptime()));
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
        if want("vm") {
            for vm in c.vms.values() {
                out.push(vm_resource(c, vm));
            }
        }
        if want("node") {
            for n in c.nodes.values() {
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
                out.push(json!({"id": format!("/pool/{p}"), "type": "pool", "pool": p}));
            }
        }
        if want("storage") {
            for n in c.nodes.values() {
                for s in c.storages.iter().filter(|s| s.nodes.contains(&n.name)) {
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

/// Parses `vm:100` or `100` into a VMID.
fn parse_sid(sid: &str) -> Result<u32, ApiError> {
    let id = sid.strip_prefix("vm:").unwrap_or(sid);
    if let Some(ct) = sid.strip_prefix("ct:") {
        return Err(ApiError::server(format!("unable to find container {ct}")));
    }
    id.parse::<u32>().ok().filter(|v| *v >= 100).ok_or_else(|| {
        ApiError::param(
            "sid",
            "invalid format - value does not look like a valid ha resource id",
        )
    })
}

fn ha_json(h: &HaResource) -> Value {
    let mut v = json!({
        "sid": h.sid,
        "type": "vm",
        "state": h.state,
        "max_restart": h.max_restart,
        "max_relocate": h.max_relocate,
        "digest": format!("{:040x}", crate::state::fnv64(h.sid.as_bytes())),
    });
    if let Some(obj) = v.as_object_mut() {
        if let Some(g) = &h.group {
            obj.insert("group".into(), json!(g));
        }
        if let Some(cm) = &h.comment {
            obj.insert("comment".into(), json!(cm));
        }
    }
    v
}

/// `GET /cluster/ha/resources`.
pub fn ha_list(ctx: &Ctx, p: &Params) -> HandlerResult {
    let kind = p.str("type");
    ctx.state.with(|c| {
        let items = if kind.as_deref() == Some("ct") {
            Vec::new()
        } else {
            c.ha.values().map(ha_json).collect()
        };
        Ok(Reply::data(Value::Array(items)))
    })
}

/// `HA group '<g>' does not exist` (PVE checks the group on create and update).
fn check_group(c: &Cluster, group: Option<&str>) -> Result<(), ApiError> {
    match group {
        Some(g) if !c.ha_groups.contains(g) => {
            Err(ApiError::server(format!("HA group '{g}' does not exist")))
        }
        _ => Ok(()),
    }
}

/// `GET /cluster/mapping/pci`.
pub fn pci_mappings(ctx: &Ctx, _p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        let items = c
            .pci_mappings
            .iter()
            .map(|(id, map)| json!({"id": id, "map": map, "description": ""}))
            .collect();
        Ok(Reply::data(Value::Array(items)))
    })
}

/// `GET /cluster/ha/groups`.
pub fn ha_groups(ctx: &Ctx, _p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        let items = c
            .ha_groups
            .iter()
            .map(|g| json!({"group": g, "type": "group", "nodes": "", "digest": format!("{:040x}", crate::state::fnv64(g.as_bytes()))}))
            .collect();
        Ok(Reply::data(Value::Array(items)))
    })
}

/// `POST /cluster/ha/resources`.
pub fn ha_create(ctx: &Ctx, p: &Params) -> HandlerResult {
    let sid = p.str("sid").unwrap_or_default();
    let vmid = parse_sid(&sid)?;
    ctx.state.with(|c| {
        if !c.vms.contains_key(&vmid) {
            return Err(ApiError::server(format!("unable to find VM {vmid}")));
        }
        check_group(c, p.str("group").as_deref())?;
        if c.ha.contains_key(&vmid) {
            return Err(ApiError::server(format!(
                "resource ID 'vm:{vmid}' already defined"
            )));
        }
        c.ha.insert(
            vmid,
            HaResource {
                sid: format!("vm:{vmid}"),
                state: p.str("state").unwrap_or_else(|| "started".into()),
                group: p.str("group"),
                max_restart: p.int("max_restart").unwrap_or(1),
                max_relocate: p.int("max_relocate").unwrap_or(1),
                comment: p.str("comment"),
            },
        );
        Ok(Reply::data(Value::Null))
    })
}

/// `GET /cluster/ha/resources/{sid}`.
pub fn ha_get(ctx: &Ctx, p: &Params) -> HandlerResult {
    let vmid = parse_sid(&p.str("sid").unwrap_or_default())?;
    ctx.state.with(|c| match c.ha.get(&vmid) {
        Some(h) => Ok(Reply::data(ha_json(h))),
        None => Err(ApiError::server(format!("no such resource 'vm:{vmid}'"))),
    })
}

/// `PUT /cluster/ha/resources/{sid}`: updates the given settings, removes those in `delete`.
pub fn ha_update(ctx: &Ctx, p: &Params) -> HandlerResult {
    let vmid = parse_sid(&p.str("sid").unwrap_or_default())?;
    let deletes: Vec<String> = p.list("delete");
    ctx.state.with(|c| {
        check_group(c, p.str("group").as_deref())?;
        let h =
            c.ha.get_mut(&vmid)
                .ok_or_else(|| ApiError::server(format!("no such resource 'vm:{vmid}'")))?;
        if let Some(d) = p.str("digest")
            && d != format!("{:040x}", crate::state::fnv64(h.sid.as_bytes()))
        {
            return Err(ApiError::server(
                "detected modified configuration - file changed by other user? Try again.",
            ));
        }
        for d in &deletes {
            match d.as_str() {
                "group" => h.group = None,
                "comment" => h.comment = None,
                "max_restart" => h.max_restart = 1,
                "max_relocate" => h.max_relocate = 1,
                "state" => h.state = "started".into(),
                other => return Err(ApiError::server(format!("no such option '{other}'"))),
            }
        }
        if let Some(s) = p.str("state") {
            h.state = if s == "enabled" { "started".into() } else { s };
        }
        if let Some(g) = p.str("group") {
            h.group = Some(g);
        }
        if let Some(n) = p.int("max_restart") {
            h.max_restart = n;
        }
        if let Some(n) = p.int("max_relocate") {
            h.max_relocate = n;
        }
        if let Some(cm) = p.str("comment") {
            h.comment = Some(cm);
        }
        Ok(Reply::data(Value::Null))
    })
}

/// `DELETE /cluster/ha/resources/{sid}`.
pub fn ha_delete(ctx: &Ctx, p: &Params) -> HandlerResult {
    let vmid = parse_sid(&p.str("sid").unwrap_or_default())?;
    ctx.state.with(|c| match c.ha.remove(&vmid) {
        Some(_) => Ok(Reply::data(Value::Null)),
        None => Err(ApiError::server(format!(
            "cannot delete service 'vm:{vmid}', not HA managed!"
        ))),
    })
}
