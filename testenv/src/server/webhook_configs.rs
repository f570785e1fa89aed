//! `admissionregistration.k8s.io/v1` `MutatingWebhookConfiguration` and
//! `ValidatingWebhookConfiguration`: the two cluster-scoped kinds (registered at start), the
//! defaults the API server fills in and the validation it applies (a subset: names, review
//! versions, side effects, policies, timeout, client config, rules).

use std::sync::Arc;

use serde_json::{Map, Value, json};

use super::State;
use super::admission::FieldErr;
use super::crds::{Conversion, ResourceDef, VersionDef};

/// API group of the webhook configurations.
pub const GROUP: &str = "admissionregistration.k8s.io";
/// Plural of the mutating configurations.
pub const MUTATING: &str = "mutatingwebhookconfigurations";
/// Plural of the validating configurations.
pub const VALIDATING: &str = "validatingwebhookconfigurations";

fn def(plural: &str, kind: &str) -> ResourceDef {
    ResourceDef {
        group: GROUP.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced: false,
        short_names: Vec::new(),
        categories: vec!["api-extensions".into()],
        versions: vec![VersionDef {
            name: "v1".into(),
            served: true,
            storage: true,
            status: false,
            schema: None,
            raw_schema: None,
            columns: Vec::new(),
        }],
        custom: false,
        conversion: Conversion::None,
        builtin_schema: super::builtin_schemas::schema(GROUP, plural)
            .and_then(|s| super::admission::compile(&s).ok())
            .map(Arc::new),
    }
}

/// Serves the two kinds.
pub fn register(st: &State) {
    let mut reg = st.registry_mut();
    reg.upsert(def(MUTATING, "MutatingWebhookConfiguration"));
    reg.upsert(def(VALIDATING, "ValidatingWebhookConfiguration"));
}

/// Whether `def` is one of the two kinds (requests for them never go to webhooks).
pub fn is_config(def: &ResourceDef) -> bool {
    def.group == GROUP
}

fn err(field: String, reason: &str, message: String) -> FieldErr {
    FieldErr {
        field,
        reason: reason.into(),
        message,
    }
}

fn set_default(m: &mut Map<String, Value>, k: &str, v: Value) {
    if m.get(k).is_none_or(Value::is_null) {
        m.insert(k.into(), v);
    }
}

fn supported(field: String, value: &str, allowed: &[&str]) -> Option<FieldErr> {
    if allowed.contains(&value) {
        return None;
    }
    let list: Vec<String> = allowed.iter().map(|a| format!("{a:?}")).collect();
    Some(err(
        field,
        "FieldValueNotSupported",
        format!(
            "Unsupported value: {value:?}: supported values: {}",
            list.join(", ")
        ),
    ))
}

fn check_webhook(i: usize, w: &Value, mutating: bool, names: &mut Vec<String>, errs: &mut Vec<FieldErr>) {
    let f = |k: &str| format!("webhooks[{i}].{k}");
    let s = |p: &str| {
        w.pointer(p)
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let name = s("/name");
    if name.is_empty() {
        errs.push(err(f("name"), "FieldValueRequired", "Required value".into()));
    } else if name.split('.').filter(|p| !p.is_empty()).count() < 3 {
        errs.push(err(
            f("name"),
            "FieldValueInvalid",
            format!(
                "Invalid value: {name:?}: should be a domain with at least three segments separated by dots"
            ),
        ));
    } else if names.contains(&name) {
        errs.push(err(
            f("name"),
            "FieldValueDuplicate",
            format!("Duplicate value: {name:?}"),
        ));
    } else {
        names.push(name);
    }
    let versions: Vec<&str> = w
        .get("admissionReviewVersions")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if versions.is_empty() {
        errs.push(err(
            f("admissionReviewVersions"),
            "FieldValueRequired",
            "Required value: must specify one of v1, v1beta1".into(),
        ));
    }
    match w.get("sideEffects").and_then(Value::as_str) {
        None => errs.push(err(
            f("sideEffects"),
            "FieldValueRequired",
            "Required value: must specify one of None, NoneOnDryRun".into(),
        )),
        Some(v) => errs.extend(supported(f("sideEffects"), v, &["None", "NoneOnDryRun"])),
    }
    errs.extend(supported(
        f("failurePolicy"),
        &s("/failurePolicy"),
        &["Fail", "Ignore"],
    ));
    errs.extend(supported(
        f("matchPolicy"),
        &s("/matchPolicy"),
        &["Equivalent", "Exact"],
    ));
    if mutating {
        errs.extend(supported(
            f("reinvocationPolicy"),
            &s("/reinvocationPolicy"),
            &["IfNeeded", "Never"],
        ));
    }
    if let Some(t) = w.get("timeoutSeconds").and_then(Value::as_i64)
        && !(1..=30).contains(&t)
    {
        errs.push(err(
            f("timeoutSeconds"),
            "FieldValueInvalid",
            format!("Invalid value: {t}: the timeout value must be between 1 and 30 seconds"),
        ));
    }
    let url = w.pointer("/clientConfig/url").and_then(Value::as_str);
    let service = w.pointer("/clientConfig/service").filter(|v| !v.is_null());
    match (url, service) {
        (Some(_), Some(_)) | (None, None) => errs.push(err(
            f("clientConfig"),
            "FieldValueRequired",
            "Required value: exactly one of url or service is required".into(),
        )),
        (Some(u), None) if !u.starts_with("https://") => {
            let scheme = url::Url::parse(u)
                .map(|p| p.scheme().to_owned())
                .unwrap_or_default();
            errs.push(err(
                f("clientConfig.url"),
                "FieldValueInvalid",
                format!("Invalid value: {scheme:?}: 'https' is the only allowed URL scheme; desired format: https://host[/path]"),
            ));
        }
        _ => {}
    }
}

/// Applies the API server's defaults to a configuration and validates it.
pub fn admit(def: &ResourceDef, obj: &mut Value) -> Result<(), Vec<FieldErr>> {
    let mutating = def.plural == MUTATING;
    let mut errs = Vec::new();
    let mut names = Vec::new();
    if let Some(hooks) = obj.get_mut("webhooks").and_then(Value::as_array_mut) {
        for (i, w) in hooks.iter_mut().enumerate() {
            if let Some(m) = w.as_object_mut() {
                set_default(m, "failurePolicy", json!("Fail"));
                set_default(m, "matchPolicy", json!("Equivalent"));
                set_default(m, "namespaceSelector", json!({}));
                set_default(m, "objectSelector", json!({}));
                set_default(m, "timeoutSeconds", json!(10));
                if mutating {
                    set_default(m, "reinvocationPolicy", json!("Never"));
                }
                if let Some(svc) = m
                    .get_mut("clientConfig")
                    .and_then(|c| c.get_mut("service"))
                    .and_then(Value::as_object_mut)
                {
                    set_default(svc, "port", json!(443));
                }
                if let Some(rules) = m.get_mut("rules").and_then(Value::as_array_mut) {
                    for r in rules.iter_mut().filter_map(Value::as_object_mut) {
                        set_default(r, "scope", json!("*"));
                    }
                }
            }
            check_webhook(i, w, mutating, &mut names, &mut errs);
        }
    }
    if errs.is_empty() { Ok(()) } else { Err(errs) }
}

/// The stored configurations of one kind, sorted by name (the order the API server calls them in).
pub fn configurations(st: &State, plural: &str) -> Vec<Arc<Value>> {
    let (mut items, _) = st.store.list(&(GROUP.to_string(), plural.to_string()), None);
    items.sort_by(|a, b| {
        let n = |o: &Value| {
            o.pointer("/metadata/name")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        n(a).cmp(&n(b))
    });
    items.into_iter().map(Arc::new).collect()
}
