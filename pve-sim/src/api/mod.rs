//! API handlers and the route table.

pub mod agent;
pub mod cluster;
pub mod config;
pub mod create;
pub mod nodes;
pub mod power;
pub mod qemu;
pub mod storage;

use serde_json::{Map, Value};

use crate::error::ApiError;
use crate::params::Params;
use crate::state::SimState;
use crate::validate::{ParamSpec, Rule, opt, req, validate};

/// What a handler sees besides its parameters.
pub struct Ctx {
    /// Cluster state.
    pub state: SimState,
    /// Authenticated user id or token id (empty for the login call).
    pub user: String,
    /// The uploaded file (upload endpoint only).
    pub upload: Option<storage::UploadFile>,
}

/// A successful answer: `data`, plus `total` for some list endpoints.
#[derive(Debug, Clone)]
pub struct Reply {
    /// The `data` value.
    pub data: Value,
    /// Optional top-level `total`.
    pub total: Option<usize>,
}

impl Reply {
    /// Plain data.
    pub fn data(data: Value) -> Self {
        Self { data, total: None }
    }
}

/// Result of a handler.
pub type HandlerResult = Result<Reply, ApiError>;
/// A handler.
pub type Handler = fn(&Ctx, &Params) -> HandlerResult;
/// A parameter validator.
pub type Validator = fn(&mut Map<String, Value>) -> Result<(), ApiError>;

/// A matched route.
pub struct Route {
    /// Endpoint key, e.g. `GET /nodes/{node}/qemu/{vmid}/config`.
    pub key: &'static str,
    /// Handler.
    pub handler: Handler,
    /// Validator.
    pub validate: Validator,
    /// Path parameters.
    pub path_params: Vec<(&'static str, String)>,
}

const NODE: ParamSpec = req("node", Rule::Node);
const VMID: ParamSpec = req("vmid", Rule::VmId);

macro_rules! spec {
    ($name:ident, [$($p:expr),* $(,)?]) => {
        fn $name(p: &mut Map<String, Value>) -> Result<(), ApiError> {
            validate(p, &[$($p),*])
        }
    };
}

spec!(v_none, []);
spec!(
    v_login,
    [
        req("username", Rule::Str(Some(64))),
        req("password", Rule::Str(None)),
        opt("realm", Rule::Str(Some(32))),
        opt("otp", Rule::Str(None)),
        opt("tfa-challenge", Rule::Str(None)),
        opt("path", Rule::Str(Some(64))),
        opt("privs", Rule::Str(Some(64))),
        opt("new-format", Rule::Bool),
    ]
);
spec!(
    v_resources,
    [opt("type", Rule::Enum(&["vm", "storage", "node", "sdn"]))]
);
spec!(v_nextid, [opt("vmid", Rule::VmId)]);
spec!(v_ha_list, [opt("type", Rule::Enum(&["ct", "vm"]))]);
spec!(
    v_ha_create,
    [
        req("sid", Rule::Str(None)),
        opt(
            "state",
            Rule::Enum(&["started", "stopped", "enabled", "disabled", "ignored"])
        ),
        opt("group", Rule::ConfigId),
        opt("max_restart", Rule::Int(Some(0), None)),
        opt("max_relocate", Rule::Int(Some(0), None)),
        opt("comment", Rule::Str(Some(4096))),
        opt("type", Rule::Enum(&["ct", "vm"])),
    ]
);
spec!(v_ha_sid, [req("sid", Rule::Str(None))]);
spec!(
    v_ha_update,
    [
        req("sid", Rule::Str(None)),
        opt(
            "state",
            Rule::Enum(&["started", "stopped", "enabled", "disabled", "ignored"])
        ),
        opt("group", Rule::ConfigId),
        opt("max_restart", Rule::Int(Some(0), None)),
        opt("max_relocate", Rule::Int(Some(0), None)),
        opt("comment", Rule::Str(Some(4096))),
        opt("delete", Rule::Str(Some(4096))),
        opt("digest", Rule::Str(Some(64))),
        opt("type", Rule::Enum(&["ct", "vm"])),
    ]
);
spec!(v_node, [NODE]);
spec!(v_qemu_list, [NODE, opt("full", Rule::Bool)]);
spec!(v_vm, [NODE, VMID]);
spec!(
    v_delete,
    [
        NODE,
        VMID,
        opt("purge", Rule::Bool),
        opt("destroy-unreferenced-disks", Rule::Bool),
        opt("skiplock", Rule::Bool),
    ]
);
spec!(
    v_config_get,
    [
        NODE,
        VMID,
        opt("current", Rule::Bool),
        opt("snapshot", Rule::ConfigId)
    ]
);
spec!(
    v_clone,
    [
        NODE,
        VMID,
        req("newid", Rule::VmId),
        opt("name", Rule::DnsName),
        opt("description", Rule::Str(None)),
        opt("target", Rule::Node),
        opt("full", Rule::Bool),
        opt("storage", Rule::StorageId),
        opt("format", Rule::Enum(&["raw", "qcow2", "vmdk"])),
        opt("pool", Rule::Str(None)),
        opt("snapname", Rule::ConfigId),
        opt("bwlimit", Rule::Int(Some(0), None)),
    ]
);
spec!(
    v_resize,
    [
        NODE,
        VMID,
        req("disk", Rule::Any),
        req("size", Rule::Str(None)),
        opt("digest", Rule::Str(Some(40))),
        opt("skiplock", Rule::Bool)
    ]
);
spec!(v_template, [NODE, VMID, opt("disk", Rule::Any)]);
spec!(
    v_start,
    [
        NODE,
        VMID,
        opt("timeout", Rule::Int(Some(0), None)),
        opt("skiplock", Rule::Bool),
        opt("machine", Rule::Str(None)),
        opt("force-cpu", Rule::Str(None)),
        opt("migratedfrom", Rule::Node),
        opt("migration_network", Rule::Str(None)),
        opt("migration_type", Rule::Enum(&["secure", "insecure"])),
        opt("stateuri", Rule::Str(Some(128))),
        opt("targetstorage", Rule::Str(None)),
        opt("nets-host-mtu", Rule::Str(None)),
    ]
);
spec!(
    v_stop,
    [
        NODE,
        VMID,
        opt("timeout", Rule::Int(Some(0), None)),
        opt("skiplock", Rule::Bool),
        opt("keepActive", Rule::Bool),
        opt("overrule-shutdown", Rule::Bool),
        opt("migratedfrom", Rule::Node),
    ]
);
spec!(
    v_shutdown,
    [
        NODE,
        VMID,
        opt("timeout", Rule::Int(Some(0), None)),
        opt("forceStop", Rule::Bool),
        opt("keepActive", Rule::Bool),
        opt("skiplock", Rule::Bool),
    ]
);
spec!(v_reboot, [NODE, VMID, opt("timeout", Rule::Int(Some(0), None))]);
spec!(v_skiplock, [NODE, VMID, opt("skiplock", Rule::Bool)]);
spec!(
    v_suspend,
    [
        NODE,
        VMID,
        opt("skiplock", Rule::Bool),
        opt("todisk", Rule::Bool),
        opt("statestorage", Rule::StorageId)
    ]
);
spec!(
    v_resume,
    [
        NODE,
        VMID,
        opt("skiplock", Rule::Bool),
        opt("nocheck", Rule::Bool)
    ]
);
spec!(
    v_snap_create,
    [
        NODE,
        VMID,
        req("snapname", Rule::ConfigId),
        opt("description", Rule::Str(None)),
        opt("vmstate", Rule::Bool)
    ]
);
spec!(v_snap, [NODE, VMID, req("snapname", Rule::ConfigId)]);
spec!(
    v_snap_delete,
    [
        NODE,
        VMID,
        req("snapname", Rule::ConfigId),
        opt("force", Rule::Bool)
    ]
);
spec!(
    v_exec,
    [
        NODE,
        VMID,
        opt("command", Rule::Array),
        opt("input-data", Rule::Str(Some(65536)))
    ]
);
spec!(v_exec_status, [NODE, VMID, req("pid", Rule::Int(None, None))]);
spec!(
    v_tasks,
    [
        NODE,
        opt("errors", Rule::Bool),
        opt("limit", Rule::Int(Some(0), None)),
        opt("since", Rule::Int(None, None)),
        opt("source", Rule::Enum(&["archive", "active", "all"])),
        opt("start", Rule::Int(Some(0), None)),
        opt("statusfilter", Rule::Str(None)),
        opt("typefilter", Rule::Str(None)),
        opt("until", Rule::Int(None, None)),
        opt("userfilter", Rule::Str(None)),
        opt("vmid", Rule::VmId),
    ]
);
spec!(v_task, [NODE, req("upid", Rule::Str(None))]);
spec!(
    v_task_log,
    [
        NODE,
        req("upid", Rule::Str(None)),
        opt("start", Rule::Int(Some(0), None)),
        opt("limit", Rule::Int(Some(0), None)),
        opt("download", Rule::Bool)
    ]
);
spec!(
    v_storage_list,
    [
        NODE,
        opt("content", Rule::Str(None)),
        opt("enabled", Rule::Bool),
        opt("format", Rule::Bool),
        opt("storage", Rule::StorageId),
        opt("target", Rule::Node),
    ]
);
spec!(v_storage, [NODE, req("storage", Rule::StorageId)]);
spec!(
    v_content_list,
    [
        NODE,
        req("storage", Rule::StorageId),
        opt("content", Rule::Str(None)),
        opt("vmid", Rule::VmId)
    ]
);
spec!(
    v_volume,
    [
        NODE,
        opt("storage", Rule::StorageId),
        req("volume", Rule::Str(None))
    ]
);
spec!(
    v_volume_delete,
    [
        NODE,
        opt("storage", Rule::StorageId),
        req("volume", Rule::Str(None)),
        opt("delay", Rule::Int(Some(1), Some(30)))
    ]
);
spec!(
    v_upload,
    [
        NODE,
        req("storage", Rule::StorageId),
        req("content", Rule::Enum(&["iso", "vztmpl", "import"])),
        req("filename", Rule::Str(Some(255))),
        opt("checksum", Rule::Str(None)),
        opt(
            "checksum-algorithm",
            Rule::Enum(&["md5", "sha1", "sha224", "sha256", "sha384", "sha512"])
        ),
        opt("tmpfilename", Rule::Str(None)),
    ]
);

fn mk(
    key: &'static str,
    handler: Handler,
    validate: Validator,
    path_params: Vec<(&'static str, String)>,
) -> Option<Route> {
    Some(Route {
        key,
        handler,
        validate,
        path_params,
    })
}

/// Matches a method and decoded path segments (after `/api2/json`) to a route.
pub fn route(method: &str, segs: &[&str]) -> Option<Route> {
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
        ("GET", ["cluster", "ha", "resources"]) => {
            mk("GET /cluster/ha/resources", cl::ha_list, v_ha_list, vec![])
        }
        ("POST", ["cluster", "ha", "resources"]) => {
            mk("POST /cluster/ha/resources", cl::ha_create, v_ha_create, vec![])
        }
        ("GET", ["cluster", "ha", "resources", sid]) => mk(
            "GET /cluster/ha/resources/{sid}",
            cl::ha_get,
            v_ha_sid,
            vec![("sid", s(sid))],
        ),
        ("PUT", ["cluster", "ha", "resources", sid]) => mk(
            "PUT /cluster/ha/resources/{sid}",
            cl::ha_update,
            v_ha_update,
            vec![("sid", s(sid))],
        ),
        ("GET", ["cluster", "mapping", "pci"]) => {
            mk("GET /cluster/mapping/pci", cl::pci_mappings, v_none, vec![])
        }
        ("GET", ["cluster", "ha", "groups"]) => mk("GET /cluster/ha/groups", cl::ha_groups, v_none, vec![]),
        ("DELETE", ["cluster", "ha", "resources", sid]) => mk(
            "DELETE /cluster/ha/resources/{sid}",
            cl::ha_delete,
            v_ha_sid,
            vec![("sid", s(sid))],
        ),
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
        ("GET", ["nodes", n, "storage", sto, "content", vol]) => mk(
            "GET /nodes/{node}/storage/{storage}/content/{volume}",
            st::content_get,
            v_volume,
            vec![("node", s(n)), ("storage", s(sto)), ("volume", s(vol))],
        ),
        ("DELETE", ["nodes", n, "storage", sto, "content", vol]) => mk(
            "DELETE /nodes/{node}/storage/{storage}/content/{volume}",
            st::content_delete,
            v_volume_delete,
            vec![("node", s(n)), ("storage", s(sto)), ("volume", s(vol))],
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
            config::validate_config_async,
            pp(),
        ),
        ("PUT", ["config"]) => mk(
            "PUT /nodes/{node}/qemu/{vmid}/config",
            config::config_put,
            config::validate_config_sync,
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
            qm::snapshot_list,
            v_vm,
            pp(),
        ),
        ("POST", ["snapshot"]) => mk(
            "POST /nodes/{node}/qemu/{vmid}/snapshot",
            qm::snapshot_create,
            v_snap_create,
            pp(),
        ),
        ("DELETE", ["snapshot", snap]) => {
            let mut p = pp();
            p.push(("snapname", snap.to_string()));
            mk(
                "DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}",
                qm::snapshot_delete,
                v_snap_delete,
                p,
            )
        }
        ("GET", ["snapshot", snap, "config"]) => {
            let mut p = pp();
            p.push(("snapname", snap.to_string()));
            mk(
                "GET /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config",
                qm::snapshot_config,
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

/// `hostname lookup` failure for an unknown node (PVE tries to proxy to it).
/// An offline member gives 595 (the proxy cannot reach it).
pub fn check_node(ctx: &Ctx, node: &str) -> Result<(), ApiError> {
    match ctx.state.with(|c| c.nodes.get(node).map(|n| n.online)) {
        Some(true) => Ok(()),
        Some(false) => Err(ApiError::status(
            595,
            "Errors during connection establishment, proxy handshake: No route to host",
        )),
        None => Err(ApiError::server(format!(
            "hostname lookup '{node}' failed - failed to get address info for: {node}: Name or service not known"
        ))),
    }
}
