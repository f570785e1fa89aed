//! Type meta and identity of request bodies, answered like kube-apiserver's decoder and update
//! checks: a custom resource needs `kind` and its exact `apiVersion`, a built-in kind's body of
//! another kind cannot be converted, and an update may not rename, move or re-type an object.

use serde_json::{Value, json};

use super::admission::{self, FieldErr};
use super::crds::ResourceDef;
use super::crud::meta_str;
use super::fieldval::Decoding;
use super::status::{ApiError, ApiResult};

/// The 400 for a custom-resource body without `kind` (what the apiserver's decoder says).
pub fn missing_kind(def: &ResourceDef, body: &[u8]) -> ApiError {
    let text = String::from_utf8_lossy(body).trim().to_string();
    let short = if text.chars().count() > 30 {
        format!("{} ...", text.chars().take(30).collect::<String>())
    } else {
        text.clone()
    };
    ApiError::bad_request(format!(
        "the object provided is unrecognized (must be of type {}): Object 'Kind' is missing in '{text}' ({short})",
        def.kind
    ))
}

/// Checks the body's `apiVersion` and `kind` against the endpoint and fills them in.
pub fn type_meta(def: &ResourceDef, version: &str, obj: &mut Value, body: &[u8]) -> ApiResult<()> {
    let want_av = def.api_version(version);
    let av = obj.get("apiVersion").and_then(Value::as_str).map(str::to_string);
    let kind = obj.get("kind").and_then(Value::as_str).map(str::to_string);
    if def.custom && kind.as_deref().is_none_or(str::is_empty) {
        return Err(missing_kind(def, body));
    }
    if let Some(av) = av.as_deref().or(def.custom.then_some(""))
        && av != want_av
    {
        return Err(ApiError::bad_request(format!(
            "the API version in the data ({av}) does not match the expected API version ({want_av})"
        )));
    }
    if let Some(k) = kind.filter(|k| *k != def.kind) {
        if def.custom {
            let e = FieldErr {
                field: "kind".into(),
                reason: "FieldValueInvalid".into(),
                message: format!("Invalid value: {k:?}: must be {}", def.kind),
            };
            return Err(admission::invalid_error(
                &k,
                &def.group,
                meta_str(obj, "name"),
                &[e],
            ));
        }
        let internal = if def.group.is_empty() {
            "core"
        } else {
            def.group.split('.').next().unwrap_or_default()
        };
        return Err(ApiError::bad_request(format!(
            "{k} in version {version:?} cannot be handled as a {kind}: converting ({version}.{k}) to ({internal}.{kind}): unknown conversion",
            kind = def.kind
        )));
    }
    obj["apiVersion"] = json!(want_av);
    obj["kind"] = json!(def.kind);
    Ok(())
}

/// An update may not move an object (name, namespace) nor change its kind or apiVersion.
pub fn check_identity(def: &ResourceDef, old: &Value, new: &Value, dec: &Decoding<'_>) -> ApiResult<()> {
    let name = meta_str(old, "name");
    let new_name = meta_str(new, "name");
    if !new_name.is_empty() && new_name != name {
        return Err(ApiError::bad_request(format!(
            "the name of the object ({new_name}) does not match the name on the URL ({name})"
        )));
    }
    let new_ns = meta_str(new, "namespace");
    if !new_ns.is_empty() && new_ns != meta_str(old, "namespace") {
        return Err(ApiError::bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let s = |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default().to_string();
    let (kind, av) = (s(new, "kind"), s(new, "apiVersion"));
    let (want_kind, want_av) = (s(old, "kind"), s(old, "apiVersion"));
    let kind_bad = !kind.is_empty() && kind != want_kind;
    let av_bad = !av.is_empty() && av != want_av;
    if !(kind_bad || av_bad) {
        return Ok(());
    }
    if def.custom {
        let (field, value, want, head_kind, head_group) = if kind_bad {
            ("kind", kind.clone(), want_kind, kind, def.group.clone())
        } else {
            let group = av
                .rsplit_once('/')
                .map(|(g, _)| g.to_string())
                .unwrap_or_default();
            ("apiVersion", av.clone(), want_av, want_kind, group)
        };
        let e = FieldErr {
            field: field.into(),
            reason: "FieldValueInvalid".into(),
            message: format!("Invalid value: {value:?}: must be {want}"),
        };
        return Err(admission::invalid_error(&head_kind, &head_group, name, &[e]));
    }
    let why = if kind_bad {
        format!("the kind in the data ({kind}) does not match the expected kind ({want_kind})")
    } else {
        format!("the API version in the data ({av}) does not match the expected API version ({want_av})")
    };
    if dec.patch {
        let text = serde_json::to_string(new).unwrap_or_default();
        let msg = format!("Invalid value: {text:?}: {why}");
        return Err(ApiError {
            code: 422,
            reason: "Invalid",
            message: format!(" \"\" is invalid: patch: {msg}"),
            details: Some(
                json!({"causes": [{"reason": "FieldValueInvalid", "message": msg, "field": "patch"}]}),
            ),
        });
    }
    Err(ApiError::bad_request(why))
}
