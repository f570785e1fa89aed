//! What the ProxmoxCluster controller knows besides its watch events, so a reconcile triggered by
//! something unrelated does not repeat work: the InClusterIPPools as served (from a watch: a pool
//! is applied only when it is missing or differs from what it should be) and when Proxmox last
//! answered its probe (probed again once per resync period, or when the client changes).

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use capmox_api::capi::ipam::InClusterIPPool;
use kube::runtime::reflector::{ObjectRef, Store};

/// Per-cluster memory of the ProxmoxCluster controller (keys are `namespace/name`).
#[derive(Default)]
pub struct Memo {
    pools: Option<Store<InClusterIPPool>>,
    probes: Mutex<HashMap<String, (Instant, String)>>,
}

impl std::fmt::Debug for Memo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memo").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Memo {
    /// A memo that knows the pools as served through `pools` (a watch cache).
    pub fn with_pools(pools: Store<InClusterIPPool>) -> Self {
        Self {
            pools: Some(pools),
            probes: Mutex::default(),
        }
    }

    /// Whether the pool `desired` is served as it should be (without a cache: never known).
    pub fn pool_applied(&self, desired: &InClusterIPPool) -> bool {
        let Some(store) = &self.pools else {
            return false;
        };
        let key = ObjectRef::new(desired.metadata.name.as_deref().unwrap_or_default())
            .within(desired.metadata.namespace.as_deref().unwrap_or_default());
        store
            .get(&key)
            .is_some_and(|current| super::pools::is_applied(desired, &current))
    }

    /// Whether Proxmox should be probed for `key` through the client `client`: never probed,
    /// another client, or the last probe is at least `every` old.
    pub fn probe_due(&self, key: &str, client: &str, every: Duration) -> bool {
        lock(&self.probes)
            .get(key)
            .is_none_or(|(at, c)| c != client || at.elapsed() >= every)
    }

    /// Proxmox answered the probe for `key` through `client` now.
    pub fn probed(&self, key: &str, client: &str) {
        lock(&self.probes).insert(key.to_owned(), (Instant::now(), client.to_owned()));
    }

    /// The probe for `key` failed or must be repeated.
    pub fn probe_failed(&self, key: &str) {
        lock(&self.probes).remove(key);
    }

    /// Forgets `key` (deleted).
    pub fn forget(&self, key: &str) {
        lock(&self.probes).remove(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probes_are_remembered() {
        let m = Memo::default();
        let every = Duration::from_secs(60);
        assert!(m.probe_due("ns/a", "c1", every));
        m.probed("ns/a", "c1");
        assert!(!m.probe_due("ns/a", "c1", every));
        assert!(m.probe_due("ns/a", "c2", every), "another client is probed");
        assert!(m.probe_due("ns/a", "c1", Duration::ZERO));
        m.forget("ns/a");
        assert!(m.probe_due("ns/a", "c1", every));
    }
}
