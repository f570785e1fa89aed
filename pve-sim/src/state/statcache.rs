//! pvestatd's status cache: what `/cluster/resources` shows of a VM besides its id, node, lock,
//! tags, pool and HA state comes from the RRD data each node's pvestatd broadcasts every 10 s
//! (pve-manager `PVE/Service/pvestatd.pm` `update_qemu_status`, read back by
//! `PVE::API2Tools::extract_vm_stats`): uptime, name, status (the QMP status when running),
//! template, cpu, memory, disk. Each node refreshes at its own phase; nothing synchronises them.

use std::collections::BTreeMap;
use std::time::Duration;

use tokio::time::Instant;

use super::{Cluster, SimState, Vm};

/// One VM as the last refresh of its node saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct VmStats {
    /// Uptime in seconds at the refresh.
    pub uptime: u64,
    /// Name.
    pub name: String,
    /// `running`, `stopped`, `paused`, ...
    pub status: String,
    /// Template flag.
    pub template: bool,
    /// vCPUs.
    pub maxcpu: u64,
    /// CPU usage.
    pub cpu: f64,
    /// Memory in bytes.
    pub maxmem: u64,
    /// Used memory.
    pub mem: u64,
    /// Disk size.
    pub maxdisk: u64,
}

impl VmStats {
    /// What pvestatd reports of `vm` right now.
    pub fn of(vm: &Vm) -> Self {
        let running = vm.is_running();
        let maxmem = vm.memory_mib() * 1024 * 1024;
        Self {
            uptime: vm.uptime(),
            name: vm
                .config
                .get("name")
                .cloned()
                .unwrap_or_else(|| format!("VM {}", vm.vmid)),
            status: vm.status_text().1.to_owned(),
            template: vm.is_template(),
            maxcpu: vm.cpus(),
            cpu: if running { 0.01 } else { 0.0 },
            maxmem,
            mem: if running { maxmem / 4 } else { 0 },
            maxdisk: vm.maxdisk(),
        }
    }
}

/// The cache of one node.
#[derive(Debug, Clone, Default)]
pub struct NodeCache {
    /// Index of the refresh tick it holds.
    pub tick: Option<u64>,
    /// VMs of the node at that tick.
    pub vms: BTreeMap<u32, VmStats>,
}

/// The status cache of every node.
#[derive(Debug, Clone)]
pub struct StatusCache {
    /// Per node.
    pub nodes: BTreeMap<String, NodeCache>,
    /// When the ticks are counted from.
    pub epoch: Instant,
    /// Tests: no refresh on its own, only through [`SimState::refresh_status_cache`].
    pub frozen: bool,
}

impl Default for StatusCache {
    fn default() -> Self {
        Self {
            nodes: BTreeMap::new(),
            epoch: Instant::now(),
            frozen: false,
        }
    }
}

impl Cluster {
    /// A node's phase within the refresh period (stable per seed and node).
    fn status_phase(&self, node: &str, period: Duration) -> Duration {
        let ms = u64::try_from(period.as_millis()).unwrap_or(u64::MAX).max(1);
        Duration::from_millis((self.seed ^ super::fnv64(node.as_bytes())) % ms)
    }

    /// The latest tick of `node` at `now` (`None` before its first one).
    fn status_tick(&self, node: &str, period: Duration, now: Instant) -> Option<u64> {
        let since = now.checked_duration_since(self.statcache.epoch + self.status_phase(node, period))?;
        Some(u64::try_from(since.as_millis() / period.as_millis().max(1)).unwrap_or(u64::MAX))
    }

    /// Refreshes `node`'s cache from the VMs' current state (what its pvestatd does every cycle).
    pub fn refresh_status(&mut self, node: &str) {
        let vms = self
            .vms
            .values()
            .filter(|v| v.node == node)
            .map(|v| (v.vmid, VmStats::of(v)))
            .collect();
        let tick = self
            .latency
            .status_cache()
            .and_then(|p| self.status_tick(node, p, Instant::now()));
        self.statcache
            .nodes
            .insert(node.to_owned(), NodeCache { tick, vms });
    }

    /// Refreshes every online node whose tick has passed; returns when the next tick is due.
    pub fn status_cache_tick(&mut self) -> Option<Instant> {
        let period = self.latency.status_cache()?;
        if self.statcache.frozen {
            return None;
        }
        let now = Instant::now();
        let nodes: Vec<(String, bool)> = self.nodes.values().map(|n| (n.name.clone(), n.online)).collect();
        let mut next: Option<Instant> = None;
        for (node, online) in nodes {
            let tick = self.status_tick(&node, period, now);
            let held = self.statcache.nodes.get(&node).and_then(|c| c.tick);
            if online && tick.is_some() && (held.is_none() || held < tick) {
                self.refresh_status(&node);
            }
            let k = tick.map_or(0, |t| t + 1);
            let due = self.statcache.epoch
                + self.status_phase(&node, period)
                + period.saturating_mul(u32::try_from(k).unwrap_or(u32::MAX));
            next = Some(next.map_or(due, |n: Instant| n.min(due)));
        }
        next
    }

    /// What `/cluster/resources` shows of `vm`: `None` while its node has no data of it yet.
    /// Without the status cache this is the VM's live state (after the RRD delay of new VMs).
    pub fn vm_stats(&self, vm: &Vm) -> Option<VmStats> {
        if self.latency.status_cache().is_none() {
            return (vm.created_at.elapsed() >= self.latency.rrd_delay()).then(|| VmStats::of(vm));
        }
        self.statcache.nodes.get(&vm.node)?.vms.get(&vm.vmid).cloned()
    }
}

/// Runs every node's pvestatd cycle until `stop` fires.
pub async fn run(state: SimState, mut stop: tokio::sync::watch::Receiver<bool>) {
    loop {
        let next = state.with(|c| c.status_cache_tick());
        let wake = match next {
            Some(t) => t.min(Instant::now() + Duration::from_secs(1)),
            None => Instant::now() + Duration::from_millis(500),
        };
        tokio::select! {
            _ = tokio::time::sleep_until(wake) => {}
            _ = stop.changed() => return,
        }
    }
}
