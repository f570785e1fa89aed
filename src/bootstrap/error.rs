//! Typed errors of the bootstrap renderers.
//!
//! The leading part of each message is capmox's own error string, so that conditions and events read the
//! same as with capmox; the part in parentheses adds the context capmox leaves out.

use thiserror::Error;

/// Why bootstrap data could not be rendered or packed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum BootstrapError {
    /// The machine name (hostname) is empty.
    #[error("hostname is not set")]
    MissingHostname,

    /// The SMBIOS uuid (instance-id) is empty.
    #[error("instance-id is not set")]
    MissingInstanceId,

    /// Neither a network device nor a VRF is configured.
    #[error("network config data is not set")]
    MissingNetworkConfigData,

    /// A device has no MAC address.
    #[error("mac address is not set (device {device})")]
    MissingMacAddress {
        /// Guest name of the device (`ethN`).
        device: String,
    },

    /// No device contributes a default route (`0.0.0.0/0` or `::/0`) or DHCP.
    #[error("gateway is not set")]
    MissingGateway,

    /// Two routes share their effective table, destination and metric.
    #[error(
        "route already exists for destination/metric in routing table (device {device}, table {table}, to {to}, metric {metric})"
    )]
    ConflictingRoute {
        /// Guest name of the device or VRF holding the second route.
        device: String,
        /// Effective routing table (254 = main).
        table: i64,
        /// Destination prefix.
        to: String,
        /// Metric (0 when unset).
        metric: i64,
    },

    /// A route has no destination.
    #[error("route is malformed (device {device}: {reason})")]
    MalformedRoute {
        /// Guest name of the device or VRF.
        device: String,
        /// What is wrong.
        reason: String,
    },

    /// A routing-policy rule lacks to/from, lacks a table outside a VRF, or mixes address families.
    #[error("routing policy is malformed (device {device}: {reason})")]
    MalformedFibRule {
        /// Guest name of the device or VRF.
        device: String,
        /// What is wrong.
        reason: String,
    },

    /// An address, gateway, route target or via could not be parsed.
    #[error("invalid {what} {value:?} (device {device})")]
    InvalidAddress {
        /// Proxmox or guest name of the device.
        device: String,
        /// Which field (`address`, `gateway`, `route target`, `via`, ...).
        what: &'static str,
        /// The offending text.
        value: String,
    },

    /// A pool annotation does not hold an integer.
    #[error("error converting metric annotation {key}={value:?}")]
    InvalidAnnotation {
        /// Annotation key.
        key: String,
        /// Its value.
        value: String,
    },

    /// A VRF names an interface that is not one of the machine's devices.
    #[error("unable to find vrf interface={vrf} child interface {child}")]
    UnknownVrfInterface {
        /// VRF name.
        vrf: String,
        /// The interface that was not found.
        child: String,
    },

    /// A value that would be written into a document has a shape that could change the
    /// document's meaning (a line break in a host name, a MAC that is no MAC, ...).
    #[error("invalid {what} {value:?}: expected {expected}")]
    InvalidValue {
        /// Which value (`hostname`, `MAC address`, `DNS server`, `VRF name`, ...).
        what: &'static str,
        /// The value (at most 80 characters of it).
        value: String,
        /// What it must look like.
        expected: &'static str,
    },

    /// The bootstrap secret has no `value` key.
    #[error("error retrieving bootstrap data: secret `value` key is missing")]
    MissingBootstrapValue,

    /// The bootstrap secret's `format` is neither `cloud-config` nor `ignition`.
    #[error("unsupported bootstrap data format {0:?} (expected cloud-config or ignition)")]
    UnsupportedFormat(String),

    /// The bootstrap value is not an Ignition JSON document.
    #[error("converting bootstrap-data to Ignition: {0}")]
    IgnitionParse(String),

    /// The Ignition document has a version this enricher does not handle.
    #[error("converting bootstrap-data to Ignition: unsupported config version {0:?} (expected 2.x)")]
    IgnitionVersion(String),

    /// Building the NoCloud ISO image failed.
    #[error("unable to build cloud-init ISO: {0}")]
    Iso(String),
}
