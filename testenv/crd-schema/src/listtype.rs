//! `x-kubernetes-list-type` invariants (`structurallisttype.ValidateListSetsAndMaps`): items of a
//! `set` are unique, items of a `map` are objects unique by their `x-kubernetes-list-map-keys`.
//! Each duplicated value is reported once, at its second occurrence.

use serde_json::{Map, Value};

use crate::error::{FieldError, FieldErrorKind};
use crate::node::Node;
use crate::validate::{child, index, json_eq, key};

/// Walks `v` (an object described by `s`) and reports duplicate set items and map-list keys.
pub(crate) fn validate(s: &Node, v: &Value, path: &str, errs: &mut Vec<FieldError>) {
    match v {
        Value::Array(items) => array(s, items, path, errs),
        Value::Object(map) => {
            if let Some(a) = s.additional_schema() {
                for (k, val) in map {
                    if !s.properties.contains_key(k) {
                        validate(a, val, &key(path, k), errs);
                    }
                }
            }
            for (k, val) in map {
                if let Some(p) = s.properties.get(k) {
                    validate(p, val, &child(path, k), errs);
                }
            }
        }
        _ => {}
    }
}

/// Indices of the second occurrence of every value that occurs more than once.
fn second_occurrences(values: &[Value]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, v) in values.iter().enumerate() {
        let earlier = values[..i].iter().filter(|p| json_eq(p, v)).count();
        if earlier == 1 {
            out.push(i);
        }
    }
    out
}

fn array(s: &Node, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    match s.list_type.as_deref() {
        Some("set") => {
            for i in second_occurrences(items) {
                errs.push(FieldError::new(
                    index(path, i),
                    FieldErrorKind::Duplicate,
                    "",
                    Some(items[i].clone()),
                ));
            }
        }
        Some("map") => map_list(s, items, path, errs),
        _ => {}
    }
    if let Some(item_schema) = s.items.as_deref() {
        for (i, item) in items.iter().enumerate() {
            validate(item_schema, item, &index(path, i), errs);
        }
    }
}

fn map_list(s: &Node, items: &[Value], path: &str, errs: &mut Vec<FieldError>) {
    if let Some((i, bad)) = items
        .iter()
        .enumerate()
        .find(|(_, x)| !x.is_null() && !x.is_object())
    {
        errs.push(FieldError::invalid(
            index(path, i),
            bad.clone(),
            "must be an object for an array of list-type map",
        ));
        return;
    }
    // The key of an item: the present key fields (a null item or absent fields are left out).
    let keys: Vec<Value> = items
        .iter()
        .map(|x| {
            let mut k = Map::new();
            if let Some(m) = x.as_object() {
                for f in &s.list_map_keys {
                    if let Some(v) = m.get(f) {
                        k.insert(f.clone(), v.clone());
                    }
                }
            }
            Value::Object(k)
        })
        .collect();
    for i in second_occurrences(&keys) {
        errs.push(FieldError::new(
            index(path, i),
            FieldErrorKind::Duplicate,
            "",
            Some(keys[i].clone()),
        ));
    }
}
