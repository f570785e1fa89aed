//! Node types.

use serde::Deserialize;

use crate::proxmox::lenient;

/// One entry of `GET /nodes`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct NodeListEntry {
    /// Node name.
    #[serde(default)]
    pub node: String,
    /// `online`, `offline` or `unknown`.
    #[serde(default)]
    pub status: String,
    /// CPU usage.
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub cpu: Option<f64>,
    /// CPUs.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxcpu: Option<u64>,
    /// Used memory (bytes).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub mem: Option<u64>,
    /// Total memory (bytes).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub maxmem: Option<u64>,
    /// Uptime (seconds).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    /// TLS fingerprint of the node.
    #[serde(default)]
    pub ssl_fingerprint: Option<String>,
}

/// Memory figures of `GET /nodes/{node}/status`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq, Eq)]
pub struct NodeMemory {
    /// Total bytes.
    #[serde(default, deserialize_with = "lenient::u64")]
    pub total: u64,
    /// Used bytes.
    #[serde(default, deserialize_with = "lenient::u64")]
    pub used: u64,
    /// Free bytes.
    #[serde(default, deserialize_with = "lenient::u64")]
    pub free: u64,
}

/// CPU information of `GET /nodes/{node}/status`.
#[derive(Debug, Clone, Default, Deserialize, PartialEq)]
pub struct NodeCpuInfo {
    /// CPU model.
    #[serde(default)]
    pub model: String,
    /// Cores per socket.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub cores: Option<u64>,
    /// Logical CPUs.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub cpus: Option<u64>,
    /// Sockets.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub sockets: Option<u64>,
}

/// `GET /nodes/{node}/status` (only the fields the provider uses, plus the raw object).
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct NodeStatus {
    /// CPU usage (0..1).
    #[serde(default, deserialize_with = "lenient::opt_f64")]
    pub cpu: Option<f64>,
    /// CPU information.
    #[serde(default)]
    pub cpuinfo: NodeCpuInfo,
    /// Memory.
    #[serde(default)]
    pub memory: NodeMemory,
    /// Uptime (seconds).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub uptime: Option<u64>,
    /// `pve-manager/8.4.1/...`.
    #[serde(default)]
    pub pveversion: Option<String>,
    /// Kernel version string.
    #[serde(default)]
    pub kversion: Option<String>,
}
