//! What this process knows about one Proxmox cluster, shared by every VM it manages there — the
//! floor between the VM lifecycle and the Proxmox client.
//!
//! Instead of every VM being read on every pass (`status/current` + `config`), a pass observes
//! Proxmox from what is already known:
//!
//! * [`Snapshot`]: one `GET /cluster/resources` (VMs with node, status, lock, name, tags, uptime;
//!   nodes; storages) serves every VM of the cluster while it is fresh enough for the pass
//!   ([`Freshness`]: read after this process's last write to the VM, and not older than the
//!   pass allows);
//! * ISO listings: one `GET …/storage/{storage}/content?content=iso` per node and storage shows
//!   every VM's seed ISO;
//! * VM configs: read once and then kept up to date with this process's own writes;
//! * [`watch`]: owners waiting for a clone, stop, destroy or ISO task are woken when a list shows
//!   the result; [`guests`]: guest checks are scouted; [`timing`]: task looks follow learned
//!   task durations.
//!
//! Every Proxmox write goes through the view ([`write`]), which records by itself what the write
//! makes stale or predictable: the next read of the shared list, of a storage listing or of the
//! config is then as fresh as it must be, without the caller invalidating anything by hand. The
//! reads that interpret those records — a task's state ([`tasks`]) and a VM's state laid over
//! the list ([`look`]) — live here too.

pub mod error;
pub mod guests;
pub mod look;
pub mod owner;
pub mod power;
mod registry;
pub mod shared;
pub mod snapshot;
pub mod snapshots;
pub mod tasks;
pub mod timing;
pub mod watch;
pub mod write;
pub mod writes;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

pub use error::ViewError;
pub use look::{Look, Power, VmFacts};
pub use owner::Owner;
pub use registry::{Views, Wake};
pub use shared::{Freshness, Shared};
pub use snapshot::Snapshot;
pub use tasks::{TaskFacts, TaskLook};

use crate::proxmox::Client;
use crate::proxmox::types::VmConfig;

/// The name of one Proxmox cluster (`None` inside: none, or not readable), read once and shared:
/// the cluster controller's first probe reads it, a VM's bootstrap meta-data (`region`) uses it.
pub type ClusterName = tokio::sync::OnceCell<Option<String>>;

/// The `/cluster/resources` list of one Proxmox cluster as the manager's controllers share it.
pub type ResourceList = Shared<Snapshot>;

/// Timing of the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewSettings {
    /// Shortest time between two reads of one shared list while owners wait (and how old a
    /// list may be for a VM in flight).
    pub observe_interval: Duration,
    /// Shortest delay before looking at a task again.
    pub look_min: Duration,
    /// Longest delay between two looks at a task.
    pub look_max: Duration,
}

#[derive(Debug)]
struct CachedConfig {
    config: Arc<VmConfig>,
    at: Instant,
}

/// ISO listings by node and storage.
type IsoListings = HashMap<(String, String), Arc<Shared<BTreeSet<String>>>>;

/// How long a cached VM config is used before it is read again.
const CONFIG_TTL: Duration = Duration::from_secs(600);

/// The shared knowledge about one Proxmox cluster (one API endpoint and user).
#[derive(Debug)]
pub struct ProxmoxView {
    client: Client,
    settings: ViewSettings,
    wake: Wake,
    resources: Arc<ResourceList>,
    isos: Mutex<IsoListings>,
    configs: Mutex<HashMap<u32, CachedConfig>>,
    writes: Mutex<writes::Writes>,
    tasks: Mutex<HashMap<String, Instant>>,
    iso_at: Mutex<HashMap<u32, (String, String)>>,
    iso_deletions: Mutex<HashMap<u32, String>>,
    isos_removed: Mutex<HashSet<u32>>,
    /// The names read in configs this process dropped from its cache ([`Self::iso_removed`]).
    names: Mutex<HashMap<u32, String>>,
    cloned: Mutex<HashSet<u32>>,
    /// Owners waiting for their VM's state.
    pub waits: watch::Waits,
    /// Guest waits.
    pub guests: guests::Guests,
    /// Learned task durations.
    pub timing: timing::Timing,
    refresher: Mutex<Option<tokio::task::AbortHandle>>,
    pending: Mutex<HashMap<Owner, PendingWait>>,
    /// The Proxmox cluster's name, read once and shared with the cluster controller's probe.
    cluster_name: Arc<ClusterName>,
    /// The Proxmox VE major version (`GET /version`), read once when first needed.
    major: tokio::sync::OnceCell<u32>,
}

/// A wait a pass asked for, armed once the pass has persisted what it did (so that no Proxmox
/// request of the refresher can come between a task's start and the record of it).
#[derive(Debug, Clone)]
struct PendingWait {
    vmid: u32,
    expect: watch::Expect,
    first: Duration,
    every: Duration,
}

impl Drop for ProxmoxView {
    fn drop(&mut self) {
        if let Some(h) = self
            .refresher
            .get_mut()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take()
        {
            h.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl ProxmoxView {
    /// A view of the cluster `client` talks to, sharing `resources` (the manager's
    /// `/cluster/resources` list of that cluster) and its `cluster_name`.
    pub fn new(
        client: Client,
        resources: Arc<ResourceList>,
        cluster_name: Arc<ClusterName>,
        settings: ViewSettings,
        wake: Wake,
    ) -> Arc<Self> {
        Arc::new(Self {
            client,
            settings,
            wake,
            resources,
            isos: Mutex::default(),
            configs: Mutex::default(),
            writes: Mutex::default(),
            tasks: Mutex::default(),
            iso_at: Mutex::default(),
            iso_deletions: Mutex::default(),
            isos_removed: Mutex::default(),
            names: Mutex::default(),
            cloned: Mutex::default(),
            waits: watch::Waits::default(),
            guests: guests::Guests::default(),
            timing: timing::Timing::default(),
            refresher: Mutex::new(None),
            pending: Mutex::default(),
            cluster_name,
            major: tokio::sync::OnceCell::new(),
        })
    }

    /// The Proxmox cluster's name from `GET /cluster/status` ([`Client::cluster_name`]; read
    /// once per Proxmox cluster, usually already by the cluster controller's probe). The
    /// bootstrap meta-data's `region`.
    pub async fn cluster_name(&self) -> Result<Option<String>, ViewError> {
        self.cluster_name
            .get_or_try_init(|| async {
                self.client
                    .cluster_name()
                    .await
                    .map_err(ViewError::proxmox("reading the Proxmox cluster status"))
            })
            .await
            .cloned()
    }

    /// The Proxmox VE major version (8, 9, …) from `GET /version`, read once per Proxmox cluster
    /// (the HA API differs: groups on 8, rules on 9).
    pub async fn pve_major(&self) -> Result<u32, ViewError> {
        self.major
            .get_or_try_init(|| async {
                let v = self
                    .client
                    .version()
                    .await
                    .map_err(ViewError::proxmox("reading the Proxmox VE version"))?;
                Ok(v.version
                    .split('.')
                    .next()
                    .and_then(|m| m.trim().parse().ok())
                    .unwrap_or(8))
            })
            .await
            .copied()
    }

    /// The Proxmox client, for reads the view does not share (guest agent, VMID probes, PCI
    /// mappings). Writes go through the view's own methods ([`write`]).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The view's timing.
    pub fn settings(&self) -> ViewSettings {
        self.settings
    }

    /// The `/cluster/resources` list, shared while it satisfies `fresh`.
    pub async fn snapshot(&self, fresh: Freshness) -> Result<(Instant, Arc<Snapshot>), ViewError> {
        self.resources
            .get(fresh, || async {
                Snapshot::fetch(&self.client)
                    .await
                    .map_err(ViewError::proxmox("listing cluster resources"))
            })
            .await
    }

    /// The freshness a pass needs for VM `vmid`: within `max_age`, read after this process's
    /// last write to it that the list shows.
    pub fn freshness(&self, vmid: Option<u32>, max_age: Duration) -> Freshness {
        Freshness::within(max_age).after(vmid.and_then(|v| lock(&self.writes).last_vm(v)))
    }

    /// The ISO volume ids on `storage` of `node`, shared while they satisfy `fresh`.
    pub async fn isos(
        &self,
        node: &str,
        storage: &str,
        fresh: Freshness,
    ) -> Result<Arc<BTreeSet<String>>, ViewError> {
        let shared = Arc::clone(
            lock(&self.isos)
                .entry((node.to_owned(), storage.to_owned()))
                .or_default(),
        );
        let (_, list) = shared
            .get(fresh, || async {
                self.client
                    .storage_content(node, storage, Some("iso"))
                    .await
                    .map(|c| c.into_iter().map(|v| v.volid).collect::<BTreeSet<String>>())
                    .map_err(ViewError::proxmox(format!(
                        "listing ISO images on {storage} of node {node}"
                    )))
            })
            .await?;
        Ok(list)
    }

    /// Whether the ISO `volid` of VM `vmid` is on `storage` of `node` (shared listing, `fresh`
    /// and read after this process's last write to the VM's storage, or after its last ISO task
    /// ended).
    pub async fn iso_present(
        &self,
        node: &str,
        storage: &str,
        vmid: u32,
        volid: &str,
        fresh: Freshness,
    ) -> Result<bool, ViewError> {
        let fresh = fresh.after(lock(&self.writes).last_storage(vmid));
        Ok(self.isos(node, storage, fresh).await?.contains(volid))
    }

    /// The config of VM `vmid` on `node`: cached (kept up to date with this process's writes)
    /// or read (`None`: no such VM on that node). A config that cannot be complete yet (a clone
    /// still running, a NIC without its MAC) is not kept.
    pub async fn config(&self, node: &str, vmid: u32) -> Result<Option<Arc<VmConfig>>, ViewError> {
        if let Some(c) = lock(&self.configs)
            .get(&vmid)
            .filter(|c| c.at.elapsed() < CONFIG_TTL)
        {
            return Ok(Some(Arc::clone(&c.config)));
        }
        let config = match self.client.vm_config(node, vmid).await {
            Ok(c) => Arc::new(c),
            Err(e) if e.is_not_found() => return Ok(None),
            Err(e) => {
                return Err(ViewError::proxmox(format!(
                    "reading config of VM {vmid} on {node}"
                ))(e));
            }
        };
        if config.lock.is_none() && config.nets.values().all(|n| n.mac.is_some()) {
            lock(&self.configs).insert(
                vmid,
                CachedConfig {
                    config: Arc::clone(&config),
                    at: Instant::now(),
                },
            );
        }
        Ok(Some(config))
    }

    /// The config of VM `vmid` on `node`, read from Proxmox now (not from the cache), when it is
    /// still the VM named `name` (not a template): for decisions that must not rest on a list a
    /// moment old (a stop or destroy). `None` when it is gone or someone else's: the shared list
    /// was older than that change, so the next use of it reads a newer one.
    pub async fn read_config_of(
        &self,
        node: &str,
        vmid: u32,
        name: &str,
    ) -> Result<Option<VmConfig>, ViewError> {
        let config = match self.client.vm_config(node, vmid).await {
            Ok(c) => Some(c).filter(|c| !c.template && c.name.as_deref() == Some(name)),
            Err(e) if e.is_not_found() => None,
            Err(e) => {
                return Err(ViewError::proxmox(format!(
                    "reading config of VM {vmid} on {node}"
                ))(e));
            }
        };
        if config.is_none() {
            self.record(vmid, writes::WriteKind::Vm);
        }
        Ok(config)
    }

    /// Records a write of `kind` to VM `vmid`.
    fn record(&self, vmid: u32, kind: writes::WriteKind) {
        lock(&self.writes).record(vmid, kind);
    }

    /// Records that this process started task `upid` on VM `vmid` now (and the write it is).
    fn started(&self, upid: &str, vmid: u32) {
        self.task_started(upid);
        let kind = crate::proxmox::Upid::parse(upid).map_or(writes::WriteKind::Vm, |u| {
            writes::WriteKind::of_task(&u.task_type)
        });
        self.record(vmid, kind);
    }

    /// Records that this process started task `upid` now, without recording a write.
    fn task_started(&self, upid: &str) {
        lock(&self.tasks).insert(upid.to_owned(), Instant::now());
    }

    /// The answer to a request that changes what the list shows of VM `vmid` and may have
    /// reached Proxmox whatever the answer (stop, destroy, shutdown, snapshots): one write,
    /// recorded before the answer is looked at, and its task. One write, not two: a stop or
    /// shutdown its task confirms makes the lists read before it good again (see
    /// [`writes::Writes::confirmed`]), which a second record of the same request would undo.
    fn sent_vm_task(
        &self,
        vmid: u32,
        result: Result<crate::proxmox::Upid, crate::proxmox::Error>,
    ) -> Result<crate::proxmox::Upid, crate::proxmox::Error> {
        self.record(vmid, writes::WriteKind::Vm);
        let upid = result?;
        self.task_started(upid.as_str());
        Ok(upid)
    }

    /// How long task `upid` has run: from when this process started it, else from the start
    /// time in the UPID (`starttime`, Unix seconds).
    pub fn task_age(&self, upid: &str, starttime: u64) -> Duration {
        if let Some(at) = lock(&self.tasks).get(upid) {
            return at.elapsed();
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        Duration::from_secs(now.saturating_sub(starttime))
    }

    /// Forgets task `upid` (it finished); returns how long it ran when this process started it.
    fn finished(&self, upid: &str) -> Option<Duration> {
        lock(&self.tasks).remove(upid).map(|at| at.elapsed())
    }

    /// Forgets what is known about VM `vmid`'s config.
    fn forget_config(&self, vmid: u32) {
        lock(&self.configs).remove(&vmid);
    }

    /// VM `vmid`'s config as read lacks what its owner needs (e.g. a NIC's MAC that Proxmox
    /// assigns later): the next use reads it again.
    pub fn config_outdated(&self, vmid: u32) {
        self.forget_config(vmid);
    }

    /// Where VM `vmid`'s seed ISO was last seen or put, if this process knows: `(node, storage)`.
    pub fn iso_at(&self, vmid: u32) -> Option<(String, String)> {
        lock(&self.iso_at).get(&vmid).cloned()
    }

    /// Records where VM `vmid`'s seed ISO is: seen there in a listing the caller read.
    pub fn iso_seen_at(&self, vmid: u32, node: &str, storage: &str) {
        lock(&self.iso_at).insert(vmid, (node.to_owned(), storage.to_owned()));
    }

    /// The ISO deletion task of VM `vmid` this process started and has not seen end, if any.
    pub fn iso_deletion_of(&self, vmid: u32) -> Option<String> {
        lock(&self.iso_deletions).get(&vmid).cloned()
    }

    /// The ISO deletion of VM `vmid` is over (its file is gone): learns how long it took when
    /// this process started it, and forgets it.
    pub fn iso_deletion_done(&self, vmid: u32) {
        let Some(upid) = lock(&self.iso_deletions).remove(&vmid) else {
            return;
        };
        if let Some(took) = self.finished(&upid) {
            self.task_done("imgdel", took);
        }
    }

    /// Records that VM `vmid`'s seed ISO is gone for good: this process deleted it and detached
    /// it, or a config read after the data was delivered shows it detached and the VM untagged
    /// (the tag is only dropped once the ISO is deleted). Nothing more is configured on the VM:
    /// its cached config is dropped, and its deletion does not look for the ISO (in memory
    /// only: after a restart the storages are listed again).
    pub fn iso_removed(&self, vmid: u32) {
        // Its name is kept: a list read before pvestatd named the VM must not cost a config read.
        if let Some(name) = lock(&self.configs).get(&vmid).and_then(|c| c.config.name.clone()) {
            lock(&self.names).insert(vmid, name);
        }
        self.forget_config(vmid);
        lock(&self.isos_removed).insert(vmid);
    }

    /// VM `vmid`'s name as this process last read it in its config (cached, or kept when the
    /// config was dropped).
    pub fn known_name(&self, vmid: u32) -> Option<String> {
        lock(&self.configs)
            .get(&vmid)
            .and_then(|c| c.config.name.clone())
            .or_else(|| lock(&self.names).get(&vmid).cloned())
    }

    /// Whether VM `vmid`'s seed ISO is known to be gone for good ([`Self::iso_removed`]).
    pub fn iso_known_removed(&self, vmid: u32) -> bool {
        lock(&self.isos_removed).contains(&vmid)
    }

    /// Whether VM `vmid` has no seed ISO this process does not know of: it cloned the VM and put
    /// no ISO for it since. (An ISO an earlier VM of that VMID left behind may still exist: an
    /// upload overwrites it.)
    pub fn no_iso_put_yet(&self, vmid: u32) -> bool {
        lock(&self.cloned).contains(&vmid) && self.iso_at(vmid).is_none()
    }

    /// Forgets everything about VM `vmid` (its owner is gone).
    pub fn forget_vm(&self, vmid: u32) {
        lock(&self.isos_removed).remove(&vmid);
        lock(&self.names).remove(&vmid);
        lock(&self.cloned).remove(&vmid);
        lock(&self.iso_at).remove(&vmid);
        lock(&self.iso_deletions).remove(&vmid);
        self.forget_config(vmid);
        lock(&self.writes).forget(vmid);
        self.waits.remove(vmid);
        self.guests.set_pid(vmid, None);
    }

    /// Wakes `owner`'s reconcile now.
    pub fn wake(&self, owner: Owner) {
        self.wake.send(owner);
    }

    /// When to look at a task of timing key `kind` that has run for `age` again.
    pub fn next_look(&self, kind: &str, age: Duration) -> Duration {
        self.timing
            .next_look(kind, age, self.settings.look_min, self.settings.look_max)
    }

    /// A task of timing key `kind` that had run for `age` was seen done: learn from it.
    fn task_done(&self, kind: &str, age: Duration) {
        let first = self.timing.was_first_look(kind, age, self.settings.look_max);
        self.timing.observed(kind, age, first);
    }

    /// `owner` waits until VM `vmid` shows `expect`, which a task of timing key `kind` that has
    /// run for `age` should bring about: once [`ProxmoxView::arm`]ed, the refresher looks when it
    /// should be done.
    pub fn expect(&self, vmid: u32, owner: Owner, expect: watch::Expect, kind: &str, age: Duration) {
        let min = self.settings.observe_interval.max(self.settings.look_min);
        let max = self.settings.look_max;
        let first = self.timing.next_look(kind, age, min, max);
        let every = self.timing.next_look(kind, Duration::MAX, min, max);
        lock(&self.pending).insert(
            owner,
            PendingWait {
                vmid,
                expect,
                first,
                every,
            },
        );
    }

    /// Arms the wait `owner`'s pass asked for, after the pass persisted its results.
    pub fn arm(self: &Arc<Self>, owner: &Owner) {
        let Some(w) = lock(&self.pending).remove(owner) else {
            return;
        };
        self.waits.add(w.vmid, owner.clone(), w.expect, w.first, w.every);
        self.ensure_refresher();
    }

    fn ensure_refresher(self: &Arc<Self>) {
        let mut r = lock(&self.refresher);
        if r.as_ref().is_some_and(|h| !h.is_finished()) {
            return;
        }
        let weak = Arc::downgrade(self);
        let notify = Arc::clone(&self.waits.notify);
        *r = Some(tokio::spawn(refresh(weak, notify)).abort_handle());
    }
}

/// Reads `/cluster/resources` whenever a waiting owner is due and wakes the owners whose VM
/// reached the expected state. Ends with the view.
async fn refresh(view: Weak<ProxmoxView>, notify: Arc<tokio::sync::Notify>) {
    loop {
        let due = match view.upgrade() {
            Some(v) => v.waits.next_due(),
            None => return,
        };
        match due {
            None => notify.notified().await,
            Some(at) => {
                tokio::select! {
                    () = tokio::time::sleep_until(at.into()) => {}
                    () = notify.notified() => continue,
                }
            }
        }
        let Some(v) = view.upgrade() else { return };
        if v.waits.next_due().is_none_or(|d| d > Instant::now()) {
            continue;
        }
        let interval = v.settings.observe_interval;
        let fresh = Freshness::within(interval / 2);
        let (need_vms, listings) = v.waits.due_reads(Instant::now());
        let snap = if need_vms {
            match v.snapshot(fresh).await {
                Ok((_, snap)) => Some(snap),
                Err(e) => {
                    tracing::debug!(error = %e, "refreshing cluster resources failed");
                    drop(v);
                    tokio::time::sleep(interval.max(Duration::from_millis(500))).await;
                    continue;
                }
            }
        } else {
            v.resources.peek().map(|(_, s)| s)
        };
        let mut isos = HashMap::new();
        for (node, storage) in listings {
            match v.isos(&node, &storage, fresh).await {
                Ok(list) => {
                    isos.insert((node, storage), list);
                }
                Err(e) => tracing::debug!(error = %e, "refreshing an ISO listing failed"),
            }
        }
        let vm = |id: u32| snap.as_ref().and_then(|s| s.vm(id).cloned());
        let iso = |n: &str, s: &str| isos.get(&(n.to_owned(), s.to_owned())).cloned();
        let seen = watch::Observed { vm: &vm, isos: &iso };
        for m in v.waits.check(&seen, Instant::now()) {
            v.wake(m);
        }
    }
}
