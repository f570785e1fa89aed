//! ProxmoxVMImage: a Proxmox VM template made from a disk image at a URL, on one or several
//! nodes — Proxmox downloads the file (`download-url`, content `import`), a VM is created with
//! its disk `import-from` that file and converted to a template, and the file is removed; a
//! template of the same name and image (its tag, [`image_tag`]) is reused instead.
//!
//! * [`decide`]: the pure decision per node (facts in, one step out);
//! * [`pass`]: one pass over every node of an image (observe → decide → execute), and the
//!   deletion passes; the status is the record, written before each Proxmox write;
//! * [`resolve`]: what `spec.imageRef` of a ProxmoxVirtualMachine or ProxmoxMachine names — the
//!   image's template once it is `Ready`, or why not yet.

pub mod decide;
pub mod pass;
pub mod resolve;
pub mod summary;

use capmox_api::vm::{IMAGE_TAG_PREFIX, ProxmoxVMImage};
use kube::ResourceExt;

/// The kind the view wakes for ProxmoxVMImages.
pub const OWNER_KIND: &str = "ProxmoxVMImage";

/// Errors of an image pass.
#[derive(Debug, thiserror::Error)]
pub enum ImageError {
    /// A Proxmox request failed (not a refusal the image shows as its failure).
    #[error("{action}: {source}")]
    Proxmox {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: crate::proxmox::Error,
    },
    /// Reading the shared view failed.
    #[error(transparent)]
    View(#[from] crate::proxmox::view::ViewError),
    /// A Kubernetes request failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The client's error.
        #[source]
        source: kube::Error,
    },
    /// No usable Proxmox credentials.
    #[error("{0}")]
    Credentials(String),
}

impl ImageError {
    /// A Proxmox error while doing `action`.
    pub fn proxmox(action: impl Into<String>) -> impl FnOnce(crate::proxmox::Error) -> Self {
        let action = action.into();
        move |source| Self::Proxmox { action, source }
    }

    /// A Kubernetes error while doing `action`.
    pub fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }

    /// The condition reason it is shown with.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::Credentials(_) => "MissingCredentials",
            Self::Kube { .. } => "KubernetesError",
            Self::Proxmox { source, .. } if source.class() == crate::proxmox::ErrorClass::Auth => {
                "ProxmoxAuthFailed"
            }
            _ => "ProxmoxUnavailable",
        }
    }
}

/// Hex of SHA-256 of `data`.
fn sha256_hex(data: &[u8]) -> String {
    use std::fmt::Write;
    ring::digest::digest(&ring::digest::SHA256, data)
        .as_ref()
        .iter()
        .fold(String::new(), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}

/// What names the image's content: `<algorithm>-<checksum>`, or `url-<hash of the URL>`
/// without a checksum (lower-case, as Proxmox keeps tags).
pub fn image_key(img: &ProxmoxVMImage) -> String {
    let spec = &img.spec;
    match (&spec.checksum, spec.checksum_algorithm) {
        (Some(sum), Some(alg)) if !sum.is_empty() => format!("{}-{}", alg.as_str(), sum.to_ascii_lowercase()),
        _ => format!("url-{}", &sha256_hex(spec.url.as_bytes())[..32]),
    }
}

/// The Proxmox tag of a template made from an image with this key.
pub fn image_tag(key: &str) -> String {
    format!("{IMAGE_TAG_PREFIX}{key}").to_ascii_lowercase()
}

/// The template's name in Proxmox.
pub fn template_name(img: &ProxmoxVMImage) -> String {
    img.spec.template_name.clone().unwrap_or_else(|| img.name_any())
}

/// The downloaded file's name: the object and the key's hash (so a changed image is another
/// file), with the format's extension.
pub fn file_name(img: &ProxmoxVMImage, key: &str) -> String {
    format!(
        "capmox-image-{}-{}-{}.{}",
        img.namespace().unwrap_or_default(),
        img.name_any(),
        &sha256_hex(key.as_bytes())[..8],
        img.spec.image_format().as_str()
    )
}

/// The view's key of a ProxmoxVMImage.
pub fn owner_of(img: &ProxmoxVMImage) -> crate::proxmox::view::Owner {
    crate::proxmox::view::Owner::new(OWNER_KIND, img.namespace().unwrap_or_default(), img.name_any())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn keys_tags_and_file_names() {
        let img: ProxmoxVMImage = serde_json::from_value(json!({
            "apiVersion": "vm.capmox-rs.io/v1alpha1", "kind": "ProxmoxVMImage",
            "metadata": {"name": "noble", "namespace": "vms"},
            "spec": {"url": "http://x/noble.img", "node": "pve1", "storage": "local",
                     "checksum": "ABCD", "checksumAlgorithm": "sha256"}
        }))
        .unwrap();
        assert_eq!(image_key(&img), "sha256-abcd");
        assert_eq!(image_tag("sha256-abcd"), "capmox-image_sha256-abcd");
        assert_eq!(template_name(&img), "noble");
        let f = file_name(&img, "sha256-abcd");
        assert!(
            f.starts_with("capmox-image-vms-noble-") && f.ends_with(".qcow2"),
            "{f}"
        );
        let mut no_sum = img.clone();
        no_sum.spec.checksum = None;
        assert!(image_key(&no_sum).starts_with("url-"));
        assert_ne!(file_name(&no_sum, &image_key(&no_sum)), f);
    }
}
