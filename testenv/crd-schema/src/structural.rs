//! The apiserver's structural-schema rules (`apiextensions-apiserver/pkg/apiserver/schema`
//! `ValidateStructural`, plus the CRD-level checks on `x-kubernetes-*` extensions and forbidden
//! keywords), reported with its wording and sorted like it sorts them.

use serde_json::{Map, Value};

use crate::error::{FieldError, FieldErrorKind};

/// The path prefix used by [`check`].
pub const DEFAULT_PREFIX: &str = "spec.validation.openAPIV3Schema";

/// Checks a CRD version's `openAPIV3Schema` and returns one message per violation (empty when the
/// schema is structural), e.g.
/// `spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields`.
pub fn check(schema: &Value) -> Vec<String> {
    check_at(schema, DEFAULT_PREFIX)
}

/// Like [`check`], with the field path of the schema given (for a `v1` CRD the apiserver uses
/// `spec.versions[i].schema.openAPIV3Schema`).
pub fn check_at(schema: &Value, prefix: &str) -> Vec<String> {
    check_errors(schema, prefix)
        .iter()
        .map(ToString::to_string)
        .collect()
}

/// Like [`check_at`], as field errors (for `Status.details.causes`), sorted by their text.
pub fn check_errors(schema: &Value, prefix: &str) -> Vec<FieldError> {
    let mut errs = Vec::new();
    match schema.as_object() {
        Some(obj) => invariants(obj, Level::Root, prefix, &mut errs),
        None => errs.push(FieldError::required(prefix, "must be a schema object")),
    }
    let mut keyed: Vec<(String, FieldError)> = errs.into_iter().map(|e| (e.to_string(), e)).collect();
    keyed.sort_by(|a, b| a.0.cmp(&b.0));
    keyed.dedup_by(|a, b| a.0 == b.0);
    keyed.into_iter().map(|(_, e)| e).collect()
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Root,
    Item,
    Field,
}

fn child(p: &str, k: &str) -> String {
    format!("{p}.{k}")
}

fn prop_path(p: &str, k: &str) -> String {
    format!("{p}.properties[{k}]")
}

fn str_of<'a>(o: &'a Map<String, Value>, k: &str) -> &'a str {
    o.get(k).and_then(Value::as_str).unwrap_or("")
}

fn bool_of(o: &Map<String, Value>, k: &str) -> bool {
    o.get(k).and_then(Value::as_bool).unwrap_or(false)
}

fn forbidden(path: String, detail: &str) -> FieldError {
    FieldError::new(path, FieldErrorKind::Forbidden, detail, None)
}

/// Keywords that CRD schemas do not support at all.
const UNSUPPORTED: [&str; 6] = [
    "$ref",
    "definitions",
    "id",
    "patternProperties",
    "dependencies",
    "additionalItems",
];

fn crd_keyword_checks(o: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    for k in UNSUPPORTED {
        if o.contains_key(k) {
            errs.push(forbidden(child(path, k), &format!("{k} is not supported")));
        }
    }
    if bool_of(o, "uniqueItems") {
        errs.push(forbidden(
            child(path, "uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
    if matches!(
        o.get("x-kubernetes-preserve-unknown-fields"),
        Some(Value::Bool(false))
    ) {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            Value::Bool(false),
            "must be true or undefined",
        ));
    }
    if o.contains_key("properties")
        && let Some(ap) = o.get("additionalProperties")
        && !ap.is_null()
        && ap != &Value::Bool(true)
    {
        errs.push(forbidden(
            child(path, "additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if matches!(o.get("additionalProperties"), Some(Value::Bool(false))) {
        errs.push(forbidden(
            child(path, "additionalProperties"),
            "additionalProperties cannot be set to false",
        ));
    }
    if matches!(o.get("items"), Some(Value::Array(_))) {
        errs.push(forbidden(
            child(path, "items"),
            "items must be a schema object and not an array",
        ));
    }
    let ty = str_of(o, "type");
    if let Some(lt) = o.get("x-kubernetes-list-type") {
        let lt = lt.as_str().unwrap_or("");
        if !["atomic", "set", "map"].contains(&lt) {
            errs.push(FieldError::new(
                child(path, "x-kubernetes-list-type"),
                FieldErrorKind::NotSupported,
                "supported values: \"atomic\", \"set\", \"map\"",
                Some(Value::String(lt.to_string())),
            ));
        }
        if ty != "array" {
            errs.push(FieldError::invalid(
                child(path, "type"),
                Value::String(ty.to_string()),
                "must be array if x-kubernetes-list-type is specified",
            ));
        }
        let keys = o.get("x-kubernetes-list-map-keys").and_then(Value::as_array);
        if lt == "map" && keys.is_none_or(Vec::is_empty) {
            errs.push(FieldError::required(
                child(path, "x-kubernetes-list-map-keys"),
                "must not be empty if x-kubernetes-list-type is map",
            ));
        }
        if lt != "map" && keys.is_some_and(|k| !k.is_empty()) {
            errs.push(forbidden(
                child(path, "x-kubernetes-list-map-keys"),
                "must not be set if x-kubernetes-list-type is not map",
            ));
        }
        if lt == "map"
            && let (Some(keys), Some(items)) = (keys, o.get("items").and_then(Value::as_object))
        {
            let props = items.get("properties").and_then(Value::as_object);
            let required: Vec<&str> = items
                .get("required")
                .and_then(Value::as_array)
                .map(|r| r.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            for k in keys.iter().filter_map(Value::as_str) {
                let p = props.and_then(|p| p.get(k)).and_then(Value::as_object);
                match p {
                    None => errs.push(FieldError::invalid(
                        child(path, "x-kubernetes-list-map-keys"),
                        Value::String(k.to_string()),
                        "entries must all be names of item properties",
                    )),
                    Some(p) => {
                        if !required.contains(&k) && !p.contains_key("default") {
                            errs.push(FieldError::required(
                                    format!("{}.items.properties[{k}]", path),
                                    "this property is in x-kubernetes-list-map-keys, so it must have a default or be a required property",
                                ));
                        }
                    }
                }
            }
        }
    } else if o.contains_key("x-kubernetes-list-map-keys") {
        errs.push(forbidden(
            child(path, "x-kubernetes-list-map-keys"),
            "must not be set if x-kubernetes-list-type is not map",
        ));
    }
}

fn is_type(v: &Value, t: &str) -> bool {
    v.as_object()
        .is_some_and(|o| o.len() == 1 && str_of(o, "type") == t)
}

fn is_int_or_string_pair(v: Option<&Value>) -> bool {
    v.and_then(Value::as_array)
        .is_some_and(|a| a.len() == 2 && is_type(&a[0], "integer") && is_type(&a[1], "string"))
}

/// `anyOf: [{type: integer}, {type: string}]`.
fn is_int_or_string_any_of(o: &Map<String, Value>) -> bool {
    is_int_or_string_pair(o.get("anyOf"))
}

/// `allOf: [{anyOf: [{type: integer}, {type: string}]}, ...]`.
fn is_int_or_string_all_of(o: &Map<String, Value>) -> bool {
    o.get("allOf")
        .and_then(Value::as_array)
        .and_then(|a| a.first())
        .and_then(Value::as_object)
        .is_some_and(|f| is_int_or_string_pair(f.get("anyOf")))
}

/// Defaults must be pruned (no unknown fields) and must validate against their own schema.
fn check_default(o: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(default) = o.get("default") else {
        return;
    };
    let mut rules = Vec::new();
    let Ok(node) = crate::node::parse(&Value::Object(o.clone()), path, &mut rules) else {
        return;
    };
    let dpath = child(path, "default");
    let mut pruned = default.clone();
    crate::prune::prune_value(&mut pruned, &node);
    if &pruned != default {
        errs.push(FieldError::invalid(
            dpath,
            default.clone(),
            "must not have unknown fields",
        ));
        return;
    }
    let mut found = Vec::new();
    crate::validate::openapi(&node, default, None, "", &mut found);
    for mut e in found {
        e.field = if e.field.is_empty() {
            dpath.clone()
        } else {
            format!("{dpath}.{}", e.field)
        };
        e.message = e.message.trim_start().to_string();
        errs.push(e);
    }
}

fn invariants(o: &Map<String, Value>, lvl: Level, path: &str, errs: &mut Vec<FieldError>) {
    crd_keyword_checks(o, path, errs);
    check_default(o, path, errs);
    let ty = str_of(o, "type");
    let embedded = bool_of(o, "x-kubernetes-embedded-resource");
    let int_or_string = bool_of(o, "x-kubernetes-int-or-string");
    let preserve = bool_of(o, "x-kubernetes-preserve-unknown-fields");
    if ty == "array" && !o.contains_key("items") {
        errs.push(FieldError::required(child(path, "items"), "must be specified"));
    }
    if let Some(items) = o.get("items").and_then(Value::as_object) {
        invariants(items, Level::Item, &child(path, "items"), errs);
    }
    let props = o.get("properties").and_then(Value::as_object);
    if let Some(props) = props {
        for (k, v) in props {
            match v.as_object() {
                Some(p) => invariants(p, Level::Field, &prop_path(path, k), errs),
                None => errs.push(FieldError::required(
                    prop_path(path, k),
                    "must be a schema object",
                )),
            }
        }
    }
    if o.get("additionalProperties").is_some_and(|a| !a.is_null()) {
        if lvl == Level::Root {
            errs.push(forbidden(
                child(path, "additionalProperties"),
                "must not be used at the root",
            ));
        }
        if let Some(ap) = o.get("additionalProperties").and_then(Value::as_object) {
            invariants(ap, Level::Field, &child(path, "additionalProperties"), errs);
        }
    }
    if int_or_string && preserve {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-preserve-unknown-fields"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    if int_or_string && embedded {
        errs.push(FieldError::invalid(
            child(path, "x-kubernetes-embedded-resource"),
            Value::Bool(true),
            "must be false if x-kubernetes-int-or-string is true",
        ));
    }
    value_validation(
        o,
        is_int_or_string_any_of(o),
        is_int_or_string_all_of(o),
        path,
        errs,
    );
    if embedded && ty != "object" {
        if ty.is_empty() {
            errs.push(FieldError::required(
                child(path, "type"),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        } else {
            errs.push(FieldError::invalid(
                child(path, "type"),
                Value::String(ty.to_string()),
                "must be object if x-kubernetes-embedded-resource is true",
            ));
        }
    } else if ty.is_empty() && !int_or_string && !preserve {
        let detail = match lvl {
            Level::Root => "must not be empty at the root",
            Level::Item => "must not be empty for specified array items",
            Level::Field => "must not be empty for specified object fields",
        };
        errs.push(FieldError::required(child(path, "type"), detail));
    }
    if embedded && o.get("additionalProperties").is_some_and(|a| !a.is_null()) {
        errs.push(forbidden(
            child(path, "additionalProperties"),
            "must not be used if x-kubernetes-embedded-resource is set",
        ));
    }
    if lvl == Level::Root && !ty.is_empty() && ty != "object" {
        errs.push(FieldError::invalid(
            child(path, "type"),
            Value::String(ty.to_string()),
            "must be object at the root",
        ));
    }
    if lvl == Level::Root || embedded {
        type_meta_fields(props, path, errs);
    }
    if lvl == Level::Root
        && let Some(meta) = props.and_then(|p| p.get("metadata")).and_then(Value::as_object)
    {
        root_metadata(meta, &prop_path(path, "metadata"), errs);
    }
    if embedded && !preserve && props.is_none_or(Map::is_empty) {
        errs.push(FieldError::required(
            child(path, "properties"),
            "must not be empty if x-kubernetes-embedded-resource is true without x-kubernetes-preserve-unknown-fields",
        ));
    }
}

/// At the root and in embedded resources, `kind`/`apiVersion` must be strings and `metadata` an
/// object.
fn type_meta_fields(props: Option<&Map<String, Value>>, path: &str, errs: &mut Vec<FieldError>) {
    let Some(props) = props else { return };
    for (field, want) in [
        ("kind", "string"),
        ("apiVersion", "string"),
        ("metadata", "object"),
    ] {
        if let Some(p) = props.get(field).and_then(Value::as_object) {
            let ty = str_of(p, "type");
            if ty != want {
                errs.push(FieldError::invalid(
                    child(&prop_path(path, field), "type"),
                    Value::String(ty.to_string()),
                    format!("must be {want}"),
                ));
            }
        }
    }
}

/// The root `metadata` schema may only restrict `name` and `generateName` (besides its type and a
/// default); anything else is forbidden.
fn root_metadata(m: &Map<String, Value>, path: &str, errs: &mut Vec<FieldError>) {
    let props_ok = match m.get("properties").and_then(Value::as_object) {
        None => true,
        Some(p) => !p.is_empty() && p.keys().all(|k| k == "name" || k == "generateName") || p.is_empty(),
    };
    let extra_keyword = m.iter().any(|(k, v)| match k.as_str() {
        "type" | "default" | "properties" => false,
        _ => !is_empty_keyword(v),
    });
    if !props_ok || extra_keyword {
        errs.push(forbidden(
            path.to_string(),
            "must not specify anything other than name and generateName, but metadata is implicitly specified",
        ));
    }
}

/// Whether a keyword value is the zero value (absent in Go's structs).
fn is_empty_keyword(v: &Value) -> bool {
    match v {
        Value::Null => true,
        Value::Bool(b) => !b,
        Value::String(s) => s.is_empty(),
        Value::Array(a) => a.is_empty(),
        Value::Object(o) => o.is_empty(),
        Value::Number(_) => false,
    }
}

fn value_validation(
    o: &Map<String, Value>,
    skip_any_of: bool,
    skip_first_all_of_any_of: bool,
    path: &str,
    errs: &mut Vec<FieldError>,
) {
    if !skip_any_of {
        for_each_in(o, "anyOf", path, |sub, p| nested(sub, false, p, errs));
    }
    let mut i = 0;
    if let Some(all) = o.get("allOf").and_then(Value::as_array) {
        for sub in all {
            let p = format!("{}[{i}]", child(path, "allOf"));
            if let Some(s) = sub.as_object() {
                nested(s, skip_first_all_of_any_of && i == 0, &p, errs);
            }
            i += 1;
        }
    }
    for_each_in(o, "oneOf", path, |sub, p| nested(sub, false, p, errs));
    if let Some(not) = o.get("not").and_then(Value::as_object) {
        nested(not, false, &child(path, "not"), errs);
    }
    if let Some(p) = o.get("pattern").and_then(Value::as_str)
        && let Err(e) = crate::pattern::Pattern::new(p)
    {
        errs.push(FieldError::invalid(
            child(path, "pattern"),
            Value::String(p.to_string()),
            format!(
                "must be a valid regular expression, but isn't: {}",
                e.replace('\n', " ")
            ),
        ));
    }
}

fn for_each_in(o: &Map<String, Value>, key: &str, path: &str, mut f: impl FnMut(&Map<String, Value>, &str)) {
    if let Some(list) = o.get(key).and_then(Value::as_array) {
        for (i, sub) in list.iter().enumerate() {
            if let Some(s) = sub.as_object() {
                f(s, &format!("{}[{i}]", child(path, key)));
            }
        }
    }
}

/// A schema inside `allOf`/`anyOf`/`oneOf`/`not`: value validations only.
fn nested(o: &Map<String, Value>, skip_any_of: bool, path: &str, errs: &mut Vec<FieldError>) {
    value_validation(o, skip_any_of, false, path, errs);
    if let Some(items) = o.get("items").and_then(Value::as_object) {
        nested(items, false, &child(path, "items"), errs);
    }
    if let Some(props) = o.get("properties").and_then(Value::as_object) {
        for (k, v) in props {
            if let Some(p) = v.as_object() {
                nested(p, false, &prop_path(path, k), errs);
            }
        }
        if props.contains_key("metadata") {
            errs.push(forbidden(
                prop_path(path, "metadata"),
                "must not be specified in a nested context",
            ));
        }
    }
    let rules: [(&str, &str); 11] = [
        ("type", "must be empty to be structural"),
        ("additionalProperties", "must be undefined to be structural"),
        ("default", "must be undefined to be structural"),
        ("title", "must be empty to be structural"),
        ("description", "must be empty to be structural"),
        ("nullable", "must be false to be structural"),
        (
            "x-kubernetes-preserve-unknown-fields",
            "must be false to be structural",
        ),
        ("x-kubernetes-embedded-resource", "must be false to be structural"),
        ("x-kubernetes-int-or-string", "must be false to be structural"),
        ("x-kubernetes-list-map-keys", "must be empty to be structural"),
        ("x-kubernetes-list-type", "must be undefined to be structural"),
    ];
    for (k, detail) in rules {
        let present = match o.get(k) {
            None | Some(Value::Null) => false,
            Some(Value::String(s)) => !s.is_empty(),
            Some(Value::Bool(b)) => *b,
            Some(Value::Array(a)) => !a.is_empty(),
            Some(_) => true,
        };
        if present {
            errs.push(forbidden(child(path, k), detail));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn structural_schema_passes() {
        let s = json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object"},
                "spec": {"type": "object", "required": ["a"], "properties": {
                    "a": {"type": "string"},
                    "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
                    "l": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                          "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}}}},
                    "either": {"type": "object", "properties": {"x": {"type": "string"}, "y": {"type": "string"}},
                               "oneOf": [{"required": ["x"]}, {"required": ["y"]}]},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "m": {"type": "object", "additionalProperties": {"type": "string"}}
                }}
            }
        });
        assert_eq!(check(&s), Vec::<String>::new());
    }

    #[test]
    fn violations_are_reported_like_the_apiserver() {
        let s = json!({
            "type": "object",
            "properties": {
                "metadata": {"type": "object", "properties": {"labels": {"type": "object"}}},
                "spec": {"properties": {
                    "arr": {"type": "array"},
                    "tuple": {"type": "array", "items": [{"type": "string"}]},
                    "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": {"type": "string"}},
                    "typed": {"type": "object", "anyOf": [{"type": "string"}]},
                    "lm": {"type": "array", "x-kubernetes-list-type": "map", "items": {"type": "object"}}
                }}
            }
        });
        let errs = check(&s);
        let expect = [
            "spec.validation.openAPIV3Schema.properties[spec].type: Required value: must not be empty for specified object fields",
            "spec.validation.openAPIV3Schema.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified",
            "spec.validation.openAPIV3Schema.properties[spec].properties[arr].items: Required value: must be specified",
            "spec.validation.openAPIV3Schema.properties[spec].properties[tuple].items: Forbidden: items must be a schema object and not an array",
            "spec.validation.openAPIV3Schema.properties[spec].properties[both].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive",
            "spec.validation.openAPIV3Schema.properties[spec].properties[typed].anyOf[0].type: Forbidden: must be empty to be structural",
            "spec.validation.openAPIV3Schema.properties[spec].properties[lm].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map",
        ];
        for e in expect {
            assert!(errs.contains(&e.to_string()), "missing {e}\n got {errs:#?}");
        }
        let mut sorted = errs.clone();
        sorted.sort();
        assert_eq!(errs, sorted);
    }

    #[test]
    fn defaults_must_be_pruned_and_valid() {
        let s = json!({"type": "object", "properties": {"spec": {"type": "object", "properties": {
            "model": {"type": "string", "enum": ["virtio", "e1000"], "default": "ne2k"},
            "obj": {"type": "object", "properties": {"a": {"type": "integer"}}, "default": {"a": 1, "b": 2}},
            "ok": {"type": "integer", "minimum": 1, "default": 3}
        }}}});
        let errs = check(&s);
        assert_eq!(errs, vec![
            "spec.validation.openAPIV3Schema.properties[spec].properties[model].default: Unsupported value: \"ne2k\": supported values: \"virtio\", \"e1000\"".to_string(),
            "spec.validation.openAPIV3Schema.properties[spec].properties[obj].default: Invalid value: map[string]interface {}{\"a\":1, \"b\":2}: must not have unknown fields".to_string(),
        ]);
    }

    #[test]
    fn root_type_meta_and_metadata_rules() {
        let s = json!({"type": "object", "additionalProperties": {"type": "string"}, "properties": {
            "kind": {"type": "integer"},
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 10}}},
            "spec": {"type": "object", "properties": {
                "free": {"x-kubernetes-preserve-unknown-fields": true},
                "bad": {"type": "string", "pattern": "a(b"},
                "n": {"type": "object", "allOf": [{"nullable": true, "x-kubernetes-validations": [{"rule": "true"}]}]}
            }}
        }});
        let errs = check_at(&s, "p");
        assert_eq!(errs, vec![
            "p.additionalProperties: Forbidden: must not be used at the root".to_string(),
            "p.additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive".to_string(),
            "p.properties[kind].type: Invalid value: \"integer\": must be string".to_string(),
            "p.properties[spec].properties[bad].pattern: Invalid value: \"a(b\": must be a valid regular expression, but isn't: regex parse error:     a(b      ^ error: unclosed group".to_string(),
            "p.properties[spec].properties[n].allOf[0].nullable: Forbidden: must be false to be structural".to_string(),
        ].into_iter().collect::<std::collections::BTreeSet<_>>().into_iter().collect::<Vec<_>>());
    }

    #[test]
    fn root_must_be_object() {
        assert_eq!(
            check_at(&json!({"type": "string"}), "spec.versions[0].schema.openAPIV3Schema"),
            vec!["spec.versions[0].schema.openAPIV3Schema.type: Invalid value: \"string\": must be object at the root".to_string()]
        );
        let errs = check_errors(&json!({"type": "string"}), "p");
        assert_eq!(errs.len(), 1);
        assert_eq!(errs[0].field, "p.type");
        assert_eq!(errs[0].kind, FieldErrorKind::Invalid);
        assert_eq!(
            errs[0].reason_string(),
            "Invalid value: \"string\": must be object at the root"
        );
        assert_eq!(
            check(&json!({})),
            vec![
                "spec.validation.openAPIV3Schema.type: Required value: must not be empty at the root"
                    .to_string()
            ]
        );
    }
}
