//! Go's duration syntax (`15s`, `1m30s`, `200ms`, `1h`, `1.5s`), as capmox's flags and CAPI's
//! manifests (`nodeDrainTimeout`, …) write durations.

use std::time::Duration;

/// Parses a Go duration (`15s`, `1m30s`, `200ms`, `1h`, `1.5s`). A bare `0` is zero.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let s = s.trim();
    if s == "0" {
        return Ok(Duration::ZERO);
    }
    if s.is_empty() {
        return Err("empty duration".into());
    }
    let mut total = 0f64;
    let mut rest = s;
    while !rest.is_empty() {
        let num_len = rest
            .find(|c: char| !(c.is_ascii_digit() || c == '.'))
            .ok_or_else(|| format!("duration '{s}' lacks a unit (ns, us, ms, s, m, h)"))?;
        let (num, tail) = rest.split_at(num_len);
        let value: f64 = num
            .parse()
            .map_err(|_| format!("invalid number in duration '{s}'"))?;
        let unit_len = tail
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(tail.len());
        let (unit, tail) = tail.split_at(unit_len);
        let factor = match unit {
            "ns" => 1e-9,
            "us" | "µs" => 1e-6,
            "ms" => 1e-3,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            other => return Err(format!("unknown unit '{other}' in duration '{s}'")),
        };
        total += value * factor;
        rest = tail;
    }
    Duration::try_from_secs_f64(total).map_err(|e| format!("duration '{s}': {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_durations() {
        assert_eq!(parse_duration("15s"), Ok(Duration::from_secs(15)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("").is_err());
        assert!(parse_duration("5").is_err());
        assert!(parse_duration("5d").is_err());
    }
}
