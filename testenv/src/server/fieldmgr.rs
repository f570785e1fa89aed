//! `metadata.managedFields`, kept the way kube-apiserver's field manager keeps them: one entry per
//! manager (name, operation `Apply`/`Update`, apiVersion for updates, subresource) holding a
//! `FieldsV1` set. Writes move ownership of the fields they change to their manager; server-side
//! apply gives its manager exactly the applied fields, removes fields it applied before and no
//! longer applies (unless someone else owns them), and conflicts with any other manager (apply or
//! update) owning a field whose value it changes, unless forced.

use crd_schema::{FieldSet, PathElement, path_string};
use serde_json::{Value, json};

use super::admission::VersionSchema;
use super::crds::ResourceDef;
use super::status::ApiError;

/// Who owns what a write changes.
#[derive(Debug, Clone)]
pub enum Ownership {
    /// create, update or a non-apply patch by `manager`.
    Update {
        /// Field manager.
        manager: String,
    },
    /// Server-side apply by `manager` of a configuration claiming `set`.
    Apply {
        /// Field manager.
        manager: String,
        /// Fields of the applied configuration (already filtered).
        set: FieldSet,
        /// `force=true`: take over conflicting fields instead of failing.
        force: bool,
    },
}

impl Ownership {
    fn manager(&self) -> &str {
        match self {
            Ownership::Update { manager } | Ownership::Apply { manager, .. } => manager,
        }
    }

    fn operation(&self) -> &'static str {
        match self {
            Ownership::Update { .. } => "Update",
            Ownership::Apply { .. } => "Apply",
        }
    }
}

/// One `managedFields` entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    manager: String,
    operation: String,
    api_version: String,
    subresource: String,
    time: Option<String>,
    set: FieldSet,
}

impl Entry {
    fn is(&self, manager: &str, operation: &str, api_version: &str, subresource: &str) -> bool {
        self.manager == manager
            && self.operation == operation
            && self.subresource == subresource
            && (operation == "Apply" || self.api_version == api_version)
    }

    /// How conflict messages name the manager (`"mgr" using v1` for update managers).
    fn display(&self) -> String {
        let mut s = format!("{:?}", self.manager);
        if !self.subresource.is_empty() {
            s.push_str(&format!(" with subresource {:?}", self.subresource));
        }
        if self.operation == "Update" {
            s.push_str(&format!(" using {}", self.api_version));
        }
        s
    }
}

/// The entries of an object's `metadata.managedFields`.
pub fn decode(obj: &Value) -> Vec<Entry> {
    let Some(list) = obj.pointer("/metadata/managedFields").and_then(Value::as_array) else {
        return Vec::new();
    };
    let s = |e: &Value, k: &str| e.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    list.iter()
        .map(|e| Entry {
            manager: s(e, "manager"),
            operation: s(e, "operation"),
            api_version: s(e, "apiVersion"),
            subresource: s(e, "subresource"),
            time: e.get("time").and_then(Value::as_str).map(str::to_string),
            set: e
                .get("fieldsV1")
                .map(FieldSet::from_fields_v1)
                .unwrap_or_default(),
        })
        .collect()
}

/// Renders entries as `metadata.managedFields`, sorted like the apiserver sorts them (operation,
/// time, manager, apiVersion, subresource); empty sets are dropped.
pub fn encode(entries: &[Entry]) -> Option<Value> {
    let mut list: Vec<&Entry> = entries.iter().filter(|e| !e.set.is_empty()).collect();
    if list.is_empty() {
        return None;
    }
    list.sort_by(|a, b| {
        (&a.operation, &a.time, &a.manager, &a.api_version, &a.subresource).cmp(&(
            &b.operation,
            &b.time,
            &b.manager,
            &b.api_version,
            &b.subresource,
        ))
    });
    let out: Vec<Value> = list
        .iter()
        .map(|e| {
            let mut v = json!({"manager": e.manager, "operation": e.operation, "apiVersion": e.api_version});
            if let Some(t) = &e.time {
                v["time"] = json!(t);
            }
            v["fieldsType"] = json!("FieldsV1");
            v["fieldsV1"] = e.set.to_fields_v1();
            if !e.subresource.is_empty() {
                v["subresource"] = json!(e.subresource);
            }
            v
        })
        .collect();
    Some(Value::Array(out))
}

fn path(p: &[&str]) -> Vec<PathElement> {
    p.iter().map(|s| PathElement::Field((*s).to_string())).collect()
}

/// Drops what the field manager never tracks (type meta, identity and bookkeeping metadata,
/// `managedFields`) and the fields the strategy resets for this endpoint: `status` on the main
/// resource when the status subresource is on, `spec` on `/status`.
pub fn filter(def: &ResourceDef, version: &str, sub: Option<&str>, set: &FieldSet) -> FieldSet {
    let mut strip = FieldSet::new();
    for p in [
        &["apiVersion"][..],
        &["kind"],
        &["metadata"],
        &["metadata", "name"],
        &["metadata", "namespace"],
        &["metadata", "creationTimestamp"],
        &["metadata", "selfLink"],
        &["metadata", "uid"],
        &["metadata", "generation"],
        &["metadata", "resourceVersion"],
    ] {
        strip.insert(&path(p));
    }
    let mut reset = FieldSet::new();
    reset.insert(&path(&["metadata", "managedFields"]));
    match sub {
        Some("status") => reset.insert(&path(&["spec"])),
        _ if def.has_status(version) => reset.insert(&path(&["status"])),
        _ => {}
    }
    set.difference(&strip).recursive_difference(&reset)
}

/// The fields a write changes (added or modified) and removes, filtered.
fn changes(
    schema: &VersionSchema,
    def: &ResourceDef,
    version: &str,
    sub: Option<&str>,
    old: &Value,
    new: &Value,
) -> (FieldSet, FieldSet) {
    let c = schema.compare(old, new);
    let changed = filter(def, version, sub, &c.added.union(&c.modified));
    let removed = filter(def, version, sub, &c.removed);
    (changed, removed)
}

/// Identity of the acting manager.
pub struct Actor<'a> {
    /// What the write is.
    pub ownership: &'a Ownership,
    /// apiVersion of the request.
    pub api_version: String,
    /// Subresource (`status`) or empty.
    pub subresource: String,
}

impl Actor<'_> {
    fn sub(&self) -> Option<&str> {
        Some(self.subresource.as_str()).filter(|s| !s.is_empty())
    }

    fn is(&self, e: &Entry) -> bool {
        e.is(
            self.ownership.manager(),
            self.ownership.operation(),
            &self.api_version,
            &self.subresource,
        )
    }
}

/// One conflict: the other manager (as messages name it) and the field.
pub type Conflict = (String, Vec<PathElement>);

/// Server-side apply conflicts: fields the apply changes (from `live` to `merged`, both defaulted
/// the way they are stored, as the apiserver compares them) that another manager owns.
pub fn conflicts(
    schema: &VersionSchema,
    def: &ResourceDef,
    version: &str,
    actor: &Actor<'_>,
    live: &Value,
    merged: &Value,
) -> Vec<Conflict> {
    let (changed, _) = changes(schema, def, version, actor.sub(), live, merged);
    let mut out = Vec::new();
    for e in decode(live).iter().filter(|e| !actor.is(e)) {
        for p in e.set.intersection(&changed).paths() {
            out.push((e.display(), p));
        }
    }
    out
}

/// The annotation `kubectl apply` (client-side) keeps the applied configuration in.
const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// `kubectl apply --server-side` taking over from client-side apply: conflicts on fields of the
/// last-applied configuration that still hold their applied values are allowed (the apiserver's
/// `lastAppliedManager`, for the manager `kubectl` only).
pub fn allowed_by_last_applied(
    schema: &VersionSchema,
    manager: &str,
    live: &Value,
    found: &[Conflict],
) -> bool {
    if manager != "kubectl" {
        return false;
    }
    let Some(last) = live
        .pointer("/metadata/annotations")
        .and_then(|a| a.get(LAST_APPLIED))
        .and_then(Value::as_str)
        .and_then(|t| serde_json::from_str::<Value>(t).ok())
    else {
        return false;
    };
    let allowed = schema
        .field_set(&last)
        .difference(&schema.compare(&last, live).modified);
    found.iter().all(|(_, p)| allowed.contains(p))
}

/// The 409 the apiserver answers for apply conflicts.
pub fn conflict_error(found: &[Conflict]) -> ApiError {
    let conflicts: Vec<(String, String)> = found.iter().map(|(m, p)| (m.clone(), path_string(p))).collect();
    let n = conflicts.len();
    let detail = if n == 1 {
        format!("conflict with {}: {}", conflicts[0].0, conflicts[0].1)
    } else {
        let mut managers: Vec<&String> = conflicts.iter().map(|(m, _)| m).collect();
        managers.sort();
        managers.dedup();
        let mut lines = Vec::new();
        for m in managers {
            lines.push(format!("conflicts with {m}:"));
            for (_, p) in conflicts.iter().filter(|(x, _)| x == m) {
                lines.push(format!("- {p}"));
            }
        }
        lines.join("\n")
    };
    let causes: Vec<Value> = conflicts
        .iter()
        .map(|(m, p)| json!({"reason": "FieldManagerConflict", "message": format!("conflict with {m}"), "field": p}))
        .collect();
    ApiError {
        code: 409,
        reason: "Conflict",
        message: format!(
            "Apply failed with {n} conflict{}: {detail}",
            if n == 1 { "" } else { "s" }
        ),
        details: Some(json!({"causes": causes})),
    }
}

/// Removes from `merged` the fields the applying manager applied last time, no longer applies,
/// and nobody else owns.
pub fn prune_unapplied(schema: &VersionSchema, actor: &Actor<'_>, live: &Value, merged: &mut Value) {
    let Ownership::Apply { set, .. } = actor.ownership else {
        return;
    };
    let entries = decode(live);
    let Some(last) = entries.iter().find(|e| actor.is(e)).map(|e| e.set.clone()) else {
        return;
    };
    let owned = entries
        .iter()
        .filter(|e| !actor.is(e))
        .fold(set.clone(), |acc, e| acc.union(&e.set));
    let drop = last.difference(&owned).intersection(&schema.field_set(merged));
    drop.remove_from(merged);
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v.get_mut("metadata").and_then(Value::as_object_mut) {
        m.remove("managedFields");
    }
    v
}

/// Computes `new`'s `managedFields` after a write by `actor` that turned `old` into `new` (both in
/// the request version). `base` are the entries to start from (the body's, when an update sent
/// some, else `old`'s). Nothing changes (not even times) when the object does not.
#[allow(clippy::too_many_arguments)]
pub fn record(
    schema: &VersionSchema,
    def: &ResourceDef,
    version: &str,
    actor: &Actor<'_>,
    old: &Value,
    new: &mut Value,
    base: Vec<Entry>,
    now: &str,
) {
    let (changed, removed) = changes(schema, def, version, actor.sub(), old, new);
    let mut entries: Vec<Entry> = Vec::with_capacity(base.len() + 1);
    let mut mine: Option<Entry> = None;
    for mut e in base {
        if actor.is(&e) {
            mine = Some(e);
        } else {
            e.set = e.set.difference(&changed).difference(&removed);
            entries.push(e);
        }
    }
    let mut me = mine.unwrap_or_else(|| Entry {
        manager: actor.ownership.manager().to_string(),
        operation: actor.ownership.operation().to_string(),
        api_version: actor.api_version.clone(),
        subresource: actor.subresource.clone(),
        time: None,
        set: FieldSet::new(),
    });
    me.api_version = actor.api_version.clone();
    match actor.ownership {
        Ownership::Update { .. } => {
            me.set = me.set.difference(&removed).union(&changed);
            if !changed.is_empty() {
                me.time = Some(now.to_string());
            }
        }
        Ownership::Apply { set, .. } => {
            me.set = set.clone();
            me.time = Some(now.to_string());
        }
    }
    entries.push(me);
    let encoded = encode(&entries);
    // An unchanged object keeps its managedFields as they were (timestamps included), so that
    // no-op writes stay no-ops.
    let old_entries = decode(old);
    let same_sets = {
        let strip = |es: &[Entry]| -> Vec<Entry> {
            let mut es: Vec<Entry> = es
                .iter()
                .filter(|e| !e.set.is_empty())
                .cloned()
                .map(|mut e| {
                    e.time = None;
                    e
                })
                .collect();
            es.sort_by(|a, b| {
                (&a.manager, &a.operation, &a.subresource).cmp(&(&b.manager, &b.operation, &b.subresource))
            });
            es
        };
        strip(&old_entries) == strip(&entries)
    };
    let final_mf = if same_sets && without_managed_fields(old) == without_managed_fields(new) {
        old.pointer("/metadata/managedFields").cloned()
    } else {
        encoded
    };
    if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
        match final_mf {
            Some(mf) => m.insert("managedFields".into(), mf),
            None => m.remove("managedFields"),
        };
    }
}

/// The set an apply configuration claims, filtered for this endpoint.
pub fn applied_set(
    schema: &VersionSchema,
    def: &ResourceDef,
    version: &str,
    sub: Option<&str>,
    config: &Value,
) -> FieldSet {
    filter(def, version, sub, &schema.field_set(config))
}

/// The manager of a non-apply write: `fieldManager`, else the client's user agent up to the first
/// `/`, else `unknown`.
pub fn default_manager(field_manager: Option<&str>, user_agent: &str) -> String {
    if let Some(m) = field_manager.filter(|m| !m.is_empty()) {
        return m.to_string();
    }
    let prefix = user_agent.split('/').next().unwrap_or_default();
    if prefix.is_empty() {
        "unknown".to_string()
    } else {
        prefix.chars().take(128).collect()
    }
}
