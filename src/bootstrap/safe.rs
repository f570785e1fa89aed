//! Values that end up inside the rendered documents (`meta-data`, `network-config`, networkd units,
//! `/etc/proxmox-env`) come from outside: object names and versions from Kubernetes, MACs from
//! Proxmox, DNS servers and VRF names from user specs. A newline or a quote in one of them must not
//! add a key, a section or an environment variable. Values whose place has no escaping (a networkd
//! `Key=Value` line, an environment file) are checked here and refused with an error naming them;
//! YAML scalars are quoted when plain style would change their meaning ([`yaml_scalar`]).
//!
//! Every value Kubernetes and Proxmox produce for a working machine passes, and renders byte for
//! byte as capmox renders it.

use super::error::BootstrapError;
use super::model::{MachineBootstrapInput, NetworkModel};

fn invalid(what: &'static str, value: &str, expected: &'static str) -> BootstrapError {
    BootstrapError::InvalidValue {
        what,
        value: value.chars().take(80).collect(),
        expected,
    }
}

/// Whether `s` is a host name (RFC 1123: dot-separated labels of letters, digits and `-`, not
/// starting or ending with `-`, at most 63 characters each, at most 253 in all) — what every
/// Kubernetes object name is.
pub fn is_host_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
}

/// Whether `s` is a UUID in canonical 8-4-4-4-12 hexadecimal form (any case).
pub fn is_canonical_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if matches!(i, 8 | 13 | 18 | 23) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

/// Whether `s` is a Linux network interface name we render: 1 to 15 letters, digits, `-`, `_`
/// or `.`, not `.` or `..`.
pub fn is_interface_name(s: &str) -> bool {
    (1..=15).contains(&s.len())
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
        && s != "."
        && s != ".."
}

/// Whether `s` is a MAC address: six `:`-separated pairs of hexadecimal digits.
pub fn is_mac(s: &str) -> bool {
    s.len() == 17
        && s.split(':')
            .all(|p| p.len() == 2 && p.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Whether `s` can be a name server entry: an address, optionally with networkd's `:port`,
/// `%interface` and `#server-name` parts — no spaces, quotes or line breaks.
pub fn is_name_server(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b".:%#-_[]".contains(&b))
}

/// Checks the machine's host name and instance id (they are written into the environment file
/// and the `/etc/hostname` data URL of the Ignition path, which have no escaping).
pub fn check_identity(input: &MachineBootstrapInput) -> Result<(), BootstrapError> {
    if input.hostname.is_empty() {
        return Err(BootstrapError::MissingHostname);
    }
    if !is_host_name(&input.hostname) {
        return Err(invalid(
            "hostname",
            &input.hostname,
            "a host name: letters, digits, '-' and '.'",
        ));
    }
    if input.instance_id.is_empty() {
        return Err(BootstrapError::MissingInstanceId);
    }
    if !input
        .instance_id
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-')
    {
        return Err(invalid(
            "instance-id",
            &input.instance_id,
            "letters, digits and '-' (the VM's SMBIOS uuid)",
        ));
    }
    Ok(())
}

/// Checks the values of the network that are rendered verbatim.
pub fn check_network_values(net: &NetworkModel) -> Result<(), BootstrapError> {
    for dev in &net.devices {
        if !dev.mac.is_empty() && !is_mac(&dev.mac) {
            return Err(invalid(
                "MAC address",
                &dev.mac,
                "six ':'-separated hexadecimal pairs",
            ));
        }
        if let Some(d) = dev.dns_servers.iter().find(|d| !is_name_server(d)) {
            return Err(invalid("DNS server", d, "an IP address"));
        }
    }
    let mut names = std::collections::BTreeSet::new();
    for vrf in &net.vrfs {
        if !is_interface_name(&vrf.name) {
            return Err(invalid(
                "VRF name",
                &vrf.name,
                "a Linux interface name: 1 to 15 letters, digits, '-', '_' or '.'",
            ));
        }
        if !names.insert(vrf.name.as_str()) {
            return Err(invalid("VRF name", &vrf.name, "a name used by one VRF only"));
        }
        if let Some(i) = vrf.interfaces.iter().find(|i| !is_interface_name(i)) {
            return Err(invalid("VRF interface", i, "a Linux interface name"));
        }
    }
    Ok(())
}

/// Whether YAML (1.1, as cloud-init's PyYAML reads it, and 1.2) reads `value` written plain as
/// this same string: letters first, then letters, digits, `-`, `_`, `.` or `/`, and none of the
/// words 1.1 resolves to booleans or null.
pub fn plain_safe(value: &str) -> bool {
    !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && value.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n" | "nan" | "inf"
        )
}

/// Whether `c` may stand unescaped inside a quoted YAML scalar without being folded, normalised
/// or refused by a YAML 1.1 or 1.2 reader.
fn quotable(c: char) -> bool {
    matches!(c, '\u{20}'..='\u{7e}')
        || (matches!(c, '\u{a0}'..='\u{d7ff}' | '\u{e000}'..='\u{fffd}' | '\u{10000}'..='\u{10ffff}')
            && !matches!(c, '\u{2028}' | '\u{2029}' | '\u{feff}'))
}

/// `value` as a YAML scalar that reads back as the same string: plain when that is unambiguous,
/// single-quoted when every character may stand in quotes, else double-quoted with escapes.
pub fn yaml_scalar(value: &str) -> String {
    if plain_safe(value) {
        return value.to_owned();
    }
    if value.chars().all(quotable) {
        return format!("'{}'", value.replace('\'', "''"));
    }
    let mut out = String::from("\"");
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if quotable(c) => out.push(c),
            c if u32::from(c) <= 0xFFFF => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08X}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shapes() {
        assert!(is_host_name("c1-cp-0") && is_host_name("a.b-c.d") && is_host_name("0abc"));
        assert!(!is_host_name("a_b") && !is_host_name("-a") && !is_host_name("a..b") && !is_host_name(""));
        assert!(!is_host_name(&"a".repeat(64)));
        assert!(is_canonical_uuid("6C3FA683-bef9-4425-b413-eaa45a9d6191"));
        assert!(!is_canonical_uuid("6c3fa683bef94425b413eaa45a9d6191"));
        assert!(
            is_mac("BC:24:11:aa:00:01") && !is_mac("BC:24:11:aa:00:01\n") && !is_mac("BC-24-11-AA-00-01")
        );
        assert!(is_interface_name("vrf-blue") && !is_interface_name("vrf blue") && !is_interface_name(".."));
        assert!(!is_interface_name("a-very-long-vrf-name"));
        assert!(is_name_server("2001:db8::53") && is_name_server("1.1.1.1#one.one.one.one"));
        assert!(!is_name_server("1.1.1.1\n[Match]") && !is_name_server("'x'"));
    }

    #[test]
    fn scalars_read_back() {
        assert_eq!(yaml_scalar("c1-cp-0"), "c1-cp-0");
        assert_eq!(yaml_scalar("v1.33.0"), "v1.33.0");
        assert_eq!(yaml_scalar("yes"), "'yes'");
        assert_eq!(yaml_scalar("2001-12-14"), "'2001-12-14'");
        assert_eq!(yaml_scalar("it's"), "'it''s'");
        assert_eq!(yaml_scalar("a\nb\u{7f}\u{2028}"), "\"a\\u000Ab\\u007F\\u2028\"");
        assert_eq!(yaml_scalar("\"\\"), "'\"\\'");
        assert_eq!(yaml_scalar("\u{0}\"\\"), "\"\\u0000\\\"\\\\\"");
    }
}
