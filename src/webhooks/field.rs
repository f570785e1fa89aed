//! Field errors and the `Status` objects the webhooks deny with, shaped like Kubernetes'
//! `apierrors.NewInvalid` / `NewBadRequest` / `admission.Denied` (what capmox's controller-runtime
//! webhooks return), so the API server reports them exactly as it reports capmox's.

use kube::core::Status;
use kube::core::response::{StatusCause, StatusDetails};
use serde_json::Value;

use capmox_api::consts::GROUP;

/// Type of a field error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorType {
    /// `Invalid value: <value>: <detail>` (cause `FieldValueInvalid`).
    Invalid,
    /// `Forbidden: <detail>` (cause `FieldValueForbidden`).
    Forbidden,
}

/// One field error (Go's `field.Error`).
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// Dotted field path, exactly as capmox spells it (e.g. `spec.network.networkDevices.1.name`).
    pub field: String,
    /// Error type.
    pub kind: ErrorType,
    /// The offending value (for [`ErrorType::Invalid`]).
    pub value: Value,
    /// What is wrong.
    pub detail: String,
}

impl FieldError {
    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind: ErrorType::Invalid,
            value,
            detail: detail.into(),
        }
    }

    /// `field.Forbidden(path, detail)`.
    pub fn forbidden(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            kind: ErrorType::Forbidden,
            value: Value::Null,
            detail: detail.into(),
        }
    }

    fn cause_type(&self) -> &'static str {
        match self.kind {
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Forbidden => "FieldValueForbidden",
        }
    }

    /// The message without the path (`Invalid value: "x": detail`), like Go's `ErrorBody`.
    /// Strings are quoted, numbers and booleans printed plainly, objects and lists as JSON (Go
    /// prints Go syntax with pointer addresses there).
    pub fn body(&self) -> String {
        let head = match self.kind {
            ErrorType::Forbidden => "Forbidden".to_owned(),
            ErrorType::Invalid => {
                let v = match &self.value {
                    Value::Null => "null".to_owned(),
                    Value::Bool(b) => b.to_string(),
                    Value::Number(n) => n.to_string(),
                    other => other.to_string(),
                };
                format!("Invalid value: {v}")
            }
        };
        if self.detail.is_empty() {
            head
        } else {
            format!("{head}: {}", self.detail)
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.body())
    }
}

/// What a validating webhook decided: allowed or denied with a `Status`, plus warnings (sent to
/// the client either way, as the API server does).
#[derive(Debug, Clone, Default)]
pub struct Verdict {
    /// `Some` when the request is denied.
    pub denial: Option<Status>,
    /// Warnings for the client (`Warning` headers).
    pub warnings: Vec<String>,
}

impl Verdict {
    /// Allowed, no warnings.
    pub fn allow() -> Self {
        Self::default()
    }

    /// Denied with `status`.
    pub fn deny(status: Status) -> Self {
        Self {
            denial: Some(status),
            warnings: Vec::new(),
        }
    }

    /// Adds a warning.
    #[must_use]
    pub fn warn(mut self, warning: impl Into<String>) -> Self {
        self.warnings.push(warning.into());
        self
    }

    /// Adds warnings.
    #[must_use]
    pub fn warn_all(mut self, warnings: impl IntoIterator<Item = String>) -> Self {
        self.warnings.extend(warnings);
        self
    }
}

/// `apierrors.NewInvalid`: 422 `Invalid`, `<Kind>.<group> "<name>" is invalid: <errors>`, one
/// cause per error.
pub fn invalid(kind: &str, name: &str, errs: &[FieldError]) -> Status {
    let qualified = format!("{kind}.{GROUP}");
    let message = match errs {
        [] => format!("{qualified} {name:?} is invalid"),
        [one] => format!("{qualified} {name:?} is invalid: {one}"),
        many => {
            let list: Vec<String> = many.iter().map(ToString::to_string).collect();
            format!("{qualified} {name:?} is invalid: [{}]", list.join(", "))
        }
    };
    Status::failure(&message, "Invalid")
        .with_code(422)
        .with_details(StatusDetails {
            name: name.to_owned(),
            group: GROUP.to_owned(),
            kind: kind.to_owned(),
            uid: String::new(),
            causes: errs
                .iter()
                .map(|e| StatusCause {
                    reason: e.cause_type().to_owned(),
                    message: e.body(),
                    field: e.field.clone(),
                })
                .collect(),
            retry_after_seconds: 0,
        })
}

/// `apierrors.NewBadRequest`: 400 `BadRequest`.
pub fn bad_request(message: &str) -> Status {
    Status::failure(message, "BadRequest").with_code(400)
}

/// `admission.Denied` (a plain error from a validator): 403 `Forbidden`.
pub fn denied(message: &str) -> Status {
    Status::failure(message, "Forbidden").with_code(403)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn invalid_renders_like_apimachinery() {
        let e = FieldError::invalid(
            "spec.network.networkDevices.1.name",
            json!("net2"),
            "Non-consecutive proxmox interface name",
        );
        let s = invalid("ProxmoxMachine", "m", &[e]);
        assert_eq!(
            s.message,
            "ProxmoxMachine.infrastructure.cluster.x-k8s.io \"m\" is invalid: spec.network.networkDevices.1.name: Invalid value: \"net2\": Non-consecutive proxmox interface name"
        );
        assert_eq!(s.code, 422);
        let d = s.details.unwrap();
        assert_eq!(d.causes[0].reason, "FieldValueInvalid");
        assert_eq!(
            d.causes[0].message,
            "Invalid value: \"net2\": Non-consecutive proxmox interface name"
        );
        let f = FieldError::forbidden("spec", "ProxmoxMachineTemplate is immutable");
        assert_eq!(f.body(), "Forbidden: ProxmoxMachineTemplate is immutable");
        assert_eq!(
            FieldError::invalid("spec.x", json!(5), "too small").body(),
            "Invalid value: 5: too small"
        );
        let two = invalid("ProxmoxCluster", "c", &[f.clone(), f]);
        assert!(two.message.ends_with(": [spec: Forbidden: ProxmoxMachineTemplate is immutable, spec: Forbidden: ProxmoxMachineTemplate is immutable]"));
    }
}
