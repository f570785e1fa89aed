//! OpenAPI schemas of the built-in kinds, taken from k8s-openapi's `schemars` descriptions (the
//! same OpenAPI the real server publishes), with sub-schemas inlined and the list/map types the
//! server's field manager uses (`ObjectReference` is atomic). They drive pruning of unknown
//! fields, `fieldValidation`, typed server-side apply and managed fields for built-in kinds, and
//! are published under `/openapi/v3`.

use k8s_openapi::schemars::JsonSchema;
use k8s_openapi::schemars::generate::SchemaSettings;
use serde_json::{Value, json};

/// Replaces the remaining `$ref`s (recursive types) with "anything" and drops schema-document
/// keywords.
fn clean(v: &mut Value) {
    match v {
        Value::Object(m) => {
            if m.contains_key("$ref") {
                m.clear();
                m.insert("x-kubernetes-preserve-unknown-fields".into(), json!(true));
                return;
            }
            m.remove("$schema");
            m.remove("$defs");
            m.remove("definitions");
            m.remove("title");
            m.values_mut().for_each(clean);
        }
        Value::Array(a) => a.iter_mut().for_each(clean),
        _ => {}
    }
}

/// The inlined OpenAPI schema of a k8s-openapi type.
pub fn schema_of<T: JsonSchema>() -> Value {
    let generator = SchemaSettings::draft07()
        .with(|s| {
            s.inline_subschemas = true;
            s.meta_schema = None;
        })
        .into_generator();
    let mut v = generator.into_root_schema_for::<T>().to_value();
    clean(&mut v);
    v
}

fn mark_atomic(schema: &mut Value, props: &[&str]) {
    for p in props {
        if let Some(m) = schema
            .pointer_mut(&format!("/properties/{p}"))
            .and_then(Value::as_object_mut)
        {
            m.insert("x-kubernetes-map-type".into(), json!("atomic"));
        }
    }
}

fn crd_schema() -> Value {
    let anything = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
    json!({
        "description": "CustomResourceDefinition represents a resource that should be exposed on the API server.  Its name MUST be in the format <.spec.name>.<.spec.group>.",
        "type": "object",
        "required": ["spec"],
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": anything,
            "status": anything,
        }
    })
}

/// The OpenAPI schema of a built-in kind (`group`, `plural`), if this server serves it.
pub fn schema(group: &str, plural: &str) -> Option<Value> {
    use k8s_openapi::api::{coordination, core, events, rbac};
    let mut s = match (group, plural) {
        ("", "configmaps") => schema_of::<core::v1::ConfigMap>(),
        ("", "secrets") => schema_of::<core::v1::Secret>(),
        ("", "namespaces") => schema_of::<core::v1::Namespace>(),
        ("", "serviceaccounts") => schema_of::<core::v1::ServiceAccount>(),
        ("rbac.authorization.k8s.io", "clusterroles") => schema_of::<rbac::v1::ClusterRole>(),
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            let mut s = schema_of::<rbac::v1::ClusterRoleBinding>();
            mark_atomic(&mut s, &["roleRef"]);
            s
        }
        ("", "events") => {
            let mut s = schema_of::<core::v1::Event>();
            mark_atomic(&mut s, &["involvedObject", "related"]);
            s
        }
        ("events.k8s.io", "events") => {
            let mut s = schema_of::<events::v1::Event>();
            mark_atomic(&mut s, &["regarding", "related"]);
            s
        }
        ("coordination.k8s.io", "leases") => schema_of::<coordination::v1::Lease>(),
        ("apiextensions.k8s.io", "customresourcedefinitions") => crd_schema(),
        _ => return None,
    };
    if let Some(m) = s.as_object_mut() {
        // ObjectMeta is typed by the schema engine itself.
        if let Some(p) = m.get_mut("properties").and_then(Value::as_object_mut) {
            p.insert("metadata".into(), json!({"type": "object"}));
        }
        m.remove("required");
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtin_schemas_compile_and_know_their_fields() {
        for (g, p) in [
            ("", "configmaps"),
            ("", "secrets"),
            ("", "namespaces"),
            ("", "serviceaccounts"),
            ("rbac.authorization.k8s.io", "clusterroles"),
            ("rbac.authorization.k8s.io", "clusterrolebindings"),
            ("", "events"),
            ("events.k8s.io", "events"),
            ("coordination.k8s.io", "leases"),
            ("apiextensions.k8s.io", "customresourcedefinitions"),
        ] {
            let s = schema(g, p).unwrap();
            let compiled = crd_schema::Schema::from_openapi(&s).unwrap();
            let mut obj = json!({"apiVersion": "v1", "kind": "X", "metadata": {"name": "a"}, "bogus": 1});
            assert_eq!(compiled.prune_reporting_unknown(&mut obj), ["bogus"], "{g}/{p}");
        }
        let cm = crd_schema::Schema::from_openapi(&schema("", "configmaps").unwrap()).unwrap();
        assert_eq!(
            cm.check_typed(&json!({"data": {"a": 1}})),
            Err(".data.a: expected string, got &value.valueUnstructured{Value:1}".into())
        );
        let ev = crd_schema::Schema::from_openapi(&schema("", "events").unwrap()).unwrap();
        let set = ev.field_set(
            &json!({"involvedObject": {"kind": "ConfigMap", "name": "c"}, "source": {"component": "x"}}),
        );
        assert_eq!(
            set.to_fields_v1(),
            json!({"f:involvedObject": {}, "f:source": {"f:component": {}}})
        );
        let lease =
            crd_schema::Schema::from_openapi(&schema("coordination.k8s.io", "leases").unwrap()).unwrap();
        assert_eq!(
            lease.check_typed(&json!({"spec": {"holderIdentity": "me", "leaseDurationSeconds": 5, "renewTime": "2024-01-01T00:00:00.000000Z"}})),
            Ok(())
        );
    }
}
