//! Server-side apply: the configuration is converted to a typed value against the version's
//! schema (unknown fields and type mismatches are a 500, as kube-apiserver answers, whatever
//! `fieldValidation` says), merged onto the live object (granular maps key by key, `set`/`map`
//! lists item by item, the rest replaced), stripped of the fields the manager applied before and
//! no longer applies (unless another manager owns them), and checked for conflicts with every
//! other manager's fields (`managedFields`, see `fieldmgr`), unless `force=true`.

use hyper::Response;
use serde_json::{Value, json};

use super::crud::{create_object, meta_str, parse_body, write_object};
use super::fieldmgr::{self, Actor, Ownership};
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
    let schema = def.schema_for(&rr.version);
    if let Err(e) = schema.check_typed(&raw) {
        return Err(ApiError {
            code: 500,
            reason: "",
            message: format!(
                "failed to create typed patch object (/{name}; {}/{}, Kind={}): {e}",
                def.group, rr.version, def.kind
            ),
            details: None,
        });
    }
    let set = fieldmgr::applied_set(&schema, def, &rr.version, rr.sub.as_deref(), &raw);
    let cfg = clean_cfg(raw);
    let owner = Ownership::Apply { manager, set, force };
    let res = def.res_id();
    let dec = rr.decoding()?;
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
        let created = create_object(st, def, &rr.version, obj, rr.dry_run(), &dec, &owner).await?;
        return Ok(json_response(201, &created));
    }
    let actor = Actor {
        ownership: &owner,
        api_version: def.api_version(&rr.version),
        subresource: rr.sub.clone().unwrap_or_default(),
    };
    // Conflicts are checked by `write_object` once the merged object is defaulted.
    let out = write_object(st, rr, &owner, |live| {
        let mut merged = schema.merge(live, &cfg);
        fieldmgr::prune_unapplied(&schema, &actor, live, &mut merged);
        if let Some(m) = merged.get_mut("metadata").and_then(Value::as_object_mut) {
            m.insert("resourceVersion".into(), json!(conditional_rv));
        }
        Ok(merged)
    })
    .await?;
    Ok(json_response(200, &out))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_metadata_is_not_applied() {
        let cfg = clean_cfg(json!({"metadata": {"name": "a", "uid": "u", "labels": {"x": "y"}}}));
        assert_eq!(cfg, json!({"metadata": {"labels": {"x": "y"}}}));
    }
}
