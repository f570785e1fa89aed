//! Discovery documents: `/version`, `/api`, `/api/v1`, `/apis`, `/apis/{group}`, `/apis/{group}/{version}`.
//!
//! Only legacy (unaggregated) discovery is served; clients asking for aggregated discovery fall back
//! to it because the response is plain `application/json`.

use std::collections::BTreeMap;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Response;
use serde_json::{Value, json};

use super::crds::version_priority;
use super::status::{ApiError, ApiResult};
use super::{Body, State, json_response};

/// A plain-text response.
pub fn text(s: &str) -> Response<Body> {
    Response::builder()
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from(s.to_string())).boxed_unsync())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed_unsync()))
}

/// The plain-text 404 of paths outside the API (`404 page not found`).
pub fn page_not_found() -> Response<Body> {
    Response::builder()
        .status(404)
        .header("content-type", "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from_static(b"404 page not found\n")).boxed_unsync())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed_unsync()))
}

/// `/version`.
pub fn version() -> Response<Body> {
    json_response(
        200,
        &json!({
            "major": "1",
            "minor": "33",
            "gitVersion": "v1.33.0-testenv",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2025-01-01T00:00:00Z",
            "goVersion": "go1.24",
            "compiler": "gc",
            "platform": "linux/amd64",
        }),
    )
}

/// `/api`.
pub fn core_versions(st: &State) -> Response<Body> {
    json_response(
        200,
        &json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": st.addr.to_string()}],
        }),
    )
}

/// Served versions per group, each list ordered by preference.
fn group_versions(st: &State) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for d in st.registry().all() {
        if d.group.is_empty() {
            continue;
        }
        let e = out.entry(d.group.clone()).or_default();
        for v in d.versions.iter().filter(|v| v.served) {
            if !e.contains(&v.name) {
                e.push(v.name.clone());
            }
        }
    }
    for vs in out.values_mut() {
        vs.sort_by_key(|v| std::cmp::Reverse(version_priority(v)));
    }
    out.retain(|_, v| !v.is_empty());
    out
}

fn group_doc(name: &str, versions: &[String]) -> Value {
    let vs: Vec<Value> = versions
        .iter()
        .map(|v| json!({"groupVersion": format!("{name}/{v}"), "version": v}))
        .collect();
    json!({
        "name": name,
        "versions": vs,
        "preferredVersion": vs.first().cloned().unwrap_or(Value::Null),
    })
}

/// `/apis`.
pub fn groups(st: &State) -> Response<Body> {
    let groups: Vec<Value> = group_versions(st)
        .iter()
        .map(|(g, vs)| group_doc(g, vs))
        .collect();
    json_response(
        200,
        &json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}),
    )
}

/// `/apis/{group}`.
pub fn group(st: &State, g: &str) -> ApiResult<Response<Body>> {
    let gv = group_versions(st);
    let vs = gv.get(g).ok_or_else(ApiError::no_route)?;
    let mut doc = group_doc(g, vs);
    doc["kind"] = json!("APIGroup");
    doc["apiVersion"] = json!("v1");
    Ok(json_response(200, &doc))
}

/// `/api/v1` and `/apis/{group}/{version}`.
pub fn resources(st: &State, g: &str, v: &str) -> ApiResult<Response<Body>> {
    let mut resources = Vec::new();
    let mut found = false;
    for d in st.registry().all() {
        if d.group != g {
            continue;
        }
        let Some(ver) = d.version(v).filter(|x| x.served) else {
            continue;
        };
        found = true;
        let mut r = json!({
            "name": d.plural,
            "singularName": d.singular,
            "namespaced": d.namespaced,
            "kind": d.kind,
            "verbs": d.verbs(),
        });
        if !d.short_names.is_empty() {
            r["shortNames"] = json!(d.short_names);
        }
        if !d.categories.is_empty() {
            r["categories"] = json!(d.categories);
        }
        if d.version(d.storage_version()).is_some() {
            r["storageVersionHash"] =
                json!(format!("{:x}", simple_hash(&format!("{}/{}", d.group, d.plural))));
        }
        resources.push(r);
        if d.plural == "namespaces" && d.group.is_empty() {
            resources.push(json!({
                "name": "namespaces/finalize",
                "singularName": "",
                "namespaced": false,
                "kind": "Namespace",
                "verbs": ["update"],
            }));
        }
        if ver.status {
            resources.push(json!({
                "name": format!("{}/status", d.plural),
                "singularName": "",
                "namespaced": d.namespaced,
                "kind": d.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    if !(found || g.is_empty() && v == "v1") {
        return Err(ApiError::no_route());
    }
    let gv = if g.is_empty() {
        v.to_string()
    } else {
        format!("{g}/{v}")
    };
    Ok(json_response(
        200,
        &json!({"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": gv, "resources": resources}),
    ))
}

fn simple_hash(s: &str) -> u64 {
    s.bytes().fold(0xcbf29ce484222325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x100000001b3)
    })
}
