//! The world of a chaos run: pve-sim with faults (seeded), the test control plane (in-tree, or
//! the real kube-apiserver when `KUBEBUILDER_ASSETS` names it), the core-CAPI and IPAM
//! stand-ins, the bench's Cluster and ProxmoxCluster, and a watch-fed store of ProxmoxMachines.

use std::path::Path;

use capmox_api::v1alpha2::ProxmoxMachine;
use capmox_standins::StandIns;
use futures::StreamExt;
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use testenv::{ServerOptions, TestEnv, TestEnvOptions};

use super::ChaosOptions;
use crate::manager::ManagerTarget;
use crate::objects::NAMESPACE;
use crate::{BENCH_AGENT, BenchError, Profile, SCENARIO};

/// Everything a chaos run talks to besides the manager.
pub(crate) struct ChaosRig {
    pub(crate) sim: pve_sim::SimServer,
    pub(crate) env: TestEnv,
    pub(crate) client: kube::Client,
    pub(crate) target: ManagerTarget,
    pub(crate) pms: Store<ProxmoxMachine>,
    watch: tokio::task::JoinHandle<()>,
    stand_ins: StandIns,
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
        let mut crds = capmox_api::crd::all().map_err(|e| BenchError::Manager(e.to_string()))?;
        crds.extend(capmox_standins::crds::all().map_err(|e| BenchError::Manager(e.to_string()))?);
        env.install_crds(crds).await?;
        let client = crate::manager::kube_client(env.kubeconfig_path(), BENCH_AGENT).await?;
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(BenchError::kube("creating the namespace"))?;
        let stand_ins = StandIns::spawn(client.clone(), Some(NAMESPACE.to_owned()));
        let (pms, writer) = reflector::store::<ProxmoxMachine>();
        let stream = reflector::reflector(
            writer,
            watcher(
                Api::<ProxmoxMachine>::namespaced(client.clone(), NAMESPACE),
                watcher::Config::default(),
            ),
        )
        .default_backoff()
        .applied_objects();
        let watch = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while stream.next().await.is_some() {}
        });
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
            client,
            target,
            pms,
            watch,
            stand_ins,
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

    /// A namespaced API of the bench namespace.
    pub(crate) fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// Stops everything.
    pub(crate) async fn stop(self) {
        self.watch.abort();
        self.stand_ins.stop().await;
        self.sim.shutdown().await;
        drop(self.env);
    }
}
