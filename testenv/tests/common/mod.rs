//! Helpers shared by the integration tests.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use k8s_openapi::api::core::v1::Namespace;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::{Value, json};
use testenv::TestEnv;

/// Group of the test CRD.
pub const GROUP: &str = "example.testenv.io";

/// Starts a control plane (real binaries when configured).
pub async fn env() -> TestEnv {
    TestEnv::start().await.expect("control plane starts")
}

/// Creates a fresh namespace and returns its name.
pub async fn namespace(client: &kube::Client) -> String {
    let name = format!(
        "t-{}",
        uuid::Uuid::new_v4().simple().to_string().get(..10).unwrap()
    );
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

/// Polls `f` until it returns `Some`, failing after `secs` seconds.
#[allow(unused_imports)]
pub use testenv::wait_for;

fn widget_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                    "label": {"type": "string", "maxLength": 5, "pattern": "^[a-z]+$"},
                    "tags": {"type": "array", "maxItems": 2, "items": {"type": "string"}},
                },
                "x-kubernetes-validations": [{"rule": "self.size != 7", "message": "size must not be 7"}],
            },
            "status": {"type": "object", "properties": {"phase": {"type": "string"}, "count": {"type": "integer"}}},
        },
    })
}

/// The `widgets.example.testenv.io` CRD: namespaced, versions v1alpha1 (served) and v1 (storage),
/// status subresource, defaults, enum, bounds, pattern, list size and a CEL rule.
pub fn widget_crd() -> CustomResourceDefinition {
    let version = |name: &str, storage: bool| {
        json!({
            "name": name, "served": true, "storage": storage,
            "schema": {"openAPIV3Schema": widget_schema()},
            "subresources": {"status": {}},
            "additionalPrinterColumns": [
                {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            ],
        })
    };
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("widgets.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]},
            "versions": [version("v1alpha1", false), version("v1", true)],
        }
    }))
    .unwrap()
}

/// The `gadgets.example.testenv.io` CRD: cluster-scoped, one version, no status subresource.
pub fn gadget_crd() -> CustomResourceDefinition {
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("gadgets.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Cluster",
            "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}],
        }
    }))
    .unwrap()
}

/// ApiResource of Widget at `version`.
pub fn widget_ar(version: &str) -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: "Widget".into(),
        plural: "widgets".into(),
    }
}

/// ApiResource of Gadget.
pub fn gadget_ar() -> ApiResource {
    ApiResource {
        group: GROUP.into(),
        version: "v1".into(),
        api_version: format!("{GROUP}/v1"),
        kind: "Gadget".into(),
        plural: "gadgets".into(),
    }
}

/// Api for widgets in `ns` at `version`.
pub fn widgets(client: &kube::Client, ns: &str, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &widget_ar(version))
}

/// A Widget object.
pub fn widget(name: &str, version: &str, spec: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": format!("{GROUP}/{version}"),
        "kind": "Widget",
        "metadata": {"name": name},
        "spec": spec,
    }))
    .unwrap()
}

/// Installs the test CRDs.
pub async fn install_test_crds(env: &TestEnv) {
    env.install_crds(vec![widget_crd(), gadget_crd()])
        .await
        .expect("CRDs install");
}

/// The API error of a failed call.
pub fn api_err<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// Path to the shared compat folder (`../shared/compat` from the repo root).
pub fn compat(sub: &str) -> std::path::PathBuf {
    std::path::PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../shared/compat")).join(sub)
}

/// A raw answer: status code, `Warning` header values and the JSON body.
#[derive(Debug)]
pub struct Raw {
    /// HTTP status code.
    pub code: u16,
    /// `Warning` headers.
    pub warnings: Vec<String>,
    /// `Content-Type` header.
    pub content_type: String,
    /// Body (JSON, or `Null` when it is not JSON).
    pub body: Value,
}

/// Sends a raw request (any method, content type and headers) and returns the full answer.
pub async fn send(
    client: &kube::Client,
    method: &str,
    path: &str,
    content_type: &str,
    body: Option<&Value>,
    headers: &[(&str, &str)],
) -> Raw {
    let mut b = http::Request::builder().method(method).uri(path);
    if body.is_some() {
        b = b.header("content-type", content_type);
    }
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let bytes = body.map(|v| serde_json::to_vec(v).unwrap()).unwrap_or_default();
    let resp = client
        .send(b.body(kube::client::Body::from(bytes)).unwrap())
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_string())
        .collect();
    let content_type = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let raw = resp.into_body().collect_bytes().await.unwrap();
    let body = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    Raw {
        code,
        warnings,
        content_type,
        body,
    }
}

/// A namespaced CRD `<plural>.example.testenv.io` with a structural schema: `spec.size`
/// (integer), `spec.name` (string, immutable by a CEL transition rule), `spec.items` (a `map`
/// list keyed by `name`), `spec.tags` (atomic list), `status.phase`; the status subresource when
/// `status` is true.
pub fn part_crd(plural: &str, kind: &str, status: bool) -> CustomResourceDefinition {
    let mut version = json!({
        "name": "v1", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object", "properties": {
            "spec": {"type": "object", "properties": {
                "size": {"type": "integer"},
                "name": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "name is immutable"}]},
                "items": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "value": {"type": "string"}}}},
                "tags": {"type": "array", "items": {"type": "string"}},
            }},
            "status": {"type": "object", "properties": {"phase": {"type": "string"}}},
        }}},
    });
    if status {
        version["subresources"] = json!({"status": {}});
    }
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{plural}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind, "shortNames": [format!("{}x", &plural[..2])], "categories": ["testenv"]},
            "versions": [version],
        }
    }))
    .unwrap()
}

/// Plural of the parity tests' CRD with the status subresource.
pub const PARTS: &str = "parts";
/// Plural of the parity tests' CRD without it.
pub const PLAIN: &str = "plainparts";

/// A control plane with the `parts` and `plainparts` CRDs and a fresh namespace.
pub async fn parity_setup() -> (testenv::TestEnv, kube::Client, String) {
    let env = env().await;
    env.install_crds(vec![
        part_crd(PARTS, "Part", true),
        part_crd(PLAIN, "PlainPart", false),
    ])
    .await
    .unwrap();
    let c = env.client();
    let ns = namespace(&c).await;
    (env, c, ns)
}

/// The collection path of a custom resource in `ns`.
pub fn coll(ns: &str, plural: &str) -> String {
    format!("/apis/{GROUP}/v1/namespaces/{ns}/{plural}")
}

/// A custom resource object of the test group.
pub fn obj(kind: &str, name: &str, spec: Value) -> Value {
    json!({"apiVersion": format!("{GROUP}/v1"), "kind": kind, "metadata": {"name": name}, "spec": spec})
}

/// The causes of a `Status` answer as (field, reason, message).
pub fn causes(r: &Raw) -> Vec<(String, String, String)> {
    r.body["details"]["causes"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|c| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("field"), s("reason"), s("message"))
        })
        .collect()
}

/// The `message` of a `Status` answer.
pub fn msg(r: &Raw) -> &str {
    r.body["message"].as_str().unwrap_or_default()
}
