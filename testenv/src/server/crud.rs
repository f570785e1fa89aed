//! get, list, create, update, delete and deletecollection, plus the write rules they share:
//! metadata initialisation, optimistic concurrency, generation, status subresource, finalizers.

use std::sync::Arc;

use base64::Engine;
use hyper::Response;
use serde_json::{Map, Value, json};

use super::admission::{self, FieldErr};
use super::crds::{self, ResourceDef};
use super::fieldmgr::{self, Actor, Ownership};
use super::fieldval::Decoding;
use super::routes::ResourceReq;
use super::selectors::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult, qualified};
use super::store::{StoreError, rv_of};
use super::{
    Body, State, conversion, events, immutable, json_response, table, typemeta, webhook_configs, webhooks,
};
use crate::Error;

const NAMESPACES: (&str, &str) = ("", "namespaces");

/// Current time as the apiserver renders it.
pub fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A string field of `metadata`.
pub fn meta_str<'a>(obj: &'a Value, k: &str) -> &'a str {
    obj.get("metadata")
        .and_then(|m| m.get(k))
        .and_then(Value::as_str)
        .unwrap_or_default()
}

fn meta_mut(obj: &mut Value) -> ApiResult<&mut Map<String, Value>> {
    let o = obj
        .as_object_mut()
        .ok_or_else(|| ApiError::bad_request("the body must be a JSON object"))?;
    let m = o.entry("metadata").or_insert_with(|| json!({}));
    if !m.is_object() {
        *m = json!({});
    }
    m.as_object_mut()
        .ok_or_else(|| ApiError::bad_request("metadata must be an object"))
}

pub(crate) fn finalizers(obj: &Value) -> Vec<String> {
    obj.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

/// Parses a request body (JSON, or YAML as a fallback).
pub fn parse_body(body: &[u8]) -> ApiResult<Value> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(Value::Null);
    }
    match serde_json::from_slice(body) {
        Ok(v) => Ok(v),
        Err(je) => {
            let text = std::str::from_utf8(body)
                .map_err(|_| ApiError::bad_request(format!("invalid JSON: {je}")))?;
            serde_saphyr::from_str(text)
                .map_err(|e| ApiError::bad_request(format!("invalid body: {je}; as YAML: {e}")))
        }
    }
}

fn key_of(rr: &ResourceReq) -> (String, String) {
    (
        rr.ns.clone().unwrap_or_default(),
        rr.name.clone().unwrap_or_default(),
    )
}

/// Converts a stored object to `version` (and applies that version's defaults, as reads do).
pub async fn to_version(st: &State, def: &ResourceDef, obj: Value, version: &str) -> ApiResult<Value> {
    let mut out = conversion::convert(def, obj, &def.api_version(version)).await?;
    if let Some(schema) = def.version(version).and_then(|v| v.schema.clone()) {
        schema.prune_and_default(&mut out);
    }
    let _ = st;
    Ok(out)
}

fn invalid(def: &ResourceDef, name: &str, errs: &[FieldErr]) -> ApiError {
    admission::invalid_error(&def.kind, &def.group, name, errs)
}

fn name_error(def: &ResourceDef, name: &str) -> Option<FieldErr> {
    let label = def.plural == "namespaces";
    let max = if label { 63 } else { 253 };
    let ok_chars = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || (!label && c == '.'));
    let ends_ok = name.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && name.chars().last().is_some_and(|c| c.is_ascii_alphanumeric());
    if name.len() <= max && ok_chars && ends_ok {
        return None;
    }
    let what = if label {
        "RFC 1123 label"
    } else {
        "RFC 1123 subdomain"
    };
    Some(FieldErr {
        field: "metadata.name".into(),
        reason: "FieldValueInvalid".into(),
        message: format!(
            "Invalid value: {name:?}: a lowercase {what} must consist of lower case alphanumeric characters, '-'{} and must start and end with an alphanumeric character",
            if label { "" } else { " or '.'" }
        ),
    })
}

/// apimachinery's `ValidateOwnerReferences`: at most one owner reference may be the controller
/// (every kind, every write — an apply merging a second controller reference in is refused too).
fn second_controller(obj: &Value) -> Option<FieldErr> {
    let refs = obj.pointer("/metadata/ownerReferences")?.as_array()?;
    let name = |r: &Value| {
        format!(
            "{}/{}",
            r.get("kind").and_then(Value::as_str).unwrap_or_default(),
            r.get("name").and_then(Value::as_str).unwrap_or_default()
        )
    };
    let mut controllers = refs
        .iter()
        .filter(|r| r.get("controller").and_then(Value::as_bool) == Some(true));
    let first = controllers.next()?;
    let second = controllers.next()?;
    Some(FieldErr {
        field: "metadata.ownerReferences".into(),
        reason: "FieldValueInvalid".into(),
        message: format!(
            "Invalid value: {}: Only one reference can have Controller set to true. Found \"true\" in references for {} and {}",
            Value::Array(refs.clone()),
            name(first),
            name(second)
        ),
    })
}

/// Kind-specific preparation shared by create and update (after metadata rules, before storage):
/// pruning of unknown fields (per `fieldValidation`), defaulting and validation.
fn admit(
    st: &State,
    def: &ResourceDef,
    version: &str,
    obj: &mut Value,
    old: Option<&Value>,
    dec: &Decoding<'_>,
) -> ApiResult<()> {
    let name = meta_str(obj, "name").to_string();
    if let Some(e) = second_controller(obj) {
        return Err(invalid(def, &name, &[e]));
    }
    if let Some(schema) = def.pruning_schema(version)
        && !dec.apply
    {
        let before = obj.clone();
        let unknown = schema.prune_reporting_unknown(obj);
        dec.unknown_fields(&def.kind, version, &before, &unknown)?;
    }
    if def.res_id() == (String::new(), "events".to_string()) {
        let core = events::to_core(obj.clone());
        let new_api = def.group == events::NEW_GROUP;
        let errs = match old {
            None => events::validate_create(&core, new_api),
            Some(o) => events::validate_update(&core, &events::to_core(o.clone()), new_api),
        };
        if !errs.is_empty() {
            return Err(admission::invalid_error(&def.kind, "", &name, &errs));
        }
    }
    if def.custom {
        if let Some(schema) = def.version(version).and_then(|v| v.schema.clone()) {
            schema.default(obj);
            let errs = schema.validate(obj, old);
            if !errs.is_empty() {
                return Err(invalid(def, &name, &errs));
            }
        }
    } else if def.plural == "customresourcedefinitions" {
        crds::set_defaults(obj);
        let parsed = crds::from_crd(obj).map_err(|errs| invalid(def, &name, &errs))?;
        if let Some(existing) = st
            .registry()
            .by_res(&parsed.group, &parsed.plural)
            .filter(|d| !d.custom)
        {
            return Err(ApiError::invalid(
                &def.kind,
                &def.group,
                &name,
                format!("{} conflicts with a built-in kind", existing.plural),
                vec![],
            ));
        }
        let stored: Vec<Value> = obj
            .pointer("/status/storedVersions")
            .and_then(Value::as_array)
            .cloned()
            .unwrap_or_default();
        let mut stored_versions: Vec<Value> = stored;
        let sv = json!(parsed.storage_version());
        if !stored_versions.contains(&sv) {
            stored_versions.push(sv);
        }
        let t = now();
        let cond = |ty: &str, reason: &str, msg: &str| json!({"type": ty, "status": "True", "lastTransitionTime": t, "reason": reason, "message": msg});
        obj["status"] = json!({
            "conditions": [
                cond("NamesAccepted", "NoConflicts", "no conflicts found"),
                cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
            ],
            "acceptedNames": obj.pointer("/spec/names").cloned().unwrap_or(json!({})),
            "storedVersions": stored_versions,
        });
    } else if def.plural == "secrets" && def.group.is_empty() {
        if let Some(Value::Object(sd)) = obj.as_object_mut().and_then(|o| o.remove("stringData")) {
            let data = obj
                .as_object_mut()
                .map(|o| o.entry("data").or_insert_with(|| json!({})));
            if let Some(Value::Object(d)) = data {
                for (k, v) in sd {
                    let s = v.as_str().unwrap_or_default();
                    d.insert(k, json!(base64::engine::general_purpose::STANDARD.encode(s)));
                }
            }
        }
        if obj.get("type").is_none() {
            obj["type"] = json!("Opaque");
        }
    } else if webhook_configs::is_config(def) {
        webhook_configs::admit(def, obj).map_err(|errs| invalid(def, &name, &errs))?;
    } else if def.plural == "namespaces" && def.group.is_empty() {
        let deleting = !meta_str(obj, "deletionTimestamp").is_empty();
        obj["status"] = json!({"phase": if deleting { "Terminating" } else { "Active" }});
        let name = json!(meta_str(obj, "name"));
        if let Ok(m) = meta_mut(obj) {
            let labels = m.entry("labels").or_insert_with(|| json!({}));
            if let Some(l) = labels.as_object_mut() {
                l.insert("kubernetes.io/metadata.name".into(), name);
            }
        }
    }
    if let Some(old) = old
        && def.group.is_empty()
        && matches!(def.plural.as_str(), "configmaps" | "secrets")
    {
        let errs = immutable::data_update(&def.plural, old, obj);
        if !errs.is_empty() {
            return Err(invalid(def, meta_str(obj, "name"), &errs));
        }
    }
    Ok(())
}

fn strip_for_generation(def: &ResourceDef, version: &str, obj: &Value) -> Value {
    let mut o = obj.clone();
    if let Some(m) = o.as_object_mut() {
        m.remove("metadata");
        if def.has_status(version) {
            m.remove("status");
        }
    }
    o
}

/// Creates an object given in `version`; returns it in `version`.
pub async fn create_object(
    st: &State,
    def: &Arc<ResourceDef>,
    version: &str,
    mut obj: Value,
    dry_run: bool,
    dec: &Decoding<'_>,
    owner: &Ownership,
) -> ApiResult<Value> {
    let ns = meta_str(&obj, "namespace").to_string();
    if def.namespaced {
        match st.store.get(&(NAMESPACES.0.into(), NAMESPACES.1.into()), "", &ns) {
            None => return Err(ApiError::not_found("namespaces", "", &ns)),
            Some(n) if !meta_str(&n, "deletionTimestamp").is_empty() => {
                return Err(ApiError::forbidden(
                    &def.plural,
                    &def.group,
                    meta_str(&obj, "name"),
                    &format!("unable to create new content in namespace {ns} because it is being terminated"),
                ));
            }
            Some(_) => {}
        }
    }
    let m = meta_mut(&mut obj)?;
    if m.get("name")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .is_empty()
        && let Some(prefix) = m
            .get("generateName")
            .and_then(Value::as_str)
            .filter(|p| !p.is_empty())
    {
        use rand::Rng;
        let mut rng = rand::rng();
        const ALPHA: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
        let suffix: String = (0..5)
            .map(|_| ALPHA[rng.random_range(0..ALPHA.len())] as char)
            .collect();
        m.insert("name".into(), json!(format!("{prefix}{suffix}")));
    }
    for k in [
        "resourceVersion",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "selfLink",
        "managedFields",
    ] {
        m.remove(k);
    }
    m.insert("uid".into(), json!(uuid::Uuid::new_v4().to_string()));
    m.insert("creationTimestamp".into(), json!(now()));
    if def.tracks_generation() {
        m.insert("generation".into(), json!(1));
    } else {
        m.remove("generation");
    }
    let name = meta_str(&obj, "name").to_string();
    if name.is_empty() {
        let e = FieldErr {
            field: "metadata.name".into(),
            reason: "FieldValueRequired".into(),
            message: "Required value: name or generateName is required".into(),
        };
        return Err(invalid(def, "", &[e]));
    }
    if let Some(e) = name_error(def, &name) {
        return Err(invalid(def, &name, &[e]));
    }
    if def.has_status(version)
        && (def.custom || def.plural == "customresourcedefinitions")
        && let Some(o) = obj.as_object_mut()
    {
        o.remove("status");
    }
    let attrs = webhooks::Attrs::create(def, version, dry_run, dec.warnings);
    obj = webhooks::mutate(st, &attrs, obj, None).await?;
    admit(st, def, version, &mut obj, None, dec)?;
    let actor = Actor {
        ownership: owner,
        api_version: def.api_version(version),
        subresource: String::new(),
    };
    let schema = def.schema_for(version);
    fieldmgr::record(
        &schema,
        def,
        version,
        &actor,
        &json!({}),
        &mut obj,
        Vec::new(),
        &now(),
    );
    webhooks::validate(st, &attrs, &obj, None).await?;
    let storage = conversion::convert(def, obj.clone(), &def.storage_api_version()).await?;
    if dry_run {
        return Ok(obj);
    }
    let created = st.store.create(&def.res_id(), storage).map_err(|e| match e {
        StoreError::AlreadyExists => ApiError::already_exists(&def.plural, &def.group, &name),
        _ => ApiError::internal("create failed"),
    })?;
    if def.plural == "customresourcedefinitions"
        && !def.custom
        && let Ok(parsed) = crds::from_crd(&created)
    {
        st.store.start_window(&parsed.res_id());
        st.registry_mut().upsert(parsed);
    }
    to_version(st, def, created, version).await
}

/// Applies update rules to `new` (in `version`) given the current `old` (in `version`).
fn prepare_update(
    st: &State,
    def: &ResourceDef,
    version: &str,
    sub: Option<&str>,
    old: &Value,
    new: Value,
    dec: &Decoding<'_>,
) -> ApiResult<Value> {
    let name = meta_str(old, "name").to_string();
    let mut new = if sub == Some("status") {
        let mut o = old.clone();
        match new.get("status") {
            Some(s) => o["status"] = s.clone(),
            None => {
                if let Some(m) = o.as_object_mut() {
                    m.remove("status");
                }
            }
        }
        // The body's resourceVersion is a precondition on status writes too (409 when stale).
        if let Some(m) = o.get_mut("metadata").and_then(Value::as_object_mut) {
            match new.pointer("/metadata/resourceVersion") {
                Some(rv) => m.insert("resourceVersion".into(), rv.clone()),
                None => m.remove("resourceVersion"),
            };
        }
        o
    } else {
        let mut n = new;
        if !n.is_object() {
            return Err(ApiError::bad_request("the body must be a JSON object"));
        }
        if def.has_status(version) {
            match old.get("status") {
                Some(s) => n["status"] = s.clone(),
                None => {
                    if let Some(m) = n.as_object_mut() {
                        m.remove("status");
                    }
                }
            }
        }
        n
    };
    if sub != Some("status") {
        typemeta::check_identity(def, old, &new, dec)?;
    }
    new["apiVersion"] = old["apiVersion"].clone();
    new["kind"] = old["kind"].clone();
    let errs = immutable::metadata(old, &mut new);
    if !errs.is_empty() {
        let twice: Vec<FieldErr> = errs.iter().chain(&errs).cloned().collect();
        return Err(invalid(def, &name, &twice));
    }
    let body_rv = meta_str(&new, "resourceVersion").to_string();
    let m = meta_mut(&mut new)?;
    for k in ["name", "namespace"] {
        match old.get("metadata").and_then(|om| om.get(k)) {
            Some(v) => m.insert(k.into(), v.clone()),
            None => m.remove(k),
        };
    }
    m.remove("managedFields");
    m.remove("selfLink");
    m.insert("resourceVersion".into(), json!(body_rv));
    if !meta_str(old, "deletionTimestamp").is_empty() {
        let before = finalizers(old);
        if finalizers(&new).iter().any(|f| !before.contains(f)) {
            let e = FieldErr {
                field: "metadata.finalizers".into(),
                reason: "FieldValueForbidden".into(),
                message: "Forbidden: no new finalizers can be added if the object is being deleted".into(),
            };
            return Err(invalid(def, &name, &[e]));
        }
    }
    admit(st, def, version, &mut new, Some(old), dec)?;
    if def.tracks_generation() {
        let changed = if def.custom {
            strip_for_generation(def, version, &new) != strip_for_generation(def, version, old)
        } else {
            new.get("spec") != old.get("spec")
        };
        let g = old
            .pointer("/metadata/generation")
            .and_then(Value::as_i64)
            .unwrap_or(1);
        new["metadata"]["generation"] = json!(if changed { g + 1 } else { g });
    }
    Ok(new)
}

/// Read-modify-write with optimistic concurrency. `mutate` receives the current object in the request
/// version and returns the desired one; a non-empty `metadata.resourceVersion` in its result must match.
pub async fn write_object<F>(st: &State, rr: &ResourceReq, owner: &Ownership, mutate: F) -> ApiResult<Value>
where
    F: Fn(&Value) -> ApiResult<Value>,
{
    let def = &rr.def;
    let dec = rr.decoding()?;
    let schema = def.schema_for(&rr.version);
    let actor = Actor {
        ownership: owner,
        api_version: def.api_version(&rr.version),
        subresource: rr.sub.clone().unwrap_or_default(),
    };
    let res = def.res_id();
    let (ns, name) = key_of(rr);
    for _ in 0..64 {
        let stored = st
            .store
            .get(&res, &ns, &name)
            .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, &name))?;
        let stored_rv = rv_of(&stored);
        let old = to_version(st, def, stored, &rr.version).await?;
        let wanted = mutate(&old)?;
        let attrs = webhooks::Attrs::update(rr, dec.warnings);
        let wanted = webhooks::mutate(st, &attrs, wanted, Some(&old)).await?;
        let sent_fields = match (owner, wanted.pointer("/metadata/managedFields")) {
            (Ownership::Update { .. }, Some(Value::Array(a))) if !a.is_empty() && rr.sub.is_none() => {
                Some(json!({"metadata": {"managedFields": a}}))
            }
            _ => None,
        };
        let mut new = prepare_update(st, def, &rr.version, rr.sub.as_deref(), &old, wanted, &dec)?;
        if let Ownership::Apply {
            manager,
            force: false,
            ..
        } = owner
        {
            let found = fieldmgr::conflicts(&schema, def, &rr.version, &actor, &old, &new);
            if !found.is_empty() && !fieldmgr::allowed_by_last_applied(&schema, manager, &old, &found) {
                return Err(fieldmgr::conflict_error(&found));
            }
        }
        let req_rv = meta_str(&new, "resourceVersion").to_string();
        let conditional = !req_rv.is_empty();
        if conditional && req_rv.parse::<u64>().is_err() {
            return Err(ApiError {
                code: 500,
                reason: "InternalError",
                message: format!("strconv.ParseUint: parsing {req_rv:?}: invalid syntax"),
                details: None,
            });
        }
        if conditional && req_rv != stored_rv.to_string() {
            return Err(ApiError::conflict(&def.plural, &def.group, &name));
        }
        let base = fieldmgr::decode(sent_fields.as_ref().unwrap_or(&old));
        fieldmgr::record(&schema, def, &rr.version, &actor, &old, &mut new, base, &now());
        webhooks::validate(st, &attrs, &new, Some(&old)).await?;
        if rr.dry_run() {
            return Ok(new);
        }
        if !meta_str(&new, "deletionTimestamp").is_empty() && finalizers(&new).is_empty() {
            match st.store.delete(&res, &ns, &name, Some(stored_rv)) {
                Ok(gone) => {
                    super::delete::after_delete(st, def, &gone);
                    return to_version(st, def, gone, &rr.version).await;
                }
                Err(StoreError::Conflict) if !conditional => continue,
                Err(StoreError::NotFound) => return Err(ApiError::not_found(&def.plural, &def.group, &name)),
                Err(_) => return Err(ApiError::conflict(&def.plural, &def.group, &name)),
            }
        }
        let storage = conversion::convert(def, new, &def.storage_api_version()).await?;
        match st.store.update(&res, storage, stored_rv) {
            Ok(v) => {
                if def.plural == "customresourcedefinitions"
                    && !def.custom
                    && let Ok(parsed) = crds::from_crd(&v)
                {
                    st.registry_mut().upsert(parsed);
                }
                return to_version(st, def, v, &rr.version).await;
            }
            Err(StoreError::Conflict) if !conditional => continue,
            Err(StoreError::NotFound) => return Err(ApiError::not_found(&def.plural, &def.group, &name)),
            Err(_) => return Err(ApiError::conflict(&def.plural, &def.group, &name)),
        }
    }
    Err(ApiError::conflict(&def.plural, &def.group, &name))
}

/// The `PartialObjectMetadata` form of an object.
pub fn partial_metadata(obj: &Value) -> Value {
    json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata",
           "metadata": obj.get("metadata").cloned().unwrap_or(json!({}))})
}

/// GET of one object.
pub async fn get(st: &State, rr: &ResourceReq) -> ApiResult<Response<Body>> {
    let (ns, name) = key_of(rr);
    let def = &rr.def;
    let obj = st
        .store
        .get(&def.res_id(), &ns, &name)
        .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, &name))?;
    let obj = to_version(st, def, obj, &rr.version).await?;
    if rr.wants_table && def.custom {
        let rv = meta_str(&obj, "resourceVersion").to_string();
        return Ok(json_response(
            200,
            &table::table(def, &rr.version, &[obj], &rv, None),
        ));
    }
    if rr.wants_meta {
        return Ok(json_response(200, &partial_metadata(&obj)));
    }
    Ok(json_response(200, &obj))
}

fn encode_continue(ns: &str, name: &str) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(format!("{ns}\u{0}{name}"))
}

fn decode_continue(tok: &str) -> ApiResult<(String, String)> {
    let raw = base64::engine::general_purpose::URL_SAFE_NO_PAD
        .decode(tok)
        .ok()
        .and_then(|b| String::from_utf8(b).ok())
        .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
    let (ns, name) = raw
        .split_once('\u{0}')
        .ok_or_else(|| ApiError::bad_request("continue key is not valid"))?;
    Ok((ns.to_string(), name.to_string()))
}

/// Objects of a collection matching the request's selectors (storage form).
pub fn select(st: &State, rr: &ResourceReq) -> ApiResult<(Vec<Value>, u64)> {
    let ls = LabelSelector::parse(rr.q("labelSelector").unwrap_or_default())?;
    let fs = FieldSelector::parse_for(rr.q("fieldSelector").unwrap_or_default(), &rr.def)?;
    let (items, rv) = st.store.list(&rr.def.res_id(), rr.ns.as_deref());
    Ok((
        items
            .into_iter()
            .filter(|o| ls.matches(o) && fs.matches(o))
            .collect(),
        rv,
    ))
}

/// LIST with selectors and `limit`/`continue` pagination.
pub async fn list(st: &State, rr: &ResourceReq) -> ApiResult<Response<Body>> {
    let def = &rr.def;
    let (mut items, rv) = select(st, rr)?;
    if let Some(tok) = rr.q("continue").filter(|t| !t.is_empty()) {
        let after = decode_continue(tok)?;
        items.retain(|o| {
            (
                meta_str(o, "namespace").to_string(),
                meta_str(o, "name").to_string(),
            ) > after
        });
    }
    let mut meta = json!({"resourceVersion": rv.to_string()});
    let limit: usize = rr.q("limit").and_then(|l| l.parse().ok()).unwrap_or(0);
    if limit > 0 && items.len() > limit {
        let rest = items.split_off(limit);
        if let Some(last) = items.last() {
            meta["continue"] = json!(encode_continue(
                meta_str(last, "namespace"),
                meta_str(last, "name")
            ));
            meta["remainingItemCount"] = json!(rest.len());
        }
    }
    let mut out = Vec::with_capacity(items.len());
    for o in items {
        out.push(to_version(st, def, o, &rr.version).await?);
    }
    if rr.wants_table && def.custom {
        let t = table::table(def, &rr.version, &out, &rv.to_string(), meta.get("continue"));
        return Ok(json_response(200, &t));
    }
    if rr.wants_meta {
        let items: Vec<Value> = out.iter().map(partial_metadata).collect();
        return Ok(json_response(
            200,
            &json!({"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadataList", "metadata": meta, "items": items}),
        ));
    }
    Ok(json_response(
        200,
        &json!({"apiVersion": def.api_version(&rr.version), "kind": def.list_kind, "metadata": meta, "items": out}),
    ))
}

/// POST (to the collection; for custom resources also to a named path, as the apiserver
/// accepts: the body names the object).
pub async fn create(st: &State, rr: &ResourceReq, body: &[u8]) -> ApiResult<Response<Body>> {
    let def = &rr.def;
    if rr.sub.is_some() {
        return Err(ApiError::method_not_allowed_msg(&format!(
            "create is not supported on resources of kind {:?}",
            qualified(&def.plural, &def.group)
        )));
    }
    let dec = rr.decoding()?;
    let mut obj = parse_body(body)?;
    if !obj.is_object() {
        return Err(ApiError::bad_request("the body must be a JSON object"));
    }
    typemeta::type_meta(def, &rr.version, &mut obj, body)?;
    let m = meta_mut(&mut obj)?;
    match &rr.ns {
        Some(ns) => {
            let body_ns = m.get("namespace").and_then(Value::as_str).unwrap_or_default();
            if !body_ns.is_empty() && body_ns != ns {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
            m.insert("namespace".into(), json!(ns));
        }
        None if def.namespaced => return Err(ApiError::method_not_allowed()),
        None => {
            m.remove("namespace");
        }
    }
    let owner = Ownership::Update {
        manager: rr.manager(),
    };
    let created = create_object(st, def, &rr.version, obj, rr.dry_run(), &dec, &owner).await?;
    Ok(json_response(201, &created))
}

/// PUT (main resource or `status`).
pub async fn update(st: &State, rr: &ResourceReq, body_bytes: &[u8]) -> ApiResult<Response<Body>> {
    let def = &rr.def;
    rr.decoding()?;
    let body = parse_body(body_bytes)?;
    let (_, name) = key_of(rr);
    let body_name = meta_str(&body, "name");
    if !body_name.is_empty() && body_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({body_name}) does not match the name on the URL ({name})"
        )));
    }
    if def.custom && body.get("kind").and_then(Value::as_str).is_none_or(str::is_empty) {
        return Err(typemeta::missing_kind(def, body_bytes));
    }
    if def.custom && meta_str(&body, "resourceVersion").is_empty() {
        let msg = "Invalid value: 0x0: must be specified for an update";
        return Err(ApiError::invalid(
            &def.plural,
            &def.group,
            &name,
            format!(
                "{} {name:?} is invalid: metadata.resourceVersion: {msg}",
                qualified(&def.plural, &def.group)
            ),
            vec![json!({"reason": "FieldValueInvalid", "message": msg, "field": "metadata.resourceVersion"})],
        ));
    }
    let owner = Ownership::Update {
        manager: rr.manager(),
    };
    let v = write_object(st, rr, &owner, |_| Ok(body.clone())).await?;
    Ok(json_response(200, &v))
}

/// Creates the namespaces every cluster has.
pub fn bootstrap(st: &State) -> Result<(), Error> {
    for ns in ["default", "kube-system", "kube-public", "kube-node-lease"] {
        let obj = json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": ns, "uid": uuid::Uuid::new_v4().to_string(), "creationTimestamp": now(),
                         "labels": {"kubernetes.io/metadata.name": ns}},
            "spec": {"finalizers": ["kubernetes"]},
            "status": {"phase": "Active"},
        });
        st.store
            .create(&(NAMESPACES.0.into(), NAMESPACES.1.into()), obj)
            .map_err(|e| Error::Server(format!("bootstrapping namespace {ns}: {e:?}")))?;
    }
    Ok(())
}
