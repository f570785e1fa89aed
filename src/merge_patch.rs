//! JSON merge patches (RFC 7396) computed as the difference between two documents.

use serde_json::{Map, Value};

/// The JSON merge patch that turns `old` into `new`: changed and added keys with their new
/// values, removed keys as `null`, objects diffed recursively (arrays and scalars are replaced
/// whole). Two equal objects give `{}`.
pub fn diff(old: &Value, new: &Value) -> Value {
    match (old, new) {
        (Value::Object(o), Value::Object(n)) => {
            let mut out = Map::new();
            for (k, v) in n {
                match o.get(k) {
                    Some(ov) if ov == v => {}
                    Some(ov) => {
                        out.insert(k.clone(), diff(ov, v));
                    }
                    None => {
                        out.insert(k.clone(), v.clone());
                    }
                }
            }
            for k in o.keys().filter(|k| !n.contains_key(*k)) {
                out.insert(k.clone(), Value::Null);
            }
            Value::Object(out)
        }
        _ => new.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn removed_fields_are_cleared_and_objects_diffed() {
        let old = json!({"taskRef": "UPID:x", "vmStatus": "pending", "initialization": {"provisioned": false}, "conditions": [1]});
        let new =
            json!({"vmStatus": "pending", "initialization": {"provisioned": true}, "conditions": [1, 2]});
        assert_eq!(
            diff(&old, &new),
            json!({"taskRef": null, "initialization": {"provisioned": true}, "conditions": [1, 2]})
        );
        assert_eq!(diff(&Value::Null, &json!({"a": 1})), json!({"a": 1}));
        assert_eq!(diff(&json!({"a": 1}), &json!({"a": 1})), json!({}));
    }
}
