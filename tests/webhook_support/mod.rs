//! The manager's webhook server started in-process on 127.0.0.1 with a throw-away CA, and its
//! registration with the test control plane by URL (`clientConfig.url` + `caBundle`): our CRDs
//! with `conversion.strategy: Webhook` and capmox's two admission configurations. Works on the
//! in-tree API server and on real kube-apiserver alike.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::time::Duration;

use capmox::webhooks::{WebhookOptions, WebhookServer};
use capmox_api::webhook::registration;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, ApiResource, DeleteParams, DynamicObject, PostParams};
use serde_json::{Value, json};
use testenv::TestEnv;
use tokio::sync::oneshot;

pub const GROUP: &str = "infrastructure.cluster.x-k8s.io";

/// A running webhook server.
pub struct Webhooks {
    /// `https://127.0.0.1:<port>`.
    pub base_url: String,
    /// The CA that signed the serving certificate (PEM).
    pub ca_pem: String,
    /// Directory holding `tls.crt` / `tls.key`.
    pub cert_dir: tempfile::TempDir,
    stop: Option<oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Drop for Webhooks {
    fn drop(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
    }
}

/// Writes a fresh CA-signed loopback certificate into `dir`; returns the CA (PEM).
pub fn write_certs(dir: &Path) -> String {
    let certs = testenv::certs::generate().unwrap();
    std::fs::write(dir.join("tls.crt"), &certs.serving_pem).unwrap();
    std::fs::write(dir.join("tls.key"), &certs.serving_key_pem).unwrap();
    certs.ca_pem
}

/// Starts the webhook server on a free loopback port.
pub async fn start() -> Webhooks {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let cert_dir = tempfile::tempdir().unwrap();
    let ca_pem = write_certs(cert_dir.path());
    let mut opts = WebhookOptions::new("127.0.0.1:0".parse().unwrap(), cert_dir.path());
    opts.cert_check_interval = Duration::ZERO;
    let server = WebhookServer::bind(&opts).await.unwrap();
    let base_url = format!("https://{}", server.local_addr());
    let (stop, stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(server.serve(|| {}, async move {
        let _ = stopped.await;
    }));
    Webhooks {
        base_url,
        ca_pem,
        cert_dir,
        stop: Some(stop),
        task: Some(task),
    }
}

/// Our CRDs with conversion by the webhook (creating or replacing them).
pub async fn install_crds(env: &TestEnv, hooks: &Webhooks) {
    let crds = registration::crds_with_conversion(&hooks.base_url, hooks.ca_pem.as_bytes()).unwrap();
    env.install_crds(crds).await.unwrap();
}

/// capmox's admission configurations pointing at `hooks`.
pub async fn install_admission(client: &kube::Client, hooks: &Webhooks) {
    let (m, v) = registration::admission_configurations(&hooks.base_url, hooks.ca_pem.as_bytes());
    let ms = Api::<MutatingWebhookConfiguration>::all(client.clone());
    let vs = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let _ = ms
        .delete(m.metadata.name.as_deref().unwrap(), &DeleteParams::default())
        .await;
    let _ = vs
        .delete(v.metadata.name.as_deref().unwrap(), &DeleteParams::default())
        .await;
    ms.create(&PostParams::default(), &m).await.unwrap();
    vs.create(&PostParams::default(), &v).await.unwrap();
}

/// Starts the server, registers conversion and admission, and waits until both are in effect.
pub async fn setup(env: &TestEnv) -> Webhooks {
    let hooks = start().await;
    install_crds(env, &hooks).await;
    install_admission(&env.client(), &hooks).await;
    wait_effective(&env.client()).await;
    hooks
}

/// ApiResource of `kind` at `version`.
pub fn ar(kind: &str, version: &str) -> ApiResource {
    let plural = format!("{}s", kind.to_ascii_lowercase());
    ApiResource {
        group: GROUP.into(),
        version: version.into(),
        api_version: format!("{GROUP}/{version}"),
        kind: kind.into(),
        plural,
    }
}

/// Api for `kind` at `version` in `ns`.
pub fn api(client: &kube::Client, ns: &str, kind: &str, version: &str) -> Api<DynamicObject> {
    Api::namespaced_with(client.clone(), ns, &ar(kind, version))
}

/// A fresh namespace.
pub async fn namespace(client: &kube::Client, prefix: &str) -> String {
    let name = format!("{prefix}-{:08x}", rand::random::<u32>());
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": name}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    name
}

/// Creates `obj` through the raw API (`POST`, optional `query`); returns the HTTP status, the
/// `Warning` headers and the body.
pub async fn create_raw(
    client: &kube::Client,
    ns: &str,
    kind: &str,
    version: &str,
    obj: &Value,
    query: &str,
) -> (u16, Vec<String>, Value) {
    use http_body_util::BodyExt;
    let plural = ar(kind, version).plural;
    let req = http::Request::post(format!("/apis/{GROUP}/{version}/namespaces/{ns}/{plural}{query}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(obj).unwrap())
        .unwrap();
    let resp = client.send(req.map(kube::client::Body::from)).await.unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, warnings, serde_json::from_slice(&body).unwrap())
}

/// Deep-merges `extra` into `base`; `null` removes a key.
pub fn merge(base: &mut Value, extra: Value) {
    match (base, extra) {
        (Value::Object(b), Value::Object(e)) => {
            for (k, v) in e {
                if v.is_null() {
                    b.remove(&k);
                } else {
                    merge(b.entry(k).or_insert(Value::Null), v);
                }
            }
        }
        (b, e) => *b = e,
    }
}

/// A dynamic object from JSON.
pub fn obj(v: Value) -> DynamicObject {
    serde_json::from_value(v).unwrap()
}

/// The API error of a failed call.
pub fn api_err<T: std::fmt::Debug>(r: Result<T, kube::Error>) -> Box<kube::core::Status> {
    match r {
        Err(kube::Error::Api(s)) => s,
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// API servers pick up webhook configuration and CRD changes asynchronously: waits until a
/// machine with a gap in its NIC names is denied by our validating webhook (dry run) and a
/// v1alpha2 machine reads through v1alpha1 with its network converted by `/convert`.
pub async fn wait_effective(client: &kube::Client) {
    let ns = namespace(client, "probe").await;
    let v2 = api(client, &ns, "ProxmoxMachine", "v1alpha2");
    let v1 = api(client, &ns, "ProxmoxMachine", "v1alpha1");
    let gap = obj(json!({
        "apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
        "metadata": {"name": "gap"},
        "spec": {"sourceNode": "pve1", "templateID": 100,
                 "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}, {"name": "net2", "bridge": "vmbr0"}]}},
    }));
    let dry = PostParams {
        dry_run: true,
        ..PostParams::default()
    };
    testenv::wait_for(60, "the admission webhooks to take effect", || {
        let v2 = v2.clone();
        let gap = gap.clone();
        let dry = dry.clone();
        async move {
            match v2.create(&dry, &gap).await {
                Err(kube::Error::Api(s)) if s.message.contains("Non-consecutive proxmox interface name") => {
                    Some(())
                }
                _ => None,
            }
        }
    })
    .await;
    let probe = obj(json!({
        "apiVersion": format!("{GROUP}/v1alpha2"), "kind": "ProxmoxMachine",
        "metadata": {"name": "probe"},
        "spec": {"sourceNode": "pve1", "templateID": 100,
                 "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr7"}]}},
    }));
    v2.create(&PostParams::default(), &probe).await.unwrap();
    testenv::wait_for(60, "conversion by webhook to take effect", || {
        let v1 = v1.clone();
        async move {
            let o = v1.get("probe").await.ok()?;
            (o.data["spec"]["network"]["default"]["bridge"] == "vmbr7").then_some(())
        }
    })
    .await;
    v2.delete("probe", &DeleteParams::default()).await.unwrap();
}
