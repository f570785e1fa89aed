//! Converting unstructured JSON into CEL values the way the apiserver types them from the schema:
//! `integer` is `int`, `number` is `double`, objects with properties are messages whose null-valued
//! optional fields count as absent, maps keep their keys, int-or-string is either, `date-time`,
//! `date` and `duration` strings are timestamps and durations.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::Value;

use crate::node::Node;

/// Converts `v` described by `schema` (if any) into a CEL value.
pub(crate) fn to_cel(v: &Value, schema: Option<&Node>) -> cel::Value {
    match v {
        Value::Null => cel::Value::Null,
        Value::Bool(b) => cel::Value::Bool(*b),
        Value::String(s) => string(s, schema),
        Value::Number(n) => number(n, schema),
        Value::Array(items) => {
            let item_schema = schema.and_then(|s| s.items.as_deref());
            cel::Value::List(Arc::new(items.iter().map(|i| to_cel(i, item_schema)).collect()))
        }
        Value::Object(map) => {
            let is_struct = schema.is_some_and(|s| !s.properties.is_empty());
            let mut out: HashMap<cel::objects::Key, cel::Value> = HashMap::with_capacity(map.len());
            for (k, val) in map {
                let child = schema.and_then(|s| s.child_for_key(k));
                if is_struct && val.is_null() && schema.is_some_and(|s| s.properties.contains_key(k)) {
                    continue;
                }
                out.insert(cel::objects::Key::String(Arc::new(k.clone())), to_cel(val, child));
            }
            cel::Value::Map(cel::objects::Map { map: Arc::new(out) })
        }
    }
}

/// Strings with `format: date-time`/`date` are timestamps and `format: duration` durations in the
/// apiserver's CEL; anything unparsable stays a string (the format check already reported it).
fn string(s: &str, schema: Option<&Node>) -> cel::Value {
    let format = schema
        .filter(|n| n.ty.as_deref() == Some("string"))
        .and_then(|n| n.format.as_deref());
    let parsed = match format {
        Some("date-time") | Some("datetime") => crate::timefmt::parse_date_time(s).map(cel::Value::Timestamp),
        Some("date") => crate::timefmt::parse_date(s).map(cel::Value::Timestamp),
        Some("duration") => crate::timefmt::parse_duration(s).map(cel::Value::Duration),
        _ => None,
    };
    parsed.unwrap_or_else(|| cel::Value::String(Arc::new(s.to_string())))
}

fn number(n: &serde_json::Number, schema: Option<&Node>) -> cel::Value {
    let ty = schema.and_then(|s| s.ty.as_deref());
    match ty {
        Some("number") => cel::Value::Float(n.as_f64().unwrap_or(0.0)),
        _ => {
            if let Some(i) = n.as_i64() {
                cel::Value::Int(i)
            } else if let Some(u) = n.as_u64() {
                cel::Value::UInt(u)
            } else {
                let f = n.as_f64().unwrap_or(0.0);
                if ty == Some("integer") && f.fract() == 0.0 && f.abs() < 9.2e18 {
                    cel::Value::Int(f as i64)
                } else {
                    cel::Value::Float(f)
                }
            }
        }
    }
}
