//! Our side: pve-sim (the demo scenario, no latencies), our CRDs with conversion through the
//! manager's `/convert`, the `capmox` binary as a separate process pointed at pve-sim by
//! `PROXMOX_*`, and its admission webhooks registered by URL — or, to reproduce what happened
//! before the webhook server existed, plain CRDs (conversion `None`) and no webhooks.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use capmox_api::webhook::registration;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, PostParams};
use testenv::TestEnv;

use super::{Process, free_port};

/// The scenario pve-sim serves: three nodes, shared and local storage, Kubernetes templates.
const SCENARIO: &str = include_str!("../../pve-sim/scenarios/demo.yaml");

/// Starts pve-sim with the demo scenario and no simulated latencies.
pub async fn start_pve_sim() -> pve_sim::SimServer {
    let mut scenario = pve_sim::Scenario::from_yaml(SCENARIO).expect("the demo scenario");
    scenario.latency = pve_sim::LatencySpec::default();
    pve_sim::SimServer::start(pve_sim::SimConfig {
        scenario,
        ..pve_sim::SimConfig::default()
    })
    .await
    .expect("starting pve-sim")
}

/// A running `capmox` manager.
pub struct Provider {
    /// `https://127.0.0.1:<webhook port>` (`None`: webhooks off).
    pub base_url: Option<String>,
    /// The process (killed on drop).
    pub process: Process,
}

/// Installs our four CRDs: converting through `base_url`'s `/convert`, or (no `base_url`) as
/// `config/crd/bases` has them, conversion `None`.
pub async fn install_crds(env: &TestEnv, base_url: Option<&str>, ca_pem: &str) {
    let crds = match base_url {
        Some(url) => registration::crds_with_conversion(url, ca_pem.as_bytes()),
        None => capmox_api::crd::all(),
    }
    .expect("building our CRDs");
    env.install_crds(crds).await.expect("installing our CRDs");
}

/// Starts the `capmox` binary against the control plane and pve-sim, with its webhook server on
/// loopback `webhook` port serving `cert_dir` (or `--enable-webhooks=false` without `cert_dir`),
/// and waits until `/readyz` says ready.
pub async fn start(
    env: &TestEnv,
    sim: &pve_sim::SimServer,
    webhook: u16,
    cert_dir: Option<&Path>,
    logs: &Path,
) -> Provider {
    let (health, metrics) = (free_port(), free_port());
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_capmox"));
    cmd.arg(format!("--health-probe-bind-address=127.0.0.1:{health}"))
        .arg(format!("--diagnostics-address=127.0.0.1:{metrics}"))
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("POD_NAMESPACE", "default")
        .env("PROXMOX_URL", sim.url())
        .env("PROXMOX_TOKEN", sim.token_id())
        .env("PROXMOX_SECRET", sim.token_secret())
        .env("RUST_LOG", "info");
    match cert_dir {
        Some(dir) => {
            cmd.arg("--webhook-host=127.0.0.1")
                .arg(format!("--webhook-port={webhook}"))
                .arg(format!("--webhook-cert-dir={}", dir.display()));
        }
        None => {
            cmd.arg("--enable-webhooks=false");
        }
    }
    let mut process = Process::spawn("capmox", cmd, logs);
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .expect("an HTTP client");
    testenv::wait_for(120, "the capmox manager to be ready", || {
        let exited = process.exited();
        let http = http.clone();
        async move {
            if let Some(e) = exited {
                panic!("{e}");
            }
            let r = http
                .get(format!("http://127.0.0.1:{health}/readyz"))
                .send()
                .await
                .ok()?;
            (r.status() == 200).then_some(())
        }
    })
    .await;
    Provider {
        base_url: cert_dir.map(|_| format!("https://127.0.0.1:{webhook}")),
        process,
    }
}

/// Registers capmox's mutating and validating configurations by URL.
pub async fn register_admission(client: &kube::Client, base_url: &str, ca_pem: &str) {
    let (m, v) = registration::admission_configurations(base_url, ca_pem.as_bytes());
    Api::<MutatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &m)
        .await
        .expect("registering our mutating webhooks");
    Api::<ValidatingWebhookConfiguration>::all(client.clone())
        .create(&PostParams::default(), &v)
        .await
        .expect("registering our validating webhooks");
}
