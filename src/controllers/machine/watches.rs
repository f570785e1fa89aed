//! The ProxmoxMachine controller's watches: one reflector per kind feeds both a cache the
//! reconcile reads from (instead of GETs) and a trigger stream that requeues only the machines a
//! change concerns, and only when something they depend on changed:
//!
//! * ProxmoxMachines: every change except this controller's own writes (recognised by the
//!   `resourceVersion` its write returned);
//! * Machines: the fields a machine reads (spec, labels, annotations, `status.nodeRef`,
//!   deletion), not every status write of core CAPI;
//! * Clusters: pause, infrastructure readiness and reference, deletion;
//! * ProxmoxClusters: spec changes (`generation`), labels and deletion — not the status writes
//!   (`nodeLocations` changes with every reservation);
//! * IPAddressClaims and IPAddresses: a claim bound to an address once both are cached;
//! * bootstrap Secrets: the one machine whose Machine names the Secret;
//! * InClusterIPPools: cached, no trigger.
//!
//! Cached objects are trimmed (`managedFields`, status the reconcile does not read) to keep the
//! memory of a thousand machines small.

use std::sync::Arc;

use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::capi::views::MachineView;
use capmox_api::consts::{CLUSTER_NAME_LABEL, GROUP};
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use futures::{Stream, StreamExt, future};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{ApiResource, DynamicObject, PartialObjectMeta};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::Value;

use super::{Watched, WatchedPc};
use crate::cluster;
use crate::controllers::decoded::Decoded;
use crate::machine::caches::{Caches, Meta};
use crate::machine::latest::{Latest, resource_version};

/// The caches the reconcile reads.
#[derive(Clone)]
pub struct Stores {
    /// ProxmoxMachines (those our types cannot read too, see `controllers::decoded`).
    pub pms: Store<Watched>,
    /// CAPI Machines (served version).
    pub machines: Store<DynamicObject>,
    /// CAPI Clusters (served version).
    pub clusters: Store<DynamicObject>,
    /// ProxmoxClusters (those our types cannot read too).
    pub pcs: Store<WatchedPc>,
    /// IPAddressClaims (served version).
    pub claims: Store<DynamicObject>,
    /// IPAddresses (served version).
    pub addresses: Store<DynamicObject>,
    /// InClusterIPPools.
    pub pools: Store<InClusterIPPool>,
    /// Kinds of the dynamic caches.
    pub machine_ar: ApiResource,
    /// Cluster kind.
    pub cluster_ar: ApiResource,
    /// IPAddressClaim kind.
    pub claim_ar: ApiResource,
    /// IPAddress kind.
    pub address_ar: ApiResource,
}

fn dyn_get(
    store: &Store<DynamicObject>,
    ar: &ApiResource,
    ns: &str,
    name: &str,
) -> Option<Arc<DynamicObject>> {
    store.get(&ObjectRef::new_with(name, ar.clone()).within(ns))
}

fn as_value(obj: &DynamicObject) -> Option<Value> {
    serde_json::to_value(obj).ok()
}

impl Stores {
    /// Waits until every cache holds its initial list (a reconcile must not take a missing
    /// Cluster for a deleted one while the Clusters are still being listed).
    pub async fn ready(&self) -> Result<(), kube::runtime::reflector::store::WriterDropped> {
        self.pms.wait_until_ready().await?;
        self.machines.wait_until_ready().await?;
        self.clusters.wait_until_ready().await?;
        self.pcs.wait_until_ready().await?;
        self.claims.wait_until_ready().await?;
        self.addresses.wait_until_ready().await?;
        self.pools.wait_until_ready().await
    }

    /// The Machine `name` in `ns`.
    pub fn machine(&self, ns: &str, name: &str) -> Option<Arc<DynamicObject>> {
        dyn_get(&self.machines, &self.machine_ar, ns, name)
    }

    /// The Cluster `name` in `ns`.
    pub fn cluster(&self, ns: &str, name: &str) -> Option<Arc<DynamicObject>> {
        dyn_get(&self.clusters, &self.cluster_ar, ns, name)
    }

    /// The ProxmoxCluster `name` in `ns`.
    pub fn pc(&self, ns: &str, name: &str) -> Option<Arc<ProxmoxCluster>> {
        self.pcs.get(&ObjectRef::new(name).within(ns))?.ok().cloned()
    }

    /// The readable ProxmoxClusters.
    pub fn readable_pcs(&self) -> Vec<Arc<ProxmoxCluster>> {
        self.pcs
            .state()
            .iter()
            .filter_map(|pc| pc.ok().cloned())
            .collect()
    }

    /// The ProxmoxMachine `r` (`None`: not cached, or our types cannot read it).
    pub fn pm(&self, r: &ObjectRef<ProxmoxMachine>) -> Option<Arc<ProxmoxMachine>> {
        self.pms.get(&retype(r))?.ok().cloned()
    }
}

impl Caches for Stores {
    fn claim(&self, namespace: &str, name: &str) -> Option<Value> {
        dyn_get(&self.claims, &self.claim_ar, namespace, name).and_then(|o| as_value(&o))
    }

    fn address(&self, namespace: &str, name: &str) -> Option<Value> {
        dyn_get(&self.addresses, &self.address_ar, namespace, name).and_then(|o| as_value(&o))
    }

    fn claims_of(&self, namespace: &str, name: &str, uid: &str) -> Vec<String> {
        self.claims
            .state()
            .into_iter()
            .filter(|c| c.namespace().as_deref() == Some(namespace))
            .filter(|c| c.metadata.deletion_timestamp.is_none())
            .filter(|c| {
                c.owner_references().iter().any(|r| {
                    r.kind == "ProxmoxMachine"
                        && (r.uid == uid || (r.name == name && r.api_version.starts_with(GROUP)))
                })
            })
            .map(|c| c.name_any())
            .collect()
    }

    fn pool(&self, namespace: &str, name: &str) -> Option<Meta> {
        self.pools
            .get(&ObjectRef::new(name).within(namespace))
            .map(|p| (p.labels().clone(), p.annotations().clone()))
    }

    fn recorded_vmids(&self, namespace: &str, cluster: &str, except_uid: Option<&str>) -> Vec<i64> {
        self.pms
            .state()
            .into_iter()
            .filter(|pm| pm.namespace().as_deref() == Some(namespace))
            .filter(|pm| pm.labels().get(CLUSTER_NAME_LABEL).map(String::as_str) == Some(cluster))
            .filter(|pm| except_uid.is_none_or(|u| pm.meta().uid.as_deref() != Some(u)))
            // A sibling our types cannot read still holds its VMID.
            .filter_map(|pm| match pm.as_ref() {
                Decoded::Ok(pm) => pm.spec.virtual_machine_id,
                Decoded::Unreadable(u) => u.raw.pointer("/spec/virtualMachineID").and_then(Value::as_i64),
            })
            .collect()
    }
}

/// Drops what no reconcile reads from a cached object's metadata.
pub fn trim_meta(meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) {
    meta.managed_fields = None;
    if let Some(a) = meta.annotations.as_mut() {
        a.remove("kubectl.kubernetes.io/last-applied-configuration");
    }
}

/// Keeps only `keep` of a dynamic object's `status`.
pub fn trim_status(obj: &mut DynamicObject, keep: &[&str]) {
    trim_meta(&mut obj.metadata);
    if let Some(status) = obj.data.get_mut("status").and_then(Value::as_object_mut) {
        status.retain(|k, _| keep.contains(&k.as_str()));
    }
}

/// The parts of a Machine's `spec` the controller reads (see `MachineView`); with `bootstrap`,
/// only its `dataSecretName`.
const MACHINE_SPEC_READ: [&str; 6] = [
    "clusterName",
    "bootstrap",
    "version",
    "infrastructureRef",
    "failureDomain",
    "providerID",
];

/// Trims a cached CAPI Machine to what the controller reads of it (`MachineView`, owners): the
/// spec fields above, `status.nodeRef`, metadata without managed fields and finalizers. A
/// thousand Machines' bootstrap config references, drain timeouts and status copies are
/// megabytes nobody reads.
pub fn trim_machine(m: &mut DynamicObject) {
    trim_status(m, &["nodeRef"]);
    m.metadata.finalizers = None;
    if let Some(spec) = m.data.get_mut("spec").and_then(Value::as_object_mut) {
        spec.retain(|k, _| MACHINE_SPEC_READ.contains(&k.as_str()));
        if let Some(bootstrap) = spec.get_mut("bootstrap").and_then(Value::as_object_mut) {
            bootstrap.retain(|k, _| k == "dataSecretName");
        }
    }
}

use crate::controllers::triggers::hash_of;

/// What this controller writes of a ProxmoxMachine and what others change that it reacts to:
/// labels, annotations, finalizers, owners, deletion, spec and status.
pub fn pm_fingerprint(pm: &ProxmoxMachine) -> u64 {
    hash_of((
        serde_json::to_string(&pm.metadata.labels).unwrap_or_default(),
        serde_json::to_string(&pm.metadata.annotations).unwrap_or_default(),
        pm.finalizers(),
        pm.owner_references()
            .iter()
            .map(|o| o.uid.clone())
            .collect::<Vec<_>>(),
        pm.metadata.deletion_timestamp.is_some(),
        serde_json::to_string(&pm.spec).unwrap_or_default(),
        serde_json::to_string(&pm.status).unwrap_or_default(),
    ))
}

/// The same object reference for another type of the same kind.
pub fn retype<A, B>(r: &ObjectRef<A>) -> ObjectRef<B>
where
    A: kube::runtime::reflector::Lookup,
    B: kube::runtime::reflector::Lookup,
    B::DynamicType: Default,
{
    let out = ObjectRef::new(&r.name);
    match &r.namespace {
        Some(ns) => out.within(ns),
        None => out,
    }
}

/// ProxmoxMachine events that are not this controller's own writes (recognised by the state its
/// write was to produce, or by the `resourceVersion` its write returned).
pub fn not_own_writes<S>(
    stream: S,
    latest: Arc<Latest<ProxmoxMachine>>,
) -> impl Stream<Item = Result<Watched, watcher::Error>> + Send
where
    S: Stream<Item = Result<Watched, watcher::Error>> + Send,
{
    stream.filter(move |item| {
        let own = item.as_ref().ok().and_then(Decoded::ok).is_some_and(|pm| {
            let pm = pm.as_ref();
            let r = ObjectRef::from_obj(pm);
            let written = latest.written_version(&r);
            (written.is_some() && written == resource_version(pm))
                || latest.is_expected(&r, pm_fingerprint(pm))
        });
        future::ready(!own)
    })
}

/// What a ProxmoxMachine reads of its Machine.
pub fn machine_fingerprint(m: &DynamicObject) -> u64 {
    let v = MachineView::from_dynamic(m);
    hash_of((
        v.cluster_name,
        v.bootstrap_data_secret_name,
        v.version,
        v.infrastructure_ref.map(|r| (r.api_group, r.kind, r.name)),
        v.control_plane,
        v.node_ref,
        v.deleting,
        v.paused,
        m.owner_references()
            .iter()
            .map(|o| o.uid.clone())
            .collect::<Vec<_>>(),
    ))
}

/// What a ProxmoxMachine reads of its Cluster.
pub fn cluster_fingerprint(c: &DynamicObject) -> u64 {
    let v = capmox_api::capi::views::ClusterView::from_dynamic(c);
    hash_of((
        v.paused,
        v.infrastructure_provisioned,
        v.infrastructure_ref.map(|r| (r.api_group, r.kind, r.name)),
        v.deleting,
    ))
}

/// What a ProxmoxMachine reads of its ProxmoxCluster: the spec (by generation), labels, owners,
/// deletion — not the status.
pub fn pc_fingerprint(pc: &WatchedPc) -> u64 {
    hash_of((
        pc.meta().generation,
        pc.labels().iter().collect::<Vec<_>>(),
        pc.owner_references()
            .iter()
            .map(|o| o.uid.clone())
            .collect::<Vec<_>>(),
        pc.meta().deletion_timestamp.is_some(),
    ))
}

/// The claim's bound address (`status.addressRef.name`) and deletion.
pub fn claim_fingerprint(c: &DynamicObject) -> u64 {
    hash_of((
        c.data
            .pointer("/status/addressRef/name")
            .and_then(Value::as_str)
            .map(str::to_owned),
        c.metadata.deletion_timestamp.is_some(),
    ))
}

/// Machine → its ProxmoxMachine via `spec.infrastructureRef`.
pub fn machine_to_pm(m: &DynamicObject) -> Option<ObjectRef<Watched>> {
    let view = MachineView::from_dynamic(m);
    let r = view.infrastructure_ref?;
    (r.kind == "ProxmoxMachine" && r.api_group.as_deref().is_none_or(|g| g == GROUP))
        .then(|| ObjectRef::new(&r.name).within(&view.namespace))
}

/// The ProxmoxMachine name in a claim name `<machine>-<netN>-<NN>-inet`.
pub fn machine_of_claim(claim: &str) -> Option<&str> {
    let rest = claim.strip_suffix("-inet")?;
    let (rest, offset) = rest.rsplit_once('-')?;
    if offset.len() != 2 || !offset.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (machine, net) = rest.rsplit_once('-')?;
    let n = net.strip_prefix("net")?;
    (!n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !machine.is_empty()).then_some(machine)
}

/// Claim → its ProxmoxMachine, once the address it is bound to is cached too.
pub fn claim_to_pm(c: &DynamicObject, stores: &Stores) -> Option<ObjectRef<Watched>> {
    let ns = c.namespace()?;
    let owner = c
        .owner_references()
        .iter()
        .find(|o| o.kind == "ProxmoxMachine" && o.controller == Some(true))?;
    if let Some(address) = c.data.pointer("/status/addressRef/name").and_then(Value::as_str)
        && dyn_get(&stores.addresses, &stores.address_ar, &ns, address).is_none()
    {
        // The address event will trigger the machine once it is cached.
        return None;
    }
    Some(ObjectRef::new(&owner.name).within(&ns))
}

/// IPAddress → the ProxmoxMachine of its claim, once the claim is cached as bound to it.
pub fn address_to_pm(a: &DynamicObject, stores: &Stores) -> Option<ObjectRef<Watched>> {
    let claim = a.data.pointer("/spec/claimRef/name").and_then(Value::as_str)?;
    let ns = a.namespace()?;
    if let Some(c) = dyn_get(&stores.claims, &stores.claim_ar, &ns, claim) {
        let bound = c.data.pointer("/status/addressRef/name").and_then(Value::as_str);
        if bound != Some(a.name_any().as_str()) {
            // The claim event will trigger the machine once it is bound.
            return None;
        }
    }
    machine_of_claim(claim).map(|m| ObjectRef::new(m).within(&ns))
}

/// The machines of `cluster` in `ns`.
pub fn by_cluster(store: &Store<Watched>, ns: Option<String>, cluster: &str) -> Vec<ObjectRef<Watched>> {
    store
        .state()
        .into_iter()
        .filter(|pm| {
            pm.namespace() == ns && pm.labels().get(CLUSTER_NAME_LABEL).map(String::as_str) == Some(cluster)
        })
        .map(|pm| ObjectRef::from_obj(pm.as_ref()))
        .collect()
}

/// ProxmoxCluster → the machines of its cluster.
pub fn pc_to_pms(pc: &WatchedPc, pms: &Store<Watched>) -> Vec<ObjectRef<Watched>> {
    match pc.ok() {
        Some(pc) => by_cluster(pms, pc.namespace(), &cluster::cluster_name(pc, None)),
        None => Vec::new(),
    }
}

/// Bootstrap Secret → the unprovisioned machine whose Machine names it.
pub fn secret_to_pm(s: &PartialObjectMeta<Secret>, stores: &Stores) -> Option<ObjectRef<Watched>> {
    let ns = s.namespace()?;
    let name = s.name_any();
    let pm = stores
        .machines
        .state()
        .into_iter()
        .filter(|m| m.namespace().as_deref() == Some(ns.as_str()))
        .map(|m| MachineView::from_dynamic(&m))
        .find(|m| m.bootstrap_data_secret_name.as_deref() == Some(name.as_str()))
        .and_then(|m| m.infrastructure_ref)
        .filter(|r| r.kind == "ProxmoxMachine")
        .map(|r| ObjectRef::<Watched>::new(&r.name).within(&ns))?;
    let provisioned = stores
        .pms
        .get(&pm)
        .is_some_and(|p| p.ok().is_some_and(|p| p.is_provisioned()));
    (!provisioned).then_some(pm)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn claim_names_map_back_to_machines() {
        assert_eq!(machine_of_claim("m1-net0-00-inet"), Some("m1"));
        assert_eq!(machine_of_claim("my-cp-abc12-net12-03-inet"), Some("my-cp-abc12"));
        assert_eq!(machine_of_claim("m1-net0-0-inet"), None);
        assert_eq!(machine_of_claim("m1-eth0-00-inet"), None);
        assert_eq!(machine_of_claim("net0-00-inet"), None);
        assert_eq!(machine_of_claim("m1-net0-00"), None);
    }

    #[test]
    fn machines_map_to_their_infrastructure_ref() {
        let ar = ApiResource::erase::<capmox_api::capi::v1beta2::Machine>(&());
        let mut m = DynamicObject::new("m", &ar);
        m.metadata.namespace = Some("ns".into());
        m.data = json!({"spec": {"infrastructureRef": {"apiGroup": GROUP, "kind": "ProxmoxMachine", "name": "pm"}}});
        assert_eq!(machine_to_pm(&m), Some(ObjectRef::new("pm").within("ns")));
        m.data = json!({"spec": {"infrastructureRef": {"apiGroup": "other", "kind": "ProxmoxMachine", "name": "pm"}}});
        assert_eq!(machine_to_pm(&m), None);
    }

    #[test]
    fn machine_status_churn_does_not_change_the_fingerprint() {
        let ar = ApiResource::erase::<capmox_api::capi::v1beta2::Machine>(&());
        let mut m = DynamicObject::new("m", &ar);
        m.data = json!({"spec": {"bootstrap": {"dataSecretName": "s"}}, "status": {"phase": "Provisioning"}});
        let before = machine_fingerprint(&m);
        m.data["status"]["phase"] = json!("Running");
        m.data["status"]["conditions"] = json!([{"type": "Ready"}]);
        assert_eq!(machine_fingerprint(&m), before);
        m.data["status"]["nodeRef"] = json!({"name": "m"});
        assert_ne!(machine_fingerprint(&m), before);
        trim_status(&mut m, &["nodeRef"]);
        assert_eq!(m.data["status"], json!({"nodeRef": {"name": "m"}}));
    }

    #[test]
    fn trimmed_machines_read_the_same() {
        for (api_version, infra) in [
            (
                "cluster.x-k8s.io/v1beta2",
                json!({"apiGroup": GROUP, "kind": "ProxmoxMachine", "name": "pm"}),
            ),
            (
                "cluster.x-k8s.io/v1beta1",
                json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxMachine",
                       "name": "pm", "namespace": "ns", "uid": "u2"}),
            ),
        ] {
            let full = json!({
                "apiVersion": api_version, "kind": "Machine",
                "metadata": {
                    "name": "m", "namespace": "ns", "uid": "u1", "resourceVersion": "7",
                    "labels": {CLUSTER_NAME_LABEL: "c", "cluster.x-k8s.io/control-plane": ""},
                    "annotations": {"cluster.x-k8s.io/paused": ""},
                    "finalizers": ["machine.cluster.x-k8s.io"],
                    "ownerReferences": [{"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "MachineSet",
                                         "name": "ms", "uid": "u3", "controller": true}],
                    "deletionTimestamp": "2026-01-01T00:00:00Z",
                },
                "spec": {
                    "clusterName": "c", "version": "v1.33.1", "failureDomain": "fd1", "providerID": "proxmox://x",
                    "bootstrap": {"dataSecretName": "s", "configRef": {"apiGroup": "bootstrap.cluster.x-k8s.io",
                                  "kind": "KubeadmConfig", "name": "kc"}},
                    "infrastructureRef": infra,
                    "readinessGates": [{"conditionType": "X"}],
                    "deletion": {"nodeDrainTimeoutSeconds": 10},
                },
                "status": {"nodeRef": {"name": "n"}, "phase": "Running", "conditions": [{"type": "Ready"}]},
            });
            let full: DynamicObject = serde_json::from_value(full).unwrap();
            let mut trimmed = full.clone();
            trim_machine(&mut trimmed);
            assert_eq!(
                MachineView::from_dynamic(&trimmed),
                MachineView::from_dynamic(&full)
            );
            assert_eq!(machine_fingerprint(&trimmed), machine_fingerprint(&full));
            assert_eq!(machine_to_pm(&trimmed), machine_to_pm(&full));
            assert_eq!(trimmed.data["spec"]["bootstrap"], json!({"dataSecretName": "s"}));
            assert!(trimmed.data["spec"].get("readinessGates").is_none());
            assert_eq!(trimmed.data["status"], json!({"nodeRef": {"name": "n"}}));
        }
    }
}
