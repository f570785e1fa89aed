//! The addresses a ProxmoxVirtualMachine's NICs claim from IPAM pools (`ipPoolRef`): the claims
//! it needs (see [`crate::ipam::owned_claims`]), their state read from the API server for a pass,
//! and their release when the object goes.

use std::collections::BTreeMap;

use capmox_api::v1alpha2::IpAddressesSpec;
use capmox_api::vm::{self as api, ProxmoxVirtualMachine};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind};
use kube::{Resource, ResourceExt};

use super::error::VirtualMachineError;
use crate::ipam::{self, DesiredClaim, IpamApiVersion, Resolution, ResolvedAddress};
use crate::vm::AddressFacts;

/// Version of the in-cluster IPAM provider's pool kinds.
const POOL_VERSION: &str = "v1alpha2";

/// The claims `pvm` needs, one per NIC with an `ipPoolRef` (none without such NICs).
pub fn desired(pvm: &ProxmoxVirtualMachine) -> Result<Vec<DesiredClaim>, VirtualMachineError> {
    let nics: Vec<_> = pvm
        .spec
        .nics()
        .iter()
        .enumerate()
        .filter_map(|(i, n)| Some((i, n.name.as_str(), n.ip_pool_ref.as_ref()?)))
        .collect();
    if nics.is_empty() {
        return Ok(Vec::new());
    }
    let uid = pvm
        .metadata
        .uid
        .clone()
        .filter(|u| !u.is_empty())
        .ok_or_else(|| VirtualMachineError::Invalid("the object has no metadata.uid yet".into()))?;
    let owner = OwnerReference {
        api_version: api::API_VERSION.to_owned(),
        kind: ProxmoxVirtualMachine::kind(&()).into_owned(),
        name: pvm.name_any(),
        uid,
        controller: Some(true),
        block_owner_deletion: Some(true),
    };
    Ok(ipam::owned_claims(&pvm.name_any(), &owner, nics))
}

/// The annotations of the pools that gave an address with a gateway, by `(kind, name)` (their
/// default-route metric; a pool that cannot be read is left out: no metric).
async fn pool_annotations(
    kube: &kube::Client,
    ns: &str,
    resolved: &[ResolvedAddress],
) -> BTreeMap<(String, String), BTreeMap<String, String>> {
    let mut out = BTreeMap::new();
    for r in resolved.iter().filter(|r| r.gateway.is_some()) {
        let key = (r.pool.kind.clone(), r.pool.name.clone());
        if out.contains_key(&key) {
            continue;
        }
        let gvk = GroupVersionKind::gvk(&r.pool.api_group, POOL_VERSION, &r.pool.kind);
        let plural = format!("{}s", r.pool.kind.to_lowercase());
        let ar = ApiResource::from_gvk_with_plural(&gvk, &plural);
        let api: Api<DynamicObject> = if r.pool.kind == ipam::IN_CLUSTER_IP_POOL_KIND {
            Api::namespaced_with(kube.clone(), ns, &ar)
        } else {
            Api::all_with(kube.clone(), &ar)
        };
        match api.get_opt(&r.pool.name).await {
            Ok(Some(pool)) => {
                out.insert(key, pool.metadata.annotations.unwrap_or_default());
            }
            Ok(None) => {}
            Err(e) => {
                tracing::debug!(pool = %r.pool.name, error = %e, "pool not readable: no gateway metric")
            }
        }
    }
    out
}

/// The object's pool addresses as read for one pass.
#[derive(Debug, Clone, Default)]
pub struct PoolAddresses {
    /// The IPAM version the API server serves (`None`: no NIC has a pool).
    pub version: Option<IpamApiVersion>,
    /// The claims the object needs.
    pub desired: Vec<DesiredClaim>,
    /// Their state.
    pub resolution: Resolution,
}

impl PoolAddresses {
    /// Reads the claims of `pvm` and their addresses (no request without a NIC from a pool).
    pub async fn load(kube: &kube::Client, pvm: &ProxmoxVirtualMachine) -> Result<Self, VirtualMachineError> {
        let desired = desired(pvm)?;
        if desired.is_empty() {
            return Ok(Self::default());
        }
        let version = ipam::served_ipam_version(kube).await;
        let ns = pvm.namespace().unwrap_or_default();
        let (claims, addresses) = ipam::load(kube, version, &ns, &desired).await?;
        let mut resolution = ipam::resolve(&desired, &claims, &addresses);
        let annotations = pool_annotations(kube, &ns, &resolution.resolved).await;
        ipam::apply_gateway_metrics(&mut resolution.resolved, |p| {
            annotations.get(&(p.kind.clone(), p.name.clone()))
        })?;
        Ok(Self {
            version: Some(version),
            desired,
            resolution,
        })
    }

    /// Their state as the lifecycle sees it.
    pub fn facts(&self) -> AddressFacts {
        let r = &self.resolution;
        if !r.missing.is_empty() {
            AddressFacts::Missing
        } else if let Some(message) = r.conflict_message() {
            AddressFacts::Conflict(message)
        } else if !r.is_complete() {
            AddressFacts::Pending
        } else {
            AddressFacts::Ready
        }
    }

    /// Whether some NIC waits for its address.
    pub fn waiting(&self) -> bool {
        matches!(self.facts(), AddressFacts::Missing | AddressFacts::Pending)
    }

    /// The addresses given so far, by NIC slot.
    pub fn by_net(&self) -> BTreeMap<String, Vec<ResolvedAddress>> {
        let mut out: BTreeMap<String, Vec<ResolvedAddress>> = BTreeMap::new();
        for r in &self.resolution.resolved {
            out.entry(r.net.clone()).or_default().push(r.clone());
        }
        out
    }

    /// `status.poolAddresses` (`None`: no address given yet).
    pub fn status(&self) -> Option<Vec<IpAddressesSpec>> {
        let list = ipam::ip_addresses_status(&self.resolution.resolved);
        (!list.is_empty()).then_some(list)
    }

    /// Creates the missing claims in the object's namespace.
    pub async fn claim(
        &self,
        kube: &kube::Client,
        namespace: &str,
    ) -> Result<Vec<String>, VirtualMachineError> {
        let Some(version) = self.version else {
            return Ok(Vec::new());
        };
        let missing: Vec<DesiredClaim> = self
            .desired
            .iter()
            .filter(|d| self.resolution.missing.contains(&d.name))
            .cloned()
            .collect();
        Ok(ipam::ensure_claims(kube, version, namespace, &missing)
            .await?
            .created)
    }
}

/// Deletes the claims of `pvm` (whatever its NICs are now: the names a NIC slot could have had are
/// derived from the spec).
pub async fn release(kube: &kube::Client, pvm: &ProxmoxVirtualMachine) -> Result<(), VirtualMachineError> {
    let names: Vec<String> = pvm
        .spec
        .nics()
        .iter()
        .filter(|n| n.ip_pool_ref.is_some())
        .map(|n| ipam::claim_name(&pvm.name_any(), &n.name, 0))
        .collect();
    if names.is_empty() {
        return Ok(());
    }
    let version = ipam::served_ipam_version(kube).await;
    let ns = pvm.namespace().unwrap_or_default();
    Ok(ipam::release_claims(kube, version, &ns, &names).await?)
}
