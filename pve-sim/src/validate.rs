//! Parameter verification as PVE's JSONSchema does it, with our own rules written from the official schema.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use regex::Regex;
use serde_json::Value;

use crate::error::ApiError;
use crate::formats::Avail;
use crate::params::{as_bool, as_int, value_text};
use crate::version::PveVersion;

/// The type rule of one parameter.
#[derive(Debug, Clone, Copy)]
pub enum Rule {
    /// Integer with optional bounds.
    Int(Option<i64>, Option<i64>),
    /// 0/1 boolean.
    Bool,
    /// Any string with an optional maximum length.
    Str(Option<usize>),
    /// One of a fixed set.
    Enum(&'static [&'static str]),
    /// A VMID (integer 100..=999999999).
    VmId,
    /// A node name.
    Node,
    /// A storage id.
    StorageId,
    /// A config id (`[a-z][a-z0-9_]*`-like).
    ConfigId,
    /// A DNS name.
    DnsName,
    /// An array of strings.
    Array,
    /// `pve-ha-resource-or-vm-id` (`vm:100` or `100`).
    HaSid,
    /// `pve-ha-resource-id-list` (`vm:100,ct:101`).
    HaSidList,
    /// `pve-ha-node-list` (`node[:prio],...`).
    HaNodeList,
    /// `pve-configid-list`.
    ConfigIdList,
    /// Anything (validated by the handler).
    Any,
}

/// One parameter of an endpoint.
#[derive(Debug, Clone, Copy)]
pub struct ParamSpec {
    /// Parameter name.
    pub name: &'static str,
    /// Type rule.
    pub rule: Rule,
    /// Whether it may be omitted.
    pub optional: bool,
    /// The versions that have it.
    pub avail: Avail,
}

/// Shorthand for a required parameter.
pub const fn req(name: &'static str, rule: Rule) -> ParamSpec {
    ParamSpec {
        name,
        rule,
        optional: false,
        avail: Avail::Both,
    }
}

/// Shorthand for an optional parameter.
pub const fn opt(name: &'static str, rule: Rule) -> ParamSpec {
    ParamSpec {
        name,
        rule,
        optional: true,
        avail: Avail::Both,
    }
}

/// An optional parameter only 9.x has.
pub const fn opt9(name: &'static str, rule: Rule) -> ParamSpec {
    ParamSpec {
        name,
        rule,
        optional: true,
        avail: Avail::Since91,
    }
}

static CONFIGID: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"^[a-zA-Z][a-zA-Z0-9_\-]*$").ok());
static DNS_NAME: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?\.)*[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?$")
        .ok()
});
static NODE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?$").ok());
static STORAGE_ID: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r"^[a-zA-Z][a-zA-Z0-9\-_.]*[a-zA-Z0-9]$").ok());

/// Whether `re` (a lazily compiled constant pattern) matches.
pub fn matches(re: &LazyLock<Option<Regex>>, s: &str) -> bool {
    re.as_ref().is_some_and(|r| r.is_match(s))
}

/// Checks one value against a rule; returns the PVE message on failure.
pub fn check_rule(rule: Rule, v: &Value) -> Result<(), String> {
    let text = value_text(v);
    match rule {
        Rule::Int(min, max) => {
            let n = as_int(v).ok_or_else(|| format!("type check ('integer') failed - got '{text}'"))?;
            if let Some(min) = min
                && n < min
            {
                return Err(format!("value must have a minimum value of {min}"));
            }
            if let Some(max) = max
                && n > max
            {
                return Err(format!("value must have a maximum value of {max}"));
            }
            Ok(())
        }
        Rule::VmId => {
            let n = as_int(v).ok_or_else(|| format!("type check ('integer') failed - got '{text}'"))?;
            if n < 100 {
                return Err("value must have a minimum value of 100".into());
            }
            if n > 999_999_999 {
                return Err("value must have a maximum value of 999999999".into());
            }
            Ok(())
        }
        Rule::Bool => as_bool(v)
            .map(|_| ())
            .ok_or_else(|| format!("type check ('boolean') failed - got '{text}'")),
        Rule::Str(max) => {
            if matches!(v, Value::Array(_) | Value::Object(_)) {
                return Err("type check ('string') failed - got ARRAY".into());
            }
            if let Some(max) = max
                && text.chars().count() > max
            {
                return Err(format!("value may only be {max} characters long"));
            }
            Ok(())
        }
        Rule::Enum(values) => {
            if values.contains(&text.as_str()) {
                Ok(())
            } else {
                Err(format!(
                    "value '{text}' does not have a value in the enumeration '{}'",
                    values.join(", ")
                ))
            }
        }
        Rule::Node => {
            if matches(&NODE, &text) {
                Ok(())
            } else {
                Err("invalid format - value does not look like a valid node name\n".into())
            }
        }
        Rule::StorageId => {
            if matches(&STORAGE_ID, &text) {
                Ok(())
            } else {
                Err(format!(
                    "invalid format - storage ID '{text}' contains illegal characters\n"
                ))
            }
        }
        Rule::ConfigId => {
            if matches(&CONFIGID, &text) {
                Ok(())
            } else {
                Err(format!("invalid format - invalid configuration ID '{text}'\n"))
            }
        }
        Rule::ConfigIdList => match text
            .split([',', ';', ' ', '\0'])
            .filter(|x| !x.is_empty())
            .find(|x| !matches(&CONFIGID, x))
        {
            Some(bad) => Err(format!("invalid format - invalid configuration ID '{bad}'\n")),
            None => Ok(()),
        },
        Rule::DnsName => {
            if matches(&DNS_NAME, &text) {
                Ok(())
            } else {
                Err("invalid format - value does not look like a valid DNS name\n".into())
            }
        }
        Rule::HaSid => {
            if crate::formats::pattern_matches(r"[a-z]+:\S+|\d+", &text) {
                Ok(())
            } else {
                Err("invalid format - value does not look like a valid ha resource id\n".into())
            }
        }
        Rule::HaSidList => {
            if text
                .split([',', ';', ' ', '\0'])
                .filter(|x| !x.is_empty())
                .all(|x| crate::formats::pattern_matches(r"[a-z]+:\S+", x))
            {
                Ok(())
            } else {
                Err("invalid format - value does not look like a valid ha resource id\n".into())
            }
        }
        Rule::HaNodeList => {
            if text
                .split([',', ';', ' ', '\0'])
                .filter(|x| !x.is_empty())
                .all(|x| {
                    crate::formats::pattern_matches(r"[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?(?::\d+)?", x)
                })
            {
                Ok(())
            } else {
                Err("invalid format - value does not look like a valid ha node\n".into())
            }
        }
        Rule::Array => match v {
            Value::Array(_) | Value::String(_) => Ok(()),
            _ => Err("type check ('array') failed".into()),
        },
        Rule::Any => Ok(()),
    }
}

/// Verifies `params` against `spec`: unknown keys, missing required keys, type rules. Scalars given for
/// array parameters become one-element arrays (as PVE's normalisation does).
pub fn validate(
    params: &mut serde_json::Map<String, Value>,
    spec: &[ParamSpec],
    version: PveVersion,
) -> Result<(), ApiError> {
    let spec: Vec<&ParamSpec> = spec.iter().filter(|s| s.avail.has(version)).collect();
    let mut errors = BTreeMap::new();
    for key in params.keys() {
        if !spec.iter().any(|s| s.name == key) {
            errors.insert(
                key.clone(),
                "property is not defined in schema and the schema does not allow additional properties"
                    .to_string(),
            );
        }
    }
    for s in spec {
        match params.get_mut(s.name) {
            None => {
                if !s.optional {
                    errors.insert(
                        s.name.to_string(),
                        "property is missing and it is not optional".to_string(),
                    );
                }
            }
            Some(v) => {
                if matches!(s.rule, Rule::Array)
                    && let Value::String(text) = v
                {
                    *v = Value::Array(vec![Value::String(text.clone())]);
                }
                if let Err(msg) = check_rule(s.rule, v) {
                    errors.insert(s.name.to_string(), msg);
                }
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::params(errors))
    }
}

/// Disk bus keys accepted by resize/template (`ide0-3`, `sata0-5`, `scsi0-30`, `virtio0-15`, efidisk0, tpmstate0).
pub fn is_disk_key(key: &str) -> bool {
    if key == "efidisk0" || key == "tpmstate0" {
        return true;
    }
    for (prefix, max) in [("ide", 3u32), ("sata", 5), ("scsi", 30), ("virtio", 15)] {
        if let Some(rest) = key.strip_prefix(prefix)
            && let Ok(n) = rest.parse::<u32>()
            && n <= max
            && !rest.starts_with('+')
            && (rest == "0" || !rest.starts_with('0'))
        {
            return true;
        }
    }
    false
}

/// Enumeration text for the disk enum (used in error messages).
pub static DISK_ENUM: LazyLock<Vec<String>> = LazyLock::new(|| {
    let mut v = Vec::new();
    for (prefix, max) in [("ide", 3u32), ("scsi", 30), ("virtio", 15), ("sata", 5)] {
        for i in 0..=max {
            v.push(format!("{prefix}{i}"));
        }
    }
    v.push("efidisk0".into());
    v.push("tpmstate0".into());
    v
});

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn unknown_and_missing_params_are_reported() {
        let mut p = json!({"foo": 1}).as_object().cloned().unwrap_or_default();
        let err = validate(&mut p, &[req("newid", Rule::VmId)], PveVersion::V8_4).unwrap_err();
        let errors = err.errors.unwrap();
        assert_eq!(errors["newid"], "property is missing and it is not optional");
        assert!(errors["foo"].starts_with("property is not defined in schema"));
    }

    #[test]
    fn booleans_reject_true_strings() {
        assert!(check_rule(Rule::Bool, &json!("true")).is_err());
        assert!(check_rule(Rule::Bool, &json!(true)).is_ok());
        assert!(check_rule(Rule::Bool, &json!("1")).is_ok());
    }

    #[test]
    fn vmid_bounds() {
        assert_eq!(
            check_rule(Rule::VmId, &json!(99)).unwrap_err(),
            "value must have a minimum value of 100"
        );
        assert_eq!(
            check_rule(Rule::VmId, &json!("abc")).unwrap_err(),
            "type check ('integer') failed - got 'abc'"
        );
        assert!(is_disk_key("scsi30") && !is_disk_key("scsi31") && !is_disk_key("scsi01"));
    }
}
