//! Field errors shaped like the apiserver's `field.Error`, and the `Status` message built from them.

use serde_json::Value;

use crate::gofmt;

/// The kind of a field error, mirroring `k8s.io/apimachinery/pkg/util/validation/field.ErrorType`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldErrorKind {
    /// `FieldValueRequired`: "Required value".
    Required,
    /// `FieldValueInvalid`: "Invalid value".
    Invalid,
    /// `FieldValueNotSupported`: "Unsupported value".
    NotSupported,
    /// `FieldValueTooLong`: "Too long".
    TooLong,
    /// `FieldValueTooMany`: "Too many".
    TooMany,
    /// `FieldValueForbidden`: "Forbidden".
    Forbidden,
    /// `FieldValueDuplicate`: "Duplicate value".
    Duplicate,
    /// `FieldValueTypeInvalid`: "Invalid value" (a type mismatch; blocks CEL evaluation).
    TypeInvalid,
}

impl FieldErrorKind {
    /// The human-readable name the apiserver prints (`field.ErrorType.String()`).
    pub fn as_str(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "Required value",
            FieldErrorKind::Invalid | FieldErrorKind::TypeInvalid => "Invalid value",
            FieldErrorKind::NotSupported => "Unsupported value",
            FieldErrorKind::TooLong => "Too long",
            FieldErrorKind::TooMany => "Too many",
            FieldErrorKind::Forbidden => "Forbidden",
            FieldErrorKind::Duplicate => "Duplicate value",
        }
    }

    /// The `type` of a `StatusCause` (`metav1.CauseType`), e.g. `FieldValueRequired`.
    pub fn cause_type(self) -> &'static str {
        match self {
            FieldErrorKind::Required => "FieldValueRequired",
            FieldErrorKind::Invalid => "FieldValueInvalid",
            FieldErrorKind::NotSupported => "FieldValueNotSupported",
            FieldErrorKind::TooLong => "FieldValueTooLong",
            FieldErrorKind::TooMany => "FieldValueTooMany",
            FieldErrorKind::Forbidden => "FieldValueForbidden",
            FieldErrorKind::Duplicate => "FieldValueDuplicate",
            FieldErrorKind::TypeInvalid => "FieldValueTypeInvalid",
        }
    }
}

/// One validation failure at a field path, like the apiserver's `field.Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldError {
    /// The field path, e.g. `spec.network.networkDevices[0].name`; `<nil>` for object-level errors.
    pub field: String,
    /// What kind of failure this is.
    pub kind: FieldErrorKind,
    /// The detail text (may be empty, e.g. for a plain "Required value").
    pub message: String,
    /// The offending value; `None` when the apiserver omits it from the message.
    pub value: Option<Value>,
}

impl FieldError {
    /// Creates an error.
    pub fn new(
        field: impl Into<String>,
        kind: FieldErrorKind,
        message: impl Into<String>,
        value: Option<Value>,
    ) -> Self {
        FieldError {
            field: field.into(),
            kind,
            message: message.into(),
            value,
        }
    }

    /// `field.Required(path, "")`.
    pub fn required(field: impl Into<String>, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Required, detail, None)
    }

    /// `field.Invalid(path, value, detail)`.
    pub fn invalid(field: impl Into<String>, value: Value, detail: impl Into<String>) -> Self {
        Self::new(field, FieldErrorKind::Invalid, detail, Some(value))
    }

    /// The per-cause text the apiserver puts in `Status.details.causes[].message`
    /// (`field.Error.ErrorBody()`), e.g. `Required value` or
    /// `Unsupported value: "x": supported values: "a", "b"`.
    pub fn reason_string(&self) -> String {
        let mut s = match self.kind {
            FieldErrorKind::Required | FieldErrorKind::Forbidden | FieldErrorKind::TooLong => {
                self.kind.as_str().to_string()
            }
            _ => match &self.value {
                None => self.kind.as_str().to_string(),
                Some(v) => format!("{}: {}", self.kind.as_str(), gofmt::value(v)),
            },
        };
        if !self.message.is_empty() {
            s.push_str(": ");
            s.push_str(&self.message);
        }
        s
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.reason_string())
    }
}

impl std::error::Error for FieldError {}

/// The `Status.message` of a 422 Invalid response, as `apierrors.NewInvalid` builds it:
/// `Kind.group "name" is invalid: <errors>`; one error bare, several in brackets joined by `, `
/// (identical messages shown once).
pub fn format_invalid(kind: &str, group: &str, name: &str, errs: &[FieldError]) -> String {
    let qualified = if group.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}.{group}")
    };
    let head = format!("{qualified} {} is invalid", gofmt::quote(name));
    if errs.is_empty() {
        return head;
    }
    if errs.len() == 1 {
        return format!("{head}: {}", errs[0]);
    }
    let mut seen: Vec<String> = Vec::new();
    for e in errs {
        let m = e.to_string();
        if !seen.contains(&m) {
            seen.push(m);
        }
    }
    if seen.len() == 1 {
        format!("{head}: {}", seen[0])
    } else {
        format!("{head}: [{}]", seen.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reason_strings() {
        assert_eq!(
            FieldError::required("spec.x", "").reason_string(),
            "Required value"
        );
        let e = FieldError::new(
            "spec.x",
            FieldErrorKind::NotSupported,
            "supported values: \"a\", \"b\"",
            Some(json!("x")),
        );
        assert_eq!(
            e.reason_string(),
            "Unsupported value: \"x\": supported values: \"a\", \"b\""
        );
        let e = FieldError::invalid(
            "spec.p",
            json!(200),
            "spec.p in body should be less than or equal to 128",
        );
        assert_eq!(
            e.to_string(),
            "spec.p: Invalid value: 200: spec.p in body should be less than or equal to 128"
        );
        let e = FieldError::new(
            "spec.l",
            FieldErrorKind::TooMany,
            "must have at most 2 items",
            Some(json!(3)),
        );
        assert_eq!(e.reason_string(), "Too many: 3: must have at most 2 items");
        let e = FieldError::new(
            "spec.s",
            FieldErrorKind::TooLong,
            "may not be more than 5 bytes",
            Some(json!("abcdefg")),
        );
        assert_eq!(e.reason_string(), "Too long: may not be more than 5 bytes");
    }

    #[test]
    fn invalid_message() {
        let one = [FieldError::required("spec.dnsServers", "")];
        assert_eq!(
            format_invalid("ProxmoxCluster", "infrastructure.cluster.x-k8s.io", "c1", &one),
            "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c1\" is invalid: spec.dnsServers: Required value"
        );
        let two = [
            FieldError::required("spec.dnsServers", ""),
            FieldError::invalid(
                "spec.ipv4Config.prefix",
                json!(200),
                "spec.ipv4Config.prefix in body should be less than or equal to 128",
            ),
            FieldError::required("spec.dnsServers", ""),
        ];
        assert_eq!(
            format_invalid("ProxmoxCluster", "infrastructure.cluster.x-k8s.io", "c1", &two),
            "ProxmoxCluster.infrastructure.cluster.x-k8s.io \"c1\" is invalid: [spec.dnsServers: Required value, spec.ipv4Config.prefix: Invalid value: 200: spec.ipv4Config.prefix in body should be less than or equal to 128]"
        );
        assert_eq!(format_invalid("Secret", "", "s", &[]), "Secret \"s\" is invalid");
    }
}
