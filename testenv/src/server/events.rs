//! Events: core/v1 `Event` and events.k8s.io/v1 `Event` are one resource, stored once (in the
//! core form) and served through both APIs with the fields mapped (`regarding` ↔
//! `involvedObject`, `note` ↔ `message`, `deprecatedSource` ↔ `source`, ...), validated like
//! kube-apiserver validates them (`ValidateEventCreate`/`ValidateEventUpdate`), with each API's
//! field selectors.

use serde_json::{Map, Value, json};

use super::admission::FieldErr;

/// Group of the new Events API.
pub const NEW_GROUP: &str = "events.k8s.io";

/// (events.k8s.io/v1 name, core/v1 name) of the renamed fields.
const RENAMED: [(&str, &str); 7] = [
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
    ("deprecatedCount", "count"),
];

fn rename(obj: &mut Value, to_core: bool) {
    let Some(m) = obj.as_object_mut() else { return };
    let mut moved = Map::new();
    for (new, core) in RENAMED {
        let (from, to) = if to_core { (new, core) } else { (core, new) };
        if let Some(v) = m.remove(from) {
            moved.insert(to.to_string(), v);
        }
    }
    m.extend(moved);
}

fn ensure(m: &mut Map<String, Value>, k: &str, v: Value) {
    m.entry(k.to_string()).or_insert(v);
}

fn drop_if(m: &mut Map<String, Value>, k: &str, empty: &Value) {
    if m.get(k) == Some(empty) {
        m.remove(k);
    }
}

/// The core/v1 form (how Events are stored), with the fields Go always writes.
pub fn to_core(mut obj: Value) -> Value {
    if obj.get("apiVersion").and_then(Value::as_str) == Some("events.k8s.io/v1") {
        rename(&mut obj, true);
    }
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!("v1"));
        ensure(m, "involvedObject", json!({}));
        ensure(m, "source", json!({}));
        ensure(m, "firstTimestamp", Value::Null);
        ensure(m, "lastTimestamp", Value::Null);
        ensure(m, "eventTime", Value::Null);
        ensure(m, "reportingComponent", json!(""));
        ensure(m, "reportingInstance", json!(""));
        drop_if(m, "count", &json!(0));
    }
    obj
}

/// The events.k8s.io/v1 form of a stored Event.
pub fn to_new(mut obj: Value) -> Value {
    rename(&mut obj, false);
    if let Some(m) = obj.as_object_mut() {
        m.insert("apiVersion".into(), json!("events.k8s.io/v1"));
        ensure(m, "regarding", json!({}));
        ensure(m, "eventTime", Value::Null);
        ensure(m, "deprecatedSource", json!({}));
        ensure(m, "deprecatedFirstTimestamp", Value::Null);
        ensure(m, "deprecatedLastTimestamp", Value::Null);
        drop_if(m, "reportingController", &json!(""));
        drop_if(m, "reportingInstance", &json!(""));
        drop_if(m, "deprecatedCount", &json!(0));
    }
    obj
}

/// Converts between the two forms by target `apiVersion`.
pub fn convert(obj: Value, api_version: &str) -> Value {
    if api_version == "v1" {
        to_core(obj)
    } else {
        to_new(to_core(obj))
    }
}

/// Maps a field-selector label of the request version to the stored (core) field, or `None` when
/// that API does not support it.
pub fn field_label(new_api: bool, label: &str) -> Option<String> {
    const REF: [&str; 7] = [
        "kind",
        "namespace",
        "name",
        "uid",
        "apiVersion",
        "resourceVersion",
        "fieldPath",
    ];
    let (obj_field, controller) = if new_api {
        ("regarding", "reportingController")
    } else {
        ("involvedObject", "reportingComponent")
    };
    if let Some(sub) = label.strip_prefix(obj_field).and_then(|r| r.strip_prefix('.'))
        && REF.contains(&sub)
    {
        return Some(format!("involvedObject.{sub}"));
    }
    match label {
        "metadata.name" | "metadata.namespace" | "reason" | "type" => Some(label.to_string()),
        l if l == controller => Some("reportingComponent".into()),
        "source" if !new_api => Some("source.component".into()),
        _ => None,
    }
}

fn s<'a>(e: &'a Value, k: &str) -> &'a str {
    e.get(k).and_then(Value::as_str).unwrap_or_default()
}

fn set(v: Option<&Value>) -> bool {
    !matches!(v, None | Some(Value::Null))
}

fn err(field: &str, reason: &str, message: String) -> FieldErr {
    FieldErr {
        field: field.into(),
        reason: reason.into(),
        message,
    }
}

fn required(field: &str) -> FieldErr {
    err(field, "FieldValueRequired", "Required value".into())
}

fn invalid(field: &str, value: &str, why: &str) -> FieldErr {
    err(
        field,
        "FieldValueInvalid",
        format!("Invalid value: {value:?}: {why}"),
    )
}

fn qualified_name(v: &str, field: &str, out: &mut Vec<FieldErr>) {
    let name = v.rsplit('/').next().unwrap_or_default();
    if name.is_empty() {
        out.push(invalid(field, v, "name part must be non-empty"));
    }
    let ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        && name.ends_with(|c: char| c.is_ascii_alphanumeric());
    if !ok {
        out.push(invalid(
            field,
            v,
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        ));
    }
}

fn legacy(e: &Value, new_api: bool, out: &mut Vec<FieldErr>) {
    let ns = e
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let obj_ns = e
        .pointer("/involvedObject/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if !set(e.get("eventTime")) {
        let bad = if obj_ns.is_empty() {
            !ns.is_empty() && ns != "default"
        } else {
            ns != obj_ns
        };
        if bad {
            out.push(invalid(
                "involvedObject.namespace",
                obj_ns,
                "does not match event.namespace",
            ));
        }
        return;
    }
    if obj_ns.is_empty() && ns != "default" && ns != "kube-system" {
        out.push(invalid(
            "involvedObject.namespace",
            obj_ns,
            "does not match event.namespace",
        ));
    }
    let controller = if new_api {
        "reportingController"
    } else {
        "reportingComponent"
    };
    let rc = s(e, "reportingComponent");
    if rc.is_empty() {
        out.push(required(controller));
    }
    qualified_name(rc, controller, out);
    for (field, limit, what) in [
        ("reportingInstance", 128, "reportingInstance"),
        ("action", 128, "action"),
        ("reason", 128, "reason"),
    ] {
        let v = s(e, field);
        if v.is_empty() {
            out.push(required(what));
        }
        if v.chars().count() > limit {
            out.push(invalid(what, "", &format!("can have at most {limit} characters")));
        }
    }
    if s(e, "message").chars().count() > 1024 {
        out.push(invalid("message", "", "can have at most 1024 characters"));
    }
}

fn series(e: &Value, out: &mut Vec<FieldErr>) {
    let Some(sr) = e.get("series").filter(|v| v.is_object()) else {
        return;
    };
    if sr.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
        out.push(invalid("series.count", "", "should be at least 2"));
    }
    if !set(sr.get("lastObservedTime")) {
        out.push(required("series.lastObservedTime"));
    }
}

/// `ValidateEventCreate` on the stored (core) form; `new_api` when the request came through
/// events.k8s.io/v1.
pub fn validate_create(e: &Value, new_api: bool) -> Vec<FieldErr> {
    let mut out = Vec::new();
    legacy(e, new_api, &mut out);
    if !new_api {
        return out;
    }
    series(e, &mut out);
    if !set(e.get("eventTime")) {
        out.push(required("eventTime"));
    }
    let ty = s(e, "type");
    if ty != "Normal" && ty != "Warning" {
        out.push(invalid("type", "", &format!("has invalid value: {ty}")));
    }
    for f in ["firstTimestamp", "lastTimestamp"] {
        if set(e.get(f)) {
            out.push(invalid(f, "", "needs to be unset"));
        }
    }
    if e.get("count").and_then(Value::as_i64).unwrap_or(0) != 0 {
        out.push(invalid("count", "", "needs to be unset"));
    }
    if !s(e.get("source").unwrap_or(&Value::Null), "component").is_empty()
        || !s(e.get("source").unwrap_or(&Value::Null), "host").is_empty()
    {
        out.push(invalid("source", "", "needs to be unset"));
    }
    out
}

/// `ValidateEventUpdate` on the stored (core) forms.
pub fn validate_update(new: &Value, old: &Value, new_api: bool) -> Vec<FieldErr> {
    let mut out = Vec::new();
    legacy(new, new_api, &mut out);
    if !new_api {
        return out;
    }
    if new.get("series") != old.get("series") {
        series(new, &mut out);
    }
    for f in [
        "involvedObject",
        "reason",
        "message",
        "source",
        "firstTimestamp",
        "lastTimestamp",
        "count",
        "reason",
        "type",
        "eventTime",
        "action",
        "related",
        "reportingComponent",
        "reportingInstance",
    ] {
        let (n, o) = (
            new.get(f).unwrap_or(&Value::Null),
            old.get(f).unwrap_or(&Value::Null),
        );
        if n != o {
            let shown = crd_schema_value(n);
            let field = if f == "reportingComponent" {
                "reportingController"
            } else {
                f
            };
            out.push(err(
                field,
                "FieldValueInvalid",
                format!("Invalid value: {shown}: field is immutable"),
            ));
        }
    }
    out
}

fn crd_schema_value(v: &Value) -> String {
    match v {
        Value::String(s) => format!("{s:?}"),
        Value::Null => "\"null\"".into(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_between_apis() {
        let new = json!({"apiVersion": "events.k8s.io/v1", "kind": "Event", "metadata": {"name": "e", "namespace": "default"},
            "regarding": {"kind": "ConfigMap", "name": "c"}, "note": "hi", "reason": "R", "type": "Normal",
            "reportingController": "ctl", "reportingInstance": "i", "action": "A", "eventTime": "2024-01-01T00:00:00.000000Z"});
        let core = to_core(new.clone());
        assert_eq!(core["involvedObject"]["name"], "c");
        assert_eq!(core["message"], "hi");
        assert_eq!(core["reportingComponent"], "ctl");
        assert_eq!(core["source"], json!({}));
        let back = to_new(core);
        assert_eq!(back["regarding"], new["regarding"]);
        assert_eq!(back["note"], "hi");
        assert_eq!(back["deprecatedSource"], json!({}));
        assert!(validate_create(&to_core(new), true).is_empty());
    }

    #[test]
    fn field_labels_per_api() {
        assert_eq!(
            field_label(true, "regarding.name").as_deref(),
            Some("involvedObject.name")
        );
        assert_eq!(field_label(false, "regarding.name"), None);
        assert_eq!(
            field_label(false, "involvedObject.kind").as_deref(),
            Some("involvedObject.kind")
        );
        assert_eq!(field_label(true, "involvedObject.kind"), None);
        assert_eq!(
            field_label(true, "reportingController").as_deref(),
            Some("reportingComponent")
        );
        assert_eq!(field_label(false, "note"), None);
    }
}
