//! CRD structural-schema engine: the work the Kubernetes apiserver does on every write to a custom
//! resource, for an in-process test API server.
//!
//! * [`structural::check`] reports why an `openAPIV3Schema` is not structural, worded like the
//!   apiserver's CRD validation.
//! * [`Schema::prune`] drops unknown fields (and `null`s the schema neither allows nor defaults),
//!   [`Schema::default`] applies `default`s, in that order, as the apiserver's decoder does.
//! * [`Schema::validate`] runs OpenAPI v3 validation, `x-kubernetes-list-type` uniqueness and the
//!   `x-kubernetes-validations` CEL rules (with the `cel` crate), returning [`FieldError`]s whose
//!   text matches the apiserver's; [`format_invalid`] builds the 422 `Status` message from them.

mod celrules;
mod celvalue;
mod celwalk;
mod defaulting;
mod error;
pub mod fieldset;
mod formats;
mod gofmt;
mod k8slib;
mod listtype;
mod node;
mod pattern;
mod prune;
pub mod structural;
mod timefmt;
mod typed;
mod validate;

use std::sync::Arc;

use serde_json::Value;

pub use error::{FieldError, FieldErrorKind, format_invalid};
pub use fieldset::{FieldSet, PathElement, path_string};
pub use typed::{Comparison, untyped_resource_schema};

/// Why a schema could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// A schema node is not a JSON object.
    #[error("{path}: a schema must be an object")]
    NotAnObject {
        /// Location in the schema.
        path: String,
    },
    /// A keyword has a value of the wrong shape.
    #[error("{path}: invalid {keyword}: {reason}")]
    InvalidKeyword {
        /// Location in the schema.
        path: String,
        /// The offending keyword.
        keyword: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A `pattern` is not a valid regular expression.
    #[error("{path}: pattern {pattern:?} is not a valid regular expression: {reason}")]
    Pattern {
        /// Location in the schema.
        path: String,
        /// The pattern text.
        pattern: String,
        /// The regex compiler's complaint.
        reason: String,
    },
}

/// A parsed structural schema (one CRD version's `schema.openAPIV3Schema`). Cheap to clone.
#[derive(Debug, Clone)]
pub struct Schema {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    root: node::Node,
    rules: Vec<Arc<celrules::Rule>>,
}

/// A CEL rule the engine does not evaluate, with where it sits and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnsupportedRule {
    /// The location of the rule in the schema, e.g. `openAPIV3Schema.properties[spec]`.
    pub schema_path: String,
    /// The CEL expression.
    pub rule: String,
    /// Why it is skipped.
    pub reason: String,
}

impl Schema {
    /// Parses a CRD version's `schema.openAPIV3Schema`. Does not require the schema to be
    /// structural (use [`structural::check`] for that), but rejects keywords of the wrong shape and
    /// invalid patterns. CEL rules that the `cel` crate cannot compile are kept and skipped.
    pub fn from_openapi(v: &Value) -> Result<Schema, SchemaError> {
        let mut rules = Vec::new();
        let root = node::parse(v, "openAPIV3Schema", &mut rules)?;
        Ok(Schema {
            inner: Arc::new(Inner { root, rules }),
        })
    }

    /// Drops fields the schema does not know (honouring `x-kubernetes-preserve-unknown-fields`,
    /// `x-kubernetes-embedded-resource` and int-or-string), keeping `apiVersion`, `kind` and
    /// `metadata` at the root and in embedded resources (`metadata` reduced to the `ObjectMeta`
    /// fields, whatever its schema says); then removes `null`s of non-nullable fields without a
    /// default.
    pub fn prune(&self, obj: &mut Value) {
        prune::prune_resource(obj, &self.inner.root);
    }

    /// [`prune`](Self::prune), returning the paths of the unknown fields it dropped, sorted
    /// (`spec.foo`, `spec.list[0].bar`, `metadata.bogus`): what the apiserver reports as
    /// `unknown field "spec.foo"` warnings, or rejects with `fieldValidation=Strict`
    /// (`strict decoding error: unknown field "spec.foo"`).
    pub fn prune_reporting_unknown(&self, obj: &mut Value) -> Vec<String> {
        let mut dropped = prune::prune_resource(obj, &self.inner.root);
        dropped.sort();
        dropped
    }

    /// Applies `default` values as the apiserver does after pruning: absent properties of present
    /// objects (and non-nullable `null`s) get the pruned default, recursively.
    pub fn default(&self, obj: &mut Value) {
        defaulting::apply(obj, &self.inner.root);
    }

    /// [`prune`](Self::prune) then [`default`](Self::default): what the apiserver does to a
    /// request body before validation.
    pub fn prune_and_default(&self, obj: &mut Value) {
        self.prune(obj);
        self.default(obj);
    }

    /// Validates `obj` (OpenAPI keywords, list-type uniqueness, CEL rules). On update pass the
    /// stored object as `old`: transition rules (`oldSelf`) then run where an old value correlates,
    /// and sub-trees equal to their old value are not re-validated (validation ratcheting).
    pub fn validate(&self, obj: &Value, old: Option<&Value>) -> Vec<FieldError> {
        validate::validate(&self.inner.root, obj, old)
    }

    /// The CEL rules this engine skips (they never fail a write), as `"<schema path>: <rule>: <why>"`.
    /// Rules that fail only at evaluation time appear once they have been evaluated.
    pub fn unsupported_rules(&self) -> Vec<String> {
        self.unsupported_rule_details()
            .into_iter()
            .map(|u| format!("{}: {}: {}", u.schema_path, u.rule, u.reason))
            .collect()
    }

    /// Like [`unsupported_rules`](Self::unsupported_rules), structured.
    pub fn unsupported_rule_details(&self) -> Vec<UnsupportedRule> {
        self.inner
            .rules
            .iter()
            .filter_map(|r| {
                r.unsupported_reason().map(|reason| UnsupportedRule {
                    schema_path: r.schema_path.clone(),
                    rule: r.rule.clone(),
                    reason,
                })
            })
            .collect()
    }

    /// Converts an object (a server-side apply configuration) to a typed value the way
    /// structured-merge-diff does: the first unknown field or type mismatch is an error worded
    /// like the apiserver's (`.spec.foo: field not declared in schema`,
    /// `.spec.size: expected numeric (int or float), got string`). `null`s pass.
    pub fn check_typed(&self, obj: &Value) -> Result<(), String> {
        typed::check(typed::resource(&self.inner.root), obj, &mut Vec::new())
    }

    /// The field set of an object (what an apply configuration claims: leaves, map entries, set
    /// and associative-list items, empty maps and nulls).
    pub fn field_set(&self, obj: &Value) -> FieldSet {
        let mut out = FieldSet::new();
        typed::to_field_set(typed::resource(&self.inner.root), obj, &mut Vec::new(), &mut out);
        out
    }

    /// Compares two versions of an object: fields added (including maps and list items that
    /// appear), modified (leaves) and removed.
    pub fn compare(&self, old: &Value, new: &Value) -> Comparison {
        let mut cmp = Comparison::default();
        typed::compare(
            typed::resource(&self.inner.root),
            Some(old),
            Some(new),
            &mut Vec::new(),
            &mut cmp,
        );
        cmp
    }

    /// Merges an apply configuration onto a live object: maps key by key, `set` and `map` lists
    /// item by item (by value / key fields), atomic lists and scalars replaced.
    pub fn merge(&self, live: &Value, config: &Value) -> Value {
        typed::merge(typed::resource(&self.inner.root), live, config)
    }

    /// All CEL rules in the schema (the expression text), in schema order.
    pub fn rules(&self) -> Vec<String> {
        self.inner.rules.iter().map(|r| r.rule.clone()).collect()
    }
}

#[cfg(test)]
mod send_sync {
    #[test]
    fn schema_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::Schema>();
    }
}
