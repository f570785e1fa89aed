//! Snapshot types.

use serde::{Deserialize, Serialize};

use crate::proxmox::lenient;

/// One entry of `GET .../snapshot` (the last entry is `current`, "You are here!").
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct Snapshot {
    /// Snapshot name (`current` for the live state).
    pub name: String,
    /// Description.
    #[serde(default)]
    pub description: Option<String>,
    /// Creation time (epoch).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub snaptime: Option<u64>,
    /// Includes RAM state.
    #[serde(default, deserialize_with = "lenient::bool01")]
    pub vmstate: bool,
    /// Parent snapshot.
    #[serde(default)]
    pub parent: Option<String>,
    /// Set while the snapshot is being taken (`prepare`) or deleted (`delete`).
    #[serde(default)]
    pub snapstate: Option<String>,
}

impl Snapshot {
    /// Whether this is the synthetic `current` entry.
    pub fn is_current(&self) -> bool {
        self.name == "current"
    }
}

/// `POST .../snapshot`.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct CreateSnapshotRequest {
    /// Snapshot name.
    pub snapname: String,
    /// Description.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Include RAM.
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub vmstate: Option<bool>,
}

/// `POST .../snapshot/{snapname}/rollback`.
#[derive(Debug, Clone, Default, Serialize, PartialEq, Eq)]
pub struct RollbackRequest {
    /// Start the VM after the rollback (a snapshot with memory resumes it anyway).
    #[serde(
        skip_serializing_if = "Option::is_none",
        serialize_with = "lenient::ser_opt_bool01"
    )]
    pub start: Option<bool>,
}
