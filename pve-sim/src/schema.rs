//! PVE's API schema (`apidoc.json` for 8.4, `apidoc-9.1.json` for 9.1, kept beside the
//! checkout in `../shared/pve-api/`, never in the repository) as a judge of requests: every
//! request of a request log is checked against the schema of the version the simulator played
//! (unknown endpoints and parameters, missing required ones, types, enums, bounds, patterns,
//! property-string keys). The checks are written from the schema's own description of a
//! parameter, not from pve-sim's validators, so the two judge each other.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use regex::Regex;
use serde_json::{Map, Value};

use crate::version::PveVersion;

/// Errors loading a schema.
#[derive(Debug, thiserror::Error)]
pub enum SchemaError {
    /// The file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// The file is not a PVE API schema tree.
    #[error("{path} is not a PVE API schema: {message}")]
    Parse {
        /// File.
        path: String,
        /// What is wrong.
        message: String,
    },
}

/// The directory holding the schemas: `$PVE_API_SCHEMA_DIR`, else `../shared/pve-api` beside the
/// checkout.
pub fn default_dir() -> PathBuf {
    std::env::var_os("PVE_API_SCHEMA_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/pve-api"))
}

/// The schema file of `version`, if it is there.
pub fn find(version: PveVersion) -> Option<PathBuf> {
    let path = default_dir().join(version.schema_file());
    path.is_file().then_some(path)
}

/// One version's schema: method objects by `METHOD /path/{template}`.
#[derive(Debug, Clone)]
pub struct ApiSchema {
    methods: BTreeMap<String, Value>,
}

fn walk(nodes: &[Value], out: &mut BTreeMap<String, Value>) {
    for n in nodes {
        if let (Some(path), Some(info)) = (
            n.get("path").and_then(Value::as_str),
            n.get("info").and_then(Value::as_object),
        ) {
            for (method, m) in info {
                out.insert(format!("{method} {path}"), m.clone());
            }
        }
        if let Some(children) = n.get("children").and_then(Value::as_array) {
            walk(children, out);
        }
    }
}

/// A Perl pattern of the schema as an anchored Rust regex (`None` if Rust cannot express it).
fn perl_regex(p: &str) -> Option<Regex> {
    let p = p.replace("(?^:", "(?:").replace("{,", "{0,");
    Regex::new(&format!("^(?:{p})$")).ok()
}

fn text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

impl ApiSchema {
    /// Loads a schema file.
    pub fn load(path: &Path) -> Result<Self, SchemaError> {
        let shown = path.display().to_string();
        let data = std::fs::read(path).map_err(|source| SchemaError::Read {
            path: shown.clone(),
            source,
        })?;
        let tree: Value = serde_json::from_slice(&data).map_err(|e| SchemaError::Parse {
            path: shown.clone(),
            message: e.to_string(),
        })?;
        let nodes = tree.as_array().ok_or_else(|| SchemaError::Parse {
            path: shown,
            message: "not an array of tree nodes".into(),
        })?;
        let mut methods = BTreeMap::new();
        walk(nodes, &mut methods);
        Ok(Self { methods })
    }

    /// The method object of an endpoint key (`GET /nodes/{node}/qemu`).
    pub fn method(&self, key: &str) -> Option<&Value> {
        self.methods.get(key)
    }

    /// Every endpoint key.
    pub fn keys(&self) -> impl Iterator<Item = &String> {
        self.methods.keys()
    }

    /// The parameter schemas of an endpoint (`parameters.properties`).
    pub fn params(&self, key: &str) -> Option<&Map<String, Value>> {
        self.method(key)?
            .get("parameters")?
            .get("properties")?
            .as_object()
    }

    /// The schema of a parameter name as sent (`net0` matches `net[n]`).
    fn param_schema<'a>(props: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
        if let Some(s) = props.get(name) {
            return Some(s);
        }
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit());
        (stem.len() < name.len())
            .then(|| props.get(&format!("{stem}[n]")))
            .flatten()
    }

    /// Checks one request (`endpoint` key and its logged parameters); returns what is wrong.
    /// Values redacted in the request log (`<redacted>`) are not checked, nor is the `upload`
    /// summary of an upload.
    pub fn check_request(&self, endpoint: &str, params: &Map<String, Value>) -> Vec<String> {
        if self.method(endpoint).is_none() {
            return vec![format!("{endpoint}: not in the schema")];
        }
        let empty = Map::new();
        let props = self.params(endpoint).unwrap_or(&empty);
        let mut errors = Vec::new();
        for (name, value) in params {
            if name == "upload" && endpoint.ends_with("/upload") {
                continue;
            }
            let Some(schema) = Self::param_schema(props, name) else {
                errors.push(format!("{endpoint}: unknown parameter '{name}'"));
                continue;
            };
            if value.as_str() == Some("<redacted>") {
                continue;
            }
            if let Err(e) = check_value(schema, value) {
                errors.push(format!("{endpoint}: {name}: {e}"));
            }
        }
        for (name, schema) in props {
            let optional = schema.get("optional").and_then(Value::as_i64) == Some(1);
            if !optional && !name.contains("[n]") && !params.contains_key(name) {
                errors.push(format!("{endpoint}: required parameter '{name}' missing"));
            }
        }
        errors
    }

    /// Checks every line of a request log (`--request-log`): lines with a status below 400, or
    /// all of them with `all`. Returns `line number: problem` texts.
    pub fn check_log(&self, log: &str, all: bool) -> Vec<String> {
        let mut out = Vec::new();
        for (i, line) in log.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
            let Ok(entry) = serde_json::from_str::<Value>(line) else {
                out.push(format!("{}: not JSON", i + 1));
                continue;
            };
            let status = entry.get("status").and_then(Value::as_u64).unwrap_or(0);
            if !all && status >= 400 {
                continue;
            }
            let Some(endpoint) = entry.get("endpoint").and_then(Value::as_str) else {
                out.push(format!(
                    "{}: {} {}: no such endpoint",
                    i + 1,
                    text(&entry["method"]),
                    text(&entry["path"])
                ));
                continue;
            };
            let empty = Map::new();
            let params = entry.get("params").and_then(Value::as_object).unwrap_or(&empty);
            out.extend(
                self.check_request(endpoint, params)
                    .into_iter()
                    .map(|e| format!("{}: {e}", i + 1)),
            );
        }
        out
    }
}

/// Checks a value against a parameter schema (type, enum, bounds, length, pattern, property
/// string keys).
pub fn check_value(schema: &Value, value: &Value) -> Result<(), String> {
    let ty = schema.get("type").and_then(Value::as_str).unwrap_or("string");
    let t = text(value);
    match ty {
        "boolean" => {
            let ok = matches!(value, Value::Bool(_)) || t == "0" || t == "1";
            if !ok {
                return Err(format!("not a boolean: '{t}'"));
            }
        }
        "integer" => {
            let ok =
                value.is_i64() || value.is_u64() || Regex::new(r"^[+-]?\d+$").is_ok_and(|r| r.is_match(&t));
            if !ok {
                return Err(format!("not an integer: '{t}'"));
            }
        }
        "number" if t.parse::<f64>().is_err() => return Err(format!("not a number: '{t}'")),
        "array" => return Ok(()),
        _ => {}
    }
    if let Ok(n) = t.parse::<f64>() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64)
            && n < min
        {
            return Err(format!("{t} below the minimum {min}"));
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64)
            && n > max
        {
            return Err(format!("{t} above the maximum {max}"));
        }
    }
    if let Some(values) = schema.get("enum").and_then(Value::as_array)
        && !values.iter().any(|v| text(v) == t)
    {
        return Err(format!("'{t}' not in the enumeration"));
    }
    if let Some(max) = schema.get("maxLength").and_then(Value::as_u64)
        && t.chars().count() as u64 > max
    {
        return Err(format!("longer than {max} characters"));
    }
    if let Some(p) = schema.get("pattern").and_then(Value::as_str)
        && let Some(re) = perl_regex(p)
        && !re.is_match(&t)
    {
        return Err(format!("'{t}' does not match the pattern {p}"));
    }
    if let Some(format) = schema.get("format").and_then(Value::as_object) {
        check_property_string(format, &t)?;
    }
    Ok(())
}

/// Checks a property string against an inline `format` object: known keys (or aliases), a
/// default key for bare values, required keys, and each value against its key's schema.
pub fn check_property_string(format: &Map<String, Value>, value: &str) -> Result<(), String> {
    let mut seen: BTreeMap<String, String> = BTreeMap::new();
    for part in value.split(',').filter(|p| !p.trim().is_empty()) {
        let (key, v) = match part.split_once('=') {
            Some((k, v)) => (k.to_owned(), v.to_owned()),
            None => {
                let dk = format
                    .iter()
                    .find(|(_, s)| s.get("default_key").and_then(Value::as_i64) == Some(1))
                    .map(|(k, _)| k.clone())
                    .ok_or_else(|| format!("'{part}' without a key and the format has no default key"))?;
                (dk, part.to_owned())
            }
        };
        let schema = format
            .get(&key)
            .ok_or_else(|| format!("unknown key '{key}' in '{value}'"))?;
        let target = schema
            .get("alias")
            .and_then(Value::as_str)
            .unwrap_or(&key)
            .to_owned();
        if seen.insert(target.clone(), v.clone()).is_some() {
            return Err(format!("duplicate key '{target}' in '{value}'"));
        }
        if schema.get("alias").is_none() {
            let v = match schema.get("type").and_then(Value::as_str) {
                Some("boolean") => crate::formats::parse_boolean(&v).unwrap_or(&v).to_owned(),
                _ => v,
            };
            check_value(schema, &Value::String(v)).map_err(|e| format!("{key}: {e}"))?;
        }
    }
    for (key, schema) in format {
        let optional =
            schema.get("optional").and_then(Value::as_i64) == Some(1) || schema.get("alias").is_some();
        let aliased = format
            .values()
            .any(|s| s.get("keyAlias").and_then(Value::as_str) == Some(key.as_str()));
        if !optional && !seen.contains_key(key) && !aliased {
            return Err(format!("required key '{key}' missing in '{value}'"));
        }
    }
    Ok(())
}
