//! NoCloud `meta-data`, byte for byte as capmox renders it, plus optional additive keys.

use super::error::BootstrapError;
use super::model::MachineBootstrapInput;

/// Renders `meta-data`:
///
/// ```text
/// instance-id: <uuid>
/// local-hostname: <name>
/// hostname: <name>
/// provider-id: proxmox://<uuid>      (only with providerIDInjection)
/// kubernetes-version: <version>      (only when the Machine has one)
/// proxmox_node: <node>               (additive, only when set)
/// zone: <zone>                       (additive, only when set)
/// ```
pub fn render_metadata(input: &MachineBootstrapInput) -> Result<String, BootstrapError> {
    if input.hostname.is_empty() {
        return Err(BootstrapError::MissingHostname);
    }
    if input.instance_id.is_empty() {
        return Err(BootstrapError::MissingInstanceId);
    }
    let mut out = format!(
        "instance-id: {id}\nlocal-hostname: {host}\nhostname: {host}\n",
        id = input.instance_id,
        host = input.hostname
    );
    if input.provider_id_injection {
        out.push_str(&format!("provider-id: {}\n", input.provider_id()));
    }
    if let Some(version) = input.kubernetes_version.as_deref().filter(|v| !v.is_empty()) {
        out.push_str(&format!("kubernetes-version: {version}\n"));
    }
    let extra = &input.extra_metadata;
    for (key, value) in [("proxmox_node", &extra.proxmox_node), ("zone", &extra.zone)] {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            out.push_str(&format!("{key}: {}\n", yaml_scalar(value)));
        }
    }
    Ok(out)
}

/// `value` as a YAML scalar that reads back as the same string: plain when that is unambiguous,
/// single-quoted otherwise.
pub(crate) fn yaml_scalar(value: &str) -> String {
    let plain_safe = !value.is_empty()
        && value
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'))
        && value.chars().next().is_some_and(|c| c.is_ascii_alphabetic())
        && !matches!(
            value.to_ascii_lowercase().as_str(),
            "true" | "false" | "yes" | "no" | "on" | "off" | "null" | "y" | "n" | "nan" | "inf"
        );
    if plain_safe {
        value.to_owned()
    } else {
        format!("'{}'", value.replace('\'', "''"))
    }
}
