//! `make demo`: capmox-rs provisions a three-machine cluster on a simulated Proxmox VE and deletes
//! it again, with nothing but this process — no Kubernetes cluster, no Proxmox server.
//!
//! [`run`] starts pve-sim (the `pve-sim/scenarios/demo.yaml` cluster, realistic latencies unless
//! [`DemoOptions::profile_instant`]), the in-tree test control plane (with its garbage collector,
//! so IPAddressClaims owned by ProxmoxMachines are collected), installs the capmox CRDs and the
//! Cluster API / IPAM CRDs, runs the capmox manager in-process against the simulator plus the
//! core-CAPI and in-cluster-IPAM stand-ins, and then plays core Cluster API: it creates a Cluster
//! with its ProxmoxCluster and one control-plane and two worker Machines with bootstrap Secrets
//! and ProxmoxMachines. It prints each ProxmoxMachine's `VirtualMachineProvisioned` reason as it
//! changes, a table of the provisioned machines, deletes the Cluster and reports leaks.

pub mod objects;
pub mod progress;
pub mod report;
mod steps;
pub mod vm;
pub mod vm_image;
pub mod vm_ops;

use std::io::Write;
use std::time::Duration;

use capmox::context::ControllerSettings;
use capmox::manager::{Manager, ManagerError, ManagerOptions};
use capmox_standins::StandIns;
use testenv::{ServerOptions, TestEnv, TestEnvOptions};

pub use report::{LeakReport, MachineSummary};

use progress::Printer;

/// The scenario the simulator serves (three nodes, local and shared storage, templates).
const SCENARIO: &str = include_str!("../../pve-sim/scenarios/demo.yaml");

/// Options of [`run`].
#[derive(Debug, Clone)]
pub struct DemoOptions {
    /// Serve the scenario with pve-sim's instant profile (tests) instead of realistic latencies.
    pub profile_instant: bool,
    /// How long the three machines may take to be provisioned.
    pub provision_timeout: Duration,
    /// How long the deletion of the cluster may take.
    pub delete_timeout: Duration,
    /// How long leftovers (claims, addresses, VMs) may take to disappear after the deletion.
    pub cleanup_grace: Duration,
    /// Reconcile concurrency of the manager's controllers.
    pub concurrency: u16,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            profile_instant: false,
            provision_timeout: Duration::from_secs(100),
            delete_timeout: Duration::from_secs(60),
            cleanup_grace: Duration::from_secs(15),
            concurrency: 4,
        }
    }
}

/// What the demo observed.
#[derive(Debug, Clone)]
pub struct DemoReport {
    /// The provisioned machines, in creation order.
    pub machines: Vec<MachineSummary>,
    /// What was left after the deletion.
    pub leaks: LeakReport,
    /// Time from the creation of the objects until all machines were provisioned.
    pub provisioning: Duration,
    /// Time from the deletion of the Cluster until its objects were gone.
    pub deletion: Duration,
    /// Time of the whole demo.
    pub total: Duration,
}

impl DemoReport {
    /// Whether nothing leaked.
    pub fn clean(&self) -> bool {
        self.leaks.is_empty()
    }
}

/// Why the demo failed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// The simulator scenario did not load.
    #[error("pve-sim scenario: {0}")]
    Scenario(#[from] pve_sim::scenario::ScenarioError),
    /// The simulator did not start.
    #[error("starting pve-sim: {0}")]
    Simulator(#[from] pve_sim::SimError),
    /// The control plane did not start or a CRD could not be installed.
    #[error("test control plane: {0}")]
    ControlPlane(#[from] testenv::Error),
    /// A CRD could not be built.
    #[error("building CRDs: {0}")]
    Crd(String),
    /// A demo object could not be built.
    #[error("building a demo object: {0}")]
    Object(#[from] serde_json::Error),
    /// A Kubernetes API call failed.
    #[error("{action}: {source}")]
    Kube {
        /// What was being done.
        action: String,
        /// The client error.
        #[source]
        source: kube::Error,
    },
    /// A local I/O operation failed (the demo's loopback file server).
    #[error("{action}: {source}")]
    Io {
        /// What was being done.
        action: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The manager failed to start.
    #[error("capmox manager: {0}")]
    Manager(#[from] ManagerError),
    /// The manager stopped while the demo was running.
    #[error("the capmox manager stopped unexpectedly: {0}")]
    ManagerStopped(String),
    /// A step did not finish in time.
    #[error("timed out after {after:?} waiting for {step}; last state: {detail}")]
    Timeout {
        /// The step.
        step: &'static str,
        /// The timeout.
        after: Duration,
        /// What was observed last.
        detail: String,
    },
    /// Writing the output failed.
    #[error("writing output: {0}")]
    Output(#[source] std::io::Error),
}

/// Runs the demo, writing progress, the machine table and the leak report to `out`.
///
/// Returns the report (check [`DemoReport::clean`]) or the first error (a timeout, a failed
/// start); everything started is stopped before returning either way.
pub async fn run(opts: DemoOptions, out: impl Write) -> Result<DemoReport, DemoError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut p = Printer::new(out);

    let mut scenario = pve_sim::Scenario::from_yaml(SCENARIO)?;
    if opts.profile_instant {
        scenario.latency = pve_sim::LatencySpec::default();
    }
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig {
        scenario: scenario.clone(),
        ..pve_sim::SimConfig::default()
    })
    .await?;
    p.line(format!(
        "pve-sim: Proxmox VE simulator at {} ({} nodes, {} latencies)",
        sim.url(),
        scenario.nodes.len(),
        if opts.profile_instant {
            "instant"
        } else {
            "realistic"
        }
    ))?;

    let env = TestEnv::start_with(TestEnvOptions {
        server: ServerOptions {
            garbage_collector: true,
            ..ServerOptions::default()
        },
        force_in_tree: true,
    })
    .await?;
    let client = env.client();
    env.install_crds(capmox_api::crd::all().map_err(|e| DemoError::Crd(e.to_string()))?)
        .await?;
    env.install_crds(capmox_standins::crds::all().map_err(|e| DemoError::Crd(e.to_string()))?)
        .await?;
    p.line(format!(
        "control plane: in-tree Kubernetes API at {} (kubectl --kubeconfig {})",
        env.server_url(),
        env.kubeconfig_path().display()
    ))?;

    let proxmox = capmox::proxmox::ClientConfig::new(
        sim.url(),
        capmox::proxmox::Credentials::token(sim.token_id(), sim.token_secret()),
    );
    let proxmox = match sim.ca_pem() {
        Some(pem) => proxmox.with_ca_pem(pem),
        None => proxmox,
    };
    let manager = Manager::new(
        client.clone(),
        ManagerOptions {
            proxmox: Some(proxmox),
            settings: ControllerSettings {
                concurrency: opts.concurrency,
                ..ControllerSettings::default()
            },
            crd_wait_timeout: Duration::from_secs(30),
            ..ManagerOptions::default()
        },
    )
    .await?;
    let (stop_manager, stopped) = tokio::sync::oneshot::channel::<()>();
    let manager = tokio::spawn(manager.run(async move {
        let _ = stopped.await;
    }));
    let stand_ins = StandIns::spawn(client.clone(), None);
    p.line("capmox manager running in-process, with stand-ins for core Cluster API and the in-cluster IPAM provider")?;

    let result = steps::Demo {
        client: &client,
        sim: &sim,
        opts: &opts,
        manager: &manager,
    }
    .run(&mut p)
    .await;

    let _ = stop_manager.send(());
    match tokio::time::timeout(Duration::from_secs(15), manager).await {
        Ok(Ok(Err(e))) => tracing::warn!(error = %e, "the manager ended with an error"),
        Ok(Err(e)) => tracing::warn!(error = %e, "the manager task failed"),
        Err(_) => tracing::warn!("the manager did not stop within 15 s"),
        Ok(Ok(Ok(()))) => {}
    }
    stand_ins.stop().await;
    sim.shutdown().await;
    drop(env);
    result
}
