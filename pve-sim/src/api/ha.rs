//! `/cluster/ha/resources` and `/cluster/ha/groups` (pve-ha-manager `PVE::API2::HA::Resources`,
//! `PVE::API2::HA::Groups`; 8.4 = ha-manager 4.0.7, 9.x = 5.x with groups migrated to rules).

use serde_json::{Value, json};

use super::{Ctx, HandlerResult, Reply};
use crate::error::ApiError;
use crate::params::Params;
use crate::state::{Cluster, HaGroup, HaResource, fnv64};

/// A parsed resource id.
pub(crate) struct Sid {
    /// `vm`, `ct`, ...
    pub kind: String,
    /// The VMID (or the name as given).
    pub name: String,
}

impl Sid {
    pub(crate) fn text(&self) -> String {
        format!("{}:{}", self.kind, self.name)
    }

    /// The VMID of a `vm:<id>`.
    pub(crate) fn vmid(&self) -> Option<u32> {
        (self.kind == "vm").then(|| self.name.parse().ok()).flatten()
    }
}

/// `PVE::HA::Config::parse_sid`: `vm:100`, or a bare VMID resolved through the VM list.
pub(crate) fn parse_sid(c: &Cluster, sid: &str) -> Result<Sid, ApiError> {
    if !sid.is_empty() && sid.chars().all(|ch| ch.is_ascii_digit()) {
        if sid.parse::<u32>().is_ok_and(|id| c.vms.contains_key(&id)) {
            return Ok(Sid {
                kind: "vm".into(),
                name: sid.into(),
            });
        }
        let verb = if c.version.is_9() { "to" } else { "do" };
        return Err(ApiError::server(format!(
            "unable {verb} detect SID from VMID - VM/CT {sid} does not exist"
        )));
    }
    match sid.split_once(':') {
        Some((kind, name)) if !kind.is_empty() && !name.is_empty() => Ok(Sid {
            kind: kind.into(),
            name: name.into(),
        }),
        _ => Err(ApiError::server(format!("unable to parse service id '{sid}'"))),
    }
}

/// The configured resource of `sid`, if any.
fn configured(c: &Cluster, sid: &Sid) -> Option<u32> {
    sid.vmid().filter(|id| c.ha.contains_key(id))
}

/// A resource as the API copies it out of `resources.cfg`.
pub(crate) fn resource_json(c: &Cluster, vmid: u32, h: &HaResource) -> Value {
    let mut v = json!({
        "sid": h.sid,
        "type": "vm",
        "state": h.state,
        "max_restart": h.max_restart,
        "max_relocate": h.max_relocate,
        "digest": format!("{:040x}", fnv64(h.sid.as_bytes())),
    });
    if let Some(obj) = v.as_object_mut() {
        if let Some(g) = &h.group
            && !c.ha_groups_migrated()
        {
            obj.insert("group".into(), json!(g));
        }
        if let Some(cm) = &h.comment {
            obj.insert("comment".into(), json!(cm));
        }
        if let Some(f) = c.ha_failback.get(&vmid) {
            obj.insert("failback".into(), json!(u8::from(*f)));
        }
    }
    v
}

/// `GET /cluster/ha/resources`.
pub fn list(ctx: &Ctx, p: &Params) -> HandlerResult {
    let kind = p.str("type");
    ctx.state.with(|c| {
        c.ha_tick();
        let mut items = Vec::new();
        if kind.as_deref() != Some("ct") {
            for (vmid, h) in &c.ha {
                let mut v = resource_json(c, *vmid, h);
                if let (Some(g), Some(obj)) = (obj_group(&v), v.as_object_mut())
                    && !c.ha_groups.contains_key(&g)
                {
                    obj.insert(
                        "errors".into(),
                        json!({"group": format!("group '{g}' does not exist")}),
                    );
                }
                items.push(v);
            }
        }
        Ok(Reply::data(Value::Array(items)))
    })
}

fn obj_group(v: &Value) -> Option<String> {
    v.get("group").and_then(Value::as_str).map(str::to_owned)
}

/// `GET /cluster/ha/resources/{sid}`.
pub fn get(ctx: &Ctx, p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        c.ha_tick();
        let sid = parse_sid(c, &p.str("sid").unwrap_or_default())?;
        match configured(c, &sid).and_then(|id| c.ha.get(&id).map(|h| (id, h))) {
            Some((id, h)) => Ok(Reply::data(resource_json(c, id, h))),
            None => Err(ApiError::server(format!("no such resource '{}'", sid.text()))),
        }
    })
}

/// `POST /cluster/ha/resources`: no check that the group exists (8.4 and 9.x alike; `GET` then
/// reports `errors.group`). On 9.x a `group` is refused once groups were migrated to rules.
pub fn create(ctx: &Ctx, p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        c.ha_tick();
        let sid = parse_sid(c, &p.str("sid").unwrap_or_default())?;
        if let Some(t) = p.str("type")
            && t != sid.kind
        {
            return Err(ApiError::server("types does not match"));
        }
        if p.has("group") && c.ha_groups_migrated() {
            return Err(ApiError::server(
                "invalid parameter 'group': ha groups have been migrated to rules",
            ));
        }
        let vmid = sid.vmid().filter(|id| c.vms.contains_key(id)).ok_or_else(|| {
            ApiError::server(format!("resource '{}' does not exist in cluster", sid.text()))
        })?;
        if c.ha.contains_key(&vmid) {
            return Err(ApiError::server(format!(
                "create resource failed: resource ID '{}' already defined",
                sid.text()
            )));
        }
        c.ha.insert(
            vmid,
            HaResource {
                sid: sid.text(),
                state: p.str("state").unwrap_or_else(|| "started".into()),
                group: p.str("group"),
                max_restart: p.int("max_restart").unwrap_or(1),
                max_relocate: p.int("max_relocate").unwrap_or(1),
                comment: p.str("comment"),
            },
        );
        if let Some(f) = p.bool("failback") {
            c.ha_failback.insert(vmid, f);
        }
        c.ha_generation += 1;
        Ok(Reply::data(Value::Null))
    })
}

/// `PUT /cluster/ha/resources/{sid}`: updates the given settings, removes those in `delete`.
pub fn update(ctx: &Ctx, p: &Params) -> HandlerResult {
    let deletes: Vec<String> = p.list("delete");
    ctx.state.with(|c| {
        c.ha_tick();
        let sid = parse_sid(c, &p.str("sid").unwrap_or_default())?;
        if let Some(t) = p.str("type")
            && t != sid.kind
        {
            return Err(ApiError::server("types does not match"));
        }
        if let Some(g) = p.str("group").filter(|g| !g.is_empty()) {
            if c.ha_groups_migrated() {
                return Err(ApiError::server(
                    "invalid parameter 'group': ha groups have been migrated to rules",
                ));
            }
            if !c.ha_groups.contains_key(&g) {
                return Err(ApiError::server(format!("HA group '{g}' does not exist")));
            }
        }
        let fail = |m: String| ApiError::server(format!("update resources config failed: {m}"));
        let vmid = configured(c, &sid).ok_or_else(|| fail(format!("no such resource '{}'", sid.text())))?;
        let nine = c.version.is_9();
        let Some(h) = c.ha.get_mut(&vmid) else {
            return Err(fail(format!("no such resource '{}'", sid.text())));
        };
        if let Some(d) = p.str("digest")
            && d != format!("{:040x}", fnv64(h.sid.as_bytes()))
        {
            return Err(fail(
                "detected modified configuration - file changed by other user? Try again.".into(),
            ));
        }
        let mut failback = c.ha_failback.get(&vmid).copied();
        for d in &deletes {
            match d.as_str() {
                "group" => h.group = None,
                "comment" => h.comment = None,
                "max_restart" => h.max_restart = 1,
                "max_relocate" => h.max_relocate = 1,
                "state" => h.state = "started".into(),
                "failback" if nine => failback = None,
                other => return Err(fail(format!("no such option '{other}'"))),
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
        if let Some(f) = p.bool("failback") {
            failback = Some(f);
        }
        match failback {
            Some(f) => c.ha_failback.insert(vmid, f),
            None => c.ha_failback.remove(&vmid),
        };
        c.ha_generation += 1;
        Ok(Reply::data(Value::Null))
    })
}

/// `DELETE /cluster/ha/resources/{sid}`: on 9.x `purge` (default 1) also takes the resource out
/// of every rule and deletes rules left without resources.
pub fn delete(ctx: &Ctx, p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        c.ha_tick();
        let sid = parse_sid(c, &p.str("sid").unwrap_or_default())?;
        let Some(vmid) = configured(c, &sid) else {
            return Err(ApiError::server(format!(
                "cannot delete service '{}', not HA managed!",
                sid.text()
            )));
        };
        let purge = c.version.is_9() && p.bool("purge").unwrap_or(true);
        c.remove_ha_resource(vmid, purge);
        Ok(Reply::data(Value::Null))
    })
}

fn group_json(c: &Cluster, name: &str, g: &HaGroup) -> Value {
    let mut v = json!({
        "group": name,
        "type": "group",
        "nodes": g.nodes_text(),
        "digest": format!("{:040x}", fnv64(format!("groups:{}", c.ha_generation).as_bytes())),
    });
    if let Some(obj) = v.as_object_mut() {
        if let Some(r) = g.restricted {
            obj.insert("restricted".into(), json!(u8::from(r)));
        }
        if let Some(n) = g.nofailback {
            obj.insert("nofailback".into(), json!(u8::from(n)));
        }
        if let Some(cm) = &g.comment {
            obj.insert("comment".into(), json!(cm));
        }
    }
    v
}

/// 9.x: `cannot <what>: ha groups have been migrated to rules` once no group is left.
fn refuse_migrated(c: &Cluster, what: &str) -> Result<(), ApiError> {
    if c.ha_groups_migrated() {
        Err(ApiError::server(format!(
            "cannot {what}: ha groups have been migrated to rules"
        )))
    } else {
        Ok(())
    }
}

/// `GET /cluster/ha/groups`.
pub fn groups(ctx: &Ctx, _p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        c.ha_tick();
        refuse_migrated(c, "index groups")?;
        let items = c.ha_groups.iter().map(|(n, g)| group_json(c, n, g)).collect();
        Ok(Reply::data(Value::Array(items)))
    })
}

/// `GET /cluster/ha/groups/{group}`.
pub fn group_get(ctx: &Ctx, p: &Params) -> HandlerResult {
    let name = p.str("group").unwrap_or_default();
    ctx.state.with(|c| {
        c.ha_tick();
        refuse_migrated(c, "read group")?;
        let g = c
            .ha_groups
            .get(&name)
            .ok_or_else(|| ApiError::server(format!("no such ha group '{name}'")))?;
        Ok(Reply::data(group_json(c, &name, g)))
    })
}

/// The `nodes` of a group parameter (`node[:prio],...`).
fn group_nodes(text: &str) -> std::collections::BTreeMap<String, Option<u32>> {
    text.split([',', ';', ' '])
        .filter(|n| !n.is_empty())
        .map(|n| match n.split_once(':') {
            Some((n, p)) => (n.to_owned(), p.parse().ok()),
            None => (n.to_owned(), None),
        })
        .collect()
}

/// `POST /cluster/ha/groups`.
pub fn group_create(ctx: &Ctx, p: &Params) -> HandlerResult {
    let name = p.str("group").unwrap_or_default();
    ctx.state.with(|c| {
        c.ha_tick();
        refuse_migrated(c, "create group")?;
        if p.str("type").is_some_and(|t| t != "group") {
            return Err(ApiError::server("types does not match"));
        }
        if c.ha_groups.contains_key(&name) {
            return Err(ApiError::server(format!(
                "create ha group failed: ha group ID '{name}' already defined"
            )));
        }
        let group = HaGroup {
            nodes: group_nodes(&p.str("nodes").unwrap_or_default()),
            restricted: p.bool("restricted"),
            nofailback: p.bool("nofailback"),
            comment: p.str("comment"),
        };
        c.ha_groups.insert(name, group);
        c.ha_generation += 1;
        Ok(Reply::data(Value::Null))
    })
}

/// `PUT /cluster/ha/groups/{group}`.
pub fn group_update(ctx: &Ctx, p: &Params) -> HandlerResult {
    let name = p.str("group").unwrap_or_default();
    let deletes = p.list("delete");
    ctx.state.with(|c| {
        c.ha_tick();
        refuse_migrated(c, "update group")?;
        if p.str("type").is_some_and(|t| t != "group") {
            return Err(ApiError::server("types does not match"));
        }
        let fail = |m: String| ApiError::server(format!("update ha group failed: {m}"));
        let g = c
            .ha_groups
            .get_mut(&name)
            .ok_or_else(|| fail(format!("no such ha group '{name}'")))?;
        if let Some(n) = p.str("nodes") {
            g.nodes = group_nodes(&n);
        }
        if let Some(r) = p.bool("restricted") {
            g.restricted = Some(r);
        }
        if let Some(n) = p.bool("nofailback") {
            g.nofailback = Some(n);
        }
        if let Some(cm) = p.str("comment") {
            g.comment = Some(cm);
        }
        for d in &deletes {
            match d.as_str() {
                "nodes" => return Err(fail("unable to delete required option 'nodes'".into())),
                "restricted" => g.restricted = None,
                "nofailback" => g.nofailback = None,
                "comment" => g.comment = None,
                other => return Err(fail(format!("no such option '{other}'"))),
            }
        }
        c.ha_generation += 1;
        Ok(Reply::data(Value::Null))
    })
}

/// `DELETE /cluster/ha/groups/{group}` (a group that does not exist is no error).
pub fn group_delete(ctx: &Ctx, p: &Params) -> HandlerResult {
    let name = p.str("group").unwrap_or_default();
    ctx.state.with(|c| {
        c.ha_tick();
        refuse_migrated(c, "delete group")?;
        if let Some(h) = c.ha.values().find(|h| h.group.as_deref() == Some(name.as_str())) {
            return Err(ApiError::server(format!(
                "delete ha group failed: ha group is used by service '{}'",
                h.sid
            )));
        }
        c.ha_groups.remove(&name);
        c.ha_generation += 1;
        Ok(Reply::data(Value::Null))
    })
}
