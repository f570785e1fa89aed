//! String `format`s the apiserver checks (go-openapi `strfmt.Default`); any other format passes.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

fn re(cell: &'static OnceLock<Option<regex::Regex>>, src: &str) -> Option<&'static regex::Regex> {
    cell.get_or_init(|| regex::Regex::new(src).ok()).as_ref()
}

fn matches(cell: &'static OnceLock<Option<regex::Regex>>, src: &str, s: &str) -> bool {
    // A pattern that fails to compile cannot happen for these literals; be lenient if it did.
    re(cell, src).is_none_or(|r| r.is_match(s))
}

/// Whether `s` is valid for `format` (unknown formats are always valid).
pub(crate) fn is_valid(format: &str, s: &str) -> bool {
    static DATE_TIME: OnceLock<Option<regex::Regex>> = OnceLock::new();
    static DATE: OnceLock<Option<regex::Regex>> = OnceLock::new();
    static UUID: OnceLock<Option<regex::Regex>> = OnceLock::new();
    static MAC: OnceLock<Option<regex::Regex>> = OnceLock::new();
    static HOSTNAME: OnceLock<Option<regex::Regex>> = OnceLock::new();
    static BASE64: OnceLock<Option<regex::Regex>> = OnceLock::new();
    match format {
        "date-time" | "datetime" => matches(
            &DATE_TIME,
            r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]+)?)?([Zz]|[+-][0-9]{2}:?[0-9]{2})?$",
            s,
        ),
        "date" => matches(&DATE, r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$", s),
        "uuid" | "uuid3" | "uuid4" | "uuid5" => matches(
            &UUID,
            r"^(?i)[0-9a-f]{8}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{4}-?[0-9a-f]{12}$",
            s,
        ),
        "ipv4" => s.parse::<Ipv4Addr>().is_ok(),
        "ipv6" => s.parse::<Ipv6Addr>().is_ok(),
        "cidr" => match s.split_once('/') {
            Some((ip, bits)) => {
                let max = if ip.parse::<Ipv4Addr>().is_ok() {
                    32
                } else if ip.parse::<Ipv6Addr>().is_ok() {
                    128
                } else {
                    return false;
                };
                bits.parse::<u32>().is_ok_and(|b| b <= max)
            }
            None => false,
        },
        "mac" => matches(
            &MAC,
            r"^([0-9A-Fa-f]{2}[:-]){5}[0-9A-Fa-f]{2}$|^([0-9A-Fa-f]{2}[:-]){7}[0-9A-Fa-f]{2}$|^([0-9A-Fa-f]{4}\.){2}[0-9A-Fa-f]{4}$",
            s,
        ),
        "hostname" => {
            s.len() <= 255
                && matches(
                    &HOSTNAME,
                    r"^([A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)(\.[A-Za-z0-9]([-A-Za-z0-9]{0,61}[A-Za-z0-9])?)*\.?$",
                    s,
                )
        }
        "duration" => crate::timefmt::parse_duration(s).is_some(),
        "byte" => s.len().is_multiple_of(4) && matches(&BASE64, r"^[A-Za-z0-9+/]*={0,2}$", s),
        _ => true,
    }
}

#[cfg(test)]
mod tests {
    use super::is_valid;

    #[test]
    fn known_formats() {
        assert!(is_valid("date-time", "2024-01-02T03:04:05Z"));
        assert!(is_valid("date-time", "2024-01-02T03:04:05.123+01:00"));
        assert!(!is_valid("date-time", "yesterday"));
        assert!(is_valid("ipv4", "10.0.0.1"));
        assert!(!is_valid("ipv4", "10.0.0.256"));
        assert!(is_valid("ipv6", "fe80::1"));
        assert!(is_valid("cidr", "10.0.0.0/8"));
        assert!(!is_valid("cidr", "10.0.0.0/33"));
        assert!(is_valid("uuid", "123e4567-e89b-12d3-a456-426614174000"));
        assert!(is_valid("byte", "aGVsbG8="));
        assert!(!is_valid("byte", "abc"));
        assert!(
            is_valid("int32", "anything"),
            "non-string formats are not checked"
        );
        assert!(is_valid("mac", "BC:24:11:00:00:01"));
        assert!(is_valid("duration", "1h30m"));
        assert!(!is_valid("duration", "soon"));
    }
}
