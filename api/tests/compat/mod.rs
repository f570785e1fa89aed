//! Access to capmox's example manifests for the round-trip tests: locating them, substituting
//! clusterctl `${VAR}` expressions with representative values and splitting multi-document YAML.

#![allow(dead_code)]

use std::path::{Path, PathBuf};

use serde_json::Value;

/// Root of the capmox v0.9 compatibility material: the parent of `$CAPMOX_COMPAT_DIR` (which names
/// the `crd` directory) when set, else `../shared/compat/capmox-v0.9` relative to the repository root.
/// `None` when it does not exist.
pub fn compat_root() -> Option<PathBuf> {
    let root = match std::env::var_os("CAPMOX_COMPAT_DIR") {
        Some(dir) => PathBuf::from(dir).join(".."),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared/compat/capmox-v0.9"),
    };
    root.join("templates").is_dir().then_some(root)
}

/// Every `.yaml`/`.yml` file under `dir`, recursively, sorted.
pub fn yaml_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for entry in entries.filter_map(Result::ok) {
        let path = entry.path();
        if path.is_dir() {
            out.extend(yaml_files(&path));
        } else if path.extension().is_some_and(|x| x == "yaml" || x == "yml") {
            out.push(path);
        }
    }
    out.sort();
    out
}

/// Representative value for a clusterctl variable: chosen so that the substituted manifests are
/// valid against the schema (lists where lists are expected, numbers where numbers are expected).
pub fn value_for(name: &str) -> Option<&'static str> {
    Some(match name {
        "CLUSTER_NAME" => "test-cluster",
        "NAMESPACE" => "default",
        "KUBERNETES_VERSION" => "v1.33.1",
        "CONTROL_PLANE_ENDPOINT_IP" => "10.10.10.9",
        "CONTROL_PLANE_MACHINE_COUNT" | "WORKER_MACHINE_COUNT" | "LOAD_BALANCER_MACHINE_COUNT" => "1",
        "TEMPLATE_VMID" => "100",
        "TEMPLATE_TAGS" => "capmox,ubuntu-2404",
        "PROXMOX_SOURCENODE" => "pve1",
        "BRIDGE" | "SECONDARY_BRIDGE" | "EXT_SERVICE_BRIDGE" => "vmbr0",
        "BOOT_VOLUME_DEVICE" => "scsi0",
        "DNS_SERVERS" => "[8.8.8.8, 8.8.4.4]",
        "NODE_IP_RANGES" => "[10.10.10.10-10.10.10.50, 10.10.10.60]",
        "SECONDARY_IP_RANGES" => "[10.20.10.10-10.20.10.50]",
        "LB_BGP_IPV4_RANGES" => "[10.30.10.10-10.30.10.50]",
        "NODE_IPV6_RANGES" => "[2001:db8::10-2001:db8::50]",
        "IP_PREFIX" | "SECONDARY_IP_PREFIX" | "LB_BGP_IPV4_PREFIX" => "24",
        "IPV6_PREFIX" | "LB_BGP_IPV6_PREFIX" => "64",
        "GATEWAY" => "10.10.10.1",
        "SECONDARY_GATEWAY" => "10.20.10.1",
        "IPV6_GATEWAY" => "2001:db8::1",
        "VM_SSH_KEYS" => "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIExampleKeyOnly test@example",
        "PROXMOX_URL" => "https://pve.example:8006",
        "PROXMOX_TOKEN" => "capmox@pve!capi",
        "PROXMOX_SECRET" => "not-a-secret",
        n if n.ends_with("_ASN") => "64512",
        _ => return None,
    })
}

/// Replaces `${VAR}`, `${VAR:=default}`, `${VAR=default}` and `${VAR:-default}` expressions: a
/// variable with a default keeps its default, others get [`value_for`] (or `x-<var>` as a last resort).
pub fn substitute(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[start..]);
            return out;
        };
        let expr = &after[..end];
        let (name, default) = match expr.find([':', '=']) {
            Some(i) => {
                let default = expr[i..].trim_start_matches([':', '=', '-']);
                (&expr[..i], Some(default))
            }
            None => (expr, None),
        };
        let value = match (default, value_for(name)) {
            (Some(d), _) => d.to_owned(),
            (None, Some(v)) => v.to_owned(),
            (None, None) => format!("x-{}", name.to_ascii_lowercase().replace('_', "-")),
        };
        out.push_str(&value);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    out
}

/// Parses a multi-document YAML text into JSON values (empty documents dropped).
pub fn documents(text: &str) -> Result<Vec<Value>, String> {
    let docs: Vec<Value> = serde_saphyr::from_multiple(text).map_err(|e| e.to_string())?;
    Ok(docs.into_iter().filter(|d| !d.is_null()).collect())
}

/// Every object in capmox's `templates`, `samples` and `examples` with the given `apiVersion` and a
/// kind starting with `Proxmox`, as `(file, kind, object)`.
pub fn proxmox_objects(root: &Path, api_version: &str) -> Vec<(PathBuf, String, Value)> {
    let mut out = Vec::new();
    for sub in ["templates", "samples", "examples"] {
        for file in yaml_files(&root.join(sub)) {
            let text =
                std::fs::read_to_string(&file).unwrap_or_else(|e| panic!("reading {}: {e}", file.display()));
            let docs =
                documents(&substitute(&text)).unwrap_or_else(|e| panic!("parsing {}: {e}", file.display()));
            for doc in docs {
                let kind = doc
                    .get("kind")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_owned();
                if doc.get("apiVersion").and_then(Value::as_str) == Some(api_version)
                    && kind.starts_with("Proxmox")
                {
                    out.push((file.clone(), kind, doc));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn substitutes_plain_and_defaulted_variables() {
        assert_eq!(substitute("a: ${CLUSTER_NAME}"), "a: test-cluster");
        assert_eq!(substitute("n: ${NUM_CORES:=4}"), "n: 4");
        assert_eq!(substitute("i: ${VIP_NETWORK_INTERFACE=\"\"}"), "i: \"\"");
        assert_eq!(substitute("l: ${ALLOWED_NODES:=[]}"), "l: []");
        assert_eq!(substitute("x: ${SOME_THING}"), "x: x-some-thing");
    }
}
