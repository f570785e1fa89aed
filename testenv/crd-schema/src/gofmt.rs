//! Go `fmt` look-alikes, so messages read exactly like the apiserver's.

use serde_json::Value;

/// Go `strconv.Quote` (close enough for error messages: printable Unicode is kept).
pub fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Go `%v` of a `float64` (shortest representation, `%e` form for exponents < -4 or >= 21
/// digits as `strconv.FormatFloat(f, 'g', -1, 64)` decides with precision 6).
pub fn float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_string();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_string();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_string();
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = match sci.split_once('e') {
        Some((m, e)) => (m.to_string(), e.parse::<i32>().unwrap_or(0)),
        None => (sci.clone(), 0),
    };
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    } else {
        format!("{f}")
    }
}

/// Go `%v` of a JSON number as the apiserver holds it (int64 when integral, float64 otherwise).
pub fn number(n: &serde_json::Number) -> String {
    if let Some(i) = n.as_i64() {
        i.to_string()
    } else {
        float(n.as_f64().unwrap_or(0.0))
    }
}

/// How `field.Error.ErrorBody()` prints a bad value: simple types with `%v`, strings with `%q`,
/// anything else with `%#v`.
pub fn value(v: &Value) -> String {
    match v {
        Value::Null => quote("null"),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        other => sharp_v(other),
    }
}

/// Go `%#v` of an unstructured value.
pub fn sharp_v(v: &Value) -> String {
    match v {
        Value::Null => "interface {}(nil)".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => quote(s),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(sharp_v).collect();
            format!("[]interface {{}}{{{}}}", inner.join(", "))
        }
        Value::Object(map) => {
            let inner: Vec<String> = map
                .iter()
                .map(|(k, v)| format!("{}:{}", quote(k), sharp_v(v)))
                .collect();
            format!("map[string]interface {{}}{{{}}}", inner.join(", "))
        }
    }
}

/// Go `%v` of an unstructured value (`x`, `3`, `[a b]`, `map[k:v]`).
pub fn go_v(v: &Value) -> String {
    match v {
        Value::Null => "<nil>".to_string(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => number(n),
        Value::String(s) => s.clone(),
        Value::Array(items) => {
            let inner: Vec<String> = items.iter().map(go_v).collect();
            format!("[{}]", inner.join(" "))
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            let inner: Vec<String> = keys
                .iter()
                .map(|k| format!("{k}:{}", go_v(&map[k.as_str()])))
                .collect();
            format!("map[{}]", inner.join(" "))
        }
    }
}

/// Go `%T` of an unstructured value.
pub fn go_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "<nil>",
        Value::Bool(_) => "bool",
        Value::Number(n) if n.is_i64() || n.is_u64() => "int64",
        Value::Number(_) => "float64",
        Value::String(_) => "string",
        Value::Array(_) => "[]interface {}",
        Value::Object(_) => "map[string]interface {}",
    }
}

/// Go `%#v` of an unstructured value (alias of [`sharp_v`]).
pub fn go_sharp_v(v: &Value) -> String {
    sharp_v(v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_like_go() {
        assert_eq!(float(128.0), "128");
        assert_eq!(float(65536.0), "65536");
        assert_eq!(float(1_000_000.0), "1e+06");
        assert_eq!(float(0.5), "0.5");
        assert_eq!(float(0.00001), "1e-05");
        assert_eq!(float(1.5e-7), "1.5e-07");
        assert_eq!(float(-3.25), "-3.25");
    }

    #[test]
    fn values_like_go() {
        assert_eq!(value(&json!("a\"b")), "\"a\\\"b\"");
        assert_eq!(value(&json!(5)), "5");
        assert_eq!(value(&json!(null)), "\"null\"");
        assert_eq!(
            value(&json!({"a": 1, "b": ["x"]})),
            "map[string]interface {}{\"a\":1, \"b\":[]interface {}{\"x\"}}"
        );
    }
}
