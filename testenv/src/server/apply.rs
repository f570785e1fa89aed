//! Server-side apply, simplified: the applied configuration is merged onto the live object (maps
//! recursively, lists and scalars replaced); fields this manager applied before but no longer sets are
//! removed; a field another manager applied with a different value is a conflict unless `force=true`.
//! Field ownership is tracked per applied configuration, not as `managedFields`.

use hyper::Response;
use serde_json::{Value, json};

use super::crud::{create_object, meta_str, parse_body, write_object};
use super::routes::ResourceReq;
use super::status::{ApiError, ApiResult};
use super::{Body, State, json_response};

const FIXED: [&str; 6] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "managedFields",
];

/// Leaf paths (dotted) of a configuration, with their values.
fn leaves(v: &Value, prefix: &str, out: &mut Vec<(String, Value)>) {
    match v {
        Value::Object(m) if !m.is_empty() => {
            for (k, x) in m {
                leaves(x, &format!("{prefix}.{k}"), out);
            }
        }
        _ => out.push((prefix.to_string(), v.clone())),
    }
}

fn at<'a>(v: &'a Value, path: &str) -> Option<&'a Value> {
    path.split('.')
        .filter(|s| !s.is_empty())
        .try_fold(v, |cur, k| cur.get(k))
}

fn remove_path(v: &mut Value, path: &str) {
    let parts: Vec<&str> = path.split('.').filter(|s| !s.is_empty()).collect();
    let Some((last, init)) = parts.split_last() else {
        return;
    };
    let mut cur = v;
    for k in init {
        match cur.get_mut(*k) {
            Some(n) => cur = n,
            None => return,
        }
    }
    if let Some(m) = cur.as_object_mut() {
        m.remove(*last);
    }
}

/// Removes from `live` what `prev` set and `cfg` no longer sets.
fn remove_dropped(live: &mut Value, prev: &Value, cfg: &Value) {
    let (Some(pm), Some(lm)) = (prev.as_object(), live.as_object_mut()) else {
        return;
    };
    for (k, pv) in pm {
        match cfg.get(k) {
            None => {
                lm.remove(k);
            }
            Some(cv) if pv.is_object() && cv.is_object() => {
                if let Some(lv) = lm.get_mut(k) {
                    remove_dropped(lv, pv, cv);
                }
            }
            Some(_) => {}
        }
    }
}

fn merge(live: &mut Value, cfg: &Value) {
    match (live.as_object_mut(), cfg.as_object()) {
        (Some(lm), Some(cm)) => {
            for (k, cv) in cm {
                match lm.get_mut(k) {
                    Some(lv) if lv.is_object() && cv.is_object() => merge(lv, cv),
                    _ => {
                        lm.insert(k.clone(), cv.clone());
                    }
                }
            }
        }
        _ => *live = cfg.clone(),
    }
}

/// Computes the object after applying `cfg` for a manager whose previous configuration was `prev`.
pub fn apply_config(live: &Value, cfg: &Value, prev: Option<&Value>) -> Value {
    let mut out = live.clone();
    if let Some(p) = prev {
        remove_dropped(&mut out, p, cfg);
    }
    merge(&mut out, cfg);
    out
}

/// Paths where `cfg` disagrees with what another manager applied (and with the live object).
fn conflicts(live: &Value, cfg: &Value, others: &[(String, Value)]) -> Vec<(String, String)> {
    let mut ls = Vec::new();
    leaves(cfg, "", &mut ls);
    let mut out = Vec::new();
    for (path, v) in ls {
        if path.starts_with(".apiVersion") || path.starts_with(".kind") {
            continue;
        }
        if at(live, &path) == Some(&v) {
            continue;
        }
        for (mgr, theirs) in others {
            if at(theirs, &path).is_some_and(|t| *t != v && !t.is_object()) {
                out.push((mgr.clone(), path.clone()));
            }
        }
    }
    out
}

fn clean_cfg(mut cfg: Value) -> Value {
    if let Some(m) = cfg.get_mut("metadata").and_then(Value::as_object_mut) {
        for k in FIXED {
            m.remove(k);
        }
    }
    cfg
}

/// PATCH with `application/apply-patch+yaml`.
pub async fn apply(st: &State, rr: &ResourceReq, body: &[u8]) -> ApiResult<Response<Body>> {
    let def = &rr.def;
    let manager = rr
        .q("fieldManager")
        .filter(|m| !m.is_empty())
        .ok_or_else(|| {
            ApiError::invalid(
                "PatchOptions",
                "meta.k8s.io",
                "",
                "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch".into(),
                vec![json!({"reason": "FieldValueRequired", "message": "Required value: is required for apply patch", "field": "fieldManager"})],
            )
        })?
        .to_string();
    let force = rr.flag("force");
    let raw = parse_body(body)?;
    if !raw.is_object() {
        return Err(ApiError::bad_request("the apply configuration must be an object"));
    }
    let want_av = def.api_version(&rr.version);
    if raw.get("apiVersion").and_then(Value::as_str) != Some(want_av.as_str())
        || raw.get("kind").and_then(Value::as_str) != Some(def.kind.as_str())
    {
        return Err(ApiError::bad_request(format!(
            "apply configuration must set apiVersion {want_av:?} and kind {:?}",
            def.kind
        )));
    }
    let ns = rr.ns.clone().unwrap_or_default();
    let name = rr.name.clone().unwrap_or_default();
    let cfg_name = meta_str(&raw, "name");
    if !cfg_name.is_empty() && cfg_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({cfg_name}) does not match the name on the URL ({name})"
        )));
    }
    let conditional_rv = meta_str(&raw, "resourceVersion").to_string();
    let cfg = clean_cfg(raw);
    let slot = if rr.sub.is_some() {
        format!("{manager}#status")
    } else {
        manager.clone()
    };
    let res = def.res_id();
    if st.store.get(&res, &ns, &name).is_none() && rr.sub.is_none() {
        let mut obj = cfg.clone();
        let m = obj
            .as_object_mut()
            .map(|o| o.entry("metadata").or_insert_with(|| json!({})));
        if let Some(Value::Object(m)) = m {
            m.insert("name".into(), json!(name));
            if def.namespaced {
                m.insert("namespace".into(), json!(ns));
            }
        }
        // Server-side apply refuses fields the schema does not declare, on create as on update
        // (kube-apiserver: "field not declared in schema").
        let created = create_object(st, def, &rr.version, obj, rr.dry_run(), true).await?;
        if !rr.dry_run() {
            st.store.set_applied(&res, &ns, &name, &slot, cfg);
        }
        return Ok(json_response(201, &created));
    }
    let applied = st.store.applied(&res, &ns, &name);
    let prev = applied.get(&slot).cloned();
    let others: Vec<(String, Value)> = applied
        .iter()
        .filter(|(k, _)| **k != slot)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let out = write_object(st, rr, |live| {
        let found = conflicts(live, &cfg, &others);
        if !found.is_empty() && !force {
            let list: Vec<String> = found
                .iter()
                .map(|(m, p)| format!("conflict with \"{m}\": {p}"))
                .collect();
            let n = list.len();
            return Err(ApiError::conflict_msg(
                &def.plural,
                &def.group,
                &name,
                &format!(
                    "Apply failed with {n} conflict{}: {}",
                    if n == 1 { "" } else { "s" },
                    list.join(", ")
                ),
            ));
        }
        let mut new = apply_config(live, &cfg, prev.as_ref());
        let rv = if conditional_rv.is_empty() {
            String::new()
        } else {
            conditional_rv.clone()
        };
        if let Some(m) = new.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(rv));
        }
        Ok(new)
    })
    .await?;
    if !rr.dry_run() {
        if force {
            let mut ls = Vec::new();
            leaves(&cfg, "", &mut ls);
            for (mgr, mut theirs) in others {
                for (path, _) in &ls {
                    remove_path(&mut theirs, path);
                }
                st.store.set_applied(&res, &ns, &name, &mgr, theirs);
            }
        }
        st.store.set_applied(&res, &ns, &name, &slot, cfg);
    }
    Ok(json_response(200, &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_removes_dropped_fields() {
        let live = json!({"spec": {"a": 1, "b": 2, "c": 3}});
        let prev = json!({"spec": {"a": 1, "b": 2}});
        let cfg = json!({"spec": {"a": 5}});
        assert_eq!(
            apply_config(&live, &cfg, Some(&prev)),
            json!({"spec": {"a": 5, "c": 3}})
        );
    }

    #[test]
    fn detects_conflicts() {
        let live = json!({"spec": {"a": 1}});
        let others = vec![("other".to_string(), json!({"spec": {"a": 1}}))];
        assert_eq!(conflicts(&live, &json!({"spec": {"a": 2}}), &others).len(), 1);
        assert!(conflicts(&live, &json!({"spec": {"a": 1}}), &others).is_empty());
    }
}
