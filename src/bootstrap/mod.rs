//! Bootstrap data for a machine: NoCloud `user-data`, `meta-data` and `network-config` as capmox renders
//! them, Ignition enrichment for the `ignition` format, and the NoCloud ISO that carries them.
//!
//! The renderers are pure functions of a [`MachineBootstrapInput`]; [`network_from_api`] maps a
//! `ProxmoxMachine`'s network spec plus the resolved IPs, MACs and DNS servers into its network part.
//!
//! ```text
//! cloud-config: user-data = secret value (unchanged), meta-data, network-config (netplan v2)
//! ignition:     user-data = enriched Ignition JSON,    meta-data, network-config = "version: 1\nconfig: []"
//! ```

mod error;
mod from_api;
mod ignition;
mod iso;
mod metadata;
mod model;
mod netplan;
mod networkd;
pub mod safe;
mod validate;

pub use error::BootstrapError;
pub use from_api::{
    DEFAULT_GATEWAY_ANNOTATION, GATEWAY_METRIC_ANNOTATION, LEGACY_METRIC_ANNOTATION, ResolvedAddress,
    ResolvedDevice, gateway_metric_from_annotations, instance_id_from_smbios1, is_default_gateway,
    mac_from_net_config, network_from_api,
};
pub use ignition::{enrich_ignition, path_escape, proxmox_env_plain};
pub use iso::{
    CLOUD_INIT_ISO_DEVICE, CLOUD_INIT_TAG, ISO_BLOCK_SIZE, NOCLOUD_VOLUME_ID, NoCloudFiles,
    build_nocloud_iso, ip_tag, iso_file_name,
};
pub use metadata::render_metadata;
pub use model::{
    Address, BootstrapData, BootstrapFormat, Device, ExtraMetadata, FibRule, MachineBootstrapInput,
    NetworkModel, Route, Vrf, default_prefix,
};
pub use netplan::{EMPTY_NETWORK_V1, NetworkConfigFormat, render_network_config};
pub use networkd::{NetworkdUnit, render_networkd_units};
pub use validate::validate_network;

/// Renders the NoCloud files for `input` in its bootstrap format.
///
/// `network_format` only matters for `cloud-config`; the Ignition path always ships the empty v1 document.
pub fn render_nocloud(
    input: &MachineBootstrapInput,
    network_format: NetworkConfigFormat,
) -> Result<NoCloudFiles, BootstrapError> {
    let meta_data = render_metadata(input)?.into_bytes();
    match input.bootstrap.format {
        BootstrapFormat::CloudConfig => Ok(NoCloudFiles {
            user_data: input.bootstrap.value.clone(),
            meta_data,
            network_config: render_network_config(&input.network, network_format)?.into_bytes(),
            vendor_data: Vec::new(),
        }),
        BootstrapFormat::Ignition => Ok(NoCloudFiles {
            user_data: enrich_ignition(input)?,
            meta_data,
            network_config: EMPTY_NETWORK_V1.as_bytes().to_vec(),
            vendor_data: Vec::new(),
        }),
    }
}

/// Renders the files for `input` and packs them into the NoCloud ISO.
pub fn build_bootstrap_iso(
    input: &MachineBootstrapInput,
    network_format: NetworkConfigFormat,
) -> Result<Vec<u8>, BootstrapError> {
    build_nocloud_iso(&render_nocloud(input, network_format)?)
}
