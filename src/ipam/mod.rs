//! IPAM claim bookkeeping of a `ProxmoxMachine` (capmox §2.8): which `IPAddressClaim`s a machine needs,
//! whether they are fulfilled, and the status fields derived from the addresses.
//!
//! Everything but [`ensure_claims`], [`load`] and [`served_ipam_version`] is pure. Per NIC the pool
//! list is: the zone's default IPv4 pool if `defaultIPv4`, the zone's default IPv6 pool if
//! `defaultIPv6`, then every `ipPoolRef` in order. The claim for the pool at offset `k` is named
//! `<machine>-<netN>-<kk>-inet` (two digits), carries the labels `cluster.x-k8s.io/cluster-name`
//! (+ the pool's zone label), the annotation `ipam.capmox.cluster.x-k8s.io/pool-ref-counter: "k"`
//! (+ `ipam.capmox.cluster.x-k8s.io/default-gateway: "true"` for default pools) and a controller owner
//! reference to the machine, so garbage collection releases it with the machine. Claims are never
//! deleted here.

use std::collections::BTreeMap;
use std::net::IpAddr;

use capmox_api::capi::IPAM_GROUP;
use capmox_api::capi::ipam_claims::{IpPoolReference, v1beta2};
use capmox_api::consts::{
    CLUSTER_NAME_LABEL, DEFAULT_GATEWAY_ANNOTATION, DEFAULT_ZONE, POOL_REF_COUNTER_ANNOTATION,
    PROXMOX_ZONE_LABEL,
};
use capmox_api::v1alpha2::{
    self, IpAddressesSpec, MachineAddress, MachineAddressType, ProxmoxCluster, ProxmoxMachine,
};
use k8s_openapi::api::core::v1::LocalObjectReference;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};

use kube::{Resource, ResourceExt};

use crate::bootstrap::{self, BootstrapError};

mod api;
mod standalone;

pub use api::{
    EnsureOutcome, IpamApiVersion, adopt_claims, ensure_claims, load, load_cached, served_ipam_version,
};
pub use standalone::{owned_claims, release_claims};

/// Suffix of every claim name.
pub const CLAIM_SUFFIX: &str = "inet";
/// `net` of the synthetic `status.ipAddresses` entry holding the addresses of the default pools.
pub const DEFAULT_NET: &str = "default";
/// Kind of the in-cluster IPAM provider's namespaced pool (used for the cluster's default pools).
pub const IN_CLUSTER_IP_POOL_KIND: &str = "InClusterIPPool";

/// Errors of the IPAM bookkeeping.
#[derive(Debug, thiserror::Error)]
pub enum IpamError {
    /// The machine's zone has no entry in the ProxmoxCluster's `status.inClusterZoneRef`.
    #[error("zone {0} not found")]
    ZoneNotFound(String),
    /// The machine lacks a field needed to build claims (`metadata.name`, `metadata.uid`, cluster name).
    #[error("ProxmoxMachine {machine} has no {what}")]
    MissingMachineField {
        /// Name of the machine (may be empty).
        machine: String,
        /// The missing field.
        what: &'static str,
    },
    /// No address came from a default pool.
    #[error("Machine has no default IPAddresses")]
    NoDefaultAddresses,
    /// A pool's metric annotation does not parse.
    #[error("pool {pool}: {source}")]
    PoolAnnotation {
        /// `Kind/name` of the pool.
        pool: String,
        /// The parse error.
        #[source]
        source: BootstrapError,
    },
    /// The API server refused a request.
    #[error("{action} {namespace}/{name}: {source}")]
    Kube {
        /// What was attempted.
        action: &'static str,
        /// Namespace of the object.
        namespace: String,
        /// Name of the object.
        name: String,
        /// The client error.
        #[source]
        source: Box<kube::Error>,
    },
}

/// Address family of a pool or address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum IpFamily {
    /// IPv4.
    V4,
    /// IPv6.
    V6,
}

/// One claim the machine needs, with the exact metadata and spec to create it with.
#[derive(Debug, Clone, PartialEq)]
pub struct DesiredClaim {
    /// Claim name, `<machine>-<netN>-<kk>-inet`.
    pub name: String,
    /// Proxmox NIC slot (`net0`, ...).
    pub net: String,
    /// Position of the NIC in `spec.network.networkDevices`.
    pub device_index: usize,
    /// Position of the pool in the NIC's pool list.
    pub pool_offset: usize,
    /// The pool to claim from.
    pub pool: IpPoolReference,
    /// The pool is one of the zone's default pools (its address provides the default gateway).
    pub is_default_pool: bool,
    /// Family of a default pool; unknown for `ipPoolRef` pools until the address arrives.
    pub family: Option<IpFamily>,
    /// Name of the CAPI cluster (label and `spec.clusterName`).
    pub cluster_name: String,
    /// Labels of the claim.
    pub labels: BTreeMap<String, String>,
    /// Annotations of the claim.
    pub annotations: BTreeMap<String, String>,
    /// Controller owner reference to the ProxmoxMachine.
    pub owner: OwnerReference,
}

impl DesiredClaim {
    /// Adds the pool's `topology.kubernetes.io/proxmox-zone` label value to the claim (for `ipPoolRef`
    /// pools, whose labels only the caller can read).
    pub fn set_pool_zone(&mut self, zone: &str) {
        self.labels.insert(PROXMOX_ZONE_LABEL.to_owned(), zone.to_owned());
    }

    /// The claim object to create in `namespace` (v1beta2).
    pub fn to_claim(&self, namespace: &str) -> v1beta2::IPAddressClaim {
        v1beta2::IPAddressClaim {
            metadata: ObjectMeta {
                name: Some(self.name.clone()),
                namespace: Some(namespace.to_owned()),
                labels: (!self.labels.is_empty()).then(|| self.labels.clone()),
                annotations: Some(self.annotations.clone()),
                owner_references: Some(vec![self.owner.clone()]),
                ..ObjectMeta::default()
            },
            spec: v1beta2::IPAddressClaimSpec {
                // An owner outside Cluster API (a ProxmoxVirtualMachine) names no cluster.
                cluster_name: Some(self.cluster_name.clone()).filter(|c| !c.is_empty()),
                pool_ref: self.pool.clone(),
            },
            status: None,
        }
    }
}

/// Claim name for the pool at `offset` of NIC `net` (`<machine>-<net>-<offset:02>-inet`).
pub fn claim_name(machine: &str, net: &str, offset: usize) -> String {
    format!("{machine}-{net}-{offset:02}-{CLAIM_SUFFIX}")
}

/// The claims `machine` needs, in NIC order then pool order.
pub fn desired_claims(
    machine: &ProxmoxMachine,
    cluster: &ProxmoxCluster,
) -> Result<Vec<DesiredClaim>, IpamError> {
    let name = machine.metadata.name.clone().unwrap_or_default();
    let missing = |what| IpamError::MissingMachineField {
        machine: name.clone(),
        what,
    };
    if name.is_empty() {
        return Err(missing("metadata.name"));
    }
    let uid = machine
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| missing("metadata.uid"))?;
    let cluster_name = machine
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .or_else(|| cluster.labels().get(CLUSTER_NAME_LABEL))
        .filter(|c| !c.is_empty())
        .cloned()
        .ok_or_else(|| missing("cluster.x-k8s.io/cluster-name label"))?;
    let owner = OwnerReference {
        api_version: v1alpha2::API_VERSION.to_owned(),
        kind: ProxmoxMachine::kind(&()).into_owned(),
        name: name.clone(),
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    let zone = machine.spec.network.zone_or_default();

    let mut out = Vec::new();
    for (device_index, nic) in machine.spec.network.network_devices.iter().enumerate() {
        let net = nic.name_or_default();
        let mut pools: Vec<(IpPoolReference, Option<IpFamily>)> = Vec::new();
        // A family the NIC gets by DHCP/SLAAC (capmox-rs) claims no default pool, even though
        // capmox's defaulting webhook sets `defaultIPv4`/`defaultIPv6` on every `net0`.
        let static4 = !nic.dhcp4();
        let static6 = !nic.dhcp6() && !nic.slaac();
        for (wanted, family) in [
            (nic.default_ipv4.filter(|_| static4), IpFamily::V4),
            (nic.default_ipv6.filter(|_| static6), IpFamily::V6),
        ] {
            // As capmox: the zone's default pool of the family, if it has one. capmox's
            // defaulting webhook sets both `defaultIPv4` and `defaultIPv6` on `net0` of every
            // machine, so a single-stack zone simply has no pool of the other family.
            if wanted == Some(true)
                && let Some(pool) = default_pool(cluster, zone, family)?
            {
                pools.push((pool, Some(family)));
            }
        }
        let defaults = pools.len();
        for r in nic.ip_pool_ref.as_deref().unwrap_or_default() {
            let api_group = r
                .api_group
                .clone()
                .filter(|g| !g.is_empty())
                .unwrap_or_else(|| IPAM_GROUP.to_owned());
            pools.push((
                IpPoolReference {
                    api_group,
                    kind: r.kind.clone(),
                    name: r.name.clone(),
                },
                None,
            ));
        }
        for (offset, (pool, family)) in pools.into_iter().enumerate() {
            let is_default_pool = offset < defaults;
            let mut labels = BTreeMap::from([(CLUSTER_NAME_LABEL.to_owned(), cluster_name.clone())]);
            let mut annotations =
                BTreeMap::from([(POOL_REF_COUNTER_ANNOTATION.to_owned(), offset.to_string())]);
            if is_default_pool {
                labels.insert(PROXMOX_ZONE_LABEL.to_owned(), zone.to_owned());
                annotations.insert(DEFAULT_GATEWAY_ANNOTATION.to_owned(), "true".to_owned());
            }
            out.push(DesiredClaim {
                name: claim_name(&name, net, offset),
                net: net.to_owned(),
                device_index,
                pool_offset: offset,
                pool,
                is_default_pool,
                family,
                cluster_name: cluster_name.clone(),
                labels,
                annotations,
                owner: owner.clone(),
            });
        }
    }
    Ok(out)
}

/// The zone's default pool of `family` (`None` when the zone has none of that family).
fn default_pool(
    cluster: &ProxmoxCluster,
    zone: &str,
    family: IpFamily,
) -> Result<Option<IpPoolReference>, IpamError> {
    let entry = cluster
        .status
        .as_ref()
        .and_then(|s| s.in_cluster_zone_ref.as_deref())
        .unwrap_or_default()
        .iter()
        .find(|z| z.zone.as_deref().unwrap_or(DEFAULT_ZONE) == zone);
    let Some(entry) = entry else {
        // A zone the spec gives no pool at all (a DHCP-only cluster) never gets one.
        if cluster.spec.zone_without_pools(zone) {
            return Ok(None);
        }
        return Err(IpamError::ZoneNotFound(zone.to_owned()));
    };
    let r: &Option<LocalObjectReference> = match family {
        IpFamily::V4 => &entry.in_cluster_ip_pool_ref_v4,
        IpFamily::V6 => &entry.in_cluster_ip_pool_ref_v6,
    };
    Ok(r.as_ref()
        .map(|r| r.name.clone())
        .filter(|n| !n.is_empty())
        .map(|name| IpPoolReference {
            api_group: IPAM_GROUP.to_owned(),
            kind: IN_CLUSTER_IP_POOL_KIND.to_owned(),
            name,
        }))
}

/// One address that fulfils a desired claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolvedAddress {
    /// Proxmox NIC slot.
    pub net: String,
    /// Position of the NIC in `spec.network.networkDevices`.
    pub device_index: usize,
    /// Position of the pool in the NIC's pool list.
    pub pool_offset: usize,
    /// The pool the address came from.
    pub pool: IpPoolReference,
    /// Family of the address.
    pub family: IpFamily,
    /// The address.
    pub address: IpAddr,
    /// Prefix length.
    pub prefix: u8,
    /// Gateway, if the pool has one.
    pub gateway: Option<String>,
    /// From a default pool.
    pub is_default_pool: bool,
    /// Name of the IPAddress object.
    pub ip_address_name: String,
    /// Default-route metric from the pool's annotations (see [`apply_gateway_metrics`]).
    pub metric: Option<i32>,
}

/// Outcome of [`resolve`]: every desired claim is in exactly one of `pending`, `conflicts`, `resolved`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolution {
    /// Claims not yet fulfilled (including claims that do not exist yet; those are also in `missing`).
    pub pending: Vec<String>,
    /// Claims that do not exist yet and must be created.
    pub missing: Vec<String>,
    /// Missing claims for which an IPAddress of the same name already exists (capmox emits a warning
    /// event `OrphanedIPAddress` for each when it recreates the claim).
    pub orphaned: Vec<String>,
    /// Claims that cannot make progress without the user: `(claim name, actionable message)`.
    pub conflicts: Vec<(String, String)>,
    /// Claims controlled by an earlier ProxmoxMachine of the same name and namespace (another
    /// UID: a backup restored, a `clusterctl move` without owner rewrite, a quick re-create).
    /// They count as the machine's own (with their addresses) and are to be adopted: their
    /// controller reference rewritten to this machine.
    pub adopt: Vec<Adoption>,
    /// Fulfilled claims, in desired order.
    pub resolved: Vec<ResolvedAddress>,
}

impl Resolution {
    /// Every claim is fulfilled.
    pub fn is_complete(&self) -> bool {
        self.pending.is_empty() && self.conflicts.is_empty()
    }

    /// All conflict messages joined, for the `WaitingForStaticIPAllocation` condition message.
    pub fn conflict_message(&self) -> Option<String> {
        (!self.conflicts.is_empty()).then(|| {
            self.conflicts
                .iter()
                .map(|(_, m)| m.as_str())
                .collect::<Vec<_>>()
                .join("; ")
        })
    }
}

fn same_pool(a: &IpPoolReference, b: &IpPoolReference) -> bool {
    a.kind == b.kind
        && a.name == b.name
        && (a.api_group.is_empty() || b.api_group.is_empty() || a.api_group == b.api_group)
}

fn pool_str(p: &IpPoolReference) -> String {
    format!("{}/{}", p.kind, p.name)
}

/// Matches the desired claims with the existing claims and addresses of the machine's namespace.
pub fn resolve(
    desired: &[DesiredClaim],
    claims: &[v1beta2::IPAddressClaim],
    addresses: &[v1beta2::IPAddress],
) -> Resolution {
    let mut out = Resolution::default();
    for d in desired {
        match resolve_one(d, claims, addresses) {
            One::Missing => {
                if addresses
                    .iter()
                    .any(|a| a.metadata.name.as_deref() == Some(d.name.as_str()))
                {
                    out.orphaned.push(d.name.clone());
                }
                out.missing.push(d.name.clone());
                out.pending.push(d.name.clone());
            }
            One::Pending => out.pending.push(d.name.clone()),
            One::Conflict(m) => out.conflicts.push((d.name.clone(), m)),
            One::Resolved(r) => out.resolved.push(*r),
        }
        if let Some(c) = claims
            .iter()
            .find(|c| c.metadata.name.as_deref() == Some(d.name.as_str()))
            .filter(|c| stale_owner(c, &d.owner))
        {
            out.adopt.push(Adoption::of(c, &d.owner));
        }
    }
    out
}

enum One {
    Missing,
    Pending,
    Conflict(String),
    Resolved(Box<ResolvedAddress>),
}

/// A claim of an earlier ProxmoxMachine of the same name, to be taken over (see
/// [`Resolution::adopt`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Adoption {
    /// The claim.
    pub name: String,
    /// Its owner references with the stale controller replaced by the machine.
    pub owners: Vec<OwnerReference>,
    /// The claim's `resourceVersion` as read (the rewrite is refused if it changed since).
    pub resource_version: Option<String>,
}

// Owner references compare field by field (strings and flags): equality is total.
impl Eq for Adoption {}

impl Adoption {
    /// The takeover of `claim` by `owner`: every reference to an earlier ProxmoxMachine of that
    /// name becomes `owner`.
    pub fn of(claim: &v1beta2::IPAddressClaim, owner: &OwnerReference) -> Self {
        let mut owners: Vec<OwnerReference> = Vec::new();
        for o in claim.owner_references() {
            let replaced = if names_machine(o, owner) { owner } else { o };
            if !owners.iter().any(|x| x.uid == replaced.uid) {
                owners.push(replaced.clone());
            }
        }
        Self {
            name: claim.name_any(),
            owners,
            resource_version: claim.metadata.resource_version.clone(),
        }
    }
}

/// Whether `owner` refers to a ProxmoxMachine named like `machine` (any API version).
pub fn names_machine(owner: &OwnerReference, machine: &OwnerReference) -> bool {
    owner.kind == machine.kind
        && owner.name == machine.name
        && owner
            .api_version
            .split_once('/')
            .is_some_and(|(g, _)| g == capmox_api::consts::GROUP)
}

/// Whether `claim` (not being deleted) is controlled by a ProxmoxMachine of `owner`'s name with
/// another UID. Two ProxmoxMachines of one name cannot exist in a namespace at once, so that
/// UID is an earlier incarnation's, gone (or going).
pub fn stale_owner(claim: &v1beta2::IPAddressClaim, owner: &OwnerReference) -> bool {
    claim.metadata.deletion_timestamp.is_none()
        && claim
            .owner_references()
            .iter()
            .find(|o| o.controller == Some(true))
            .is_some_and(|o| o.uid != owner.uid && names_machine(o, owner))
}

fn resolve_one(
    d: &DesiredClaim,
    claims: &[v1beta2::IPAddressClaim],
    addresses: &[v1beta2::IPAddress],
) -> One {
    let Some(claim) = claims
        .iter()
        .find(|c| c.metadata.name.as_deref() == Some(&d.name))
    else {
        return One::Missing;
    };
    // A claim on its way out (e.g. collected with an earlier owner) is waited for, then made again.
    if claim.metadata.deletion_timestamp.is_some() {
        return One::Pending;
    }
    let controller = claim
        .owner_references()
        .iter()
        .find(|o| o.controller == Some(true));
    if controller.is_none_or(|o| o.uid != d.owner.uid && !names_machine(o, &d.owner)) {
        let by = controller.map_or_else(
            || "has no controller".to_owned(),
            |o| format!("is controlled by {} {} (uid {})", o.kind, o.name, o.uid),
        );
        return One::Conflict(format!(
            "IPAddressClaim {} {by}, not by ProxmoxMachine {}; delete or rename that claim so it can be \
             recreated for this machine",
            d.name, d.owner.name
        ));
    }
    if !same_pool(&claim.spec.pool_ref, &d.pool) {
        return One::Conflict(format!(
            "IPAddressClaim {} references pool {} but {} needs pool {} at position {}; delete the claim \
             so it is recreated with the right pool",
            d.name,
            pool_str(&claim.spec.pool_ref),
            d.net,
            pool_str(&d.pool),
            d.pool_offset
        ));
    }
    let Some(addr_name) = claim
        .status
        .as_ref()
        .and_then(|s| s.address_ref.as_ref())
        .map(|r| r.name.as_str())
        .filter(|n| !n.is_empty())
    else {
        return One::Pending;
    };
    let Some(addr) = addresses
        .iter()
        .find(|a| a.metadata.name.as_deref() == Some(addr_name))
    else {
        return One::Conflict(format!(
            "IPAddress {addr_name} referenced by IPAddressClaim {} does not exist; delete the claim so \
             the IPAM provider allocates a new address",
            d.name
        ));
    };
    if !same_pool(&addr.spec.pool_ref, &d.pool) {
        return One::Conflict(format!(
            "IPAddress {addr_name} of IPAddressClaim {} comes from pool {}, expected {}; delete the \
             IPAddress and the claim so a new address is allocated from the right pool",
            d.name,
            pool_str(&addr.spec.pool_ref),
            pool_str(&d.pool)
        ));
    }
    if !addr.spec.claim_ref.name.is_empty() && addr.spec.claim_ref.name != d.name {
        return One::Conflict(format!(
            "IPAddress {addr_name} referenced by IPAddressClaim {} belongs to claim {}; delete the claim \
             so a new address is allocated",
            d.name, addr.spec.claim_ref.name
        ));
    }
    let Ok(address) = addr.spec.address.parse::<IpAddr>() else {
        return One::Conflict(format!(
            "IPAddress {addr_name} has an invalid address {:?}; fix the pool {} and delete the IPAddress",
            addr.spec.address,
            pool_str(&d.pool)
        ));
    };
    let family = if address.is_ipv4() {
        IpFamily::V4
    } else {
        IpFamily::V6
    };
    if d.family.is_some_and(|f| f != family) {
        return One::Conflict(format!(
            "IPAddress {addr_name} ({address}) of default pool {} has the wrong address family; fix the \
             pool's addresses",
            pool_str(&d.pool)
        ));
    }
    let max = if family == IpFamily::V4 { 32 } else { 128 };
    let Some(prefix) = u8::try_from(addr.spec.prefix).ok().filter(|p| *p <= max) else {
        return One::Conflict(format!(
            "IPAddress {addr_name} has an invalid prefix {} for {address}; fix the pool {} and delete \
             the IPAddress",
            addr.spec.prefix,
            pool_str(&d.pool)
        ));
    };
    One::Resolved(Box::new(ResolvedAddress {
        net: d.net.clone(),
        device_index: d.device_index,
        pool_offset: d.pool_offset,
        pool: d.pool.clone(),
        family,
        address,
        prefix,
        gateway: addr.spec.gateway.clone().filter(|g| !g.is_empty()),
        is_default_pool: d.is_default_pool,
        ip_address_name: addr_name.to_owned(),
        metric: None,
    }))
}

/// `status.ipAddresses`: one entry per NIC plus the synthetic `default` entry for the default pools'
/// addresses; entries sorted by `net`, addresses by NIC then pool offset, split into IPv4 and IPv6.
pub fn ip_addresses_status(resolved: &[ResolvedAddress]) -> Vec<IpAddressesSpec> {
    let mut sorted: Vec<&ResolvedAddress> = resolved.iter().collect();
    sorted.sort_by_key(|r| (r.device_index, r.pool_offset));
    let mut groups: BTreeMap<&str, (Vec<String>, Vec<String>)> = BTreeMap::new();
    for r in sorted {
        let mut nets = vec![r.net.as_str()];
        if r.is_default_pool {
            nets.push(DEFAULT_NET);
        }
        for net in nets {
            let (v4, v6) = groups.entry(net).or_default();
            match r.family {
                IpFamily::V4 => v4.push(r.address.to_string()),
                IpFamily::V6 => v6.push(r.address.to_string()),
            }
        }
    }
    groups
        .into_iter()
        .map(|(net, (v4, v6))| IpAddressesSpec {
            ipv4: (!v4.is_empty()).then_some(v4),
            ipv6: (!v6.is_empty()).then_some(v6),
            net: net.to_owned(),
        })
        .collect()
}

/// `status.addresses`: the host name, then an `InternalIP` for each default-pool IPv4 address, then for
/// each default-pool IPv6 address.
pub fn machine_addresses(name: &str, resolved: &[ResolvedAddress]) -> Result<Vec<MachineAddress>, IpamError> {
    let mut defaults: Vec<&ResolvedAddress> = resolved.iter().filter(|r| r.is_default_pool).collect();
    if defaults.is_empty() {
        return Err(IpamError::NoDefaultAddresses);
    }
    defaults.sort_by_key(|r| (r.family, r.device_index, r.pool_offset));
    let mut out = vec![MachineAddress {
        address: name.to_owned(),
        type_: MachineAddressType::Hostname,
    }];
    out.extend(defaults.into_iter().map(|r| MachineAddress {
        address: r.address.to_string(),
        type_: MachineAddressType::InternalIp,
    }));
    Ok(out)
}

/// The VM tags capmox adds once all claims are resolved: `ip_net0_<ipv4>` for each default-pool IPv4
/// address, in NIC then pool order.
pub fn default_ipv4_tags(resolved: &[ResolvedAddress]) -> Vec<String> {
    let mut defaults: Vec<&ResolvedAddress> = resolved.iter().filter(|r| r.is_default_pool).collect();
    defaults.sort_by_key(|r| (r.device_index, r.pool_offset));
    defaults
        .into_iter()
        .filter_map(|r| match r.address {
            IpAddr::V4(v4) => Some(bootstrap::ip_tag(v4)),
            IpAddr::V6(_) => None,
        })
        .collect()
}

/// Sets the zone label of each `ipPoolRef` claim from its pool's `topology.kubernetes.io/proxmox-zone`
/// label, as returned by `pool_zone` (`None`: the pool has no zone label). Default-pool claims keep
/// the machine's zone.
pub fn apply_pool_zones<'a>(
    desired: &mut [DesiredClaim],
    mut pool_zone: impl FnMut(&IpPoolReference) -> Option<&'a str>,
) {
    for d in desired.iter_mut().filter(|d| !d.is_default_pool) {
        if let Some(zone) = pool_zone(&d.pool) {
            d.set_pool_zone(zone);
        }
    }
}

/// The default-route metric from a pool's annotations (`ipam.capmox.cluster.x-k8s.io/gateway-metric`,
/// legacy `metric`).
pub fn gateway_metric(
    pool: &IpPoolReference,
    annotations: &BTreeMap<String, String>,
) -> Result<Option<i32>, IpamError> {
    bootstrap::gateway_metric_from_annotations(annotations).map_err(|source| IpamError::PoolAnnotation {
        pool: pool_str(pool),
        source,
    })
}

/// Fills [`ResolvedAddress::metric`] from the annotations of each address's pool, as returned by
/// `pool_annotations` (`None`: pool unknown or unreadable, no metric).
pub fn apply_gateway_metrics<'a>(
    resolved: &mut [ResolvedAddress],
    mut pool_annotations: impl FnMut(&IpPoolReference) -> Option<&'a BTreeMap<String, String>>,
) -> Result<(), IpamError> {
    for r in resolved {
        r.metric = match pool_annotations(&r.pool) {
            Some(a) => gateway_metric(&r.pool, a)?,
            None => None,
        };
    }
    Ok(())
}

/// The resolved addresses grouped by NIC slot in the shape the bootstrap renderer takes.
pub fn bootstrap_addresses(
    resolved: &[ResolvedAddress],
) -> BTreeMap<String, Vec<bootstrap::ResolvedAddress>> {
    let mut out: BTreeMap<String, Vec<bootstrap::ResolvedAddress>> = BTreeMap::new();
    for r in resolved {
        out.entry(r.net.clone())
            .or_default()
            .push(bootstrap::ResolvedAddress {
                name: r.ip_address_name.clone(),
                address: r.address.to_string(),
                prefix: r.prefix,
                gateway: r.gateway.clone(),
                metric: r.metric,
                is_default: r.is_default_pool,
            });
    }
    out
}

#[cfg(test)]
mod tests;
