//! Aggregated discovery (`apidiscovery.k8s.io/v2`, and `v2beta1`, as kube-apiserver 1.32 serves
//! both): `/api` and `/apis` answer an `APIGroupDiscoveryList` when the client asks for it in
//! `Accept` (kubectl 1.32 does), with every served resource, its scope, verbs, short names,
//! categories and subresources.

use std::collections::BTreeMap;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::Response;
use serde_json::{Value, json};

use super::crds::{ResourceDef, version_priority};
use super::status::ApiError;
use super::{Body, State};

const MEDIA: &str = "g=apidiscovery.k8s.io;v=";

/// The aggregated-discovery version the client asks for first (`v2` or `v2beta1`), if any.
pub fn requested(accept: &str) -> Option<&'static str> {
    for part in accept.split(',') {
        if !part.contains("as=APIGroupDiscoveryList") {
            continue;
        }
        if part.contains(&format!("{MEDIA}v2;")) || part.ends_with(&format!("{MEDIA}v2")) {
            return Some("v2");
        }
        if part.contains(&format!("{MEDIA}v2beta1")) {
            return Some("v2beta1");
        }
    }
    None
}

/// Whether the client accepts only aggregated discovery (then group documents are 406).
pub fn only_aggregated(accept: &str) -> bool {
    requested(accept).is_some()
        && !accept.split(',').any(|p| {
            let p = p.trim();
            p == "application/json" || p == "*/*" || p.starts_with("application/json;q=")
        })
}

/// 406 for a document the client cannot accept.
pub fn not_acceptable() -> ApiError {
    ApiError {
        code: 406,
        reason: "NotAcceptable",
        message: "only the following media types are accepted: application/json, application/yaml, application/vnd.kubernetes.protobuf".into(),
        details: None,
    }
}

fn response(v: &Value, version: &str) -> Response<Body> {
    let body = serde_json::to_vec(v).unwrap_or_default();
    Response::builder()
        .status(200)
        .header(
            "content-type",
            format!("application/json;{MEDIA}{version};as=APIGroupDiscoveryList"),
        )
        .header("vary", "Accept")
        .body(Full::new(Bytes::from(body)).boxed_unsync())
        .unwrap_or_else(|_| Response::new(Full::new(Bytes::new()).boxed_unsync()))
}

fn resource(d: &ResourceDef, version: &str) -> Value {
    let rk = if d.custom {
        json!({"group": d.group, "version": version, "kind": d.kind})
    } else {
        json!({"group": "", "version": "", "kind": d.kind})
    };
    let verbs: Vec<&str> = if d.custom {
        vec![
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "create",
            "update",
            "watch",
        ]
    } else {
        d.verbs()
    };
    let mut r = json!({
        "resource": d.plural,
        "responseKind": rk,
        "scope": if d.namespaced { "Namespaced" } else { "Cluster" },
        "singularResource": d.singular,
        "verbs": verbs,
    });
    if !d.short_names.is_empty() {
        r["shortNames"] = json!(d.short_names);
    }
    if !d.categories.is_empty() {
        r["categories"] = json!(d.categories);
    } else if d.plural == "customresourcedefinitions" {
        r["categories"] = json!(["api-extensions"]);
    }
    let mut subs = Vec::new();
    if d.plural == "namespaces" && d.group.is_empty() {
        subs.push(json!({"subresource": "finalize", "responseKind": rk, "verbs": ["update"]}));
    }
    if d.has_status(version) {
        subs.push(json!({"subresource": "status", "responseKind": rk, "verbs": ["get", "patch", "update"]}));
    }
    if !subs.is_empty() {
        r["subresources"] = json!(subs);
    }
    r
}

fn group_item(name: Option<&str>, versions: Vec<(String, Vec<Value>)>) -> Value {
    let mut meta = json!({"creationTimestamp": null});
    if let Some(n) = name {
        meta["name"] = json!(n);
    }
    let vs: Vec<Value> = versions
        .into_iter()
        .map(|(v, mut rs)| {
            rs.sort_by(|a, b| a["resource"].as_str().cmp(&b["resource"].as_str()));
            json!({"version": v, "resources": rs, "freshness": "Current"})
        })
        .collect();
    json!({"metadata": meta, "versions": vs})
}

fn list(items: Vec<Value>, version: &str) -> Value {
    json!({"kind": "APIGroupDiscoveryList", "apiVersion": format!("apidiscovery.k8s.io/{version}"),
           "metadata": {}, "items": items})
}

/// `/api` as an `APIGroupDiscoveryList` (the core group).
pub fn core(st: &State, version: &str) -> Response<Body> {
    let rs: Vec<Value> = st
        .registry()
        .all()
        .iter()
        .filter(|d| d.group.is_empty())
        .map(|d| resource(d, "v1"))
        .collect();
    response(
        &list(vec![group_item(None, vec![("v1".into(), rs)])], version),
        version,
    )
}

/// `/apis` as an `APIGroupDiscoveryList`: built-in groups first, then CRD groups by name.
pub fn groups(st: &State, version: &str) -> Response<Body> {
    let mut by_group: BTreeMap<(bool, String), BTreeMap<String, Vec<Value>>> = BTreeMap::new();
    for d in st.registry().all() {
        if d.group.is_empty() {
            continue;
        }
        for v in d.versions.iter().filter(|v| v.served) {
            by_group
                .entry((d.custom, d.group.clone()))
                .or_default()
                .entry(v.name.clone())
                .or_default()
                .push(resource(d, &v.name));
        }
    }
    let items: Vec<Value> = by_group
        .into_iter()
        .map(|((_, g), versions)| {
            let mut vs: Vec<(String, Vec<Value>)> = versions.into_iter().collect();
            vs.sort_by_key(|(v, _)| std::cmp::Reverse(version_priority(v)));
            group_item(Some(&g), vs)
        })
        .collect();
    response(&list(items, version), version)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accept_negotiation() {
        let kubectl = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";
        assert_eq!(requested(kubectl), Some("v2"));
        assert!(!only_aggregated(kubectl));
        assert_eq!(
            requested("application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"),
            Some("v2beta1")
        );
        assert!(only_aggregated(
            "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
        ));
        assert_eq!(requested("application/json"), None);
    }
}
