//! Storage types.

use serde::{Deserialize, Serialize};

use crate::proxmox::lenient;

/// One entry of `GET /nodes/{node}/storage`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct NodeStorage {
    /// Storage id.
    #[serde(default)]
    pub storage: String,
    /// Plugin type (`dir`, `lvmthin`, `rbd`, ...).
    #[serde(rename = "type", default)]
    pub storage_type: String,
    /// Comma-separated content types (`iso,vztmpl,images`).
    #[serde(default)]
    pub content: String,
    /// Active.
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub active: Option<bool>,
    /// Enabled.
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub enabled: Option<bool>,
    /// Shared.
    #[serde(default, deserialize_with = "lenient::bool01")]
    pub shared: bool,
    /// Total bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub total: Option<u64>,
    /// Used bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub used: Option<u64>,
    /// Available bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub avail: Option<u64>,
}

impl NodeStorage {
    /// The content types as a list.
    pub fn content_types(&self) -> Vec<&str> {
        self.content
            .split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .collect()
    }

    /// Whether the storage allows the content type (e.g. `iso`).
    pub fn supports(&self, content: &str) -> bool {
        self.content_types().contains(&content)
    }

    /// Enabled unless PVE says otherwise.
    pub fn is_enabled(&self) -> bool {
        self.enabled.unwrap_or(true)
    }
}

/// Filters of `GET /nodes/{node}/storage`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct StorageListQuery {
    /// Only storages with this content type.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Only enabled storages.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub enabled: Option<bool>,
    /// Only this storage.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub storage: Option<String>,
}

/// One entry of `GET /nodes/{node}/storage/{storage}/content`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct StorageContent {
    /// Volume id, e.g. `local:iso/user-data-101.iso`.
    #[serde(default)]
    pub volid: String,
    /// Content type.
    #[serde(default)]
    pub content: String,
    /// Format (`iso`, `raw`, `qcow2`, ...).
    #[serde(default)]
    pub format: String,
    /// Size in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub size: Option<u64>,
    /// Used bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub used: Option<u64>,
    /// Creation time (epoch).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub ctime: Option<u64>,
    /// Owner VMID.
    #[serde(default, deserialize_with = "lenient::opt_u32")]
    pub vmid: Option<u32>,
    /// Notes.
    #[serde(default)]
    pub notes: Option<String>,
}

/// `GET /nodes/{node}/storage/{storage}/content/{volume}`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct VolumeInfo {
    /// Path on the node.
    #[serde(default)]
    pub path: String,
    /// Size in bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub size: Option<u64>,
    /// Used bytes.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub used: Option<u64>,
    /// Format.
    #[serde(default)]
    pub format: String,
    /// Notes.
    #[serde(default)]
    pub notes: Option<String>,
    /// Protected.
    #[serde(default, deserialize_with = "lenient::opt_bool")]
    pub protected: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn storage_content_types() {
        let s: NodeStorage = serde_json::from_value(
            json!({"storage":"local","type":"dir","content":"vztmpl,iso, backup","active":1,"shared":0}),
        )
        .unwrap();
        assert!(s.supports("iso") && s.supports("backup") && !s.supports("images"));
        assert!(s.is_enabled() && !s.shared);
    }
}

/// `POST /nodes/{node}/storage/{storage}/download-url` parameters.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct DownloadUrlRequest {
    /// The URL (`http://` or `https://`).
    pub url: String,
    /// `iso`, `vztmpl` or `import`.
    pub content: String,
    /// The file name (Proxmox normalises it; its extension must fit the content type).
    pub filename: String,
    /// The expected checksum.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub checksum: Option<String>,
    /// Its algorithm (`md5`, `sha1`, `sha224`, `sha256`, `sha384`, `sha512`).
    #[serde(rename = "checksum-algorithm", skip_serializing_if = "Option::is_none")]
    pub checksum_algorithm: Option<String>,
    /// `false`: TLS certificates are not verified (Proxmox's default is to verify).
    #[serde(
        rename = "verify-certificates",
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub verify_certificates: Option<bool>,
}
