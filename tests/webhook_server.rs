//! The webhook server itself: it answers at exactly the paths of the webhook table; a
//! ConversionReview it cannot convert is a `Failure` review (never a 500); the serving
//! certificate is re-read when cert-manager rotates it (the secret volume's `..data` symlink
//! swap), and a half-written rotation keeps the old one; `--tls-min-version` and
//! `--tls-cipher-suites` are enforced; the binary with `--enable-webhooks=false` serves nothing on
//! the webhook port and refuses to start without a certificate otherwise.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod webhook_support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use capmox::webhooks::{TlsSettings, TlsVersion, WebhookOptions, WebhookServer};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};

fn roots(cas: &[&str]) -> rustls::RootCertStore {
    let mut roots = rustls::RootCertStore::empty();
    for ca in cas {
        for c in CertificateDer::pem_slice_iter(ca.as_bytes()) {
            roots.add(c.unwrap()).unwrap();
        }
    }
    roots
}

/// A TLS handshake with `addr` trusting `cas`; the server's leaf certificate and cipher suite.
async fn handshake(
    addr: SocketAddr,
    cas: &[&str],
    versions: &[&'static rustls::SupportedProtocolVersion],
    suites: Option<&[rustls::CipherSuite]>,
) -> Result<(CertificateDer<'static>, rustls::CipherSuite), String> {
    let mut provider = rustls::crypto::ring::default_provider();
    if let Some(s) = suites {
        provider.cipher_suites.retain(|x| s.contains(&x.suite()));
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots(cas))
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr)
        .await
        .map_err(|e| e.to_string())?;
    let tls = tokio_rustls::TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
        .await
        .map_err(|e| e.to_string())?;
    let (_, conn) = tls.get_ref();
    let leaf = conn.peer_certificates().unwrap()[0].clone().into_owned();
    Ok((leaf, conn.negotiated_cipher_suite().unwrap().suite()))
}

fn leaf_of(pem: &str) -> CertificateDer<'static> {
    CertificateDer::pem_slice_iter(pem.as_bytes())
        .next()
        .unwrap()
        .unwrap()
}

async fn serve(opts: WebhookOptions) -> (SocketAddr, tokio::sync::oneshot::Sender<()>) {
    let server = WebhookServer::bind(&opts).await.unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.serve(|| {}, async move {
        let _ = stopped.await;
    }));
    (addr, stop)
}

async fn post(base: &str, ca: &str, path: &str, body: Vec<u8>) -> (u16, Value) {
    let client = reqwest::Client::builder()
        .tls_certs_only([reqwest::Certificate::from_pem(ca.as_bytes()).unwrap()])
        .build()
        .unwrap();
    let resp = client
        .post(format!("{base}{path}"))
        .header("content-type", "application/json")
        .body(body)
        .send()
        .await
        .unwrap();
    let code = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (code, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

#[tokio::test]
async fn serves_exactly_the_table_and_fails_conversions_cleanly() {
    let hooks = webhook_support::start().await;
    let (base, ca) = (hooks.base_url.clone(), hooks.ca_pem.clone());
    for path in capmox_api::webhook::served_paths() {
        let (code, body) = post(&base, &ca, &path, b"{}".to_vec()).await;
        assert!(code == 200 || code == 400, "{path}: {code} {body}");
        let expected_kind = if path == "/convert" {
            "ConversionReview"
        } else {
            "AdmissionReview"
        };
        assert_eq!(body["kind"], expected_kind, "{path}: {body}");
    }
    let (code, _) = post(
        &base,
        &ca,
        "/validate-infrastructure-cluster-x-k8s-io-v1alpha1-proxmoxmachine",
        b"{}".to_vec(),
    )
    .await;
    assert_eq!(code, 404);

    let good = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxMachine",
        "metadata": {"name": "ok", "namespace": "ns"}, "spec": {"sourceNode": "pve1", "templateID": 100}});
    let bad = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxMachine",
        "metadata": {"name": "broken", "namespace": "ns"}, "spec": {"numCores": "many"}});
    let review = |objects: Vec<Value>| {
        serde_json::to_vec(&json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
            "request": {"uid": "r-7", "desiredAPIVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "objects": objects}}))
        .unwrap()
    };
    let (code, body) = post(&base, &ca, "/convert", review(vec![good.clone(), bad])).await;
    assert_eq!(code, 200);
    let resp = &body["response"];
    assert_eq!(resp["uid"], "r-7");
    assert_eq!(resp["result"]["status"], "Failure");
    assert_eq!(resp["convertedObjects"], json!([]), "never a partial list");
    let message = resp["result"]["message"].as_str().unwrap();
    assert!(
        message.starts_with("cannot convert ProxmoxMachine ns/broken (object 2 of 2) to infrastructure.cluster.x-k8s.io/v1alpha2: "),
        "{message}"
    );
    let (code, body) = post(&base, &ca, "/convert", review(vec![good])).await;
    assert_eq!(code, 200);
    assert_eq!(body["response"]["result"]["status"], "Success");
    assert_eq!(
        body["response"]["convertedObjects"][0]["spec"]["network"]["networkDevices"][0]["bridge"],
        "vmbr0"
    );
    let (code, body) = post(&base, &ca, "/convert", b"not json".to_vec()).await;
    assert_eq!(code, 400);
    assert_eq!(body["response"]["result"]["status"], "Failure");
}

/// Lays `tls.crt`/`tls.key` out the way a Kubernetes secret volume does: real files in a
/// timestamped directory, `..data` pointing at it, the names pointing through `..data`.
fn write_secret_volume(dir: &Path, generation: u32, cert: &str, key: &str) {
    let real = dir.join(format!("..2026_01_01_00_00_0{generation}"));
    std::fs::create_dir_all(&real).unwrap();
    std::fs::write(real.join("tls.crt"), cert).unwrap();
    std::fs::write(real.join("tls.key"), key).unwrap();
    let tmp = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&tmp);
    std::os::unix::fs::symlink(real.file_name().unwrap(), &tmp).unwrap();
    std::fs::rename(&tmp, dir.join("..data")).unwrap();
    for f in ["tls.crt", "tls.key"] {
        if std::fs::symlink_metadata(dir.join(f)).is_err() {
            std::os::unix::fs::symlink(Path::new("..data").join(f), dir.join(f)).unwrap();
        }
    }
}

#[tokio::test]
async fn certificate_rotation_is_picked_up_without_restart() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (
        testenv::certs::generate().unwrap(),
        testenv::certs::generate().unwrap(),
    );
    write_secret_volume(dir.path(), 1, &a.serving_pem, &a.serving_key_pem);
    let mut opts = WebhookOptions::new("127.0.0.1:0".parse().unwrap(), dir.path());
    opts.cert_check_interval = Duration::ZERO;
    let (addr, _stop) = serve(opts).await;
    let both = [a.ca_pem.as_str(), b.ca_pem.as_str()];
    let tls = [&rustls::version::TLS13, &rustls::version::TLS12];
    let (leaf, _) = handshake(addr, &both, &tls, None).await.unwrap();
    assert_eq!(leaf, leaf_of(&a.serving_pem));

    // cert-manager renews: the secret volume swaps `..data` to a new directory.
    write_secret_volume(dir.path(), 2, &b.serving_pem, &b.serving_key_pem);
    let b_leaf = leaf_of(&b.serving_pem);
    testenv::wait_for(10, "the rotated certificate to be served", || {
        let (both, b_leaf) = (both, b_leaf.clone());
        async move {
            let (leaf, _) = handshake(addr, &both, &tls, None).await.ok()?;
            (leaf == b_leaf).then_some(())
        }
    })
    .await;
    assert!(handshake(addr, &[b.ca_pem.as_str()], &tls, None).await.is_ok());
    let base = format!("https://{addr}");
    let (code, _) = post(&base, &b.ca_pem, "/convert", b"{}".to_vec()).await;
    assert_eq!(code, 400, "requests are served with the new certificate");

    // A rotation caught half-way (new certificate, old key) keeps the previous certificate.
    let c = testenv::certs::generate().unwrap();
    let real = std::fs::canonicalize(dir.path().join("tls.crt")).unwrap();
    std::fs::write(&real, &c.serving_pem).unwrap();
    let (leaf, _) = handshake(addr, &both, &tls, None).await.unwrap();
    assert_eq!(leaf, leaf_of(&b.serving_pem));
    std::fs::write(real.with_file_name("tls.key"), &c.serving_key_pem).unwrap();
    let all = [a.ca_pem.as_str(), b.ca_pem.as_str(), c.ca_pem.as_str()];
    let (leaf, _) = handshake(addr, &all, &tls, None).await.unwrap();
    assert_eq!(leaf, leaf_of(&c.serving_pem));
}

#[tokio::test]
async fn tls_min_version_and_cipher_suites_are_enforced() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let dir = tempfile::tempdir().unwrap();
    let ca = webhook_support::write_certs(dir.path());
    let cas = [ca.as_str()];
    let mut opts = WebhookOptions::new("127.0.0.1:0".parse().unwrap(), dir.path());
    opts.tls = TlsSettings {
        min_version: TlsVersion::Tls13,
        cipher_suites: Vec::new(),
    };
    let (tls13, _stop13) = serve(opts.clone()).await;
    assert!(
        handshake(tls13, &cas, &[&rustls::version::TLS12], None)
            .await
            .is_err()
    );
    assert!(
        handshake(tls13, &cas, &[&rustls::version::TLS13], None)
            .await
            .is_ok()
    );

    opts.tls = TlsSettings {
        min_version: TlsVersion::Tls12,
        cipher_suites: vec!["TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384".into()],
    };
    let (restricted, _stop) = serve(opts).await;
    let v12 = [&rustls::version::TLS12];
    let other = [rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256];
    assert!(handshake(restricted, &cas, &v12, Some(&other)).await.is_err());
    let (_, suite) = handshake(restricted, &cas, &v12, None).await.unwrap();
    assert_eq!(
        suite,
        rustls::CipherSuite::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
    );
    // TLS 1.3 suites are not configurable (as in Go).
    assert!(
        handshake(restricted, &cas, &[&rustls::version::TLS13], None)
            .await
            .is_ok()
    );
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[tokio::test]
async fn binary_with_webhooks_disabled_serves_nothing_and_without_certificate_refuses_to_start() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    env.install_crds(capmox_api::crd::all().unwrap()).await.unwrap();
    let (health, webhook) = (free_port(), free_port());
    let mut child = tokio::process::Command::new(env!("CARGO_BIN_EXE_capmox"))
        .args([
            "--enable-webhooks=false",
            "--diagnostics-address=0",
            "--webhook-host=127.0.0.1",
        ])
        .arg(format!("--webhook-port={webhook}"))
        .arg(format!("--health-probe-bind-address=127.0.0.1:{health}"))
        .env("KUBECONFIG", env.kubeconfig_path())
        .env_remove("PROXMOX_URL")
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let body = testenv::wait_for(60, "the manager to be ready", || {
        let http = http.clone();
        async move {
            let r = http
                .get(format!("http://127.0.0.1:{health}/readyz"))
                .send()
                .await
                .ok()?;
            (r.status() == 200).then_some(r.text().await.ok()?)
        }
    })
    .await;
    assert!(body.contains("webhooks: disabled"), "{body}");
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", webhook))
            .await
            .is_err(),
        "something listens on the webhook port"
    );
    child.kill().await.unwrap();

    // Enabled (the default) without a certificate: a clear error, exit 1.
    let empty = tempfile::tempdir().unwrap();
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new(env!("CARGO_BIN_EXE_capmox"))
            .args([
                "--diagnostics-address=0",
                "--health-probe-bind-address=0",
                "--webhook-port=0",
            ])
            .arg(format!("--webhook-cert-dir={}", empty.path().display()))
            .env("KUBECONFIG", env.kubeconfig_path())
            .env_remove("PROXMOX_URL")
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    let logs = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{logs}");
    assert!(
        logs.contains(&format!(
            "reading the webhook certificate {}/tls.crt",
            empty.path().display()
        )),
        "{logs}"
    );
}
