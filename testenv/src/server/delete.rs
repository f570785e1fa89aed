//! delete and deletecollection: preconditions, finalizers and `deletionTimestamp`, propagation
//! finalizers, and what goes with a namespace or a CRD.

use std::sync::Arc;

use hyper::Response;
use serde_json::{Value, json};

use super::crds::{self, ResourceDef};
use super::crud::{finalizers, meta_str, now, parse_body, select, to_version};
use super::routes::ResourceReq;
use super::status::{ApiError, ApiResult};
use super::store::{StoreError, rv_of};
use super::{Body, State, json_response};

fn key_of(rr: &ResourceReq) -> (String, String) {
    (
        rr.ns.clone().unwrap_or_default(),
        rr.name.clone().unwrap_or_default(),
    )
}

#[derive(Debug, Default)]
struct DeleteOpts {
    propagation: Option<String>,
    pre_rv: Option<String>,
    pre_uid: Option<String>,
}

fn delete_opts(rr: &ResourceReq, body: &[u8]) -> ApiResult<DeleteOpts> {
    let b = parse_body(body)?;
    let s = |p: &str| b.pointer(p).and_then(Value::as_str).map(str::to_string);
    Ok(DeleteOpts {
        propagation: s("/propagationPolicy").or_else(|| rr.q("propagationPolicy").map(str::to_string)),
        pre_rv: s("/preconditions/resourceVersion"),
        pre_uid: s("/preconditions/uid"),
    })
}

/// Effects of an object really leaving the store: namespace contents and CRD instances go with it.
pub fn after_delete(st: &State, def: &ResourceDef, gone: &Value) {
    if def.custom || !def.group.is_empty() && def.plural != "customresourcedefinitions" {
        return;
    }
    if def.plural == "namespaces" {
        let ns = meta_str(gone, "name");
        let defs: Vec<Arc<ResourceDef>> = st
            .registry()
            .all()
            .iter()
            .filter(|d| d.namespaced)
            .cloned()
            .collect();
        for d in defs {
            let (items, _) = st.store.list(&d.res_id(), Some(ns));
            for o in items {
                let _ = st.store.delete(&d.res_id(), ns, meta_str(&o, "name"), None);
            }
        }
    } else if def.plural == "customresourcedefinitions"
        && let Ok(parsed) = crds::from_crd(gone)
    {
        st.registry_mut().remove(&parsed.group, &parsed.plural);
        let (items, _) = st.store.list(&parsed.res_id(), None);
        for o in items {
            let _ = st.store.delete(
                &parsed.res_id(),
                meta_str(&o, "namespace"),
                meta_str(&o, "name"),
                None,
            );
        }
        st.store.drop_collection(&parsed.res_id());
    }
}

/// Deletes (or marks for deletion when finalizers remain) one object; returns its last state (storage
/// form) and whether it is gone.
pub fn delete_object(
    st: &State,
    def: &ResourceDef,
    ns: &str,
    name: &str,
    propagation: Option<&str>,
    dry_run: bool,
) -> ApiResult<(Value, bool)> {
    let res = def.res_id();
    for _ in 0..64 {
        let stored = st
            .store
            .get(&res, ns, name)
            .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, name))?;
        let rv = rv_of(&stored);
        let mut fins = finalizers(&stored);
        let extra = match propagation {
            Some("Foreground") => Some("foregroundDeletion"),
            Some("Orphan") => Some("orphan"),
            _ => None,
        };
        let deleting = !meta_str(&stored, "deletionTimestamp").is_empty();
        if let Some(f) = extra.filter(|_| !fins.is_empty() || !deleting)
            && !fins.iter().any(|x| x == f)
        {
            fins.push(f.to_string());
        }
        if fins.is_empty() {
            if dry_run {
                return Ok((stored, true));
            }
            match st.store.delete(&res, ns, name, Some(rv)) {
                Ok(gone) => {
                    after_delete(st, def, &gone);
                    return Ok((gone, true));
                }
                Err(StoreError::Conflict) => continue,
                Err(_) => return Err(ApiError::not_found(&def.plural, &def.group, name)),
            }
        }
        let mut marked = stored.clone();
        marked["metadata"]["finalizers"] = json!(fins);
        if !deleting {
            marked["metadata"]["deletionTimestamp"] = json!(now());
            marked["metadata"]["deletionGracePeriodSeconds"] = json!(0);
            if def.plural == "namespaces" && def.group.is_empty() {
                marked["status"] = json!({"phase": "Terminating"});
            }
        }
        if dry_run || marked == stored {
            return Ok((marked, false));
        }
        match st.store.update(&res, marked, rv) {
            Ok(v) => return Ok((v, false)),
            Err(StoreError::Conflict) => continue,
            Err(_) => return Err(ApiError::not_found(&def.plural, &def.group, name)),
        }
    }
    Err(ApiError::conflict(&def.plural, &def.group, name))
}

/// DELETE of one object.
pub async fn delete(st: &State, rr: &ResourceReq, body: &[u8]) -> ApiResult<Response<Body>> {
    if rr.sub.is_some() {
        return Err(ApiError::method_not_allowed());
    }
    let def = &rr.def;
    let (ns, name) = key_of(rr);
    let opts = delete_opts(rr, body)?;
    let stored = st
        .store
        .get(&def.res_id(), &ns, &name)
        .ok_or_else(|| ApiError::not_found(&def.plural, &def.group, &name))?;
    let mismatch = |what: &str, want: &str, have: &str, why: &str| {
        let head = super::status::qualified(&def.kind, &def.group);
        let mut e = ApiError::conflict_msg(&def.kind, &def.group, &name, "");
        e.message = format!(
            "Operation cannot be fulfilled on {head} {name:?}: the {what} in the precondition ({want}) does not match the {what} in record ({have}). The object might have been {why}"
        );
        e
    };
    if let Some(p) = opts.pre_uid.filter(|p| *p != meta_str(&stored, "uid")) {
        return Err(mismatch(
            "UID",
            &p,
            meta_str(&stored, "uid"),
            "deleted and then recreated",
        ));
    }
    if let Some(p) = opts.pre_rv.filter(|p| *p != meta_str(&stored, "resourceVersion")) {
        return Err(mismatch(
            "ResourceVersion",
            &p,
            meta_str(&stored, "resourceVersion"),
            "modified",
        ));
    }
    super::webhooks::validate_delete(st, def, &rr.version, &stored, rr.dry_run()).await?;
    let (obj, _) = delete_object(st, def, &ns, &name, opts.propagation.as_deref(), rr.dry_run())?;
    Ok(json_response(200, &to_version(st, def, obj, &rr.version).await?))
}

/// DELETE of a collection (honours selectors).
pub async fn delete_collection(st: &State, rr: &ResourceReq, body: &[u8]) -> ApiResult<Response<Body>> {
    let def = &rr.def;
    if def.namespaced && rr.ns.is_none() {
        return Err(ApiError::method_not_allowed());
    }
    let opts = delete_opts(rr, body)?;
    let (items, _) = select(st, rr)?;
    let mut out = Vec::new();
    for o in items {
        match delete_object(
            st,
            def,
            meta_str(&o, "namespace"),
            meta_str(&o, "name"),
            opts.propagation.as_deref(),
            rr.dry_run(),
        ) {
            Ok((v, _)) => out.push(to_version(st, def, v, &rr.version).await?),
            Err(e) if e.code == 404 => {}
            Err(e) => return Err(e),
        }
    }
    Ok(json_response(
        200,
        &json!({"apiVersion": def.api_version(&rr.version), "kind": def.list_kind,
                "metadata": {"resourceVersion": st.store.current_rv().to_string()}, "items": out}),
    ))
}
