//! NoCloud `meta-data`, byte for byte as capmox renders it for the values Kubernetes and Proxmox
//! produce (others are quoted or refused, see [`super::safe`]), plus optional additive keys.
//!
//! The additive keys say where the machine runs the way the Proxmox cloud controller manager and
//! CSI plugin name it (sergelogvinov's; they label Nodes `topology.kubernetes.io/region` = the
//! Proxmox cluster, `topology.kubernetes.io/zone` = the Proxmox node): `region` and `zone` carry
//! those two values, so a kubelet `--node-labels` built from them (the `proxmox-labels` flavor,
//! or capmox's own copy of it) agrees with what the CCM writes. The machine's network zone has its
//! own key, `network_zone`.

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
/// zone: <node>                       (additive: the Proxmox node, as the CCM/CSI name zones)
/// network_zone: <network zone>       (additive, only when set)
/// region: <proxmox cluster name>     (additive, only when set)
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
    for (key, value) in [
        ("proxmox_node", &extra.proxmox_node),
        ("zone", &extra.proxmox_node),
        ("network_zone", &extra.zone),
        ("region", &extra.region),
    ] {
        if let Some(value) = value.as_deref().filter(|v| !v.is_empty()) {
            out.push_str(&format!("{key}: {}\n", yaml_scalar(value)));
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bootstrap::{BootstrapData, ExtraMetadata, NetworkModel};

    #[test]
    fn additive_keys_follow_capmox_keys_in_order() {
        let input = MachineBootstrapInput {
            hostname: "m1".into(),
            instance_id: "8f0c7d9e-1b2a-4c3d-9e8f-0a1b2c3d4e5f".into(),
            provider_id_injection: false,
            kubernetes_version: None,
            network: NetworkModel::default(),
            bootstrap: BootstrapData {
                value: Vec::new(),
                format: Default::default(),
            },
            extra_metadata: ExtraMetadata {
                proxmox_node: Some("pve2".into()),
                zone: Some("zone-b".into()),
                region: Some("pve-cluster".into()),
            },
        };
        let out = render_metadata(&input).unwrap();
        assert!(
            out.ends_with(
                "hostname: m1\nproxmox_node: pve2\nzone: pve2\nnetwork_zone: zone-b\nregion: pve-cluster\n"
            ),
            "{out}"
        );
        let mut no_region = input;
        no_region.extra_metadata.region = None;
        assert!(!render_metadata(&no_region).unwrap().contains("region"));
    }
}
