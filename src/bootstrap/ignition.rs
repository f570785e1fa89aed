//! Ignition enrichment (bootstrap format `ignition`, Flatcar), as capmox does it.
//!
//! The bootstrap value is parsed as an Ignition 2.x JSON config (capmox uses the spec 2.3 types) and gets,
//! appended to whatever it already holds: the files `/etc/hostname` (`data:,<name>`) and `/etc/proxmox-env`
//! (mode 420, URL-path-escaped `COREOS_CUSTOM_*` variables), the enabled unit `systemd-resolved.service`,
//! and the networkd units of [`super::networkd`]. Unlike capmox (which round-trips through typed Go structs)
//! unknown fields of the original document are kept; object keys are emitted sorted, compact, like Go's
//! `encoding/json`.

use serde_json::{Map, Value, json};

use super::error::BootstrapError;
use super::model::MachineBootstrapInput;
use super::networkd::render_networkd_units;

/// Enriches the Ignition config in `input.bootstrap.value` and returns the JSON for `user-data`.
pub fn enrich_ignition(input: &MachineBootstrapInput) -> Result<Vec<u8>, BootstrapError> {
    // The host name and instance id go unescaped into `/etc/hostname` and `/etc/proxmox-env`.
    super::safe::check_identity(input)?;
    let mut doc: Value = serde_json::from_slice(&input.bootstrap.value)
        .map_err(|e| BootstrapError::IgnitionParse(e.to_string()))?;
    let root = doc
        .as_object_mut()
        .ok_or_else(|| BootstrapError::IgnitionParse("config is not a JSON object".to_owned()))?;
    let version = root
        .get("ignition")
        .and_then(|i| i.get("version"))
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_owned();
    if !version.starts_with("2.") {
        return Err(BootstrapError::IgnitionVersion(version));
    }

    let units = render_networkd_units(&input.network)?;

    let files = [
        json!({
            "filesystem": "root",
            "path": "/etc/hostname",
            "overwrite": true,
            "mode": 420,
            "contents": {"source": format!("data:,{}", input.hostname), "verification": {}},
        }),
        json!({
            "filesystem": "root",
            "path": "/etc/proxmox-env",
            "overwrite": true,
            "mode": 420,
            "contents": {"source": format!("data:,{}", proxmox_env(input)), "verification": {}},
        }),
    ];
    append(root, &["storage", "files"], files)?;
    append(
        root,
        &["networkd", "units"],
        units
            .into_iter()
            .map(|u| json!({"name": u.name, "contents": u.contents})),
    )?;
    append(
        root,
        &["systemd", "units"],
        [json!({"name": "systemd-resolved.service", "enable": true})],
    )?;

    serde_json::to_vec(&sorted(doc)).map_err(|e| BootstrapError::IgnitionParse(e.to_string()))
}

/// The `/etc/proxmox-env` text before escaping: hostname, instance id, provider id and the default-pool
/// addresses (`ip/prefix`).
pub fn proxmox_env_plain(input: &MachineBootstrapInput) -> String {
    let mut content = format!(
        "COREOS_CUSTOM_HOSTNAME={}\nCOREOS_CUSTOM_INSTANCE_ID={}\nCOREOS_CUSTOM_PROVIDER_ID={}",
        input.hostname,
        input.instance_id,
        input.provider_id()
    );
    for dev in &input.network.devices {
        for a in dev.addresses.iter().filter(|a| a.is_default) {
            let key = if a.ip.is_ipv4() { "IPV4" } else { "IPV6" };
            content.push_str(&format!("\nCOREOS_CUSTOM_PRIVATE_{key}={}", a.cidr()));
        }
    }
    content
}

fn proxmox_env(input: &MachineBootstrapInput) -> String {
    path_escape(&proxmox_env_plain(input))
}

/// Go's `url.PathEscape`: keeps `A-Za-z0-9-_.~$&+:=@`, percent-encodes everything else (upper-case hex).
pub fn path_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.~$&+:=@".contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Appends `items` to the array at `path` (objects created as needed).
fn append(
    root: &mut Map<String, Value>,
    path: &[&str; 2],
    items: impl IntoIterator<Item = Value>,
) -> Result<(), BootstrapError> {
    let [section, list] = path;
    let section_value = root
        .entry(section.to_string())
        .or_insert_with(|| Value::Object(Map::new()));
    let obj = section_value
        .as_object_mut()
        .ok_or_else(|| BootstrapError::IgnitionParse(format!("{section} is not a JSON object")))?;
    let list_value = obj
        .entry(list.to_string())
        .or_insert_with(|| Value::Array(Vec::new()));
    if list_value.is_null() {
        *list_value = Value::Array(Vec::new());
    }
    let arr = list_value
        .as_array_mut()
        .ok_or_else(|| BootstrapError::IgnitionParse(format!("{section}.{list} is not a JSON array")))?;
    arr.extend(items);
    Ok(())
}

/// Rebuilds every object with its keys in sorted order (whatever map type serde_json is built with).
fn sorted(v: Value) -> Value {
    match v {
        Value::Object(map) => {
            let mut entries: Vec<(String, Value)> = map.into_iter().collect();
            entries.sort_by(|a, b| a.0.cmp(&b.0));
            Value::Object(entries.into_iter().map(|(k, v)| (k, sorted(v))).collect())
        }
        Value::Array(items) => Value::Array(items.into_iter().map(sorted).collect()),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_escape_is_gos() {
        assert_eq!(path_escape("A=b\nc/d,e;f?g h"), "A=b%0Ac%2Fd%2Ce%3Bf%3Fg%20h");
        assert_eq!(path_escape("proxmox://x@y:z"), "proxmox:%2F%2Fx@y:z");
    }
}
