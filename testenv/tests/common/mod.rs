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
