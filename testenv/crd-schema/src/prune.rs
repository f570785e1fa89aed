//! Structural pruning (`apiextensions-apiserver/pkg/apiserver/schema/pruning`) and the removal of
//! nulls that the schema does not allow and that have no default
//! (`PruneNonNullableNullsWithoutDefaults`).

use serde_json::Value;

use crate::node::{Additional, Node};

/// Prunes a whole resource: the root is treated as an embedded resource, so `apiVersion`, `kind`
/// and `metadata` (reduced to `ObjectMeta` fields) are kept. Returns the
/// paths of the dropped fields (`spec.foo`, `spec.list[0].bar`, `metadata.bogus`).
pub(crate) fn prune_resource(obj: &mut Value, root: &Node) -> Vec<String> {
    let mut dropped = Vec::new();
    prune(obj, Some(root), true, "", &mut dropped);
    drop_null_without_default(obj, root);
    dropped
}

/// Prunes a value (a default, or a sub-tree) against `s`.
pub(crate) fn prune_value(v: &mut Value, s: &Node) {
    prune(v, Some(s), false, "", &mut Vec::new());
}

/// The fields of `ObjectMeta`; anything else in `metadata` is dropped, as the apiserver's
/// ObjectMeta coercion does.
const OBJECT_META_FIELDS: [&str; 15] = [
    "name",
    "generateName",
    "namespace",
    "selfLink",
    "uid",
    "resourceVersion",
    "generation",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "labels",
    "annotations",
    "ownerReferences",
    "finalizers",
    "managedFields",
];

fn child(path: &str, k: &str) -> String {
    if path.is_empty() {
        k.to_string()
    } else {
        format!("{path}.{k}")
    }
}

fn coerce_metadata(v: &mut Value, path: &str, dropped: &mut Vec<String>) {
    if let Value::Object(m) = v {
        m.retain(|k, _| {
            let known = OBJECT_META_FIELDS.contains(&k.as_str());
            if !known {
                dropped.push(child(path, k));
            }
            known
        });
    }
}

/// `apiVersion`, `kind` and `metadata` of an embedded resource (or the root) are never pruned.
fn is_kept_meta_field(key: &str) -> bool {
    matches!(key, "apiVersion" | "kind" | "metadata")
}

fn prune(x: &mut Value, s: Option<&Node>, is_resource: bool, path: &str, dropped: &mut Vec<String>) {
    if let Some(s) = s
        && s.preserve_unknown
    {
        skip_prune(x, s, is_resource, path, dropped);
        return;
    }
    match x {
        Value::Object(map) => {
            let Some(s) = s else {
                for k in map.keys() {
                    dropped.push(child(path, k));
                }
                map.clear();
                return;
            };
            let embedded = is_resource || s.embedded_resource;
            map.retain(|k, v| {
                let here = child(path, k);
                if embedded && is_kept_meta_field(k) {
                    if k == "metadata" {
                        coerce_metadata(v, &here, dropped);
                    }
                    return true;
                }
                if let Some(p) = s.properties.get(k) {
                    prune(v, Some(p), false, &here, dropped);
                    return true;
                }
                match &s.additional {
                    Some(Additional::Schema(a)) => {
                        prune(v, Some(a), false, &here, dropped);
                        true
                    }
                    Some(Additional::Bool(true)) => {
                        prune(v, None, false, &here, dropped);
                        true
                    }
                    _ => {
                        dropped.push(here);
                        false
                    }
                }
            });
        }
        Value::Array(items) => {
            let item_schema = s.and_then(|s| s.items.as_deref());
            for (i, item) in items.iter_mut().enumerate() {
                prune(item, item_schema, false, &format!("{path}[{i}]"), dropped);
            }
        }
        _ => {}
    }
}

fn skip_prune(x: &mut Value, s: &Node, is_resource: bool, path: &str, dropped: &mut Vec<String>) {
    match x {
        Value::Object(map) => {
            let embedded = is_resource || s.embedded_resource;
            for (k, v) in map.iter_mut() {
                let here = child(path, k);
                if embedded && is_kept_meta_field(k) {
                    if k == "metadata" {
                        coerce_metadata(v, &here, dropped);
                    }
                    continue;
                }
                if let Some(p) = s.properties.get(k) {
                    prune(v, Some(p), false, &here, dropped);
                } else if let Some(a) = s.additional_schema() {
                    prune(v, Some(a), false, &here, dropped);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter_mut().enumerate() {
                    skip_prune(item, item_schema, false, &format!("{path}[{i}]"), dropped);
                }
            }
        }
        _ => {}
    }
}

/// Deletes object fields whose value is `null` while their schema is neither nullable nor
/// defaulted; recurses into the remaining values.
fn drop_null_without_default(x: &mut Value, s: &Node) {
    match x {
        Value::Object(map) => {
            map.retain(|k, v| match s.child_for_key(k) {
                Some(child) if v.is_null() => child.nullable || child.default.is_some(),
                _ => true,
            });
            for (k, v) in map.iter_mut() {
                if let Some(child) = s.child_for_key(k) {
                    drop_null_without_default(v, child);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for i in items.iter_mut() {
                    drop_null_without_default(i, item_schema);
                }
            }
        }
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Schema;
    use serde_json::json;

    fn schema(v: Value) -> Schema {
        Schema::from_openapi(&v).unwrap()
    }

    #[test]
    fn drops_unknown_fields_keeps_meta() {
        let s = schema(json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {"type": "object", "properties": {
                    "a": {"type": "string"},
                    "list": {"type": "array", "items": {"type": "object", "properties": {"x": {"type": "integer"}}}},
                    "m": {"type": "object", "additionalProperties": {"type": "object", "properties": {"k": {"type": "string"}}}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                             "properties": {"inner": {"type": "object", "properties": {"y": {"type": "string"}}}}},
                    "ios": {"x-kubernetes-int-or-string": true}
                }}
            }
        }));
        let mut obj = json!({
            "apiVersion": "g/v1", "kind": "K",
            "metadata": {"name": "n", "labels": {"a": "b"}, "annotations": {"c": "d"}, "bogus": 1},
            "junk": 1,
            "spec": {
                "a": "x", "b": "y",
                "list": [{"x": 1, "z": 2}],
                "m": {"one": {"k": "v", "drop": true}},
                "free": {"anything": {"deep": 1}, "inner": {"y": "1", "gone": 2}},
                "ios": "50%"
            }
        });
        s.prune(&mut obj);
        assert_eq!(
            obj,
            json!({
                "apiVersion": "g/v1", "kind": "K",
                "metadata": {"name": "n", "labels": {"a": "b"}, "annotations": {"c": "d"}},
                "spec": {
                    "a": "x",
                    "list": [{"x": 1}],
                    "m": {"one": {"k": "v"}},
                    "free": {"anything": {"deep": 1}, "inner": {"y": "1"}},
                    "ios": "50%"
                }
            })
        );
    }

    #[test]
    fn embedded_resource_keeps_type_meta() {
        let s = schema(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "tmpl": {"type": "object", "x-kubernetes-embedded-resource": true,
                         "properties": {"spec": {"type": "object", "properties": {"a": {"type": "string"}}}}}
            }}}
        }));
        let mut obj = json!({"spec": {"tmpl": {"apiVersion": "v1", "kind": "X", "metadata": {"name": "m"},
            "spec": {"a": "1", "b": 2}, "other": 3}}});
        s.prune(&mut obj);
        assert_eq!(
            obj,
            json!({"spec": {"tmpl": {"apiVersion": "v1", "kind": "X", "metadata": {"name": "m"},
            "spec": {"a": "1"}}}})
        );
    }

    #[test]
    fn nulls_without_default_are_dropped() {
        let s = schema(json!({
            "type": "object",
            "properties": {"spec": {"type": "object", "properties": {
                "plain": {"type": "string"},
                "nullable": {"type": "string", "nullable": true},
                "defaulted": {"type": "string", "default": "d"}
            }}}
        }));
        let mut obj = json!({"spec": {"plain": null, "nullable": null, "defaulted": null}});
        s.prune(&mut obj);
        assert_eq!(obj, json!({"spec": {"nullable": null, "defaulted": null}}));
        s.default(&mut obj);
        assert_eq!(obj, json!({"spec": {"nullable": null, "defaulted": "d"}}));
    }
}
