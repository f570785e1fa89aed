//! The real Cluster API core manager of one release (`../shared/tools/capi`), run as upstream
//! deploys it but on loopback: its CRDs with conversion through its own `/convert` (upstream adds
//! that with kustomize), its admission webhooks registered by URL, its serving certificate in a
//! cert dir.

use std::path::{Path, PathBuf};
use std::process::Command;

use base64::Engine;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceConversion, WebhookClientConfig, WebhookConversion,
};
use kube::api::{Api, PostParams};
use serde_json::{Value, json};
use testenv::TestEnv;

use super::objects::Capi;
use super::{Process, free_port};

/// What `../shared/tools/capi` provides for one release.
#[derive(Debug, Clone)]
pub struct CapiAssets {
    /// The unpacked manager binary.
    pub binary: PathBuf,
    /// `crd-<release>/`.
    pub crds: PathBuf,
    /// `webhook-<release>/manifests.yaml`.
    pub webhooks: PathBuf,
}

/// The assets of `capi`, or `None` after printing one line saying what is missing.
pub fn assets(shared: &Path, capi: Capi) -> Option<CapiAssets> {
    let dir = shared.join("tools/capi");
    let setup = dir.join("setup.sh");
    let crds = dir.join(format!("crd-{}", capi.release));
    let webhooks = dir.join(format!("webhook-{}/manifests.yaml", capi.release));
    for p in [&setup, &crds, &webhooks] {
        if !p.exists() {
            eprintln!("skipped: {} not found (the real CAPI core manager)", p.display());
            return None;
        }
    }
    let out = match Command::new(&setup).arg(capi.release).output() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("skipped: running {}: {e}", setup.display());
            return None;
        }
    };
    if !out.status.success() {
        eprintln!("skipped: {}", String::from_utf8_lossy(&out.stderr).trim());
        return None;
    }
    let binary = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    Some(CapiAssets {
        binary,
        crds,
        webhooks,
    })
}

/// A running CAPI core manager.
pub struct CapiManager {
    /// `https://127.0.0.1:<webhook port>`.
    pub base_url: String,
    /// The process (killed on drop).
    pub process: Process,
}

/// Installs the release's CRDs, every CRD with more than one version converting through the
/// manager's `/convert` at `base_url`.
pub async fn install_crds(env: &TestEnv, assets: &CapiAssets, base_url: &str, ca_pem: &str) {
    let mut crds = testenv::crds::read_crds(&assets.crds).expect("reading CAPI's CRDs");
    for crd in &mut crds {
        if crd.spec.versions.len() > 1 {
            crd.spec.conversion = Some(CustomResourceConversion {
                strategy: "Webhook".into(),
                webhook: Some(WebhookConversion {
                    client_config: Some(WebhookClientConfig {
                        url: Some(format!("{base_url}/convert")),
                        ca_bundle: Some(k8s_openapi::ByteString(ca_pem.as_bytes().to_vec())),
                        service: None,
                    }),
                    conversion_review_versions: vec!["v1".into(), "v1beta1".into()],
                }),
            });
        }
    }
    env.install_crds(crds).await.expect("installing CAPI's CRDs");
}

/// Starts the manager with its webhook server on loopback `port`, serving the certificate in
/// `cert_dir`; waits until the webhook port accepts connections.
pub async fn start(
    env: &TestEnv,
    assets: &CapiAssets,
    port: u16,
    cert_dir: &Path,
    logs: &Path,
) -> CapiManager {
    let mut cmd = Command::new(&assets.binary);
    cmd.arg("--kubeconfig")
        .arg(env.kubeconfig_path())
        .arg("--leader-elect=false")
        .arg("--webhook-cert-dir")
        .arg(cert_dir)
        .arg(format!("--webhook-port={port}"))
        .arg(format!("--health-addr=127.0.0.1:{}", free_port()))
        .arg(format!("--diagnostics-address=127.0.0.1:{}", free_port()))
        .arg("--insecure-diagnostics");
    let mut process = Process::spawn("capi-manager", cmd, logs);
    testenv::wait_for(120, "the CAPI manager's webhook server", || {
        let exited = process.exited();
        async move {
            if let Some(e) = exited {
                panic!("{e}");
            }
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        }
    })
    .await;
    CapiManager {
        base_url: format!("https://127.0.0.1:{port}"),
        process,
    }
}

/// Registers the release's own admission webhooks (`webhook-<release>/manifests.yaml`) with
/// `clientConfig.url` pointing at the manager, and waits until the API server calls them: a
/// dry-run Machine comes back with the `cluster.x-k8s.io/cluster-name` label CAPI's defaulting
/// webhook sets.
pub async fn register_webhooks(
    client: &kube::Client,
    assets: &CapiAssets,
    capi: Capi,
    base_url: &str,
    ca_pem: &str,
) {
    let text = std::fs::read_to_string(&assets.webhooks).expect("reading CAPI's webhook manifests");
    let ca = base64::engine::general_purpose::STANDARD.encode(ca_pem);
    for mut doc in testenv::crds::parse_documents(&text, "webhook manifests").expect("parsing them") {
        for w in doc["webhooks"].as_array_mut().into_iter().flatten() {
            let path = w["clientConfig"]["service"]["path"]
                .as_str()
                .unwrap_or_default()
                .to_owned();
            w["clientConfig"] = json!({"url": format!("{base_url}{path}"), "caBundle": ca});
        }
        match doc["kind"].as_str() {
            Some("MutatingWebhookConfiguration") => {
                let c: MutatingWebhookConfiguration = serde_json::from_value(doc).expect("a configuration");
                Api::<MutatingWebhookConfiguration>::all(client.clone())
                    .create(&PostParams::default(), &c)
                    .await
                    .expect("registering CAPI's mutating webhooks");
            }
            Some("ValidatingWebhookConfiguration") => {
                let c: ValidatingWebhookConfiguration = serde_json::from_value(doc).expect("a configuration");
                Api::<ValidatingWebhookConfiguration>::all(client.clone())
                    .create(&PostParams::default(), &c)
                    .await
                    .expect("registering CAPI's validating webhooks");
            }
            _ => {}
        }
    }
    let probe: kube::api::DynamicObject = serde_json::from_value(json!({
        "apiVersion": capi.api_version(), "kind": "Machine",
        "metadata": {"name": "webhook-probe", "namespace": "default"},
        "spec": {"clusterName": "probe", "bootstrap": {"dataSecretName": "probe"},
                 "infrastructureRef": if capi.v1beta1() {
                     json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine", "name": "probe"})
                 } else {
                     json!({"apiGroup": "infrastructure.cluster.x-k8s.io", "kind": "ProxmoxMachine", "name": "probe"})
                 }},
    }))
    .expect("a Machine");
    let machines = super::checks::api(client, "default", &capi.api_version(), "Machine");
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    testenv::wait_for(60, "CAPI's admission webhooks to take effect", || {
        let (machines, probe, dry) = (machines.clone(), probe.clone(), dry.clone());
        async move {
            let m = machines.create(&dry, &probe).await.ok()?;
            let labels = m.metadata.labels.unwrap_or_default();
            (labels.get("cluster.x-k8s.io/cluster-name").map(String::as_str) == Some("probe")).then_some(())
        }
    })
    .await;
}

/// `status.phase` of a CAPI object.
pub fn phase(obj: &Value) -> &str {
    obj.pointer("/status/phase").and_then(Value::as_str).unwrap_or("")
}
