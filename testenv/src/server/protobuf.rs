//! Decoding of the few protobuf request bodies kubectl's typed generators send
//! (`kubectl create namespace|configmap|secret`): the `k8s\0` envelope (`runtime.Unknown`) around a
//! Namespace, ConfigMap or Secret. Everything else in protobuf is answered with 415.

use base64::Engine;
use serde_json::{Map, Value, json};

enum Wire<'a> {
    Varint(u64),
    Bytes(&'a [u8]),
}

fn varint(b: &[u8], i: &mut usize) -> Option<u64> {
    let mut out = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*i)?;
        *i += 1;
        out |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Some(out);
        }
    }
    None
}

fn fields(b: &[u8]) -> Option<Vec<(u64, Wire<'_>)>> {
    let mut i = 0;
    let mut out = Vec::new();
    while i < b.len() {
        let tag = varint(b, &mut i)?;
        let (num, wt) = (tag >> 3, tag & 7);
        match wt {
            0 => out.push((num, Wire::Varint(varint(b, &mut i)?))),
            2 => {
                let len = usize::try_from(varint(b, &mut i)?).ok()?;
                let end = i.checked_add(len).filter(|e| *e <= b.len())?;
                out.push((num, Wire::Bytes(&b[i..end])));
                i = end;
            }
            1 => i += 8,
            5 => i += 4,
            _ => return None,
        }
    }
    Some(out)
}

fn text(b: &[u8]) -> Value {
    json!(String::from_utf8_lossy(b))
}

fn map_entry(b: &[u8], bytes_value: bool) -> Option<(String, Value)> {
    let mut k = String::new();
    let mut v = json!("");
    for (n, w) in fields(b)? {
        if let Wire::Bytes(x) = w {
            match n {
                1 => k = String::from_utf8_lossy(x).into_owned(),
                2 if bytes_value => v = json!(base64::engine::general_purpose::STANDARD.encode(x)),
                2 => v = text(x),
                _ => {}
            }
        }
    }
    Some((k, v))
}

fn insert_entry(m: &mut Map<String, Value>, key: &str, b: &[u8], bytes_value: bool) -> Option<()> {
    let (k, v) = map_entry(b, bytes_value)?;
    let e = m.entry(key).or_insert_with(|| json!({}));
    if let Some(o) = e.as_object_mut() {
        o.insert(k, v);
    }
    Some(())
}

fn object_meta(b: &[u8]) -> Option<Value> {
    let mut m = Map::new();
    for (n, w) in fields(b)? {
        match (n, w) {
            (1, Wire::Bytes(x)) => {
                m.insert("name".into(), text(x));
            }
            (2, Wire::Bytes(x)) => {
                m.insert("generateName".into(), text(x));
            }
            (3, Wire::Bytes(x)) => {
                m.insert("namespace".into(), text(x));
            }
            (6, Wire::Bytes(x)) => {
                m.insert("resourceVersion".into(), text(x));
            }
            (11, Wire::Bytes(x)) => insert_entry(&mut m, "labels", x, false)?,
            (12, Wire::Bytes(x)) => insert_entry(&mut m, "annotations", x, false)?,
            (14, Wire::Bytes(x)) => {
                let e = m.entry("finalizers").or_insert_with(|| json!([]));
                if let Some(a) = e.as_array_mut() {
                    a.push(text(x));
                }
            }
            _ => {}
        }
    }
    Some(Value::Object(m))
}

fn decode_object(kind: &str, b: &[u8]) -> Option<Value> {
    let mut o = Map::new();
    for (n, w) in fields(b)? {
        match (kind, n, w) {
            (_, 1, Wire::Bytes(x)) => {
                o.insert("metadata".into(), object_meta(x)?);
            }
            ("ConfigMap", 2, Wire::Bytes(x)) => insert_entry(&mut o, "data", x, false)?,
            ("ConfigMap", 3, Wire::Bytes(x)) => insert_entry(&mut o, "binaryData", x, true)?,
            ("ConfigMap", 4, Wire::Varint(v)) | ("Secret", 5, Wire::Varint(v)) => {
                o.insert("immutable".into(), json!(v != 0));
            }
            ("Secret", 2, Wire::Bytes(x)) => insert_entry(&mut o, "data", x, true)?,
            ("Secret", 3, Wire::Bytes(x)) => {
                o.insert("type".into(), text(x));
            }
            ("Secret", 4, Wire::Bytes(x)) => insert_entry(&mut o, "stringData", x, false)?,
            ("Namespace", 2, Wire::Bytes(x)) => {
                let fins: Vec<Value> = fields(x)?
                    .into_iter()
                    .filter_map(|(n, w)| match (n, w) {
                        (1, Wire::Bytes(f)) => Some(text(f)),
                        _ => None,
                    })
                    .collect();
                o.insert("spec".into(), json!({"finalizers": fins}));
            }
            _ => {}
        }
    }
    Some(Value::Object(o))
}

/// Decodes a protobuf request body into JSON, for the supported kinds.
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let rest = body.strip_prefix(b"k8s\0").ok_or("missing protobuf envelope")?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), &[][..]);
    for (n, w) in fields(rest).ok_or("malformed protobuf envelope")? {
        match (n, w) {
            (1, Wire::Bytes(tm)) => {
                for (tn, tw) in fields(tm).ok_or("malformed TypeMeta")? {
                    if let Wire::Bytes(x) = tw {
                        match tn {
                            1 => api_version = String::from_utf8_lossy(x).into_owned(),
                            2 => kind = String::from_utf8_lossy(x).into_owned(),
                            _ => {}
                        }
                    }
                }
            }
            (2, Wire::Bytes(x)) => raw = x,
            _ => {}
        }
    }
    if api_version != "v1" || !matches!(kind.as_str(), "ConfigMap" | "Secret" | "Namespace") {
        return Err(format!(
            "protobuf bodies are only understood for core/v1 ConfigMap, Secret and Namespace (got {api_version} {kind})"
        ));
    }
    let mut obj = decode_object(&kind, raw).ok_or_else(|| format!("malformed protobuf {kind}"))?;
    obj["apiVersion"] = json!(api_version);
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn field(n: u8, b: &[u8]) -> Vec<u8> {
        let mut v = vec![(n << 3) | 2, u8::try_from(b.len()).unwrap()];
        v.extend_from_slice(b);
        v
    }

    #[test]
    fn decodes_configmap() {
        let tm = [field(1, b"v1"), field(2, b"ConfigMap")].concat();
        let meta = [
            field(1, b"x"),
            field(3, b"default"),
            field(11, &[field(1, b"a"), field(2, b"b")].concat()),
        ]
        .concat();
        let cm = [
            field(1, &meta),
            field(2, &[field(1, b"k"), field(2, b"v")].concat()),
        ]
        .concat();
        let body = [b"k8s\0".to_vec(), field(1, &tm), field(2, &cm)].concat();
        let v = decode(&body).unwrap();
        assert_eq!(v["metadata"]["name"], "x");
        assert_eq!(v["metadata"]["labels"]["a"], "b");
        assert_eq!(v["data"]["k"], "v");
        assert_eq!(v["kind"], "ConfigMap");
    }
}
