//! Typed views of objects as server-side apply sees them (structured-merge-diff's `typed`
//! package): converting an apply configuration into a typed value (unknown fields and type
//! mismatches are errors), its field set, the comparison of two objects (added, modified and
//! removed fields) and the merge of a configuration onto a live object. Maps are granular unless
//! `x-kubernetes-map-type: atomic`; lists are atomic unless `x-kubernetes-list-type` is `set` or
//! `map`; fields kept by `x-kubernetes-preserve-unknown-fields` are "deduced": maps granular, lists
//! atomic. `metadata` of a resource is typed as `ObjectMeta` (finalizers a set, ownerReferences a
//! map keyed by `uid`).

use std::sync::OnceLock;

use serde_json::{Value, json};

use crate::fieldset::{FieldSet, PathElement, path_string};
use crate::gofmt;
use crate::node::{self, Additional, Node};

/// The result of comparing two objects: field paths added, modified and removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Present only in the new object.
    pub added: FieldSet,
    /// Present in both with different values (leaves only).
    pub modified: FieldSet,
    /// Present only in the old object.
    pub removed: FieldSet,
}

/// The type of a value: a schema node (and whether it is a resource, whose `apiVersion`, `kind`
/// and `metadata` are implied) or deduced from the value itself.
#[derive(Clone, Copy)]
pub(crate) enum Ty<'a> {
    Node(&'a Node, bool),
    Untyped,
}

#[derive(Clone, Copy)]
enum ListKind<'a> {
    Atomic,
    Set,
    Map(&'a [String]),
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Scalar {
    String,
    Numeric,
    Boolean,
    Any,
}

#[derive(Clone, Copy)]
enum Shape<'a> {
    Struct(Ty<'a>),
    AtomicMap(Ty<'a>),
    List(Ty<'a>, ListKind<'a>),
    Scalar(Scalar),
}

const OBJECT_META: &str = r#"{"type":"object","properties":{
 "name":{"type":"string"},"generateName":{"type":"string"},"namespace":{"type":"string"},
 "selfLink":{"type":"string"},"uid":{"type":"string"},"resourceVersion":{"type":"string"},
 "generation":{"type":"integer"},"creationTimestamp":{"type":"string"},
 "deletionTimestamp":{"type":"string"},"deletionGracePeriodSeconds":{"type":"integer"},
 "labels":{"type":"object","additionalProperties":{"type":"string"}},
 "annotations":{"type":"object","additionalProperties":{"type":"string"}},
 "ownerReferences":{"type":"array","x-kubernetes-list-type":"map","x-kubernetes-list-map-keys":["uid"],
  "items":{"type":"object","properties":{"apiVersion":{"type":"string"},"kind":{"type":"string"},
   "name":{"type":"string"},"uid":{"type":"string"},"controller":{"type":"boolean"},
   "blockOwnerDeletion":{"type":"boolean"}}}},
 "finalizers":{"type":"array","x-kubernetes-list-type":"set","items":{"type":"string"}},
 "managedFields":{"type":"array","items":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}"#;

fn static_node(cell: &'static OnceLock<Node>, text: &str) -> &'static Node {
    cell.get_or_init(|| {
        serde_json::from_str::<Value>(text)
            .ok()
            .and_then(|v| node::parse(&v, "static", &mut Vec::new()).ok())
            .unwrap_or_default()
    })
}

fn object_meta() -> &'static Node {
    static CELL: OnceLock<Node> = OnceLock::new();
    static_node(&CELL, OBJECT_META)
}

fn string_node() -> &'static Node {
    static CELL: OnceLock<Node> = OnceLock::new();
    static_node(&CELL, r#"{"type":"string"}"#)
}

/// The type of the field `key` of an object of type `ty`, and whether it is a declared field
/// (as opposed to a map entry); `None` when the field is not declared.
fn child_type<'a>(ty: Ty<'a>, key: &str) -> Option<(Ty<'a>, bool)> {
    let Ty::Node(n, resource) = ty else {
        return Some((Ty::Untyped, false));
    };
    if resource {
        match key {
            "apiVersion" | "kind" => return Some((Ty::Node(string_node(), false), true)),
            "metadata" => return Some((Ty::Node(object_meta(), false), true)),
            _ => {}
        }
    }
    if let Some(p) = n.properties.get(key) {
        return Some((Ty::Node(p, p.embedded_resource), true));
    }
    match &n.additional {
        Some(Additional::Schema(a)) => Some((Ty::Node(a, a.embedded_resource), false)),
        Some(Additional::Bool(true)) => Some((Ty::Untyped, false)),
        _ if n.preserve_unknown => Some((Ty::Untyped, false)),
        _ => None,
    }
}

fn deduced(v: Option<&Value>) -> Shape<'static> {
    match v {
        Some(Value::Object(_)) => Shape::Struct(Ty::Untyped),
        Some(Value::Array(_)) => Shape::List(Ty::Untyped, ListKind::Atomic),
        _ => Shape::Scalar(Scalar::Any),
    }
}

fn shape<'a>(ty: Ty<'a>, v: Option<&Value>) -> Shape<'a> {
    let Ty::Node(n, resource) = ty else {
        return deduced(v);
    };
    if n.int_or_string {
        return Shape::Scalar(Scalar::Any);
    }
    match n.ty.as_deref() {
        Some("object") if n.map_type.as_deref() == Some("atomic") => Shape::AtomicMap(ty),
        Some("object") => Shape::Struct(ty),
        Some("array") => {
            let item = n
                .items
                .as_deref()
                .map_or(Ty::Untyped, |i| Ty::Node(i, i.embedded_resource));
            let kind = match n.list_type.as_deref() {
                Some("set") => ListKind::Set,
                Some("map") => ListKind::Map(&n.list_map_keys),
                _ => ListKind::Atomic,
            };
            Shape::List(item, kind)
        }
        Some("string") => Shape::Scalar(Scalar::String),
        Some("integer" | "number") => Shape::Scalar(Scalar::Numeric),
        Some("boolean") => Shape::Scalar(Scalar::Boolean),
        _ if !n.properties.is_empty() || n.additional.is_some() || resource => Shape::Struct(ty),
        _ => deduced(v),
    }
}

fn item_element(kind: ListKind<'_>, i: usize, item: &Value) -> PathElement {
    match kind {
        ListKind::Atomic => PathElement::Index(i),
        ListKind::Set => PathElement::value_of(item),
        ListKind::Map(keys) => PathElement::key_of(item, keys),
    }
}

fn fail(path: &[PathElement], msg: String) -> Result<(), String> {
    Err(format!("{}: {msg}", path_string(path)))
}

fn sorted_keys(m: &serde_json::Map<String, Value>) -> Vec<&String> {
    let mut keys: Vec<&String> = m.keys().collect();
    keys.sort();
    keys
}

/// Converts `v` to a typed value: the first unknown field or type mismatch, in
/// structured-merge-diff's words (`.spec.foo: field not declared in schema`).
pub(crate) fn check(ty: Ty<'_>, v: &Value, path: &mut Vec<PathElement>) -> Result<(), String> {
    if v.is_null() {
        return Ok(());
    }
    match shape(ty, Some(v)) {
        Shape::Struct(t) | Shape::AtomicMap(t) => {
            let Value::Object(m) = v else {
                return fail(path, format!("expected map, got &{{{}}}", gofmt::go_v(v)));
            };
            for k in sorted_keys(m) {
                path.push(PathElement::Field(k.clone()));
                let r = match child_type(t, k) {
                    None => fail(path, "field not declared in schema".into()),
                    Some((ct, _)) => check(ct, &m[k.as_str()], path),
                };
                path.pop();
                r?;
            }
            Ok(())
        }
        Shape::List(item_ty, kind) => {
            let Value::Array(items) = v else {
                return fail(path, format!("expected list, got &{{{}}}", gofmt::go_v(v)));
            };
            for (i, item) in items.iter().enumerate() {
                path.push(item_element(kind, i, item));
                let r = check(item_ty, item, path);
                path.pop();
                r?;
            }
            Ok(())
        }
        Shape::Scalar(s) => match (s, v) {
            (Scalar::Any, _)
            | (Scalar::String, Value::String(_))
            | (Scalar::Numeric, Value::Number(_))
            | (Scalar::Boolean, Value::Bool(_)) => Ok(()),
            (Scalar::Numeric, _) => fail(
                path,
                format!("expected numeric (int or float), got {}", gofmt::go_type(v)),
            ),
            (Scalar::String, _) => fail(
                path,
                format!(
                    "expected string, got &value.valueUnstructured{{Value:{}}}",
                    gofmt::go_sharp_v(v)
                ),
            ),
            (Scalar::Boolean, _) => fail(path, format!("expected boolean, got &{{{}}}", gofmt::go_v(v))),
        },
    }
}

/// The field set of `v` (`ToFieldSet`): leaves, map entries, list items of sets and
/// associative lists, and empty or null values.
pub(crate) fn to_field_set(ty: Ty<'_>, v: &Value, path: &mut Vec<PathElement>, out: &mut FieldSet) {
    match shape(ty, Some(v)) {
        Shape::Struct(t) => {
            let Value::Object(m) = v else { return };
            for (k, cv) in m {
                let Some((ct, declared)) = child_type(t, k) else {
                    continue;
                };
                path.push(PathElement::Field(k.clone()));
                to_field_set(ct, cv, path, out);
                let empty = cv.is_null() || cv.as_object().is_some_and(serde_json::Map::is_empty);
                if empty || !declared {
                    out.insert(path);
                }
                path.pop();
            }
        }
        Shape::List(item_ty, kind @ (ListKind::Set | ListKind::Map(_))) => {
            let Value::Array(items) = v else {
                out.insert(path);
                return;
            };
            for (i, item) in items.iter().enumerate() {
                path.push(item_element(kind, i, item));
                if matches!(kind, ListKind::Map(_)) {
                    to_field_set(item_ty, item, path, out);
                }
                out.insert(path);
                path.pop();
            }
        }
        Shape::AtomicMap(_) | Shape::List(_, ListKind::Atomic) | Shape::Scalar(_) => out.insert(path),
    }
}

fn leaf(lhs: Option<&Value>, rhs: Option<&Value>, path: &[PathElement], cmp: &mut Comparison) {
    match (lhs, rhs) {
        (None, Some(_)) => cmp.added.insert(path),
        (Some(_), None) => cmp.removed.insert(path),
        (Some(a), Some(b)) if !same_value(a, b) => cmp.modified.insert(path),
        _ => {}
    }
}

/// Equality as the apiserver sees decoded values: numbers by value (`8` equals `8.0`, as both
/// decode to the same float64 or int64), everything else structurally.
fn same_value(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => match (x.as_i64(), y.as_i64(), x.as_u64(), y.as_u64()) {
            (Some(i), Some(j), _, _) => i == j,
            (_, _, Some(i), Some(j)) => i == j,
            _ => x.as_f64() == y.as_f64(),
        },
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(p, q)| same_value(p, q))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_value(v, w)))
        }
        _ => a == b,
    }
}

fn empty_map(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Object(m)) => m.is_empty(),
        Some(_) => false,
    }
}

fn index_items<'v>(kind: ListKind<'_>, v: Option<&'v Value>) -> Vec<(PathElement, &'v Value)> {
    v.and_then(Value::as_array)
        .map(|items| {
            items
                .iter()
                .enumerate()
                .map(|(i, item)| (item_element(kind, i, item), item))
                .collect()
        })
        .unwrap_or_default()
}

/// Compares `lhs` (old) with `rhs` (new).
pub(crate) fn compare(
    ty: Ty<'_>,
    lhs: Option<&Value>,
    rhs: Option<&Value>,
    path: &mut Vec<PathElement>,
    cmp: &mut Comparison,
) {
    match shape(ty, rhs.or(lhs)) {
        Shape::Struct(t) => {
            let (lo, ro) = (lhs.and_then(Value::as_object), rhs.and_then(Value::as_object));
            let mismatch = lhs.is_some_and(|l| !l.is_object() && !l.is_null())
                || rhs.is_some_and(|r| !r.is_object() && !r.is_null());
            if (empty_map(lhs) && empty_map(rhs)) || mismatch {
                leaf(lhs, rhs, path, cmp);
            } else {
                let mut keys: Vec<&String> = lo.into_iter().chain(ro).flat_map(|m| m.keys()).collect();
                keys.sort();
                keys.dedup();
                for k in keys {
                    let ct = child_type(t, k).map_or(Ty::Untyped, |(ct, _)| ct);
                    path.push(PathElement::Field(k.clone()));
                    compare(
                        ct,
                        lo.and_then(|m| m.get(k)),
                        ro.and_then(|m| m.get(k)),
                        path,
                        cmp,
                    );
                    path.pop();
                }
            }
        }
        Shape::List(item_ty, kind @ (ListKind::Set | ListKind::Map(_)))
            if lhs.is_none_or(|l| l.is_array() || l.is_null())
                && rhs.is_none_or(|r| r.is_array() || r.is_null()) =>
        {
            let (li, ri) = (index_items(kind, lhs), index_items(kind, rhs));
            let mut pes: Vec<&PathElement> = li.iter().chain(&ri).map(|(pe, _)| pe).collect();
            pes.sort();
            pes.dedup();
            for pe in pes {
                let l = li.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                let r = ri.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                path.push(pe.clone());
                compare(item_ty, l, r, path, cmp);
                path.pop();
            }
            if lhs.is_some() != rhs.is_some() && li.is_empty() && ri.is_empty() {
                leaf(lhs, rhs, path, cmp);
            }
        }
        _ => leaf(lhs, rhs, path, cmp),
    }
    match (lhs, rhs) {
        (None, Some(_)) => cmp.added.insert(path),
        (Some(_), None) => cmp.removed.insert(path),
        _ => {}
    }
}

/// Merges an associative or set list: live items keep their places, configured items are merged
/// in the configuration's order, new ones after the last shared item.
fn merge_list(item_ty: Ty<'_>, kind: ListKind<'_>, lhs: &[Value], rhs: &[Value]) -> Vec<Value> {
    let lpe: Vec<PathElement> = lhs
        .iter()
        .enumerate()
        .map(|(i, v)| item_element(kind, i, v))
        .collect();
    let rpe: Vec<PathElement> = rhs
        .iter()
        .enumerate()
        .map(|(i, v)| item_element(kind, i, v))
        .collect();
    let merged_item = |ri: usize| match lpe.iter().position(|p| *p == rpe[ri]) {
        Some(li) if matches!(kind, ListKind::Map(_)) => merge(item_ty, &lhs[li], &rhs[ri]),
        _ => rhs[ri].clone(),
    };
    let mut out = Vec::with_capacity(lhs.len() + rhs.len());
    let mut emitted = vec![false; rhs.len()];
    let mut emit_up_to = |last: usize, out: &mut Vec<Value>| {
        for (j, done) in emitted.iter_mut().enumerate().take(last + 1) {
            if !*done {
                *done = true;
                out.push(merged_item(j));
            }
        }
    };
    for (li, pe) in lpe.iter().enumerate() {
        match rpe.iter().position(|p| p == pe) {
            None => out.push(lhs[li].clone()),
            Some(ri) => emit_up_to(ri, &mut out),
        }
    }
    if !rhs.is_empty() {
        emit_up_to(rhs.len() - 1, &mut out);
    }
    out
}

/// Merges the configuration `rhs` onto `lhs`: granular maps key by key, sets and associative lists
/// item by item, everything else replaced.
pub(crate) fn merge(ty: Ty<'_>, lhs: &Value, rhs: &Value) -> Value {
    if rhs.is_null() {
        return Value::Null;
    }
    match (shape(ty, Some(rhs)), lhs, rhs) {
        (Shape::Struct(t), Value::Object(lm), Value::Object(rm)) => {
            let mut out = lm.clone();
            for (k, rv) in rm {
                let ct = child_type(t, k).map_or(Ty::Untyped, |(ct, _)| ct);
                let v = match lm.get(k) {
                    Some(lv) => merge(ct, lv, rv),
                    None => rv.clone(),
                };
                out.insert(k.clone(), v);
            }
            Value::Object(out)
        }
        (
            Shape::List(item_ty, kind @ (ListKind::Set | ListKind::Map(_))),
            Value::Array(l),
            Value::Array(r),
        ) => Value::Array(merge_list(item_ty, kind, l, r)),
        _ => rhs.clone(),
    }
}

/// The type of a whole resource described by `root`.
pub(crate) fn resource(root: &Node) -> Ty<'_> {
    Ty::Node(root, true)
}

/// A schema accepting anything (deduced types), for kinds without one.
pub fn untyped_resource_schema() -> Value {
    json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
}

#[cfg(test)]
mod tests {
    use crate::Schema;
    use crate::fieldset::{PathElement, path_string};
    use serde_json::json;

    fn schema() -> Schema {
        Schema::from_openapi(&json!({"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "name": {"type": "string"},
                "on": {"type": "boolean"},
                "tags": {"type": "array", "items": {"type": "string"}},
                "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                "devs": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                         "items": {"type": "object", "properties": {"name": {"type": "string"}, "model": {"type": "string"}, "mtu": {"type": "integer"}}}},
                "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                "ref": {"type": "object", "x-kubernetes-map-type": "atomic", "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                "m": {"type": "object", "additionalProperties": {"type": "string"}}
            }},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}}
        }}))
        .unwrap()
    }

    fn paths(s: &crate::FieldSet) -> Vec<String> {
        s.paths().iter().map(|p| path_string(p)).collect()
    }

    #[test]
    fn typed_errors_in_smd_words() {
        let s = schema();
        let ok = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a", "labels": {"x": "y"}},
            "spec": {"size": 1, "free": {"any": [1, {"x": 2}]}, "m": {"k": "v"}, "devs": [{"name": "n"}]}});
        assert_eq!(s.check_typed(&ok), Ok(()));
        let cases = [
            (
                json!({"spec": {"bogus": 1}}),
                ".spec.bogus: field not declared in schema",
            ),
            (json!({"zzz": 1}), ".zzz: field not declared in schema"),
            (
                json!({"metadata": {"bogus": 1}}),
                ".metadata.bogus: field not declared in schema",
            ),
            (json!({"spec": "x"}), ".spec: expected map, got &{x}"),
            (json!({"spec": [1]}), ".spec: expected map, got &{[1]}"),
            (
                json!({"spec": {"size": "x"}}),
                ".spec.size: expected numeric (int or float), got string",
            ),
            (
                json!({"spec": {"size": true}}),
                ".spec.size: expected numeric (int or float), got bool",
            ),
            (
                json!({"status": {"phase": 3}}),
                ".status.phase: expected string, got &value.valueUnstructured{Value:3}",
            ),
            (json!({"spec": {"on": 3}}), ".spec.on: expected boolean, got &{3}"),
            (
                json!({"spec": {"tags": "a"}}),
                ".spec.tags: expected list, got &{a}",
            ),
            (
                json!({"spec": {"devs": [{"name": "n", "x": 1}]}}),
                ".spec.devs[name=\"n\"].x: field not declared in schema",
            ),
        ];
        for (v, want) in cases {
            assert_eq!(s.check_typed(&v), Err(want.to_string()), "{v}");
        }
        // nulls are fine (validation judges them later)
        assert_eq!(s.check_typed(&json!({"spec": null})), Ok(()));
    }

    #[test]
    fn field_sets_like_managed_fields() {
        let s = schema();
        let cfg = json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "a", "labels": {"x": "y"}, "finalizers": ["a/b"]},
            "spec": {"size": 1, "tags": ["a"], "set": ["s"], "devs": [{"name": "n", "mtu": 1}], "free": {"a": {"b": 1}}, "ref": {"a": "1"}, "m": {}}});
        let set = s.field_set(&cfg);
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:apiVersion": {}, "f:kind": {}, "f:metadata": {"f:finalizers": {"v:\"a/b\"": {}}, "f:labels": {"f:x": {}}, "f:name": {}},
                "f:spec": {"f:devs": {"k:{\"name\":\"n\"}": {".": {}, "f:mtu": {}, "f:name": {}}},
                    "f:free": {"f:a": {".": {}, "f:b": {}}}, "f:m": {}, "f:ref": {}, "f:set": {"v:\"s\"": {}}, "f:size": {}, "f:tags": {}}})
        );
    }

    #[test]
    fn numbers_compare_by_value() {
        use super::same_value;
        assert!(same_value(&json!({"m": [8.0, 1]}), &json!({"m": [8, 1.0]})));
        assert!(!same_value(&json!(8.5), &json!(8)));
        assert!(!same_value(&json!({"a": 1}), &json!({"a": 1, "b": 2})));
    }

    #[test]
    fn compare_reports_maps_created_and_leaves() {
        let s = schema();
        let old = json!({"metadata": {"name": "a"}, "spec": {"size": 1, "devs": [{"name": "n", "mtu": 1}]}});
        let new = json!({"metadata": {"name": "a", "labels": {"x": "y"}}, "spec": {"size": 2, "devs": [{"name": "n", "mtu": 1}, {"name": "m"}]},
            "status": {"phase": "p"}});
        let c = s.compare(&old, &new);
        assert_eq!(paths(&c.modified), [".spec.size"]);
        assert_eq!(
            paths(&c.added),
            [
                ".metadata.labels",
                ".metadata.labels.x",
                ".spec.devs[name=\"m\"]",
                ".spec.devs[name=\"m\"].name",
                ".status",
                ".status.phase"
            ]
        );
        let back = s.compare(&new, &old);
        assert_eq!(back.removed, c.added);
    }

    #[test]
    fn merge_keeps_live_fields_and_merges_lists_by_key() {
        let s = schema();
        let live = json!({"spec": {"size": 1, "name": "x", "tags": ["a", "b"], "set": ["p", "q"],
            "devs": [{"name": "a", "mtu": 1}, {"name": "b", "model": "m"}]}});
        let cfg = json!({"spec": {"size": 2, "tags": ["c"], "set": ["r", "q"], "devs": [{"name": "b", "mtu": 9}, {"name": "c"}]}});
        assert_eq!(
            s.merge(&live, &cfg),
            json!({"spec": {"size": 2, "name": "x", "tags": ["c"], "set": ["p", "r", "q"],
                "devs": [{"name": "a", "mtu": 1}, {"name": "b", "model": "m", "mtu": 9}, {"name": "c"}]}})
        );
        let mut merged = s.merge(&live, &cfg);
        let mut rm = crate::FieldSet::new();
        rm.insert(&[
            PathElement::Field("spec".into()),
            PathElement::Field("name".into()),
        ]);
        rm.insert(&[
            PathElement::Field("spec".into()),
            PathElement::Field("devs".into()),
            PathElement::Key("{\"name\":\"a\"}".into()),
        ]);
        rm.remove_from(&mut merged);
        assert!(merged["spec"].get("name").is_none());
        assert_eq!(merged["spec"]["devs"].as_array().unwrap().len(), 2);
    }
}
