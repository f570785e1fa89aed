//! A stand-in for the in-cluster IPAM provider (kubernetes-sigs/cluster-api-ipam-provider-in-cluster,
//! "CAIP"), for tests and the demo: it fulfils `IPAddressClaim`s (`ipam.cluster.x-k8s.io/v1beta2`)
//! whose `spec.poolRef` names an `InClusterIPPool` (`ipam.cluster.x-k8s.io/v1alpha2`), or the
//! `v1beta1` claims when the API server serves no `v1beta2` (CAPI 1.10's CRDs; see [`version`]).
//!
//! Like CAIP it
//! * adds the finalizer [`RELEASE_ADDRESS_FINALIZER`] to each claim it handles;
//! * allocates the lowest free address of the pool (`spec.addresses` entries may be single IPs,
//!   `first-last` ranges or CIDRs; the gateway, `excludedAddresses` and — unless
//!   `allocateReservedIPAddresses` — IPv4 network/broadcast addresses are skipped, as are
//!   addresses held by other `IPAddress`es of the pool);
//! * creates an `IPAddress` named like the claim with `spec.{claimRef, poolRef, address, prefix,
//!   gateway}`, a controller owner reference to the claim, a non-controller one to the pool, the
//!   claim's `cluster.x-k8s.io/cluster-name` label and the finalizer [`PROTECT_ADDRESS_FINALIZER`];
//! * sets the claim's `status.addressRef`;
//! * on claim deletion deletes the `IPAddress` and removes the claim's finalizer;
//! * leaves claims alone while their Cluster is paused or (unless they are being deleted) missing
//!   ([`paused`]).
//!
//! Simplifications: no `GlobalInClusterIPPool`s, no paused pools or claims, no pool status counters, no
//! `addressReuseGracePeriodSeconds` (a released address is reusable at once).
//! An exhausted pool leaves the claim pending (logged); it is retried when an address of the
//! pool is released. All claims are handled one at a time, so two claims never get the same address.

mod paused;
pub mod pool;
mod version;

use std::collections::{BTreeMap, HashSet};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use capmox_api::capi::IPAM_GROUP;
use capmox_api::capi::ipam::{IN_CLUSTER_IP_POOL_KIND, InClusterIPPool};
use capmox_api::capi::ipam_claims::NameReference;
use capmox_api::capi::ipam_claims::v1beta2::{IPAddress, IPAddressClaim, IPAddressSpec};
use capmox_api::consts::CLUSTER_NAME_LABEL;
use futures::StreamExt;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PostParams};
use kube::runtime::controller::{Action, Config};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::{Controller, watcher};
use kube::{Resource, ResourceExt};
use serde_json::json;
use version::{IpamVersion, V1beta1, V1beta2};

use crate::error::{StandInError, is_conflict, is_not_found, kube_err, log_retry};
use crate::handle::{StandInHandle, StopSignal};
use crate::meta::{add_finalizer, describe, owner_reference, patch_params, remove_finalizer};

/// Finalizer on claims until their address is released (CAIP's name).
pub const RELEASE_ADDRESS_FINALIZER: &str = "ipam.cluster.x-k8s.io/ReleaseAddress";
/// Finalizer on addresses while their claim exists (CAIP's name).
pub const PROTECT_ADDRESS_FINALIZER: &str = "ipam.cluster.x-k8s.io/ProtectAddress";

/// Retry interval for claims whose pool is missing or exhausted (besides the watch-driven retries).
const PENDING_RETRY: Duration = Duration::from_secs(2);
/// Retry interval after an error.
const ERROR_RETRY: Duration = Duration::from_millis(500);

/// The in-cluster IPAM provider stand-in (see the [module docs](self)).
#[derive(Debug, Clone, Copy, Default)]
pub struct InClusterIpamStandIn;

impl InClusterIpamStandIn {
    /// Starts the stand-in, watching claims in `namespace` (all namespaces when `None`). It runs
    /// until the returned handle is stopped or dropped.
    pub fn spawn(client: kube::Client, namespace: Option<String>) -> StandInHandle {
        StandInHandle::spawn("in-cluster-ipam", move |stop| async move {
            if version::serves_v1beta2(&client).await {
                run::<V1beta2>(client, namespace, stop).await;
            } else {
                run::<V1beta1>(client, namespace, stop).await;
            }
        })
    }
}

struct Ctx {
    client: kube::Client,
    /// The Clusters (`None`: the API server serves no Cluster API: no pause rule).
    clusters: Option<paused::Clusters>,
}

fn api<K>(client: &kube::Client, ns: Option<&str>) -> Api<K>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
{
    match ns {
        Some(ns) => Api::namespaced(client.clone(), ns),
        None => Api::all(client.clone()),
    }
}

async fn run<V: IpamVersion>(client: kube::Client, namespace: Option<String>, stop: StopSignal) {
    let ns = namespace.as_deref();
    let claims: Api<V::Claim> = api(&client, ns);
    let addresses: Api<V::Address> = api(&client, ns);
    let pools: Api<InClusterIPPool> = api(&client, ns);
    let wc = watcher::Config::default().any_semantic();
    let controller = Controller::new(claims, wc.clone());
    let (s1, s2, s3) = (controller.store(), controller.store(), controller.store());
    let (clusters, cluster_events) = match paused::watch(&client, ns).await {
        Some((c, ar, stream)) => (Some(c), Some((ar, stream))),
        None => (None, None),
    };
    let controller = match cluster_events {
        Some((ar, stream)) => {
            controller.watches_stream_with(stream, move |c| claims_of_cluster::<V>(&s3, &c), ar)
        }
        None => controller,
    };
    controller
        .watches(addresses, wc.clone(), move |a| {
            let a = V::address(&a);
            pending_claims_of::<V>(&s1, a.namespace(), &a.spec.pool_ref.kind, &a.spec.pool_ref.name)
        })
        .watches(pools, wc, move |p| {
            pending_claims_of::<V>(&s2, p.namespace(), IN_CLUSTER_IP_POOL_KIND, &p.name_any())
        })
        // One claim at a time: allocation reads the pool's addresses and creates one, so
        // concurrent reconciles could hand out the same address.
        .with_config(Config::default().concurrency(1))
        .graceful_shutdown_on(stop.wait())
        .run(
            reconcile::<V>,
            error_policy::<V>,
            Arc::new(Ctx { client, clusters }),
        )
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "in-cluster IPAM stand-in reconcile failed");
            }
        })
        .await;
}

/// Claims of a pool that still wait for an address (woken when an address or the pool changes).
fn pending_claims_of<V: IpamVersion>(
    store: &Store<V::Claim>,
    ns: Option<String>,
    kind: &str,
    pool: &str,
) -> Vec<ObjectRef<V::Claim>> {
    if kind != IN_CLUSTER_IP_POOL_KIND {
        return Vec::new();
    }
    store
        .state()
        .into_iter()
        .filter(|c| {
            let v2 = V::claim(c);
            c.namespace() == ns && v2.spec.pool_ref.name == pool && address_ref(&v2).is_none()
        })
        .map(|c| ObjectRef::from_obj(c.as_ref()))
        .collect()
}

/// The claims linked to Cluster `c`, when it is not paused (its unpausing or creation lets them go on).
fn claims_of_cluster<V: IpamVersion>(
    store: &Store<V::Claim>,
    c: &kube::api::DynamicObject,
) -> Vec<ObjectRef<V::Claim>> {
    if paused::paused(c) {
        return Vec::new();
    }
    let name = c.name_any();
    store
        .state()
        .into_iter()
        .filter(|claim| {
            claim.namespace() == c.namespace()
                && paused::cluster_of(&V::claim(claim)).as_deref() == Some(&name)
        })
        .map(|claim| ObjectRef::from_obj(claim.as_ref()))
        .collect()
}

fn address_ref(claim: &IPAddressClaim) -> Option<&str> {
    claim
        .status
        .as_ref()
        .and_then(|s| s.address_ref.as_ref())
        .map(|r| r.name.as_str())
        .filter(|n| !n.is_empty())
}

/// Whether the claim's pool is an `InClusterIPPool` (the only kind this stand-in serves).
fn handled(claim: &IPAddressClaim) -> bool {
    let r = &claim.spec.pool_ref;
    r.kind == IN_CLUSTER_IP_POOL_KIND && (r.api_group.is_empty() || r.api_group == IPAM_GROUP)
}

fn error_policy<V: IpamVersion>(_claim: Arc<V::Claim>, err: &StandInError, _ctx: Arc<Ctx>) -> Action {
    log_retry("in-cluster IPAM", err);
    Action::requeue(crate::error::retry_delay(err, ERROR_RETRY))
}

async fn reconcile<V: IpamVersion>(stored: Arc<V::Claim>, ctx: Arc<Ctx>) -> Result<Action, StandInError> {
    let claim = V::claim(&stored);
    if !handled(&claim) {
        return Ok(Action::await_change());
    }
    // The Cluster's events requeue the claim once it is there and unpaused.
    if ctx.clusters.as_ref().is_some_and(|c| c.holds(&claim)) {
        tracing::debug!(claim = %claim.name_any(), "claim's Cluster is paused or missing; skipped");
        return Ok(Action::await_change());
    }
    let ns = claim.namespace().ok_or_else(|| StandInError::Invalid {
        object: describe(stored.as_ref()),
        message: "no namespace".into(),
    })?;
    let claims: Api<V::Claim> = Api::namespaced(ctx.client.clone(), &ns);
    let addresses: Api<V::Address> = Api::namespaced(ctx.client.clone(), &ns);

    if claim.meta().deletion_timestamp.is_some() {
        release::<V>(&claims, &addresses, &stored).await?;
        return Ok(Action::await_change());
    }
    if add_finalizer(&claims, stored.as_ref(), RELEASE_ADDRESS_FINALIZER).await? {
        // The patch triggers another reconcile with the new resourceVersion.
        return Ok(Action::await_change());
    }
    if address_ref(&claim).is_some() {
        return Ok(Action::await_change());
    }

    let name = claim.name_any();
    // An address created before a crash (or a lost status patch) is reused.
    if let Some(existing) = addresses
        .get_opt(&name)
        .await
        .map_err(kube_err(format!("reading IPAddress {ns}/{name}")))?
        .map(|a| V::address(&a))
    {
        if existing.spec.claim_ref.name == name {
            set_address_ref(&claims, &name).await?;
            return Ok(Action::await_change());
        }
        return Err(StandInError::Invalid {
            object: describe(stored.as_ref()),
            message: format!(
                "IPAddress {name} exists but belongs to claim {}",
                existing.spec.claim_ref.name
            ),
        });
    }

    let pool_name = &claim.spec.pool_ref.name;
    let pools: Api<InClusterIPPool> = Api::namespaced(ctx.client.clone(), &ns);
    let Some(pool) = pools
        .get_opt(pool_name)
        .await
        .map_err(kube_err(format!("reading InClusterIPPool {ns}/{pool_name}")))?
    else {
        tracing::info!(claim = %name, namespace = %ns, pool = %pool_name, "pool not found; claim stays pending");
        return Ok(Action::requeue(PENDING_RETRY));
    };

    let used = used_addresses::<V>(&addresses, pool_name).await?;
    let free = pool::lowest_free(&pool.spec, &used).map_err(|source| StandInError::Pool {
        pool: format!("{ns}/{pool_name}"),
        source,
    })?;
    let Some(ip) = free else {
        tracing::warn!(claim = %name, namespace = %ns, pool = %pool_name, "pool exhausted; claim stays pending");
        return Ok(Action::requeue(PENDING_RETRY));
    };

    let address = V::to_address(new_address(&claim, stored.as_ref(), &pool, ip));
    match addresses.create(&PostParams::default(), &address).await {
        Ok(_) => {}
        // Someone created it in between: the next reconcile picks it up.
        Err(e) if is_conflict(&e) => return Ok(Action::requeue(Duration::ZERO)),
        Err(e) => return Err(kube_err(format!("creating IPAddress {ns}/{name}"))(e)),
    }
    tracing::info!(claim = %name, namespace = %ns, pool = %pool_name, address = %ip, "allocated address");
    set_address_ref(&claims, &name).await?;
    Ok(Action::await_change())
}

/// Addresses of `pool` (an `InClusterIPPool`) held by IPAddresses in the namespace.
async fn used_addresses<V: IpamVersion>(
    addresses: &Api<V::Address>,
    pool: &str,
) -> Result<HashSet<IpAddr>, StandInError> {
    let list = addresses
        .list(&ListParams::default())
        .await
        .map_err(kube_err("listing IPAddresses"))?;
    Ok(list
        .items
        .iter()
        .map(V::address)
        .filter(|a| a.spec.pool_ref.kind == IN_CLUSTER_IP_POOL_KIND && a.spec.pool_ref.name == pool)
        .filter_map(|a| a.spec.address.parse().ok())
        .collect())
}

/// The IPAddress CAIP would create for `claim` (`stored`: the claim as served, the owner).
fn new_address<C: Resource<DynamicType = ()>>(
    claim: &IPAddressClaim,
    stored: &C,
    pool: &InClusterIPPool,
    ip: IpAddr,
) -> IPAddress {
    let labels: BTreeMap<String, String> = claim
        .labels()
        .get(CLUSTER_NAME_LABEL)
        .map(|v| BTreeMap::from([(CLUSTER_NAME_LABEL.to_owned(), v.clone())]))
        .unwrap_or_default();
    IPAddress {
        metadata: ObjectMeta {
            name: Some(claim.name_any()),
            namespace: claim.namespace(),
            labels: (!labels.is_empty()).then_some(labels),
            owner_references: Some(vec![owner_reference(stored, true), owner_reference(pool, false)]),
            finalizers: Some(vec![PROTECT_ADDRESS_FINALIZER.to_owned()]),
            ..ObjectMeta::default()
        },
        spec: IPAddressSpec {
            claim_ref: NameReference {
                name: claim.name_any(),
            },
            pool_ref: claim.spec.pool_ref.clone(),
            address: ip.to_string(),
            prefix: pool.spec.prefix,
            gateway: pool.spec.gateway.clone().filter(|g| !g.is_empty()),
        },
    }
}

async fn set_address_ref<C>(claims: &Api<C>, name: &str) -> Result<(), StandInError>
where
    C: Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({"status": {"addressRef": {"name": name}}});
    claims
        .patch_status(name, &patch_params(), &Patch::Merge(&patch))
        .await
        .map_err(kube_err(format!(
            "setting status.addressRef of IPAddressClaim {name}"
        )))?;
    Ok(())
}

/// Deletes the claim's address (dropping its protecting finalizer first) and releases the claim.
async fn release<V: IpamVersion>(
    claims: &Api<V::Claim>,
    addresses: &Api<V::Address>,
    claim: &V::Claim,
) -> Result<(), StandInError> {
    if !claim.finalizers().iter().any(|f| f == RELEASE_ADDRESS_FINALIZER) {
        return Ok(());
    }
    let name = claim.name_any();
    let existing = addresses
        .get_opt(&name)
        .await
        .map_err(kube_err(format!("reading IPAddress {name}")))?;
    if let Some(stored) = existing.filter(|a| V::address(a).spec.claim_ref.name == name) {
        let address = V::address(&stored);
        remove_finalizer(addresses, &stored, PROTECT_ADDRESS_FINALIZER).await?;
        match addresses.delete(&name, &Default::default()).await {
            Ok(_) => {}
            Err(e) if is_not_found(&e) => {}
            Err(e) => return Err(kube_err(format!("deleting IPAddress {name}"))(e)),
        }
        tracing::info!(claim = %name, address = %address.spec.address, "released address");
    }
    remove_finalizer(claims, claim, RELEASE_ADDRESS_FINALIZER).await?;
    Ok(())
}
