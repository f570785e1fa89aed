//! Validation of a custom resource, in the apiserver's order: OpenAPI v3 keywords (as
//! kube-openapi words them), `x-kubernetes-list-type` uniqueness, then the CEL rules — which are
//! not run when an earlier error is a type mismatch, an unsupported enum value, a missing required
//! field, or a too long string / too many items.

use serde_json::Value;

use crate::error::{FieldError, FieldErrorKind};
use crate::gofmt;
use crate::node::Node;
use crate::{celwalk, formats, listtype};

/// Joins a property name onto a field path (`field.Path.Child`).
pub(crate) fn child(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

/// Appends a list index (`field.Path.Index`).
pub(crate) fn index(path: &str, i: usize) -> String {
    format!("{path}[{i}]")
}

/// Appends a map key (`field.Path.Key`).
pub(crate) fn key(path: &str, k: &str) -> String {
    format!("{path}[{k}]")
}

/// The old element of a list that corresponds to `item`: only `x-kubernetes-list-type: map` lists
/// correlate, by their key fields.
pub(crate) fn correlate_item<'a>(s: &Node, old: Option<&'a Value>, item: &Value) -> Option<&'a Value> {
    if s.list_type.as_deref() != Some("map") || s.list_map_keys.is_empty() {
        return None;
    }
    let old_items = old?.as_array()?;
    let keys_of = |v: &Value| -> Option<Vec<Value>> {
        let m = v.as_object()?;
        Some(
            s.list_map_keys
                .iter()
                .map(|k| m.get(k).cloned().unwrap_or(Value::Null))
                .collect(),
        )
    };
    let wanted = keys_of(item)?;
    old_items
        .iter()
        .find(|o| keys_of(o).is_some_and(|k| json_eq_all(&k, &wanted)))
}

fn json_eq_all(a: &[Value], b: &[Value]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| json_eq(x, y))
}

/// JSON equality with numbers compared by value (`1` equals `1.0`).
pub(crate) fn json_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64()) {
            (Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| json_eq(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| json_eq(v, w)))
        }
        _ => a == b,
    }
}

/// Runs every validation pass.
pub(crate) fn validate(root: &Node, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
    let mut errs = Vec::new();
    openapi(root, obj, old, "", &mut errs);
    // List-type invariants ratchet as a whole: checked only when the old object satisfied them.
    let old_list_ok = old.is_none_or(|o| {
        let mut old_errs = Vec::new();
        listtype::validate(root, o, "", &mut old_errs);
        old_errs.is_empty()
    });
    if old_list_ok {
        listtype::validate(root, obj, "", &mut errs);
    }
    // strategy.go hasBlockingErr: these leave the object in a shape the rules were not written for.
    let blocking = errs.iter().any(|e| {
        matches!(
            e.kind,
            FieldErrorKind::TypeInvalid
                | FieldErrorKind::NotSupported
                | FieldErrorKind::Required
                | FieldErrorKind::TooLong
                | FieldErrorKind::TooMany
        )
    });
    if blocking {
        errs.push(FieldError::invalid(
            "<nil>",
            Value::Null,
            "some validation rules were not checked because the object was invalid; correct the existing errors to complete validation",
        ));
    } else {
        celwalk::validate(root, obj, old, "", &mut errs);
    }
    // A nil field.Path prints as "<nil>" (e.g. a rule on the root object).
    for e in &mut errs {
        if e.field.is_empty() {
            e.field = "<nil>".to_string();
        }
    }
    errs
}

/// The JSON type name go-openapi sees for `v`.
fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) => {
            if n.is_f64() {
                "number"
            } else {
                "integer"
            }
        }
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn type_matches(ty: &str, v: &Value) -> bool {
    let actual = json_type(v);
    if actual == ty {
        return true;
    }
    match (ty, v) {
        ("number", Value::Number(_)) => true,
        ("integer", Value::Number(n)) => n.as_f64().is_some_and(|f| f.fract() == 0.0),
        _ => false,
    }
}

/// Validates `v` at `path` against `s` (kube-openapi's `SchemaValidator`).
pub(crate) fn openapi(s: &Node, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if old.is_some_and(|o| json_eq(o, v)) {
        // Validation ratcheting: an unchanged value keeps passing.
        return;
    }
    // type (and nullable)
    if v.is_null() {
        if let Some(ty) = &s.ty
            && !s.nullable
        {
            errs.push(type_error(path, ty, "null"));
        }
        check_enum(s, v, path, errs);
        return;
    }
    if let Some(ty) = &s.ty
        && !type_matches(ty, v)
    {
        type_mismatch(s, ty, v, path, errs);
    }
    composition(s, v, path, errs);
    match v {
        Value::String(st) => {
            string_checks(s, st, v, path, errs);
            if let Some(f) = &s.format
                && !formats::is_valid(f, st)
            {
                errs.push(FieldError::new(
                    path,
                    FieldErrorKind::TypeInvalid,
                    format!("{} in body must be of type {f}: {}", path, gofmt::quote(st)),
                    Some(v.clone()),
                ));
            }
        }
        Value::Number(n) => number_checks(s, n, v, path, errs),
        _ => {}
    }
    if let Value::Array(items) = v {
        // kube-openapi's sliceValidator: items first, then the size and uniqueness checks.
        if let Some(item_schema) = s.items.as_deref() {
            for (i, item) in items.iter().enumerate() {
                let old_item = correlate_item(s, old, item);
                openapi(item_schema, item, old_item, &index(path, i), errs);
            }
        }
        array_checks(s, items, path, errs);
    }
    check_enum(s, v, path, errs);
    if let Value::Object(map) = v {
        object_checks(s, map, old, path, errs);
    }
}

/// kube-openapi's typeValidator once the JSON types differ: with a `format`, a non-string,
/// non-list value is reported against the format (`must be of type int32: "double"`), and strings
/// or lists pass a formatted non-numeric schema; otherwise against the type.
fn type_mismatch(s: &Node, ty: &str, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let string_or_list = v.is_string() || v.is_array();
    if let Some(format) = &s.format {
        // The format go-openapi infers from a decoded JSON value.
        let data_format = match v {
            Value::Number(n) if n.is_f64() => "double",
            Value::Number(_) => "int64",
            _ => "",
        };
        if !string_or_list && data_format != format {
            errs.push(type_error(path, format, data_format));
            return;
        }
        if ty != "number" && ty != "integer" && string_or_list {
            return;
        }
    }
    errs.push(type_error(path, ty, json_type(v)));
}

fn type_error(path: &str, ty: &str, actual: &str) -> FieldError {
    FieldError::new(
        path,
        FieldErrorKind::TypeInvalid,
        format!("{path} in body must be of type {ty}: {}", gofmt::quote(actual)),
        Some(Value::String(actual.to_string())),
    )
}

fn composition(s: &Node, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    for sub in &s.all_of {
        openapi(sub, v, None, path, errs);
    }
    if !s.any_of.is_empty() {
        let mut first_failure: Option<Vec<FieldError>> = None;
        let mut ok = false;
        for sub in &s.any_of {
            let mut sub_errs = Vec::new();
            openapi(sub, v, None, path, &mut sub_errs);
            if sub_errs.is_empty() {
                ok = true;
                break;
            }
            if first_failure.is_none() {
                first_failure = Some(sub_errs);
            }
        }
        if !ok {
            errs.push(FieldError::invalid(
                path,
                Value::String(String::new()),
                format!("{path} in body must validate at least one schema (anyOf)"),
            ));
            errs.extend(first_failure.unwrap_or_default());
        }
    }
    if !s.one_of.is_empty() {
        let mut matched = 0;
        let mut first_failure: Option<Vec<FieldError>> = None;
        for sub in &s.one_of {
            let mut sub_errs = Vec::new();
            openapi(sub, v, None, path, &mut sub_errs);
            if sub_errs.is_empty() {
                matched += 1;
            } else if first_failure.is_none() {
                first_failure = Some(sub_errs);
            }
        }
        if matched != 1 {
            errs.push(FieldError::invalid(
                path,
                Value::String(String::new()),
                format!("{path} in body must validate one and only one schema (oneOf)"),
            ));
            if matched == 0 {
                errs.extend(first_failure.unwrap_or_default());
            }
        }
    }
    if let Some(not) = &s.not {
        let mut sub_errs = Vec::new();
        openapi(not, v, None, path, &mut sub_errs);
        if sub_errs.is_empty() {
            errs.push(FieldError::invalid(
                path,
                Value::String(String::new()),
                format!("{path} in body must not validate the schema (not)"),
            ));
        }
    }
}

fn string_checks(s: &Node, st: &str, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let len = st.chars().count() as u64;
    if let Some(max) = s.max_length
        && len > max
    {
        let unit = if max == 1 { "byte" } else { "bytes" };
        errs.push(FieldError::new(
            path,
            FieldErrorKind::TooLong,
            format!("may not be more than {max} {unit}"),
            Some(v.clone()),
        ));
        return;
    }
    if let Some(min) = s.min_length
        && len < min
    {
        errs.push(FieldError::invalid(
            path,
            v.clone(),
            format!("{path} in body should be at least {min} chars long"),
        ));
        return;
    }
    if let Some(p) = &s.pattern
        && !p.is_match(st)
    {
        errs.push(FieldError::invalid(
            path,
            v.clone(),
            format!("{path} in body should match '{}'", p.source()),
        ));
    }
}

fn number_checks(s: &Node, n: &serde_json::Number, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let f = n.as_f64().unwrap_or(0.0);
    if let Some(m) = s.multiple_of {
        let ok = if m == 0.0 {
            true
        } else if let (Some(i), true) = (n.as_i64(), m.fract() == 0.0) {
            i % (m as i64) == 0
        } else {
            let q = f / m;
            (q - q.round()).abs() < 1e-9
        };
        if !ok {
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                format!("{path} in body should be a multiple of {}", gofmt::float(m)),
            ));
        }
    }
    if let Some(min) = s.minimum {
        let bad = if s.exclusive_minimum { f <= min } else { f < min };
        if bad {
            let rel = if s.exclusive_minimum {
                "greater than"
            } else {
                "greater than or equal to"
            };
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                format!("{path} in body should be {rel} {}", gofmt::float(min)),
            ));
        }
    }
    if let Some(max) = s.maximum {
        let bad = if s.exclusive_maximum { f >= max } else { f > max };
        if bad {
            let rel = if s.exclusive_maximum {
                "less than"
            } else {
                "less than or equal to"
            };
            errs.push(FieldError::invalid(
                path,
                v.clone(),
                format!("{path} in body should be {rel} {}", gofmt::float(max)),
            ));
        }
    }
}

fn array_checks(s: &Node, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    let size = items.len() as u64;
    if let Some(min) = s.min_items
        && size < min
    {
        errs.push(FieldError::invalid(
            path,
            Value::from(size),
            format!("{path} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = s.max_items
        && size > max
    {
        errs.push(too_many(path, size, max));
    }
    if s.unique_items {
        let dup = items
            .iter()
            .enumerate()
            .any(|(i, a)| items[..i].iter().any(|b| json_eq(a, b)));
        if dup {
            errs.push(FieldError::invalid(
                path,
                Value::String(String::new()),
                format!("{path} in body shouldn't contain duplicates"),
            ));
        }
    }
}

fn too_many(path: &str, actual: u64, max: u64) -> FieldError {
    let unit = if max == 1 { "item" } else { "items" };
    FieldError::new(
        path,
        FieldErrorKind::TooMany,
        format!("must have at most {max} {unit}"),
        Some(Value::from(actual)),
    )
}

fn check_enum(s: &Node, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    let Some(allowed) = &s.enum_values else { return };
    if allowed.is_empty() || allowed.iter().any(|a| json_eq(a, v)) {
        return;
    }
    let values: Vec<String> = allowed
        .iter()
        .map(|a| match a {
            Value::String(x) => gofmt::quote(x),
            other => gofmt::quote(&other.to_string()),
        })
        .collect();
    errs.push(FieldError::new(
        path,
        FieldErrorKind::NotSupported,
        format!("supported values: {}", values.join(", ")),
        Some(v.clone()),
    ));
}

fn object_checks(
    s: &Node,
    map: &serde_json::Map<String, Value>,
    old: Option<&Value>,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    // kube-openapi's objectValidator order: property counts, additionalProperties entries,
    // declared properties, then required.
    let n = map.len() as u64;
    if let Some(min) = s.min_properties
        && n < min
    {
        errs.push(FieldError::invalid(
            path,
            Value::from(n),
            format!("{path} in body should have at least {min} properties"),
        ));
    }
    if let Some(max) = s.max_properties
        && n > max
    {
        errs.push(too_many(path, n, max));
    }
    let old_map = old.and_then(Value::as_object);
    if let Some(a) = s.additional_schema() {
        for (k, val) in map {
            if s.properties.contains_key(k) {
                continue;
            }
            let old_val = old_map.and_then(|m| m.get(k));
            openapi(a, val, old_val, &child(path, k), errs);
        }
    }
    for (k, prop) in &s.properties {
        if let Some(val) = map.get(k) {
            let old_val = old_map.and_then(|m| m.get(k));
            openapi(prop, val, old_val, &child(path, k), errs);
        }
    }
    for r in &s.required {
        if !map.contains_key(r) {
            errs.push(FieldError::required(child(path, r), ""));
        }
    }
}

#[cfg(test)]
#[path = "validate_tests.rs"]
mod tests;
