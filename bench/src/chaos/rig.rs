//! The world of a chaos run: pve-sim with faults (seeded), the test control plane (in-tree, or
//! the real kube-apiserver when `KUBEBUILDER_ASSETS` names it), the core-CAPI and IPAM
//! stand-ins, the bench's Cluster and ProxmoxCluster, and a watch-fed store of ProxmoxMachines.

use std::path::Path;

use testenv::{ServerOptions, TestEnv, TestEnvOptions};

use super::ChaosOptions;
use crate::manager::ManagerTarget;
use crate::world::World;
use crate::{BenchError, Profile, SCENARIO};

/// Everything a chaos run talks to besides the manager.
pub(crate) struct ChaosRig {
    pub(crate) sim: pve_sim::SimServer,
    pub(crate) env: TestEnv,
    pub(crate) target: ManagerTarget,
    pub(crate) world: World,
}

impl ChaosRig {
    /// Starts pve-sim (faults off until [`ChaosRig::faults_on`]), the control plane and the
    /// stand-ins.
    pub(crate) async fn start(opts: &ChaosOptions, dir: &Path) -> Result<Self, BenchError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut scenario = pve_sim::Scenario::from_yaml(SCENARIO)?;
        if opts.profile == Profile::Instant {
            scenario.latency = pve_sim::LatencySpec::default();
        }
        let sim = pve_sim::SimServer::start(pve_sim::SimConfig {
            scenario,
            seed: opts.seed,
            ..pve_sim::SimConfig::default()
        })
        .await?;
        let ca_file = dir.join("pve-sim-ca.pem");
        std::fs::write(&ca_file, sim.ca_pem().unwrap_or_default())
            .map_err(|e| BenchError::io("writing pve-sim's CA", e))?;
        let env = match testenv::real::binaries_from_env().filter(|_| !opts.in_tree) {
            Some((apiserver, etcd)) => TestEnv::start_real(apiserver, etcd).await?,
            None => {
                TestEnv::start_with(TestEnvOptions {
                    server: ServerOptions {
                        garbage_collector: true,
                        ..ServerOptions::default()
                    },
                    force_in_tree: true,
                })
                .await?
            }
        };
        let world = World::start(&env).await?;
        let mut extra_args = vec!["--insecure-diagnostics=true".to_owned()];
        extra_args.extend(opts.manager_args.iter().cloned());
        let target = ManagerTarget {
            kubeconfig: env.kubeconfig_path().to_path_buf(),
            proxmox_url: sim.url(),
            proxmox_token: sim.token_id().to_owned(),
            proxmox_secret: sim.token_secret().to_owned(),
            proxmox_ca_file: ca_file,
            extra_args,
            log_file: dir.join("manager.log"),
        };
        Ok(Self {
            sim,
            env,
            target,
            world,
        })
    }

    /// Turns pve-sim's fault injection on.
    pub(crate) fn faults_on(&self, rate: f64) {
        self.sim.state().set_faults(super::plan::faults(rate));
    }

    /// Turns it off (for the final inventory and clean-up).
    pub(crate) fn faults_off(&self) {
        self.sim.state().set_faults(pve_sim::FaultSpec::default());
    }

    /// Stops everything.
    pub(crate) async fn stop(self) {
        self.world.stop().await;
        self.sim.shutdown().await;
        drop(self.env);
    }
}
