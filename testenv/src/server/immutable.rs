//! Fields an update may not change, as kube-apiserver enforces them: `metadata.uid`,
//! `deletionTimestamp` and `deletionGracePeriodSeconds` (422 `field is immutable`; absent values
//! are filled from the stored object, `creationTimestamp` and `generation` are silently kept),
//! and the `immutable: true` ConfigMaps and Secrets (plus a Secret's `type`).

use serde_json::{Map, Value};

use super::admission::FieldErr;

fn immutable(field: &str, shown: String) -> FieldErr {
    FieldErr {
        field: field.into(),
        reason: "FieldValueInvalid".into(),
        message: format!("Invalid value: {shown}: field is immutable"),
    }
}

fn forbidden(field: &str) -> FieldErr {
    FieldErr {
        field: field.into(),
        reason: "FieldValueForbidden".into(),
        message: "Forbidden: field is immutable when `immutable` is set".into(),
    }
}

/// Go's `time.Time` `%v` (`2020-01-01 00:00:00 +0000 UTC`).
fn go_time(v: &Value) -> String {
    let s = v.as_str().unwrap_or_default();
    match chrono::DateTime::parse_from_rfc3339(s) {
        Ok(t) => t
            .with_timezone(&chrono::Utc)
            .format("%Y-%m-%d %H:%M:%S +0000 UTC")
            .to_string(),
        Err(_) => s.to_string(),
    }
}

fn present(m: &Map<String, Value>, k: &str) -> Option<Value> {
    m.get(k).filter(|v| !v.is_null()).cloned()
}

/// Applies the metadata update rules to `new` (given the stored `old`), returning the violations
/// (`ValidateObjectMetaUpdate`; the apiserver reports them twice, the caller does too).
pub fn metadata(old: &Value, new: &mut Value) -> Vec<FieldErr> {
    let empty = Map::new();
    let om = old
        .get("metadata")
        .and_then(Value::as_object)
        .unwrap_or(&empty)
        .clone();
    let Some(nm) = new.get_mut("metadata").and_then(Value::as_object_mut) else {
        return Vec::new();
    };
    let mut errs = Vec::new();
    match (present(&om, "uid"), present(nm, "uid")) {
        (Some(o), Some(n)) if n.as_str() != Some("") && n != o => {
            errs.push(immutable(
                "metadata.uid",
                format!("{:?}", n.as_str().unwrap_or_default()),
            ));
        }
        (o, _) => {
            match o {
                Some(o) => nm.insert("uid".into(), o),
                None => nm.remove("uid"),
            };
        }
    }
    match (
        present(&om, "deletionTimestamp"),
        present(nm, "deletionTimestamp"),
    ) {
        (Some(o), _) => {
            nm.insert("deletionTimestamp".into(), o);
        }
        (None, Some(n)) => errs.push(immutable("metadata.deletionTimestamp", go_time(&n))),
        (None, None) => {
            nm.remove("deletionTimestamp");
        }
    }
    match (
        present(&om, "deletionGracePeriodSeconds"),
        present(nm, "deletionGracePeriodSeconds"),
    ) {
        (Some(o), None) => {
            nm.insert("deletionGracePeriodSeconds".into(), o);
        }
        (o, Some(n)) if o.as_ref() != Some(&n) => {
            errs.push(immutable("metadata.deletionGracePeriodSeconds", n.to_string()));
        }
        (None, None) => {
            nm.remove("deletionGracePeriodSeconds");
        }
        _ => {}
    }
    for k in ["creationTimestamp", "generation"] {
        match om.get(k) {
            Some(v) => nm.insert(k.into(), v.clone()),
            None => nm.remove(k),
        };
    }
    errs
}

/// `ValidateConfigMapUpdate` / `ValidateSecretUpdate` beyond metadata.
pub fn data_update(plural: &str, old: &Value, new: &Value) -> Vec<FieldErr> {
    let mut errs = Vec::new();
    if plural == "secrets" && new.get("type") != old.get("type") {
        let shown = new
            .get("type")
            .and_then(Value::as_str)
            .map_or_else(|| "\"\"".into(), |t| format!("{t:?}"));
        errs.push(immutable("type", shown));
    }
    if old.get("immutable") == Some(&Value::Bool(true)) {
        if new.get("immutable") != Some(&Value::Bool(true)) {
            errs.push(forbidden("immutable"));
        }
        if new.get("data") != old.get("data") {
            errs.push(forbidden("data"));
        }
        if plural == "configmaps" && new.get("binaryData") != old.get("binaryData") {
            errs.push(forbidden("binaryData"));
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn metadata_rules() {
        let old = json!({"metadata": {"name": "a", "uid": "u1", "creationTimestamp": "t", "generation": 2}});
        let mut new = json!({"metadata": {"name": "a", "creationTimestamp": "x", "generation": 7}});
        assert!(metadata(&old, &mut new).is_empty());
        assert_eq!(new["metadata"]["uid"], "u1");
        assert_eq!(new["metadata"]["generation"], 2);
        let mut bad = json!({"metadata": {"uid": "x", "deletionTimestamp": "2020-01-01T00:00:00Z", "deletionGracePeriodSeconds": 5}});
        let errs = metadata(&old, &mut bad);
        let msgs: Vec<String> = errs
            .iter()
            .map(|e| format!("{}: {}", e.field, e.message))
            .collect();
        assert_eq!(
            msgs,
            [
                "metadata.uid: Invalid value: \"x\": field is immutable",
                "metadata.deletionTimestamp: Invalid value: 2020-01-01 00:00:00 +0000 UTC: field is immutable",
                "metadata.deletionGracePeriodSeconds: Invalid value: 5: field is immutable",
            ]
        );
    }

    #[test]
    fn immutable_config_maps() {
        let old = json!({"immutable": true, "data": {"a": "1"}});
        assert!(data_update("configmaps", &old, &old).is_empty());
        let errs = data_update("configmaps", &old, &json!({"data": {"a": "2"}}));
        let fields: Vec<&str> = errs.iter().map(|e| e.field.as_str()).collect();
        assert_eq!(fields, ["immutable", "data"]);
    }
}
