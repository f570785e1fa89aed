//! `x-kubernetes-list-type` invariants (`structurallisttype.ValidateListSetsAndMaps`): items of a
//! `set` are unique, items of a `map` are unique by their `x-kubernetes-list-map-keys`.

use serde_json::{Map, Value};

use crate::error::{FieldError, FieldErrorKind};
use crate::node::Node;
use crate::validate::{child, correlate_item, index, json_eq, key};

/// Walks `v` and reports duplicate set items and duplicate map-list keys.
pub(crate) fn validate(s: &Node, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => {
            match s.list_type.as_deref() {
                Some("set") => {
                    for (i, item) in items.iter().enumerate() {
                        if items[..i].iter().any(|prev| json_eq(prev, item)) {
                            errs.push(FieldError::new(
                                index(path, i),
                                FieldErrorKind::Duplicate,
                                "",
                                Some(item.clone()),
                            ));
                        }
                    }
                }
                Some("map") if !s.list_map_keys.is_empty() => {
                    let mut seen: Vec<Vec<Value>> = Vec::new();
                    for (i, item) in items.iter().enumerate() {
                        let Some(m) = item.as_object() else { continue };
                        let keys: Vec<Value> = s
                            .list_map_keys
                            .iter()
                            .map(|k| m.get(k).cloned().unwrap_or(Value::Null))
                            .collect();
                        let dup = seen.iter().any(|k| {
                            k.len() == keys.len() && k.iter().zip(&keys).all(|(a, b)| json_eq(a, b))
                        });
                        if dup {
                            let mut shown = Map::new();
                            for (name, val) in s.list_map_keys.iter().zip(&keys) {
                                if !val.is_null() {
                                    shown.insert(name.clone(), val.clone());
                                }
                            }
                            errs.push(FieldError::new(
                                index(path, i),
                                FieldErrorKind::Duplicate,
                                "",
                                Some(Value::Object(shown)),
                            ));
                        } else {
                            seen.push(keys);
                        }
                    }
                }
                _ => {}
            }
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    let old_item = correlate_item(s, old, item);
                    if old_item.is_some_and(|o| json_eq(o, item)) {
                        continue;
                    }
                    validate(item_schema, item, old_item, &index(path, i), errs);
                }
            }
        }
        Value::Object(map) => {
            let old_map = old.and_then(Value::as_object);
            for (k, val) in map {
                let old_val = old_map.and_then(|m| m.get(k));
                if old_val.is_some_and(|o| json_eq(o, val)) {
                    continue;
                }
                if let Some(p) = s.properties.get(k) {
                    validate(p, val, old_val, &child(path, k), errs);
                } else if let Some(a) = s.additional_schema() {
                    validate(a, val, old_val, &key(path, k), errs);
                }
            }
        }
        _ => {}
    }
}
