//! Named property-string formats of qemu-server (their schemas show them only as `typetext`):
//! `pve-qm-boot`, `pve-vm-cpu-conf`, `pve-qm-hostpci`, `pve-qm-ipconfig`, `pve-qm-smbios1`,
//! `pve-qm-rng`, `pve-qm-watchdog`, `pve-startup-order`, `pve-qemu-sev-fmt`,
//! `pve-qemu-tdx-fmt`, `pve-qm-cicustom` — keys, types and default keys as qemu-server defines
//! them (`PVE/QemuServer.pm`, `QemuServer/CPUConfig.pm`, `PCI.pm`, `Network.pm`, `RNG.pm`).

use super::{Sub, Ty, dkey, dkey_opt, opt, req};

/// `pve-qm-bootdev`: a disk, `netN`, `usbN` or `hostpciN` (not efidisk/tpmstate).
fn bootdev_list(v: &str) -> Result<(), String> {
    for dev in v.split([';', ',', ' ', '\0']).filter(|d| !d.is_empty()) {
        let ok =
            crate::validate::is_disk_key(dev) && !dev.starts_with("efidisk") && !dev.starts_with("tpmstate")
                || matches!(crate::propstr::family(dev), Some("net" | "usb" | "hostpci"));
        if !ok {
            return Err(format!("invalid boot device '{dev}'"));
        }
    }
    Ok(())
}

/// `[[legacy=]<[acdn]{1,4}>] [,order=<device[;device...]>]`: the default key is `legacy`.
pub const BOOT: &[Sub] = &[
    dkey_opt("legacy", Ty::Pattern("[acdn]{1,4}")),
    opt("order", Ty::Custom(bootdev_list)),
];

/// `pve-phys-bits`.
fn phys_bits(v: &str) -> Result<(), String> {
    let ok = v == "host" || (v.len() <= 2 && v.parse::<u32>().is_ok_and(|n| (8..=64).contains(&n)));
    if ok {
        Ok(())
    } else {
        Err("value must be an integer between 8 and 64 or 'host'".into())
    }
}

/// `pve-vm-cpu-conf` (its validator, `validate_vm_cpu_conf`, runs in [`crate::devices::check_cpu`]).
pub const CPU: &[Sub] = &[
    dkey_opt("cputype", Ty::Str),
    opt("flags", Ty::Str),
    opt("guest-phys-bits", Ty::Int(Some(32), Some(64))).since91(),
    opt("hidden", Ty::Bool),
    opt("hv-vendor-id", Ty::Pattern("[a-zA-Z0-9]{1,12}")),
    opt("phys-bits", Ty::Custom(phys_bits)),
    opt("reported-model", Ty::Str),
];

const PCI_ID: Ty = Ty::Pattern("0x[0-9a-fA-F]{4}");

/// `pve-qm-hostpci`.
pub const HOSTPCI: &[Sub] = &[
    dkey_opt(
        "host",
        Ty::Pattern(
            r"(?:(?:[a-f0-9]{4,}:)?[a-f0-9]{2}:[a-f0-9]{2}(?:\.[a-f0-9])?)(?:;(?:(?:[a-f0-9]{4,}:)?[a-f0-9]{2}:[a-f0-9]{2}(?:\.[a-f0-9])?))*",
        ),
    ),
    opt("device-id", PCI_ID),
    opt("driver", Ty::Enum(&["vfio", "keep"])).since91(),
    opt("legacy-igd", Ty::Bool),
    opt("mapping", Ty::ConfigId),
    opt("mdev", Ty::Pattern(r"[^/\.:]+")),
    opt("pcie", Ty::Bool),
    opt("rombar", Ty::Bool),
    opt("romfile", Ty::Pattern("[^,;]+")),
    opt("sub-device-id", PCI_ID),
    opt("sub-vendor-id", PCI_ID),
    opt("vendor-id", PCI_ID),
    opt("x-vga", Ty::Bool),
];

fn cidr(v: &str, six: bool) -> bool {
    let Some((addr, prefix)) = v.split_once('/') else {
        return false;
    };
    let Ok(prefix) = prefix.parse::<u8>() else {
        return false;
    };
    if six {
        addr.parse::<std::net::Ipv6Addr>().is_ok() && prefix <= 128
    } else {
        addr.parse::<std::net::Ipv4Addr>().is_ok() && prefix <= 32
    }
}

fn ip4_config(v: &str) -> Result<(), String> {
    if v == "dhcp" || cidr(v, false) {
        Ok(())
    } else {
        Err("value does not look like a valid ipv4 network configuration".into())
    }
}

fn ip6_config(v: &str) -> Result<(), String> {
    if v == "dhcp" || v == "auto" || cidr(v, true) {
        Ok(())
    } else {
        Err("value does not look like a valid ipv6 network configuration".into())
    }
}

fn ip4(v: &str) -> Result<(), String> {
    v.parse::<std::net::Ipv4Addr>()
        .map(|_| ())
        .map_err(|_| "value does not look like a valid IPv4 address".to_owned())
}

fn ip6(v: &str) -> Result<(), String> {
    v.parse::<std::net::Ipv6Addr>()
        .map(|_| ())
        .map_err(|_| "value does not look like a valid IPv6 address".to_owned())
}

/// `pve-qm-ipconfig` (no default key).
pub const IPCONFIG: &[Sub] = &[
    opt("gw", Ty::Custom(ip4)),
    opt("gw6", Ty::Custom(ip6)),
    opt("ip", Ty::Custom(ip4_config)),
    opt("ip6", Ty::Custom(ip6_config)),
];

/// `pve-qm-smbios1` (no default key).
pub const SMBIOS1: &[Sub] = &[
    opt("base64", Ty::Bool),
    opt("family", Ty::Str),
    opt("manufacturer", Ty::Str),
    opt("product", Ty::Str),
    opt("serial", Ty::Str),
    opt("sku", Ty::Str),
    opt(
        "uuid",
        Ty::Pattern("[a-fA-F0-9]{8}(?:-[a-fA-F0-9]{4}){3}-[a-fA-F0-9]{12}"),
    ),
    opt("version", Ty::Str),
];

/// `pve-qm-rng`.
pub const RNG: &[Sub] = &[
    dkey("source", Ty::Enum(&["/dev/urandom", "/dev/random", "/dev/hwrng"])),
    opt("max_bytes", Ty::Int(None, None)),
    opt("period", Ty::Int(None, None)),
];

/// `pve-qm-watchdog`.
pub const WATCHDOG: &[Sub] = &[
    dkey_opt("model", Ty::Enum(&["i6300esb", "ib700"])),
    opt(
        "action",
        Ty::Enum(&["reset", "shutdown", "poweroff", "pause", "debug", "none"]),
    ),
];

/// `pve-startup-order`.
pub const STARTUP: &[Sub] = &[
    dkey_opt("order", Ty::Pattern(r"\d+")),
    opt("up", Ty::Pattern(r"\d+")),
    opt("down", Ty::Pattern(r"\d+")),
];

/// `pve-qemu-sev-fmt`.
pub const AMD_SEV: &[Sub] = &[
    dkey("type", Ty::Enum(&["std", "es", "snp"])).max_len(3),
    opt("allow-smt", Ty::Bool),
    opt("kernel-hashes", Ty::Bool),
    opt("no-debug", Ty::Bool),
    opt("no-key-sharing", Ty::Bool),
];

/// `pve-qemu-tdx-fmt` (9.x; `attestation` is required).
pub const INTEL_TDX: &[Sub] = &[
    dkey("type", Ty::Enum(&["tdx"])),
    req("attestation", Ty::Bool),
    opt("vsock-cid", Ty::Int(Some(2), None)),
    opt("vsock-port", Ty::Int(Some(0), None)),
];

/// `pve-qm-cicustom` (no default key).
pub const CICUSTOM: &[Sub] = &[
    opt("meta", Ty::Volume),
    opt("network", Ty::Volume),
    opt("user", Ty::Volume),
    opt("vendor", Ty::Volume),
];
