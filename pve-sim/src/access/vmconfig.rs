//! The permission checks qemu-server's handlers run beyond the schema's `permissions`
//! (`PVE/API2/Qemu.pm`: `check_vm_modify_config_perm`, `check_storage_access`,
//! `check_storage_access_clone`, `check_hostpci_perm`, `check_cpu_model_access`, the drive
//! checks of `update_vm_api`, and `PVE::QemuServer::check_bridge_access`).

use std::collections::BTreeMap;

use crate::error::ApiError;
use crate::propstr;
use crate::state::Cluster;

/// The privileges `check_vm_modify_config_perm` demands for `key`: `Ok(None)` for keys checked
/// elsewhere (drives, `usb`, `hostpci`, `tags`, ...), `Err` for root-only keys.
fn key_privs(key: &str) -> Result<Option<(&'static [&'static str], bool)>, String> {
    let fam = propstr::family(key);
    if crate::validate::is_disk_key(key)
        || key == "cdrom"
        || key == "tags"
        || matches!(fam, Some("unused" | "serial" | "usb" | "hostpci" | "virtiofs"))
    {
        return Ok(None);
    }
    let p: (&'static [&'static str], bool) = match key {
        "cores" | "cpu" | "runningcpu" | "cpulimit" | "cpuunits" | "numa" | "smp" | "sockets" | "vcpus" => {
            (&["VM.Config.CPU"], false)
        }
        "memory" | "balloon" | "shares" | "allow-ksm" => (&["VM.Config.Memory"], false),
        "acpi" | "hotplug" | "kvm" | "machine" | "runningmachine" | "scsihw" | "smbios1" | "tablet"
        | "vga" | "watchdog" | "audio0" | "rng0" => (&["VM.Config.HWType"], false),
        "agent" | "autostart" | "bios" | "description" | "keyboard" | "localtime" | "migrate_downtime"
        | "migrate_speed" | "name" | "onboot" | "ostype" | "protection" | "reboot" | "startdate"
        | "startup" | "tdf" | "template" => (&["VM.Config.Options"], false),
        "freeze" => (&["VM.PowerMgmt"], false),
        "boot" | "bootdisk" | "vmstatestorage" => (&["VM.Config.Disk"], false),
        "running-nets-host-mtu" => (&["VM.Config.Network"], false),
        "cicustom" | "cipassword" | "citype" | "ciuser" | "ciupgrade" | "nameserver" | "searchdomain"
        | "sshkeys" => (&["VM.Config.Cloudinit", "VM.Config.Network"], true),
        "vmstate" => (&["VM.Config.Disk", "VM.PowerMgmt"], false),
        _ => match fam {
            Some("numa") => (&["VM.Config.CPU"], false),
            Some("net") => (&["VM.Config.Network"], false),
            Some("ipconfig") => (&["VM.Config.Cloudinit", "VM.Config.Network"], true),
            _ => return Err(format!("only root can set '{key}' config")),
        },
    };
    Ok(Some(p))
}

/// `check_vm_modify_config_perm` over `keys` (in sorted order).
pub fn check_modify_config_perm<'a>(
    c: &Cluster,
    who: &str,
    vmid: u32,
    pool: Option<&str>,
    keys: impl IntoIterator<Item = &'a String>,
) -> Result<(), ApiError> {
    if !c.enforced(who) {
        return Ok(());
    }
    let mut keys: Vec<&String> = keys.into_iter().collect();
    keys.sort();
    for key in keys {
        match key_privs(key).map_err(ApiError::server)? {
            None => {}
            Some((privs, any)) => {
                c.check_vm_perm(who, vmid, pool, privs, any)?;
                if key == "startup" {
                    c.check(who, "/", &["Sys.Modify"])?;
                }
            }
        }
    }
    Ok(())
}

/// `<storage>:<size>`: a drive value that allocates a new volume.
fn new_disk_storage(file: &str) -> Option<&str> {
    let (storage, size) = file.split_once(':')?;
    crate::formats::pattern_matches(r"\d+(?:\.\d+)?", size).then_some(storage)
}

fn is_cloudinit(file: &str) -> bool {
    let name = file.rsplit([':', '/']).next().unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    stem == "cloudinit" || (stem.starts_with("vm-") && stem.ends_with("-cloudinit"))
}

/// `check_storage_access` for the drives among `settings`.
pub fn check_storage_access(
    c: &Cluster,
    who: &str,
    vmid: u32,
    settings: &[(String, String)],
    default_storage: Option<&str>,
) -> Result<(), ApiError> {
    if !c.enforced(who) {
        return Ok(());
    }
    for (key, value) in settings {
        if !crate::validate::is_disk_key(key) {
            continue;
        }
        let map = propstr::to_map(value, Some("file"));
        let file = map.get("file").map(String::as_str).unwrap_or_default();
        let cdrom = map.get("media").is_some_and(|m| m == "cdrom");
        if file.is_empty() || file == "none" || is_cloudinit(file) {
            continue;
        }
        if cdrom && file == "cdrom" {
            c.check(who, "/", &["Sys.Console"])?;
        } else if let (false, Some(storage)) = (cdrom, new_disk_storage(file)) {
            let storage = if storage.is_empty() {
                default_storage.unwrap_or_default()
            } else {
                storage
            };
            c.check(who, &format!("/storage/{storage}"), &["Datastore.AllocateSpace"])?;
        } else {
            c.check_volume_access(who, Some(vmid), file)?;
        }
    }
    if let Some((_, s)) = settings.iter().find(|(k, _)| k == "vmstatestorage") {
        c.check(who, &format!("/storage/{s}"), &["Datastore.AllocateSpace"])?;
    }
    Ok(())
}

/// `check_hostpci_perm`: mapped devices need `Mapping.Use` (and `VM.Config.HWType`); raw host
/// devices are root-only.
pub fn check_hostpci_perm(
    c: &Cluster,
    who: &str,
    vmid: u32,
    pool: Option<&str>,
    key: &str,
    value: &str,
) -> Result<(), ApiError> {
    if !c.enforced(who) {
        return Ok(());
    }
    let map = propstr::to_map(value, Some("host"));
    if map.contains_key("host") {
        return Err(ApiError::server(format!(
            "only root can set '{key}' config for non-mapped devices"
        )));
    }
    let Some(mapping) = map.get("mapping") else {
        return Err(ApiError::server("either 'host' or 'mapping' must be set."));
    };
    c.check(who, &format!("/mapping/pci/{mapping}"), &["Mapping.Use"])?;
    c.check_vm_perm(who, vmid, pool, &["VM.Config.HWType"], false)?;
    if map.contains_key("romfile") {
        return Err(ApiError::param(key, "only root@pam can set 'romfile' option"));
    }
    Ok(())
}

/// `check_cpu_model_access`: a custom model needs `Mapping.Use` on `/mapping/cpu/<name>` unless
/// the VM already has it.
pub fn check_cpu_model_access(
    c: &Cluster,
    who: &str,
    new: Option<&str>,
    existing: Option<&str>,
) -> Result<(), ApiError> {
    let cputype = |v: &str| propstr::to_map(v, Some("cputype")).get("cputype").cloned();
    let Some(model) = new.and_then(cputype) else {
        return Ok(());
    };
    if existing.and_then(cputype).as_deref() == Some(model.as_str()) {
        return Ok(());
    }
    match model.strip_prefix("custom-") {
        Some(name) => c.check(who, &format!("/mapping/cpu/{name}"), &["Mapping.Use"]),
        None => Ok(()),
    }
}

/// The drive checks of `update_vm_api`: cloud-init drives need `VM.Config.Cloudinit` and
/// `.CDROM`, CD-ROMs `VM.Config.CDROM`, disks `VM.Config.Disk`.
pub fn check_drive_perms(c: &Cluster, who: &str, vmid: u32, value: &str) -> Result<(), ApiError> {
    let map = propstr::to_map(value, Some("file"));
    let file = map.get("file").map(String::as_str).unwrap_or_default();
    let privs: &[&str] = if is_cloudinit(file) {
        &["VM.Config.Cloudinit", "VM.Config.CDROM"]
    } else if map.get("media").is_some_and(|m| m == "cdrom") {
        &["VM.Config.CDROM"]
    } else {
        &["VM.Config.Disk"]
    };
    c.check_vm_perm(who, vmid, None, privs, false)
}

/// Everything a config update (`POST`/`PUT .../config`) checks, in qemu-server's order, given
/// the VM's current config.
pub fn check_update(
    c: &Cluster,
    who: &str,
    vmid: u32,
    current: &BTreeMap<String, String>,
    changes: &[(String, String)],
    deletes: &[String],
) -> Result<(), ApiError> {
    if !c.enforced(who) {
        return Ok(());
    }
    check_modify_config_perm(c, who, vmid, None, deletes)?;
    check_modify_config_perm(c, who, vmid, None, changes.iter().map(|(k, _)| k))?;
    check_storage_access(c, who, vmid, changes, None)?;
    for (k, v) in changes.iter().filter(|(k, _)| propstr::family(k) == Some("net")) {
        let _ = k;
        c.check_bridge_access(who, v)?;
    }
    let new_cpu = changes.iter().find(|(k, _)| k == "cpu").map(|(_, v)| v.as_str());
    check_cpu_model_access(c, who, new_cpu, current.get("cpu").map(String::as_str))?;
    for d in deletes {
        let Some(old) = current.get(d) else { continue };
        if crate::validate::is_disk_key(d) {
            check_drive_perms(c, who, vmid, old)?;
        } else if propstr::family(d) == Some("hostpci") {
            check_hostpci_perm(c, who, vmid, None, d, old)?;
        } else if propstr::family(d) == Some("net") {
            c.check_bridge_access(who, old)?;
        } else if d == "tags" {
            c.check_vm_perm(who, vmid, None, &["VM.Config.Options"], false)?;
        } else if propstr::family(d) == Some("unused") {
            c.check_vm_perm(who, vmid, None, &["VM.Config.Disk"], false)?;
        }
    }
    for (k, v) in changes {
        if crate::validate::is_disk_key(k) {
            if let Some(old) = current.get(k) {
                check_drive_perms(c, who, vmid, old)?;
            }
            check_drive_perms(c, who, vmid, v)?;
        } else if propstr::family(k) == Some("hostpci") {
            if let Some(old) = current.get(k) {
                check_hostpci_perm(c, who, vmid, None, k, old)?;
            }
            check_hostpci_perm(c, who, vmid, None, k, v)?;
        } else if k == "tags" {
            c.check_vm_perm(who, vmid, None, &["VM.Config.Options"], false)?;
        } else if propstr::family(k) == Some("net")
            && let Some(old) = current.get(k)
        {
            c.check_bridge_access(who, old)?;
        }
    }
    Ok(())
}

/// What `POST /nodes/{node}/qemu` checks: pool, `storage`, `ha-managed`, `start`, `VM.Allocate`
/// on the VM or its pool, then the config keys as an update would.
pub fn check_create(
    c: &Cluster,
    who: &str,
    vmid: u32,
    pool: Option<&str>,
    storage: Option<&str>,
    flags: (bool, bool),
    settings: &[(String, String)],
) -> Result<(), ApiError> {
    c.check_pool(pool)?;
    if !c.enforced(who) {
        return Ok(());
    }
    let (ha_managed, start) = flags;
    if let Some(s) = storage {
        c.check(who, &format!("/storage/{s}"), &["Datastore.AllocateSpace"])?;
    }
    if ha_managed {
        c.check(who, "/", &["Sys.Console"])?;
    }
    if start {
        c.check_vm_perm(who, vmid, pool, &["VM.PowerMgmt"], false)?;
    }
    let allocate = c.can(who, &format!("/vms/{vmid}"), &["VM.Allocate"], false)
        || pool.is_some_and(|p| c.can(who, &format!("/pool/{p}"), &["VM.Allocate"], false));
    if !allocate {
        return Err(super::perm_error(None));
    }
    check_storage_access(c, who, vmid, settings, storage)?;
    check_modify_config_perm(c, who, vmid, pool, settings.iter().map(|(k, _)| k))?;
    for (k, v) in settings
        .iter()
        .filter(|(k, _)| propstr::family(k) == Some("hostpci"))
    {
        check_hostpci_perm(c, who, vmid, pool, k, v)?;
    }
    for (_, v) in settings.iter().filter(|(k, _)| propstr::family(k) == Some("net")) {
        c.check_bridge_access(who, v)?;
    }
    let cpu = settings.iter().find(|(k, _)| k == "cpu").map(|(_, v)| v.as_str());
    check_cpu_model_access(c, who, cpu, None)
}

/// `check_storage_access_clone`, `check_mapping_access`, `check_bridge_access` and the CPU
/// model check of a clone of a VM with `config` (onto `storage` when given).
pub fn check_clone(
    c: &Cluster,
    who: &str,
    config: &BTreeMap<String, String>,
    storage: Option<&str>,
) -> Result<(), ApiError> {
    if !c.enforced(who) {
        return Ok(());
    }
    for (k, v) in config.iter().filter(|(k, _)| crate::validate::is_disk_key(k)) {
        let map = propstr::to_map(v, Some("file"));
        let file = map.get("file").map(String::as_str).unwrap_or_default();
        if file.is_empty() || file == "none" {
            continue;
        }
        let _ = k;
        if map.get("media").is_some_and(|m| m == "cdrom") {
            if file == "cdrom" {
                c.check(who, "/", &["Sys.Console"])?;
            }
        } else {
            let sid = storage
                .or_else(|| file.split_once(':').map(|(s, _)| s))
                .unwrap_or_default();
            c.check(who, &format!("/storage/{sid}"), &["Datastore.AllocateSpace"])?;
        }
    }
    if let Some(s) = config.get("vmstatestorage") {
        c.check(who, &format!("/storage/{s}"), &["Datastore.AllocateSpace"])?;
    }
    for (k, v) in config
        .iter()
        .filter(|(k, _)| propstr::family(k) == Some("hostpci"))
    {
        let map = propstr::to_map(v, Some("host"));
        if map.contains_key("host") {
            return Err(ApiError::server(format!(
                "only root can set '{k}' config for non-mapped devices"
            )));
        }
        if let Some(m) = map.get("mapping") {
            c.check(who, &format!("/mapping/pci/{m}"), &["Mapping.Use"])?;
        }
    }
    for (_, v) in config.iter().filter(|(k, _)| propstr::family(k) == Some("net")) {
        c.check_bridge_access(who, v)?;
    }
    check_cpu_model_access(c, who, config.get("cpu").map(String::as_str), None)
}
