//! `fieldValidation` (`Ignore`, `Warn` — the default —, `Strict`) for unknown fields in request
//! bodies, answered like kube-apiserver: `Warning: 299 - "unknown field \"spec.x\""` headers,
//! a 400 `strict decoding error` on create and update, a 422 on the `patch` for patches.

use std::sync::Mutex;

use serde_json::{Value, json};

use super::status::{ApiError, ApiResult};

/// How unknown fields are handled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Dropped silently.
    Ignore,
    /// Dropped with a warning header each.
    Warn,
    /// Rejected.
    Strict,
}

/// Parses `fieldValidation`; `options` names the options kind for the 422
/// (`CreateOptions`, `UpdateOptions`, `PatchOptions`).
pub fn mode(param: Option<&str>, options: &str) -> ApiResult<Mode> {
    match param.unwrap_or_default() {
        "" | "Warn" => Ok(Mode::Warn),
        "Ignore" => Ok(Mode::Ignore),
        "Strict" => Ok(Mode::Strict),
        other => {
            let msg = format!(
                "Unsupported value: {other:?}: supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
            );
            Err(ApiError::invalid(
                options,
                "meta.k8s.io",
                "",
                format!("{options}.meta.k8s.io \"\" is invalid: fieldValidation: {msg}"),
                vec![json!({"reason": "FieldValueNotSupported", "message": msg, "field": "fieldValidation"})],
            ))
        }
    }
}

/// Warnings collected while handling one request (sent as `Warning` headers).
#[derive(Debug, Default)]
pub struct Warnings(Mutex<Vec<String>>);

impl Warnings {
    /// Adds a warning text.
    pub fn push(&self, w: String) {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(w);
    }

    /// The `Warning` header values (`299 - "<text>"`).
    pub fn headers(&self) -> Vec<String> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .iter()
            .map(|w| format!("299 - {w:?}"))
            .collect()
    }
}

/// How the body of one write is decoded.
#[derive(Debug, Clone, Copy)]
pub struct Decoding<'a> {
    /// `fieldValidation`.
    pub mode: Mode,
    /// The body is a patch (strict errors are 422 on `patch`).
    pub patch: bool,
    /// The object is the result of a server-side apply: already typed, nulls are kept.
    pub apply: bool,
    /// Where warnings go.
    pub warnings: &'a Warnings,
}

impl Decoding<'_> {
    /// Handles the unknown fields pruning found in `before` (the object as sent / patched).
    pub fn unknown_fields(
        &self,
        kind: &str,
        version: &str,
        before: &Value,
        unknown: &[String],
    ) -> ApiResult<()> {
        if unknown.is_empty() {
            return Ok(());
        }
        let list: Vec<String> = unknown.iter().map(|f| format!("unknown field {f:?}")).collect();
        match self.mode {
            Mode::Ignore => Ok(()),
            Mode::Warn => {
                for w in list {
                    self.warnings.push(w);
                }
                Ok(())
            }
            Mode::Strict if self.patch => {
                let text = serde_json::to_string(before).unwrap_or_default();
                let msg = format!(
                    "Invalid value: {text:?}: strict decoding error: {}",
                    list.join(", ")
                );
                Err(ApiError {
                    code: 422,
                    reason: "Invalid",
                    message: format!(" \"\" is invalid: patch: {msg}"),
                    details: Some(
                        json!({"causes": [{"reason": "FieldValueInvalid", "message": msg, "field": "patch"}]}),
                    ),
                })
            }
            Mode::Strict => Err(ApiError::bad_request(format!(
                "{kind} in version {version:?} cannot be handled as a {kind}: strict decoding error: {}",
                list.join(", ")
            ))),
        }
    }
}
