//! The `permissions` of each endpoint pve-sim serves, per version, written from the schemas
//! (`apidoc.json` / `apidoc-9.1.json`; a test compares this table with them), and their
//! evaluation as `PVE::RPCEnvironment::exec_api2_perm_check` does it.

use serde_json::{Map, Value};

use super::{normalize_path, perm_error};
use crate::error::ApiError;
use crate::params::value_text;
use crate::state::Cluster;
use crate::version::PveVersion;

/// A permission test of the schema's `permissions.check`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Check {
    /// `user => 'all'`: any authenticated user (handlers may check more).
    All,
    /// `['perm', path, privs]` (`any`: one of them suffices).
    Perm {
        /// Path template (`/vms/{vmid}`).
        path: &'static str,
        /// Privileges.
        privs: &'static [&'static str],
        /// `'any', 1`.
        any: bool,
        /// `'require_param', name`: the check fails without that parameter.
        require: Option<&'static str>,
    },
    /// `['and', ...]`.
    And(&'static [Check]),
    /// `['or', ...]`.
    Or(&'static [Check]),
}

const fn perm(path: &'static str, privs: &'static [&'static str]) -> Check {
    Check::Perm {
        path,
        privs,
        any: false,
        require: None,
    }
}

const fn perm_any(path: &'static str, privs: &'static [&'static str]) -> Check {
    Check::Perm {
        path,
        privs,
        any: true,
        require: None,
    }
}

const ROOT_AUDIT: Check = perm("/", &["Sys.Audit"]);
const ROOT_CONSOLE: Check = perm("/", &["Sys.Console"]);
const VM_AUDIT: Check = perm("/vms/{vmid}", &["VM.Audit"]);
const VM_POWER: Check = perm("/vms/{vmid}", &["VM.PowerMgmt"]);
const VM_ALLOCATE: Check = perm("/vms/{vmid}", &["VM.Allocate"]);
const VM_SNAPSHOT: Check = perm("/vms/{vmid}", &["VM.Snapshot"]);
const VM_CONFIG: Check = perm_any(
    "/vms/{vmid}",
    &[
        "VM.Config.Disk",
        "VM.Config.CDROM",
        "VM.Config.CPU",
        "VM.Config.Memory",
        "VM.Config.Network",
        "VM.Config.HWType",
        "VM.Config.Options",
        "VM.Config.Cloudinit",
    ],
);
const STORAGE_READ: Check = perm_any(
    "/storage/{storage}",
    &["Datastore.Audit", "Datastore.AllocateSpace"],
);
const CLONE: Check = Check::And(&[
    perm("/vms/{vmid}", &["VM.Clone"]),
    Check::Or(&[
        perm("/vms/{newid}", &["VM.Allocate"]),
        Check::Perm {
            path: "/pool/{pool}",
            privs: &["VM.Allocate"],
            any: false,
            require: Some("pool"),
        },
    ]),
]);
/// `download-url`: allocation on the storage, and network access (`Sys.Modify` on `/` for
/// backwards compatibility, or `Sys.AccessNetwork` on the node).
const DOWNLOAD_URL: Check = Check::And(&[
    perm("/storage/{storage}", &["Datastore.AllocateTemplate"]),
    Check::Or(&[
        perm("/", &["Sys.Audit", "Sys.Modify"]),
        perm("/nodes/{node}", &["Sys.AccessNetwork"]),
    ]),
]);
/// 8.4: every `agent/*` call needs `VM.Monitor`.
const AGENT_84: Check = perm("/vms/{vmid}", &["VM.Monitor"]);
/// 9.1: `exec`/`exec-status` need `VM.GuestAgent.Unrestricted`.
const AGENT_UNRESTRICTED: Check = perm("/vms/{vmid}", &["VM.GuestAgent.Unrestricted"]);
/// 9.1: informational agent calls need `VM.GuestAgent.Audit` or `.Unrestricted`.
const AGENT_AUDIT: Check = perm_any(
    "/vms/{vmid}",
    &["VM.GuestAgent.Audit", "VM.GuestAgent.Unrestricted"],
);

/// The schema's permission test of an endpoint key on `version`; `None` for keys pve-sim does
/// not serve.
pub fn endpoint_check(version: PveVersion, key: &str) -> Option<Check> {
    let nine = version.is_9();
    let c = match key {
        "GET /version" | "GET /cluster/resources" | "GET /cluster/nextid" | "GET /nodes" => Check::All,
        "POST /access/ticket" => Check::All,
        "GET /cluster/status"
        | "GET /cluster/ha/resources"
        | "GET /cluster/ha/resources/{sid}"
        | "GET /cluster/ha/groups"
        | "GET /cluster/ha/groups/{group}" => ROOT_AUDIT,
        "POST /cluster/ha/resources"
        | "PUT /cluster/ha/resources/{sid}"
        | "DELETE /cluster/ha/resources/{sid}"
        | "POST /cluster/ha/groups"
        | "PUT /cluster/ha/groups/{group}"
        | "DELETE /cluster/ha/groups/{group}" => ROOT_CONSOLE,
        "GET /cluster/ha/rules" | "GET /cluster/ha/rules/{rule}" if nine => ROOT_AUDIT,
        "POST /cluster/ha/rules" | "PUT /cluster/ha/rules/{rule}" | "DELETE /cluster/ha/rules/{rule}"
            if nine =>
        {
            ROOT_CONSOLE
        }
        "GET /cluster/mapping/pci" => Check::All,
        "GET /nodes/{node}/status" => perm("/nodes/{node}", &["Sys.Audit"]),
        "GET /nodes/{node}/lxc" | "GET /nodes/{node}/qemu" | "POST /nodes/{node}/qemu" => Check::All,
        "GET /nodes/{node}/tasks"
        | "GET /nodes/{node}/tasks/{upid}/status"
        | "GET /nodes/{node}/tasks/{upid}/log"
        | "DELETE /nodes/{node}/tasks/{upid}" => Check::All,
        "GET /nodes/{node}/storage" => Check::All,
        "GET /nodes/{node}/storage/{storage}/status" | "GET /nodes/{node}/storage/{storage}/content" => {
            STORAGE_READ
        }
        "GET /nodes/{node}/storage/{storage}/content/{volume}"
        | "DELETE /nodes/{node}/storage/{storage}/content/{volume}" => Check::All,
        "POST /nodes/{node}/storage/{storage}/download-url" => DOWNLOAD_URL,
        "POST /nodes/{node}/storage/{storage}/upload" => {
            perm("/storage/{storage}", &["Datastore.AllocateTemplate"])
        }
        "DELETE /nodes/{node}/qemu/{vmid}" | "POST /nodes/{node}/qemu/{vmid}/template" => VM_ALLOCATE,
        "GET /nodes/{node}/qemu/{vmid}/config"
        | "GET /nodes/{node}/qemu/{vmid}/pending"
        | "GET /nodes/{node}/qemu/{vmid}/snapshot"
        | "GET /nodes/{node}/qemu/{vmid}/status/current" => VM_AUDIT,
        "POST /nodes/{node}/qemu/{vmid}/config" | "PUT /nodes/{node}/qemu/{vmid}/config" => VM_CONFIG,
        "POST /nodes/{node}/qemu/{vmid}/clone" => CLONE,
        "PUT /nodes/{node}/qemu/{vmid}/resize" => perm("/vms/{vmid}", &["VM.Config.Disk"]),
        "POST /nodes/{node}/qemu/{vmid}/snapshot"
        | "DELETE /nodes/{node}/qemu/{vmid}/snapshot/{snapname}" => VM_SNAPSHOT,
        "POST /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/rollback" => {
            perm_any("/vms/{vmid}", &["VM.Snapshot", "VM.Snapshot.Rollback"])
        }
        "GET /nodes/{node}/qemu/{vmid}/snapshot/{snapname}/config" => perm_any(
            "/vms/{vmid}",
            &["VM.Snapshot", "VM.Snapshot.Rollback", "VM.Audit"],
        ),
        "POST /nodes/{node}/qemu/{vmid}/status/start"
        | "POST /nodes/{node}/qemu/{vmid}/status/stop"
        | "POST /nodes/{node}/qemu/{vmid}/status/shutdown"
        | "POST /nodes/{node}/qemu/{vmid}/status/reboot"
        | "POST /nodes/{node}/qemu/{vmid}/status/reset"
        | "POST /nodes/{node}/qemu/{vmid}/status/suspend"
        | "POST /nodes/{node}/qemu/{vmid}/status/resume" => VM_POWER,
        "POST /nodes/{node}/qemu/{vmid}/agent/exec" | "GET /nodes/{node}/qemu/{vmid}/agent/exec-status" => {
            if nine {
                AGENT_UNRESTRICTED
            } else {
                AGENT_84
            }
        }
        "POST /nodes/{node}/qemu/{vmid}/agent/ping"
        | "GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo"
        | "GET /nodes/{node}/qemu/{vmid}/agent/get-host-name"
        | "GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces" => {
            if nine {
                AGENT_AUDIT
            } else {
                AGENT_84
            }
        }
        _ => return None,
    };
    Some(c)
}

/// `PVE::Tools::template_replace`: `{name}` → the parameter's value.
fn fill(template: &str, params: &Map<String, Value>) -> String {
    let mut out = String::new();
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let Some(end) = rest[start..].find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let name = &rest[start + 1..start + end];
        out.push_str(&params.get(name).map(value_text).unwrap_or_default());
        rest = &rest[start + end + 1..];
    }
    out.push_str(rest);
    out
}

impl Check {
    /// Runs the test for `who`; `Ok(false)` only with `noerr`.
    pub fn run(
        &self,
        c: &Cluster,
        who: &str,
        params: &Map<String, Value>,
        noerr: bool,
    ) -> Result<bool, ApiError> {
        match self {
            Check::All => Ok(true),
            Check::And(subs) => {
                for s in *subs {
                    s.run(c, who, params, false)?;
                }
                Ok(true)
            }
            Check::Or(subs) => {
                for s in *subs {
                    if s.run(c, who, params, true)? {
                        return Ok(true);
                    }
                }
                if noerr { Ok(false) } else { Err(perm_error(None)) }
            }
            Check::Perm {
                path,
                privs,
                any,
                require,
            } => {
                if let Some(r) = require
                    && !params.contains_key(*r)
                {
                    return if noerr { Ok(false) } else { Err(perm_error(None)) };
                }
                let filled = fill(path, params);
                let path = normalize_path(&filled).unwrap_or(filled);
                match c.check_full(who, &path, privs, *any) {
                    Ok(()) => Ok(true),
                    Err(_) if noerr => Ok(false),
                    Err(e) => Err(e),
                }
            }
        }
    }
}

/// `check_api2_permissions` for a routed request (enforcement off: always `Ok`).
pub fn check_endpoint(
    c: &Cluster,
    who: &str,
    key: &str,
    params: &Map<String, Value>,
) -> Result<(), ApiError> {
    if !c.access.enforced || who == "root@pam" || who.is_empty() {
        return Ok(());
    }
    match endpoint_check(c.version, key) {
        Some(check) => check.run(c, who, params, false).map(|_| ()),
        None => Err(perm_error(Some("user != root@pam"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn templates_are_filled() {
        let p: Map<String, Value> =
            serde_json::from_str(r#"{"vmid": 100, "pool": "capi"}"#).unwrap_or_default();
        assert_eq!(fill("/vms/{vmid}", &p), "/vms/100");
        assert_eq!(fill("/pool/{pool}/x", &p), "/pool/capi/x");
    }
}
