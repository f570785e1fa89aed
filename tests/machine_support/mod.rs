//! Harness for the ProxmoxMachine controller tests: the in-tree control plane (with its garbage
//! collector) holding our CRDs and the CAPI/IPAM CRDs, pve-sim, both controllers in-process, and
//! the core-CAPI and in-cluster-IPAM stand-ins. `restart_controllers` kills and restarts the
//! controllers (a crash: in-flight work is dropped, nothing is shut down gracefully).
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use capmox::cluster::ClusterSettings;
use capmox::context::{Context, ControllerSettings};
use capmox::credentials::ProxmoxClients;
use capmox::machine::MachineSettings;
use capmox::metrics::Metrics;
use capmox_api::capi::v1beta2;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_standins::capi::objects;
use capmox_standins::{CapiStandIn, InClusterIpamStandIn, StandInHandle};
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::ResourceExt;
use kube::api::{Api, DeleteParams, PostParams};
use serde_json::json;
use testenv::{TestEnv, TestEnvOptions};

pub mod restore;

/// Namespace every test object lives in.
pub const NS: &str = "machines";

/// A small cloud-config for bootstrap secrets.
pub const CLOUD_CONFIG: &str = "#cloud-config\nruncmd:\n  - echo hello\n";

/// Fast machine-controller timings for tests.
pub fn fast_machine_settings() -> MachineSettings {
    MachineSettings {
        concurrency: None,
        task_poll_initial: Duration::from_millis(50),
        task_poll_max: Duration::from_millis(300),
        observe_interval: Duration::from_millis(50),
        retry_delay: Duration::from_millis(500),
        agent_timeout: Duration::from_secs(600),
        cloud_init_timeout: Duration::from_secs(600),
        guest_poll: Duration::from_millis(100),
        exec_poll_window: Duration::from_millis(500),
        resync: Duration::from_secs(2),
    }
}

fn fast_cluster_settings() -> ClusterSettings {
    ClusterSettings {
        concurrency: None,
        resync: Duration::from_secs(2),
        machine_wait: Duration::from_millis(300),
        backoff_base: Duration::from_millis(200),
        backoff_cap: Duration::from_secs(1),
        inventory_interval: Duration::from_secs(5),
    }
}

/// Running controllers (spawned tasks; aborting them is a crash).
struct Controllers {
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Controllers {
    fn start(ctx: &Arc<Context>) -> Self {
        let never = || std::future::pending::<()>();
        Self {
            tasks: vec![
                tokio::spawn(capmox::controllers::cluster::run(ctx.clone(), never())),
                tokio::spawn(capmox::controllers::machine::run(ctx.clone(), never())),
            ],
        }
    }

    async fn kill(self) {
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Control plane, simulator, controllers and stand-ins.
pub struct Harness {
    pub env: TestEnv,
    pub client: kube::Client,
    pub sim: pve_sim::SimServer,
    pub metrics: Arc<Metrics>,
    settings: MachineSettings,
    /// Whether the controllers get a global Proxmox client (else each ProxmoxCluster's Secret).
    global_credentials: bool,
    controllers: Option<Controllers>,
    standins: Vec<StandInHandle>,
}

impl Harness {
    /// Starts everything with the default simulator scenario and fast settings.
    pub async fn start() -> Self {
        Self::start_with(pve_sim::SimConfig::default(), fast_machine_settings()).await
    }

    /// Starts everything with the given simulator configuration and machine settings.
    pub async fn start_with(sim_config: pve_sim::SimConfig, settings: MachineSettings) -> Self {
        Self::start_inner(sim_config, settings, true).await
    }

    /// Like [`Harness::start`], but without the in-tree server's garbage collector, as the real
    /// kube-apiserver runs (no kube-controller-manager): a test plays the collector itself where
    /// it wants its effect, so it behaves the same in both modes.
    pub async fn start_without_gc() -> Self {
        Self::start_opts(
            pve_sim::SimConfig::default(),
            fast_machine_settings(),
            true,
            false,
        )
        .await
    }

    /// Like [`Harness::start_with`], but without global Proxmox credentials: every ProxmoxCluster
    /// needs a `credentialsRef` Secret (see [`Harness::create_credentials_secret`]).
    pub async fn start_with_secret_credentials(
        sim_config: pve_sim::SimConfig,
        settings: MachineSettings,
    ) -> Self {
        Self::start_inner(sim_config, settings, false).await
    }

    async fn start_inner(
        sim_config: pve_sim::SimConfig,
        settings: MachineSettings,
        global_credentials: bool,
    ) -> Self {
        Self::start_opts(sim_config, settings, global_credentials, true).await
    }

    async fn start_opts(
        sim_config: pve_sim::SimConfig,
        settings: MachineSettings,
        global_credentials: bool,
        garbage_collector: bool,
    ) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        // `CAPMOX_TEST_LOG=capmox=debug` shows the controllers' logs of a failing test.
        if let Ok(filter) = std::env::var("CAPMOX_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        let mut opts = TestEnvOptions::default();
        opts.server.garbage_collector = garbage_collector;
        let env = TestEnv::start_with(opts).await.expect("control plane starts");
        let client = env.client();
        let mut crds = capmox_api::crd::all().unwrap();
        crds.extend(capmox_standins::crds::all().unwrap());
        env.install_crds(crds).await.unwrap();
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let sim = pve_sim::SimServer::start(sim_config).await.unwrap();
        let metrics = Arc::new(Metrics::new());
        let standins = vec![
            InClusterIpamStandIn::spawn(client.clone(), Some(NS.into())),
            CapiStandIn::spawn(client.clone(), Some(NS.into())),
        ];
        let mut h = Self {
            env,
            client,
            sim,
            metrics,
            settings,
            global_credentials,
            controllers: None,
            standins,
        };
        h.controllers = Some(Controllers::start(&h.context()));
        h
    }

    /// A fresh controller context (new Proxmox client, as after a process restart).
    pub fn context(&self) -> Arc<Context> {
        let cfg = capmox::proxmox::ClientConfig::new(
            self.sim.url(),
            capmox::proxmox::Credentials::token(self.sim.token_id(), self.sim.token_secret()),
        )
        .with_ca_pem(self.sim.ca_pem().unwrap());
        let global = capmox::proxmox::Client::with_observer(cfg, self.metrics.proxmox_observer()).unwrap();
        Arc::new(Context::new(
            self.client.clone(),
            self.metrics.clone(),
            ControllerSettings {
                namespace: None,
                concurrency: 4,
                cluster: fast_cluster_settings(),
                machine: self.settings.clone(),
                ..ControllerSettings::default()
            },
            Arc::new(ProxmoxClients::new(
                self.global_credentials.then_some(global),
                self.metrics.proxmox_observer(),
            )),
        ))
    }

    /// Kills the controllers (no graceful shutdown).
    pub async fn kill_controllers(&mut self) {
        if let Some(c) = self.controllers.take() {
            c.kill().await;
        }
    }

    /// Whether the controllers run (none of their tasks ended: no panic, no unexpected return).
    pub fn controllers_alive(&self) -> bool {
        self.controllers
            .as_ref()
            .is_some_and(|c| c.tasks.iter().all(|t| !t.is_finished()))
    }

    /// Starts the controllers again with a fresh context.
    pub fn start_controllers(&mut self) {
        if self.controllers.is_none() {
            self.controllers = Some(Controllers::start(&self.context()));
        }
    }

    /// Stops everything.
    pub async fn stop(mut self) {
        self.kill_controllers().await;
        for s in self.standins.drain(..) {
            s.stop().await;
        }
        self.sim.shutdown().await;
    }

    pub fn pms(&self) -> Api<ProxmoxMachine> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn pcs(&self) -> Api<ProxmoxCluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn machines(&self) -> Api<v1beta2::Machine> {
        Api::namespaced(self.client.clone(), NS)
    }

    pub fn clusters(&self) -> Api<v1beta2::Cluster> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates (or replaces the data of) a credentials Secret for the simulator with the token
    /// secret `token_secret` (TLS verified against the simulator's CA).
    pub async fn create_credentials_secret(&self, name: &str, token_secret: &str) {
        self.create_credentials_secret_for(&self.sim, name, token_secret)
            .await
    }

    /// Like [`Harness::create_credentials_secret`], for another simulator `sim`.
    pub async fn create_credentials_secret_for(
        &self,
        sim: &pve_sim::SimServer,
        name: &str,
        token_secret: &str,
    ) {
        let api = Api::<Secret>::namespaced(self.client.clone(), NS);
        let ca = sim.ca_pem().unwrap();
        let url = sim.url();
        let data: std::collections::BTreeMap<String, k8s_openapi::ByteString> = [
            ("url", url.as_str()),
            ("token", sim.token_id()),
            ("secret", token_secret),
            ("insecure", "false"),
            ("root_ca", ca.as_str()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), k8s_openapi::ByteString(v.as_bytes().to_vec())))
        .collect();
        let mut secret: Secret =
            serde_json::from_value(json!({"metadata": {"name": name, "namespace": NS}})).unwrap();
        secret.data = Some(data);
        if api.get_opt(name).await.unwrap().is_some() {
            let body = json!({"data": serde_json::to_value(&secret).unwrap()["data"].clone()});
            api.patch(
                name,
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(body),
            )
            .await
            .unwrap();
        } else {
            api.create(&PostParams::default(), &secret).await.unwrap();
        }
    }

    /// Creates a Cluster and its ProxmoxCluster (`extra` is merged into the default spec).
    pub async fn create_cluster(&self, name: &str, extra: serde_json::Value) -> ProxmoxCluster {
        let cluster = self
            .clusters()
            .create(&PostParams::default(), &objects::cluster(NS, name, name))
            .await
            .unwrap();
        let mut spec = json!({
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"},
            "controlPlaneEndpoint": {"host": "10.10.10.5", "port": 6443},
        });
        merge(&mut spec, extra);
        let mut pc: ProxmoxCluster = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxCluster",
            "metadata": {"name": name, "namespace": NS},
            "spec": spec,
        }))
        .unwrap();
        objects::set_cluster_owner(&mut pc.metadata, &cluster);
        self.pcs().create(&PostParams::default(), &pc).await.unwrap()
    }

    /// Creates a bootstrap Secret, a Machine and its ProxmoxMachine (`spec` merged into a default
    /// spec cloning template 100 from pve1). `bootstrap = None` leaves the Machine without data.
    pub async fn create_machine(
        &self,
        cluster: &str,
        name: &str,
        control_plane: bool,
        bootstrap: Option<(&str, Option<&str>)>,
        spec: serde_json::Value,
    ) -> ProxmoxMachine {
        let secret_name = format!("{name}-bootstrap");
        if let Some((value, format)) = bootstrap {
            Api::<Secret>::namespaced(self.client.clone(), NS)
                .create(
                    &PostParams::default(),
                    &objects::bootstrap_secret(NS, &secret_name, value, format),
                )
                .await
                .unwrap();
        }
        let machine = objects::machine(
            NS,
            name,
            cluster,
            control_plane,
            bootstrap.map(|_| secret_name.as_str()),
            name,
            "v1.33.0",
        );
        let machine = self
            .machines()
            .create(&PostParams::default(), &machine)
            .await
            .unwrap();
        let mut full = default_machine_spec();
        merge(&mut full, spec);
        let mut pm: ProxmoxMachine = serde_json::from_value(json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
            "kind": "ProxmoxMachine",
            "metadata": {"name": name, "namespace": NS},
            "spec": full,
        }))
        .unwrap();
        objects::set_machine_owner(&mut pm.metadata, &machine);
        self.pms().create(&PostParams::default(), &pm).await.unwrap()
    }

    /// Waits until the ProxmoxMachine satisfies `pred`.
    pub async fn wait_pm(
        &self,
        name: &str,
        secs: u64,
        what: &str,
        pred: impl Fn(&ProxmoxMachine) -> bool,
    ) -> ProxmoxMachine {
        let api = self.pms();
        testenv::wait_for_explained(
            secs,
            Duration::from_millis(50),
            &format!("{name}: {what}"),
            || {
                let api = api.clone();
                let pred = &pred;
                async move {
                    let pm = api.get_opt(name).await.unwrap()?;
                    pred(&pm).then_some(pm)
                }
            },
            || self.where_it_stands(name),
        )
        .await
    }

    /// Where a machine stands (for the message of a timed-out wait): the ProxmoxMachine's status
    /// and the status of every ProxmoxCluster.
    pub async fn where_it_stands(&self, name: &str) -> String {
        let pm = self.pms().get_opt(name).await.ok().flatten();
        let pm_status = pm.map(|pm| serde_json::to_string(&pm.status).unwrap_or_default());
        let pcs = self.pcs().list(&Default::default()).await.map(|l| {
            l.items
                .iter()
                .map(|pc| {
                    let mut status = serde_json::to_value(&pc.status).unwrap_or_default();
                    if let Some(s) = status.as_object_mut() {
                        s.remove("nodeLocations");
                    }
                    format!("{}: {status}", pc.name_any())
                })
                .collect::<Vec<_>>()
        });
        format!("ProxmoxMachine status {pm_status:?}; ProxmoxClusters (without nodeLocations) {pcs:?}")
    }

    /// Waits until the machine is provisioned.
    pub async fn wait_provisioned(&self, name: &str, secs: u64) -> ProxmoxMachine {
        self.wait_pm(name, secs, "provisioned", |pm| pm.is_provisioned())
            .await
    }

    /// Waits until `VirtualMachineProvisioned` has `reason`.
    pub async fn wait_reason(&self, name: &str, reason: &str, secs: u64) -> ProxmoxMachine {
        self.wait_pm(name, secs, &format!("reason {reason}"), |pm| {
            reason_of(pm).as_deref() == Some(reason)
        })
        .await
    }

    /// Deletes a Machine (the CAPI stand-in deletes its ProxmoxMachine) and waits until both are gone.
    pub async fn delete_machine(&self, name: &str, secs: u64) {
        self.machines()
            .delete(name, &DeleteParams::default())
            .await
            .unwrap();
        let (pms, machines) = (self.pms(), self.machines());
        wait_for(secs, &format!("{name} deleted"), || {
            let (pms, machines) = (pms.clone(), machines.clone());
            async move {
                let gone = pms.get_opt(name).await.unwrap().is_none()
                    && machines.get_opt(name).await.unwrap().is_none();
                gone.then_some(())
            }
        })
        .await;
    }

    /// What is left once deletion has settled: [`Self::leftovers`] again until nothing is left or
    /// 30 s passed. A deleted machine is gone before its IPAddressClaims are: each carries the IPAM
    /// provider's finalizer until the provider releases its address.
    pub async fn settled_leftovers(&self) -> (Vec<u32>, Vec<String>, usize) {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let left = self.leftovers().await;
            let clean = left.0.is_empty() && left.1.is_empty() && left.2 == 0;
            if clean || std::time::Instant::now() > deadline {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// VMs (non-template), ISO files and IPAM objects left behind.
    pub async fn leftovers(&self) -> (Vec<u32>, Vec<String>, usize) {
        let vms = self.sim.state().non_template_vmids();
        let isos: Vec<String> = self
            .sim
            .state()
            .file_volumes()
            .into_iter()
            .filter(|v| v.volid.contains("user-data-"))
            .map(|v| v.volid)
            .collect();
        let claims = Api::<capmox_api::capi::ipam_claims::v1beta2::IPAddressClaim>::namespaced(
            self.client.clone(),
            NS,
        )
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .len();
        let addresses =
            Api::<capmox_api::capi::ipam_claims::v1beta2::IPAddress>::namespaced(self.client.clone(), NS)
                .list(&Default::default())
                .await
                .unwrap()
                .items
                .len();
        (vms, isos, claims + addresses)
    }
}

/// The default machine spec: template 100 on pve1, 2×2 CPUs, 2 GiB, 20 GB disk, net0 on the
/// default IPv4 pool.
pub fn default_machine_spec() -> serde_json::Value {
    json!({
        "sourceNode": "pve1",
        "templateID": 100,
        "numSockets": 2,
        "numCores": 2,
        "memoryMiB": 2048,
        "disks": {"bootVolume": {"disk": "scsi0", "sizeGb": 20}},
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "model": "virtio", "defaultIPv4": true}]},
    })
}

/// The `VirtualMachineProvisioned` reason.
pub fn reason_of(pm: &ProxmoxMachine) -> Option<String> {
    pm.condition("VirtualMachineProvisioned")
        .map(|c| c.reason.clone())
}

/// Merges `extra` into `base` (objects recursively, everything else replaced; `null` removes).
pub fn merge(base: &mut serde_json::Value, extra: serde_json::Value) {
    match (base, extra) {
        (serde_json::Value::Object(b), serde_json::Value::Object(e)) => {
            for (k, v) in e {
                if v.is_null() {
                    b.remove(&k);
                } else {
                    merge(b.entry(k).or_insert(serde_json::Value::Null), v);
                }
            }
        }
        (b, e) => *b = e,
    }
}

/// Polls `f` until it returns `Some`, failing after `secs` seconds.
#[allow(unused_imports)]
pub use testenv::wait_for;

/// Name helper for readability in tests.
pub fn name_of(pm: &ProxmoxMachine) -> String {
    pm.name_any()
}
