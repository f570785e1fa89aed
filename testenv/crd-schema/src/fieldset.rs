//! Field sets as server-side apply tracks them (structured-merge-diff's `fieldpath.Set`): a tree of
//! path elements whose nodes may be members, encoded on the wire as `FieldsV1`
//! (`{"f:spec": {".": {}, "f:size": {}}}`).

use std::collections::BTreeMap;

use serde_json::{Map, Value};

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A field of an object (`f:name`).
    Field(String),
    /// An item of an associative list, by its key fields: canonical JSON of an object holding
    /// the key fields sorted by name (`k:{"name":"net0"}`).
    Key(String),
    /// An item of a set list, by value: canonical JSON (`v:"a/b"`).
    Value(String),
    /// An item of a list by position (`i:0`).
    Index(usize),
}

impl PathElement {
    /// The element for the item `item` of a map-list keyed by `keys`.
    pub fn key_of(item: &Value, keys: &[String]) -> PathElement {
        let mut m = BTreeMap::new();
        for k in keys {
            m.insert(k.clone(), item.get(k).cloned().unwrap_or(Value::Null));
        }
        PathElement::Key(serde_json::to_string(&m).unwrap_or_default())
    }

    /// The element for the item `item` of a set list.
    pub fn value_of(item: &Value) -> PathElement {
        PathElement::Value(serde_json::to_string(item).unwrap_or_default())
    }

    /// The `FieldsV1` key of this element.
    fn fields_key(&self) -> String {
        match self {
            PathElement::Field(f) => format!("f:{f}"),
            PathElement::Key(k) => format!("k:{k}"),
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    fn from_fields_key(k: &str) -> Option<PathElement> {
        let (kind, rest) = k.split_once(':')?;
        Some(match kind {
            "f" => PathElement::Field(rest.to_string()),
            "k" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                PathElement::Key(serde_json::to_string(&v).ok()?)
            }
            "v" => {
                let v: Value = serde_json::from_str(rest).ok()?;
                PathElement::Value(serde_json::to_string(&v).ok()?)
            }
            "i" => PathElement::Index(rest.parse().ok()?),
            _ => return None,
        })
    }

    /// Whether a list item matches this element (by key fields, value or position).
    pub fn matches_item(&self, i: usize, item: &Value) -> bool {
        match self {
            PathElement::Key(k) => {
                let Ok(Value::Object(want)) = serde_json::from_str::<Value>(k) else {
                    return false;
                };
                want.iter().all(|(f, v)| item.get(f).unwrap_or(&Value::Null) == v)
            }
            PathElement::Value(v) => serde_json::from_str::<Value>(v).is_ok_and(|v| &v == item),
            PathElement::Index(j) => *j == i,
            PathElement::Field(_) => false,
        }
    }
}

impl std::fmt::Display for PathElement {
    /// structured-merge-diff's path notation: `.name`, `[name="net0"]`, `[="a/b"]`, `[0]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(k) => {
                let parts: Vec<String> = match serde_json::from_str::<Value>(k) {
                    Ok(Value::Object(m)) => m.iter().map(|(k, v)| format!("{k}={v}")).collect(),
                    _ => vec![k.clone()],
                };
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={v}]"),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

/// Renders a path like structured-merge-diff does (`.spec.devices[name="net0"].model`).
pub fn path_string(path: &[PathElement]) -> String {
    path.iter().map(ToString::to_string).collect()
}

/// A set of field paths, stored as a tree.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet {
    member: bool,
    children: BTreeMap<PathElement, FieldSet>,
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether the set holds no path.
    pub fn is_empty(&self) -> bool {
        !self.member && self.children.values().all(FieldSet::is_empty)
    }

    /// Adds a path (the empty path is the root itself).
    pub fn insert(&mut self, path: &[PathElement]) {
        match path.split_first() {
            None => self.member = true,
            Some((first, rest)) => self.children.entry(first.clone()).or_default().insert(rest),
        }
    }

    /// Whether the path is a member.
    pub fn contains(&self, path: &[PathElement]) -> bool {
        match path.split_first() {
            None => self.member,
            Some((first, rest)) => self.children.get(first).is_some_and(|c| c.contains(rest)),
        }
    }

    /// The sub-tree below `path` (members relative to it), if any.
    pub fn subtree(&self, path: &[PathElement]) -> Option<&FieldSet> {
        match path.split_first() {
            None => Some(self),
            Some((first, rest)) => self.children.get(first)?.subtree(rest),
        }
    }

    /// Every member path, in order.
    pub fn paths(&self) -> Vec<Vec<PathElement>> {
        let mut out = Vec::new();
        self.collect(&mut Vec::new(), &mut out);
        out
    }

    fn collect(&self, prefix: &mut Vec<PathElement>, out: &mut Vec<Vec<PathElement>>) {
        if self.member {
            out.push(prefix.clone());
        }
        for (pe, c) in &self.children {
            prefix.push(pe.clone());
            c.collect(prefix, out);
            prefix.pop();
        }
    }

    fn prune_empty(&mut self) {
        self.children.retain(|_, c| {
            c.prune_empty();
            !c.is_empty()
        });
    }

    /// Members of either set.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        let mut out = self.clone();
        out.member |= other.member;
        for (pe, c) in &other.children {
            let merged = match out.children.get(pe) {
                Some(mine) => mine.union(c),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), merged);
        }
        out
    }

    /// Members of `self` that are not members of `other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && !other.member,
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.difference(o),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), d);
        }
        out.prune_empty();
        out
    }

    /// Members of both sets.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        let mut out = FieldSet {
            member: self.member && other.member,
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            if let Some(o) = other.children.get(pe) {
                out.children.insert(pe.clone(), c.intersection(o));
            }
        }
        out.prune_empty();
        out
    }

    /// Members of `self` that are neither in `other` nor below a member of `other`
    /// (`RecursiveDifference`: removing `.status` removes everything under it).
    pub fn recursive_difference(&self, other: &FieldSet) -> FieldSet {
        if other.member {
            return FieldSet::new();
        }
        let mut out = FieldSet {
            member: self.member,
            children: BTreeMap::new(),
        };
        for (pe, c) in &self.children {
            let d = match other.children.get(pe) {
                Some(o) => c.recursive_difference(o),
                None => c.clone(),
            };
            out.children.insert(pe.clone(), d);
        }
        out.prune_empty();
        out
    }

    /// Removes the members of this set from `v`: object fields by name, list items by key, value or
    /// position (`RemoveItems`).
    pub fn remove_from(&self, v: &mut Value) {
        match v {
            Value::Object(m) => {
                for (pe, c) in &self.children {
                    let PathElement::Field(k) = pe else { continue };
                    if c.member {
                        m.remove(k);
                    } else if let Some(cv) = m.get_mut(k) {
                        c.remove_from(cv);
                    }
                }
            }
            Value::Array(items) => {
                let mut drop = vec![false; items.len()];
                for (pe, c) in &self.children {
                    for (i, item) in items.iter_mut().enumerate() {
                        if !pe.matches_item(i, item) {
                            continue;
                        }
                        if c.member {
                            drop[i] = true;
                        } else {
                            c.remove_from(item);
                        }
                    }
                }
                let mut i = 0;
                items.retain(|_| {
                    let keep = !drop[i];
                    i += 1;
                    keep
                });
            }
            _ => {}
        }
    }

    /// The `FieldsV1` encoding (`{"f:spec": {".": {}, "f:size": {}}}`).
    pub fn to_fields_v1(&self) -> Value {
        let mut m = Map::new();
        for (pe, c) in &self.children {
            if c.is_empty() {
                continue;
            }
            let mut inner = match c.to_fields_v1() {
                Value::Object(o) => o,
                _ => Map::new(),
            };
            if c.member && !inner.is_empty() {
                inner.insert(".".into(), Value::Object(Map::new()));
            }
            m.insert(pe.fields_key(), Value::Object(inner));
        }
        Value::Object(m)
    }

    /// Parses a `FieldsV1` value; unknown keys are ignored.
    pub fn from_fields_v1(v: &Value) -> FieldSet {
        let mut out = FieldSet::new();
        let Some(m) = v.as_object() else { return out };
        for (k, child) in m {
            if k == "." {
                continue;
            }
            let Some(pe) = PathElement::from_fields_key(k) else {
                continue;
            };
            let mut c = FieldSet::from_fields_v1(child);
            let explicit = child.as_object().is_some_and(|o| o.contains_key("."));
            let leaf = child.as_object().is_none_or(Map::is_empty);
            c.member = explicit || leaf;
            out.children.insert(pe, c);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn f(s: &str) -> PathElement {
        PathElement::Field(s.into())
    }

    #[test]
    fn fields_v1_round_trip() {
        let v = json!({"f:metadata": {"f:labels": {".": {}, "f:a": {}}, "f:finalizers": {".": {}, "v:\"a/b\"": {}}},
            "f:spec": {".": {}, "f:list": {"k:{\"name\":\"x\"}": {".": {}, "f:name": {}}}, "f:size": {}}});
        let s = FieldSet::from_fields_v1(&v);
        assert!(s.contains(&[f("spec")]));
        assert!(s.contains(&[f("spec"), f("size")]));
        assert!(!s.contains(&[f("metadata")]));
        assert!(s.contains(&[
            f("metadata"),
            f("finalizers"),
            PathElement::Value("\"a/b\"".into())
        ]));
        assert_eq!(s.to_fields_v1(), v);
        let p = s.paths().into_iter().map(|p| path_string(&p)).collect::<Vec<_>>();
        assert!(p.contains(&".spec.list[name=\"x\"].name".to_string()), "{p:?}");
        assert!(p.contains(&".metadata.finalizers[=\"a/b\"]".to_string()), "{p:?}");
    }

    #[test]
    fn set_operations() {
        let mut a = FieldSet::new();
        a.insert(&[f("spec"), f("a")]);
        a.insert(&[f("spec"), f("b")]);
        let mut b = FieldSet::new();
        b.insert(&[f("spec"), f("b")]);
        b.insert(&[f("status")]);
        assert_eq!(a.intersection(&b).paths(), vec![vec![f("spec"), f("b")]]);
        assert_eq!(a.difference(&b).paths(), vec![vec![f("spec"), f("a")]]);
        assert_eq!(a.union(&b).paths().len(), 3);
        let mut spec = FieldSet::new();
        spec.insert(&[f("spec")]);
        assert!(a.recursive_difference(&spec).is_empty());
        assert!(!a.difference(&spec).is_empty());
    }
}
