//! PATCH: JSON merge patch, JSON patch, strategic merge patch (built-in kinds only, applied as a merge
//! patch) and server-side apply (see `apply`).

use hyper::Response;
use serde_json::{Value, json};

use super::crud::{meta_str, parse_body, write_object};
use super::fieldmgr::Ownership;
use super::routes::ResourceReq;
use super::status::{ApiError, ApiResult};
use super::{Body, State, apply, json_response};

/// Removes strategic-merge directives (`$patch`, `$retainKeys`, `$setElementOrder/...`, ...).
fn strip_directives(v: &mut Value) {
    match v {
        Value::Object(m) => {
            m.retain(|k, _| !k.starts_with('$'));
            m.values_mut().for_each(strip_directives);
        }
        Value::Array(a) => a.iter_mut().for_each(strip_directives),
        _ => {}
    }
}

fn apply_patch(old: &Value, ctype: &str, patch: &Value, kind: &str, group: &str) -> ApiResult<Value> {
    let mut out = old.clone();
    match ctype {
        "application/json-patch+json" => {
            let p: json_patch::Patch = serde_json::from_value(patch.clone())
                .map_err(|e| ApiError::bad_request(format!("invalid JSON patch: {e}")))?;
            json_patch::patch(&mut out, &p).map_err(|e| {
                ApiError::invalid(
                    kind,
                    group,
                    meta_str(old, "name"),
                    format!("the server rejected our request due to an error in our request: {e}"),
                    vec![],
                )
            })?;
        }
        _ => {
            if !patch.is_object() {
                return Err(ApiError::bad_request("the patch must be a JSON object"));
            }
            json_patch::merge(&mut out, patch);
        }
    }
    // An unchanged resourceVersion makes the write unconditional; a different one must match.
    if meta_str(&out, "resourceVersion") == meta_str(old, "resourceVersion")
        && let Some(m) = out.get_mut("metadata").and_then(Value::as_object_mut)
    {
        m.insert("resourceVersion".into(), json!(""));
    }
    Ok(out)
}

/// PATCH of one object (main resource or `status`).
pub async fn patch(st: &State, rr: &ResourceReq, ctype: &str, body: &[u8]) -> ApiResult<Response<Body>> {
    let def = &rr.def;
    match ctype {
        "application/apply-patch+yaml" => return apply::apply(st, rr, body).await,
        "application/merge-patch+json" | "application/json-patch+json" => {}
        "application/strategic-merge-patch+json" if !def.custom => {}
        other => return Err(ApiError::unsupported_media(other)),
    }
    rr.decoding()?;
    let mut p = parse_body(body)?;
    if ctype == "application/strategic-merge-patch+json" {
        strip_directives(&mut p);
    }
    let owner = Ownership::Update {
        manager: rr.manager(),
    };
    let v = write_object(st, rr, &owner, |old| {
        apply_patch(old, ctype, &p, &def.kind, &def.group)
    })
    .await?;
    Ok(json_response(200, &v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn merge_and_json_patch() {
        let old = json!({"metadata": {"name": "a", "resourceVersion": "5"}, "data": {"a": "1", "b": "2"}});
        let m = apply_patch(
            &old,
            "application/merge-patch+json",
            &json!({"data": {"b": null, "c": "3"}}),
            "K",
            "",
        )
        .unwrap();
        assert_eq!(m["data"], json!({"a": "1", "c": "3"}));
        assert_eq!(m["metadata"]["resourceVersion"], "");
        let j = apply_patch(
            &old,
            "application/json-patch+json",
            &json!([{"op": "replace", "path": "/data/a", "value": "9"}]),
            "K",
            "",
        )
        .unwrap();
        assert_eq!(j["data"]["a"], "9");
        assert!(
            apply_patch(
                &old,
                "application/json-patch+json",
                &json!([{"op": "test", "path": "/data/a", "value": "x"}]),
                "K",
                ""
            )
            .is_err()
        );
    }
}
