//! The Proxmox VE release pve-sim plays: 8.4 (the default) or 9.1.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A Proxmox VE release line pve-sim can play.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum PveVersion {
    /// Proxmox VE 8.4 (Debian bookworm; pve-manager 8.4.1, qemu-server 8.4, pve-ha-manager 4.0.7).
    #[default]
    V8_4,
    /// Proxmox VE 9.1 (Debian trixie; pve-manager 9.1, pve-ha-manager 5.x, access control 9.0).
    V9_1,
}

impl PveVersion {
    /// Both versions, oldest first.
    pub const ALL: [PveVersion; 2] = [PveVersion::V8_4, PveVersion::V9_1];

    /// `8.4` / `9.1`.
    pub fn as_str(self) -> &'static str {
        match self {
            PveVersion::V8_4 => "8.4",
            PveVersion::V9_1 => "9.1",
        }
    }

    /// Whether this is the PVE 9 line.
    pub fn is_9(self) -> bool {
        self >= PveVersion::V9_1
    }

    /// `GET /version` data: `version`, `release`, `repoid` (as pve-manager's `API2/Version.pm`
    /// reports them: the full package version, the release and the git short hash).
    pub fn version_data(self) -> serde_json::Value {
        match self {
            PveVersion::V8_4 => {
                serde_json::json!({"version": "8.4.1", "release": "8.4", "repoid": "2a5fa54a8503f96d"})
            }
            PveVersion::V9_1 => {
                serde_json::json!({"version": "9.1.2", "release": "9.1", "repoid": "9d436f37a0ac4172"})
            }
        }
    }

    /// The file name of the schema of this version in `../shared/pve-api/`.
    pub fn schema_file(self) -> &'static str {
        match self {
            PveVersion::V8_4 => "apidoc.json",
            PveVersion::V9_1 => "apidoc-9.1.json",
        }
    }

    /// `pveversion` text in `GET /nodes/{node}/status`.
    pub fn pveversion(self) -> &'static str {
        match self {
            PveVersion::V8_4 => "pve-manager/8.4.1/2a5fa54a8503f96d",
            PveVersion::V9_1 => "pve-manager/9.1.2/9d436f37a0ac4172",
        }
    }

    /// QEMU version of running VMs and of `meta: creation-qemu=`.
    pub fn qemu(self) -> &'static str {
        match self {
            PveVersion::V8_4 => "9.2.0",
            PveVersion::V9_1 => "10.1.2",
        }
    }
}

impl fmt::Display for PveVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown version string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown Proxmox VE version '{0}' (pve-sim plays 8.4 and 9.1)")]
pub struct UnknownVersion(pub String);

impl FromStr for PveVersion {
    type Err = UnknownVersion;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "8.4" | "8" => Ok(PveVersion::V8_4),
            "9.1" | "9" => Ok(PveVersion::V9_1),
            other => Err(UnknownVersion(other.to_owned())),
        }
    }
}

impl Serialize for PveVersion {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for PveVersion {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = PveVersion;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a Proxmox VE version: \"8.4\" or \"9.1\"")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<PveVersion, E> {
                v.parse().map_err(E::custom)
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<PveVersion, E> {
                self.visit_str(&format!("{v}"))
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<PveVersion, E> {
                self.visit_str(&v.to_string())
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<PveVersion, E> {
                self.visit_str(&v.to_string())
            }
        }
        d.deserialize_any(V)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints() {
        assert_eq!("9.1".parse::<PveVersion>(), Ok(PveVersion::V9_1));
        assert_eq!(PveVersion::default().to_string(), "8.4");
        assert!("9.0".parse::<PveVersion>().is_err());
        assert!(PveVersion::V9_1.is_9() && !PveVersion::V8_4.is_9());
    }
}
