//! PVE property strings (`virtio=BC:24:11:..,bridge=vmbr0`) and validation of the VM config keys.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

use crate::validate::matches;

/// A parsed property string: ordered `(key, value)` pairs.
pub type Props = Vec<(String, String)>;

/// Parses `a=b,c=d`; an item without `=` is given to `default_key`.
pub fn parse(s: &str, default_key: Option<&str>) -> Result<Props, String> {
    let mut out: Props = Vec::new();
    for item in s.split(',') {
        if item.is_empty() {
            continue;
        }
        let (k, v) = match item.split_once('=') {
            Some((k, v)) => (k.to_string(), v.to_string()),
            None => match default_key {
                Some(d) if out.iter().all(|(k, _)| k != d) => (d.to_string(), item.to_string()),
                _ => {
                    return Err(format!(
                        "value without key, but schema does not define a default key: {item}"
                    ));
                }
            },
        };
        if out.iter().any(|(ek, _)| *ek == k) {
            return Err(format!("duplicate key in comma-separated list property: {k}"));
        }
        out.push((k, v));
    }
    Ok(out)
}

/// Looks a key up.
pub fn get<'a>(props: &'a Props, key: &str) -> Option<&'a str> {
    props.iter().find(|(k, _)| k == key).map(|(_, v)| v.as_str())
}

/// Prints properties back, `first` (if present) first without its key when `bare_first`.
pub fn print(props: &Props) -> String {
    props
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// Network models accepted in `netN`.
pub const NET_MODELS: &[&str] = &[
    "e1000",
    "e1000-82540em",
    "e1000-82544gc",
    "e1000-82545em",
    "e1000e",
    "i82551",
    "i82557b",
    "i82559er",
    "ne2k_isa",
    "ne2k_pci",
    "pcnet",
    "rtl8139",
    "virtio",
    "vmxnet3",
];

static MAC: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[0-9a-fA-F]{2}(?::[0-9a-fA-F]{2}){5}$").ok());
static BRIDGE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^[-_.\w\d]+$").ok());
static SIZE: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^\d+(?:\.\d+)?[KMGT]?$").ok());
static UUID: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}$").ok());
static TAG: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^[a-zA-Z0-9_][a-zA-Z0-9_\-+.]*$").ok());
static URLENCODED: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^[-%a-zA-Z0-9_.!~*'()]*$").ok());
static VOLUME: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^(?:none|cdrom|/dev/.+|[a-zA-Z][a-zA-Z0-9\-_.]*[a-zA-Z0-9]:.+)$").ok());

fn sub_err(key: &str, sub: &str, msg: &str) -> String {
    format!("invalid format - format error\n{key}.{sub}: {msg}")
}

fn check_int(key: &str, sub: &str, v: &str, min: i64, max: i64) -> Result<(), String> {
    let n: i64 = v
        .parse()
        .map_err(|_| sub_err(key, sub, &format!("type check ('integer') failed - got '{v}'")))?;
    if n < min {
        return Err(sub_err(
            key,
            sub,
            &format!("value must have a minimum value of {min}"),
        ));
    }
    if n > max {
        return Err(sub_err(
            key,
            sub,
            &format!("value must have a maximum value of {max}"),
        ));
    }
    Ok(())
}

fn check_bool(key: &str, sub: &str, v: &str) -> Result<(), String> {
    if v == "0" || v == "1" {
        Ok(())
    } else {
        Err(sub_err(
            key,
            sub,
            &format!("type check ('boolean') failed - got '{v}'"),
        ))
    }
}

fn check_enum(key: &str, sub: &str, v: &str, values: &[&str]) -> Result<(), String> {
    if values.contains(&v) {
        Ok(())
    } else {
        Err(sub_err(
            key,
            sub,
            &format!(
                "value '{v}' does not have a value in the enumeration '{}'",
                values.join(", ")
            ),
        ))
    }
}

fn unknown(key: &str, sub: &str) -> String {
    sub_err(
        key,
        sub,
        "property is not defined in schema and the schema does not allow additional properties",
    )
}

/// Parses a `netN` value; the model key may carry the MAC (`virtio=BC:..`).
pub fn check_net(key: &str, value: &str) -> Result<(), String> {
    let props = parse(value, Some("model"))?;
    let mut has_model = false;
    for (k, v) in &props {
        match k.as_str() {
            m if NET_MODELS.contains(&m) => {
                has_model = true;
                if !matches(&MAC, v) {
                    return Err(sub_err(
                        key,
                        "macaddr",
                        &format!("value does not look like a valid MAC address: {v}"),
                    ));
                }
            }
            "model" => {
                has_model = true;
                check_enum(key, "model", v, NET_MODELS)?;
            }
            "macaddr" => {
                if !matches(&MAC, v) {
                    return Err(sub_err(
                        key,
                        "macaddr",
                        &format!("value does not look like a valid MAC address: {v}"),
                    ));
                }
            }
            "bridge" => {
                if !matches(&BRIDGE, v) {
                    return Err(sub_err(key, "bridge", "value does not match the regex pattern"));
                }
            }
            "firewall" | "link_down" => check_bool(key, k, v)?,
            "tag" => check_int(key, k, v, 1, 4094)?,
            "mtu" => check_int(key, k, v, 1, 65520)?,
            "queues" => check_int(key, k, v, 0, 64)?,
            "rate" => {
                if v.parse::<f64>().map(|r| r < 0.0).unwrap_or(true) {
                    return Err(sub_err(
                        key,
                        k,
                        &format!("type check ('number') failed - got '{v}'"),
                    ));
                }
            }
            "trunks" => {}
            other => return Err(unknown(key, other)),
        }
    }
    if !has_model {
        return Err(sub_err(
            key,
            "model",
            "property is missing and it is not optional",
        ));
    }
    Ok(())
}

/// Sub-keys accepted on drives (a subset of PVE's list, covering common options).
const DRIVE_KEYS: &[&str] = &[
    "file",
    "volume",
    "size",
    "format",
    "cache",
    "discard",
    "iothread",
    "ssd",
    "backup",
    "replicate",
    "media",
    "serial",
    "import-from",
    "aio",
    "detect_zeroes",
    "ro",
    "shared",
    "snapshot",
    "wwn",
    "queues",
    "rerror",
    "werror",
    "model",
    "product",
    "vendor",
    "iops",
    "mbps",
    "bps",
    "cyls",
    "heads",
    "secs",
    "trans",
    "efitype",
    "pre-enrolled-keys",
    "ms-cert",
    "version",
    "scsiblock",
];

/// Checks a drive value; `iso_needs_cdrom` implements `explicit 'media=cdrom' is required for iso images`.
pub fn check_drive(key: &str, value: &str) -> Result<(), String> {
    let props = parse(value, Some("file"))?;
    let file = get(&props, "file").or_else(|| get(&props, "volume"));
    let Some(file) = file else {
        return Err(sub_err(key, "file", "property is missing and it is not optional"));
    };
    if !matches(&VOLUME, file) {
        return Err(sub_err(key, "file", &format!("invalid volume '{file}'")));
    }
    for (k, v) in &props {
        // Per-bus schemas: VirtIO block devices have no `ssd`, IDE and SATA no `iothread`.
        let bus_lacks = (k == "ssd" && key.starts_with("virtio"))
            || (k == "iothread" && (key.starts_with("sata") || key.starts_with("ide")));
        if bus_lacks {
            return Err(unknown(key, k));
        }
        match k.as_str() {
            "size" => {
                if !matches(&SIZE, v) {
                    return Err(sub_err(key, k, &format!("unable to parse size '{v}'")));
                }
            }
            "media" => check_enum(key, k, v, &["cdrom", "disk"])?,
            "format" => check_enum(
                key,
                k,
                v,
                &["raw", "cow", "qcow", "qed", "qcow2", "vmdk", "cloop"],
            )?,
            "cache" => check_enum(
                key,
                k,
                v,
                &["none", "writethrough", "writeback", "unsafe", "directsync"],
            )?,
            "discard" => check_enum(key, k, v, &["ignore", "on"])?,
            "iothread" | "ssd" | "backup" | "replicate" | "ro" | "shared" | "snapshot" => {
                check_bool(key, k, v)?
            }
            other if DRIVE_KEYS.contains(&other) => {}
            other => return Err(unknown(key, other)),
        }
    }
    if file.contains(":iso/") && get(&props, "media") != Some("cdrom") {
        return Err("explicit 'media=cdrom' is required for iso images".to_string());
    }
    Ok(())
}

fn check_cidr(v: &str, v6: bool) -> bool {
    let Some((addr, prefix)) = v.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    if v6 {
        addr.parse::<std::net::Ipv6Addr>().is_ok() && prefix <= 128
    } else {
        addr.parse::<std::net::Ipv4Addr>().is_ok() && prefix <= 32
    }
}

/// Checks an `ipconfigN` value.
pub fn check_ipconfig(key: &str, value: &str) -> Result<(), String> {
    let props = parse(value, None)?;
    for (k, v) in &props {
        let ok = match k.as_str() {
            "ip" => v == "dhcp" || check_cidr(v, false),
            "ip6" => v == "dhcp" || v == "auto" || check_cidr(v, true),
            "gw" => v.parse::<std::net::Ipv4Addr>().is_ok(),
            "gw6" => v.parse::<std::net::Ipv6Addr>().is_ok(),
            other => return Err(unknown(key, other)),
        };
        if !ok {
            return Err(sub_err(
                key,
                k,
                &format!("value does not look like a valid address: {v}"),
            ));
        }
    }
    if get(&props, "gw").is_some() && get(&props, "ip").is_none() {
        return Err("gateway specified without specifying an IP address".into());
    }
    Ok(())
}

/// Checks an `smbios1` value.
pub fn check_smbios1(key: &str, value: &str) -> Result<(), String> {
    if value.len() > 512 {
        return Err("value may only be 512 characters long".into());
    }
    let props = parse(value, None)?;
    for (k, v) in &props {
        match k.as_str() {
            "uuid" => {
                if !matches(&UUID, v) {
                    return Err(sub_err(
                        key,
                        k,
                        &format!("value does not match the regex pattern: {v}"),
                    ));
                }
            }
            "base64" => check_bool(key, k, v)?,
            "manufacturer" | "product" | "version" | "serial" | "sku" | "family" => {}
            other => return Err(unknown(key, other)),
        }
    }
    Ok(())
}

/// Splits and checks a tag list; returns the tags.
pub fn check_tags(value: &str) -> Result<Vec<String>, String> {
    let mut tags = Vec::new();
    for t in value.split([';', ',', ' ']).filter(|t| !t.is_empty()) {
        if !matches(&TAG, t) {
            return Err(format!("invalid format - invalid characters in tag '{t}'"));
        }
        tags.push(t.to_string());
    }
    Ok(tags)
}

/// Tag normalisation done on config update: lower-case, de-duplicated, sorted, joined with `;`.
pub fn normalise_tags(value: &str) -> String {
    let mut tags: Vec<String> = value
        .split([';', ',', ' '])
        .filter(|t| !t.is_empty())
        .map(|t| t.to_lowercase())
        .collect();
    tags.sort();
    tags.dedup();
    tags.join(";")
}

/// Config keys the schema types as integer or boolean (returned as JSON numbers by `GET config`).
pub const NUMERIC_KEYS: &[&str] = &[
    "acpi",
    "autostart",
    "balloon",
    "ciupgrade",
    "cores",
    "cpuunits",
    "freeze",
    "keephugepages",
    "kvm",
    "localtime",
    "migrate_speed",
    "numa",
    "onboot",
    "protection",
    "reboot",
    "shares",
    "smp",
    "sockets",
    "tablet",
    "tdf",
    "template",
    "vcpus",
];

const BOOL_KEYS: &[&str] = &[
    "acpi",
    "autostart",
    "ciupgrade",
    "freeze",
    "keephugepages",
    "kvm",
    "localtime",
    "numa",
    "onboot",
    "protection",
    "reboot",
    "tablet",
    "tdf",
    "template",
];

const PLAIN_STRING_KEYS: &[&str] = &[
    "affinity",
    "amd-sev",
    "args",
    "audio0",
    "bootdisk",
    "cdrom",
    "cicustom",
    "cipassword",
    "ciuser",
    "cpu",
    "hookscript",
    "hostname",
    "hotplug",
    "import-working-storage",
    "ivshmem",
    "machine",
    "meta",
    "nameserver",
    "rng0",
    "searchdomain",
    "spice_enhancements",
    "startdate",
    "startup",
    "vga",
    "vmstatestorage",
    "watchdog",
    "vmgenid",
    "runningmachine",
    "runningcpu",
    "parent",
];

/// Indexed key families and their maximum index.
const FAMILIES: &[(&str, u32)] = &[
    ("net", 31),
    ("ipconfig", 31),
    ("ide", 3),
    ("sata", 5),
    ("scsi", 30),
    ("virtio", 15),
    ("unused", 255),
    ("usb", 13),
    ("serial", 3),
    ("parallel", 2),
    ("hostpci", 15),
    ("numa", 7),
    ("virtiofs", 9),
];

/// The family of an indexed key (`net3` → `net`).
pub fn family(key: &str) -> Option<&'static str> {
    for (prefix, max) in FAMILIES {
        if let Some(rest) = key.strip_prefix(prefix)
            && !rest.is_empty()
            && rest.chars().all(|c| c.is_ascii_digit())
            && (rest == "0" || !rest.starts_with('0'))
            && rest.parse::<u32>().is_ok_and(|n| n <= *max)
        {
            return Some(prefix);
        }
    }
    None
}

/// Whether `key` is a VM config option PVE knows.
pub fn is_config_key(key: &str) -> bool {
    family(key).is_some()
        || NUMERIC_KEYS.contains(&key)
        || PLAIN_STRING_KEYS.contains(&key)
        || matches!(
            key,
            "agent"
                | "arch"
                | "bios"
                | "boot"
                | "citype"
                | "cpulimit"
                | "description"
                | "efidisk0"
                | "hugepages"
                | "keyboard"
                | "lock"
                | "memory"
                | "migrate_downtime"
                | "name"
                | "ostype"
                | "scsihw"
                | "smbios1"
                | "sshkeys"
                | "tags"
                | "tpmstate0"
        )
}

/// Validates one config value; returns the message for `errors.<key>`.
pub fn check_config_value(key: &str, value: &str) -> Result<(), String> {
    if BOOL_KEYS.contains(&key) {
        return if value == "0" || value == "1" {
            Ok(())
        } else {
            Err(format!("type check ('boolean') failed - got '{value}'"))
        };
    }
    let int = |min: i64, max: Option<i64>| -> Result<(), String> {
        let n: i64 = value
            .parse()
            .map_err(|_| format!("type check ('integer') failed - got '{value}'"))?;
        if n < min {
            return Err(format!("value must have a minimum value of {min}"));
        }
        if let Some(max) = max
            && n > max
        {
            return Err(format!("value must have a maximum value of {max}"));
        }
        Ok(())
    };
    match key {
        "cores" | "sockets" | "vcpus" | "smp" => int(1, None),
        "balloon" | "migrate_speed" => int(0, None),
        "shares" => int(0, Some(50000)),
        "cpuunits" => int(1, Some(262144)),
        "memory" => {
            let props = parse(value, Some("current"))?;
            for (k, v) in &props {
                if k != "current" {
                    return Err(unknown(key, k));
                }
                check_int(key, "current", v, 16, 4_178_944)?;
            }
            Ok(())
        }
        "cpulimit" => match value.parse::<f64>() {
            Ok(v) if (0.0..=128.0).contains(&v) => Ok(()),
            _ => Err(format!("type check ('number') failed - got '{value}'")),
        },
        "name" => {
            if crate::validate::check_rule(crate::validate::Rule::DnsName, &serde_json::json!(value)).is_ok()
            {
                Ok(())
            } else {
                Err(format!(
                    "invalid format - value does not look like a valid DNS name: {value}"
                ))
            }
        }
        "description" => {
            if value.chars().count() > 8192 {
                Err("value may only be 8192 characters long".into())
            } else {
                Ok(())
            }
        }
        "tags" => check_tags(value).map(|_| ()),
        "sshkeys" => {
            if matches(&URLENCODED, value) {
                Ok(())
            } else {
                Err(format!("invalid format - invalid urlencoded string: {value}"))
            }
        }
        "smbios1" => check_smbios1(key, value),
        "agent" => {
            let props = parse(value, Some("enabled"))?;
            for (k, v) in &props {
                match k.as_str() {
                    "enabled" | "fstrim_cloned_disks" | "freeze-fs-on-backup" => check_bool(key, k, v)?,
                    "type" => check_enum(key, k, v, &["virtio", "isa"])?,
                    other => return Err(unknown(key, other)),
                }
            }
            Ok(())
        }
        "boot" => {
            if value.chars().all(|c| "acdn".contains(c)) && !value.is_empty() && value.len() <= 4 {
                return Ok(());
            }
            let props = parse(value, Some("order"))?;
            for (k, _) in &props {
                if k != "order" && k != "legacy" {
                    return Err(unknown(key, k));
                }
            }
            Ok(())
        }
        "ostype" => crate::validate::check_rule(
            crate::validate::Rule::Enum(&[
                "other", "wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10", "win11", "l24",
                "l26", "solaris",
            ]),
            &serde_json::json!(value),
        ),
        "scsihw" => crate::validate::check_rule(
            crate::validate::Rule::Enum(&[
                "lsi",
                "lsi53c810",
                "virtio-scsi-pci",
                "virtio-scsi-single",
                "megasas",
                "pvscsi",
            ]),
            &serde_json::json!(value),
        ),
        "bios" => crate::validate::check_rule(
            crate::validate::Rule::Enum(&["seabios", "ovmf"]),
            &serde_json::json!(value),
        ),
        "citype" => crate::validate::check_rule(
            crate::validate::Rule::Enum(&["configdrive2", "nocloud", "opennebula"]),
            &serde_json::json!(value),
        ),
        "efidisk0" | "tpmstate0" => check_drive(key, value),
        "cpu" => crate::devices::check_cpu(value),
        _ => match family(key) {
            Some("net") => check_net(key, value),
            Some("ide" | "sata" | "scsi" | "virtio") => check_drive(key, value),
            Some("ipconfig") => check_ipconfig(key, value),
            Some("hostpci") => crate::devices::check_hostpci(key, value),
            _ => Ok(()),
        },
    }
}

/// Boot order devices of a `boot` value (`order=scsi0;ide2;net0`); none for the legacy form
/// (`cdn`, `legacy=dc`: the default key of `boot` is `legacy`).
pub fn boot_devices(value: &str) -> Vec<String> {
    let v = value.trim();
    let legacy = v.strip_prefix("legacy=").unwrap_or(v);
    if !legacy.is_empty() && legacy.chars().all(|c| "acdn".contains(c)) {
        return Vec::new();
    }
    parse(value, Some("order"))
        .ok()
        .and_then(|p| {
            get(&p, "order").map(|o| o.split(';').filter(|d| !d.is_empty()).map(String::from).collect())
        })
        .unwrap_or_default()
}

/// Parses a disk size (`32G`, `10752M`, bytes without unit) into bytes.
pub fn parse_size(s: &str) -> Option<u64> {
    let s = s.trim();
    let (num, mult) = match s.chars().last()? {
        'K' => (&s[..s.len() - 1], 1u64 << 10),
        'M' => (&s[..s.len() - 1], 1 << 20),
        'G' => (&s[..s.len() - 1], 1 << 30),
        'T' => (&s[..s.len() - 1], 1 << 40),
        _ => (s, 1),
    };
    // Whole numbers exactly (an f64 has 53 bits: large byte counts came back off by one).
    if let Ok(n) = num.parse::<u64>() {
        return n.checked_mul(mult);
    }
    let v: f64 = num.parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    Some((v * mult as f64) as u64)
}

/// Formats bytes the way PVE writes `size=` (largest exact unit).
pub fn format_size(bytes: u64) -> String {
    for (unit, m) in [("T", 1u64 << 40), ("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)] {
        if bytes >= m && bytes.is_multiple_of(m) {
            return format!("{}{unit}", bytes / m);
        }
    }
    bytes.to_string()
}

/// Replaces (or appends) one key of a property string, keeping the default-key item first.
pub fn set_key(value: &str, key: &str, new: &str) -> String {
    let mut parts: Vec<String> = value
        .split(',')
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect();
    let prefix = format!("{key}=");
    match parts.iter_mut().find(|p| p.starts_with(&prefix)) {
        Some(p) => *p = format!("{key}={new}"),
        None => parts.push(format!("{key}={new}")),
    }
    parts.join(",")
}

/// Key/value map of a property string (for lookups only).
pub fn to_map(value: &str, default_key: Option<&str>) -> BTreeMap<String, String> {
    parse(value, default_key)
        .map(|p| p.into_iter().collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_values() {
        assert!(check_net("net0", "virtio=BC:24:11:5E:2A:7F,bridge=vmbr0,tag=100").is_ok());
        assert!(check_net("net0", "virtio,bridge=vmbr0,mtu=1500").is_ok());
        let err = check_net("net0", "virtio,bridge=vmbr0,tag=5000").unwrap_err();
        assert!(
            err.contains("net0.tag: value must have a maximum value of 4094"),
            "{err}"
        );
        assert!(check_net("net0", "bogus,bridge=vmbr0").is_err());
    }

    #[test]
    fn drive_values() {
        assert!(check_drive("scsi0", "local-lvm:vm-101-disk-0,iothread=1,size=32G").is_ok());
        assert!(check_drive("scsi1", "local-lvm:4,ssd=1,iothread=1,discard=on,cache=writeback").is_ok());
        assert!(check_drive("virtio1", "local-lvm:4,ssd=1").is_err());
        assert!(check_drive("sata1", "local-lvm:4,iothread=1").is_err());
        assert!(check_drive("ide0", "local:iso/user-data-101.iso,media=cdrom").is_ok());
        assert_eq!(
            check_drive("ide0", "local:iso/user-data-101.iso").unwrap_err(),
            "explicit 'media=cdrom' is required for iso images"
        );
        assert!(check_drive("ide0", "none,media=cdrom").is_ok());
    }

    #[test]
    fn tags_and_sizes() {
        assert_eq!(normalise_tags("B;a,a c"), "a;b;c");
        assert_eq!(parse_size("20G"), Some(20 << 30));
        assert_eq!(format_size(10752 << 20), "10752M");
        assert_eq!(
            set_key("local-lvm:vm-1-disk-0,size=20G", "size", "40G"),
            "local-lvm:vm-1-disk-0,size=40G"
        );
        assert!(check_ipconfig("ipconfig0", "ip=10.0.0.2/24,gw=10.0.0.1").is_ok());
        assert!(check_ipconfig("ipconfig0", "gw=10.0.0.1").is_err());
    }
}
