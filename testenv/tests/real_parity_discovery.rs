//! Discovery and OpenAPI as kubectl and the product read them, checked the same way against the
//! in-tree server and real kube-apiserver: aggregated discovery (`apidiscovery.k8s.io/v2`), legacy
//! discovery verbs, and `/openapi/v3` documents publishing one schema per kind.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;

use common::*;
use serde_json::{Value, json};

const AGGREGATED: &str =
    "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,application/json";

fn strings(v: &Value) -> BTreeSet<String> {
    v.as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|x| x.as_str().map(str::to_string))
        .collect()
}

fn set(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn aggregated_discovery() {
    let env = env().await;
    env.install_crds(vec![part_crd("parts", "Part", true)])
        .await
        .unwrap();
    let c = env.client();
    let r = send(&c, "GET", "/apis", "", None, &[("accept", AGGREGATED)]).await;
    assert_eq!(r.code, 200);
    assert_eq!(
        r.content_type,
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
    );
    assert_eq!(
        (&r.body["kind"], &r.body["apiVersion"]),
        (&json!("APIGroupDiscoveryList"), &json!("apidiscovery.k8s.io/v2"))
    );
    let items = r.body["items"].as_array().unwrap();
    let group = items
        .iter()
        .find(|g| g["metadata"]["name"] == GROUP)
        .expect("the CRD's group");
    let v1 = &group["versions"][0];
    assert_eq!(
        (&v1["version"], &v1["freshness"]),
        (&json!("v1"), &json!("Current"))
    );
    let part = v1["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "parts")
        .unwrap();
    assert_eq!(
        part["responseKind"],
        json!({"group": GROUP, "version": "v1", "kind": "Part"})
    );
    assert_eq!(
        (&part["scope"], &part["singularResource"]),
        (&json!("Namespaced"), &json!("part"))
    );
    assert_eq!(
        strings(&part["verbs"]),
        set(&[
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch"
        ])
    );
    assert_eq!(part["shortNames"], json!(["pax"]));
    assert_eq!(part["categories"], json!(["testenv"]));
    assert_eq!(
        part["subresources"],
        json!([{"subresource": "status", "responseKind": {"group": GROUP, "version": "v1", "kind": "Part"},
            "verbs": ["get", "patch", "update"]}])
    );
    let coord = items
        .iter()
        .find(|g| g["metadata"]["name"] == "coordination.k8s.io")
        .unwrap();
    let lease = &coord["versions"][0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["resource"] == "leases")
        .unwrap()
        .clone();
    assert_eq!(
        lease["responseKind"],
        json!({"group": "", "version": "", "kind": "Lease"})
    );

    // The core group.
    let r = send(&c, "GET", "/api", "", None, &[("accept", AGGREGATED)]).await;
    let core = &r.body["items"][0]["versions"][0];
    assert_eq!(core["version"], "v1");
    let find = |name: &str| {
        core["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["resource"] == name)
            .unwrap()
            .clone()
    };
    let cm = find("configmaps");
    assert_eq!(
        cm["responseKind"],
        json!({"group": "", "version": "", "kind": "ConfigMap"})
    );
    assert_eq!(cm["shortNames"], json!(["cm"]));
    let ns = find("namespaces");
    assert_eq!(ns["scope"], "Cluster");
    assert!(!strings(&ns["verbs"]).contains("deletecollection"));
    let subs: BTreeSet<String> = ns["subresources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["subresource"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(subs, set(&["finalize", "status"]));

    // Legacy discovery is still there for clients that ask for plain JSON.
    let r = send(&c, "GET", "/apis", "", None, &[("accept", "application/json")]).await;
    assert_eq!(r.body["kind"], "APIGroupList");
    let legacy = c.list_core_api_resources("v1").await.unwrap();
    let nsr = legacy.resources.iter().find(|r| r.name == "namespaces").unwrap();
    assert!(!nsr.verbs.iter().any(|v| v == "deletecollection"));
}

#[tokio::test]
async fn openapi_v3_publishes_one_schema_per_kind() {
    let env = env().await;
    env.install_crds(vec![part_crd("parts", "Part", true)])
        .await
        .unwrap();
    let c = env.client();
    // kube-apiserver publishes a new CRD's document a moment after the CRD is established.
    let reversed: Vec<&str> = GROUP.split('.').rev().collect();
    let key = format!("{}.v1.Part", reversed.join("."));
    let doc = wait_for(60, "the CRD's OpenAPI document", || {
        let (c, key) = (c.clone(), key.clone());
        async move {
            let index = send(&c, "GET", "/openapi/v3", "", None, &[]).await;
            let url = index.body["paths"][format!("apis/{GROUP}/v1")]["serverRelativeURL"]
                .as_str()?
                .to_string();
            let doc = send(&c, "GET", &url, "", None, &[]).await;
            doc.body["components"]["schemas"]
                .get(&key)
                .is_some()
                .then_some(doc)
        }
    })
    .await;
    assert_eq!(doc.code, 200);
    let schemas = doc.body["components"]["schemas"].as_object().unwrap();
    // Reversed group, version, kind.
    let part = schemas
        .get(&key)
        .unwrap_or_else(|| panic!("{key} in {:?}", schemas.keys()));
    assert_eq!(
        part["x-kubernetes-group-version-kind"],
        json!([{"group": GROUP, "kind": "Part", "version": "v1"}])
    );
    let spec_fields: BTreeSet<String> = part["properties"]["spec"]["properties"]
        .as_object()
        .unwrap()
        .keys()
        .cloned()
        .collect();
    assert_eq!(spec_fields, set(&["items", "name", "size", "tags"]));
    assert_eq!(
        part["properties"]["spec"]["properties"]["size"]["type"],
        "integer"
    );
    // Every kind carrying a group-version-kind is found the way the product looks for one.
    let by_gvk = schemas.values().find(|s| {
        s["x-kubernetes-group-version-kind"]
            .as_array()
            .is_some_and(|l| l.iter().any(|g| g["kind"] == "Part" && g["group"] == GROUP))
    });
    assert!(by_gvk.is_some());
    // PATCH carries the fieldValidation parameter (what kubectl apply checks).
    let path = format!("/apis/{GROUP}/v1/namespaces/{{namespace}}/parts/{{name}}");
    let params = &doc.body["paths"][&path]["patch"]["parameters"];
    assert!(
        params
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p["name"] == "fieldValidation"),
        "{params}"
    );
    // Built-in kinds.
    let core = send(&c, "GET", "/openapi/v3/api/v1", "", None, &[]).await;
    let cm = &core.body["components"]["schemas"]["io.k8s.api.core.v1.ConfigMap"];
    assert_eq!(
        cm["x-kubernetes-group-version-kind"],
        json!([{"group": "", "kind": "ConfigMap", "version": "v1"}])
    );
    assert_eq!(cm["properties"]["data"]["type"], "object");
}
