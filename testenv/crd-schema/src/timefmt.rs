//! `date-time`, `date` and `duration` strings, which the apiserver hands to CEL as timestamps and
//! durations.

use chrono::{DateTime, FixedOffset, NaiveDate, TimeZone};

/// Parses an RFC 3339 `date-time` (also with a space instead of `T`, or without seconds' fraction).
pub(crate) fn parse_date_time(s: &str) -> Option<DateTime<FixedOffset>> {
    DateTime::parse_from_rfc3339(s)
        .ok()
        .or_else(|| DateTime::parse_from_rfc3339(&s.replacen(' ', "T", 1)).ok())
}

/// Parses a full `date` (`2006-01-02`) as midnight UTC.
pub(crate) fn parse_date(s: &str) -> Option<DateTime<FixedOffset>> {
    let d = NaiveDate::parse_from_str(s, "%Y-%m-%d").ok()?;
    let utc = FixedOffset::east_opt(0)?;
    utc.from_local_datetime(&d.and_hms_opt(0, 0, 0)?).single()
}

/// Parses a Go-style duration (`1h30m`, `300ms`, `-2.5s`, also `d` and `w` as strfmt allows).
pub(crate) fn parse_duration(s: &str) -> Option<chrono::Duration> {
    let (neg, mut rest) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    if rest.is_empty() {
        return None;
    }
    if rest == "0" {
        return Some(chrono::Duration::zero());
    }
    let mut total_ns: f64 = 0.0;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .unwrap_or(rest.len());
        if num_len == 0 {
            return None;
        }
        let value: f64 = rest[..num_len].parse().ok()?;
        rest = &rest[num_len..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit = &rest[..unit_len];
        rest = &rest[unit_len..];
        let scale = match unit {
            "ns" => 1.0,
            "us" | "µs" | "μs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" => 60e9,
            "h" => 3600e9,
            "d" => 86400e9,
            "w" => 7.0 * 86400e9,
            _ => return None,
        };
        total_ns += value * scale;
    }
    if !total_ns.is_finite() || total_ns.abs() > 9.2e18 {
        return None;
    }
    let d = chrono::Duration::nanoseconds(total_ns.round() as i64);
    Some(if neg { -d } else { d })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_kubernetes_time_formats() {
        assert!(parse_date_time("2024-01-02T03:04:05Z").is_some());
        assert!(parse_date_time("2024-01-02T03:04:05.5+02:00").is_some());
        assert!(parse_date_time("yesterday").is_none());
        assert!(parse_date("2024-02-29").is_some());
        assert!(parse_date("2023-02-29").is_none());
        assert_eq!(parse_duration("1h30m"), Some(chrono::Duration::minutes(90)));
        assert_eq!(
            parse_duration("-1.5s"),
            Some(-chrono::Duration::milliseconds(1500))
        );
        assert_eq!(parse_duration("2d"), Some(chrono::Duration::days(2)));
        assert_eq!(parse_duration("0"), Some(chrono::Duration::zero()));
        assert_eq!(parse_duration("5"), None);
        assert_eq!(parse_duration("1x"), None);
    }
}
