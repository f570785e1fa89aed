//! Which config changes a running VM takes live and which stay pending until its next start,
//! as qemu-server 9.2's `vmconfig_hotplug_pending` decides (`src/PVE/QemuServer.pm`):
//!
//! * the "fast-plug" options (`description`, `name`, `onboot`, `protection`, `tags`, …) and the
//!   cloud-init options always apply at once;
//! * the VM's `hotplug` option (default `network,disk,usb`; `1` = the default, `0` = nothing)
//!   says which device classes hot-plug: `memory` (with `memory` in it; QEMU adds DIMMs),
//!   `vcpus` (with `cpu`), a NIC whose model, MAC, queues or MTU change or that is new (with
//!   `network`; a bridge, VLAN, firewall or rate change is applied without it), disks (with
//!   `disk`; never `efidisk0`/`tpmstate0`);
//! * `sockets` and `cores` never hot-plug (CPU hot-plug works through `vcpus`), nor do `numa`,
//!   `cpu`, `agent`, `ostype`, `machine`, `bios`, `hostpciN`, … — they wait in `[PENDING]`;
//! * `hotplug` itself waits when its old or new value names `cpu` or `memory`.
//!
//! And at start (`PVE::QemuServer::Memory::config`): memory hot-plug needs `numa: 1` (`NUMA needs
//! to be enabled for memory hotplug`) and at least 1024 MiB (`minimum memory must be 1024MB`).

use std::collections::{BTreeMap, BTreeSet};

use crate::propstr;

/// The hot-plug default (`hotplug` unset or `1`).
pub const DEFAULT_HOTPLUG: &str = "network,disk,usb";

/// Memory hot-plug's static memory (qemu-server's `$STATICMEM`).
pub const STATIC_MEMORY_MIB: u64 = 1024;

/// The device classes `value` of a `hotplug` option names.
pub fn features(value: Option<&str>) -> BTreeSet<String> {
    let value = match value.map(str::trim) {
        None | Some("1") => DEFAULT_HOTPLUG,
        Some("0") => "",
        Some(v) => v,
    };
    value
        .split([',', ';', ' '])
        .map(str::trim)
        .filter(|f| !f.is_empty())
        .map(str::to_owned)
        .collect()
}

/// Options applied at once whatever the VM does (`$fast_plug_option` and the cloud-init keys).
fn fast_plug(key: &str) -> bool {
    matches!(
        key,
        "description"
            | "hookscript"
            | "lock"
            | "migrate_downtime"
            | "migrate_speed"
            | "name"
            | "onboot"
            | "protection"
            | "shares"
            | "startup"
            | "tags"
            | "vmstatestorage"
            | "ciuser"
            | "cipassword"
            | "sshkeys"
            | "cicustom"
            | "nameserver"
            | "searchdomain"
            | "citype"
            | "ciupgrade"
    ) || crate::config_keys::family(key) == Some("ipconfig")
}

/// Whether a NIC change needs hot-plugging (`vmconfig_update_net`): model, MAC, queues or MTU
/// differ, or the NIC is new.
fn nic_needs_hotplug(old: Option<&String>, new: &str) -> bool {
    let Some(old) = old else {
        return true;
    };
    let parse = |v: &str| {
        let mut m = propstr::to_map(v, Some("model"));
        let (model, mac) = match m
            .iter()
            .find(|(k, _)| propstr::NET_MODELS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
        {
            Some((model, mac)) => (model, Some(mac.to_ascii_uppercase())),
            None => (
                m.get("model").cloned().unwrap_or_default(),
                m.get("macaddr").map(|x| x.to_ascii_uppercase()),
            ),
        };
        m.retain(|k, _| matches!(k.as_str(), "queues" | "mtu"));
        (model, mac, m)
    };
    parse(old) != parse(new)
}

/// Whether setting `key` to `new` on the running VM whose config is `config` applies at once
/// (else it stays pending until the next start).
pub fn applies_live(key: &str, new: &str, config: &BTreeMap<String, String>) -> bool {
    if fast_plug(key) {
        return true;
    }
    let hotplug = features(config.get("hotplug").map(String::as_str));
    match key {
        "memory" => hotplug.contains("memory"),
        "vcpus" => hotplug.contains("cpu"),
        "hotplug" => {
            let names = |v: &str| v.contains("cpu") || v.contains("memory");
            !names(new) && !config.get("hotplug").is_some_and(|o| names(o))
        }
        "efidisk0" | "tpmstate0" => false,
        _ => match crate::config_keys::family(key) {
            Some("net") => !nic_needs_hotplug(config.get(key), new) || hotplug.contains("network"),
            Some("ide" | "sata" | "scsi" | "virtio" | "unused") => hotplug.contains("disk"),
            _ => false,
        },
    }
}

/// Whether deleting `key` from the running VM applies at once.
pub fn deletes_live(key: &str, config: &BTreeMap<String, String>) -> bool {
    if fast_plug(key) {
        return true;
    }
    let hotplug = features(config.get("hotplug").map(String::as_str));
    match crate::config_keys::family(key) {
        Some("net") => hotplug.contains("network"),
        Some("scsi" | "virtio" | "unused") => hotplug.contains("disk"),
        _ => false,
    }
}

/// Why a VM with `config` cannot start (memory hot-plug without NUMA, or with too little memory).
pub fn start_refusal(config: &BTreeMap<String, String>, memory_mib: u64) -> Option<String> {
    if !features(config.get("hotplug").map(String::as_str)).contains("memory") {
        return None;
    }
    if config.get("numa").is_none_or(|n| n != "1") {
        return Some("NUMA needs to be enabled for memory hotplug".into());
    }
    (memory_mib < STATIC_MEMORY_MIB).then(|| format!("minimum memory must be {STATIC_MEMORY_MIB}MB"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect()
    }

    #[test]
    fn hotplug_classes_decide() {
        let plain = cfg(&[("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0")]);
        assert!(
            !applies_live("memory", "4096", &plain),
            "default hotplug has no memory"
        );
        assert!(!applies_live("cores", "4", &plain));
        assert!(applies_live("tags", "a", &plain));
        assert!(applies_live(
            "net0",
            "virtio=BC:24:11:00:00:01,bridge=vmbr1,firewall=1",
            &plain
        ));
        assert!(
            applies_live("net0", "e1000=BC:24:11:00:00:01,bridge=vmbr0", &plain),
            "network hotplug"
        );
        let full = cfg(&[("hotplug", "network,disk,usb,cpu,memory"), ("numa", "1")]);
        assert!(applies_live("memory", "4096", &full));
        assert!(applies_live("vcpus", "4", &full));
        assert!(
            !applies_live("cores", "4", &full),
            "sockets and cores never hot-plug"
        );
        assert!(!applies_live("hotplug", "network", &full));
        let none = cfg(&[
            ("hotplug", "0"),
            ("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0"),
        ]);
        assert!(
            !applies_live("net0", "virtio,bridge=vmbr0", &none),
            "a new MAC needs hotplug"
        );
        assert!(!applies_live("scsi1", "local-lvm:vm-1-disk-1,size=1G", &none));
        assert_eq!(
            start_refusal(&cfg(&[("hotplug", "memory")]), 2048).as_deref(),
            Some("NUMA needs to be enabled for memory hotplug")
        );
        assert_eq!(
            start_refusal(&full, 512).as_deref(),
            Some("minimum memory must be 1024MB")
        );
        assert_eq!(start_refusal(&full, 2048), None);
    }
}
