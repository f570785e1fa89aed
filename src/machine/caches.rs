//! What a machine pass reads from the controller's watch caches instead of the API server: the
//! IPAM claims and addresses, the IP pools' labels and annotations, and the VMIDs recorded on the
//! other machines of a cluster. The controller implements it over its reflector stores; tests
//! can implement it over plain maps.

use std::collections::BTreeMap;

/// Labels and annotations of an object.
pub type Meta = (BTreeMap<String, String>, BTreeMap<String, String>);

/// Cached Kubernetes objects a machine pass needs.
pub trait Caches: Send + Sync {
    /// The IPAddressClaim `name` in `namespace`, as served.
    fn claim(&self, namespace: &str, name: &str) -> Option<serde_json::Value>;
    /// The IPAddress `name` in `namespace`, as served.
    fn address(&self, namespace: &str, name: &str) -> Option<serde_json::Value>;
    /// The names of the IPAddressClaims in `namespace` owned by the ProxmoxMachine `name` with
    /// `uid`, or by an earlier ProxmoxMachine of that name (another UID: restored, moved or
    /// re-created), that are not being deleted.
    fn claims_of(&self, namespace: &str, name: &str, uid: &str) -> Vec<String>;
    /// Labels and annotations of the InClusterIPPool `name` in `namespace`.
    fn pool(&self, namespace: &str, name: &str) -> Option<Meta>;
    /// `spec.virtualMachineID` of every ProxmoxMachine of cluster `cluster` in `namespace`
    /// except the one with `uid`.
    fn recorded_vmids(&self, namespace: &str, cluster: &str, except_uid: Option<&str>) -> Vec<i64>;
}
