//! The render model: everything the renderers need, independent of the Kubernetes API types.
//!
//! The controller fills it (see [`super::from_api`] for the mapping from a `ProxmoxMachine`); the
//! renderers are pure functions of it.

use std::fmt;
use std::net::IpAddr;

use ipnet::IpNet;

use super::error::BootstrapError;

/// The bootstrap secret's data format (`format` key; `cloud-config` when absent, as CABPT writes only `value`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum BootstrapFormat {
    /// `cloud-config`: the value is passed through as NoCloud `user-data`.
    #[default]
    CloudConfig,
    /// `ignition`: the value is an Ignition config that gets enriched (Flatcar).
    Ignition,
}

impl BootstrapFormat {
    /// The `format` value of a bootstrap secret for this format.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::CloudConfig => "cloud-config",
            Self::Ignition => "ignition",
        }
    }

    /// Reads the secret's optional `format` key: absent means `cloud-config`.
    ///
    /// capmox silently does nothing for other values; we report them.
    pub fn from_secret(format: Option<&[u8]>) -> Result<Self, BootstrapError> {
        match format {
            None => Ok(Self::CloudConfig),
            Some(b"cloud-config") => Ok(Self::CloudConfig),
            Some(b"ignition") => Ok(Self::Ignition),
            Some(other) => Err(BootstrapError::UnsupportedFormat(
                String::from_utf8_lossy(other).into_owned(),
            )),
        }
    }
}

/// The bootstrap secret's payload. `Debug` never shows the value: it holds join tokens and keys.
#[derive(Clone, PartialEq, Eq)]
pub struct BootstrapData {
    /// The secret's `value` key.
    pub value: Vec<u8>,
    /// The secret's `format` key.
    pub format: BootstrapFormat,
}

impl BootstrapData {
    /// Reads a bootstrap secret's `value` and optional `format` keys.
    pub fn from_secret(value: Option<&[u8]>, format: Option<&[u8]>) -> Result<Self, BootstrapError> {
        let value = value.ok_or(BootstrapError::MissingBootstrapValue)?;
        Ok(Self {
            value: value.to_vec(),
            format: BootstrapFormat::from_secret(format)?,
        })
    }
}

impl fmt::Debug for BootstrapData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BootstrapData")
            .field("value", &format_args!("<{} bytes redacted>", self.value.len()))
            .field("format", &self.format)
            .finish()
    }
}

/// Additive meta-data keys capmox does not render (its `proxmox-labels` template expects them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ExtraMetadata {
    /// The Proxmox node the VM runs on: meta-data `proxmox_node` and `zone` (the Proxmox CCM and
    /// CSI call a node a zone: `topology.kubernetes.io/zone`).
    pub proxmox_node: Option<String>,
    /// The machine's network zone: meta-data `network_zone`.
    pub zone: Option<String>,
    /// `region`: the Proxmox cluster's name (what the Proxmox CCM/CSI call a region:
    /// `topology.kubernetes.io/region`); absent for a node that is not in a cluster.
    pub region: Option<String>,
}

/// Everything needed to render the bootstrap data of one machine.
#[derive(Debug, Clone, PartialEq)]
pub struct MachineBootstrapInput {
    /// The ProxmoxMachine name (meta-data `hostname`/`local-hostname`, `/etc/hostname`).
    pub hostname: String,
    /// The VM's SMBIOS uuid, canonical lower case (meta-data `instance-id`).
    pub instance_id: String,
    /// `spec.metadataSettings.providerIDInjection`: add `provider-id: proxmox://<uuid>`.
    pub provider_id_injection: bool,
    /// The Machine's `spec.version`, if any (meta-data `kubernetes-version`).
    pub kubernetes_version: Option<String>,
    /// The guest network.
    pub network: NetworkModel,
    /// The bootstrap secret's payload.
    pub bootstrap: BootstrapData,
    /// Optional additive meta-data.
    pub extra_metadata: ExtraMetadata,
}

impl MachineBootstrapInput {
    /// The provider ID capmox derives from the instance id.
    pub fn provider_id(&self) -> String {
        format!("proxmox://{}", self.instance_id)
    }
}

/// The guest network: NICs in `networkDevices` order, then VRFs.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct NetworkModel {
    /// Ethernet devices; `devices[i]` is `eth<i>` in the guest.
    pub devices: Vec<Device>,
    /// VRF devices.
    pub vrfs: Vec<Vrf>,
}

/// One NIC as the guest sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Device {
    /// Proxmox slot name (`net0`, ...).
    pub proxmox_name: String,
    /// Position in `networkDevices`; the guest name is `eth<index>`.
    pub index: usize,
    /// MAC address as Proxmox reports it (the device is matched by it).
    pub mac: String,
    /// DHCPv4 (`ipv4: dhcp`; capmox never sets it: all its NICs are static).
    pub dhcp4: bool,
    /// DHCPv6 (`ipv6: dhcp`).
    pub dhcp6: bool,
    /// IPv6 stateless autoconfiguration from router advertisements (`ipv6: slaac`).
    pub accept_ra: bool,
    /// Static addresses in render order (capmox: sorted by IPAddress object name).
    pub addresses: Vec<Address>,
    /// Name servers (the NIC's `dnsServers`, else the cluster's).
    pub dns_servers: Vec<String>,
    /// User routes (default routes come from the addresses' gateways).
    pub routes: Vec<Route>,
    /// Policy routing rules.
    pub routing_policy: Vec<FibRule>,
    /// Guest-side MTU (`linkMtu`).
    pub link_mtu: Option<i32>,
}

impl Device {
    /// The guest interface name, `eth<index>`.
    pub fn guest_name(&self) -> String {
        format!("eth{}", self.index)
    }

    /// Default routes from the addresses' gateways, followed by the user routes — capmox's order.
    pub fn effective_routes(&self) -> Vec<Route> {
        let mut out: Vec<Route> = self
            .addresses
            .iter()
            .filter_map(|a| {
                a.gateway.map(|via| Route {
                    to: Some(default_prefix(a.ip)),
                    via: Some(via),
                    metric: a.metric,
                    table: None,
                })
            })
            .collect();
        out.extend(self.routes.iter().cloned());
        out
    }
}

/// The default-route destination of the address family of `ip`.
pub fn default_prefix(ip: IpAddr) -> IpNet {
    match ip {
        IpAddr::V4(_) => IpNet::V4(ipnet::Ipv4Net::default()),
        IpAddr::V6(_) => IpNet::V6(ipnet::Ipv6Net::default()),
    }
}

/// A static address of a NIC, from an IPAM IPAddress.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Address {
    /// The address.
    pub ip: IpAddr,
    /// Its prefix length.
    pub prefix: u8,
    /// The pool's gateway: becomes a default route via it.
    pub gateway: Option<IpAddr>,
    /// Metric of that default route (pool annotation).
    pub metric: Option<i32>,
    /// From a default pool (`ipam.capmox.cluster.x-k8s.io/default-gateway`): exported as
    /// `COREOS_CUSTOM_PRIVATE_IPV4/6` on the Ignition path.
    pub is_default: bool,
}

impl Address {
    /// `ip/prefix` as capmox prints it (host bits kept).
    pub fn cidr(&self) -> String {
        format!("{}/{}", self.ip, self.prefix)
    }
}

/// A static route. Unset fields are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Route {
    /// Destination (placeholders and bare IPs already expanded).
    pub to: Option<IpNet>,
    /// Next hop.
    pub via: Option<IpAddr>,
    /// Metric.
    pub metric: Option<i32>,
    /// Routing table.
    pub table: Option<i32>,
}

/// A policy routing (FIB) rule. Unset fields are `None`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FibRule {
    /// Destination prefix.
    pub to: Option<IpNet>,
    /// Source prefix.
    pub from: Option<IpNet>,
    /// Table to look up.
    pub table: Option<i32>,
    /// Rule priority.
    pub priority: Option<i64>,
}

/// A VRF device in the guest.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Vrf {
    /// Device name.
    pub name: String,
    /// Its routing table.
    pub table: i32,
    /// Guest names (`ethN`) of the enslaved NICs.
    pub interfaces: Vec<String>,
    /// Routes in the VRF.
    pub routes: Vec<Route>,
    /// Rules of the VRF (a rule without table uses the VRF's).
    pub routing_policy: Vec<FibRule>,
}
