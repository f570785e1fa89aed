//! Label selectors (equality and set-based) and field selectors (`metadata.name`, `metadata.namespace`).

use std::collections::BTreeSet;

use serde_json::Value;

use super::status::ApiError;

#[derive(Debug, Clone, PartialEq)]
enum Req {
    Eq(String, String),
    NotEq(String, String),
    In(String, BTreeSet<String>),
    NotIn(String, BTreeSet<String>),
    Exists(String),
    NotExists(String),
}

/// A parsed label selector; the empty selector matches everything.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LabelSelector(Vec<Req>);

/// Splits on commas that are not inside parentheses.
fn split_top(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0;
    let mut cur = String::new();
    for c in s.chars() {
        match c {
            '(' => {
                depth += 1;
                cur.push(c);
            }
            ')' => {
                depth -= 1;
                cur.push(c);
            }
            ',' if depth == 0 => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out.into_iter()
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect()
}

fn parse_set(rest: &str, sel: &str) -> Result<BTreeSet<String>, ApiError> {
    let rest = rest.trim();
    let inner = rest
        .strip_prefix('(')
        .and_then(|r| r.strip_suffix(')'))
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "unable to parse requirement: found '{rest}', expected: '(' in {sel:?}"
            ))
        })?;
    Ok(inner
        .split(',')
        .map(|x| x.trim().to_string())
        .filter(|x| !x.is_empty())
        .collect())
}

impl LabelSelector {
    /// Parses the `labelSelector` query value.
    pub fn parse(sel: &str) -> Result<Self, ApiError> {
        let mut reqs = Vec::new();
        for part in split_top(sel) {
            let words: Vec<&str> = part.split_whitespace().collect();
            if words.len() >= 2 && (words[1] == "in" || words[1] == "notin") {
                let key = words[0].to_string();
                let rest = part[part.find(words[1]).unwrap_or(0) + words[1].len()..].to_string();
                let set = parse_set(&rest, sel)?;
                reqs.push(if words[1] == "in" {
                    Req::In(key, set)
                } else {
                    Req::NotIn(key, set)
                });
            } else if let Some((k, v)) = part.split_once("!=") {
                reqs.push(Req::NotEq(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = part.split_once("==") {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some((k, v)) = part.split_once('=') {
                reqs.push(Req::Eq(k.trim().into(), v.trim().into()));
            } else if let Some(k) = part.strip_prefix('!') {
                reqs.push(Req::NotExists(k.trim().into()));
            } else if part.contains(' ') || part.contains('(') {
                return Err(ApiError::bad_request(format!(
                    "unable to parse requirement: {part:?}"
                )));
            } else {
                reqs.push(Req::Exists(part));
            }
        }
        Ok(Self(reqs))
    }

    /// Whether an object's labels match.
    pub fn matches(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels").and_then(Value::as_object);
        let get = |k: &str| labels.and_then(|l| l.get(k)).and_then(Value::as_str);
        self.0.iter().all(|r| match r {
            Req::Eq(k, v) => get(k) == Some(v.as_str()),
            Req::NotEq(k, v) => get(k) != Some(v.as_str()),
            Req::In(k, s) => get(k).is_some_and(|x| s.contains(x)),
            Req::NotIn(k, s) => get(k).is_none_or(|x| !s.contains(x)),
            Req::Exists(k) => get(k).is_some(),
            Req::NotExists(k) => get(k).is_none(),
        })
    }
}

/// A parsed field selector over `metadata.name` / `metadata.namespace` (and a few kind-specific
/// fields, see `extra_field_allowed`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FieldSelector(Vec<(String, bool, String)>);

impl FieldSelector {
    /// Parses the `fieldSelector` query value.
    pub fn parse(sel: &str, kind: &str) -> Result<Self, ApiError> {
        let mut out = Vec::new();
        for part in sel.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{sel}'; can't understand '{part}'"
                )));
            };
            let k = k.trim();
            if k != "metadata.name" && k != "metadata.namespace" && !extra_field_allowed(kind, k) {
                return Err(
                    ApiError::bad_request(format!("field label not supported: {k}")).with_kind_hint(kind)
                );
            }
            out.push((k.to_string(), eq, v.trim().to_string()));
        }
        Ok(Self(out))
    }

    /// Parses the `fieldSelector` query value for a served kind: labels are checked against what
    /// that API supports (each Events API its own) and mapped to the stored fields.
    pub fn parse_for(sel: &str, def: &super::crds::ResourceDef) -> Result<Self, ApiError> {
        let parsed = Self::parse_any(sel)?;
        let events = def.res_id() == (String::new(), "events".to_string());
        let mut out = Vec::new();
        for (k, eq, v) in parsed {
            let mapped = if events {
                super::events::field_label(def.group == super::events::NEW_GROUP, &k)
            } else if k == "metadata.name" || k == "metadata.namespace" || extra_field_allowed(&def.kind, &k)
            {
                Some(k.clone())
            } else {
                None
            };
            let Some(mapped) = mapped else {
                let plain = def.custom || events || matches!(def.kind.as_str(), "Secret" | "Namespace");
                return Err(ApiError::bad_request(if plain {
                    format!("field label not supported: {k}")
                } else {
                    format!(
                        "{k:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                    )
                }));
            };
            out.push((mapped, eq, v));
        }
        Ok(Self(out))
    }

    fn parse_any(sel: &str) -> Result<Vec<(String, bool, String)>, ApiError> {
        let mut out = Vec::new();
        for part in sel.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, eq, v) = if let Some((k, v)) = part.split_once("!=") {
                (k, false, v)
            } else if let Some((k, v)) = part.split_once("==") {
                (k, true, v)
            } else if let Some((k, v)) = part.split_once('=') {
                (k, true, v)
            } else {
                return Err(ApiError::bad_request(format!(
                    "invalid selector: '{sel}'; can't understand '{part}'"
                )));
            };
            out.push((k.trim().to_string(), eq, v.trim().to_string()));
        }
        Ok(out)
    }

    /// Whether an object matches.
    pub fn matches(&self, obj: &Value) -> bool {
        self.0.iter().all(|(k, eq, v)| {
            let ptr = format!("/{}", k.replace('.', "/"));
            let actual = match obj.pointer(&ptr) {
                Some(Value::String(s)) => s.clone(),
                Some(Value::Null) | None => String::new(),
                Some(other) => other.to_string(),
            };
            (actual == *v) == *eq
        })
    }
}

/// Field labels the real server supports beyond `metadata.name`/`metadata.namespace` for the kinds
/// served here (Events: see `events::field_label`): `status.phase` of Namespaces and `type` of
/// Secrets.
fn extra_field_allowed(kind: &str, field: &str) -> bool {
    match kind {
        "Namespace" => field == "status.phase",
        "Secret" => field == "type",
        _ => false,
    }
}

impl ApiError {
    fn with_kind_hint(mut self, kind: &str) -> Self {
        if !kind.is_empty() {
            self.message = format!("{} (kind {kind})", self.message);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn set_based() {
        let o = json!({"metadata": {"name": "x", "namespace": "d", "labels": {"a": "1", "b": "2"}}});
        let yes = [
            "a=1",
            "a==1,b",
            "a in (1,3)",
            "c notin (1)",
            "!c",
            "a,b!=3",
            "a in (1, 2),b notin (5)",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(&o), "{s}");
        }
        let no = ["a=2", "c", "!a", "a notin (1)", "b in (3)", "a!=1"];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(&o), "{s}");
        }
        assert!(LabelSelector::parse("").unwrap().matches(&o));
    }

    #[test]
    fn fields() {
        let o = json!({"metadata": {"name": "x", "namespace": "d"}});
        assert!(FieldSelector::parse("metadata.name=x", "").unwrap().matches(&o));
        assert!(
            !FieldSelector::parse("metadata.namespace!=d", "")
                .unwrap()
                .matches(&o)
        );
        assert!(FieldSelector::parse("spec.foo=x", "").is_err());
    }
}
