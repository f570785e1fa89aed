//! `make bench`: how fast and how frugal capmox-rs is with N machines.
//!
//! Each run starts pve-sim in-process (the `pve-sim/scenarios/demo.yaml` cluster with its
//! realistic latencies, or the instant profile for scale runs), the test control plane (the
//! in-tree API server, or real etcd + kube-apiserver with an audit log when `KUBEBUILDER_ASSETS`
//! names them), the core-CAPI and in-cluster-IPAM stand-ins and the capmox manager — by default
//! the `capmox` binary as its own process, so that its RSS and CPU time can be read from
//! `/proc`. It creates a Cluster, waits for it, then creates N Machines with bootstrap Secrets and
//! ProxmoxMachines at once and measures, phase by phase (see [`run::run_one`]): provisioning
//! until the last bootstrap ISO is removed, a window at rest, a manager restart, and the deletion
//! of every Machine. Proxmox requests are pve-sim's counters by endpoint; Kubernetes requests are
//! counted at the control plane (in-tree counters or the audit log) for the manager's
//! `User-Agent`; reconcile passes come from the manager's metrics.

pub mod chaos;
pub mod counts;
pub mod floor;
pub mod manager;
pub mod objects;
pub mod report;
mod run;
pub mod vm_ops;
pub mod vms;
mod world;

use std::path::PathBuf;
use std::time::Duration;

pub use manager::ManagerMode;
pub use report::{RunReport, table};
pub use run::run_one;

/// The scenario pve-sim serves.
pub const SCENARIO: &str = include_str!("../../pve-sim/scenarios/demo.yaml");

/// The `User-Agent` of the bench's own Kubernetes client (and the stand-ins').
pub const BENCH_AGENT: &str = concat!("capmox-bench/", env!("CARGO_PKG_VERSION"));

/// pve-sim latency profile of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    /// The scenario's realistic task and guest timings.
    Realistic,
    /// Every task and guest check finishes at once.
    Instant,
}

impl Profile {
    /// The profile's name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Realistic => "realistic",
            Self::Instant => "instant",
        }
    }

    /// Parses `realistic` or `instant`.
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "realistic" => Ok(Self::Realistic),
            "instant" => Ok(Self::Instant),
            other => Err(format!("unknown profile {other:?} (realistic, instant)")),
        }
    }
}

/// One run: how many machines, with which profile.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunSpec {
    /// Machines.
    pub machines: usize,
    /// Latency profile.
    pub profile: Profile,
}

/// Parses `--machines`: a comma-separated list of counts, each optionally `@profile`
/// (`1,10,100,1000@instant`); counts without a profile get `default`.
pub fn parse_runs(s: &str, default: Profile) -> Result<Vec<RunSpec>, String> {
    s.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (n, profile) = match p.split_once('@') {
                Some((n, prof)) => (n, Profile::parse(prof)?),
                None => (p, default),
            };
            let machines: usize = n
                .parse()
                .ok()
                .filter(|m| *m > 0)
                .ok_or_else(|| format!("{n:?} is not a positive number of machines"))?;
            Ok(RunSpec { machines, profile })
        })
        .collect()
}

/// Options of every run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// How the manager runs.
    pub manager: ManagerMode,
    /// Extra manager arguments.
    pub manager_args: Vec<String>,
    /// Length of the at-rest window.
    pub rest_window: Duration,
    /// Length of the window after the manager restart.
    pub restart_window: Duration,
    /// Use the in-tree API server even when `KUBEBUILDER_ASSETS` names real binaries.
    pub in_tree: bool,
    /// Provisioning and deletion time limit per phase (default: from the floor and N).
    pub timeout: Option<Duration>,
    /// Keep logs (manager, audit) in this folder instead of a temporary one.
    pub keep: Option<PathBuf>,
    /// Print progress on stderr.
    pub progress: bool,
    /// How many VMs of a VM run get a snapshot, a restore and a linked clone (one image import
    /// with them); 0 for none.
    pub vm_ops: usize,
}

impl Default for BenchOptions {
    fn default() -> Self {
        Self {
            manager: ManagerMode::InProcess,
            manager_args: Vec::new(),
            rest_window: Duration::from_secs(60),
            restart_window: Duration::from_secs(60),
            in_tree: false,
            timeout: None,
            keep: None,
            progress: false,
            vm_ops: 3,
        }
    }
}

/// Why a run failed.
#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The scenario did not load.
    #[error("pve-sim scenario: {0}")]
    Scenario(#[from] pve_sim::scenario::ScenarioError),
    /// The simulator did not start.
    #[error("starting pve-sim: {0}")]
    Simulator(#[from] pve_sim::SimError),
    /// The control plane did not start or misbehaved.
    #[error("test control plane: {0}")]
    ControlPlane(#[from] testenv::Error),
    /// A bench object could not be built.
    #[error("building an object: {0}")]
    Object(#[from] serde_json::Error),
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The error.
        #[source]
        source: kube::Error,
    },
    /// The manager could not be started or stopped unexpectedly.
    #[error("capmox manager: {0}")]
    Manager(String),
    /// File or process I/O failed.
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// A phase did not finish in time.
    #[error("timed out after {after:?} waiting for {what}")]
    Timeout {
        /// What was awaited.
        what: String,
        /// The limit.
        after: Duration,
    },
}

impl BenchError {
    pub(crate) fn io(action: impl Into<String>, source: std::io::Error) -> Self {
        Self::Io {
            action: action.into(),
            source,
        }
    }

    pub(crate) fn kube(action: impl Into<String>) -> impl FnOnce(kube::Error) -> Self {
        let action = action.into();
        move |source| Self::Kube { action, source }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_parse_with_per_run_profiles() {
        let runs = parse_runs("1, 10,1000@instant", Profile::Realistic).unwrap();
        assert_eq!(
            runs,
            vec![
                RunSpec {
                    machines: 1,
                    profile: Profile::Realistic
                },
                RunSpec {
                    machines: 10,
                    profile: Profile::Realistic
                },
                RunSpec {
                    machines: 1000,
                    profile: Profile::Instant
                },
            ]
        );
        assert!(parse_runs("0", Profile::Instant).is_err());
        assert!(parse_runs("5@fast", Profile::Instant).is_err());
    }
}
