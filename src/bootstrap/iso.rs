//! The NoCloud ISO: ISO 9660 with Joliet and Rock Ridge, volume id `cidata`, 2048-byte blocks — what
//! go-proxmox builds for capmox — and the names capmox uses around it.
//!
//! Written with `hadris-iso` 3.0.0-rc.2: its 0.2.x line writes the Joliet volume id as ASCII instead of
//! UCS-2 (blkid then reports a garbage label, and cloud-init finds the datasource by label) and rejects a
//! lower-case volume id. The image is deterministic: every date is 1980-01-01.

use hadris_fs::{Content, Node, Tree};
use hadris_iso::{IsoId, IsoOptions};
use hadris_storage::{BlockSize, MemDevice};

use super::error::BootstrapError;

/// Volume id of a NoCloud seed image.
pub const NOCLOUD_VOLUME_ID: &str = "cidata";

/// Block size of the image.
pub const ISO_BLOCK_SIZE: u32 = 2048;

/// VM device the ISO is attached to (capmox `CloudInitISODevice`).
pub const CLOUD_INIT_ISO_DEVICE: &str = "ide0";

/// VM tag go-proxmox adds when it injects the ISO; kept for capmox compatibility.
pub const CLOUD_INIT_TAG: &str = "go-proxmox+cloud-init";

/// The ISO's file name on the Proxmox storage: `user-data-<vmid>.iso`.
pub fn iso_file_name(vmid: u64) -> String {
    format!("user-data-{vmid}.iso")
}

/// The VM tag capmox adds per default-pool IPv4 address: `ip_net0_<ipv4>`.
pub fn ip_tag(ipv4: std::net::Ipv4Addr) -> String {
    format!("ip_net0_{ipv4}")
}

/// The files of a NoCloud seed. `Debug` shows only sizes: `user-data` carries secrets.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct NoCloudFiles {
    /// `user-data`.
    pub user_data: Vec<u8>,
    /// `meta-data`.
    pub meta_data: Vec<u8>,
    /// `network-config`.
    pub network_config: Vec<u8>,
    /// `vendor-data`; left out of the image when empty (as go-proxmox does).
    pub vendor_data: Vec<u8>,
}

impl std::fmt::Debug for NoCloudFiles {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NoCloudFiles")
            .field(
                "user_data",
                &format_args!("<{} bytes redacted>", self.user_data.len()),
            )
            .field("meta_data", &self.meta_data.len())
            .field("network_config", &self.network_config.len())
            .field("vendor_data", &self.vendor_data.len())
            .finish()
    }
}

/// Builds the NoCloud ISO image holding `files`.
pub fn build_nocloud_iso(files: &NoCloudFiles) -> Result<Vec<u8>, BootstrapError> {
    let iso_err = |e: &dyn std::fmt::Display| BootstrapError::Iso(e.to_string());
    let mut tree = Tree::new();
    let mut entries: Vec<(&str, &[u8])> = vec![
        ("user-data", &files.user_data),
        ("meta-data", &files.meta_data),
        ("network-config", &files.network_config),
    ];
    if !files.vendor_data.is_empty() {
        entries.push(("vendor-data", &files.vendor_data));
    }
    for (name, data) in entries {
        tree.insert(name, Node::file(Content::bytes(data.to_vec())))
            .map_err(|e| iso_err(&e))?;
    }
    let options = IsoOptions::default()
        .with_id(IsoId::Volume, NOCLOUD_VOLUME_ID)
        .with_joliet()
        .with_rock_ridge();
    let size = hadris_iso::plan(&tree, &options).map_err(|e| iso_err(&e))?.size();
    let size = usize::try_from(size).map_err(|e| iso_err(&e))?;
    let block_size =
        BlockSize::new(ISO_BLOCK_SIZE).ok_or_else(|| BootstrapError::Iso("invalid block size".to_owned()))?;
    let mut dev = MemDevice::new(vec![0u8; size], block_size);
    hadris_iso::sync::write(&mut dev, &tree, &options).map_err(|e| iso_err(&e))?;
    Ok(dev.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert_eq!(iso_file_name(104), "user-data-104.iso");
        assert_eq!(ip_tag("10.0.0.5".parse().unwrap()), "ip_net0_10.0.0.5");
    }

    #[test]
    fn image_has_volume_descriptor_with_cidata() {
        let iso = build_nocloud_iso(&NoCloudFiles {
            user_data: b"#cloud-config\n".to_vec(),
            meta_data: b"instance-id: x\n".to_vec(),
            network_config: b"version: 1\nconfig: []".to_vec(),
            vendor_data: Vec::new(),
        })
        .unwrap();
        assert_eq!(iso.len() % 2048, 0);
        let pvd = &iso[16 * 2048..17 * 2048];
        assert_eq!(pvd[0], 1);
        assert_eq!(&pvd[1..6], b"CD001");
        assert_eq!(&pvd[40..46], b"cidata");
    }
}
