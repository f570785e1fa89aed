//! The simulated cluster: nodes, storages, VMs, HA resources, tasks, counters, fault switches.

pub mod dhcp;
pub mod gate;
pub mod leftovers;
pub mod vm;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use crate::scenario::{CloudInitResult, FaultSpec, GuestSpec, LatencySpec, Scenario};
use crate::tasks::Task;
pub use leftovers::{Leftovers, VolumeRef};
pub use vm::{PowerState, Snapshot, Vm};

/// A cluster node.
#[derive(Debug, Clone)]
pub struct Node {
    /// Name.
    pub name: String,
    /// Logical CPUs.
    pub cpus: u32,
    /// Memory in bytes.
    pub memory: u64,
    /// Online flag.
    pub online: bool,
    /// Linux bridges (empty: any bridge exists).
    pub bridges: Vec<String>,
    /// Node id in the cluster (1-based).
    pub nodeid: u32,
    /// Process start value used in UPIDs.
    pub pstart: u32,
}

/// A storage definition.
#[derive(Debug, Clone)]
pub struct Storage {
    /// Storage id.
    pub name: String,
    /// Plugin type.
    pub kind: String,
    /// Content types.
    pub content: Vec<String>,
    /// Shared between nodes.
    pub shared: bool,
    /// Nodes it exists on.
    pub nodes: Vec<String>,
    /// Capacity in bytes.
    pub total: u64,
}

impl Storage {
    /// Whether the storage allows the content type.
    pub fn allows(&self, content: &str) -> bool {
        self.content.iter().any(|c| c == content)
    }

    /// Key under which its volumes are stored: shared storages have one namespace.
    pub fn scope(&self, node: &str) -> String {
        if self.shared {
            String::new()
        } else {
            node.to_string()
        }
    }
}

/// A file volume on a storage (ISO, template archive, ...). Disk images are derived from VM configs.
#[derive(Debug, Clone)]
pub struct Volume {
    /// `storage:iso/name.iso`.
    pub volid: String,
    /// Content type (`iso`, `vztmpl`, `import`).
    pub content: String,
    /// Format (`iso`, `tgz`, ...).
    pub format: String,
    /// The bytes.
    pub data: Vec<u8>,
    /// Creation time (epoch seconds).
    pub ctime: u64,
}

/// An HA resource.
#[derive(Debug, Clone)]
pub struct HaResource {
    /// `vm:100`.
    pub sid: String,
    /// Requested state.
    pub state: String,
    /// Group.
    pub group: Option<String>,
    /// Max restarts.
    pub max_restart: i64,
    /// Max relocations.
    pub max_relocate: i64,
    /// Comment.
    pub comment: Option<String>,
}

/// A user.
#[derive(Clone)]
pub struct User {
    /// `user@realm`.
    pub userid: String,
    /// Password for ticket login.
    pub password: Option<String>,
}

/// An issued ticket.
#[derive(Clone)]
pub struct Ticket {
    /// Owner.
    pub userid: String,
    /// CSRF token paired with the ticket.
    pub csrf: String,
    /// Expiry.
    pub expires: Instant,
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("userid", &self.userid)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Ticket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ticket")
            .field("userid", &self.userid)
            .finish_non_exhaustive()
    }
}

/// The whole simulated cluster. Public fields so tests can inspect and modify anything.
pub struct Cluster {
    /// Cluster name.
    pub name: String,
    /// Nodes by name.
    pub nodes: BTreeMap<String, Node>,
    /// Storages.
    pub storages: Vec<Storage>,
    /// VMs and templates by VMID.
    pub vms: BTreeMap<u32, Vm>,
    /// HA resources by VMID.
    pub ha: BTreeMap<u32, HaResource>,
    /// File volumes by (scope, storage) then volid; scope is the node, or "" for shared storage.
    pub volumes: BTreeMap<(String, String), BTreeMap<String, Volume>>,
    /// Tasks by UPID.
    pub tasks: BTreeMap<String, Task>,
    /// Request counts per endpoint key (`GET /cluster/nextid`).
    pub counts: BTreeMap<String, u64>,
    /// Users by id.
    pub users: BTreeMap<String, User>,
    /// API tokens: full token id → secret.
    pub tokens: BTreeMap<String, String>,
    /// Issued tickets.
    pub tickets: BTreeMap<String, Ticket>,
    /// Timings.
    pub latency: LatencySpec,
    /// Guest behaviour defaults.
    pub guest: GuestSpec,
    /// Fault switches.
    pub faults: FaultSpec,
    /// Random source for MACs, UUIDs, pids (seeded).
    pub rng: StdRng,
    /// Random sources for faults, one per endpoint key (seeded, so sequences are per endpoint).
    pub fault_rngs: BTreeMap<String, StdRng>,
    /// Seed.
    pub seed: u64,
    /// Next task pid.
    pub next_pid: u32,
    /// Clones currently running per (node, storage) for lock contention.
    pub active_local_clones: BTreeMap<(String, String), u32>,
    /// Known pools (`None`: any pool name is accepted).
    pub pools: Option<BTreeSet<String>>,
    /// HA groups.
    pub ha_groups: BTreeSet<String>,
    /// PCI resource mappings: id → `map` entries.
    pub pci_mappings: BTreeMap<String, Vec<String>>,
    /// While true, tasks do not complete (tests use this to observe in-flight state).
    pub tasks_held: bool,
    /// Wakes held tasks when they are released.
    pub task_release: Arc<tokio::sync::Notify>,
    /// Every clone that completed, in order: the new VM's VMID and name.
    pub clone_history: Vec<(u32, String)>,
    /// DHCP leases and SLAAC addresses of the guests.
    pub dhcp: dhcp::Dhcp,
}

/// Errors building the cluster from a scenario.
#[derive(Debug, thiserror::Error)]
pub enum StateError {
    /// A template config value is invalid.
    #[error("VM {vmid}: invalid config key {key}: {message}")]
    Config {
        /// VMID.
        vmid: u32,
        /// Key.
        key: String,
        /// Message.
        message: String,
    },
}

impl Cluster {
    /// Builds the cluster described by `scenario`.
    pub fn from_scenario(scenario: &Scenario, seed: u64) -> Result<Self, StateError> {
        let mut rng = StdRng::seed_from_u64(seed);
        let nodes = scenario
            .nodes
            .iter()
            .enumerate()
            .map(|(i, n)| {
                let node = Node {
                    name: n.name.clone(),
                    cpus: n.cpus,
                    memory: n.memory,
                    online: n.online,
                    bridges: n.bridges.clone(),
                    nodeid: u32::try_from(i + 1).unwrap_or(u32::MAX),
                    pstart: rng.random_range(0x0100_0000..0x0F00_0000),
                };
                (n.name.clone(), node)
            })
            .collect::<BTreeMap<_, _>>();
        let all_nodes: Vec<String> = nodes.keys().cloned().collect();
        let storages = scenario
            .storages
            .iter()
            .map(|s| Storage {
                name: s.name.clone(),
                kind: s.kind.clone(),
                content: s
                    .content
                    .split(',')
                    .map(|c| c.trim().to_string())
                    .filter(|c| !c.is_empty())
                    .collect(),
                shared: s.shared,
                nodes: if s.nodes.is_empty() {
                    all_nodes.clone()
                } else {
                    s.nodes.clone()
                },
                total: s.total,
            })
            .collect();
        let mut vms = BTreeMap::new();
        for t in &scenario.templates {
            let mut config = BTreeMap::new();
            for (k, v) in &t.config {
                if let Err(message) = crate::propstr::check_config_value(k, v) {
                    return Err(StateError::Config {
                        vmid: t.vmid,
                        key: k.clone(),
                        message,
                    });
                }
                config.insert(k.clone(), v.clone());
            }
            config.insert("name".into(), t.name.clone());
            if !t.tags.is_empty() {
                config.insert("tags".into(), t.tags.clone());
            }
            if t.template {
                config.insert("template".into(), "1".into());
            }
            let mut vm = Vm::new(t.vmid, &t.node, config);
            // VMs present at start already have RRD data.
            vm.created_at = Instant::now()
                .checked_sub(std::time::Duration::from_secs(24 * 3600))
                .unwrap_or_else(Instant::now);
            vms.insert(t.vmid, vm);
        }
        let mut users = BTreeMap::new();
        let mut tokens = BTreeMap::new();
        for u in &scenario.users {
            users.insert(
                u.userid.clone(),
                User {
                    userid: u.userid.clone(),
                    password: u.password.clone(),
                },
            );
            for t in &u.tokens {
                let secret = t.secret.clone().unwrap_or_else(|| random_uuid(&mut rng));
                tokens.insert(format!("{}!{}", u.userid, t.name), secret);
            }
        }
        let next_pid = rng.random_range(0x0001_0000..0x0010_0000);
        Ok(Self {
            name: scenario.cluster_name.clone(),
            nodes,
            storages,
            vms,
            ha: BTreeMap::new(),
            volumes: BTreeMap::new(),
            tasks: BTreeMap::new(),
            counts: BTreeMap::new(),
            users,
            tokens,
            tickets: BTreeMap::new(),
            latency: scenario.latency.clone(),
            guest: scenario.guest.clone(),
            faults: scenario.faults.clone(),
            rng,
            fault_rngs: BTreeMap::new(),
            seed,
            next_pid,
            active_local_clones: BTreeMap::new(),
            pools: if scenario.pools.is_empty() {
                None
            } else {
                Some(scenario.pools.iter().cloned().collect())
            },
            ha_groups: scenario.ha_groups.iter().cloned().collect(),
            pci_mappings: scenario.pci_mappings.clone(),
            tasks_held: false,
            task_release: Arc::new(tokio::sync::Notify::new()),
            clone_history: Vec::new(),
            dhcp: dhcp::Dhcp::new(scenario.dhcp.clone()),
        })
    }

    /// A storage by name, if it exists on `node`.
    pub fn storage_on(&self, node: &str, name: &str) -> Option<&Storage> {
        self.storages
            .iter()
            .find(|s| s.name == name && s.nodes.iter().any(|n| n == node))
    }

    /// The VM with `vmid` if it lives on `node`.
    pub fn vm_on(&self, node: &str, vmid: u32) -> Option<&Vm> {
        self.vms.get(&vmid).filter(|v| v.node == node)
    }

    /// Mutable VM with `vmid` if it lives on `node`.
    pub fn vm_on_mut(&mut self, node: &str, vmid: u32) -> Option<&mut Vm> {
        self.vms.get_mut(&vmid).filter(|v| v.node == node)
    }

    /// A new locally administered-looking PVE MAC (`BC:24:11:XX:XX:XX`).
    pub fn new_mac(&mut self) -> String {
        let b: [u8; 3] = self.rng.random();
        format!("BC:24:11:{:02X}:{:02X}:{:02X}", b[0], b[1], b[2])
    }

    /// A new random UUID (from the seeded generator).
    pub fn new_uuid(&mut self) -> String {
        random_uuid(&mut self.rng)
    }

    /// Draws from the fault generator of `key`: true with probability `p`.
    pub fn fault_roll(&mut self, key: &str, p: f64) -> bool {
        if p <= 0.0 {
            return false;
        }
        let seed = self.seed ^ fnv64(key.as_bytes());
        let rng = self
            .fault_rngs
            .entry(key.to_string())
            .or_insert_with(|| StdRng::seed_from_u64(seed));
        let x: f64 = rng.random();
        x < p
    }

    /// File volumes of a storage as seen from `node`.
    pub fn volumes_of(&self, node: &str, storage: &Storage) -> Option<&BTreeMap<String, Volume>> {
        self.volumes.get(&(storage.scope(node), storage.name.clone()))
    }

    /// Finds a file volume (e.g. an ISO) by volid as seen from `node`.
    pub fn find_volume(&self, node: &str, volid: &str) -> Option<&Volume> {
        let (storage, _) = volid.split_once(':')?;
        let st = self.storage_on(node, storage)?;
        self.volumes_of(node, st)?.get(volid)
    }

    /// 403 for a pool that does not exist (only when the scenario defines pools).
    pub fn check_pool(&self, pool: Option<&str>) -> Result<(), crate::error::ApiError> {
        match (pool, &self.pools) {
            (Some(p), Some(known)) if !known.contains(p) => Err(crate::error::ApiError::status(
                403,
                format!("Permission check failed (pool '{p}' does not exist)"),
            )),
            _ => Ok(()),
        }
    }

    /// Set of VMIDs in use.
    pub fn used_vmids(&self) -> BTreeSet<u32> {
        self.vms.keys().copied().collect()
    }
}

/// 64-bit FNV-1a.
pub fn fnv64(data: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in data {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

/// A v4-shaped UUID from the given generator.
pub fn random_uuid(rng: &mut StdRng) -> String {
    let mut b: [u8; 16] = rng.random();
    b[6] = (b[6] & 0x0f) | 0x40;
    b[8] = (b[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(b).to_string()
}

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

    /// Replaces the timings.
    pub fn set_latency(&self, latency: LatencySpec) {
        self.with(|c| c.latency = latency);
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

    /// Adds an HA group (as `POST /cluster/ha/groups` would).
    pub fn add_ha_group(&self, group: &str) {
        self.with(|c| c.ha_groups.insert(group.to_owned()));
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
