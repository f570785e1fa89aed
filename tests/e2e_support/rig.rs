//! Everything an end-to-end case runs on: the real kube-apiserver, CAPI's CRDs converting through
//! CAPI's own `/convert`, the in-cluster IPAM CRDs, the real CAPI core manager with its admission
//! webhooks registered by URL, pve-sim, our `capmox` binary (conversion and admission webhooks by
//! URL, or none), and the in-cluster IPAM stand-in.

use std::path::PathBuf;
use std::time::Instant;

use capmox_standins::{InClusterIpamStandIn, StandInHandle};
use testenv::TestEnv;

use super::capi::{self, CapiManager};
use super::objects::Capi;
use super::provider::{self, Provider};
use super::{free_port, shared_dir};

/// The running pieces (stopped by [`Rig::stop`]; processes are killed on drop too).
pub struct Rig {
    /// The control plane.
    pub env: TestEnv,
    /// Its client.
    pub client: kube::Client,
    /// The simulator.
    pub sim: pve_sim::SimServer,
    /// The CAPI core manager.
    pub capi_manager: CapiManager,
    /// Our manager.
    pub capmox: Provider,
    /// The IPAM stand-in.
    pub ipam: StandInHandle,
    /// Logs of the processes (kept when a case fails).
    pub logs: tempfile::TempDir,
    /// Serving certificates of the webhook servers.
    pub certs: testenv::certs::Certs,
    /// When the rig started.
    pub started: Instant,
}

impl Rig {
    /// Starts everything for `capi`, with or without our conversion webhook; `None` (after one
    /// line saying what is missing) when the real kube-apiserver or `../shared` is not there.
    pub async fn start(capi: Capi, with_conversion: bool, tag: &str) -> Option<Rig> {
        let started = Instant::now();
        let _ = rustls::crypto::ring::default_provider().install_default();
        if testenv::real::binaries_from_env().is_none() {
            eprintln!(
                "skipped: needs the real kube-apiserver: set KUBEBUILDER_ASSETS (make e2e takes it from ../shared/tools/envtest)"
            );
            return None;
        }
        let shared = shared_dir();
        let assets = capi::assets(&shared, capi)?;
        let ipam_crds = shared.join("compat/ipam-in-cluster");
        if !ipam_crds.exists() {
            eprintln!(
                "skipped: {} not found (the in-cluster IPAM CRDs)",
                ipam_crds.display()
            );
            return None;
        }
        let logs = tempfile::Builder::new().prefix("capmox-e2e-").tempdir().unwrap();
        let certs = testenv::certs::generate().unwrap();
        let cert_dir: PathBuf = logs.path().join("certs");
        std::fs::create_dir_all(&cert_dir).unwrap();
        std::fs::write(cert_dir.join("tls.crt"), &certs.serving_pem).unwrap();
        std::fs::write(cert_dir.join("tls.key"), &certs.serving_key_pem).unwrap();

        let env = TestEnv::start().await.unwrap();
        let client = env.client();
        env.install_crds_from_path(&ipam_crds).await.unwrap();
        let capi_port = free_port();
        let capi_url = format!("https://127.0.0.1:{capi_port}");
        capi::install_crds(&env, &assets, &capi_url, &certs.ca_pem).await;
        let capi_manager = capi::start(&env, &assets, capi_port, &cert_dir, logs.path()).await;
        capi::register_webhooks(&client, &assets, capi, &capi_manager.base_url, &certs.ca_pem).await;

        let sim = provider::start_pve_sim().await;
        let port = free_port();
        let url = format!("https://127.0.0.1:{port}");
        let our_url = with_conversion.then_some(url.as_str());
        provider::install_crds(&env, our_url, &certs.ca_pem).await;
        let capmox = provider::start(
            &env,
            &sim,
            port,
            with_conversion.then_some(cert_dir.as_path()),
            logs.path(),
        )
        .await;
        if with_conversion {
            provider::register_admission(&client, &url, &certs.ca_pem).await;
            crate::webhook_support::wait_effective(&client).await;
        } else {
            eprintln!("{tag}: WITHOUT our conversion webhook (CRD conversion None, --enable-webhooks=false)");
        }
        let ipam = InClusterIpamStandIn::spawn(client.clone(), None);
        eprintln!(
            "{tag}: kube-apiserver, CAPI manager, pve-sim, capmox and the IPAM stand-in up in {:.1} s (logs in {})",
            started.elapsed().as_secs_f64(),
            logs.path().display()
        );
        Some(Rig {
            env,
            client,
            sim,
            capi_manager,
            capmox,
            ipam,
            logs,
            certs,
            started,
        })
    }

    /// Stops everything; with `failures`, panics listing them with the end of our log (all logs
    /// kept).
    pub async fn stop(self, tag: &str, failures: Vec<String>) {
        self.ipam.stop().await;
        drop(self.capmox);
        drop(self.capi_manager);
        self.sim.shutdown().await;
        if !failures.is_empty() {
            let kept = self.logs.keep();
            let ours = std::fs::read_to_string(kept.join("capmox.log")).unwrap_or_default();
            let tail: Vec<&str> = ours.lines().rev().take(40).collect();
            panic!(
                "{tag}: {} check(s) failed:\n{}\n--- capmox log, last lines (all logs kept in {}) ---\n{}",
                failures.len(),
                failures.join("\n"),
                kept.display(),
                tail.into_iter().rev().collect::<Vec<_>>().join("\n")
            );
        }
        eprintln!("{tag}: passed in {:.1} s", self.started.elapsed().as_secs_f64());
    }
}

/// A second management cluster beside a rig's, managing the same Proxmox (the rig's pve-sim):
/// its own real kube-apiserver, the CAPI core manager, CAPI's and our CRDs and webhooks, our
/// manager and the IPAM stand-in — what `clusterctl move` moves to.
pub struct Target {
    /// The control plane.
    pub env: TestEnv,
    /// Its client.
    pub client: kube::Client,
    /// Its CAPI core manager.
    pub capi_manager: CapiManager,
    /// Its capmox manager.
    pub capmox: Provider,
    /// Its IPAM stand-in.
    pub ipam: StandInHandle,
}

impl Target {
    /// Stops the stand-in and the processes.
    pub async fn stop(self) {
        self.ipam.stop().await;
        drop(self.capmox);
        drop(self.capi_manager);
    }
}

impl Rig {
    /// Starts a [`Target`] for `capi` on this rig's pve-sim, with our webhooks, its logs in
    /// `<logs>/target/`.
    pub async fn start_target(&self, capi: Capi) -> Target {
        let assets = capi::assets(&shared_dir(), capi).expect("the CAPI assets the rig started with");
        let logs = self.logs.path().join("target");
        std::fs::create_dir_all(&logs).unwrap();
        let cert_dir = self.logs.path().join("certs");
        let env = TestEnv::start().await.unwrap();
        let client = env.client();
        env.install_crds_from_path(&shared_dir().join("compat/ipam-in-cluster"))
            .await
            .unwrap();
        let capi_port = free_port();
        let capi_url = format!("https://127.0.0.1:{capi_port}");
        capi::install_crds(&env, &assets, &capi_url, &self.certs.ca_pem).await;
        let capi_manager = capi::start(&env, &assets, capi_port, &cert_dir, &logs).await;
        capi::register_webhooks(&client, &assets, capi, &capi_manager.base_url, &self.certs.ca_pem).await;
        let port = free_port();
        let url = format!("https://127.0.0.1:{port}");
        provider::install_crds(&env, Some(&url), &self.certs.ca_pem).await;
        let capmox = provider::start(&env, &self.sim, port, Some(cert_dir.as_path()), &logs).await;
        provider::register_admission(&client, &url, &self.certs.ca_pem).await;
        crate::webhook_support::wait_effective(&client).await;
        let ipam = InClusterIpamStandIn::spawn(client.clone(), None);
        Target {
            env,
            client,
            capi_manager,
            capmox,
            ipam,
        }
    }
}
