//! The parsed form of an `openAPIV3Schema`: one [`Node`] per schema object.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use crate::SchemaError;
use crate::celrules::Rule;
use crate::pattern::Pattern;

/// `additionalProperties`: either a boolean or a schema.
#[derive(Debug, Clone)]
pub(crate) enum Additional {
    /// `additionalProperties: true|false`.
    Bool(bool),
    /// `additionalProperties: {schema}`.
    Schema(Box<Node>),
}

/// One schema node with the keywords the engine understands.
#[derive(Debug, Clone, Default)]
pub(crate) struct Node {
    pub ty: Option<String>,
    pub format: Option<String>,
    pub nullable: bool,
    pub properties: BTreeMap<String, Node>,
    pub additional: Option<Additional>,
    pub items: Option<Box<Node>>,
    pub required: Vec<String>,
    pub enum_values: Option<Vec<Value>>,
    pub default: Option<Value>,
    pub minimum: Option<f64>,
    pub maximum: Option<f64>,
    pub exclusive_minimum: bool,
    pub exclusive_maximum: bool,
    pub multiple_of: Option<f64>,
    pub min_length: Option<u64>,
    pub max_length: Option<u64>,
    pub pattern: Option<Arc<Pattern>>,
    pub min_items: Option<u64>,
    pub max_items: Option<u64>,
    pub unique_items: bool,
    pub min_properties: Option<u64>,
    pub max_properties: Option<u64>,
    pub preserve_unknown: bool,
    pub embedded_resource: bool,
    pub list_type: Option<String>,
    pub list_map_keys: Vec<String>,
    /// `x-kubernetes-map-type` (`granular` or `atomic`).
    pub map_type: Option<String>,
    /// `x-kubernetes-int-or-string`.
    pub int_or_string: bool,
    pub all_of: Vec<Node>,
    pub any_of: Vec<Node>,
    pub one_of: Vec<Node>,
    pub not: Option<Box<Node>>,
    pub rules: Vec<Arc<Rule>>,
}

impl Node {
    /// The schema for the value stored under `key` of an object described by this node.
    pub fn child_for_key(&self, key: &str) -> Option<&Node> {
        if let Some(p) = self.properties.get(key) {
            return Some(p);
        }
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }

    /// The additionalProperties schema, if any.
    pub fn additional_schema(&self) -> Option<&Node> {
        match &self.additional {
            Some(Additional::Schema(s)) => Some(s),
            _ => None,
        }
    }
}

/// Parses a schema object; `path` is a JSON-pointer-like location for error messages.
pub(crate) fn parse(v: &Value, path: &str, rules_out: &mut Vec<Arc<Rule>>) -> Result<Node, SchemaError> {
    let obj = v.as_object().ok_or_else(|| SchemaError::NotAnObject {
        path: path.to_string(),
    })?;
    let mut n = Node {
        ty: opt_str(obj, "type", path)?,
        format: opt_str(obj, "format", path)?,
        nullable: opt_bool(obj, "nullable", path)?,
        required: str_list(obj, "required", path)?,
        enum_values: match obj.get("enum") {
            None | Some(Value::Null) => None,
            Some(Value::Array(a)) => Some(a.clone()),
            Some(_) => return Err(bad(path, "enum", "must be a list")),
        },
        default: obj.get("default").cloned(),
        minimum: opt_f64(obj, "minimum", path)?,
        maximum: opt_f64(obj, "maximum", path)?,
        exclusive_minimum: opt_bool(obj, "exclusiveMinimum", path)?,
        exclusive_maximum: opt_bool(obj, "exclusiveMaximum", path)?,
        multiple_of: opt_f64(obj, "multipleOf", path)?,
        min_length: opt_u64(obj, "minLength", path)?,
        max_length: opt_u64(obj, "maxLength", path)?,
        min_items: opt_u64(obj, "minItems", path)?,
        max_items: opt_u64(obj, "maxItems", path)?,
        unique_items: opt_bool(obj, "uniqueItems", path)?,
        min_properties: opt_u64(obj, "minProperties", path)?,
        max_properties: opt_u64(obj, "maxProperties", path)?,
        preserve_unknown: opt_bool(obj, "x-kubernetes-preserve-unknown-fields", path)?,
        embedded_resource: opt_bool(obj, "x-kubernetes-embedded-resource", path)?,
        list_type: opt_str(obj, "x-kubernetes-list-type", path)?,
        list_map_keys: str_list(obj, "x-kubernetes-list-map-keys", path)?,
        map_type: opt_str(obj, "x-kubernetes-map-type", path)?,
        int_or_string: opt_bool(obj, "x-kubernetes-int-or-string", path)?,
        ..Node::default()
    };
    if let Some(p) = opt_str(obj, "pattern", path)? {
        let compiled = Pattern::new(&p).map_err(|e| SchemaError::Pattern {
            path: path.to_string(),
            pattern: p.clone(),
            reason: e,
        })?;
        n.pattern = Some(Arc::new(compiled));
    }
    if let Some(props) = obj.get("properties") {
        let props = props
            .as_object()
            .ok_or_else(|| bad(path, "properties", "must be an object"))?;
        for (k, pv) in props {
            let child = parse(pv, &format!("{path}.properties[{k}]"), rules_out)?;
            n.properties.insert(k.clone(), child);
        }
    }
    match obj.get("additionalProperties") {
        None | Some(Value::Null) => {}
        Some(Value::Bool(b)) => n.additional = Some(Additional::Bool(*b)),
        Some(s @ Value::Object(_)) => {
            let child = parse(s, &format!("{path}.additionalProperties"), rules_out)?;
            n.additional = Some(Additional::Schema(Box::new(child)));
        }
        Some(_) => return Err(bad(path, "additionalProperties", "must be a boolean or a schema")),
    }
    match obj.get("items") {
        None | Some(Value::Null) => {}
        Some(s @ Value::Object(_)) => {
            n.items = Some(Box::new(parse(s, &format!("{path}.items"), rules_out)?));
        }
        Some(_) => return Err(bad(path, "items", "must be a single schema")),
    }
    for (key, target) in [
        ("allOf", &mut n.all_of),
        ("anyOf", &mut n.any_of),
        ("oneOf", &mut n.one_of),
    ] {
        match obj.get(key) {
            None | Some(Value::Null) => {}
            Some(Value::Array(list)) => {
                for (i, s) in list.iter().enumerate() {
                    target.push(parse(s, &format!("{path}.{key}[{i}]"), rules_out)?);
                }
            }
            Some(_) => return Err(bad(path, key, "must be a list of schemas")),
        }
    }
    match obj.get("not") {
        None | Some(Value::Null) => {}
        Some(s) => n.not = Some(Box::new(parse(s, &format!("{path}.not"), rules_out)?)),
    }
    match obj.get("x-kubernetes-validations") {
        None | Some(Value::Null) => {}
        Some(Value::Array(list)) => {
            for r in list {
                let rule = Arc::new(Rule::parse(r, path)?);
                rules_out.push(rule.clone());
                n.rules.push(rule);
            }
        }
        Some(_) => return Err(bad(path, "x-kubernetes-validations", "must be a list")),
    }
    Ok(n)
}

fn bad(path: &str, keyword: &str, reason: &str) -> SchemaError {
    SchemaError::InvalidKeyword {
        path: path.to_string(),
        keyword: keyword.to_string(),
        reason: reason.to_string(),
    }
}

fn opt_str(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<String>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(_) => Err(bad(path, key, "must be a string")),
    }
}

fn opt_bool(obj: &Map<String, Value>, key: &str, path: &str) -> Result<bool, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(_) => Err(bad(path, key, "must be a boolean")),
    }
}

fn opt_f64(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<f64>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(_) => Err(bad(path, key, "must be a number")),
    }
}

fn opt_u64(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Option<u64>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => n
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(path, key, "must be a non-negative integer")),
        Some(_) => Err(bad(path, key, "must be a non-negative integer")),
    }
}

fn str_list(obj: &Map<String, Value>, key: &str, path: &str) -> Result<Vec<String>, SchemaError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| {
                x.as_str()
                    .map(str::to_string)
                    .ok_or_else(|| bad(path, key, "must be a list of strings"))
            })
            .collect(),
        Some(_) => Err(bad(path, key, "must be a list of strings")),
    }
}
