//! The VM config keys PVE knows (per version) and the validation of their values.

use crate::formats::{self, Sub, inline, named};
use crate::version::PveVersion;

/// Config keys the schema types as integer or boolean (returned as JSON numbers by `GET config`).
pub const NUMERIC_KEYS: &[&str] = &[
    "acpi",
    "allow-ksm",
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
    "allow-ksm",
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

/// Keys whose values pve-sim does not check beyond being strings.
const PLAIN_STRING_KEYS: &[&str] = &[
    "affinity",
    "args",
    "bootdisk",
    "cdrom",
    "cipassword",
    "ciuser",
    "hookscript",
    "hotplug",
    "import-working-storage",
    "lock",
    "meta",
    "nameserver",
    "searchdomain",
    "startdate",
    "vmstatestorage",
    "vmgenid",
    "runningmachine",
    "runningcpu",
    "parent",
    "arch",
    "bios",
    "citype",
    "cpulimit",
    "description",
    "hugepages",
    "keyboard",
    "migrate_downtime",
    "name",
    "ostype",
    "scsihw",
    "sshkeys",
    "tags",
];

/// Keys only 9.x knows.
const KEYS_SINCE_91: &[&str] = &["allow-ksm", "intel-tdx"];

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

/// The property-string format of a key, if it has one.
pub fn format_of(key: &str) -> Option<&'static [Sub]> {
    let f: &'static [Sub] = match key {
        "agent" => inline::AGENT,
        "memory" => inline::MEMORY,
        "machine" | "runningmachine" => inline::MACHINE,
        "vga" => inline::VGA,
        "audio0" => inline::AUDIO,
        "spice_enhancements" => inline::SPICE,
        "ivshmem" => inline::IVSHMEM,
        "efidisk0" => inline::EFIDISK,
        "tpmstate0" => inline::TPMSTATE,
        "boot" => named::BOOT,
        "cpu" => named::CPU,
        "smbios1" => named::SMBIOS1,
        "rng0" => named::RNG,
        "watchdog" => named::WATCHDOG,
        "startup" => named::STARTUP,
        "amd-sev" => named::AMD_SEV,
        "intel-tdx" => named::INTEL_TDX,
        "cicustom" => named::CICUSTOM,
        _ => match family(key)? {
            "net" => inline::NET,
            "ide" => inline::IDE,
            "sata" => inline::SATA,
            "scsi" => inline::SCSI,
            "virtio" => inline::VIRTIO,
            "unused" => inline::UNUSED,
            "usb" => inline::USB,
            "virtiofs" => inline::VIRTIOFS,
            "numa" => inline::NUMA,
            "ipconfig" => named::IPCONFIG,
            "hostpci" => named::HOSTPCI,
            _ => return None,
        },
    };
    Some(f)
}

/// Whether `key` is a VM config option of `version`.
pub fn is_config_key(key: &str, version: PveVersion) -> bool {
    if KEYS_SINCE_91.contains(&key) && !version.is_9() {
        return false;
    }
    family(key).is_some()
        || NUMERIC_KEYS.contains(&key)
        || PLAIN_STRING_KEYS.contains(&key)
        || format_of(key).is_some()
}

fn int(value: &str, min: i64, max: Option<i64>) -> Result<(), String> {
    let n: i64 = value
        .parse()
        .map_err(|_| format!("type check ('integer') failed - got '{value}'"))?;
    if let Some(max) = max
        && n > max
    {
        return Err(format!("value must have a maximum value of {max}"));
    }
    if n < min {
        return Err(format!("value must have a minimum value of {min}"));
    }
    Ok(())
}

fn one_of(value: &str, values: &[&str]) -> Result<(), String> {
    if values.contains(&value) {
        Ok(())
    } else {
        Err(format!(
            "value '{value}' does not have a value in the enumeration '{}'",
            values.join(", ")
        ))
    }
}

/// Checks what is not a property string.
fn check_plain(key: &str, value: &str) -> Result<(), String> {
    match key {
        "cores" | "sockets" | "vcpus" | "smp" => int(value, 1, None),
        "balloon" | "migrate_speed" => int(value, 0, None),
        "shares" => int(value, 0, Some(50000)),
        "cpuunits" => int(value, 1, Some(262_144)),
        "cpulimit" => match value.parse::<f64>() {
            Ok(v) if (0.0..=128.0).contains(&v) => Ok(()),
            _ => Err(format!("type check ('number') failed - got '{value}'")),
        },
        "name" => {
            if formats::pattern_matches(
                r"(?:[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?\.)*[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?",
                value,
            ) {
                Ok(())
            } else {
                Err(formats::invalid("value does not look like a valid DNS name"))
            }
        }
        "description" if value.chars().count() > 8192 => Err("value may only be 8192 characters long".into()),
        "tags" => crate::propstr::check_tags(value).map(|_| ()),
        "sshkeys" if !formats::pattern_matches(r"[-%a-zA-Z0-9_.!~*'()]*", value) => {
            Err(formats::invalid(&format!("invalid urlencoded string: {value}")))
        }
        "ostype" => one_of(
            value,
            &[
                "other", "wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10", "win11", "l24",
                "l26", "solaris",
            ],
        ),
        "scsihw" => one_of(
            value,
            &[
                "lsi",
                "lsi53c810",
                "virtio-scsi-pci",
                "virtio-scsi-single",
                "megasas",
                "pvscsi",
            ],
        ),
        "bios" => one_of(value, &["seabios", "ovmf"]),
        "citype" => one_of(value, &["configdrive2", "nocloud", "opennebula"]),
        _ => Ok(()),
    }
}

/// Validates one config value of `version`; returns the message for `errors.<key>`.
pub fn check_config_value(key: &str, value: &str, version: PveVersion) -> Result<(), String> {
    if BOOL_KEYS.contains(&key) {
        return if value == "0" || value == "1" {
            Ok(())
        } else {
            Err(format!("type check ('boolean') failed - got '{value}'"))
        };
    }
    if key == "smbios1" && value.len() > 512 {
        return Err("value may only be 512 characters long".into());
    }
    let Some(format) = format_of(key) else {
        return check_plain(key, value);
    };
    let parsed = formats::parse(key, value, format, version)?;
    match key {
        "cpu" => crate::devices::check_cpu(&parsed),
        _ => match family(key) {
            Some("hostpci") => crate::devices::check_hostpci(key, &parsed),
            Some("ipconfig") if parsed.contains_key("gw") && !parsed.contains_key("ip") => {
                Err("gateway specified without specifying an IP address".into())
            }
            Some("ipconfig") if parsed.contains_key("gw6") && !parsed.contains_key("ip6") => {
                Err("gateway specified without specifying an IP address".into())
            }
            Some("ide" | "sata" | "scsi" | "virtio") => {
                let file = parsed.get("file").map(String::as_str).unwrap_or_default();
                if file.contains(":iso/") && parsed.get("media").map(String::as_str) != Some("cdrom") {
                    Err("explicit 'media=cdrom' is required for iso images".into())
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const V84: PveVersion = PveVersion::V8_4;

    #[test]
    fn net_and_drive_values() {
        assert!(check_config_value("net0", "virtio=BC:24:11:5E:2A:7F,bridge=vmbr0,tag=100", V84).is_ok());
        assert!(check_config_value("net0", "virtio,bridge=vmbr0,mtu=1500", V84).is_ok());
        assert!(check_config_value("net0", "bogus,bridge=vmbr0", V84).is_err());
        assert!(check_config_value("scsi0", "local-lvm:vm-101-disk-0,iothread=1,size=32G", V84).is_ok());
        assert!(
            check_config_value(
                "scsi1",
                "local-lvm:4,ssd=1,iothread=1,discard=on,cache=writeback",
                V84
            )
            .is_ok()
        );
        assert!(check_config_value("virtio1", "local-lvm:4,ssd=1", V84).is_err());
        assert!(check_config_value("sata1", "local-lvm:4,iothread=1", V84).is_err());
        assert!(check_config_value("ide0", "local:iso/user-data-101.iso,media=cdrom", V84).is_ok());
        assert_eq!(
            check_config_value("ide0", "local:iso/user-data-101.iso", V84).unwrap_err(),
            "explicit 'media=cdrom' is required for iso images"
        );
        assert!(check_config_value("ide0", "none,media=cdrom", V84).is_ok());
        assert!(check_config_value("ipconfig0", "ip=10.0.0.2/24,gw=10.0.0.1", V84).is_ok());
        assert!(check_config_value("ipconfig0", "gw=10.0.0.1", V84).is_err());
    }

    #[test]
    fn version_specific_keys() {
        assert!(!is_config_key("allow-ksm", V84));
        assert!(is_config_key("allow-ksm", PveVersion::V9_1));
        assert!(check_config_value("intel-tdx", "tdx,attestation=1", PveVersion::V9_1).is_ok());
        assert!(check_config_value("agent", "1,freeze-fs=0", PveVersion::V9_1).is_ok());
        assert!(check_config_value("agent", "1,freeze-fs=0", V84).is_err());
        assert!(check_config_value("agent", "1,freeze-fs-on-backup=0", V84).is_ok());
    }
}
