//! v1alpha1 → v1alpha2 (and back, for the v1beta1-contract release) for the four Proxmox kinds:
//! the object conversion of `capmox_api` applied to the document's value, with clusterctl
//! variables in integer and list fields turned into values of the field's type first (the source
//! version's CRD schema says which) and back afterwards, and the source's key order, comments and
//! styles grafted onto the result.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use capmox_api::conversion::convert_value;
use capmox_api::{v1alpha1, v1alpha2};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::proxmox_down::{
    apply_machine_defaults, mark_pool_families, remap_source_down, sparse_object, unmark_pool_families,
};
use super::tokens::Tokens;
use super::tree::{self, Document, Entry, Item, Node, Seq, Style};

/// The four kinds.
pub const KINDS: [&str; 4] = [
    "ProxmoxCluster",
    "ProxmoxClusterTemplate",
    "ProxmoxMachine",
    "ProxmoxMachineTemplate",
];

const CONVERSION_DATA: &str = "cluster.x-k8s.io/conversion-data";

/// Result of converting one document.
pub struct Converted {
    /// The v1alpha2 document.
    pub doc: Document,
    /// What the user should know (dropped fields and comments).
    pub warnings: Vec<String>,
}

/// Variables standing in for values of other types during the typed conversion.
#[derive(Default)]
struct Stand {
    ints: BTreeMap<i64, String>,
    lists: Vec<String>,
    used_numbers: Vec<i64>,
}

impl Stand {
    fn next_int(&mut self, token: &str) -> i64 {
        // Values every integer field accepts (u16 is the smallest), not used in the document.
        let mut n = 65_535 - self.ints.len() as i64;
        while self.used_numbers.contains(&n) || self.ints.contains_key(&n) {
            n -= 1;
        }
        self.ints.insert(n, token.to_owned());
        n
    }
}

/// CRD schemas by (version, kind).
type Schemas = BTreeMap<(String, String), Value>;

/// The CRD schemas of the four kinds, by (version, kind).
fn schemas() -> &'static Result<Schemas, String> {
    static SCHEMAS: OnceLock<Result<Schemas, String>> = OnceLock::new();
    SCHEMAS.get_or_init(|| {
        let crds = capmox_api::crd::all().map_err(|e| e.to_string())?;
        let mut out = BTreeMap::new();
        for crd in crds {
            for v in &crd.spec.versions {
                let schema = v
                    .schema
                    .as_ref()
                    .and_then(|s| s.open_api_v3_schema.as_ref())
                    .map(serde_json::to_value)
                    .transpose()
                    .map_err(|e| e.to_string())?;
                if let Some(schema) = schema {
                    out.insert((v.name.clone(), crd.spec.names.kind.clone()), schema);
                }
            }
        }
        Ok(out)
    })
}

/// Which way a document goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// v1alpha1 → v1alpha2 (`capmox convert`).
    V1alpha2,
    /// v1alpha2 → v1alpha1 (the templates of a v1beta1-contract release).
    V1alpha1,
}

impl Target {
    fn source(self) -> &'static str {
        match self {
            Target::V1alpha2 => "v1alpha1",
            Target::V1alpha1 => "v1alpha2",
        }
    }

    /// The apiVersion documents are converted to.
    pub fn api_version(self) -> &'static str {
        match self {
            Target::V1alpha2 => v1alpha2::API_VERSION,
            Target::V1alpha1 => v1alpha1::API_VERSION,
        }
    }

    fn source_api_version(self) -> &'static str {
        match self {
            Target::V1alpha2 => v1alpha1::API_VERSION,
            Target::V1alpha1 => v1alpha2::API_VERSION,
        }
    }
}

/// Converts one v1alpha1 document of `kind`.
pub fn convert(doc: &Document, tokens: &Tokens, kind: &str) -> Result<Converted, String> {
    convert_to(doc, tokens, kind, Target::V1alpha2, &BTreeMap::new())
}

/// Converts one document of `kind` in the other version to `target`. `pool_v6` says of the IP
/// pools defined beside it (by name) whether they are IPv6: going down, a NIC's pool list splits
/// into v1alpha1's `ipv4PoolRef`/`ipv6PoolRef` by that.
pub fn convert_to(
    doc: &Document,
    tokens: &Tokens,
    kind: &str,
    target: Target,
    pool_v6: &BTreeMap<String, bool>,
) -> Result<Converted, String> {
    let schemas = schemas().as_ref().map_err(Clone::clone)?;
    let from = target.source();
    let schema = schemas
        .get(&(from.to_owned(), kind.to_owned()))
        .ok_or_else(|| format!("no {from} schema for {kind}"))?;
    let mut warnings = Vec::new();
    let mut value = tree::to_value(&doc.root);
    let mut stand = Stand::default();
    collect_numbers(&value, &mut stand.used_numbers);
    stand_in(&mut value, schema, "", tokens, &mut stand)?;
    if value
        .pointer("/metadata/annotations")
        .and_then(Value::as_object)
        .is_some_and(|a| a.contains_key(CONVERSION_DATA))
    {
        return Err(format!(
            "metadata.annotations[{CONVERSION_DATA}] is set: this object was read from a cluster; \
             convert the manifest it was created from instead"
        ));
    }
    check_known_fields(kind, &value, target)?;
    if target == Target::V1alpha1 {
        apply_machine_defaults(kind, &mut value);
        mark_pool_families(&mut value, pool_v6);
    }
    let input_status = value
        .as_object_mut()
        .and_then(|o| o.remove("status"))
        .filter(|s| !is_empty(s));
    let mut hub = convert_value(value.clone(), target.api_version()).map_err(|e| e.to_string())?;

    // The conversion-data annotation is for the API server's round trips; offline, report
    // what the target version cannot express instead.
    if remove_conversion_data(&mut hub, &value) {
        let down = convert_value(hub.clone(), target.source_api_version()).map_err(|e| e.to_string())?;
        let mut lost = Vec::new();
        diff_paths(&value, &down, "", &mut lost);
        lost.retain(|p| !p.starts_with(".metadata") && !p.starts_with(".status"));
        // Going down, what v1alpha1 cannot hold rides in the conversion-data annotation our
        // conversion webhook reads (only the lost fields, literal values: a sparse object).
        if target == Target::V1alpha1
            && !lost.is_empty()
            && let Some(sparse) = sparse_object(&value, &lost, tokens)
        {
            let meta = hub.as_object_mut().map(|o| {
                o.entry("metadata")
                    .or_insert_with(|| Value::Object(Default::default()))
            });
            if let Some(Value::Object(meta)) = meta {
                let ann = meta
                    .entry("annotations")
                    .or_insert_with(|| Value::Object(Default::default()));
                if let Some(ann) = ann.as_object_mut() {
                    ann.insert(CONVERSION_DATA.to_owned(), Value::String(sparse));
                    lost.clear();
                }
            }
        }
        if !lost.is_empty() {
            warnings.push(format!(
                "{} cannot express all of this object; converting back would differ at: {}",
                target.api_version().rsplit('/').next().unwrap_or_default(),
                lost.iter()
                    .map(|p| p.trim_start_matches('.').to_owned())
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
    }
    if let Some(o) = hub.as_object_mut() {
        o.remove("status");
    }
    unmark_pool_families(&mut hub);
    if input_status.is_some() {
        warnings.push("status dropped (the API server sets it)".into());
    }
    restore_stand_ins(&mut hub, &stand);

    let mut source = doc.root.clone();
    match target {
        Target::V1alpha2 => remap_source(kind, &mut source),
        Target::V1alpha1 => remap_source_down(kind, &mut source),
    }
    let mut root = tree::from_value(&hub, Some(&source));
    plain_stand_ins(&mut root, &stand);

    let mut before = Vec::new();
    tree::comments_of(&source, "", &mut before);
    let mut after = Vec::new();
    tree::comments_of(&root, "", &mut after);
    for (path, text) in before {
        if !after.iter().any(|(p, t)| p == &path && t == &text) {
            warnings.push(format!(
                "comment on {} dropped: #{text}",
                path.trim_start_matches('.')
            ));
        }
    }
    Ok(Converted {
        doc: Document {
            root,
            tail: doc.tail.clone(),
        },
        warnings,
    })
}

fn collect_numbers(v: &Value, out: &mut Vec<i64>) {
    match v {
        Value::Number(n) => out.extend(n.as_i64()),
        Value::Array(a) => a.iter().for_each(|v| collect_numbers(v, out)),
        Value::Object(o) => o.values().for_each(|v| collect_numbers(v, out)),
        _ => {}
    }
}

fn schema_type(schema: &Value) -> Option<&str> {
    schema.get("type").and_then(Value::as_str)
}

fn child_schema<'a>(schema: &'a Value, key: &str) -> Option<&'a Value> {
    schema
        .get("properties")
        .and_then(|p| p.get(key))
        .or_else(|| schema.get("additionalProperties").filter(|a| a.is_object()))
}

/// Replaces variables in integer and list fields by stand-in values of the field's type.
fn stand_in(
    v: &mut Value,
    schema: &Value,
    path: &str,
    tokens: &Tokens,
    stand: &mut Stand,
) -> Result<(), String> {
    match v {
        Value::Object(o) => {
            for (k, child) in o.iter_mut() {
                if let Some(s) = child_schema(schema, k) {
                    stand_in(child, s, &format!("{path}.{k}"), tokens, stand)?;
                }
            }
        }
        Value::Array(a) => {
            if let Some(items) = schema.get("items") {
                for (i, child) in a.iter_mut().enumerate() {
                    stand_in(child, items, &format!("{path}[{i}]"), tokens, stand)?;
                }
            }
        }
        Value::String(s) if tokens.contains_token(s) => {
            let whole = tokens.expression(s);
            let field = path.trim_start_matches('.');
            match (schema_type(schema), whole) {
                (Some("integer" | "number"), Some(_)) => *v = Value::from(stand.next_int(s)),
                (Some("array"), Some(_)) if schema.get("items").and_then(schema_type) == Some("string") => {
                    stand.lists.push(s.clone());
                    *v = Value::Array(vec![Value::String(s.clone())]);
                }
                (Some("integer" | "number" | "array" | "object" | "boolean"), _) => {
                    let shown = tokens.restore(s);
                    return Err(format!(
                        "{field}: the variable expression {shown} stands for a {} value; \
                         only a single variable can be converted there — substitute it first \
                         (clusterctl generate yaml) or convert by hand",
                        schema_type(schema).unwrap_or("structured")
                    ));
                }
                _ => {}
            }
        }
        _ => {}
    }
    Ok(())
}

fn restore_stand_ins(v: &mut Value, stand: &Stand) {
    match v {
        Value::Number(n) => {
            if let Some(t) = n.as_i64().and_then(|i| stand.ints.get(&i)) {
                *v = Value::String(t.clone());
            }
        }
        Value::Array(a) => {
            if let [Value::String(s)] = a.as_slice()
                && stand.lists.contains(s)
            {
                *v = Value::String(s.clone());
                return;
            }
            a.iter_mut().for_each(|v| restore_stand_ins(v, stand));
        }
        Value::Object(o) => o.values_mut().for_each(|v| restore_stand_ins(v, stand)),
        _ => {}
    }
}

/// Variables that stood for numbers or lists are written unquoted, so they substitute to one.
fn plain_stand_ins(node: &mut Node, stand: &Stand) {
    match node {
        Node::Scalar(s) => {
            if stand.ints.values().any(|t| t == &s.text) || stand.lists.contains(&s.text) {
                s.style = Style::Plain;
            }
        }
        Node::Map(m) => m
            .entries
            .iter_mut()
            .for_each(|e| plain_stand_ins(&mut e.value, stand)),
        Node::Seq(q) => q
            .items
            .iter_mut()
            .for_each(|i| plain_stand_ins(&mut i.value, stand)),
    }
}

fn is_empty(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.iter().all(is_empty),
        Value::Object(o) => o.values().all(is_empty),
    }
}

/// Fails on fields the source version's types do not know (they would be lost silently).
fn check_known_fields(kind: &str, value: &Value, target: Target) -> Result<(), String> {
    let from = target.source();
    let typed = |v: &Value| -> Result<Value, String> {
        fn go<T: Serialize + DeserializeOwned>(v: &Value, from: &str) -> Result<Value, String> {
            let t: T =
                serde_json::from_value(v.clone()).map_err(|e| format!("not a valid {from} object: {e}"))?;
            serde_json::to_value(t).map_err(|e| e.to_string())
        }
        match (target, kind) {
            (Target::V1alpha2, "ProxmoxCluster") => go::<v1alpha1::ProxmoxCluster>(v, from),
            (Target::V1alpha2, "ProxmoxClusterTemplate") => go::<v1alpha1::ProxmoxClusterTemplate>(v, from),
            (Target::V1alpha2, "ProxmoxMachine") => go::<v1alpha1::ProxmoxMachine>(v, from),
            (Target::V1alpha2, "ProxmoxMachineTemplate") => go::<v1alpha1::ProxmoxMachineTemplate>(v, from),
            (Target::V1alpha1, "ProxmoxCluster") => go::<v1alpha2::ProxmoxCluster>(v, from),
            (Target::V1alpha1, "ProxmoxClusterTemplate") => go::<v1alpha2::ProxmoxClusterTemplate>(v, from),
            (Target::V1alpha1, "ProxmoxMachine") => go::<v1alpha2::ProxmoxMachine>(v, from),
            (Target::V1alpha1, "ProxmoxMachineTemplate") => go::<v1alpha2::ProxmoxMachineTemplate>(v, from),
            (_, other) => Err(format!("unsupported kind {other}")),
        }
    };
    let round = typed(value)?;
    let mut missing = Vec::new();
    missing_paths(value, &round, "", &mut missing);
    match missing.first() {
        None => Ok(()),
        Some(p) => Err(format!(
            "{}: unknown field in {from} {kind}",
            p.trim_start_matches('.')
        )),
    }
}

/// Paths present (non-null) in `a` and absent from `b`.
fn missing_paths(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            for (k, v) in x {
                match y.get(k) {
                    None if !v.is_null() && !is_empty_container(v) => out.push(format!("{path}.{k}")),
                    Some(w) => missing_paths(v, w, &format!("{path}.{k}"), out),
                    None => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) => {
            for (i, (v, w)) in x.iter().zip(y).enumerate() {
                missing_paths(v, w, &format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

fn is_empty_container(v: &Value) -> bool {
    matches!(v, Value::Object(o) if o.is_empty()) || matches!(v, Value::Array(a) if a.is_empty())
}

/// Paths where `a` and `b` differ (nulls and empty containers count as absent).
fn diff_paths(a: &Value, b: &Value, path: &str, out: &mut Vec<String>) {
    let absent = |v: Option<&Value>| v.is_none_or(|v| v.is_null() || is_empty_container(v));
    let empty = serde_json::Map::new();
    let as_obj = |v: &'_ Value| -> Option<serde_json::Map<String, Value>> {
        match v {
            Value::Object(o) => Some(o.clone()),
            Value::Null => Some(empty.clone()),
            _ => None,
        }
    };
    match (as_obj(a), as_obj(b)) {
        (Some(x), Some(y)) if a.is_object() || b.is_object() => {
            let keys: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (v, w) = (x.get(k), y.get(k));
                match (v, w) {
                    (Some(v), Some(w)) => diff_paths(v, w, &format!("{path}.{k}"), out),
                    _ if absent(v) && absent(w) => {}
                    _ => out.push(format!("{path}.{k}")),
                }
            }
        }
        _ if a == b => {}
        _ => out.push(path.to_owned()),
    }
}

/// Removes the conversion-data annotation the conversion may add; whether it did.
fn remove_conversion_data(hub: &mut Value, input: &Value) -> bool {
    let mut removed = false;
    // On the object, and (for a machine template) on the machine it describes.
    for (meta_path, parent) in [("/metadata", ""), ("/spec/template/metadata", "/spec/template")] {
        let input_had_annotations = input
            .pointer(&format!("{meta_path}/annotations"))
            .is_some_and(|a| a.as_object().is_some_and(|o| !o.is_empty()));
        let Some(meta) = hub.pointer_mut(meta_path).and_then(Value::as_object_mut) else {
            continue;
        };
        let Some(ann) = meta.get_mut("annotations").and_then(Value::as_object_mut) else {
            continue;
        };
        removed |= ann.remove(CONVERSION_DATA).is_some();
        if ann.is_empty() && !input_had_annotations {
            meta.remove("annotations");
        }
        if !parent.is_empty()
            && meta.is_empty()
            && input.pointer(meta_path).is_none()
            && let Some(t) = hub.pointer_mut(parent).and_then(Value::as_object_mut)
        {
            t.remove("metadata");
        }
    }
    removed
}

/// Moves the parts of the source whose place changes in v1alpha2 to their new place, so
/// comments and styles follow them: a machine's `network.default` and
/// `network.additionalDevices` become `network.networkDevices`.
fn remap_source(kind: &str, root: &mut Node) {
    let spec_path: &[&str] = match kind {
        "ProxmoxMachine" => &["spec"],
        "ProxmoxMachineTemplate" => &["spec", "template", "spec"],
        _ => return,
    };
    let Some(network) = root
        .get_path_mut(spec_path)
        .and_then(Node::as_map_mut)
        .and_then(|s| s.get_mut("network"))
        .and_then(Node::as_map_mut)
    else {
        return;
    };
    let at = network
        .entries
        .iter()
        .position(|e| e.key == "default" || e.key == "additionalDevices")
        .unwrap_or(0);
    let mut items = Vec::new();
    let mut comments = None;
    if let Some(d) = network.remove("default") {
        comments = Some(d.comments);
        items.push(Item::new(d.value));
    }
    if let Some(Entry {
        value: Node::Seq(s), ..
    }) = network.remove("additionalDevices")
    {
        items.extend(s.items);
    }
    if !items.is_empty() {
        let mut e = Entry::new("networkDevices", Node::Seq(Seq { items, flow: false }));
        e.comments = comments.unwrap_or_default();
        network.entries.insert(at.min(network.entries.len()), e);
    }
}
