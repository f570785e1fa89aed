//! The route table: method and path segments → endpoint key, handler, validator.

use super::specs::*;
use super::{Route, agent, cluster, config, create, ha, ha_rules, mk, nodes, power, qemu, snapshot, storage};
use crate::version::PveVersion;

/// Every endpoint key pve-sim serves (the `/cluster/ha/rules` ones only on 9.x).
pub const ENDPOINT_KEYS: &[&str] = &[
    "DELETE /cluster/ha/groups/{group}",
    "DELETE /cluster/ha/resources/{sid}",
    "DELETE /cluster/ha/rules/{rule}",
    "DELETE /nodes/{node}/qemu/{vmid}",
    "DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}",
    "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
    "DELETE /nodes/{node}/tasks/{upid}",
    "GET /cluster/ha/groups",
    "GET /cluster/ha/groups/{group}",
    "GET /cluster/ha/resources",
    "GET /cluster/ha/resources/{sid}",
    "GET /cluster/ha/rules",
    "GET /cluster/ha/rules/{rule}",
    "GET /cluster/mapping/pci",
    "GET /cluster/nextid",
    "GET /cluster/resources",
    "GET /cluster/status",
    "GET /nodes",
    "GET /nodes/{node}/lxc",
    "GET /nodes/{node}/qemu",
    "GET /nodes/{node}/qemu/{vmid}/agent/exec-status",
    "GET /nodes/{node}/qemu/{vmid}/agent/get-host-name",
    "GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo",
    "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
    "GET /nodes/{node}/qemu/{vmid}/config",
    "GET /nodes/{node}/qemu/{vmid}/pending",
    "GET /nodes/{node}/qemu/{vmid}/snapshot",
    "GET /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
    "GET /nodes/{node}/qemu/{vmid}/status/current",
    "GET /nodes/{node}/status",
    "GET /nodes/{node}/storage",
    "GET /nodes/{node}/storage/{storage}/content",
    "GET /nodes/{node}/storage/{storage}/content/{volume}",
    "GET /nodes/{node}/storage/{storage}/status",
    "GET /nodes/{node}/tasks",
    "GET /nodes/{node}/tasks/{upid}/log",
    "GET /nodes/{node}/tasks/{upid}/status",
    "GET /version",
    "POST /access/ticket",
    "POST /cluster/ha/groups",
    "POST /cluster/ha/resources",
    "POST /cluster/ha/rules",
    "POST /nodes/{node}/qemu",
    "POST /nodes/{node}/qemu/{vmid}/agent/exec",
    "POST /nodes/{node}/qemu/{vmid}/agent/ping",
    "POST /nodes/{node}/qemu/{vmid}/clone",
    "POST /nodes/{node}/qemu/{vmid}/config",
    "POST /nodes/{node}/qemu/{vmid}/snapshot",
    "POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback",
    "POST /nodes/{node}/qemu/{vmid}/status/reboot",
    "POST /nodes/{node}/qemu/{vmid}/status/reset",
    "POST /nodes/{node}/qemu/{vmid}/status/resume",
    "POST /nodes/{node}/qemu/{vmid}/status/shutdown",
    "POST /nodes/{node}/qemu/{vmid}/status/start",
    "POST /nodes/{node}/qemu/{vmid}/status/stop",
    "POST /nodes/{node}/qemu/{vmid}/status/suspend",
    "POST /nodes/{node}/qemu/{vmid}/template",
    "POST /nodes/{node}/storage/{storage}/download-url",
    "POST /nodes/{node}/storage/{storage}/upload",
    "PUT /cluster/ha/groups/{group}",
    "PUT /cluster/ha/resources/{sid}",
    "PUT /cluster/ha/rules/{rule}",
    "PUT /nodes/{node}/qemu/{vmid}/config",
    "PUT /nodes/{node}/qemu/{vmid}/resize",
];

/// Whether `version` serves the endpoint `key`.
pub fn serves(key: &str, version: PveVersion) -> bool {
    ENDPOINT_KEYS.contains(&key) && (version.is_9() || !key.contains("/cluster/ha/rules"))
}

/// Routes `/cluster/ha/...` (rules only exist on 9.x).
fn ha_route(method: &str, segs: &[&str], version: PveVersion) -> Option<Route> {
    let s = |v: &str| v.to_string();
    match (method, segs) {
        ("GET", ["resources"]) => mk("GET /cluster/ha/resources", ha::list, v_ha_list, vec![]),
        ("POST", ["resources"]) => mk("POST /cluster/ha/resources", ha::create, v_ha_create, vec![]),
        ("GET", ["resources", sid]) => mk(
            "GET /cluster/ha/resources/{sid}",
            ha::get,
            v_ha_sid,
            vec![("sid", s(sid))],
        ),
        ("PUT", ["resources", sid]) => mk(
            "PUT /cluster/ha/resources/{sid}",
            ha::update,
            v_ha_update,
            vec![("sid", s(sid))],
        ),
        ("DELETE", ["resources", sid]) => mk(
            "DELETE /cluster/ha/resources/{sid}",
            ha::delete,
            v_ha_delete,
            vec![("sid", s(sid))],
        ),
        ("GET", ["groups"]) => mk("GET /cluster/ha/groups", ha::groups, v_none, vec![]),
        ("POST", ["groups"]) => mk(
            "POST /cluster/ha/groups",
            ha::group_create,
            v_ha_group_create,
            vec![],
        ),
        ("GET", ["groups", g]) => mk(
            "GET /cluster/ha/groups/{group}",
            ha::group_get,
            v_ha_group,
            vec![("group", s(g))],
        ),
        ("PUT", ["groups", g]) => mk(
            "PUT /cluster/ha/groups/{group}",
            ha::group_update,
            v_ha_group_update,
            vec![("group", s(g))],
        ),
        ("DELETE", ["groups", g]) => mk(
            "DELETE /cluster/ha/groups/{group}",
            ha::group_delete,
            v_ha_group,
            vec![("group", s(g))],
        ),
        _ if !version.is_9() => None,
        ("GET", ["rules"]) => mk("GET /cluster/ha/rules", ha_rules::list, v_rules_list, vec![]),
        ("POST", ["rules"]) => mk("POST /cluster/ha/rules", ha_rules::create, v_rule_create, vec![]),
        ("GET", ["rules", r]) => mk(
            "GET /cluster/ha/rules/{rule}",
            ha_rules::get,
            v_rule,
            vec![("rule", s(r))],
        ),
        ("PUT", ["rules", r]) => mk(
            "PUT /cluster/ha/rules/{rule}",
            ha_rules::update,
            v_rule_update,
            vec![("rule", s(r))],
        ),
        ("DELETE", ["rules", r]) => mk(
            "DELETE /cluster/ha/rules/{rule}",
            ha_rules::delete,
            v_rule,
            vec![("rule", s(r))],
        ),
        _ => None,
    }
}

/// Matches a method and the path segments (after `/api2/json`, decoded and split as PVE's
/// `RESTHandler::find_handler` does: empty segments dropped) to a route. Below
/// `.../storage/{storage}/content/` the rest of the path is the volume id, slashes included
/// (pve-storage mounts that handler with `fragmentDelimiter => ''`).
pub fn route(method: &str, segs: &[&str], version: PveVersion) -> Option<Route> {
    use cluster as cl;
    use nodes as nd;
    use qemu as qm;
    use storage as st;
    let s = |v: &str| v.to_string();
    match (method, segs) {
        ("GET", ["version"]) => mk("GET /version", cl::version, v_none, vec![]),
        ("POST", ["access", "ticket"]) => mk("POST /access/ticket", crate::auth::login, v_login, vec![]),
        ("GET", ["cluster", "status"]) => mk("GET /cluster/status", cl::status, v_none, vec![]),
        ("GET", ["cluster", "resources"]) => mk("GET /cluster/resources", cl::resources, v_resources, vec![]),
        ("GET", ["cluster", "nextid"]) => mk("GET /cluster/nextid", cl::nextid, v_nextid, vec![]),
        ("GET", ["cluster", "mapping", "pci"]) => {
            mk("GET /cluster/mapping/pci", cl::pci_mappings, v_none, vec![])
        }
        (_, ["cluster", "ha", rest @ ..]) => ha_route(method, rest, version),
        ("GET", ["nodes"]) => mk("GET /nodes", nd::list, v_none, vec![]),
        ("GET", ["nodes", n, "status"]) => mk(
            "GET /nodes/{node}/status",
            nd::status,
            v_node,
            vec![("node", s(n))],
        ),
        ("GET", ["nodes", n, "lxc"]) => mk(
            "GET /nodes/{node}/lxc",
            nd::lxc_list,
            v_node,
            vec![("node", s(n))],
        ),
        ("GET", ["nodes", n, "tasks"]) => mk(
            "GET /nodes/{node}/tasks",
            nd::tasks,
            v_tasks,
            vec![("node", s(n))],
        ),
        ("GET", ["nodes", n, "tasks", u, "status"]) => mk(
            "GET /nodes/{node}/tasks/{upid}/status",
            nd::task_status,
            v_task,
            vec![("node", s(n)), ("upid", s(u))],
        ),
        ("GET", ["nodes", n, "tasks", u, "log"]) => mk(
            "GET /nodes/{node}/tasks/{upid}/log",
            nd::task_log,
            v_task_log,
            vec![("node", s(n)), ("upid", s(u))],
        ),
        ("DELETE", ["nodes", n, "tasks", u]) => mk(
            "DELETE /nodes/{node}/tasks/{upid}",
            nd::task_stop,
            v_task,
            vec![("node", s(n)), ("upid", s(u))],
        ),
        ("GET", ["nodes", n, "storage"]) => mk(
            "GET /nodes/{node}/storage",
            st::list,
            v_storage_list,
            vec![("node", s(n))],
        ),
        ("GET", ["nodes", n, "storage", sto, "status"]) => mk(
            "GET /nodes/{node}/storage/{storage}/status",
            st::status,
            v_storage,
            vec![("node", s(n)), ("storage", s(sto))],
        ),
        ("GET", ["nodes", n, "storage", sto, "content"]) => mk(
            "GET /nodes/{node}/storage/{storage}/content",
            st::content_list,
            v_content_list,
            vec![("node", s(n)), ("storage", s(sto))],
        ),
        ("GET", ["nodes", n, "storage", sto, "content", vol @ ..]) if !vol.is_empty() => mk(
            "GET /nodes/{node}/storage/{storage}/content/{volume}",
            st::content_get,
            v_volume,
            vec![("node", s(n)), ("storage", s(sto)), ("volume", vol.join("/"))],
        ),
        ("DELETE", ["nodes", n, "storage", sto, "content", vol @ ..]) if !vol.is_empty() => mk(
            "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
            st::content_delete,
            v_volume_delete,
            vec![("node", s(n)), ("storage", s(sto)), ("volume", vol.join("/"))],
        ),
        ("POST", ["nodes", n, "storage", sto, "download-url"]) => mk(
            "POST /nodes/{node}/storage/{storage}/download-url",
            super::download::download_url,
            v_download_url,
            vec![("node", s(n)), ("storage", s(sto))],
        ),
        ("POST", ["nodes", n, "storage", sto, "upload"]) => mk(
            "POST /nodes/{node}/storage/{storage}/upload",
            st::upload,
            v_upload,
            vec![("node", s(n)), ("storage", s(sto))],
        ),
        ("GET", ["nodes", n, "qemu"]) => mk(
            "GET /nodes/{node}/qemu",
            qm::list,
            v_qemu_list,
            vec![("node", s(n))],
        ),
        ("POST", ["nodes", n, "qemu"]) => mk(
            "POST /nodes/{node}/qemu",
            create::create,
            create::validate_create,
            vec![("node", s(n))],
        ),
        (_, ["nodes", n, "qemu", vmid, rest @ ..]) => vm_route(method, n, vmid, rest),
        _ => None,
    }
}

fn vm_route(method: &str, node: &str, vmid: &str, rest: &[&str]) -> Option<Route> {
    use agent as ag;
    use power as pw;
    use qemu as qm;
    let pp = || vec![("node", node.to_string()), ("vmid", vmid.to_string())];
    match (method, rest) {
        ("DELETE", []) => mk("DELETE /nodes/{node}/qemu/{vmid}", qm::delete, v_delete, pp()),
        ("GET", ["config"]) => mk(
            "GET /nodes/{node}/qemu/{vmid}/config",
            config::config_get,
            v_config_get,
            pp(),
        ),
        ("POST", ["config"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/config",
            config::config_post,
            validate_config_async,
            pp(),
        ),
        ("PUT", ["config"]) => mk(
            "PUT /nodes/{node}/qemu/{vmid}/config",
            config::config_put,
            validate_config_sync,
            pp(),
        ),
        ("GET", ["pending"]) => mk(
            "GET /nodes/{node}/qemu/{vmid}/pending",
            config::pending,
            v_vm,
            pp(),
        ),
        ("POST", ["clone"]) => mk("POST /nodes/{node}/qemu/{vmid}/clone", qm::clone, v_clone, pp()),
        ("PUT", ["resize"]) => mk("PUT /nodes/{node}/qemu/{vmid}/resize", qm::resize, v_resize, pp()),
        ("POST", ["template"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/template",
            qm::template,
            v_template,
            pp(),
        ),
        ("GET", ["snapshot"]) => mk(
            "GET /nodes/{node}/qemu/{vmid}/snapshot",
            snapshot::list,
            v_vm,
            pp(),
        ),
        ("POST", ["snapshot"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/snapshot",
            snapshot::create,
            v_snap_create,
            pp(),
        ),
        ("DELETE", ["snapshot", snap]) => {
            let mut p = pp();
            p.push(("snapname", snap.to_string()));
            mk(
                "DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}",
                snapshot::delete,
                v_snap_delete,
                p,
            )
        }
        ("POST", ["snapshot", snap, "rollback"]) => {
            let mut p = pp();
            p.push(("snapname", snap.to_string()));
            mk(
                "POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback",
                snapshot::rollback,
                v_snap_rollback,
                p,
            )
        }
        ("GET", ["snapshot", snap, "config"]) => {
            let mut p = pp();
            p.push(("snapname", snap.to_string()));
            mk(
                "GET /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
                snapshot::config,
                v_snap,
                p,
            )
        }
        ("GET", ["status", "current"]) => mk(
            "GET /nodes/{node}/qemu/{vmid}/status/current",
            pw::current,
            v_vm,
            pp(),
        ),
        ("POST", ["status", "start"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/status/start",
            pw::start,
            v_start,
            pp(),
        ),
        ("POST", ["status", "stop"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/status/stop",
            pw::stop,
            v_stop,
            pp(),
        ),
        ("POST", ["status", "shutdown"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/status/shutdown",
            pw::shutdown,
            v_shutdown,
            pp(),
        ),
        ("POST", ["status", "reboot"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/status/reboot",
            pw::reboot,
            v_reboot,
            pp(),
        ),
        ("POST", ["status", "reset"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/status/reset",
            pw::reset,
            v_skiplock,
            pp(),
        ),
        ("POST", ["status", "suspend"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/status/suspend",
            pw::suspend,
            v_suspend,
            pp(),
        ),
        ("POST", ["status", "resume"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/status/resume",
            pw::resume,
            v_resume,
            pp(),
        ),
        ("POST", ["agent", "exec"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/agent/exec",
            ag::exec,
            v_exec,
            pp(),
        ),
        ("GET", ["agent", "exec-status"]) => mk(
            "GET /nodes/{node}/qemu/{vmid}/agent/exec-status",
            ag::exec_status,
            v_exec_status,
            pp(),
        ),
        ("GET", ["agent", "get-osinfo"]) => mk(
            "GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo",
            ag::get_osinfo,
            v_vm,
            pp(),
        ),
        ("GET", ["agent", "get-host-name"]) => mk(
            "GET /nodes/{node}/qemu/{vmid}/agent/get-host-name",
            ag::get_host_name,
            v_vm,
            pp(),
        ),
        ("GET", ["agent", "network-get-interfaces"]) => mk(
            "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces",
            ag::network_get_interfaces,
            v_vm,
            pp(),
        ),
        ("POST", ["agent", "ping"]) => mk("POST /nodes/{node}/qemu/{vmid}/agent/ping", ag::ping, v_vm, pp()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_key_routes_to_itself() {
        for key in ENDPOINT_KEYS {
            let (method, path) = key.split_once(' ').unwrap_or_default();
            let segs: Vec<&str> = path
                .split('/')
                .filter(|s| !s.is_empty())
                .map(|s| match s {
                    "{node}" => "pve1",
                    "{vmid}" | "{newid}" => "100",
                    "{storage}" => "local",
                    "{volume}" => "local:iso/x.iso",
                    "{sid}" => "vm:100",
                    s if s.starts_with('{') => "x",
                    s => s,
                })
                .collect();
            let r = route(method, &segs, PveVersion::V9_1);
            assert_eq!(r.map(|r| r.key), Some(*key), "{key}");
        }
    }
}
