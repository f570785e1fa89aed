//! [`SimState`]: the shared handle on the cluster that the server and tests use.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{Cluster, HaResource, PowerState, gate};
use crate::scenario::{CloudInitResult, FaultSpec, LatencySpec};

/// Shared handle on the cluster state, usable from tests while the server runs.
#[derive(Clone)]
pub struct SimState {
    inner: Arc<Mutex<Cluster>>,
    gate: Arc<gate::Gate>,
}

impl std::fmt::Debug for SimState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SimState").finish_non_exhaustive()
    }
}

/// A read-only summary of a VM for tests.
#[derive(Debug, Clone, PartialEq)]
pub struct VmView {
    /// VMID.
    pub vmid: u32,
    /// Node.
    pub node: String,
    /// Config keys and values (as stored).
    pub config: BTreeMap<String, String>,
    /// Power state.
    pub power: PowerState,
    /// Whether it is a template.
    pub template: bool,
}

impl SimState {
    /// Wraps a cluster.
    pub fn new(cluster: Cluster) -> Self {
        Self {
            inner: Arc::new(Mutex::new(cluster)),
            gate: Arc::new(gate::Gate::default()),
        }
    }

    /// Locks the cluster (poisoning is ignored: the state stays usable).
    pub fn lock(&self) -> MutexGuard<'_, Cluster> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Runs `f` with exclusive access to the cluster.
    pub fn with<R>(&self, f: impl FnOnce(&mut Cluster) -> R) -> R {
        f(&mut self.lock())
    }

    /// A VM summary.
    pub fn vm(&self, vmid: u32) -> Option<VmView> {
        self.with(|c| {
            c.vms.get(&vmid).map(|v| VmView {
                vmid,
                node: v.node.clone(),
                config: v.config.clone(),
                power: v.power,
                template: v.is_template(),
            })
        })
    }

    /// All VMIDs.
    pub fn vmids(&self) -> Vec<u32> {
        self.with(|c| c.vms.keys().copied().collect())
    }

    /// Sets a VM's power state directly (started now when running).
    pub fn set_power(&self, vmid: u32, power: PowerState) -> bool {
        self.with(|c| match c.vms.get_mut(&vmid) {
            Some(vm) => {
                vm.set_power(power);
                true
            }
            None => false,
        })
    }

    /// Sets or replaces a config key of a VM.
    pub fn set_config(&self, vmid: u32, key: &str, value: &str) -> bool {
        self.with(|c| match c.vms.get_mut(&vmid) {
            Some(vm) => {
                vm.config.insert(key.to_string(), value.to_string());
                true
            }
            None => false,
        })
    }

    /// Marks a node online or offline (offline nodes answer 595 on `/nodes/{node}/...`).
    pub fn set_node_online(&self, node: &str, online: bool) -> bool {
        self.with(|c| match c.nodes.get_mut(node) {
            Some(n) => {
                n.online = online;
                true
            }
            None => false,
        })
    }

    /// Revokes an API token at runtime (as `pveum user token remove` does): every later request
    /// with it is answered `401 Authentication failed!` with an empty body, like PVE. `false`
    /// when no such token exists.
    pub fn revoke_token(&self, token_id: &str) -> bool {
        self.with(|c| c.tokens.remove(token_id).is_some())
    }

    /// Creates an API token or gives it a new secret (rotation: the old secret stops working).
    pub fn set_token(&self, token_id: &str, secret: &str) {
        self.with(|c| {
            c.tokens.insert(token_id.to_owned(), secret.to_owned());
        });
    }

    /// Number of requests seen for an endpoint key such as `POST /nodes/{node}/qemu/{vmid}/clone`.
    pub fn request_count(&self, endpoint: &str) -> u64 {
        self.with(|c| c.counts.get(endpoint).copied().unwrap_or(0))
    }

    /// All request counts.
    pub fn request_counts(&self) -> BTreeMap<String, u64> {
        self.with(|c| c.counts.clone())
    }

    /// Replaces the fault switches.
    pub fn set_faults(&self, faults: FaultSpec) {
        self.with(|c| c.faults = faults);
    }

    /// Replaces the timings. Turning the status cache on fills it from the current state.
    pub fn set_latency(&self, latency: LatencySpec) {
        self.with(|c| {
            let was_on = c.latency.status_cache().is_some();
            c.latency = latency;
            if !was_on && c.latency.status_cache().is_some() {
                let nodes: Vec<String> = c.nodes.keys().cloned().collect();
                for n in nodes {
                    c.refresh_status(&n);
                }
            }
        });
    }

    /// Sets the cloud-init outcome for all guests, or for one VM when `vmid` is given.
    pub fn set_cloud_init(&self, vmid: Option<u32>, result: CloudInitResult) {
        self.with(|c| match vmid {
            Some(id) => {
                if let Some(vm) = c.vms.get_mut(&id) {
                    vm.cloud_init = Some(result);
                }
            }
            None => c.guest.cloud_init = result,
        });
    }

    /// Bytes of a stored file volume (e.g. an uploaded ISO) as seen from `node`.
    pub fn volume_bytes(&self, node: &str, volid: &str) -> Option<Vec<u8>> {
        self.with(|c| c.find_volume(node, volid).map(|v| v.data.clone()))
    }

    /// Volids of file volumes on a storage as seen from `node`.
    pub fn volume_ids(&self, node: &str, storage: &str) -> Vec<String> {
        self.with(|c| {
            c.storage_on(node, storage)
                .and_then(|s| c.volumes_of(node, s))
                .map(|m| m.keys().cloned().collect())
                .unwrap_or_default()
        })
    }

    /// SIDs of HA resources.
    pub fn ha_resources(&self) -> Vec<String> {
        self.with(|c| c.ha.values().map(|h| h.sid.clone()).collect())
    }

    /// The HA resource of VM `vmid`, if it is one.
    pub fn ha_resource(&self, vmid: u32) -> Option<HaResource> {
        self.with(|c| c.ha.get(&vmid).cloned())
    }

    /// Adds a PCI resource mapping `id` with one entry per node in `nodes` (as
    /// `POST /cluster/mapping/pci` would), or adds the nodes to an existing one.
    pub fn add_pci_mapping(&self, id: &str, nodes: &[&str]) {
        self.with(|c| {
            let map = c.pci_mappings.entry(id.to_owned()).or_default();
            for (i, n) in nodes.iter().enumerate() {
                map.push(format!("node={n},path=0000:{:02x}:00.0,id=10de:1eb8", i + 1));
            }
        });
    }

    /// Adds an HA group of every node (as `POST /cluster/ha/groups` would). On 9.x the HA
    /// manager migrates it to a rule once its delay has passed (see [`SimState::migrate_ha_groups`]).
    pub fn add_ha_group(&self, group: &str) {
        self.with(|c| {
            let nodes = c.nodes.keys().map(|n| (n.clone(), None)).collect();
            c.ha_groups.insert(
                group.to_owned(),
                super::HaGroup {
                    nodes,
                    ..super::HaGroup::default()
                },
            );
            c.ha_generation += 1;
        });
    }

    /// PVE 9: lets the HA manager migrate HA groups to node-affinity rules now (groups with
    /// resources become `ha-group-<group>` rules, resources lose `group`, groups are deleted).
    pub fn migrate_ha_groups(&self) {
        self.with(Cluster::migrate_ha_groups);
    }

    /// HA rules (PVE 9) by id.
    pub fn ha_rules(&self) -> BTreeMap<String, super::HaRule> {
        self.with(|c| c.ha_rules.clone())
    }

    /// Gives `subject` (a user id or a token id) `role` on `path` (`propagate`: also below it), as
    /// `pveum acl modify` does, and turns permission checks on. Errors for unknown roles.
    pub fn set_acl(
        &self,
        subject: &str,
        path: &str,
        role: &str,
        propagate: bool,
    ) -> Result<(), crate::access::UnknownRole> {
        self.with(|c| c.access.set_acl(subject, path, role, propagate))
    }

    /// Removes every ACL entry of `subject` (checks stay on).
    pub fn clear_acl(&self, subject: &str) {
        self.with(|c| c.access.clear_acl(subject));
    }

    /// Defines (or replaces) a custom role; privileges the version does not know are ignored.
    pub fn define_role(&self, name: &str, privs: &[&str]) {
        let privs: Vec<String> = privs.iter().map(|p| (*p).to_owned()).collect();
        self.with(|c| c.access.define_role(name, &privs));
    }

    /// Sets a token's privilege separation (`true`: its own ACLs, intersected with its user's).
    pub fn set_token_privsep(&self, token_id: &str, privsep: bool) {
        self.with(|c| c.access.privsep.insert(token_id.to_owned(), privsep));
    }

    /// Turns permission checks on or off (on as soon as an ACL entry is configured).
    pub fn set_acl_enforced(&self, on: bool) {
        self.with(|c| c.access.enforced = on);
    }

    /// The privileges `who` (user or token id) has on `path`.
    pub fn privileges(&self, who: &str, path: &str) -> std::collections::BTreeSet<String> {
        self.with(|c| c.privileges(who, path))
    }

    /// Makes every node's pvestatd refresh the status cache now (what `/cluster/resources`
    /// shows of VMs), instead of waiting for its next 10 s cycle.
    pub fn refresh_status_cache(&self) {
        self.with(|c| {
            let nodes: Vec<String> = c.nodes.keys().cloned().collect();
            for n in nodes {
                c.refresh_status(&n);
            }
        });
    }

    /// Stops (or resumes) the nodes' own status cache refreshes: while frozen, only
    /// [`SimState::refresh_status_cache`] and [`SimState::refresh_node_status`] refresh it.
    pub fn freeze_status_cache(&self, frozen: bool) {
        self.with(|c| c.statcache.frozen = frozen);
    }

    /// Makes one node's pvestatd refresh its part of the status cache now.
    pub fn refresh_node_status(&self, node: &str) {
        self.with(|c| c.refresh_status(node));
    }

    /// Status of a task: `None` while running or unknown, `Some(exitstatus)` once stopped.
    pub fn task_exitstatus(&self, upid: &str) -> Option<String> {
        self.with(|c| c.tasks.get(upid).and_then(|t| t.exitstatus.clone()))
    }

    /// Holds every task in `running` until [`SimState::release_tasks`] (deterministic in-flight checks).
    pub fn hold_tasks(&self) {
        self.with(|c| c.tasks_held = true);
    }

    /// Lets held tasks complete.
    pub fn release_tasks(&self) {
        let notify = self.with(|c| {
            c.tasks_held = false;
            c.task_release.clone()
        });
        notify.notify_waiters();
    }

    /// Number of tasks still running.
    pub fn running_tasks(&self) -> usize {
        self.with(|c| c.tasks.values().filter(|t| t.exitstatus.is_none()).count())
    }

    /// The request gate (the server passes every `/api2/json` request through it).
    pub fn gate(&self) -> &gate::Gate {
        &self.gate
    }

    /// Closes the request gate after `n` more requests: the next `n` requests under `/api2/json`
    /// (any method and path, `POST /access/ticket` and requests failing authentication included)
    /// are served normally; from request `n + 1` on, every request blocks after its body has been
    /// read and before anything is processed (no authentication, no counting, no state change)
    /// until [`SimState::open_gate`] or [`SimState::discard_blocked`]. Calling it again while
    /// closed replaces the remaining allowance; already blocked requests stay blocked.
    pub fn gate_after(&self, n: u64) {
        self.gate.close_after(n);
    }

    /// Resolves `true` as soon as at least one request is blocked at the gate, `false` after
    /// `timeout`.
    pub async fn wait_gate_blocked(&self, timeout: std::time::Duration) -> bool {
        self.gate.wait_blocked(timeout).await
    }

    /// Opens the gate: requests still blocked are processed, later requests are not gated.
    ///
    /// A blocked request whose client has closed its connection is not processed: the HTTP layer
    /// notices the end of the connection (the request body has already been read, so it watches
    /// the socket) and drops the request. That happens asynchronously, so a test that kills a
    /// client and wants the guarantee without any timing assumption calls
    /// [`SimState::discard_blocked`] before `open_gate`.
    pub fn open_gate(&self) {
        self.gate.open();
    }

    /// Fails every request blocked at the gate right now: each one's connection is closed without
    /// a response and the request is never processed (not counted in [`SimState::request_total`]).
    /// The gate stays closed; requests arriving later block as before.
    pub fn discard_blocked(&self) {
        self.gate.discard_blocked();
    }

    /// Number of requests waiting at the gate right now.
    pub fn blocked_requests(&self) -> u64 {
        self.gate.blocked()
    }

    /// Number of requests under `/api2/json` processed so far (every request that passed the gate,
    /// whatever its outcome: 2xx, 4xx, 5xx, 501 and failed logins included).
    pub fn request_total(&self) -> u64 {
        self.gate.total()
    }
}
