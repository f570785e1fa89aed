//! The PVE error model: status code, reason phrase (= first line of the message), body shape.

use std::collections::BTreeMap;

/// How the body of an error response looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorBody {
    /// `{"data":null,"message":"...\n"}` plus `errors` when present.
    Json,
    /// No body at all (authentication failures).
    Empty,
    /// The message as plain text (errors raised by the HTTP layer, e.g. 501).
    Text,
}

/// An error answered to the client exactly as PVE would.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{status} {message}")]
pub struct ApiError {
    /// HTTP status code.
    pub status: u16,
    /// Full message; its first line becomes the reason phrase.
    pub message: String,
    /// Per-parameter errors (400 only).
    pub errors: Option<BTreeMap<String, String>>,
    /// Body shape.
    pub body: ErrorBody,
}

impl ApiError {
    /// A plain `die` in a PVE handler: HTTP 500.
    pub fn server(message: impl Into<String>) -> Self {
        Self {
            status: 500,
            message: message.into(),
            errors: None,
            body: ErrorBody::Json,
        }
    }

    /// A custom status with a JSON body.
    pub fn status(status: u16, message: impl Into<String>) -> Self {
        Self {
            status,
            message: message.into(),
            errors: None,
            body: ErrorBody::Json,
        }
    }

    /// 400 `Parameter verification failed.` with one field error.
    pub fn param(field: &str, message: impl Into<String>) -> Self {
        let mut errors = BTreeMap::new();
        errors.insert(field.to_string(), message.into());
        Self::params(errors)
    }

    /// 400 `Parameter verification failed.` with the given field errors.
    pub fn params(errors: BTreeMap<String, String>) -> Self {
        Self {
            status: 400,
            message: "Parameter verification failed.".to_string(),
            errors: Some(errors),
            body: ErrorBody::Json,
        }
    }

    /// 501 raised by the HTTP layer, with a plain-text body.
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Self {
            status: 501,
            message: message.into(),
            errors: None,
            body: ErrorBody::Text,
        }
    }

    /// 401 with an empty body.
    pub fn unauthorized(reason: &str) -> Self {
        Self {
            status: 401,
            message: reason.to_string(),
            errors: None,
            body: ErrorBody::Empty,
        }
    }

    /// The reason phrase: the first line of the message.
    pub fn reason(&self) -> &str {
        self.message.lines().next().unwrap_or("")
    }

    /// The JSON body for [`ErrorBody::Json`].
    pub fn json_body(&self) -> serde_json::Value {
        let mut body = serde_json::Map::new();
        body.insert("data".into(), serde_json::Value::Null);
        if let Some(errors) = &self.errors {
            body.insert("errors".into(), serde_json::json!(errors));
        }
        let mut message = self.message.clone();
        if !message.ends_with('\n') {
            message.push('\n');
        }
        body.insert("message".into(), serde_json::Value::String(message));
        serde_json::Value::Object(body)
    }
}
