//! Defaulting (`apiextensions-apiserver/pkg/apiserver/schema/defaulting`): absent properties of
//! present objects get their `default`; a `null` where the schema is not nullable is replaced by
//! the default too; defaults are pruned against their own schema and then defaulted themselves.

use serde_json::Value;

use crate::node::Node;
use crate::prune;

/// Applies defaults below `s` to `x` in place.
pub(crate) fn apply(x: &mut Value, s: &Node) {
    match x {
        Value::Object(map) => {
            for (k, prop) in &s.properties {
                let Some(d) = &prop.default else { continue };
                let needs = match map.get(k) {
                    None => true,
                    Some(Value::Null) => !prop.nullable,
                    Some(_) => false,
                };
                if needs {
                    map.insert(k.clone(), pruned_default(d, prop));
                }
            }
            for (k, v) in map.iter_mut() {
                if let Some(prop) = s.properties.get(k) {
                    apply(v, prop);
                } else if let Some(a) = s.additional_schema() {
                    if v.is_null()
                        && !a.nullable
                        && let Some(d) = &a.default
                    {
                        *v = pruned_default(d, a);
                    }
                    apply(v, a);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for v in items.iter_mut() {
                    if v.is_null()
                        && !item_schema.nullable
                        && let Some(d) = &item_schema.default
                    {
                        *v = pruned_default(d, item_schema);
                    }
                    apply(v, item_schema);
                }
            }
        }
        _ => {}
    }
}

fn pruned_default(d: &Value, s: &Node) -> Value {
    let mut d = d.clone();
    prune::prune_value(&mut d, s);
    d
}

#[cfg(test)]
mod tests {
    use crate::Schema;
    use serde_json::json;

    #[test]
    fn defaults_absent_fields_in_present_objects() {
        let s = Schema::from_openapi(&json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "full": {"type": "boolean", "default": true},
                "absentObj": {"type": "object", "properties": {"x": {"type": "integer", "default": 3}}},
                "defObj": {"type": "object", "default": {}, "properties": {"y": {"type": "string", "default": "why"}}},
                "devices": {"type": "array", "items": {"type": "object", "properties": {
                    "model": {"type": "string", "default": "virtio"},
                    "name": {"type": "string"}
                }}},
                "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {
                    "metric": {"type": "integer", "default": 100}}}},
                "pruned": {"type": "object", "default": {"keep": 1, "drop": 2}, "properties": {"keep": {"type": "integer"}}}
            }}}
        }))
        .unwrap();
        let mut obj = json!({"spec": {"full": false, "devices": [{"name": "net0"}, {"name": "net1", "model": "e1000"}],
            "m": {"a": {}}}});
        s.default(&mut obj);
        assert_eq!(
            obj,
            json!({"spec": {
                "full": false,
                "defObj": {"y": "why"},
                "devices": [{"name": "net0", "model": "virtio"}, {"name": "net1", "model": "e1000"}],
                "m": {"a": {"metric": 100}},
                "pruned": {"keep": 1}
            }})
        );
        let mut empty = json!({});
        s.default(&mut empty);
        assert_eq!(empty, json!({}), "no spec object, nothing to default inside it");
    }
}
