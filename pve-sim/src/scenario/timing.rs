//! Task and guest timings (latency profiles) and simulated guest behaviour.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Latency profile name.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Profile {
    /// Tasks complete (nearly) immediately.
    #[default]
    Instant,
    /// Durations close to real PVE (linked clone 2 s, full clone 20 s, start 3 s, agent 15 s).
    Realistic,
}

/// Task and guest timings in milliseconds. Unset values come from the profile.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct LatencySpec {
    /// Base profile.
    pub profile: Profile,
    /// Per task type overrides (`qmclone-linked`, `qmclone-full`, `qmstart`, `qmstop`, ...), milliseconds.
    pub tasks: BTreeMap<String, u64>,
    /// Time after start until the guest agent answers, milliseconds.
    pub agent_ready_ms: Option<u64>,
    /// Time after start until cloud-init is done, milliseconds.
    pub cloud_init_done_ms: Option<u64>,
    /// Time after creation during which `/cluster/resources` has no RRD data, milliseconds (only
    /// used while the status cache is off).
    pub rrd_delay_ms: Option<u64>,
    /// pvestatd's status cache: every this many milliseconds each node (at its own phase)
    /// refreshes what `/cluster/resources` shows of its VMs (power state, uptime, name, template,
    /// cpu, memory). `0` turns it off (`/cluster/resources` live). Default: off in `instant`,
    /// 10000 (as pvestatd) in `realistic`.
    pub status_cache_ms: Option<u64>,
    /// PVE 9: how long after start (or after an HA group appears) the HA manager migrates HA
    /// groups to node-affinity rules (three CRM rounds of 10 s). Default: 0 in `instant`, 30000
    /// in `realistic`.
    pub ha_group_migration_ms: Option<u64>,
}

impl LatencySpec {
    /// Duration of a task of the given type (`qmclone-linked` / `qmclone-full` for clones).
    pub fn task(&self, kind: &str) -> Duration {
        if let Some(ms) = self.tasks.get(kind) {
            return Duration::from_millis(*ms);
        }
        // A shutdown that waits out its timeout (`qmshutdown-timeout:<seconds>`): the timeout in
        // the realistic profile (the instant one has no latency at all).
        if let Some(secs) = kind
            .strip_prefix("qmshutdown-timeout:")
            .and_then(|s| s.parse::<u64>().ok())
        {
            return match self.profile {
                Profile::Instant => Duration::ZERO,
                Profile::Realistic => Duration::from_secs(secs),
            };
        }
        let ms = match self.profile {
            Profile::Instant => 0,
            Profile::Realistic => match kind {
                "qmclone-linked" => 2_000,
                "qmclone-full" => 20_000,
                "qmstart" => 3_000,
                "qmshutdown" => 5_000,
                "qmreboot" => 5_000,
                "qmstop" | "qmreset" | "qmpause" | "qmresume" => 1_000,
                "qmdestroy" => 2_000,
                "qmconfig" => 300,
                "resize" => 1_000,
                "imgcopy" | "imgdel" => 1_000,
                "qmsnapshot" | "qmdelsnapshot" | "qmrollback" => 2_000,
                "qmtemplate" => 2_000,
                _ => 500,
            },
        };
        Duration::from_millis(ms)
    }

    /// Agent readiness delay after start.
    pub fn agent_ready(&self) -> Duration {
        Duration::from_millis(self.agent_ready_ms.unwrap_or(match self.profile {
            Profile::Instant => 0,
            Profile::Realistic => 15_000,
        }))
    }

    /// Cloud-init completion delay after start.
    pub fn cloud_init_done(&self) -> Duration {
        Duration::from_millis(self.cloud_init_done_ms.unwrap_or(match self.profile {
            Profile::Instant => 0,
            Profile::Realistic => 45_000,
        }))
    }

    /// pvestatd's refresh interval, `None` when the status cache is off.
    pub fn status_cache(&self) -> Option<Duration> {
        let ms = self.status_cache_ms.unwrap_or(match self.profile {
            Profile::Instant => 0,
            Profile::Realistic => 10_000,
        });
        (ms > 0).then(|| Duration::from_millis(ms))
    }

    /// PVE 9: delay until the HA manager migrates HA groups to rules.
    pub fn ha_group_migration(&self) -> Duration {
        Duration::from_millis(self.ha_group_migration_ms.unwrap_or(match self.profile {
            Profile::Instant => 0,
            Profile::Realistic => 30_000,
        }))
    }

    /// RRD staleness window for freshly created VMs.
    pub fn rrd_delay(&self) -> Duration {
        Duration::from_millis(self.rrd_delay_ms.unwrap_or(match self.profile {
            Profile::Instant => 0,
            Profile::Realistic => 10_000,
        }))
    }
}

/// Final result `cloud-init status` reports once done.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum CloudInitResult {
    /// `status: done`, exit 0.
    #[default]
    Done,
    /// `status: error`, exit 1.
    Error,
    /// `status: done`, exit 2 (cloud-init 23.4+: recoverable errors; only the extended status says `degraded done`).
    Degraded,
}

/// Simulated guest behaviour.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(default, deny_unknown_fields)]
pub struct GuestSpec {
    /// Whether guests run a QEMU guest agent at all.
    pub agent: bool,
    /// What cloud-init ends with.
    pub cloud_init: CloudInitResult,
    /// Guests ignore ACPI/agent shutdown requests: `shutdown` fails with
    /// `VM quit/powerdown failed - got timeout` unless `forceStop=1`.
    pub ignore_shutdown: bool,
}

impl Default for GuestSpec {
    fn default() -> Self {
        Self {
            agent: true,
            cloud_init: CloudInitResult::Done,
            ignore_shutdown: false,
        }
    }
}
