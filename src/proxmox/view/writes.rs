//! This controller's own writes to VMs, by what they change — so a pass re-reads only what a
//! write may have made stale:
//!
//! * a write that changes what the shared `/cluster/resources` list shows about the VM's state
//!   (it exists, where, powered on or off: clone, start, stop, destroy, migrate) needs a list read
//!   after it;
//! * a write to the VM's storage (ISO upload or deletion) needs a storage listing read after it;
//! * a config write changes nothing a pass reads from the list except the tags, which are known
//!   from the write itself: they are laid over older lists instead of reading the list again;
//! * a start whose task ended successfully leaves the VM running: that too is laid over the lists
//!   read before it ([`Writes::started`]), so confirming a start costs the task read alone; so
//!   does a pause, reboot or resume whose task ended well ([`Writes::confirmed`]).

use std::collections::HashMap;
use std::time::{Duration, Instant};

use super::look::Power;
use crate::proxmox::types::ConfigUpdate;

/// How long after a start was confirmed a list may still show the VM stopped: PVE's
/// `/cluster/resources` takes the power state from the RRD cache that pvestatd refreshes every
/// 10 s.
pub const STATUS_LAG: Duration = Duration::from_secs(30);

/// What one write changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteKind {
    /// The VM's existence, node or power state (shown in the shared list).
    Vm,
    /// A volume on the VM's storage (shown in the storage listing).
    Storage,
    /// Nothing either listing shows (config keys other than tags).
    Unlisted,
}

impl WriteKind {
    /// The kind of write a task of type `task_type` makes.
    pub fn of_task(task_type: &str) -> Self {
        match task_type {
            "imgcopy" | "imgdel" | "download" => Self::Storage,
            "qmconfig" | "qmresize" | "qmmove" => Self::Unlisted,
            // Clone, start, stop, shutdown, destroy, migrate — and anything unknown, to be safe.
            _ => Self::Vm,
        }
    }
}

#[derive(Debug, Default, Clone)]
struct VmWrites {
    vm: Option<Instant>,
    storage: Option<Instant>,
    /// `vm` and `storage` before the last [`WriteKind::Vm`] write.
    before_vm: (Option<Instant>, Option<Instant>),
    /// The tags value the last config write set (`""`: removed), and when.
    tags: Option<(Instant, String)>,
    /// A power change confirmed by its task (a start, resume, reboot or pause): the write it
    /// covers, since when, and the state it left.
    running: Option<(Instant, Instant, Power)>,
}

/// Writes by VMID.
#[derive(Debug, Default)]
pub struct Writes {
    by_vmid: HashMap<u32, VmWrites>,
}

impl Writes {
    /// Records a write of `kind` to VM `vmid` now.
    pub fn record(&mut self, vmid: u32, kind: WriteKind) {
        let now = Instant::now();
        let w = self.by_vmid.entry(vmid).or_default();
        match kind {
            WriteKind::Vm => {
                // A VM that changed may have changed its storage too (a destroy purges volumes).
                w.before_vm = (w.vm, w.storage);
                w.vm = Some(now);
                w.storage = Some(now);
            }
            WriteKind::Storage => w.storage = Some(now),
            WriteKind::Unlisted => {}
        }
    }

    /// Records a successful config write: remembers the tags it set or removed.
    pub fn config(&mut self, vmid: u32, update: &ConfigUpdate) {
        let params = update.params();
        let deleted = params
            .get("delete")
            .and_then(|v| v.as_str())
            .is_some_and(|d| d.split(',').any(|k| k.trim() == "tags"));
        let tags = match params.get("tags") {
            Some(v) => Some(v.as_str().map_or_else(|| v.to_string(), str::to_owned)),
            None if deleted => Some(String::new()),
            None => None,
        };
        if let Some(tags) = tags {
            self.by_vmid.entry(vmid).or_default().tags = Some((Instant::now(), tags));
        }
    }

    /// The last write to VM `vmid` was a start whose task ended successfully: the VM runs since
    /// now. Lists read before that write are good again, and a list that shows the VM stopped is
    /// not believed for a while ([`Self::running_since`]). `false` (nothing changes) when the
    /// start is not this controller's last write: another write came after it, or another
    /// process started the VM.
    pub fn started(&mut self, vmid: u32) -> bool {
        self.confirmed(vmid, Power::Running)
    }

    /// Like [`Self::started`] for any power change whose task ended well: the VM is in `power`
    /// since now (a pause leaves it paused; a reboot or resume running).
    pub fn confirmed(&mut self, vmid: u32, power: Power) -> bool {
        let Some(w) = self.by_vmid.get_mut(&vmid) else {
            return false;
        };
        let Some(start) = w.vm.filter(|at| w.storage == Some(*at)) else {
            return false;
        };
        w.running = Some((start, Instant::now(), power));
        (w.vm, w.storage) = w.before_vm;
        true
    }

    /// Since when VM `vmid` runs, for a list read at `read_at` that shows it stopped (or paused,
    /// after a resume): a start this controller confirmed by its task, when the list may not
    /// show it yet (read within [`STATUS_LAG`] of the confirmation) and no write to the VM came
    /// after the start.
    pub fn running_since(&self, vmid: u32, read_at: Instant) -> Option<Instant> {
        self.confirmed_since(vmid, read_at)
            .filter(|(p, _)| *p == Power::Running)
            .map(|(_, since)| since)
    }

    /// The power state a confirmed change left VM `vmid` in, and since when, for a list read at
    /// `read_at` (see [`Self::running_since`]).
    pub fn confirmed_since(&self, vmid: u32, read_at: Instant) -> Option<(Power, Instant)> {
        let w = self.by_vmid.get(&vmid)?;
        let (start, since, power) = w.running?;
        (w.vm.is_none_or(|at| at < start) && read_at < since + STATUS_LAG).then_some((power, since))
    }

    /// When the last write that changed what the shared list shows about VM `vmid` happened.
    pub fn last_vm(&self, vmid: u32) -> Option<Instant> {
        self.by_vmid.get(&vmid).and_then(|w| w.vm)
    }

    /// When the last write to VM `vmid`'s storage (or to the VM itself) happened.
    pub fn last_storage(&self, vmid: u32) -> Option<Instant> {
        self.by_vmid.get(&vmid).and_then(|w| w.storage)
    }

    /// The tags this controller set on VM `vmid` after a list read at `read_at`, if it did.
    pub fn tags_after(&self, vmid: u32, read_at: Instant) -> Option<String> {
        self.by_vmid
            .get(&vmid)
            .and_then(|w| w.tags.as_ref())
            .filter(|(at, _)| *at > read_at)
            .map(|(_, t)| t.clone())
    }

    /// Forgets VM `vmid` (deleted).
    pub fn forget(&mut self, vmid: u32) {
        self.by_vmid.remove(&vmid);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_decide_what_goes_stale() {
        let mut w = Writes::default();
        let before = Instant::now();
        w.record(100, WriteKind::Unlisted);
        assert_eq!(w.last_vm(100), None);
        assert_eq!(w.last_storage(100), None);
        w.record(100, WriteKind::Storage);
        assert_eq!(w.last_vm(100), None);
        assert!(w.last_storage(100).is_some_and(|t| t >= before));
        w.record(101, WriteKind::Vm);
        assert!(w.last_vm(101).is_some() && w.last_storage(101).is_some());
        assert_eq!(WriteKind::of_task("qmclone"), WriteKind::Vm);
        assert_eq!(WriteKind::of_task("qmstart"), WriteKind::Vm);
        assert_eq!(WriteKind::of_task("imgcopy"), WriteKind::Storage);
        assert_eq!(WriteKind::of_task("qmconfig"), WriteKind::Unlisted);
        assert_eq!(WriteKind::of_task("somethingnew"), WriteKind::Vm);
        w.forget(101);
        assert_eq!(w.last_vm(101), None);
    }

    #[test]
    fn a_confirmed_start_is_laid_over_the_lists_read_before_it() {
        // Distinct instants for each write.
        let tick = || std::thread::sleep(std::time::Duration::from_millis(1));
        let mut w = Writes::default();
        w.record(100, WriteKind::Vm);
        let clone = w.last_vm(100);
        tick();
        let read = Instant::now();
        tick();
        w.record(100, WriteKind::Vm);
        let start = w.last_vm(100);
        assert!(start > clone);
        assert_eq!(w.running_since(100, read), None, "not confirmed yet");
        assert!(w.started(100));
        assert_eq!(w.last_vm(100), clone, "the list read after the clone will do");
        assert_eq!(w.last_storage(100), clone);
        assert!(w.running_since(100, read).is_some(), "shown running");
        assert!(
            w.running_since(100, Instant::now()).is_some(),
            "a list of the next seconds may lag"
        );
        assert_eq!(
            w.running_since(100, Instant::now() + STATUS_LAG),
            None,
            "later lists tell"
        );
        tick();
        w.record(100, WriteKind::Vm);
        assert_eq!(
            w.running_since(100, read),
            None,
            "a later write (a stop) voids it"
        );
        // A write after the start keeps what it demands.
        w.record(101, WriteKind::Vm);
        tick();
        w.record(101, WriteKind::Vm);
        tick();
        w.record(101, WriteKind::Storage);
        let storage = w.last_storage(101);
        assert!(!w.started(101));
        assert_eq!(w.last_storage(101), storage);
        assert_eq!(w.running_since(101, read), None);
        assert!(!w.started(102), "started by another process");
    }

    #[test]
    fn config_writes_lay_their_tags_over_older_lists() {
        let mut w = Writes::default();
        let read = Instant::now();
        w.config(100, &ConfigUpdate::new().set("cores", 2));
        assert_eq!(w.tags_after(100, read), None);
        w.config(100, &ConfigUpdate::new().set("tags", "a;b"));
        assert_eq!(w.tags_after(100, read).as_deref(), Some("a;b"));
        w.config(100, &ConfigUpdate::new().set("delete", "ide0,tags"));
        assert_eq!(w.tags_after(100, read).as_deref(), Some(""));
        assert_eq!(w.tags_after(100, Instant::now()), None);
        assert_eq!(w.last_vm(100), None);
    }
}
