//! Serde helpers for Proxmox VE's Perl-flavoured JSON typing.
//!
//! PVE returns integers as strings in places (`nextid`, `memory`), booleans as `0`/`1`,
//! and numbers as strings. These helpers accept every form PVE is known to send.
//! Use them with `#[serde(default, deserialize_with = "lenient::...")]`.

use serde::{Deserialize, Deserializer, Serializer};
use serde_json::Value;

/// Interprets a JSON value as an unsigned integer (number, numeric string, or bool).
pub fn value_to_u64(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                .map(|f| f as u64)
        }),
        Value::String(s) => {
            let t = s.trim();
            t.parse::<u64>().ok().or_else(|| {
                t.parse::<f64>()
                    .ok()
                    .filter(|f| *f >= 0.0 && f.fract() == 0.0)
                    .map(|f| f as u64)
            })
        }
        Value::Bool(b) => Some(u64::from(*b)),
        _ => None,
    }
}

/// Interprets a JSON value as a signed integer.
pub fn value_to_i64(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.fract() == 0.0).map(|f| f as i64)),
        Value::String(s) => s.trim().parse::<i64>().ok(),
        Value::Bool(b) => Some(i64::from(*b)),
        _ => None,
    }
}

/// Interprets a JSON value as a float.
pub fn value_to_f64(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        Value::Bool(b) => Some(if *b { 1.0 } else { 0.0 }),
        _ => None,
    }
}

/// Interprets a JSON value as a boolean (`true`/`false`, `0`/`1`, `"0"`/`"1"`, `"true"`/`"false"`).
pub fn value_to_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) => n.as_f64().map(|f| f != 0.0),
        Value::String(s) => match s.trim().to_ascii_lowercase().as_str() {
            "1" | "true" | "yes" | "on" => Some(true),
            "0" | "false" | "no" | "off" | "" => Some(false),
            _ => None,
        },
        _ => None,
    }
}

/// Interprets a JSON value as a string (strings as is, numbers and bools printed).
pub fn value_to_string(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(if *b { "1".into() } else { "0".into() }),
        _ => None,
    }
}

fn invalid<E: serde::de::Error>(what: &str, v: &Value) -> E {
    E::custom(format!("expected {what}, got {v}"))
}

/// Deserializes a required unsigned integer from a number or a numeric string.
pub fn u64<'de, D: Deserializer<'de>>(d: D) -> Result<u64, D::Error> {
    let v = Value::deserialize(d)?;
    value_to_u64(&v).ok_or_else(|| invalid("unsigned integer", &v))
}

/// Deserializes a required `u32` (e.g. a VMID) from a number or a numeric string.
pub fn u32<'de, D: Deserializer<'de>>(d: D) -> Result<u32, D::Error> {
    let v = Value::deserialize(d)?;
    value_to_u64(&v)
        .and_then(|n| u32::try_from(n).ok())
        .ok_or_else(|| invalid("u32", &v))
}

/// Deserializes an optional unsigned integer; `null`, missing or unparsable values give `None`.
pub fn opt_u64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_to_u64))
}

/// Deserializes an optional `u32`.
pub fn opt_u32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref()
        .and_then(value_to_u64)
        .and_then(|n| u32::try_from(n).ok()))
}

/// Deserializes an optional signed integer.
pub fn opt_i64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_to_i64))
}

/// Deserializes an optional float from a number or a numeric string.
pub fn opt_f64<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_to_f64))
}

/// Deserializes a boolean from `0`/`1`, `"0"`/`"1"` or JSON booleans; missing/`null` is `false`.
pub fn bool01<'de, D: Deserializer<'de>>(d: D) -> Result<bool, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    match v {
        None | Some(Value::Null) => Ok(false),
        Some(v) => value_to_bool(&v).ok_or_else(|| invalid("boolean", &v)),
    }
}

/// Deserializes an optional boolean.
pub fn opt_bool<'de, D: Deserializer<'de>>(d: D) -> Result<Option<bool>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_to_bool))
}

/// Deserializes a string from a string or a number (e.g. a task `id` that PVE may send as `100`).
pub fn string<'de, D: Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_to_string).unwrap_or_default())
}

/// Deserializes an optional string from a string or a number.
pub fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    let v = Option::<Value>::deserialize(d)?;
    Ok(v.as_ref().and_then(value_to_string))
}

/// Serializes a boolean as PVE's `1`/`0`.
pub fn ser_bool01<S: Serializer>(b: &bool, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_u8(u8::from(*b))
}

/// Serializes an optional boolean as PVE's `1`/`0` (use with `skip_serializing_if = "Option::is_none"`).
pub fn ser_opt_bool01<S: Serializer>(b: &Option<bool>, s: S) -> Result<S::Ok, S::Error> {
    match b {
        Some(b) => s.serialize_u8(u8::from(*b)),
        None => s.serialize_none(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde::Deserialize;
    use serde_json::json;

    #[derive(Deserialize, Debug)]
    struct T {
        #[serde(deserialize_with = "u64")]
        a: u64,
        #[serde(default, deserialize_with = "opt_u64")]
        b: Option<u64>,
        #[serde(default, deserialize_with = "bool01")]
        c: bool,
        #[serde(default, deserialize_with = "opt_f64")]
        d: Option<f64>,
        #[serde(default, deserialize_with = "string")]
        e: String,
        #[serde(default, deserialize_with = "opt_bool")]
        f: Option<bool>,
        #[serde(deserialize_with = "u32")]
        g: u32,
    }

    #[test]
    fn accepts_pve_quirks() {
        let t: T = serde_json::from_value(json!({
            "a": "105", "b": 4096, "c": 1, "d": "0.25", "e": 100, "f": "0", "g": 100.0
        }))
        .unwrap();
        assert_eq!(t.a, 105);
        assert_eq!(t.b, Some(4096));
        assert!(t.c);
        assert_eq!(t.d, Some(0.25));
        assert_eq!(t.e, "100");
        assert_eq!(t.f, Some(false));
        assert_eq!(t.g, 100);

        let t: T =
            serde_json::from_value(json!({"a": 7, "b": "4096", "c": true, "e": "x", "g": "9"})).unwrap();
        assert_eq!(
            (t.a, t.b, t.c, t.d, t.e.as_str(), t.f, t.g),
            (7, Some(4096), true, None, "x", None, 9)
        );

        let t: T = serde_json::from_value(json!({"a": 1, "c": null, "g": 1})).unwrap();
        assert!(!t.c);
    }

    #[test]
    fn rejects_garbage_for_required() {
        let r: Result<T, _> = serde_json::from_value(json!({"a": "abc", "g": 1}));
        assert!(r.is_err());
        let r: Result<T, _> = serde_json::from_value(json!({"a": 1, "g": 1, "c": "maybe"}));
        assert!(r.is_err());
        let r: Result<T, _> = serde_json::from_value(json!({"a": 1, "g": -5}));
        assert!(r.is_err());
    }

    #[test]
    fn value_conversions() {
        assert_eq!(value_to_u64(&json!("  42 ")), Some(42));
        assert_eq!(value_to_u64(&json!(-1)), None);
        assert_eq!(value_to_i64(&json!("-3")), Some(-3));
        assert_eq!(value_to_bool(&json!("true")), Some(true));
        assert_eq!(value_to_bool(&json!(0)), Some(false));
        assert_eq!(value_to_string(&json!(1.5)).as_deref(), Some("1.5"));
        assert_eq!(value_to_string(&json!([1])), None);
    }

    #[test]
    fn serializes_bool_as_int() {
        #[derive(serde::Serialize)]
        struct S {
            #[serde(serialize_with = "ser_bool01")]
            a: bool,
            #[serde(serialize_with = "ser_opt_bool01", skip_serializing_if = "Option::is_none")]
            b: Option<bool>,
            #[serde(serialize_with = "ser_opt_bool01", skip_serializing_if = "Option::is_none")]
            c: Option<bool>,
        }
        let v = serde_json::to_value(S {
            a: true,
            b: Some(false),
            c: None,
        })
        .unwrap();
        assert_eq!(v, json!({"a": 1, "b": 0}));
    }
}
