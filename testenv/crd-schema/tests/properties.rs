//! Properties of pruning, defaulting and validation over arbitrary JSON: pruning and defaulting
//! are idempotent, pruning leaves only known fields, and validation never panics.

// Fixture helpers outside #[test] functions: a broken fixture should panic.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crd_schema::Schema;
use proptest::prelude::*;
use serde_json::{Map, Value, json};

fn schema() -> Schema {
    Schema::from_openapi(&json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"}, "metadata": {"type": "object"},
            "spec": {"type": "object", "required": ["name"], "properties": {
                "name": {"type": "string", "pattern": "^[a-z]+$", "maxLength": 8},
                "count": {"type": "integer", "minimum": 0, "default": 1},
                "ratio": {"type": "number", "nullable": true},
                "mode": {"type": "string", "enum": ["a", "b"], "default": "a"},
                "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "devices": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                    "items": {"type": "object", "required": ["name"], "properties": {
                        "name": {"type": "string", "default": "net0"},
                        "model": {"type": "string", "default": "virtio"}}}},
                "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]}
            }, "x-kubernetes-validations": [
                {"rule": "!has(self.count) || self.count < 100", "message": "count too big"},
                {"rule": "self.name != 'bad'"}
            ]}
        }
    }))
    .unwrap()
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i32>().prop_map(|i| json!(i)),
        (-1000.0f64..1000.0).prop_map(|f| json!(f)),
        "[a-z]{0,6}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("name".to_string()),
                    Just("count".to_string()),
                    Just("mode".to_string()),
                    Just("tags".to_string()),
                    Just("devices".to_string()),
                    Just("labels".to_string()),
                    Just("free".to_string()),
                    Just("port".to_string()),
                    "[a-z]{1,4}",
                ],
                inner,
                0..5
            )
            .prop_map(|m| Value::Object(m.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

fn known_only(v: &Value) -> bool {
    let Some(spec) = v.get("spec").and_then(Value::as_object) else {
        return true;
    };
    let known = [
        "name", "count", "ratio", "mode", "tags", "devices", "labels", "free", "port",
    ];
    spec.keys().all(|k| known.contains(&k.as_str()))
}

proptest! {
    #[test]
    fn prune_and_default_are_idempotent(spec in json_value(), junk in json_value()) {
        let s = schema();
        let mut obj = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "x"}, "spec": spec, "junk": junk});
        s.prune_and_default(&mut obj);
        prop_assert!(obj.get("junk").is_none());
        prop_assert!(known_only(&obj));
        let once = obj.clone();
        s.prune_and_default(&mut obj);
        prop_assert_eq!(&obj, &once);
        let errs = s.validate(&obj, None);
        // Validation is deterministic and every error names a field.
        prop_assert_eq!(&errs, &s.validate(&obj, None));
        prop_assert!(errs.iter().all(|e| !e.field.is_empty()));
        // An object validated against itself as the old object has nothing new to report.
        prop_assert!(s.validate(&obj, Some(&obj)).is_empty());
    }
}
