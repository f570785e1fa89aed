//! A minimal OpenAPI v3 surface: the `/openapi/v3` index and one document per group-version listing a
//! PATCH operation (with the `fieldValidation` query parameter) per kind. This is what `kubectl apply`
//! consults to decide that the server validates fields itself; no schemas are published.

use hyper::Response;
use serde_json::{Map, Value, json};

use super::status::{ApiError, ApiResult};
use super::{Body, State, json_response};

fn group_versions(st: &State) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for d in st.registry().all() {
        for v in d.versions.iter().filter(|v| v.served) {
            let gv = (d.group.clone(), v.name.clone());
            if !out.contains(&gv) {
                out.push(gv);
            }
        }
    }
    out.sort();
    out
}

fn prefix(group: &str, version: &str) -> String {
    if group.is_empty() {
        format!("api/{version}")
    } else {
        format!("apis/{group}/{version}")
    }
}

/// `GET /openapi/v3`.
pub fn index(st: &State) -> Response<Body> {
    let mut paths = Map::new();
    for (g, v) in group_versions(st) {
        let p = prefix(&g, &v);
        paths.insert(
            p.clone(),
            json!({"serverRelativeURL": format!("/openapi/v3/{p}?hash={}", st.store.current_rv())}),
        );
    }
    json_response(200, &json!({"paths": paths}))
}

/// `GET /openapi/v3/api/v1` and `/openapi/v3/apis/{group}/{version}`.
pub fn document(st: &State, group: &str, version: &str) -> ApiResult<Response<Body>> {
    let mut paths = Map::new();
    for d in st.registry().all() {
        if d.group != group || !d.version(version).is_some_and(|v| v.served) {
            continue;
        }
        let base = prefix(group, version);
        let path = if d.namespaced {
            format!("/{base}/namespaces/{{namespace}}/{}/{{name}}", d.plural)
        } else {
            format!("/{base}/{}/{{name}}", d.plural)
        };
        let gvk = json!({"group": group, "version": version, "kind": d.kind});
        let param =
            |n: &str| json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}});
        paths.insert(
            path,
            json!({
                "patch": {
                    "operationId": format!("patch{}", d.kind),
                    "parameters": [param("dryRun"), param("fieldManager"), param("fieldValidation"), param("force")],
                    "responses": {"200": {"description": "OK"}},
                    "x-kubernetes-action": "patch",
                    "x-kubernetes-group-version-kind": gvk,
                }
            }),
        );
    }
    if paths.is_empty() {
        return Err(ApiError::no_route());
    }
    Ok(json_response(
        200,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": Value::Object(paths),
            "components": {"schemas": {}},
        }),
    ))
}
