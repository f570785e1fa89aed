//! One simulated QEMU VM: config, pending changes, power state, snapshots, guest-agent exec results.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::propstr::{self, NUMERIC_KEYS};
use crate::scenario::CloudInitResult;

/// Power state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PowerState {
    /// Not running.
    Stopped,
    /// Running.
    Running,
    /// Running but paused (QMP `paused`).
    Paused,
}

/// A snapshot.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Creation time (epoch seconds).
    pub snaptime: u64,
    /// Whether RAM was included.
    pub vmstate: bool,
    /// Parent snapshot.
    pub parent: Option<String>,
    /// Config at snapshot time.
    pub config: BTreeMap<String, String>,
    /// `prepare` while being taken, `delete` while being deleted.
    pub snapstate: Option<String>,
    /// The power state when it was taken (restored with its memory).
    pub power: PowerState,
}

/// Result of an `agent/exec` call.
#[derive(Debug, Clone)]
pub struct ExecResult {
    /// Exit code.
    pub exitcode: i64,
    /// stdout.
    pub out: String,
    /// stderr.
    pub err: String,
    /// `cloud-init status --wait`: the process runs until cloud-init is done, and its result is
    /// the status at that time.
    pub waits_for_cloud_init: bool,
}

/// A VM or template.
#[derive(Debug, Clone)]
pub struct Vm {
    /// VMID.
    pub vmid: u32,
    /// Node it lives on.
    pub node: String,
    /// Config keys (as written in the config file).
    pub config: BTreeMap<String, String>,
    /// Pending values (non-hot-pluggable changes while running).
    pub pending: BTreeMap<String, String>,
    /// Pending deletions.
    pub pending_delete: Vec<String>,
    /// Power state.
    pub power: PowerState,
    /// When it was (last) started.
    pub started_at: Option<Instant>,
    /// When it was created (for RRD staleness).
    pub created_at: Instant,
    /// Snapshots in creation order.
    pub snapshots: Vec<Snapshot>,
    /// Agent exec results by pid.
    pub exec: BTreeMap<i64, ExecResult>,
    /// Next agent exec pid.
    pub next_exec_pid: i64,
    /// Per-VM cloud-init outcome override.
    pub cloud_init: Option<CloudInitResult>,
    /// Config write generation (feeds the digest).
    pub generation: u64,
    /// Template this VM is a linked clone of (its disks use the template's base volumes).
    pub linked_base: Option<u32>,
    /// Resource pool the VM belongs to.
    pub pool: Option<String>,
    /// Disk keys holding an installed OS: the disks of a scenario VM or of a VM created through
    /// the API, and the disks a clone copied from such disks. Disks added later are blank.
    pub os_disks: BTreeSet<String>,
    /// Whether the last start reached a disk with an OS (see [`Vm::boots_os`]); without it the
    /// guest never comes up: no guest agent, no cloud-init.
    pub booted_os: bool,
}

impl Vm {
    /// A stopped VM with the given config.
    pub fn new(vmid: u32, node: &str, config: BTreeMap<String, String>) -> Self {
        Self {
            vmid,
            node: node.to_string(),
            pending: BTreeMap::new(),
            pending_delete: Vec::new(),
            power: PowerState::Stopped,
            started_at: None,
            created_at: Instant::now(),
            snapshots: Vec::new(),
            exec: BTreeMap::new(),
            next_exec_pid: 1000,
            cloud_init: None,
            generation: 0,
            linked_base: None,
            pool: None,
            os_disks: hard_disk_keys(&config),
            booted_os: false,
            config,
        }
    }

    /// Whether it is a template.
    pub fn is_template(&self) -> bool {
        self.config.get("template").is_some_and(|v| v == "1")
    }

    /// Current lock, if any.
    pub fn lock(&self) -> Option<&str> {
        self.config.get("lock").map(String::as_str)
    }

    /// `Err("VM is locked (x)")` when locked.
    pub fn check_lock(&self) -> Result<(), String> {
        match self.lock() {
            Some(l) => Err(format!("VM is locked ({l})")),
            None => Ok(()),
        }
    }

    /// Whether running (incl. paused).
    pub fn is_running(&self) -> bool {
        self.power != PowerState::Stopped
    }

    /// Sets the power state, recording the start time.
    pub fn set_power(&mut self, power: PowerState) {
        if power != PowerState::Stopped && self.power == PowerState::Stopped {
            self.started_at = Some(Instant::now());
            self.booted_os = self.boots_os();
        }
        if power == PowerState::Stopped {
            self.started_at = None;
            self.apply_pending();
        }
        self.power = power;
    }

    /// Applies pending changes (on stop/start, reboot).
    pub fn apply_pending(&mut self) {
        let pending = std::mem::take(&mut self.pending);
        self.config.extend(pending);
        for k in std::mem::take(&mut self.pending_delete) {
            self.config.remove(&k);
        }
        self.touch();
    }

    /// Records a config write.
    pub fn touch(&mut self) {
        self.generation += 1;
    }

    /// The config digest: 40 hex chars that change on every write.
    pub fn digest(&self) -> String {
        let mut text = format!("{}:{}\n", self.vmid, self.generation);
        for (k, v) in &self.config {
            text.push_str(k);
            text.push('=');
            text.push_str(v);
            text.push('\n');
        }
        let mut out = String::new();
        for salt in 0u8..3 {
            let mut data = vec![salt];
            data.extend_from_slice(text.as_bytes());
            out.push_str(&format!("{:016x}", super::fnv64(&data)));
        }
        out.truncate(40);
        out
    }

    /// Memory in MiB from the config (default 512).
    pub fn memory_mib(&self) -> u64 {
        self.config
            .get("memory")
            .and_then(|m| {
                propstr::to_map(m, Some("current"))
                    .get("current")
                    .and_then(|c| c.parse().ok())
            })
            .unwrap_or(512)
    }

    /// vCPUs (cores × sockets).
    pub fn cpus(&self) -> u64 {
        let get = |k: &str| {
            self.config
                .get(k)
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(1)
        };
        get("cores") * get("sockets")
    }

    /// Sum of disk sizes in bytes (disks only, not cdroms).
    pub fn maxdisk(&self) -> u64 {
        self.disks().iter().map(|(_, size)| *size).sum()
    }

    /// Disk keys with their sizes (cdroms excluded).
    pub fn disks(&self) -> Vec<(String, u64)> {
        self.config
            .iter()
            .filter(|(k, _)| crate::validate::is_disk_key(k))
            .filter_map(|(k, v)| {
                let m = propstr::to_map(v, Some("file"));
                if m.get("media").is_some_and(|x| x == "cdrom") {
                    return None;
                }
                Some((
                    k.clone(),
                    m.get("size").and_then(|s| propstr::parse_size(s)).unwrap_or(0),
                ))
            })
            .collect()
    }

    /// Uptime in seconds.
    pub fn uptime(&self) -> u64 {
        self.started_at.map(|s| s.elapsed().as_secs()).unwrap_or(0)
    }

    /// Status text (`running`/`stopped`) and QMP status.
    pub fn status_text(&self) -> (&'static str, &'static str) {
        match self.power {
            PowerState::Stopped => ("stopped", "stopped"),
            PowerState::Running => ("running", "running"),
            PowerState::Paused => ("running", "paused"),
        }
    }

    /// A config value in PVE's JSON typing (ints/bools as numbers, the rest strings).
    pub fn typed_value(key: &str, value: &str) -> Value {
        if NUMERIC_KEYS.contains(&key)
            && let Ok(n) = value.parse::<i64>()
        {
            return json!(n);
        }
        json!(value)
    }

    /// `GET config` output.
    pub fn config_json(&self, current: bool) -> Value {
        let mut out = serde_json::Map::new();
        let mut merged = self.config.clone();
        if !current {
            merged.extend(self.pending.clone());
            for k in &self.pending_delete {
                merged.remove(k);
            }
        }
        for (k, v) in &merged {
            let value = if k == "cipassword" {
                json!("**********")
            } else {
                Self::typed_value(k, v)
            };
            out.insert(k.clone(), value);
        }
        out.insert("digest".into(), json!(self.digest()));
        Value::Object(out)
    }

    /// Fields shared by list entries and `status/current` (9.x adds `memhost` and the
    /// pressure-stall averages).
    pub fn status_json(&self, ha: Option<&super::HaResource>, version: crate::version::PveVersion) -> Value {
        let (status, qmp) = self.status_text();
        let running = self.is_running();
        let maxmem = self.memory_mib() * 1024 * 1024;
        let mut v = json!({
            "vmid": self.vmid,
            "status": status,
            "qmpstatus": qmp,
            "name": self.config.get("name").cloned().unwrap_or_else(|| format!("VM {}", self.vmid)),
            "cpus": self.cpus(),
            "maxmem": maxmem,
            "maxdisk": self.maxdisk(),
            "mem": if running { maxmem / 4 } else { 0 },
            "cpu": if running { 0.01 } else { 0.0 },
            "disk": 0,
            "netin": 0,
            "netout": 0,
            "diskread": 0,
            "diskwrite": 0,
            "uptime": self.uptime(),
            "ha": match ha {
                Some(h) => json!({"managed": 1, "state": h.state, "group": h.group}),
                None => json!({"managed": 0}),
            },
        });
        if let Some(obj) = v.as_object_mut() {
            if running {
                obj.insert("pid".into(), json!(10_000 + self.vmid));
                let (machine, qemu) = if version.is_9() {
                    ("pc-i440fx-10.1+pve0", "10.1.2")
                } else {
                    ("pc-i440fx-8.2+pve0", "8.2.2")
                };
                obj.insert("running-machine".into(), json!(machine));
                obj.insert("running-qemu".into(), json!(qemu));
            }
            if version.is_9() {
                obj.insert("memhost".into(), json!(if running { maxmem / 4 } else { 0 }));
            }
            if version.is_9() && running {
                for k in [
                    "pressurecpusome",
                    "pressurecpufull",
                    "pressureiosome",
                    "pressureiofull",
                    "pressurememorysome",
                    "pressurememoryfull",
                ] {
                    obj.insert(k.into(), json!(0.0));
                }
            }
            if let Some(l) = self.lock() {
                obj.insert("lock".into(), json!(l));
            }
            if let Some(t) = self.config.get("tags") {
                obj.insert("tags".into(), json!(t));
            }
            if self.is_template() {
                obj.insert("template".into(), json!(1));
            }
            if self.config.get("agent").is_some_and(|a| {
                propstr::to_map(a, Some("enabled"))
                    .get("enabled")
                    .is_some_and(|e| e == "1")
            }) {
                obj.insert("agent".into(), json!(1));
            }
        }
        v
    }

    /// Whether the agent is enabled in the config.
    pub fn agent_enabled(&self) -> bool {
        self.config.get("agent").is_some_and(|a| {
            propstr::to_map(a, Some("enabled"))
                .get("enabled")
                .is_some_and(|e| e == "1")
        })
    }

    /// MACs of `netN` devices in index order (upper-case, as in the config).
    pub fn macs(&self) -> Vec<(String, String)> {
        let mut nets: Vec<(u32, String, String)> = self
            .config
            .iter()
            .filter(|(k, _)| propstr::family(k) == Some("net"))
            .filter_map(|(k, v)| {
                let idx: u32 = k.trim_start_matches("net").parse().ok()?;
                let props = propstr::parse(v, Some("model")).ok()?;
                let mac = props
                    .iter()
                    .find(|(pk, _)| propstr::NET_MODELS.contains(&pk.as_str()) || pk == "macaddr")
                    .map(|(_, mv)| mv.clone())
                    .filter(|m| m.contains(':'))?;
                Some((idx, k.clone(), mac))
            })
            .collect();
        nets.sort();
        nets.into_iter().map(|(_, k, m)| (k, m)).collect()
    }
}

/// Whether a drive value is a CD-ROM (`media=cdrom`).
fn is_cdrom(value: &str) -> bool {
    propstr::to_map(value, Some("file"))
        .get("media")
        .is_some_and(|m| m == "cdrom")
}

/// Whether a drive value is a cloud-init drive (`vm-N-cloudinit`), which PVE never boots.
fn is_cloud_init(value: &str) -> bool {
    let map = propstr::to_map(value, Some("file"));
    let file = map.get("file").map(String::as_str).unwrap_or_default();
    let name = file.rsplit(['/', ':']).next().unwrap_or_default();
    let stem = name.split('.').next().unwrap_or_default();
    stem == "cloudinit" || stem.ends_with("-cloudinit")
}

/// Keys of bootable drives (`ide`, `sata`, `scsi`, `virtio`; not `efidisk0`/`tpmstate0`).
fn is_boot_drive(key: &str) -> bool {
    matches!(propstr::family(key), Some("ide" | "sata" | "scsi" | "virtio"))
}

/// Keys of the hard disks of a config (no CD-ROMs, no cloud-init drives).
pub fn hard_disk_keys(config: &BTreeMap<String, String>) -> BTreeSet<String> {
    config
        .iter()
        .filter(|(k, v)| is_boot_drive(k) && !is_cdrom(v) && !is_cloud_init(v))
        .map(|(k, _)| k.clone())
        .collect()
}

impl Vm {
    /// The devices QEMU gets a `bootindex` for (PVE starts it with `-boot strict=on`, so nothing
    /// else boots): the `order=` list of `boot`; else the legacy letters (default `cdn`) where `c`
    /// is only the disk named by `bootdisk`, `d` every CD-ROM and `n` every network device.
    pub fn effective_boot_order(&self) -> Vec<String> {
        let boot = self.config.get("boot").map(|b| b.trim()).unwrap_or_default();
        let legacy = boot.strip_prefix("legacy=").unwrap_or(boot);
        let letters = if boot.is_empty() {
            "cdn"
        } else if legacy.chars().all(|c| "acdn".contains(c)) {
            legacy
        } else {
            return propstr::boot_devices(boot);
        };
        let drives = |want_cdrom: bool| -> Vec<String> {
            self.config
                .iter()
                .filter(|(k, v)| is_boot_drive(k) && is_cdrom(v) == want_cdrom && !is_cloud_init(v))
                .map(|(k, _)| k.clone())
                .collect()
        };
        let mut out = Vec::new();
        for letter in letters.chars() {
            match letter {
                'c' => {
                    if let Some(d) = self.config.get("bootdisk")
                        && drives(false).contains(d)
                    {
                        out.push(d.clone());
                    }
                }
                'd' => out.extend(drives(true)),
                'n' => out.extend(
                    self.config
                        .keys()
                        .filter(|k| propstr::family(k) == Some("net"))
                        .cloned(),
                ),
                _ => {}
            }
        }
        out
    }

    /// Whether the boot order reaches a disk with an OS.
    pub fn boots_os(&self) -> bool {
        self.effective_boot_order()
            .iter()
            .any(|d| self.os_disks.contains(d) && self.config.get(d).is_some_and(|v| !is_cdrom(v)))
    }
}

/// The VM owning a volume name (`vm-101-disk-0`, `base-100-disk-0`, linked
/// `base-100-disk-0/vm-101-disk-0` → 101), as `parse_volname` reports it.
pub fn volume_owner(volname: &str) -> Option<u32> {
    let last = volname.rsplit('/').next()?;
    let rest = last.strip_prefix("vm-").or_else(|| last.strip_prefix("base-"))?;
    rest.split('-').next()?.parse().ok()
}
