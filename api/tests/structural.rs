//! Every generated schema is structural as the API server requires. Checked with the
//! `crd-schema` crate's port of the apiserver rules, plus a direct check of the traps schemars
//! can fall into (untyped nodes, typed `anyOf`/`oneOf` branches, unmarked int-or-string).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use serde_json::Value;

/// Our own walker: returns one message per node that breaks a structural rule.
fn own_violations(node: &Value, path: &str, out: &mut Vec<String>) {
    let Some(obj) = node.as_object() else {
        out.push(format!("{path}: not a schema object"));
        return;
    };
    let int_or_string = obj.get("x-kubernetes-int-or-string") == Some(&Value::Bool(true));
    let preserve = obj.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true));
    if obj.get("type").and_then(Value::as_str).is_none_or(str::is_empty) && !int_or_string && !preserve {
        out.push(format!("{path}: no type"));
    }
    for key in [
        "$ref",
        "definitions",
        "$defs",
        "patternProperties",
        "additionalItems",
        "dependencies",
    ] {
        if obj.contains_key(key) {
            out.push(format!("{path}: unsupported keyword {key}"));
        }
    }
    if obj.get("uniqueItems") == Some(&Value::Bool(true)) {
        out.push(format!("{path}: uniqueItems"));
    }
    for key in ["anyOf", "oneOf", "allOf"] {
        for (i, branch) in obj
            .get(key)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            for forbidden in [
                "type",
                "default",
                "nullable",
                "additionalProperties",
                "description",
            ] {
                if branch.get(forbidden).is_some() {
                    out.push(format!(
                        "{path}.{key}[{i}]: {forbidden} inside a value validation"
                    ));
                }
            }
        }
    }
    if let Some(props) = obj.get("properties").and_then(Value::as_object) {
        for (name, child) in props {
            own_violations(child, &format!("{path}.properties[{name}]"), out);
        }
        if obj
            .get("additionalProperties")
            .is_some_and(|a| a != &Value::Bool(false))
        {
            out.push(format!("{path}: properties and additionalProperties together"));
        }
    }
    if let Some(items) = obj.get("items") {
        own_violations(items, &format!("{path}.items"), out);
    } else if obj.get("type").and_then(Value::as_str) == Some("array") {
        out.push(format!("{path}: array without items"));
    }
    if let Some(additional @ Value::Object(_)) = obj.get("additionalProperties") {
        own_violations(additional, &format!("{path}.additionalProperties"), out);
    }
}

fn schemas() -> Vec<(String, Value)> {
    let mut out = Vec::new();
    for crd in capmox_api::crd::generated().expect("CRDs assemble") {
        for (i, version) in crd.spec.versions.iter().enumerate() {
            let schema = version
                .schema
                .as_ref()
                .and_then(|s| s.open_api_v3_schema.as_ref())
                .unwrap_or_else(|| panic!("{} {} has no schema", crd.spec.names.kind, version.name));
            out.push((
                format!("{} {} (spec.versions[{i}])", crd.spec.names.kind, version.name),
                serde_json::to_value(schema).expect("schema to JSON"),
            ));
        }
    }
    out
}

#[test]
fn generated_schemas_are_structural_per_crd_schema() {
    let mut failures = Vec::new();
    for (name, schema) in schemas() {
        for v in crd_schema::structural::check(&schema) {
            failures.push(format!("{name}: {v}"));
        }
    }
    assert!(
        failures.is_empty(),
        "non-structural schemas:\n{}",
        failures.join("\n")
    );
}

#[test]
fn generated_schemas_pass_own_structural_walk() {
    let mut failures = Vec::new();
    for (name, schema) in schemas() {
        let mut out = Vec::new();
        own_violations(&schema, "openAPIV3Schema", &mut out);
        failures.extend(out.into_iter().map(|v| format!("{name}: {v}")));
    }
    assert!(
        failures.is_empty(),
        "non-structural schemas:\n{}",
        failures.join("\n")
    );
}

#[test]
fn checkers_reject_an_untyped_untagged_enum() {
    // What schemars emits for `#[serde(untagged)] enum { Number(u16), Name(String) }` without help.
    let bad = serde_json::json!({
        "type": "object",
        "properties": {
            "port": {"anyOf": [{"type": "integer", "format": "uint16"}, {"type": "string"}]}
        }
    });
    let mut out = Vec::new();
    own_violations(&bad, "root", &mut out);
    assert!(
        out.iter().any(|v| v.contains("port") && v.contains("no type")),
        "{out:?}"
    );
    assert!(
        !crd_schema::structural::check(&bad).is_empty(),
        "crd-schema accepted an untyped node"
    );
    let good = serde_json::json!({
        "type": "object",
        "properties": {"port": {"x-kubernetes-int-or-string": true}}
    });
    let mut out = Vec::new();
    own_violations(&good, "root", &mut out);
    assert!(out.is_empty(), "{out:?}");
    assert!(crd_schema::structural::check(&good).is_empty());
}
