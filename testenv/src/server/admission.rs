//! Glue between the server and the `crd-schema` engine (structural schema: prune, default, validate).
//!
//! Every call into `crd-schema` goes through this module so the rest of the server does not depend on
//! its exact API.

use serde_json::{Value, json};

use super::status::ApiError;

/// A compiled structural schema for one CRD version.
pub struct VersionSchema {
    schema: crd_schema::Schema,
}

impl std::fmt::Debug for VersionSchema {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VersionSchema").finish_non_exhaustive()
    }
}

/// One field error, as reported in `Status.details.causes`.
#[derive(Debug, Clone)]
pub struct FieldErr {
    /// Field path, e.g. `spec.dnsServers`.
    pub field: String,
    /// Cause reason, e.g. `FieldValueRequired`.
    pub reason: String,
    /// Rendered message (`Required value`, `Invalid value: ...`).
    pub message: String,
}

/// Compiles the `openAPIV3Schema` of a CRD version.
pub fn compile(raw: &Value) -> Result<VersionSchema, String> {
    crd_schema::Schema::from_openapi(raw)
        .map(|schema| VersionSchema { schema })
        .map_err(|e| e.to_string())
}

/// Returns the structural-schema violations of the schema at `prefix` (empty when structural).
pub fn structural_violations(raw: &Value, prefix: &str) -> Vec<FieldErr> {
    crd_schema::structural::check_at(raw, prefix)
        .into_iter()
        .map(|v| {
            let (field, msg) = v
                .split_once(": ")
                .map(|(a, b)| (a.to_string(), b.to_string()))
                .unwrap_or((prefix.to_string(), v.clone()));
            let reason = if msg.starts_with("Required value") {
                "FieldValueRequired"
            } else if msg.starts_with("Forbidden") {
                "FieldValueForbidden"
            } else if msg.starts_with("Unsupported value") {
                "FieldValueNotSupported"
            } else {
                "FieldValueInvalid"
            };
            FieldErr {
                field,
                reason: reason.into(),
                message: msg,
            }
        })
        .collect()
}

/// A schema accepting anything (types deduced from values), for kinds without one.
pub fn untyped() -> std::sync::Arc<VersionSchema> {
    static CELL: std::sync::OnceLock<std::sync::Arc<VersionSchema>> = std::sync::OnceLock::new();
    CELL.get_or_init(|| {
        let schema = crd_schema::Schema::from_openapi(&crd_schema::untyped_resource_schema())
            .unwrap_or_else(|_| unreachable_schema());
        std::sync::Arc::new(VersionSchema { schema })
    })
    .clone()
}

#[allow(clippy::expect_used)]
fn unreachable_schema() -> crd_schema::Schema {
    // `{"type": "object"}` always parses.
    crd_schema::Schema::from_openapi(&json!({"type": "object"})).expect("a trivial schema parses")
}

impl VersionSchema {
    /// Prunes unknown fields and applies defaults (used on writes and on reads from storage).
    pub fn prune_and_default(&self, obj: &mut Value) {
        self.schema.prune_and_default(obj);
    }

    /// Prunes unknown fields (and non-nullable nulls), returning the dropped paths, sorted.
    pub fn prune_reporting_unknown(&self, obj: &mut Value) -> Vec<String> {
        self.schema.prune_reporting_unknown(obj)
    }

    /// Applies defaults only.
    pub fn default(&self, obj: &mut Value) {
        self.schema.default(obj);
    }

    /// Typed conversion of an apply configuration (first unknown field or type mismatch).
    pub fn check_typed(&self, obj: &Value) -> Result<(), String> {
        self.schema.check_typed(obj)
    }

    /// Field set of an object.
    pub fn field_set(&self, obj: &Value) -> crd_schema::FieldSet {
        self.schema.field_set(obj)
    }

    /// Added, modified and removed fields between two objects.
    pub fn compare(&self, old: &Value, new: &Value) -> crd_schema::Comparison {
        self.schema.compare(old, new)
    }

    /// Merges an apply configuration onto a live object.
    pub fn merge(&self, live: &Value, config: &Value) -> Value {
        self.schema.merge(live, config)
    }

    /// Validates `obj` (with `old` for transition rules on update).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldErr> {
        self.schema
            .validate(obj, old)
            .into_iter()
            .map(|e| FieldErr {
                field: e.field.clone(),
                reason: e.kind.cause_type().to_string(),
                message: e.reason_string(),
            })
            .collect()
    }

    /// CEL rules the engine does not evaluate (for the README / diagnostics).
    pub fn unsupported_rules(&self) -> Vec<String> {
        self.schema.unsupported_rules()
    }
}

/// Builds the 422 Invalid error for `kind`/`group`/`name` from field errors, worded like the
/// apiserver: `Kind.group "name" is invalid: field: message` (several errors in brackets).
pub fn invalid_error(kind: &str, group: &str, name: &str, errs: &[FieldErr]) -> ApiError {
    // The head with crd-schema's quoting, then the bodies from our rendered messages.
    let head = crd_schema::format_invalid(kind, group, name, &[]);
    let parts: Vec<String> = errs
        .iter()
        .map(|e| format!("{}: {}", e.field, e.message))
        .collect();
    let mut uniq: Vec<String> = Vec::new();
    for p in parts {
        if !uniq.contains(&p) {
            uniq.push(p);
        }
    }
    let message = match uniq.len() {
        0 => head,
        1 => format!("{head}: {}", uniq[0]),
        _ => format!("{head}: [{}]", uniq.join(", ")),
    };
    let causes = errs
        .iter()
        .map(|e| json!({ "reason": e.reason, "message": e.message, "field": e.field }))
        .collect();
    ApiError::invalid(kind, group, name, message, causes)
}
