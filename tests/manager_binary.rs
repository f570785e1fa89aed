//! The `capmox` binary started with capmox's Deployment arguments against the test control plane
//! and pve-sim: it becomes ready, leads, serves metrics (HTTPS, reviewed bearer token) and the
//! webhooks, keeps secrets out of its logs, and on SIGTERM stops gracefully (exit 0) and
//! releases the leader Lease.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::time::Instant;

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn binary_runs_with_capmox_deployment_args_and_stops_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    if Command::new("kill").arg("-l").output().is_err() {
        eprintln!("skipped: `kill` command not found");
        return;
    }
    let env = testenv::TestEnv::start().await.unwrap();
    let mut crds = capmox_api::crd::all().unwrap();
    crds.push(capmox_api::capi::cluster_crd().unwrap());
    crds.push(capmox_api::capi::in_cluster_ip_pool_crd());
    env.install_crds(crds).await.unwrap();
    let sim = pve_sim::SimServer::start(pve_sim::SimConfig::default())
        .await
        .unwrap();

    let (health_port, metrics_port, webhook_port) = (free_port(), free_port(), free_port());
    let dir = tempfile::tempdir().unwrap();
    // The serving certificate where cert-manager's secret is mounted (here: a temp dir).
    let certs = testenv::certs::generate().unwrap();
    std::fs::write(dir.path().join("tls.crt"), &certs.serving_pem).unwrap();
    std::fs::write(dir.path().join("tls.key"), &certs.serving_key_pem).unwrap();
    let log_path = dir.path().join("stderr.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_capmox"))
        .args([
            // capmox's Deployment arguments, unchanged ...
            "--leader-elect",
            "--feature-gates=ClusterTopology=false",
            "--diagnostics-address=:8443",
            "--insecure-diagnostics=false",
            "--v=0",
        ])
        // ... then test-local addresses (a repeated flag takes the last value, like Go's flag).
        .arg(format!("--diagnostics-address=127.0.0.1:{metrics_port}"))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{health_port}"))
        .arg(format!("--webhook-cert-dir={}", dir.path().display()))
        .arg("--webhook-host=127.0.0.1")
        .arg(format!("--webhook-port={webhook_port}"))
        .env("KUBECONFIG", env.kubeconfig_path())
        .env("POD_NAMESPACE", "default")
        .env("HOSTNAME", "capmox-test-pod")
        .env("PROXMOX_URL", sim.url())
        .env("PROXMOX_TOKEN", sim.token_id())
        .env("PROXMOX_SECRET", sim.token_secret())
        .env_remove("PROXMOX_INSECURE")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();

    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let ready_body = loop {
        if let Some(status) = child.try_wait().unwrap() {
            panic!(
                "capmox exited early with {status}:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        if let Ok(resp) = http
            .get(format!("http://127.0.0.1:{health_port}/readyz"))
            .send()
            .await
            && resp.status() == 200
        {
            let body = resp.text().await.unwrap();
            if body.contains("leader: true") && body.contains("reachable (version") {
                break body;
            }
        }
        assert!(
            Instant::now() < deadline,
            "capmox did not become ready:\n{}",
            std::fs::read_to_string(&log_path).unwrap_or_default()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(!ready_body.contains(sim.token_secret()));
    assert!(ready_body.contains("webhooks: serving"), "{ready_body}");
    // The webhook server answers over HTTPS with the mounted certificate.
    let ca = reqwest::Certificate::from_pem(certs.ca_pem.as_bytes()).unwrap();
    let tls = reqwest::Client::builder()
        .tls_certs_only([ca])
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let review = tls
        .post(format!("https://127.0.0.1:{webhook_port}/convert"))
        .json(&serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "u", "desiredAPIVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "objects": []},
        }))
        .send()
        .await
        .unwrap();
    assert_eq!(review.status(), 200);
    // `--insecure-diagnostics=false` (capmox's default): HTTPS with a self-signed certificate,
    // a bearer token reviewed by the API server; anonymous callers are turned away.
    let diagnostics = reqwest::Client::builder()
        .danger_accept_invalid_certs(true)
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap();
    let anonymous = diagnostics
        .get(format!("https://127.0.0.1:{metrics_port}/metrics"))
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), 401);
    let metrics = diagnostics
        .get(format!("https://127.0.0.1:{metrics_port}/metrics"))
        .bearer_auth(env.admin_token())
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(metrics.contains("capmox_leader 1"), "{metrics}");
    // PROXMOX_INSECURE is unset: capmox's default (true) applies, and it is signalled.
    assert!(
        metrics.contains("capmox_proxmox_global_tls_insecure 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("capmox_proxmox_requests_total{endpoint=\"/version\",method=\"GET\",status=\"200\"}"),
        "{metrics}"
    );

    let leases: Api<Lease> = Api::namespaced(env.client(), "default");
    let holder = leases
        .get("controller-leader-elect-capmox")
        .await
        .unwrap()
        .spec
        .and_then(|s| s.holder_identity)
        .unwrap_or_default();
    assert!(holder.starts_with("capmox-test-pod_"), "{holder}");

    let status = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let exit = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!(
                "capmox did not stop on SIGTERM:\n{}",
                std::fs::read_to_string(&log_path).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let logs = std::fs::read_to_string(&log_path).unwrap();
    assert!(exit.success(), "exit {exit}:\n{logs}");
    assert!(logs.contains("SIGTERM received"), "{logs}");
    assert!(
        logs.contains("TLS certificate verification of the global Proxmox client is disabled"),
        "{logs}"
    );
    assert!(logs.contains("released the leader Lease"), "{logs}");
    assert!(!logs.contains(sim.token_secret()), "secret leaked into the logs");
    assert!(
        !logs.contains('\u{1b}'),
        "ANSI colour codes in a log file:\n{logs}"
    );
    let after = leases.get("controller-leader-elect-capmox").await.unwrap();
    let spec = after.spec.unwrap();
    assert!(spec.holder_identity.unwrap_or_default().is_empty());
    assert_eq!(spec.lease_duration_seconds, Some(1));
    sim.shutdown().await;
}

#[tokio::test]
async fn binary_exits_non_zero_with_json_logs_when_crds_are_missing() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    let output = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_capmox"))
            .args([
                "--log-format=json",
                "--crd-wait-timeout=1s",
                "--enable-webhooks=false",
                "--health-probe-bind-address=0",
                "--diagnostics-address=0",
            ])
            .env("KUBECONFIG", env.kubeconfig_path())
            .env_remove("RUST_LOG")
            .env_remove("PROXMOX_URL")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output(),
    )
    .await
    .expect("capmox did not give up waiting for CRDs")
    .unwrap();
    let logs = String::from_utf8(output.stderr).unwrap();
    assert_eq!(output.status.code(), Some(1), "{logs}");
    assert!(
        !logs.contains('\u{1b}'),
        "JSON logs carry no ANSI escape codes: {logs:?}"
    );
    let lines: Vec<serde_json::Value> = logs
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    let failure = lines
        .iter()
        .find(|l| l["level"] == "ERROR" && l["message"] == "manager failed")
        .unwrap_or_else(|| panic!("no error line in {logs}"));
    let error = failure["error"].as_str().unwrap();
    assert!(
        error.contains("proxmoxclusters.infrastructure.cluster.x-k8s.io") && error.contains("not served"),
        "{error}"
    );
}
