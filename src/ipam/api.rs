//! The IPAM kinds on the API server: which version it serves, creating the claims a machine
//! needs, and reading claims and addresses (from the watch caches or the API server).

use capmox_api::capi::IPAM_GROUP;
use capmox_api::capi::ipam_claims::{v1beta1, v1beta2};
use kube::api::{Api, PostParams};

use super::{DesiredClaim, IpamError};

/// Version of the core IPAM kinds to talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpamApiVersion {
    /// `ipam.cluster.x-k8s.io/v1beta2` (CAPI ≥ 1.11).
    V1beta2,
    /// `ipam.cluster.x-k8s.io/v1beta1` (CAPI 1.10).
    V1beta1,
}

/// `v1beta2` when the API server serves it, else `v1beta1` when served; `v1beta2` when discovery fails.
pub async fn served_ipam_version(client: &kube::Client) -> IpamApiVersion {
    match client.list_api_groups().await {
        Ok(groups) => {
            let served = |v: &str| {
                groups
                    .groups
                    .iter()
                    .filter(|g| g.name == IPAM_GROUP)
                    .any(|g| g.versions.iter().any(|x| x.version == v))
            };
            if !served("v1beta2") && served("v1beta1") {
                IpamApiVersion::V1beta1
            } else {
                IpamApiVersion::V1beta2
            }
        }
        Err(e) => {
            tracing::warn!(error = %e, "API discovery failed; using ipam.cluster.x-k8s.io/v1beta2");
            IpamApiVersion::V1beta2
        }
    }
}

/// What [`ensure_claims`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnsureOutcome {
    /// Claims created now.
    pub created: Vec<String>,
    /// Claims that already existed (left untouched).
    pub existing: Vec<String>,
}

/// Creates every desired claim that does not exist yet in `namespace`, in the served `version`
/// (see [`served_ipam_version`]). Existing claims are never modified or deleted.
pub async fn ensure_claims(
    client: &kube::Client,
    version: IpamApiVersion,
    namespace: &str,
    desired: &[DesiredClaim],
) -> Result<EnsureOutcome, IpamError> {
    let v2: Api<v1beta2::IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let v1: Api<v1beta1::IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let mut out = EnsureOutcome::default();
    let pp = PostParams::default();
    for d in desired {
        let claim = d.to_claim(namespace);
        let res = match version {
            IpamApiVersion::V1beta2 => v2.create(&pp, &claim).await.map(|_| ()),
            IpamApiVersion::V1beta1 => v1.create(&pp, &claim.into()).await.map(|_| ()),
        };
        match res {
            Ok(()) => out.created.push(d.name.clone()),
            Err(e) if is_conflict(&e) => out.existing.push(d.name.clone()),
            Err(source) => {
                return Err(IpamError::Kube {
                    action: "create IPAddressClaim",
                    namespace: namespace.to_owned(),
                    name: d.name.clone(),
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(out)
}

/// Rewrites the owner references of claims an earlier ProxmoxMachine of the same name controlled
/// (see [`super::Resolution::adopt`]), each with its `resourceVersion` as a precondition; a claim
/// that changed or went since is left for the next pass. Returns the claims taken over.
pub async fn adopt_claims(
    client: &kube::Client,
    version: IpamApiVersion,
    namespace: &str,
    adopt: &[super::Adoption],
) -> Result<Vec<String>, IpamError> {
    let v2: Api<v1beta2::IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let v1: Api<v1beta1::IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let mut done = Vec::new();
    for a in adopt {
        let body = serde_json::json!({"metadata": {
            "ownerReferences": a.owners,
            "resourceVersion": a.resource_version,
        }});
        let patch = kube::api::Patch::Merge(&body);
        let pp = kube::api::PatchParams::default();
        let res = match version {
            IpamApiVersion::V1beta2 => v2.patch(&a.name, &pp, &patch).await.map(|_| ()),
            IpamApiVersion::V1beta1 => v1.patch(&a.name, &pp, &patch).await.map(|_| ()),
        };
        match res {
            Ok(()) => done.push(a.name.clone()),
            Err(e) if matches!(status_code(&e), Some(404 | 409)) => {}
            Err(source) => {
                return Err(IpamError::Kube {
                    action: "adopt IPAddressClaim",
                    namespace: namespace.to_owned(),
                    name: a.name.clone(),
                    source: Box::new(source),
                });
            }
        }
    }
    Ok(done)
}

/// [`load`] from watch caches instead of the API: `claim(name)` and `address(name)` return the
/// cached objects as served (in `version`); objects that do not parse are treated as absent.
pub fn load_cached(
    version: IpamApiVersion,
    desired: &[DesiredClaim],
    claim: impl Fn(&str) -> Option<serde_json::Value>,
    address: impl Fn(&str) -> Option<serde_json::Value>,
) -> (Vec<v1beta2::IPAddressClaim>, Vec<v1beta2::IPAddress>) {
    let claim_of = |v: serde_json::Value| -> Option<v1beta2::IPAddressClaim> {
        match version {
            IpamApiVersion::V1beta2 => serde_json::from_value(v).ok(),
            IpamApiVersion::V1beta1 => serde_json::from_value::<v1beta1::IPAddressClaim>(v)
                .ok()
                .map(Into::into),
        }
    };
    let address_of = |v: serde_json::Value| -> Option<v1beta2::IPAddress> {
        match version {
            IpamApiVersion::V1beta2 => serde_json::from_value(v).ok(),
            IpamApiVersion::V1beta1 => serde_json::from_value::<v1beta1::IPAddress>(v)
                .ok()
                .map(Into::into),
        }
    };
    let mut claims = Vec::new();
    let mut addresses = Vec::new();
    for d in desired {
        let addr_name = match claim(&d.name).and_then(claim_of) {
            None => Some(d.name.clone()),
            Some(c) => {
                let name = c
                    .status
                    .as_ref()
                    .and_then(|s| s.address_ref.as_ref())
                    .map(|r| r.name.clone())
                    .filter(|n| !n.is_empty());
                claims.push(c);
                name
            }
        };
        if let Some(a) = addr_name.and_then(|n| address(&n)).and_then(address_of) {
            addresses.push(a);
        }
    }
    (claims, addresses)
}

/// Reads the desired claims and the IPAddresses they reference (in the served version, converted to
/// v1beta2), ready for [`resolve`]. For a missing claim, an IPAddress of the claim's name is read too
/// (so [`Resolution::orphaned`] can report it). Absent objects are simply not returned.
pub async fn load(
    client: &kube::Client,
    version: IpamApiVersion,
    namespace: &str,
    desired: &[DesiredClaim],
) -> Result<(Vec<v1beta2::IPAddressClaim>, Vec<v1beta2::IPAddress>), IpamError> {
    let err = |action, name: &str, source| IpamError::Kube {
        action,
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        source: Box::new(source),
    };
    let claims2: Api<v1beta2::IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let claims1: Api<v1beta1::IPAddressClaim> = Api::namespaced(client.clone(), namespace);
    let addrs2: Api<v1beta2::IPAddress> = Api::namespaced(client.clone(), namespace);
    let addrs1: Api<v1beta1::IPAddress> = Api::namespaced(client.clone(), namespace);
    let mut claims = Vec::new();
    let mut addresses = Vec::new();
    for d in desired {
        let claim = match version {
            IpamApiVersion::V1beta2 => claims2.get_opt(&d.name).await,
            IpamApiVersion::V1beta1 => claims1.get_opt(&d.name).await.map(|c| c.map(Into::into)),
        }
        .map_err(|e| err("get IPAddressClaim", &d.name, e))?;
        let addr_name = match claim {
            None => Some(d.name.clone()),
            Some(claim) => {
                let name = claim
                    .status
                    .as_ref()
                    .and_then(|s| s.address_ref.as_ref())
                    .map(|r| r.name.clone())
                    .filter(|n| !n.is_empty());
                claims.push(claim);
                name
            }
        };
        let Some(addr_name) = addr_name else { continue };
        let addr = match version {
            IpamApiVersion::V1beta2 => addrs2.get_opt(&addr_name).await,
            IpamApiVersion::V1beta1 => addrs1.get_opt(&addr_name).await.map(|a| a.map(Into::into)),
        }
        .map_err(|e| err("get IPAddress", &addr_name, e))?;
        addresses.extend(addr);
    }
    Ok((claims, addresses))
}

fn status_code(e: &kube::Error) -> Option<u16> {
    match e {
        kube::Error::Api(s) => Some(s.code),
        _ => None,
    }
}

fn is_conflict(e: &kube::Error) -> bool {
    status_code(e) == Some(409)
}
