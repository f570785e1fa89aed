//! The simulated cluster: nodes, storages, VMs, HA resources, tasks, counters, fault switches.

pub mod dhcp;
pub mod gate;
pub mod ha;
mod handle;
pub mod leftovers;
mod perm;
pub mod statcache;
pub mod vm;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::time::Instant;

use crate::access::Access;
use crate::scenario::{FaultSpec, GuestSpec, HaGroupSpec, LatencySpec, Scenario};
use crate::tasks::Task;
use crate::version::PveVersion;
pub use ha::{HaGroup, HaResource, HaRule};
pub use handle::{SimState, VmView};
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
    /// The Proxmox VE release played.
    pub version: PveVersion,
    /// ACL entries, roles, privilege separation of tokens.
    pub access: Access,
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
    /// HA groups by id.
    pub ha_groups: BTreeMap<String, HaGroup>,
    /// HA rules by id (PVE 9).
    pub ha_rules: BTreeMap<String, HaRule>,
    /// `failback` of HA resources where it was set (PVE 9), by VMID.
    pub ha_failback: BTreeMap<u32, bool>,
    /// Generation of the HA rules config (feeds its digest).
    pub ha_generation: u64,
    /// PVE 9: when the CRM migrates the HA groups to rules.
    pub ha_group_migration_due: Option<Instant>,
    /// pvestatd's per-node status cache (what `/cluster/resources` shows of VMs).
    pub statcache: statcache::StatusCache,
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
    /// An ACL entry names a role that does not exist.
    #[error("ACL entry on {path}: {source}")]
    Acl {
        /// ACL path.
        path: String,
        /// The unknown role.
        source: crate::access::UnknownRole,
    },
}

/// An HA group of the scenario (a bare name: every node, no priority).
fn ha_group_of(spec: &HaGroupSpec, all_nodes: &[String]) -> HaGroup {
    match spec {
        HaGroupSpec::Name(_) => HaGroup {
            nodes: all_nodes.iter().map(|n| (n.clone(), None)).collect(),
            ..HaGroup::default()
        },
        HaGroupSpec::Full(d) => HaGroup {
            nodes: if d.nodes.trim().is_empty() {
                all_nodes.iter().map(|n| (n.clone(), None)).collect()
            } else {
                d.nodes
                    .split([',', ';', ' '])
                    .filter(|n| !n.is_empty())
                    .map(|n| match n.split_once(':') {
                        Some((n, p)) => (n.to_owned(), p.parse().ok()),
                        None => (n.to_owned(), None),
                    })
                    .collect()
            },
            restricted: d.restricted.then_some(true),
            nofailback: d.nofailback.then_some(true),
            comment: d.comment.clone(),
        },
    }
}

/// Roles, ACL entries and token privilege separation of the scenario.
fn access_of(scenario: &Scenario) -> Result<Access, StateError> {
    let mut access = Access::new(scenario.version);
    for (name, privs) in &scenario.roles {
        access.define_role(name, privs);
    }
    for u in &scenario.users {
        for t in &u.tokens {
            access
                .privsep
                .insert(format!("{}!{}", u.userid, t.name), t.privsep);
        }
    }
    for a in &scenario.acl {
        let subject = a.subject().unwrap_or_default();
        access
            .set_acl(subject, &a.path, &a.role, a.propagate)
            .map_err(|source| StateError::Acl {
                path: a.path.clone(),
                source,
            })?;
    }
    Ok(access)
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
                if let Err(message) = crate::config_keys::check_config_value(k, v, scenario.version) {
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
        let mut cluster = Self {
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
            ha_groups: scenario
                .ha_groups
                .iter()
                .map(|g| (g.name().to_owned(), ha_group_of(g, &all_nodes)))
                .collect(),
            ha_rules: BTreeMap::new(),
            ha_failback: BTreeMap::new(),
            ha_generation: 0,
            ha_group_migration_due: None,
            statcache: statcache::StatusCache::default(),
            version: scenario.version,
            access: access_of(scenario)?,
            pci_mappings: scenario.pci_mappings.clone(),
            tasks_held: false,
            task_release: Arc::new(tokio::sync::Notify::new()),
            clone_history: Vec::new(),
            dhcp: dhcp::Dhcp::new(scenario.dhcp.clone()),
        };
        // pvestatd has been running before: every node has data of its VMs.
        for node in all_nodes {
            cluster.refresh_status(&node);
        }
        Ok(cluster)
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
