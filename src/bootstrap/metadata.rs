//! NoCloud `meta-data`, byte for byte as capmox renders it for the values Kubernetes and Proxmox
//! produce (others are quoted or refused, see [`super::safe`]), plus optional additive keys.

use super::error::BootstrapError;
use super::model::MachineBootstrapInput;
use super::safe::{check_identity, is_canonical_uuid, yaml_scalar};

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
    check_identity(input)?;
    // capmox writes every value plain; a value that plain style would turn into something else
    // (a number, a date, a boolean, another key) is quoted instead. Host names and SMBIOS uuids
    // as Kubernetes and Proxmox make them stay byte-identical to capmox's output.
    let id = if is_canonical_uuid(&input.instance_id) {
        input.instance_id.clone()
    } else {
        yaml_scalar(&input.instance_id)
    };
    let host = yaml_scalar(&input.hostname);
    let mut out = format!("instance-id: {id}\nlocal-hostname: {host}\nhostname: {host}\n");
    if input.provider_id_injection {
        let pid = input.provider_id();
        let pid = if is_canonical_uuid(&input.instance_id) {
            pid
        } else {
            yaml_scalar(&pid)
        };
        out.push_str(&format!("provider-id: {pid}\n"));
    }
    if let Some(version) = input.kubernetes_version.as_deref().filter(|v| !v.is_empty()) {
        out.push_str(&format!("kubernetes-version: {}\n", yaml_scalar(version)));
    }
    let extra = &input.extra_metadata;
    for (key, value) in [("proxmox_node", &extra.proxmox_node), ("zone", &extra.zone)] {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            out.push_str(&format!("{key}: {}\n", yaml_scalar(value)));
        }
    }
    Ok(out)
}
