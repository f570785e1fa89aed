//! Request parameters: decoding (query, form, JSON) and typed access after validation.

use serde_json::{Map, Value};

use crate::error::ApiError;

/// Percent-decodes a string; `plus_space` turns `+` into a space (form encoding).
pub fn percent_decode(s: &str, plus_space: bool) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' if plus_space => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Decodes `a=1&b=2&b=3` into a parameter map; repeated keys become arrays.
pub fn parse_urlencoded(s: &str, into: &mut Map<String, Value>) {
    for pair in s.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let key = percent_decode(k, true);
        let value = Value::String(percent_decode(v, true));
        match into.get_mut(&key) {
            Some(Value::Array(items)) => items.push(value),
            Some(existing) => {
                let first = existing.take();
                *existing = Value::Array(vec![first, value]);
            }
            None => {
                into.insert(key, value);
            }
        }
    }
}

/// Validated request parameters.
#[derive(Clone, Default)]
pub struct Params(pub Map<String, Value>);

impl std::fmt::Debug for Params {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Params({})", crate::redact::redact(&self.0))
    }
}

impl Params {
    /// Raw value.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// Whether the parameter is present.
    pub fn has(&self, key: &str) -> bool {
        self.0.contains_key(key)
    }

    /// String value (numbers are stringified).
    pub fn str(&self, key: &str) -> Option<String> {
        match self.0.get(key)? {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(if *b { "1" } else { "0" }.to_string()),
            Value::Array(items) => Some(items.iter().map(value_text).collect::<Vec<_>>().join(",")),
            _ => None,
        }
    }

    /// A PVE list value (`delete=a,b;c d`): its non-empty items.
    pub fn list(&self, key: &str) -> Vec<String> {
        self.str(key)
            .map(|d| {
                d.split([',', ';', ' '])
                    .filter(|x| !x.is_empty())
                    .map(String::from)
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Integer value.
    pub fn int(&self, key: &str) -> Option<i64> {
        self.0.get(key).and_then(as_int)
    }

    /// Boolean value (PVE semantics: 1/0, true/false JSON).
    pub fn bool(&self, key: &str) -> Option<bool> {
        self.0.get(key).and_then(as_bool)
    }

    /// The VMID path parameter.
    pub fn vmid(&self) -> Result<u32, ApiError> {
        self.int("vmid")
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| ApiError::param("vmid", "property is missing and it is not optional"))
    }

    /// The node path parameter.
    pub fn node(&self) -> String {
        self.str("node").unwrap_or_default()
    }
}

/// Text of a scalar value.
pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// Integer from a JSON number or numeric string.
pub fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => {
            let t = s.trim();
            if t.is_empty()
                || !t
                    .trim_start_matches(['+', '-'])
                    .chars()
                    .all(|c| c.is_ascii_digit())
            {
                return None;
            }
            t.parse().ok()
        }
        _ => None,
    }
}

/// Boolean as PVE accepts it: `1`/`0` (string or number), JSON `true`/`false`.
pub fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => match n.as_i64() {
            Some(1) => Some(true),
            Some(0) => Some(false),
            _ => None,
        },
        Value::String(s) => match s.as_str() {
            "1" => Some(true),
            "0" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decoding_and_debug() {
        let mut m = Map::new();
        parse_urlencoded("command=ls&command=-la&password=p%40ss&x=a+b", &mut m);
        assert_eq!(m["command"], serde_json::json!(["ls", "-la"]));
        assert_eq!(m["x"], "a b");
        assert_eq!(percent_decode("local%3Aiso%2Fa.iso", false), "local:iso/a.iso");
        assert_eq!(percent_decode("100%", false), "100%");
        let p = Params(m);
        assert!(!format!("{p:?}").contains("p@ss"));
        assert_eq!(as_int(&serde_json::json!("42")), Some(42));
        assert_eq!(as_int(&serde_json::json!("4x")), None);
        assert_eq!(as_bool(&serde_json::json!(0)), Some(false));
    }
}
