//! `/nodes`, node status, container list, tasks.

use serde_json::{Value, json};

use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::Params;

/// Whether `who` owns a task started by `task_user` (`check_task_user`: a token sees its own
/// tasks, a user also those of its tokens).
fn owns_task(task_user: &str, who: &str) -> bool {
    match task_user.split_once('!') {
        Some((user, _)) => who == task_user || who == user,
        None => who == task_user,
    }
}

/// The owner of a task or `priv` on `/nodes/<node>`.
fn check_task_access(
    c: &crate::state::Cluster,
    who: &str,
    task: &crate::tasks::Task,
    privilege: &str,
) -> Result<(), ApiError> {
    if owns_task(&task.user, who) {
        return Ok(());
    }
    c.check(who, &format!("/nodes/{}", task.node), &[privilege])
}

/// `GET /nodes` (without `Sys.Audit` on a node only its id, status and level).
pub fn list(ctx: &Ctx, _p: &Params) -> HandlerResult {
    ctx.state.with(|c| {
        let items = c
            .nodes
            .values()
            .map(|n| {
                if !c.can(&ctx.user, &format!("/nodes/{}", n.name), &["Sys.Audit"], false) {
                    return json!({
                        "node": n.name,
                        "id": format!("node/{}", n.name),
                        "type": "node",
                        "status": if n.online { "online" } else { "offline" },
                        "level": "",
                    });
                }
                json!({
                    "node": n.name,
                    "id": format!("node/{}", n.name),
                    "type": "node",
                    "status": if n.online { "online" } else { "offline" },
                    "cpu": 0.02,
                    "maxcpu": n.cpus,
                    "mem": super::cluster::node_mem_used(c, &n.name),
                    "maxmem": n.memory,
                    "disk": 10u64 * 1024 * 1024 * 1024,
                    "maxdisk": 100u64 * 1024 * 1024 * 1024,
                    "uptime": 86_400,
                    "level": "",
                    "ssl_fingerprint": "00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF:00:11:22:33:44:55:66:77:88:99:AA:BB:CC:DD:EE:FF",
                })
            })
            .collect();
        Ok(Reply::data(Value::Array(items)))
    })
}

/// `GET /nodes/{node}/status`.
pub fn status(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    ctx.state.with(|c| {
        let Some(n) = c.nodes.get(&node) else {
            return Err(ApiError::server(format!("no such node '{node}'")));
        };
        let used = super::cluster::node_mem_used(c, &node).min(n.memory);
        let mut memory = json!({"total": n.memory, "used": used, "free": n.memory - used});
        if c.version.is_9()
            && let Some(m) = memory.as_object_mut()
        {
            m.insert("available".into(), json!(n.memory - used));
        }
        let kernel = if c.version.is_9() { "6.17.2-1-pve" } else { "6.8.12-9-pve" };
        Ok(Reply::data(json!({
            "cpu": 0.02,
            "cpuinfo": {"model": "Simulated CPU", "cores": n.cpus / 2, "cpus": n.cpus, "sockets": 1, "mhz": "2400.000", "hvm": "1", "flags": ""},
            "memory": memory,
            "swap": {"total": 0, "used": 0, "free": 0},
            "rootfs": {"total": 100u64 << 30, "used": 10u64 << 30, "free": 90u64 << 30, "avail": 90u64 << 30},
            "loadavg": ["0.10", "0.05", "0.01"],
            "uptime": 86_400,
            "idle": 0,
            "wait": 0,
            "pveversion": c.version.pveversion(),
            "kversion": format!("Linux {kernel} #1 SMP PREEMPT_DYNAMIC PMX"),
            "current-kernel": {"sysname": "Linux", "release": kernel, "version": "#1 SMP PREEMPT_DYNAMIC PMX", "machine": "x86_64"},
            "boot-info": {"mode": "efi", "secureboot": 0},
            "ksm": {"shared": 0},
        })))
    })
}

/// `GET /nodes/{node}/lxc`: always empty (containers are not simulated).
pub fn lxc_list(ctx: &Ctx, p: &Params) -> HandlerResult {
    check_node(ctx, &p.node())?;
    Ok(Reply::data(json!([])))
}

/// `GET /nodes/{node}/tasks`.
pub fn tasks(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let source = p.str("source").unwrap_or_else(|| "archive".into());
    let vmid = p.int("vmid").map(|v| v.to_string());
    let typefilter = p.str("typefilter");
    let errors_only = p.bool("errors").unwrap_or(false);
    let start = usize::try_from(p.int("start").unwrap_or(0)).unwrap_or(0);
    let limit = usize::try_from(p.int("limit").unwrap_or(50)).unwrap_or(50);
    ctx.state.with(|c| {
        let auditor = c.can(&ctx.user, &format!("/nodes/{node}"), &["Sys.Audit"], false);
        let mut items: Vec<&crate::tasks::Task> = c
            .tasks
            .values()
            .filter(|t| t.node == node)
            .filter(|t| auditor || owns_task(&t.user, &ctx.user))
            .filter(|t| match source.as_str() {
                "active" => t.exitstatus.is_none(),
                "all" => true,
                _ => t.exitstatus.is_some(),
            })
            .filter(|t| vmid.as_ref().is_none_or(|v| &t.id == v))
            .filter(|t| typefilter.as_ref().is_none_or(|f| &t.kind == f))
            .filter(|t| !errors_only || t.exitstatus.as_deref().is_some_and(|e| e != "OK"))
            .collect();
        items.sort_by(|a, b| b.starttime.cmp(&a.starttime).then(b.pid.cmp(&a.pid)));
        let total = items.len();
        let page = items
            .into_iter()
            .skip(start)
            .take(limit)
            .map(|t| t.list_json())
            .collect();
        Ok(Reply {
            data: Value::Array(page),
            total: Some(total),
        })
    })
}

fn find_task<'a>(
    c: &'a crate::state::Cluster,
    node: &str,
    upid: &str,
) -> Result<&'a crate::tasks::Task, ApiError> {
    if crate::tasks::parse_upid(upid).is_none() {
        return Err(ApiError::param("upid", "unable to parse worker upid"));
    }
    c.tasks
        .get(upid)
        .filter(|t| t.node == node)
        .ok_or_else(|| ApiError::param("upid", "no such task"))
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
pub fn task_status(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let upid = p.str("upid").unwrap_or_default();
    ctx.state.with(|c| {
        let t = find_task(c, &node, &upid)?;
        check_task_access(c, &ctx.user, t, "Sys.Audit")?;
        Ok(Reply::data(t.status_json()))
    })
}

/// `GET /nodes/{node}/tasks/{upid}/log`.
pub fn task_log(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let upid = p.str("upid").unwrap_or_default();
    let start = usize::try_from(p.int("start").unwrap_or(0)).unwrap_or(0);
    let limit = usize::try_from(p.int("limit").unwrap_or(50)).unwrap_or(50);
    ctx.state.with(|c| {
        let t = find_task(c, &node, &upid)?;
        check_task_access(c, &ctx.user, t, "Sys.Audit")?;
        if t.log.is_empty() {
            return Ok(Reply {
                data: json!([{"n": 1, "t": "no content"}]),
                total: Some(1),
            });
        }
        let lines: Vec<Value> = t
            .log
            .iter()
            .enumerate()
            .skip(start)
            .take(limit)
            .map(|(i, l)| json!({"n": i + 1, "t": l}))
            .collect();
        Ok(Reply {
            data: Value::Array(lines),
            total: Some(t.log.len()),
        })
    })
}

/// `DELETE /nodes/{node}/tasks/{upid}`: marks a running task as stopped.
pub fn task_stop(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let upid = p.str("upid").unwrap_or_default();
    ctx.state.with(|c| {
        let t = find_task(c, &node, &upid)?;
        check_task_access(c, &ctx.user, t, "Sys.Modify")?;
        if let Some(t) = c.tasks.get_mut(&upid)
            && t.exitstatus.is_none()
        {
            t.log.push("received interrupt".into());
            t.log.push("TASK ERROR: interrupted by signal".into());
            t.exitstatus = Some("interrupted by signal".into());
            t.endtime = Some(crate::tasks::now_epoch());
            // Wake the task so it runs its cleanup now rather than after its latency.
            c.task_release.notify_waiters();
        }
        Ok(Reply::data(Value::Null))
    })
}
