//! Side-by-side comparison of two CRDs (ours and capmox's), used by `schema_parity.rs`.
//!
//! The comparison ignores human text (`description`, `title`, `example`) and reports every other
//! difference with a readable schema path such as `spec.network.networkDevices[].name`
//! (`[]` = array items, `{}` = map values).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

/// Environment variable overriding the directory holding capmox's CRD YAML files.
pub const COMPAT_DIR_ENV: &str = "CAPMOX_COMPAT_DIR";

/// Schema keywords that carry human text only.
const IGNORED_KEYWORDS: &[&str] = &["description", "title", "example", "externalDocs"];

/// Keywords whose value is a list with set semantics.
const SET_KEYWORDS: &[&str] = &["required", "enum", "x-kubernetes-list-map-keys"];

/// One difference between our schema and capmox's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Difference {
    /// `<Kind> <version>`.
    pub pair: String,
    /// Schema path (`spec.foo[].bar`), or `<crd>` for CRD-level fields.
    pub path: String,
    /// What differs and how.
    pub what: String,
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}: {}", self.pair, self.path, self.what)
    }
}

/// Directory of capmox's CRDs: `$CAPMOX_COMPAT_DIR`, else `../shared/compat/capmox-v0.9/crd` relative to
/// the repository root. `None` when it does not exist.
pub fn compat_crd_dir() -> Option<PathBuf> {
    let dir = match std::env::var_os(COMPAT_DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => repo_root().join("../shared/compat/capmox-v0.9/crd"),
    };
    dir.is_dir().then_some(dir)
}

/// The repository root (parent of the `api` crate).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// Loads every CRD YAML document in `dir`, keyed by `spec.names.kind`.
pub fn load_crds(dir: &Path) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml" || x == "yml"))
        .collect();
    entries.sort();
    for path in entries {
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
        let docs: Vec<Value> =
            serde_saphyr::from_multiple(&text).unwrap_or_else(|e| panic!("parsing {}: {e}", path.display()));
        for doc in docs {
            if doc.get("kind").and_then(Value::as_str) == Some("CustomResourceDefinition") {
                let kind = doc["spec"]["names"]["kind"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                out.insert(kind, doc);
            }
        }
    }
    out
}

/// Compares two whole CRDs (as JSON): names, scope, and for every version the flags, printer
/// columns, subresources and `openAPIV3Schema`.
pub fn diff_crds(ours: &Value, theirs: &Value) -> Vec<Difference> {
    let kind = theirs["spec"]["names"]["kind"].as_str().unwrap_or("?").to_owned();
    let mut out = Vec::new();
    let crd_pair = format!("{kind} <crd>");
    for key in ["kind", "listKind", "plural", "singular"] {
        let (a, b) = (&ours["spec"]["names"][key], &theirs["spec"]["names"][key]);
        if a != b {
            out.push(diff(
                &crd_pair,
                &format!("names.{key}"),
                format!("ours={a} capmox={b}"),
            ));
        }
    }
    for key in ["shortNames", "categories"] {
        let a = string_set(&ours["spec"]["names"][key]);
        let b = string_set(&theirs["spec"]["names"][key]);
        if a != b {
            out.push(diff(
                &crd_pair,
                &format!("names.{key}"),
                format!("ours={a:?} capmox={b:?}"),
            ));
        }
    }
    for key in ["group", "scope"] {
        if ours["spec"][key] != theirs["spec"][key] {
            out.push(diff(
                &crd_pair,
                key,
                format!("ours={} capmox={}", ours["spec"][key], theirs["spec"][key]),
            ));
        }
    }
    let our_versions = versions(ours);
    let their_versions = versions(theirs);
    for name in their_versions
        .keys()
        .chain(our_versions.keys())
        .collect::<BTreeSet<_>>()
    {
        let pair = format!("{kind} {name}");
        match (our_versions.get(name), their_versions.get(name)) {
            (Some(a), Some(b)) => out.extend(diff_version(&pair, a, b)),
            (None, Some(_)) => out.push(diff(&pair, "<version>", "missing in ours".into())),
            (Some(_), None) => out.push(diff(&pair, "<version>", "not in capmox".into())),
            (None, None) => {}
        }
    }
    out
}

/// The versions of a CRD by name.
pub fn versions(crd: &Value) -> BTreeMap<String, Value> {
    crd["spec"]["versions"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| (v["name"].as_str().unwrap_or_default().to_owned(), v.clone()))
        .collect()
}

/// Compares one version entry of two CRDs.
pub fn diff_version(pair: &str, ours: &Value, theirs: &Value) -> Vec<Difference> {
    let mut out = Vec::new();
    for key in ["served", "storage", "deprecated"] {
        let (a, b) = (flag(&ours[key]), flag(&theirs[key]));
        if a != b {
            out.push(diff(
                pair,
                &format!("<version>.{key}"),
                format!("ours={a} capmox={b}"),
            ));
        }
    }
    let (a, b) = (&ours["subresources"], &theirs["subresources"]);
    if normalize_empty(a) != normalize_empty(b) {
        out.push(diff(
            pair,
            "<version>.subresources",
            format!("ours={a} capmox={b}"),
        ));
    }
    let a = printer_columns(ours);
    let b = printer_columns(theirs);
    if a != b {
        out.push(diff(
            pair,
            "<version>.additionalPrinterColumns",
            format!("ours={} capmox={}", Value::Array(a), Value::Array(b)),
        ));
    }
    let a = &ours["schema"]["openAPIV3Schema"];
    let b = &theirs["schema"]["openAPIV3Schema"];
    diff_schema(pair, "", a, b, &mut out);
    out
}

fn flag(v: &Value) -> bool {
    v.as_bool().unwrap_or(false)
}

fn normalize_empty(v: &Value) -> Value {
    match v {
        Value::Object(m) if m.is_empty() => Value::Null,
        other => other.clone(),
    }
}

fn printer_columns(version: &Value) -> Vec<Value> {
    version["additionalPrinterColumns"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .map(|mut c| {
            if let Some(obj) = c.as_object_mut() {
                obj.retain(|_, v| !v.is_null());
                if obj.get("priority") == Some(&Value::from(0)) {
                    obj.remove("priority");
                }
            }
            c
        })
        .collect()
}

fn string_set(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_owned))
        .collect()
}

fn diff(pair: &str, path: &str, what: String) -> Difference {
    Difference {
        pair: pair.to_owned(),
        path: if path.is_empty() {
            "<root>".to_owned()
        } else {
            path.to_owned()
        },
        what,
    }
}

fn child_path(path: &str, segment: &str) -> String {
    if path.is_empty() {
        segment.to_owned()
    } else {
        format!("{path}.{segment}")
    }
}

/// Recursively compares two schema nodes, pushing every difference.
pub fn diff_schema(pair: &str, path: &str, ours: &Value, theirs: &Value, out: &mut Vec<Difference>) {
    let empty = serde_json::Map::new();
    let a = ours.as_object().unwrap_or(&empty);
    let b = theirs.as_object().unwrap_or(&empty);
    let keys: BTreeSet<&String> = a.keys().chain(b.keys()).collect();
    for key in keys {
        if IGNORED_KEYWORDS.contains(&key.as_str()) {
            continue;
        }
        let (va, vb) = (a.get(key.as_str()), b.get(key.as_str()));
        match key.as_str() {
            "properties" => diff_properties(pair, path, va, vb, out),
            "items" => diff_sub(pair, &format!("{path}[]"), "items", va, vb, out),
            "additionalProperties" => {
                diff_sub(pair, &format!("{path}{{}}"), "additionalProperties", va, vb, out)
            }
            "x-kubernetes-validations" => diff_validations(pair, path, va, vb, out),
            k if SET_KEYWORDS.contains(&k) => {
                let sa = value_set(va);
                let sb = value_set(vb);
                if sa != sb {
                    out.push(diff(
                        pair,
                        path,
                        format!("{k}: ours={} capmox={}", show(va), show(vb)),
                    ));
                }
            }
            k => {
                if !same_value(va, vb) {
                    out.push(diff(
                        pair,
                        path,
                        format!("{k}: ours={} capmox={}", show(va), show(vb)),
                    ));
                }
            }
        }
    }
}

fn diff_properties(pair: &str, path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Difference>) {
    let empty = serde_json::Map::new();
    let pa = a.and_then(Value::as_object).unwrap_or(&empty);
    let pb = b.and_then(Value::as_object).unwrap_or(&empty);
    let names: BTreeSet<&String> = pa.keys().chain(pb.keys()).collect();
    for name in names {
        let p = child_path(path, name);
        match (pa.get(name.as_str()), pb.get(name.as_str())) {
            (Some(x), Some(y)) => diff_schema(pair, &p, x, y, out),
            (Some(_), None) => out.push(diff(pair, &p, "property only in ours".into())),
            (None, Some(_)) => out.push(diff(pair, &p, "property missing in ours".into())),
            (None, None) => {}
        }
    }
}

fn diff_sub(
    pair: &str,
    path: &str,
    keyword: &str,
    a: Option<&Value>,
    b: Option<&Value>,
    out: &mut Vec<Difference>,
) {
    match (a, b) {
        (Some(x @ Value::Object(_)), Some(y @ Value::Object(_))) => diff_schema(pair, path, x, y, out),
        (x, y) if same_value(x, y) => {}
        (x, y) => out.push(diff(
            pair,
            path,
            format!("{keyword}: ours={} capmox={}", show(x), show(y)),
        )),
    }
}

fn diff_validations(pair: &str, path: &str, a: Option<&Value>, b: Option<&Value>, out: &mut Vec<Difference>) {
    let norm = |v: Option<&Value>| -> BTreeSet<String> {
        v.and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|r| {
                let mut r = r.clone();
                if let Some(obj) = r.as_object_mut() {
                    obj.retain(|_, v| !v.is_null());
                }
                r.to_string()
            })
            .collect()
    };
    let (sa, sb) = (norm(a), norm(b));
    for only in sa.difference(&sb) {
        out.push(diff(
            pair,
            path,
            format!("x-kubernetes-validations: rule only in ours: {only}"),
        ));
    }
    for only in sb.difference(&sa) {
        out.push(diff(
            pair,
            path,
            format!("x-kubernetes-validations: rule missing in ours: {only}"),
        ));
    }
}

fn value_set(v: Option<&Value>) -> BTreeSet<String> {
    v.and_then(Value::as_array)
        .into_iter()
        .flatten()
        .map(Value::to_string)
        .collect()
}

/// Equality that treats numbers by value (`100` == `100.0`).
fn same_value(a: Option<&Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (Some(Value::Number(x)), Some(Value::Number(y))) => x.as_f64() == y.as_f64(),
        (x, y) => x == y,
    }
}

fn show(v: Option<&Value>) -> String {
    match v {
        None => "<absent>".to_owned(),
        Some(v) => {
            let s = v.to_string();
            if s.chars().count() > 160 {
                format!("{}…", s.chars().take(160).collect::<String>())
            } else {
                s
            }
        }
    }
}
