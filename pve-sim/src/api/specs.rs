//! Parameter specifications of the endpoints (written from the 8.4 and 9.1 schemas).

use serde_json::{Map, Value};

use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::params::value_text;
use crate::propstr::{check_config_value, is_config_key};
use crate::validate::{ParamSpec, Rule, check_rule, opt, opt9, req, validate};
use crate::version::PveVersion;

const NODE: ParamSpec = req("node", Rule::Node);
const VMID: ParamSpec = req("vmid", Rule::VmId);

macro_rules! spec {
    ($name:ident, [$($p:expr),* $(,)?]) => {
        pub(crate) fn $name(p: &mut Map<String, Value>, v: PveVersion) -> Result<(), ApiError> {
            validate(p, &[$($p),*], v)
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
        req("sid", Rule::HaSid),
        opt(
            "state",
            Rule::Enum(&["started", "stopped", "enabled", "disabled", "ignored"])
        ),
        opt("group", Rule::ConfigId),
        opt("max_restart", Rule::Int(Some(0), None)),
        opt("max_relocate", Rule::Int(Some(0), None)),
        opt("comment", Rule::Str(Some(4096))),
        opt("type", Rule::Enum(&["ct", "vm"])),
        opt9("failback", Rule::Bool),
    ]
);
spec!(v_ha_sid, [req("sid", Rule::HaSid)]);
spec!(v_ha_delete, [req("sid", Rule::HaSid), opt9("purge", Rule::Bool)]);
spec!(
    v_ha_update,
    [
        req("sid", Rule::HaSid),
        opt(
            "state",
            Rule::Enum(&["started", "stopped", "enabled", "disabled", "ignored"])
        ),
        opt("group", Rule::ConfigId),
        opt("max_restart", Rule::Int(Some(0), None)),
        opt("max_relocate", Rule::Int(Some(0), None)),
        opt("comment", Rule::Str(Some(4096))),
        opt("delete", Rule::ConfigIdList),
        opt("digest", Rule::Str(Some(64))),
        opt("type", Rule::Enum(&["ct", "vm"])),
        opt9("failback", Rule::Bool),
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
        opt9("with-conntrack-state", Rule::Bool),
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
    v_snap_rollback,
    [
        NODE,
        VMID,
        req("snapname", Rule::ConfigId),
        opt("start", Rule::Bool)
    ]
);
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

/// `download-url`: the schema's types, the `url` pattern `https?://.*` (anchored, as PVE's
/// JSONSchema anchors patterns) and `checksum` / `checksum-algorithm` requiring each other.
pub(crate) fn v_download_url(p: &mut Map<String, Value>, v: PveVersion) -> Result<(), ApiError> {
    let mut errors = match validate(
        p,
        &[
            NODE,
            req("storage", Rule::StorageId),
            req("url", Rule::Str(None)),
            req("content", Rule::Enum(&["iso", "vztmpl", "import"])),
            req("filename", Rule::Str(Some(255))),
            opt("checksum", Rule::Str(None)),
            opt(
                "checksum-algorithm",
                Rule::Enum(&["md5", "sha1", "sha224", "sha256", "sha384", "sha512"]),
            ),
            opt("compression", Rule::Enum(&["gz", "lzo", "zst", "bz2"])),
            opt("verify-certificates", Rule::Bool),
        ],
        v,
    ) {
        Ok(()) => BTreeMap::new(),
        Err(e) => e.errors.unwrap_or_default(),
    };
    if let Some(url) = p.get("url").map(value_text)
        && !errors.contains_key("url")
        && !crate::formats::pattern_matches("https?://.*", &url)
    {
        errors.insert("url".into(), "value does not match the regex pattern".into());
    }
    for (k, other) in [
        ("checksum", "checksum-algorithm"),
        ("checksum-algorithm", "checksum"),
    ] {
        if p.contains_key(k) && !p.contains_key(other) {
            errors.insert(other.into(), format!("missing property required by '{k}'"));
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::params(errors))
    }
}

spec!(
    v_ha_group_create,
    [
        req("group", Rule::ConfigId),
        req("nodes", Rule::HaNodeList),
        opt("restricted", Rule::Bool),
        opt("nofailback", Rule::Bool),
        opt("comment", Rule::Str(Some(4096))),
        opt("type", Rule::Enum(&["group"])),
    ]
);
spec!(
    v_ha_group_update,
    [
        req("group", Rule::ConfigId),
        opt("nodes", Rule::HaNodeList),
        opt("restricted", Rule::Bool),
        opt("nofailback", Rule::Bool),
        opt("comment", Rule::Str(Some(4096))),
        opt("delete", Rule::ConfigIdList),
        opt("digest", Rule::Str(Some(64))),
        opt("type", Rule::Enum(&["group"])),
    ]
);
spec!(v_ha_group, [req("group", Rule::ConfigId)]);
const RULE_TYPES: Rule = Rule::Enum(&["node-affinity", "resource-affinity"]);
spec!(
    v_rules_list,
    [opt("type", RULE_TYPES), opt("resource", Rule::Str(None))]
);
spec!(
    v_rule_create,
    [
        req("rule", Rule::ConfigId),
        req("type", RULE_TYPES),
        req("resources", Rule::HaSidList),
        opt("nodes", Rule::HaNodeList),
        opt("strict", Rule::Bool),
        opt("affinity", Rule::Enum(&["positive", "negative"])),
        opt("comment", Rule::Str(Some(4096))),
        opt("disable", Rule::Bool),
    ]
);
spec!(
    v_rule_update,
    [
        req("rule", Rule::ConfigId),
        req("type", RULE_TYPES),
        opt("resources", Rule::HaSidList),
        opt("nodes", Rule::HaNodeList),
        opt("strict", Rule::Bool),
        opt("affinity", Rule::Enum(&["positive", "negative"])),
        opt("comment", Rule::Str(Some(4096))),
        opt("disable", Rule::Bool),
        opt("delete", Rule::ConfigIdList),
        opt("digest", Rule::Str(Some(64))),
    ]
);
spec!(v_rule, [req("rule", Rule::ConfigId)]);

/// Parameters of config updates that are not config keys.
pub(crate) const CONTROL: &[&str] = &[
    "node",
    "vmid",
    "delete",
    "revert",
    "digest",
    "force",
    "skiplock",
    "background_delay",
];

pub(crate) fn validate_config(
    p: &mut Map<String, Value>,
    asynchronous: bool,
    version: PveVersion,
) -> Result<(), ApiError> {
    let mut errors = BTreeMap::new();
    for (k, v) in p.iter() {
        let res = match k.as_str() {
            "node" => check_rule(Rule::Node, v),
            "vmid" => check_rule(Rule::VmId, v),
            "digest" => check_rule(Rule::Str(Some(40)), v),
            "force" | "skiplock" => check_rule(Rule::Bool, v),
            "background_delay" if asynchronous => check_rule(Rule::Int(Some(1), Some(30)), v),
            "delete" | "revert" => {
                let list = value_text(v);
                match list
                    .split([',', ';', ' '])
                    .filter(|x| !x.is_empty())
                    .find(|x| !is_config_key(x, version))
                {
                    Some(bad) => Err(format!("unknown option '{bad}'")),
                    None => Ok(()),
                }
            }
            key if is_config_key(key, version) && key != "lock" => {
                let text = match v {
                    Value::Bool(b) => {
                        if *b {
                            "1".to_string()
                        } else {
                            "0".to_string()
                        }
                    }
                    other => value_text(other),
                };
                check_config_value(key, &text, version)
            }
            _ => Err(
                "property is not defined in schema and the schema does not allow additional properties"
                    .into(),
            ),
        };
        if let Err(msg) = res {
            errors.insert(k.clone(), msg);
        }
    }
    for required in ["node", "vmid"] {
        if !p.contains_key(required) {
            errors.insert(
                required.into(),
                "property is missing and it is not optional".into(),
            );
        }
    }
    if p.contains_key("force") && !p.contains_key("delete") {
        errors.insert(
            "force".into(),
            "missing property - 'delete' is required by 'force'".into(),
        );
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::params(errors))
    }
}

/// Validator for `POST .../config`.
pub fn validate_config_async(p: &mut Map<String, Value>, v: PveVersion) -> Result<(), ApiError> {
    validate_config(p, true, v)
}

/// Validator for `PUT .../config`.
pub fn validate_config_sync(p: &mut Map<String, Value>, v: PveVersion) -> Result<(), ApiError> {
    validate_config(p, false, v)
}
