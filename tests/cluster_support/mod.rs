//! Harness for the ProxmoxCluster controller tests: a control plane (testenv) with our CRDs plus
//! the CAPI Cluster and IPAM InClusterIPPool CRDs, pve-sim behind a switchable proxy, and the
//! controller running in-process.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

pub mod proxy;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use capmox::cluster::ClusterSettings;
use capmox::context::{Context, ControllerSettings};
use capmox::credentials::ProxmoxClients;
use capmox::metrics::Metrics;
use capmox_api::capi::v1beta2;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxClusterStatus};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use testenv::TestEnv;

/// Namespace every test object lives in.
pub const NS: &str = "capmox-test";

/// A running control plane, simulator, proxy and controller.
pub struct Harness {
    pub env: TestEnv,
    pub client: kube::Client,
    pub ctx: Arc<Context>,
    pub sim: pve_sim::SimServer,
    pub proxy: proxy::Proxy,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

fn shared_dir() -> PathBuf {
    std::env::var_os("CAPMOX_SHARED_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared"))
}

/// Fast timings so tests see backoff, resync and deletion waits within seconds.
pub fn fast_settings() -> ClusterSettings {
    ClusterSettings {
        concurrency: None,
        resync: Duration::from_millis(700),
        machine_wait: Duration::from_millis(300),
        backoff_base: Duration::from_millis(200),
        backoff_cap: Duration::from_secs(1),
        inventory_interval: Duration::from_millis(500),
    }
}

impl Harness {
    /// Starts everything without a global Proxmox client.
    pub async fn start() -> Self {
        Self::start_with(false).await
    }

    /// Starts everything; `global` gives the manager a global client to the simulator.
    pub async fn start_with(global: bool) -> Self {
        Self::start_opts(global, false).await
    }

    /// Starts everything; `capi_v1beta1_only` installs a CAPI v1.10 Cluster CRD (v1beta1 only)
    /// instead of the v1.12 one.
    pub async fn start_opts(global: bool, capi_v1beta1_only: bool) -> Self {
        Self::start_full(global, capi_v1beta1_only, IpamPoolCrd::V1_0).await
    }

    /// Starts the control plane, CRDs, namespace, simulator and proxy without a controller (for
    /// tests that run their own managers).
    pub async fn start_without_controller() -> Self {
        let mut h = Self::start_full(false, false, IpamPoolCrd::V1_0).await;
        if let Some(t) = h.task.take() {
            t.abort();
        }
        h.stop = None;
        h
    }

    /// Starts everything with the given in-cluster IPAM pool CRD.
    pub async fn start_with_ipam(ipam: IpamPoolCrd) -> Self {
        if let Ok(filter) = std::env::var("CAPMOX_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        Self::start_full(false, false, ipam).await
    }

    async fn start_full(global: bool, capi_v1beta1_only: bool, ipam: IpamPoolCrd) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let env = TestEnv::start().await.expect("control plane starts");
        let client = env.client();
        install_crds(&env, capi_v1beta1_only).await;
        env.install_crds(vec![ipam.crd()]).await.unwrap();
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let sim = pve_sim::SimServer::start(pve_sim::SimConfig::default())
            .await
            .unwrap();
        let proxy = proxy::Proxy::start(sim.addr()).await;
        let metrics = Arc::new(Metrics::new());
        let global_client = global.then(|| {
            let cfg = capmox::proxmox::ClientConfig::new(
                proxy.url(),
                capmox::proxmox::Credentials::token(sim.token_id(), sim.token_secret()),
            )
            .with_ca_pem(sim.ca_pem().unwrap());
            capmox::proxmox::Client::new(cfg).unwrap()
        });
        let settings = ControllerSettings {
            concurrency: 4,
            cluster: fast_settings(),
            ..ControllerSettings::default()
        };
        let ctx = Arc::new(Context::new(
            client.clone(),
            metrics.clone(),
            settings,
            Arc::new(ProxmoxClients::new(global_client, metrics.proxmox_observer())),
        ));
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(capmox::controllers::cluster::run(ctx.clone(), async move {
            let _ = rx.await;
        }));
        Self {
            env,
            client,
            ctx,
            sim,
            proxy,
            stop: Some(stop),
            task: Some(task),
        }
    }

    /// Stops the controller and waits for it to finish.
    pub async fn stop(mut self) {
        self.stop_controller().await;
    }

    /// Stops the controller (gracefully) and waits for it to finish; the control plane and the
    /// simulator keep running.
    pub async fn stop_controller(&mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.task.take() {
            tokio::time::timeout(Duration::from_secs(30), t)
                .await
                .expect("the controller stops on shutdown")
                .unwrap();
        }
    }

    pub fn pcs(&self) -> Api<ProxmoxCluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn clusters(&self) -> Api<v1beta2::Cluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates a credentials Secret pointing at the simulator through the proxy (TLS verified
    /// against the simulator's CA).
    pub async fn create_secret(&self, name: &str) -> Secret {
        let data = BTreeMap::from([
            ("url".to_owned(), self.proxy.url()),
            ("token".to_owned(), self.sim.token_id().to_owned()),
            ("secret".to_owned(), self.sim.token_secret().to_owned()),
            ("insecure".to_owned(), "false".to_owned()),
            ("root_ca".to_owned(), self.sim.ca_pem().unwrap()),
        ]);
        let s = Secret {
            metadata: kube::api::ObjectMeta {
                name: Some(name.into()),
                namespace: Some(NS.into()),
                ..Default::default()
            },
            data: Some(
                data.into_iter()
                    .map(|(k, v)| (k, ByteString(v.into_bytes())))
                    .collect(),
            ),
            ..Default::default()
        };
        self.secrets().create(&PostParams::default(), &s).await.unwrap()
    }

    /// Creates a v1beta2 Cluster referencing the ProxmoxCluster `name`.
    pub async fn create_cluster(&self, name: &str, paused: bool) -> v1beta2::Cluster {
        let mut c = v1beta2::Cluster::new(
            name,
            v1beta2::ClusterSpec {
                paused: paused.then_some(true),
                infrastructure_ref: Some(v1beta2::ContractVersionedObjectReference {
                    api_group: "infrastructure.cluster.x-k8s.io".into(),
                    kind: "ProxmoxCluster".into(),
                    name: name.into(),
                }),
                ..Default::default()
            },
        );
        c.metadata.namespace = Some(NS.into());
        self.clusters().create(&PostParams::default(), &c).await.unwrap()
    }

    /// Creates a ProxmoxCluster owned by `owner` from a JSON spec.
    pub async fn create_pc(
        &self,
        name: &str,
        owner: Option<&v1beta2::Cluster>,
        spec: serde_json::Value,
        annotations: serde_json::Value,
    ) -> ProxmoxCluster {
        let owners = owner
            .map(|c| {
                json!([{
                    "apiVersion": "cluster.x-k8s.io/v1beta2",
                    "kind": "Cluster",
                    "name": c.name_any(),
                    "uid": c.meta().uid.clone().unwrap(),
                    "controller": true,
                    "blockOwnerDeletion": true,
                }])
            })
            .unwrap_or(json!([]));
        let pc: ProxmoxCluster = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxCluster",
            "metadata": {
                "name": name,
                "namespace": NS,
                "labels": {"cluster.x-k8s.io/cluster-name": name},
                "annotations": annotations,
                "ownerReferences": owners,
            },
            "spec": spec,
        }))
        .unwrap();
        self.pcs().create(&PostParams::default(), &pc).await.unwrap()
    }

    /// Waits until the ProxmoxCluster's status satisfies `pred`.
    pub async fn wait_status(
        &self,
        name: &str,
        what: &str,
        pred: impl Fn(&ProxmoxClusterStatus) -> bool,
    ) -> ProxmoxCluster {
        let api = self.pcs();
        wait_for(30, what, || {
            let api = api.clone();
            let pred = &pred;
            async move {
                let pc = api.get_opt(name).await.unwrap()?;
                pred(pc.status.as_ref()?).then_some(pc)
            }
        })
        .await
    }

    /// Waits for `ProxmoxAvailable` with the given status and reason.
    pub async fn wait_available(&self, name: &str, status: &str, reason: &str) -> ProxmoxCluster {
        self.wait_status(name, &format!("ProxmoxAvailable={status}/{reason}"), |s| {
            cond(s, "ProxmoxAvailable").is_some_and(|c| c.status == status && c.reason == reason)
        })
        .await
    }

    /// The value of the connectivity gauge for a cluster, from the rendered metrics.
    pub fn connected_gauge(&self, name: &str) -> Option<i64> {
        let text = self.ctx.metrics.render();
        text.lines()
            .filter(|l| l.starts_with("capmox_proxmox_cluster_connected{"))
            .find(|l| l.contains(&format!("name=\"{name}\"")) && l.contains(&format!("namespace=\"{NS}\"")))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.trim().parse().ok())
    }
}

/// A condition of a status.
pub fn cond<'a>(s: &'a ProxmoxClusterStatus, type_: &str) -> Option<&'a Condition> {
    s.conditions.as_ref()?.iter().find(|c| c.type_ == type_)
}

/// A default ProxmoxCluster spec (one IPv4 pool) with an optional credentials Secret.
pub fn spec(secret: Option<&str>) -> serde_json::Value {
    let mut s = json!({
        "dnsServers": ["10.0.0.1"],
        "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"},
        "controlPlaneEndpoint": {"host": "10.10.10.5", "port": 6443},
    });
    if let Some(name) = secret {
        s["credentialsRef"] = json!({"name": name});
    }
    s
}

/// Polls `f` until it returns `Some`, failing after `secs` seconds.
#[allow(unused_imports)]
pub use testenv::wait_for;

/// Installs our CRDs and the CAPI Cluster CRD (from `../shared/compat` when present, otherwise
/// generated from our own small types).
async fn install_crds(env: &TestEnv, capi_v1beta1_only: bool) {
    env.install_crds(capmox_api::crd::all().unwrap()).await.unwrap();
    let shared = shared_dir();
    let release = if capi_v1beta1_only {
        "capi-v1.10"
    } else {
        "capi-v1.12"
    };
    let cluster = shared.join(format!("compat/{release}/cluster.x-k8s.io_clusters.yaml"));
    if cluster.exists() {
        env.install_crds_from_path(&cluster).await.unwrap();
    } else if capi_v1beta1_only {
        use kube::CustomResourceExt;
        env.install_crds(vec![capmox_api::capi::v1beta1::Cluster::crd()])
            .await
            .unwrap();
    } else {
        env.install_crds(vec![capmox_api::capi::cluster_crd().unwrap()])
            .await
            .unwrap();
    }
}

/// Which `inclusterippools.ipam.cluster.x-k8s.io` CRD a test runs against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IpamPoolCrd {
    /// In-cluster IPAM provider v1.0: no `spec.addressReuseGracePeriodSeconds`.
    V1_0,
    /// In-cluster IPAM provider v1.1: declares `spec.addressReuseGracePeriodSeconds`.
    V1_1,
    /// A broken CRD whose `spec` lacks `gateway`: every pool apply is refused by the server.
    WithoutGateway,
}

impl IpamPoolCrd {
    /// The CRD: the in-cluster IPAM CRD from `../shared/compat` (v1.0) when present, otherwise
    /// the one generated from our own types, with `spec` adjusted to the variant.
    pub fn crd(
        self,
    ) -> k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition {
        let path = shared_dir().join("compat/ipam-in-cluster/ipam.cluster.x-k8s.io_inclusterippools.yaml");
        let base = if path.exists() {
            testenv::crds::read_crds(&path).unwrap().remove(0)
        } else {
            capmox_api::capi::in_cluster_ip_pool_crd()
        };
        let mut v = serde_json::to_value(&base).unwrap();
        for version in v["spec"]["versions"].as_array_mut().unwrap() {
            if version["name"] != "v1alpha2" {
                continue;
            }
            let props = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]
                .as_object_mut()
                .unwrap();
            match self {
                Self::V1_0 => {
                    props.remove("addressReuseGracePeriodSeconds");
                }
                Self::V1_1 => {
                    props.insert(
                        "addressReuseGracePeriodSeconds".into(),
                        json!({"type": "integer", "format": "int64", "minimum": 0}),
                    );
                }
                Self::WithoutGateway => {
                    props.remove("gateway");
                }
            }
        }
        serde_json::from_value(v).unwrap()
    }
}
