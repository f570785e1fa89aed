//! End to end with the real Cluster API core manager, both contract generations (`make e2e`).
//!
//! For CAPI v1.13.4 (v1beta2 contract) and v1.10.2 (v1beta1 contract, CozyStack): the real
//! kube-apiserver + etcd (`KUBEBUILDER_ASSETS`), CAPI's CRDs converting through CAPI's own
//! `/convert`, the in-cluster IPAM CRDs, the CAPI core manager from `../shared/tools/capi` with
//! its admission webhooks registered by URL, pve-sim, our `capmox` binary as a separate process
//! with its conversion and admission webhooks registered by URL, and the project's in-cluster IPAM
//! stand-in. Two tenants side by side, one applying the Proxmox kinds as `v1alpha2`, one as
//! `v1alpha1` (capmox v0.7 shapes): a Cluster, two Machines with bootstrap `dataSecretName`
//! Secrets, a MachineDeployment of two. Checked per tenant (see `e2e_support/scenario.rs`):
//! CAPI adopts and clones the objects without losing a field (read through both versions),
//! the Cluster's infrastructure is ready with the endpoint copied, every Machine is `Provisioned`
//! with our providerID and addresses, a scale-down deletes exactly one VM, and deleting the
//! Cluster leaves no VM, ISO or IP.
//!
//! `CAPMOX_E2E_WITHOUT_CONVERSION=1` installs our CRDs as before the webhook server existed
//! (conversion `None`) and starts the manager with `--enable-webhooks=false`: on CAPI v1.10.2
//! this reproduces issue 9's data loss, and the test fails saying what was lost and where the
//! Machines stopped.
//!
//! Ignored by `cargo test` (it takes minutes); `make e2e` runs it. Skips with one line when
//! `../shared/tools/{envtest,capi}` are missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e_support;
mod webhook_support;

use std::time::Instant;

use capmox_standins::InClusterIpamStandIn;
use e2e_support::objects::{Capi, Tenant};
use e2e_support::scenario::Run;
use e2e_support::{capi, checks, free_port, provider, shared_dir};
use testenv::TestEnv;

/// Set to reproduce the behaviour without our conversion webhook.
const WITHOUT_CONVERSION: &str = "CAPMOX_E2E_WITHOUT_CONVERSION";

#[tokio::test(flavor = "multi_thread")]
#[ignore = "end to end with the real CAPI core manager (minutes): make e2e"]
async fn capi_v1_13_4_v1beta2_contract() {
    end_to_end(Capi::V1_13_4).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "end to end with the real CAPI core manager (minutes): make e2e"]
async fn capi_v1_10_2_v1beta1_contract() {
    end_to_end(Capi::V1_10_2).await;
}

async fn end_to_end(capi: Capi) {
    let started = Instant::now();
    let _ = rustls::crypto::ring::default_provider().install_default();
    if testenv::real::binaries_from_env().is_none() {
        eprintln!(
            "skipped: needs the real kube-apiserver: set KUBEBUILDER_ASSETS (make e2e takes it from ../shared/tools/envtest)"
        );
        return;
    }
    let shared = shared_dir();
    let Some(assets) = capi::assets(&shared, capi) else {
        return;
    };
    let ipam_crds = shared.join("compat/ipam-in-cluster");
    if !ipam_crds.exists() {
        eprintln!(
            "skipped: {} not found (the in-cluster IPAM CRDs)",
            ipam_crds.display()
        );
        return;
    }
    let with_conversion = std::env::var_os(WITHOUT_CONVERSION).is_none();
    let tag = format!("e2e CAPI {} ({} contract)", capi.release, capi.api);
    let logs = tempfile::Builder::new().prefix("capmox-e2e-").tempdir().unwrap();
    let certs = testenv::certs::generate().unwrap();
    let cert_dir = logs.path().join("certs");
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
        webhook_support::wait_effective(&client).await;
    } else {
        eprintln!("{tag}: WITHOUT our conversion webhook (CRD conversion None, --enable-webhooks=false)");
    }
    let ipam = InClusterIpamStandIn::spawn(client.clone(), None);
    eprintln!(
        "{tag}: kube-apiserver, CAPI manager, pve-sim, capmox and the IPAM stand-in up in {:.1} s (logs in {})",
        started.elapsed().as_secs_f64(),
        logs.path().display()
    );

    let ipam_av = if capi.v1beta1() {
        "ipam.cluster.x-k8s.io/v1beta1"
    } else {
        "ipam.cluster.x-k8s.io/v1beta2"
    };
    let tenants = [
        Tenant::new(capi, "v1alpha2", 20),
        Tenant::new(capi, "v1alpha1", 21),
    ];
    let runs = tenants.iter().map(|t| {
        let (client, sim) = (&client, &sim);
        async move {
            let mut run = Run {
                client,
                sim,
                t,
                failures: Vec::new(),
            };
            run.create().await;
            if run.adopted().await {
                run.fields("after CAPI adopted the objects").await;
            }
            if run.provisioned().await {
                run.fields("once provisioned").await;
                if run.scale_down().await {
                    run.delete(ipam_av).await;
                }
            }
            run.failures
        }
    });
    let mut failures: Vec<String> = futures::future::join_all(runs)
        .await
        .into_iter()
        .flatten()
        .collect();

    if failures.is_empty() {
        let vms = checks::vms(&sim, "");
        let isos = checks::isos(&sim);
        if !vms.is_empty() || !isos.is_empty() {
            failures.push(format!("left in pve-sim: VMs {vms:?}, ISOs {isos:?}"));
        }
    }
    ipam.stop().await;
    drop(capmox);
    drop(capi_manager);
    sim.shutdown().await;
    if !failures.is_empty() {
        let kept = logs.keep();
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
    eprintln!("{tag}: passed in {:.1} s", started.elapsed().as_secs_f64());
}
