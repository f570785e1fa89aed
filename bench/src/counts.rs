//! Counters read at the edges of each phase: Proxmox requests from pve-sim's counters (by
//! endpoint), Kubernetes requests of the manager counted at the control plane (by verb and
//! resource, selected by the manager's User-Agent), and the manager's reconcile passes.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// A point-in-time reading of every counter.
#[derive(Debug, Clone, Default)]
pub struct Snapshot {
    /// pve-sim requests by endpoint key (`GET /cluster/resources`).
    pub proxmox: BTreeMap<String, u64>,
    /// The manager's Kubernetes requests by `verb resource`.
    pub kube: BTreeMap<String, u64>,
    /// ProxmoxMachine reconcile passes.
    pub machine_passes: u64,
    /// ProxmoxCluster reconcile passes.
    pub cluster_passes: u64,
}

/// The difference of two snapshots.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct Delta {
    /// Proxmox requests by endpoint.
    pub proxmox: BTreeMap<String, u64>,
    /// Kubernetes requests by `verb resource`.
    pub kube: BTreeMap<String, u64>,
    /// ProxmoxMachine reconcile passes.
    pub machine_passes: u64,
    /// ProxmoxCluster reconcile passes.
    pub cluster_passes: u64,
}

fn diff(after: &BTreeMap<String, u64>, before: &BTreeMap<String, u64>) -> BTreeMap<String, u64> {
    after
        .iter()
        .filter_map(|(k, a)| {
            let d = a.saturating_sub(before.get(k).copied().unwrap_or(0));
            (d > 0).then(|| (k.clone(), d))
        })
        .collect()
}

impl Snapshot {
    /// What happened between `before` and `self`.
    pub fn since(&self, before: &Snapshot) -> Delta {
        Delta {
            proxmox: diff(&self.proxmox, &before.proxmox),
            kube: diff(&self.kube, &before.kube),
            machine_passes: self.machine_passes.saturating_sub(before.machine_passes),
            cluster_passes: self.cluster_passes.saturating_sub(before.cluster_passes),
        }
    }
}

impl Delta {
    /// All Proxmox requests.
    pub fn proxmox_total(&self) -> u64 {
        self.proxmox.values().sum()
    }

    /// All Kubernetes requests.
    pub fn kube_total(&self) -> u64 {
        self.kube.values().sum()
    }

    /// Proxmox requests of one endpoint.
    pub fn proxmox_of(&self, endpoint: &str) -> u64 {
        self.proxmox.get(endpoint).copied().unwrap_or(0)
    }
}

/// The manager's requests by `verb resource` from the control plane's counts (every
/// `User-Agent` starting with `agent_prefix`).
pub fn kube_by_verb(
    counts: &BTreeMap<testenv::server::requests::RequestKey, u64>,
    agent_prefix: &str,
) -> BTreeMap<String, u64> {
    let mut out = BTreeMap::new();
    for (k, n) in counts {
        if k.user_agent.starts_with(agent_prefix) {
            *out.entry(format!("{} {}", k.verb, k.resource)).or_insert(0) += n;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_drop_unchanged_counters() {
        let before = Snapshot {
            proxmox: BTreeMap::from([("GET /a".into(), 2), ("GET /b".into(), 1)]),
            machine_passes: 3,
            ..Snapshot::default()
        };
        let after = Snapshot {
            proxmox: BTreeMap::from([("GET /a".into(), 5), ("GET /b".into(), 1), ("GET /c".into(), 1)]),
            machine_passes: 10,
            ..Snapshot::default()
        };
        let d = after.since(&before);
        assert_eq!(d.proxmox_total(), 4);
        assert_eq!(d.proxmox_of("GET /b"), 0);
        assert_eq!(d.machine_passes, 7);
    }
}
