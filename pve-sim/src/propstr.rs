//! PVE property strings (`virtio=BC:24:11:..,bridge=vmbr0`) and validation of the VM config keys.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;

pub use crate::config_keys::{NUMERIC_KEYS, check_config_value, family, is_config_key};
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

static TAG: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^[a-zA-Z0-9_][a-zA-Z0-9_\-+.]*$").ok());

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

/// PVE's `parse_size` (`disk-size`): a number with an optional `K`/`M`/`G`/`T` (or `KiB`...) unit.
pub fn parse_size_pve(s: &str) -> Option<u64> {
    let unit_at = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(unit_at);
    if !crate::formats::pattern_matches(r"\d+(?:\.\d+)?", num) {
        return None;
    }
    let mult: u64 = match unit {
        "" => 1,
        "K" | "KiB" => 1 << 10,
        "M" | "MiB" => 1 << 20,
        "G" | "GiB" => 1 << 30,
        "T" | "TiB" => 1 << 40,
        _ => return None,
    };
    num.parse::<f64>().ok().map(|v| (v * mult as f64) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_and_sizes() {
        assert_eq!(normalise_tags("B;a,a c"), "a;b;c");
        assert_eq!(parse_size("20G"), Some(20 << 30));
        assert_eq!(format_size(10752 << 20), "10752M");
        assert_eq!(
            set_key("local-lvm:vm-1-disk-0,size=20G", "size", "40G"),
            "local-lvm:vm-1-disk-0,size=40G"
        );
        assert_eq!(parse_size_pve("4GiB"), Some(4 << 30));
        assert_eq!(parse_size_pve("1.5K"), Some(1536));
        assert_eq!(parse_size_pve("5X"), None);
    }
}
