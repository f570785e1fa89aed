//! Walks an object along its schema and evaluates the `x-kubernetes-validations` rules at every
//! node, as the apiserver's CEL validator does: `self` is the node's value, `oldSelf` the
//! correlated old value (object property, map key, or map-list item by key), transition rules only
//! run where that old value exists, and unchanged sub-trees are skipped (ratcheting).

use serde_json::Value;

use crate::celrules::Outcome;
use crate::celvalue::to_cel;
use crate::error::{FieldError, FieldErrorKind};
use crate::node::Node;
use crate::validate::{child, correlate_item, index, json_eq, key};

/// Evaluates all rules below `s` for `v`.
pub(crate) fn validate(s: &Node, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    if v.is_null() {
        return;
    }
    if old.is_some_and(|o| json_eq(o, v)) {
        return;
    }
    if !s.rules.is_empty() {
        evaluate_rules(s, v, old, path, errs);
    }
    // Rules may also sit in allOf branches (value validations); they see the same value.
    for sub in &s.all_of {
        validate(sub, v, old, path, errs);
    }
    match v {
        Value::Object(map) => {
            let old_map = old.and_then(Value::as_object);
            for (k, prop) in &s.properties {
                if let Some(val) = map.get(k) {
                    validate(prop, val, old_map.and_then(|m| m.get(k)), &child(path, k), errs);
                }
            }
            if let Some(a) = s.additional_schema() {
                for (k, val) in map {
                    if s.properties.contains_key(k) {
                        continue;
                    }
                    validate(a, val, old_map.and_then(|m| m.get(k)), &key(path, k), errs);
                }
            }
        }
        Value::Array(items) => {
            if let Some(item_schema) = s.items.as_deref() {
                for (i, item) in items.iter().enumerate() {
                    let old_item = correlate_item(s, old, item);
                    validate(item_schema, item, old_item, &index(path, i), errs);
                }
            }
        }
        _ => {}
    }
}

/// At the resource root, rules see `metadata` with only `name` and `generateName`
/// (`model.WithTypeAndObjectMeta`).
fn root_view(v: &Value) -> std::borrow::Cow<'_, Value> {
    match v.get("metadata").and_then(Value::as_object) {
        Some(meta) => {
            let mut copy = v.clone();
            let kept: serde_json::Map<String, Value> = meta
                .iter()
                .filter(|(k, _)| k.as_str() == "name" || k.as_str() == "generateName")
                .map(|(k, x)| (k.clone(), x.clone()))
                .collect();
            copy["metadata"] = Value::Object(kept);
            std::borrow::Cow::Owned(copy)
        }
        None => std::borrow::Cow::Borrowed(v),
    }
}

fn evaluate_rules(s: &Node, v: &Value, old: Option<&Value>, path: &str, errs: &mut Vec<FieldError>) {
    let (this, old_cel) = if path.is_empty() {
        (
            to_cel(&root_view(v), Some(s)),
            old.map(|o| to_cel(&root_view(o), Some(s))),
        )
    } else {
        (to_cel(v, Some(s)), old.map(|o| to_cel(o, Some(s))))
    };
    let type_value = Value::String(s.ty.clone().unwrap_or_default());
    for rule in &s.rules {
        if rule.is_transition && old_cel.is_none() && !rule.optional_old_self {
            // Transition rules only run where an old value correlates, unless `optionalOldSelf`
            // makes `oldSelf` an optional that may be empty.
            continue;
        }
        match rule.evaluate(&this, old_cel.as_ref()) {
            Outcome::Pass | Outcome::Skipped => {}
            Outcome::Error(e) => errs.push(FieldError::invalid(
                path,
                type_value.clone(),
                format!("{e} evaluating rule: {}", rule.error_string()),
            )),
            Outcome::Fail(msg) => {
                let target = match rule.field_path.as_deref().map(normalize_field_path) {
                    Some(fp) if !fp.is_empty() => child(path, &fp),
                    _ => path.to_string(),
                };
                errs.push(error_for_reason(target, &type_value, msg, rule.reason.as_deref()));
            }
        }
    }
}

/// `fieldPath` is a relative JSON path (`.spec.x`, `.m['key']`); the apiserver appends it to the
/// rule's own path.
fn normalize_field_path(fp: &str) -> String {
    let trimmed = fp.trim().trim_start_matches('.');
    trimmed.replace("['", ".").replace("']", "")
}

/// `fieldErrorForReason`.
fn error_for_reason(path: String, type_value: &Value, detail: String, reason: Option<&str>) -> FieldError {
    match reason {
        Some("FieldValueForbidden") => FieldError::new(path, FieldErrorKind::Forbidden, detail, None),
        Some("FieldValueRequired") => FieldError::new(path, FieldErrorKind::Required, detail, None),
        Some("FieldValueDuplicate") => {
            FieldError::new(path, FieldErrorKind::Duplicate, "", Some(type_value.clone()))
        }
        _ => FieldError::invalid(path, type_value.clone(), detail),
    }
}
