//! Conversion between v1alpha1 (spoke) and v1alpha2 (hub) as pure functions.
//!
//! The mapping follows capmox's conversion:
//!
//! * machine network: v1alpha1 `network.default` ⇄ the `net0` entry of `networkDevices`
//!   (with `defaultIPv4`/`defaultIPv6` set on up-conversion), `additionalDevices` ⇄ the other
//!   entries, `ipv4PoolRef`/`ipv6PoolRef` ⇄ the `ipPoolRef` list (split by pool name on
//!   down-conversion, see [`network`]); a v1alpha1 machine without `network` gets a dummy
//!   `net0` on `vmbr0`;
//! * `spec.target` replaces `spec.allowedNodes` (in v1alpha1 the target overrides them);
//! * unsigned ⇄ signed integers (Go-style wrapping casts), with `0` → absent for route
//!   `metric`/`table` and policy `priority`;
//! * CAPI v1beta1 conditions ⇄ `metav1.Condition` (an empty reason becomes
//!   `APIConversionReason`, an empty message `API Conversion`, and back);
//! * `status.ready` ⇄ `status.initialization.provisioned`, `status.ipAddresses` map ⇄ list;
//! * v1alpha1 `spec.cloneSpec`, `failureReason` and `failureMessage` have no hub counterpart.
//!
//! Lossless round trips use the `cluster.x-k8s.io/conversion-data` annotation (see
//! [`annotation`]): when a down-conversion cannot express the hub object, the hub's `apiVersion`,
//! `kind`, `spec` and `status` are stored in it (as CAPI's `MarshalData` does) and restored on the
//! next up-conversion; symmetrically, when an up-conversion would lose v1alpha1-only data, the
//! v1alpha1 object is stored on the hub and restored on the next down-conversion. The annotation
//! is only written when the plain mapping is lossy (capmox writes it on every down-conversion),
//! and it is always removed from the result of a conversion that consumed it. When the object
//! was edited in the other version since it was stored, the edit wins and only data the edited
//! version cannot express is restored (zones, NIC `queues`/`defaultIPv4`/`defaultIPv6`/`is6`,
//! condition `observedGeneration`; `cloneSpec`, `target`, condition `severity` the other way).
//!
//! ProxmoxMachineTemplates carry the hub machine in `spec.template.metadata.annotations` too when
//! they are read through v1alpha1 and the machine spec is lossy: CAPI v1.10 creates the
//! MachineDeployment's ProxmoxMachines from that v1alpha1 view and copies those annotations (not
//! the template's own), so the machines it creates keep NIC `queues`, extra pools, zones, ...
//!
//! # Where the plain mapping is lossy (the annotation covers these)
//!
//! * v1alpha1 → v1alpha2: `cloneSpec`, `target` (it replaces `allowedNodes`), `failureReason`,
//!   `failureMessage`, condition `severity`, zero route `metric`/`table`/policy `priority`, an
//!   endpoint with neither host nor port, an empty `gateway`, `vmStatus` or IP address string,
//!   a `metadataSettings` without `providerIDInjection`, a network status without `connected`,
//!   a condition whose reason/message is literally `APIConversionReason`/`API Conversion`,
//!   pool references whose names do not tell the family (`*inet*`/`*inet6*`), a `network`
//!   equal to `{default: {bridge: vmbr0}}` (it maps to the same hub as no network), and the
//!   ProxmoxClusterTemplate's field-less status.
//! * v1alpha2 → v1alpha1: `zoneConfig`, `inClusterZoneRef`, node location `zone`, network `zone`,
//!   NIC `queues`, `is6`, `defaultIPv4`/`defaultIPv6` other than "set on `net0` only", more pools
//!   than one per family or pools in another order, routes/policies/`linkMtu` on `net0`, a NIC
//!   without `bridge` or out of `net0`-first order, `mtu`/`vlan`/`linkMtu` beyond 16 bits,
//!   condition `observedGeneration` and empty reasons/messages, IP address lists with other than
//!   one address, and an `initialization` without `provisioned`.

pub mod annotation;
mod cluster;
mod common;
mod machine;
pub mod network;
mod value;

pub use common::{API_CONVERSION_MESSAGE, API_CONVERSION_REASON};
pub use value::convert_value;

use crate::{v1alpha1, v1alpha2};

/// Errors of a conversion.
#[derive(Debug, thiserror::Error)]
pub enum ConversionError {
    /// The object (or the object stored in the conversion-data annotation) is not valid JSON
    /// for its kind and version.
    #[error("decoding {kind} {api_version}: {source}")]
    Decode {
        /// Kind being decoded.
        kind: String,
        /// API version being decoded.
        api_version: String,
        /// Underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// An object could not be encoded as JSON.
    #[error("encoding {kind}: {source}")]
    Encode {
        /// Kind being encoded.
        kind: String,
        /// Underlying error.
        #[source]
        source: serde_json::Error,
    },
    /// The object has no string `apiVersion` or `kind`.
    #[error("object has no {field}")]
    MissingField {
        /// `apiVersion` or `kind`.
        field: &'static str,
    },
    /// The kind is not one of the four Proxmox kinds.
    #[error("unsupported kind {0}")]
    UnsupportedKind(String),
    /// The API version is neither v1alpha1 nor v1alpha2 of `infrastructure.cluster.x-k8s.io`.
    #[error("unsupported apiVersion {0}")]
    UnsupportedVersion(String),
}

/// A v1alpha1 kind that converts to and from its v1alpha2 hub.
pub trait Convertible: Sized {
    /// The v1alpha2 kind.
    type Hub;
    /// Converts this v1alpha1 object to the hub version (up-conversion).
    fn to_hub(&self) -> Result<Self::Hub, ConversionError>;
    /// Converts a hub object to v1alpha1 (down-conversion).
    fn from_hub(hub: &Self::Hub) -> Result<Self, ConversionError>;
}

/// Converts a v1alpha1 object to its v1alpha2 hub.
pub fn to_hub<T: Convertible>(spoke: &T) -> Result<T::Hub, ConversionError> {
    spoke.to_hub()
}

/// Converts a v1alpha2 hub object to v1alpha1.
pub fn from_hub<T: Convertible>(hub: &T::Hub) -> Result<T, ConversionError> {
    T::from_hub(hub)
}

/// The spec-and-status part of one kind in both versions, with the plain (annotation-free)
/// mapping between them.
pub(crate) trait Body {
    /// The v1alpha1 body.
    type Spoke: Clone + PartialEq;
    /// The v1alpha2 body.
    type Hub: Clone + PartialEq;
    /// Plain up-conversion.
    fn up(spoke: &Self::Spoke) -> Self::Hub;
    /// Plain down-conversion.
    fn down(hub: &Self::Hub) -> Self::Spoke;
    /// Restores hub-only data from `restored` (the hub stored in the annotation) into `hub`
    /// after the v1alpha1 object was modified since the down-conversion.
    fn restore_hub(hub: &mut Self::Hub, restored: &Self::Hub, spoke: &Self::Spoke);
    /// Restores v1alpha1-only data from `restored` (the v1alpha1 object stored in the
    /// annotation) into `spoke` after the hub was modified since the up-conversion.
    fn restore_spoke(spoke: &mut Self::Spoke, restored: &Self::Spoke, hub: &Self::Hub);
}

/// Up-converts a body: plain mapping, then restoration from a stored hub, then the decision
/// whether the v1alpha1 body must be kept in the annotation. Returns the hub body and whether
/// to store the spoke.
pub(crate) fn up_body<B: Body>(spoke: &B::Spoke, restored: Option<&B::Hub>) -> (B::Hub, bool) {
    let mut hub = B::up(spoke);
    if let Some(restored) = restored {
        if B::down(restored) == *spoke {
            hub = restored.clone();
        } else {
            B::restore_hub(&mut hub, restored, spoke);
        }
    }
    let lossy = B::down(&hub) != *spoke;
    (hub, lossy)
}

/// Down-converts a body; the mirror image of [`up_body`].
pub(crate) fn down_body<B: Body>(hub: &B::Hub, restored: Option<&B::Spoke>) -> (B::Spoke, bool) {
    let mut spoke = B::down(hub);
    if let Some(restored) = restored {
        if B::up(restored) == *hub {
            spoke = restored.clone();
        } else {
            B::restore_spoke(&mut spoke, restored, hub);
        }
    }
    let lossy = B::up(&spoke) != *hub;
    (spoke, lossy)
}

macro_rules! convertible {
    ($spoke:ty, $hub:ty, $body:ty, |$s:ident| $spoke_body:expr, |$h:ident| $hub_body:expr,
     |$meta1:ident, $sb:ident| $build_hub:expr, |$meta2:ident, $hb:ident| $build_spoke:expr) => {
        impl Convertible for $spoke {
            type Hub = $hub;
            fn to_hub(&self) -> Result<$hub, ConversionError> {
                let $s = self;
                let spoke_body = $spoke_body;
                let (meta, restored) = annotation::take::<$hub>(&self.metadata)?;
                let restored_body = restored.as_ref().map(|$h| $hub_body);
                let (hub_body, lossy) = up_body::<$body>(&spoke_body, restored_body.as_ref());
                let $meta1 = meta;
                let $sb = hub_body;
                let mut hub: $hub = $build_hub;
                if lossy {
                    annotation::store(&mut hub.metadata, self)?;
                }
                Ok(hub)
            }
            fn from_hub(hub: &$hub) -> Result<Self, ConversionError> {
                let $h = hub;
                let hub_body = $hub_body;
                let (meta, restored) = annotation::take::<$spoke>(&hub.metadata)?;
                let restored_body = restored.as_ref().map(|$s| $spoke_body);
                let (spoke_body, lossy) = down_body::<$body>(&hub_body, restored_body.as_ref());
                let $meta2 = meta;
                let $hb = spoke_body;
                let mut spoke: $spoke = $build_spoke;
                if lossy {
                    annotation::store(&mut spoke.metadata, hub)?;
                }
                Ok(spoke)
            }
        }
    };
}

convertible!(
    v1alpha1::ProxmoxMachine,
    v1alpha2::ProxmoxMachine,
    machine::MachineBody,
    |s| (s.spec.clone(), s.status.clone()),
    |h| (h.spec.clone(), h.status.clone()),
    |meta, b| v1alpha2::ProxmoxMachine {
        metadata: meta,
        spec: b.0,
        status: b.1
    },
    |meta, b| v1alpha1::ProxmoxMachine {
        metadata: meta,
        spec: b.0,
        status: b.1
    }
);

convertible!(
    v1alpha1::ProxmoxMachineTemplate,
    v1alpha2::ProxmoxMachineTemplate,
    machine::MachineTemplateBody,
    |s| (s.spec.clone(), s.status.clone()),
    |h| (h.spec.clone(), h.status.clone()),
    |meta, b| v1alpha2::ProxmoxMachineTemplate {
        metadata: meta,
        spec: b.0,
        status: b.1
    },
    |meta, b| v1alpha1::ProxmoxMachineTemplate {
        metadata: meta,
        spec: b.0,
        status: b.1
    }
);

convertible!(
    v1alpha1::ProxmoxCluster,
    v1alpha2::ProxmoxCluster,
    cluster::ClusterBody,
    |s| (s.spec.clone(), s.status.clone()),
    |h| (h.spec.clone(), h.status.clone()),
    |meta, b| v1alpha2::ProxmoxCluster {
        metadata: meta,
        spec: b.0,
        status: b.1
    },
    |meta, b| v1alpha1::ProxmoxCluster {
        metadata: meta,
        spec: b.0,
        status: b.1
    }
);

convertible!(
    v1alpha1::ProxmoxClusterTemplate,
    v1alpha2::ProxmoxClusterTemplate,
    cluster::ClusterTemplateBody,
    |s| (s.spec.clone(), s.status.clone()),
    |h| h.spec.clone(),
    |meta, b| v1alpha2::ProxmoxClusterTemplate {
        metadata: meta,
        spec: b
    },
    |meta, b| v1alpha1::ProxmoxClusterTemplate {
        metadata: meta,
        spec: b.0,
        status: b.1
    }
);
