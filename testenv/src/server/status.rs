//! `Status` error bodies shaped like the real kube-apiserver's.

use serde_json::{Value, json};

/// An API error that renders as a `metav1.Status` object.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status code.
    pub code: u16,
    /// `reason` field (`NotFound`, `Conflict`, ...).
    pub reason: &'static str,
    /// Human-readable message.
    pub message: String,
    /// `details` object, if any.
    pub details: Option<Value>,
}

/// Result type of request handlers.
pub type ApiResult<T> = Result<T, ApiError>;

/// Names a resource the way the apiserver does in messages: `plural` for core, `plural.group` otherwise.
pub fn qualified(plural: &str, group: &str) -> String {
    if group.is_empty() {
        plural.to_string()
    } else {
        format!("{plural}.{group}")
    }
}

impl ApiError {
    fn new(code: u16, reason: &'static str, message: String) -> Self {
        Self {
            code,
            reason,
            message,
            details: None,
        }
    }

    fn with_details(mut self, name: &str, group: &str, kind: &str) -> Self {
        let mut d = json!({ "name": name, "kind": kind });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        self.details = Some(d);
        self
    }

    /// 404 for a named object.
    pub fn not_found(plural: &str, group: &str, name: &str) -> Self {
        Self::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", qualified(plural, group)),
        )
        .with_details(name, group, plural)
    }

    /// 404 for an unknown path.
    pub fn no_route() -> Self {
        Self::new(
            404,
            "NotFound",
            "the server could not find the requested resource".into(),
        )
        .with_details("", "", "")
    }

    /// 409 AlreadyExists.
    pub fn already_exists(plural: &str, group: &str, name: &str) -> Self {
        Self::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", qualified(plural, group)),
        )
        .with_details(name, group, plural)
    }

    /// 409 Conflict on a stale resourceVersion or failed precondition.
    pub fn conflict(plural: &str, group: &str, name: &str) -> Self {
        Self::conflict_msg(
            plural,
            group,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    /// 409 Conflict with a custom explanation.
    pub fn conflict_msg(plural: &str, group: &str, name: &str, why: &str) -> Self {
        Self::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                qualified(plural, group)
            ),
        )
        .with_details(name, group, plural)
    }

    /// 400 BadRequest.
    pub fn bad_request(msg: impl Into<String>) -> Self {
        Self::new(400, "BadRequest", msg.into())
    }

    /// 401 Unauthorized.
    pub fn unauthorized() -> Self {
        Self::new(401, "Unauthorized", "Unauthorized".into())
    }

    /// 403 Forbidden.
    pub fn forbidden(plural: &str, group: &str, name: &str, why: &str) -> Self {
        Self::new(
            403,
            "Forbidden",
            format!("{} \"{name}\" is forbidden: {why}", qualified(plural, group)),
        )
        .with_details(name, group, plural)
    }

    /// 405 MethodNotAllowed with a specific message.
    pub fn method_not_allowed_msg(msg: &str) -> Self {
        Self::new(405, "MethodNotAllowed", msg.to_string())
    }

    /// 405 MethodNotAllowed.
    pub fn method_not_allowed() -> Self {
        Self::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource".into(),
        )
    }

    /// 415 UnsupportedMediaType.
    pub fn unsupported_media(ct: &str) -> Self {
        Self::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({ct}) - accepted media types include: application/json, application/yaml, application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml"
            ),
        )
    }

    /// 422 Invalid with field causes.
    pub fn invalid(kind: &str, group: &str, name: &str, message: String, causes: Vec<Value>) -> Self {
        let mut e = Self::new(422, "Invalid", message);
        let mut d = json!({ "name": name, "kind": kind, "causes": causes });
        if !group.is_empty() {
            d["group"] = json!(group);
        }
        e.details = Some(d);
        e
    }

    /// 410 Expired (too old resource version).
    pub fn expired(rv: &str) -> Self {
        Self::new(410, "Expired", format!("too old resource version: {rv}"))
    }

    /// 500 InternalError.
    pub fn internal(msg: impl Into<String>) -> Self {
        Self::new(
            500,
            "InternalError",
            format!("Internal error occurred: {}", msg.into()),
        )
    }

    /// 503 ServiceUnavailable (e.g. conversion webhook unreachable).
    pub fn unavailable(msg: impl Into<String>) -> Self {
        Self::new(503, "ServiceUnavailable", msg.into())
    }

    /// Renders the `Status` object.
    pub fn to_status(&self) -> Value {
        let mut v = json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        });
        if self.reason.is_empty()
            && let Some(m) = v.as_object_mut()
        {
            m.remove("reason");
        }
        if let Some(d) = &self.details {
            v["details"] = d.clone();
        }
        v
    }
}

/// A `Status` with `status: Success` (used by deletecollection-style answers).
pub fn success(name: &str, group: &str, kind: &str) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": { "name": name, "group": group, "kind": kind },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn not_found_message() {
        let e = ApiError::not_found("proxmoxclusters", "infrastructure.cluster.x-k8s.io", "a");
        assert_eq!(
            e.message,
            "proxmoxclusters.infrastructure.cluster.x-k8s.io \"a\" not found"
        );
        assert_eq!(e.to_status()["code"], 404);
        assert_eq!(
            ApiError::not_found("configmaps", "", "x").message,
            "configmaps \"x\" not found"
        );
    }
}
