//! `meta.k8s.io/v1` Table responses for custom resources (what `kubectl get` asks for): Name plus the
//! CRD version's `additionalPrinterColumns`, or Name and Age when it declares none.

use serde_json::{Value, json};

use super::crds::ResourceDef;

/// Evaluates the JSONPath subset used by printer columns: `.a.b`, `['a.b']`, `[0]`, `[*]` and
/// `[?(@.f=="v")]`. Returns every match.
pub fn eval(path: &str, root: &Value) -> Vec<Value> {
    let mut cur = vec![root.clone()];
    let p = path.trim().trim_start_matches('{').trim_end_matches('}');
    let mut rest = p.strip_prefix('$').unwrap_or(p);
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            let end = r.find(['.', '[']).unwrap_or(r.len());
            let key = &r[..end];
            cur = cur.iter().filter_map(|v| v.get(key).cloned()).collect();
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix('[') {
            let Some(end) = r.find(']') else { return Vec::new() };
            let inner = &r[..end];
            rest = &r[end + 1..];
            if let Some(q) = inner.strip_prefix('\'').and_then(|x| x.strip_suffix('\'')) {
                let key = q.replace("\\.", ".");
                cur = cur.iter().filter_map(|v| v.get(&key).cloned()).collect();
            } else if inner == "*" {
                cur = cur
                    .iter()
                    .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                    .collect();
            } else if let Some(f) = inner.strip_prefix("?(@.").and_then(|x| x.strip_suffix(')')) {
                let (field, want) = match f.split_once("==") {
                    Some((a, b)) => (a.trim(), b.trim().trim_matches(|c| c == '"' || c == '\'')),
                    None => return Vec::new(),
                };
                cur = cur
                    .iter()
                    .flat_map(|v| v.as_array().cloned().unwrap_or_default())
                    .filter(|e| e.get(field).and_then(Value::as_str) == Some(want))
                    .collect();
            } else if let Ok(i) = inner.parse::<usize>() {
                cur = cur.iter().filter_map(|v| v.get(i).cloned()).collect();
            } else {
                return Vec::new();
            }
        } else {
            return Vec::new();
        }
    }
    cur
}

/// Renders a duration like kubectl's `HumanDuration`.
pub fn human_duration(secs: i64) -> String {
    if secs < 0 {
        return "0s".into();
    }
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86400);
    if secs < 120 {
        format!("{secs}s")
    } else if m < 10 {
        if secs % 60 == 0 {
            format!("{m}m")
        } else {
            format!("{m}m{}s", secs % 60)
        }
    } else if m < 180 {
        format!("{m}m")
    } else if h < 8 {
        if m % 60 == 0 {
            format!("{h}h")
        } else {
            format!("{h}h{}m", m % 60)
        }
    } else if h < 48 {
        format!("{h}h")
    } else if h < 24 * 8 {
        if h % 24 == 0 {
            format!("{d}d")
        } else {
            format!("{d}d{}h", h % 24)
        }
    } else if d < 365 * 2 {
        format!("{d}d")
    } else {
        format!("{}y{}d", d / 365, d % 365)
    }
}

fn age(ts: &str) -> Value {
    match chrono::DateTime::parse_from_rfc3339(ts) {
        Ok(t) => json!(human_duration(
            (chrono::Utc::now() - t.with_timezone(&chrono::Utc)).num_seconds()
        )),
        Err(_) => json!("<unknown>"),
    }
}

fn cell(ty: &str, vals: Vec<Value>) -> Value {
    if vals.is_empty() {
        return Value::Null;
    }
    if ty == "date" {
        return vals[0].as_str().map(age).unwrap_or(Value::Null);
    }
    if vals.len() == 1 {
        return match &vals[0] {
            Value::Object(_) | Value::Array(_) => json!(vals[0].to_string()),
            v => v.clone(),
        };
    }
    json!(
        vals.iter()
            .map(|v| v.as_str().map(str::to_string).unwrap_or_else(|| v.to_string()))
            .collect::<Vec<_>>()
            .join(",")
    )
}

/// Builds a Table for `items` (already in `version`).
pub fn table(def: &ResourceDef, version: &str, items: &[Value], rv: &str, cont: Option<&Value>) -> Value {
    let cols = def
        .version(version)
        .map(|v| v.columns.clone())
        .unwrap_or_default();
    let mut defs = vec![
        json!({"name": "Name", "type": "string", "format": "name", "priority": 0,
        "description": "Name must be unique within a namespace."}),
    ];
    for c in &cols {
        defs.push(json!({
            "name": c.get("name").cloned().unwrap_or(json!("")),
            "type": c.get("type").cloned().unwrap_or(json!("string")),
            "format": c.get("format").cloned().unwrap_or(json!("")),
            "description": c.get("description").cloned().unwrap_or(json!("")),
            "priority": c.get("priority").cloned().unwrap_or(json!(0)),
        }));
    }
    // Like kube-apiserver: an Age column only when the CRD version declares no columns.
    let has_age = !cols.is_empty();
    if !has_age {
        defs.push(json!({"name": "Age", "type": "date", "format": "", "priority": 0,
            "description": "CreationTimestamp is a timestamp representing the server time when this object was created."}));
    }
    let rows: Vec<Value> = items
        .iter()
        .map(|o| {
            let mut cells = vec![o.pointer("/metadata/name").cloned().unwrap_or(Value::Null)];
            for c in &cols {
                let ty = c.get("type").and_then(Value::as_str).unwrap_or("string");
                let path = c.get("jsonPath").and_then(Value::as_str).unwrap_or_default();
                cells.push(cell(ty, eval(path, o)));
            }
            if !has_age {
                cells.push(
                    o.pointer("/metadata/creationTimestamp")
                        .and_then(Value::as_str)
                        .map(age)
                        .unwrap_or(Value::Null),
                );
            }
            json!({"cells": cells, "object": {
                "kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
            }})
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        meta["continue"] = c.clone();
    }
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": meta, "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonpath_subset() {
        let o = json!({"metadata": {"labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "status": {"ready": true, "conditions": [{"type": "A", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        assert_eq!(eval(".status.ready", &o), vec![json!(true)]);
        assert_eq!(
            eval(".metadata.labels['cluster\\.x-k8s\\.io/cluster-name']", &o),
            vec![json!("c1")]
        );
        assert_eq!(
            eval(".status.conditions[?(@.type==\"Ready\")].status", &o),
            vec![json!("True")]
        );
        assert_eq!(eval(".status.conditions[0].type", &o), vec![json!("A")]);
        assert!(eval(".spec.missing", &o).is_empty());
    }

    #[test]
    fn durations() {
        assert_eq!(human_duration(5), "5s");
        assert_eq!(human_duration(150), "2m30s");
        assert_eq!(human_duration(3 * 3600 + 60), "3h1m");
        assert_eq!(human_duration(3 * 86400), "3d");
    }
}
