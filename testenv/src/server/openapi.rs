//! OpenAPI v3: the `/openapi/v3` index and one document per group-version, like kube-apiserver's:
//! `components.schemas` holds one schema per kind (`io.x-k8s.cluster.ipam.v1alpha2.InClusterIPPool`
//! — reversed group, version, kind — with `x-kubernetes-group-version-kind` and the CRD version's
//! schema, or the built-in kind's), its list kind and the `meta/v1` types they refer to; `paths`
//! list the operations, with the `fieldValidation` parameter `kubectl apply` looks for.
//! `/openapi/v2` is not served (kubectl falls back to its compiled-in schemas).

use hyper::Response;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use serde_json::{Map, Value, json};

use super::builtin_schemas;
use super::crds::ResourceDef;
use super::status::{ApiError, ApiResult};
use super::{Body, State, json_response};

const META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1";

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

/// The component name of a kind: `io.k8s.api.core.v1.ConfigMap` for built-ins, reversed group
/// + version + kind for custom resources.
pub fn schema_name(def: &ResourceDef, version: &str, kind: &str) -> String {
    if !def.custom {
        let pkg = match def.group.as_str() {
            "" => "io.k8s.api.core".to_string(),
            "apiextensions.k8s.io" => "io.k8s.apiextensions-apiserver.pkg.apis.apiextensions".to_string(),
            g => format!("io.k8s.api.{}", g.split('.').next().unwrap_or_default()),
        };
        return format!("{pkg}.{version}.{kind}");
    }
    let reversed: Vec<&str> = def.group.split('.').rev().collect();
    format!("{}.{version}.{kind}", reversed.join("."))
}

fn meta_ref(name: &str, description: &str) -> Value {
    json!({"description": description, "allOf": [{"$ref": format!("#/components/schemas/{META}.{name}")}]})
}

fn kind_schema(def: &ResourceDef, group: &str, version: &str) -> Value {
    let raw = def
        .version(version)
        .and_then(|v| v.raw_schema.clone())
        .or_else(|| builtin_schemas::schema(&def.group, &def.plural))
        .unwrap_or_else(|| json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}));
    let mut s = raw;
    if let Some(m) = s.as_object_mut() {
        let props = m
            .entry("properties")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .map(std::mem::take)
            .unwrap_or_default();
        let mut props = props;
        props.insert(
            "apiVersion".into(),
            json!({"description": "APIVersion defines the versioned schema of this representation of an object.", "type": "string"}),
        );
        props.insert(
            "kind".into(),
            json!({"description": "Kind is a string value representing the REST resource this object represents.", "type": "string"}),
        );
        props.insert(
            "metadata".into(),
            meta_ref("ObjectMeta", "Standard object's metadata."),
        );
        m.insert("properties".into(), Value::Object(props));
        m.insert(
            "x-kubernetes-group-version-kind".into(),
            json!([{"group": group, "kind": def.kind, "version": version}]),
        );
    }
    s
}

fn list_schema(def: &ResourceDef, group: &str, version: &str) -> Value {
    json!({
        "description": format!("{} is a list of {}", def.list_kind, def.kind),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {"type": "string"},
            "items": {"type": "array", "items": {"$ref": format!("#/components/schemas/{}", schema_name(def, version, &def.kind))}},
            "kind": {"type": "string"},
            "metadata": meta_ref("ListMeta", "Standard list metadata."),
        },
        "x-kubernetes-group-version-kind": [{"group": group, "kind": def.list_kind, "version": version}],
    })
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

fn query_param(n: &str) -> Value {
    json!({"name": n, "in": "query", "schema": {"type": "string", "uniqueItems": true}})
}

fn operations(def: &ResourceDef, group: &str, version: &str, paths: &mut Map<String, Value>) {
    let base = prefix(group, version);
    let collection = if def.namespaced {
        format!("/{base}/namespaces/{{namespace}}/{}", def.plural)
    } else {
        format!("/{base}/{}", def.plural)
    };
    let item = format!("{collection}/{{name}}");
    let gvk = json!({"group": group, "version": version, "kind": def.kind});
    let obj_ref = json!({"$ref": format!("#/components/schemas/{}", schema_name(def, version, &def.kind))});
    let list_ref =
        json!({"$ref": format!("#/components/schemas/{}", schema_name(def, version, &def.list_kind))});
    let ok = |schema: &Value| json!({"200": {"description": "OK", "content": {"application/json": {"schema": schema}}}});
    let op = |action: &str, verb: &str, params: Vec<Value>, schema: &Value| {
        json!({
            "operationId": format!("{verb}{}", def.kind),
            "parameters": params,
            "responses": ok(schema),
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": gvk,
        })
    };
    let write = || {
        vec![
            query_param("dryRun"),
            query_param("fieldManager"),
            query_param("fieldValidation"),
        ]
    };
    let mut patch_params = write();
    patch_params.push(query_param("force"));
    paths.insert(
        collection,
        json!({
            "get": op("list", "list", vec![query_param("labelSelector"), query_param("fieldSelector")], &list_ref),
            "post": op("post", "create", write(), &obj_ref),
        }),
    );
    paths.insert(
        item.clone(),
        json!({
            "get": op("get", "read", vec![], &obj_ref),
            "put": op("put", "replace", write(), &obj_ref),
            "patch": op("patch", "patch", patch_params.clone(), &obj_ref),
            "delete": op("delete", "delete", vec![query_param("dryRun")], &obj_ref),
        }),
    );
    if def.has_status(version) {
        paths.insert(
            format!("{item}/status"),
            json!({
                "get": op("get", "read", vec![], &obj_ref),
                "put": op("put", "replace", write(), &obj_ref),
                "patch": op("patch", "patch", patch_params, &obj_ref),
            }),
        );
    }
}

/// `GET /openapi/v3/api/v1` and `/openapi/v3/apis/{group}/{version}`.
pub fn document(st: &State, group: &str, version: &str) -> ApiResult<Response<Body>> {
    let mut paths = Map::new();
    let mut schemas = Map::new();
    for d in st.registry().all() {
        if d.group != group || !d.version(version).is_some_and(|v| v.served) {
            continue;
        }
        operations(d, group, version, &mut paths);
        schemas.insert(schema_name(d, version, &d.kind), kind_schema(d, group, version));
        schemas.insert(
            schema_name(d, version, &d.list_kind),
            list_schema(d, group, version),
        );
    }
    if paths.is_empty() {
        return Err(ApiError::no_route());
    }
    schemas.insert(
        format!("{META}.ObjectMeta"),
        builtin_schemas::schema_of::<meta::ObjectMeta>(),
    );
    schemas.insert(
        format!("{META}.ListMeta"),
        builtin_schemas::schema_of::<meta::ListMeta>(),
    );
    Ok(json_response(
        200,
        &json!({
            "openapi": "3.0.0",
            "info": {"title": "Kubernetes", "version": "v1.33.0"},
            "paths": Value::Object(paths),
            "components": {"schemas": schemas},
        }),
    ))
}
