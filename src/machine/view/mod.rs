//! What the machine controller knows about one Proxmox cluster, shared by all its machines.
//!
//! Instead of every machine reading its own VM (`status/current` + `config`) on every pass, a
//! pass observes Proxmox from what is already known:
//!
//! * [`Snapshot`]: one `GET /cluster/resources` (VMs with node, status, lock, name, tags, uptime;
//!   nodes; storages) serves every machine of the cluster while it is fresh enough for the pass
//!   ([`Freshness`]: read after this controller's last write to the VM, and not older than the
//!   observe interval — or the safety resync for provisioned machines);
//! * ISO listings: one `GET …/storage/{storage}/content?content=iso` per node and storage shows
//!   every machine's bootstrap ISO;
//! * VM configs: read once after the clone and then kept up to date with this controller's own
//!   writes (only before the first boot; forgotten when the machine is provisioned);
//! * [`watch`]: machines waiting for a clone, stop or destroy are woken when the
//!   snapshot shows the result, [`guests`]: guest checks are scouted, [`timing`]: task polls
//!   follow learned task durations.

pub mod guests;
pub mod shared;
pub mod timing;
pub mod watch;
pub mod writes;

use std::collections::{BTreeSet, HashMap, HashSet};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use capmox_api::v1alpha2::ProxmoxMachine;
use futures::channel::mpsc::UnboundedSender;
use kube::runtime::reflector::ObjectRef;

pub use shared::Freshness;
use shared::Shared;

use super::error::MachineError;
use crate::proxmox::Client;
use crate::proxmox::types::{ClusterResource, ConfigUpdate, VmConfig};

/// Wakes a machine's reconcile.
pub type Wake = UnboundedSender<ObjectRef<ProxmoxMachine>>;

/// One `GET /cluster/resources` answer, indexed by VMID.
#[derive(Debug, Default)]
pub struct Snapshot {
    /// Every entry (guests, nodes, storages, pools).
    pub resources: Vec<ClusterResource>,
    vms: HashMap<u32, usize>,
}

impl Snapshot {
    /// Reads `GET /cluster/resources` (every type).
    pub async fn fetch(client: &Client) -> Result<Self, crate::proxmox::Error> {
        client.cluster_resources(None).await.map(Self::new)
    }

    /// Indexes a resource list.
    pub fn new(resources: Vec<ClusterResource>) -> Self {
        let vms = resources
            .iter()
            .enumerate()
            .filter(|(_, r)| r.resource_type == "qemu" || r.resource_type == "lxc")
            .filter_map(|(i, r)| Some((r.vmid?, i)))
            .collect();
        Self { resources, vms }
    }

    /// The guest with `vmid`.
    pub fn vm(&self, vmid: u32) -> Option<&ClusterResource> {
        self.vms.get(&vmid).and_then(|i| self.resources.get(*i))
    }

    /// The storages of `node` that hold ISO images and are available, in name order.
    pub fn iso_storages(&self, node: &str) -> Vec<String> {
        let mut out: Vec<String> = self
            .resources
            .iter()
            .filter(|r| r.resource_type == "storage" && r.node.as_deref() == Some(node))
            .filter(|r| r.status.as_deref().is_none_or(|s| s == "available"))
            .filter(|r| {
                r.content
                    .as_deref()
                    .is_some_and(|c| c.split(',').any(|t| t.trim() == "iso"))
            })
            .filter_map(|r| r.storage.clone())
            .collect();
        out.sort();
        out.dedup();
        out
    }
}

/// Timing of the view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ViewSettings {
    /// Shortest time between two reads of one shared list while machines wait (and how old a
    /// list may be for a machine in flight).
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
    resources: Arc<Shared<Snapshot>>,
    isos: Mutex<IsoListings>,
    configs: Mutex<HashMap<u32, CachedConfig>>,
    writes: Mutex<writes::Writes>,
    tasks: Mutex<HashMap<String, Instant>>,
    iso_at: Mutex<HashMap<u32, (String, String)>>,
    iso_deletions: Mutex<HashMap<u32, String>>,
    isos_removed: Mutex<HashSet<u32>>,
    cloned: Mutex<HashSet<u32>>,
    /// Machines waiting for their VM's state.
    pub waits: watch::Waits,
    /// Guest waits.
    pub guests: guests::Guests,
    /// Learned task durations.
    pub timing: timing::Timing,
    refresher: Mutex<Option<tokio::task::AbortHandle>>,
    pending: Mutex<HashMap<ObjectRef<ProxmoxMachine>, PendingWait>>,
    /// The Proxmox cluster's name, read once and shared with the cluster controller's probe.
    cluster_name: Arc<crate::credentials::ClusterName>,
}

/// A wait a pass asked for, armed once the pass has persisted what it did (so that no Proxmox
/// request of the refresher can come between a task's start and its `status.taskRef`).
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
        resources: Arc<Shared<Snapshot>>,
        cluster_name: Arc<crate::credentials::ClusterName>,
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
            cloned: Mutex::default(),
            waits: watch::Waits::default(),
            guests: guests::Guests::default(),
            timing: timing::Timing::default(),
            refresher: Mutex::new(None),
            pending: Mutex::default(),
            cluster_name,
        })
    }

    /// The Proxmox cluster's name from `GET /cluster/status` ([`Client::cluster_name`]; read
    /// once per Proxmox cluster, usually already by the cluster controller's probe). The
    /// bootstrap meta-data's `region`.
    pub async fn cluster_name(&self) -> Result<Option<String>, MachineError> {
        self.cluster_name
            .get_or_try_init(|| async {
                self.client
                    .cluster_name()
                    .await
                    .map_err(MachineError::proxmox("reading the Proxmox cluster status"))
            })
            .await
            .cloned()
    }

    /// The Proxmox client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The view's timing.
    pub fn settings(&self) -> ViewSettings {
        self.settings
    }

    /// The `/cluster/resources` list, shared while it satisfies `fresh`.
    pub async fn snapshot(&self, fresh: Freshness) -> Result<(Instant, Arc<Snapshot>), MachineError> {
        self.resources
            .get(fresh, || async {
                Snapshot::fetch(&self.client)
                    .await
                    .map_err(MachineError::proxmox("listing cluster resources"))
            })
            .await
    }

    /// The freshness a pass needs for VM `vmid`: within `max_age`, read after the last write.
    pub fn freshness(&self, vmid: Option<u32>, max_age: Duration) -> Freshness {
        Freshness::within(max_age).after(vmid.and_then(|v| self.last_write(v)))
    }

    /// The ISO volume ids on `storage` of `node`, shared while they satisfy `fresh`.
    pub async fn isos(
        &self,
        node: &str,
        storage: &str,
        fresh: Freshness,
    ) -> Result<Arc<BTreeSet<String>>, MachineError> {
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
                    .map_err(MachineError::proxmox(format!(
                        "listing ISO images on {storage} of node {node}"
                    )))
            })
            .await?;
        Ok(list)
    }

    /// Records a write to VM `vmid` that changed what the shared list shows (its existence, node
    /// or power state — and with it possibly its storage): later passes need reads made after it.
    pub fn wrote(&self, vmid: u32) {
        self.wrote_kind(vmid, writes::WriteKind::Vm);
    }

    /// Records a write of `kind` to VM `vmid`.
    pub fn wrote_kind(&self, vmid: u32, kind: writes::WriteKind) {
        lock(&self.writes).record(vmid, kind);
    }

    /// When this controller last changed what the shared list shows about VM `vmid`.
    pub fn last_write(&self, vmid: u32) -> Option<Instant> {
        lock(&self.writes).last_vm(vmid)
    }

    /// When this controller last wrote to VM `vmid`'s storage (or changed the VM).
    pub fn last_storage_write(&self, vmid: u32) -> Option<Instant> {
        lock(&self.writes).last_storage(vmid)
    }

    /// The tags this controller set on VM `vmid` after a list read at `read_at`, if it did.
    pub fn tags_written_after(&self, vmid: u32, read_at: Instant) -> Option<String> {
        lock(&self.writes).tags_after(vmid, read_at)
    }

    /// A start of VM `vmid` ended successfully. When it was this controller's last write to the
    /// VM, the VM runs since now, which lists read before the start show from here on instead of
    /// a new list read; else (`false`) a list read after now is needed.
    pub fn start_confirmed(&self, vmid: u32) -> bool {
        lock(&self.writes).started(vmid)
    }

    /// Since when VM `vmid` runs by a start this controller confirmed, for a list read at
    /// `read_at` that shows it stopped and may lag ([`writes::Writes::running_since`]).
    pub fn running_since(&self, vmid: u32, read_at: Instant) -> Option<Instant> {
        lock(&self.writes).running_since(vmid, read_at)
    }

    /// Records that this controller wrote `update` to VM `vmid`'s config (successfully), outside
    /// [`Self::config_updated`]: nothing the list shows goes stale, its tags are remembered.
    pub fn config_written(&self, vmid: u32, update: &ConfigUpdate) {
        lock(&self.writes).config(vmid, update);
    }

    /// Records that this controller started task `upid` now.
    pub fn started(&self, upid: &str, vmid: u32) {
        lock(&self.tasks).insert(upid.to_owned(), Instant::now());
        let kind = crate::proxmox::Upid::parse(upid).map_or(writes::WriteKind::Vm, |u| {
            writes::WriteKind::of_task(&u.task_type)
        });
        self.wrote_kind(vmid, kind);
    }

    /// How long task `upid` has run: from when this controller started it, else from the start
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

    /// Forgets task `upid` (it finished); returns how long it ran when this controller started it.
    pub fn finished(&self, upid: &str) -> Option<Duration> {
        lock(&self.tasks).remove(upid).map(|at| at.elapsed())
    }

    /// The config of VM `vmid` on `node`: cached (kept up to date with this controller's writes)
    /// or read (`None`: no such VM on that node).
    pub async fn config(&self, node: &str, vmid: u32) -> Result<Option<Arc<VmConfig>>, MachineError> {
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
                return Err(MachineError::proxmox(format!(
                    "reading config of VM {vmid} on {node}"
                ))(e));
            }
        };
        // A clone still running has a temporary config: not worth keeping.
        if config.lock.is_none() {
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

    /// This controller changed VM `vmid`'s config with `update` (successfully): the cached config
    /// follows when the result is predictable, else it is read again next time.
    pub fn config_updated(&self, vmid: u32, update: &ConfigUpdate) {
        self.config_written(vmid, update);
        let mut configs = lock(&self.configs);
        let applied = configs.get(&vmid).and_then(|c| applied(&c.config, update));
        match applied {
            Some(config) => {
                configs.insert(
                    vmid,
                    CachedConfig {
                        config: Arc::new(config),
                        at: Instant::now(),
                    },
                );
            }
            None => {
                configs.remove(&vmid);
            }
        }
    }

    /// Forgets what is known about VM `vmid`'s config (resized, deleted, provisioned).
    pub fn forget_config(&self, vmid: u32) {
        lock(&self.configs).remove(&vmid);
    }

    /// Records where VM `vmid`'s bootstrap ISO is (or was last put): `(node, storage)`.
    pub fn iso_is_at(&self, vmid: u32, node: &str, storage: &str) {
        lock(&self.iso_at).insert(vmid, (node.to_owned(), storage.to_owned()));
    }

    /// Where VM `vmid`'s bootstrap ISO was last seen or put, if this controller knows.
    pub fn iso_at(&self, vmid: u32) -> Option<(String, String)> {
        lock(&self.iso_at).get(&vmid).cloned()
    }

    /// Records (`Some`) or forgets (`None`) the ISO deletion task of VM `vmid` this controller
    /// started (kept in memory only: repeating a deletion after a restart is harmless).
    pub fn iso_deletion(&self, vmid: u32, upid: Option<&str>) {
        let mut m = lock(&self.iso_deletions);
        match upid {
            Some(u) => m.insert(vmid, u.to_owned()),
            None => m.remove(&vmid),
        };
    }

    /// The ISO deletion task of VM `vmid` this controller started, if any.
    pub fn iso_deletion_of(&self, vmid: u32) -> Option<String> {
        lock(&self.iso_deletions).get(&vmid).cloned()
    }

    /// Records that VM `vmid`'s bootstrap ISO is gone for good: this controller deleted it, or
    /// a config read after the data was delivered shows it detached and the VM untagged (the tag
    /// is only dropped once the ISO is deleted). Its deletion then does not look for the ISO (in
    /// memory only: after a restart the storages are listed again).
    pub fn iso_removed(&self, vmid: u32) {
        lock(&self.isos_removed).insert(vmid);
    }

    /// Whether VM `vmid`'s bootstrap ISO is known to be gone for good ([`Self::iso_removed`]).
    pub fn iso_known_removed(&self, vmid: u32) -> bool {
        lock(&self.isos_removed).contains(&vmid)
    }

    /// Records that this controller cloned VM `vmid`: every bootstrap ISO of it is one this
    /// controller put ([`Self::iso_at`]).
    pub fn cloned_here(&self, vmid: u32) {
        lock(&self.cloned).insert(vmid);
    }

    /// Whether VM `vmid` has no bootstrap ISO this controller does not know of: it cloned the VM
    /// and put no ISO for it since. (An ISO an earlier VM of that VMID left behind may still
    /// exist: an upload overwrites it.)
    pub fn no_iso_put_yet(&self, vmid: u32) -> bool {
        lock(&self.cloned).contains(&vmid) && self.iso_at(vmid).is_none()
    }

    /// Forgets everything about VM `vmid` (the machine is gone).
    pub fn forget_vm(&self, vmid: u32) {
        lock(&self.isos_removed).remove(&vmid);
        lock(&self.cloned).remove(&vmid);
        lock(&self.iso_at).remove(&vmid);
        lock(&self.iso_deletions).remove(&vmid);
        self.forget_config(vmid);
        lock(&self.writes).forget(vmid);
        self.waits.remove(vmid);
        self.guests.set_pid(vmid, None);
    }

    /// Wakes `machine`'s reconcile now.
    pub fn wake(&self, machine: ObjectRef<ProxmoxMachine>) {
        let _ = self.wake.unbounded_send(machine);
    }

    /// When to look at a task of timing key `kind` that has run for `age` again.
    pub fn next_look(&self, kind: &str, age: Duration) -> Duration {
        self.timing
            .next_look(kind, age, self.settings.look_min, self.settings.look_max)
    }

    /// A task of timing key `kind` that had run for `age` was seen done: learn from it.
    pub fn task_done(&self, kind: &str, age: Duration) {
        let first = self.timing.was_first_look(kind, age, self.settings.look_max);
        self.timing.observed(kind, age, first);
    }

    /// `machine` waits until VM `vmid` shows `expect`, which a task of timing key `kind` that has
    /// run for `age` should bring about: once [`ProxmoxView::arm`]ed, the refresher looks when it
    /// should be done.
    pub fn expect(
        &self,
        vmid: u32,
        machine: ObjectRef<ProxmoxMachine>,
        expect: watch::Expect,
        kind: &str,
        age: Duration,
    ) {
        let min = self.settings.observe_interval.max(self.settings.look_min);
        let max = self.settings.look_max;
        let first = self.timing.next_look(kind, age, min, max);
        let every = self.timing.next_look(kind, Duration::MAX, min, max);
        lock(&self.pending).insert(
            machine,
            PendingWait {
                vmid,
                expect,
                first,
                every,
            },
        );
    }

    /// Arms the wait `machine`'s pass asked for, after the pass persisted its results.
    pub fn arm(self: &Arc<Self>, machine: &ObjectRef<ProxmoxMachine>) {
        let Some(w) = lock(&self.pending).remove(machine) else {
            return;
        };
        self.waits
            .add(w.vmid, machine.clone(), w.expect, w.first, w.every);
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

/// Reads `/cluster/resources` whenever a waiting machine is due and wakes the machines whose VM
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

/// `config` after `update`, when Proxmox's result is predictable (no NIC without a MAC, no disk
/// allocation); `None` otherwise.
pub fn applied(config: &VmConfig, update: &ConfigUpdate) -> Option<VmConfig> {
    let mut raw = config.raw.clone();
    for (k, v) in update.params() {
        let text = crate::proxmox::lenient::value_to_string(v)?;
        match k.as_str() {
            "digest" => {}
            "delete" => {
                for key in text.split(',').map(str::trim) {
                    raw.remove(key);
                }
            }
            k if k.starts_with("net") => {
                // Proxmox generates a MAC for a NIC sent without one.
                let dev = crate::proxmox::types::NetDevice::parse(&text)?;
                dev.mac.as_ref()?;
                raw.insert(k.to_owned(), v.clone());
            }
            k if crate::proxmox::types::is_disk_key(k) && !text.contains("media=cdrom") => return None,
            _ => {
                raw.insert(k.clone(), v.clone());
            }
        }
    }
    raw.remove("digest");
    Some(VmConfig::from(raw))
}

/// Views by Proxmox endpoint and user, created on first use.
#[derive(Debug)]
pub struct Views {
    views: Mutex<HashMap<String, Arc<ProxmoxView>>>,
    settings: ViewSettings,
    wake: Wake,
}

impl Views {
    /// An empty registry; views wake machines through `wake`.
    pub fn new(settings: ViewSettings, wake: Wake) -> Self {
        Self {
            views: Mutex::default(),
            settings,
            wake,
        }
    }

    /// The view of the cluster `client` talks to (sharing the resource list of `clients`).
    pub fn of(&self, clients: &crate::credentials::ProxmoxClients, client: &Client) -> Arc<ProxmoxView> {
        let key = crate::credentials::client_key(client);
        let mut views = lock(&self.views);
        // A client rebuilt from a rotated credentials Secret has the same key: the view must
        // send with the new one (the shared resource list stays, it is the same cluster).
        if let Some(view) = views.get(&key)
            && view.client().is_same_client(client)
        {
            return Arc::clone(view);
        }
        let view = ProxmoxView::new(
            client.clone(),
            clients.resources(client),
            clients.cluster_name(client),
            self.settings,
            self.wake.clone(),
        );
        views.insert(key, Arc::clone(&view));
        view
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn config(v: serde_json::Value) -> VmConfig {
        let raw: std::collections::BTreeMap<String, serde_json::Value> = serde_json::from_value(v).unwrap();
        VmConfig::from(raw)
    }

    #[test]
    fn own_updates_apply_when_predictable() {
        let c = config(json!({
            "name": "m", "cores": 1, "sockets": 1, "memory": "2048",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0", "tags": "a", "digest": "abc",
            "scsi0": "local-lvm:vm-200-disk-0,size=20G"
        }));
        let u = ConfigUpdate::new()
            .cores(2)
            .sockets(2)
            .tags(&["a", "b"])
            .ide0("local:iso/user-data-200.iso,media=cdrom");
        let after = applied(&c, &u).unwrap();
        assert_eq!((after.cores, after.sockets), (Some(2), Some(2)));
        assert_eq!(after.tags, vec!["a", "b"]);
        assert!(after.ide0.as_deref().unwrap().contains("user-data-200"));
        assert_eq!(after.digest, None);
        assert_eq!(
            after.nets.get(&0).and_then(|n| n.mac.clone()).as_deref(),
            Some("BC:24:11:00:00:01")
        );
        let nic = crate::proxmox::types::NetDevice::new("virtio", "vmbr1");
        assert!(
            applied(&c, &ConfigUpdate::new().net(1, &nic)).is_none(),
            "a new MAC is unknown"
        );
        assert!(applied(&c, &ConfigUpdate::new().set("scsi1", "local-lvm:10")).is_none());
        let deleted = applied(&c, &ConfigUpdate::new().delete(&["tags"])).unwrap();
        assert!(deleted.tags.is_empty());
    }

    #[test]
    fn snapshot_indexes_guests_and_iso_storages() {
        let r: Vec<ClusterResource> = serde_json::from_value(json!([
            {"id": "qemu/200", "type": "qemu", "vmid": 200, "node": "pve1", "status": "running"},
            {"id": "storage/pve1/shared", "type": "storage", "storage": "shared", "node": "pve1", "content": "images,iso", "status": "available"},
            {"id": "storage/pve1/local", "type": "storage", "storage": "local", "node": "pve1", "content": "iso,vztmpl", "status": "available"},
            {"id": "storage/pve1/lvm", "type": "storage", "storage": "lvm", "node": "pve1", "content": "images", "status": "available"},
            {"id": "storage/pve2/local", "type": "storage", "storage": "local", "node": "pve2", "content": "iso", "status": "available"}
        ])).unwrap();
        let s = Snapshot::new(r);
        assert_eq!(s.vm(200).and_then(|v| v.status.as_deref()), Some("running"));
        assert!(s.vm(201).is_none());
        assert_eq!(s.iso_storages("pve1"), vec!["local", "shared"]);
    }
}
