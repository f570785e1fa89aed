//! Harness for the ProxmoxVirtualMachine tests: the test control plane (in-tree, or the real
//! kube-apiserver with `KUBEBUILDER_ASSETS`) holding the VM CRD, pve-sim, and the VM controller
//! in-process with fast timings. `kill` / `start_controller` crash and restart it.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use capmox::context::{Context, ControllerSettings};
use capmox::credentials::ProxmoxClients;
use capmox::metrics::Metrics;
use capmox_api::vm::{ProxmoxVirtualMachine, VmPhase};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::TestEnv;

/// Namespace of the test objects.
pub const NS: &str = "vms";

/// Fast lifecycle timings for tests.
pub fn fast_settings() -> capmox::vm::Settings {
    capmox::vm::Settings {
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

/// Control plane, simulator and the VM controller.
pub struct Harness {
    pub env: TestEnv,
    pub client: kube::Client,
    pub sim: pve_sim::SimServer,
    pub metrics: Arc<Metrics>,
    settings: capmox::vm::Settings,
    controller: Option<tokio::task::JoinHandle<()>>,
    /// Also run the snapshot, restore and clone controllers (with the VM controller's context).
    ops: bool,
    op_controllers: Vec<tokio::task::JoinHandle<()>>,
}

impl Harness {
    /// Starts everything with the default scenario.
    pub async fn start() -> Self {
        Self::start_with(pve_sim::SimConfig::default(), fast_settings()).await
    }

    /// Starts everything with this simulator configuration and these timings.
    pub async fn start_with(sim_config: pve_sim::SimConfig, settings: capmox::vm::Settings) -> Self {
        Self::start_all(sim_config, settings, false).await
    }

    /// Starts everything, the snapshot, restore and clone controllers (and their CRDs) too.
    pub async fn start_ops(sim_config: pve_sim::SimConfig, settings: capmox::vm::Settings) -> Self {
        Self::start_all(sim_config, settings, true).await
    }

    async fn start_all(sim_config: pve_sim::SimConfig, settings: capmox::vm::Settings, ops: bool) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        if let Ok(filter) = std::env::var("CAPMOX_TEST_LOG") {
            let _ = tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::new(filter))
                .with_test_writer()
                .try_init();
        }
        let env = TestEnv::start().await.expect("control plane starts");
        let client = env.client();
        let mut crds = vec![capmox_api::crd::proxmox_virtual_machines().unwrap()];
        if ops {
            crds.extend(capmox_api::crd::vm_operations().unwrap());
        }
        env.install_crds(crds).await.unwrap();
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        let sim = pve_sim::SimServer::start(sim_config).await.unwrap();
        let mut h = Self {
            env,
            client,
            sim,
            metrics: Arc::new(Metrics::new()),
            settings,
            controller: None,
            ops,
            op_controllers: Vec::new(),
        };
        h.start_controller();
        h
    }

    /// A fresh controller context (a new Proxmox client, as after a process restart).
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
                cluster: Default::default(),
                machine: self.settings.clone(),
                ..Default::default()
            },
            Arc::new(ProxmoxClients::new(Some(global), self.metrics.proxmox_observer())),
        ))
    }

    /// Starts the controller (again) with a fresh context.
    pub fn start_controller(&mut self) {
        if self.controller.is_none() {
            use capmox::controllers::vm_operations::{clone, restore, snapshot};
            let ctx = self.context();
            if self.ops {
                let never = std::future::pending::<()>;
                self.op_controllers = vec![
                    tokio::spawn(snapshot::run(ctx.clone(), never())),
                    tokio::spawn(restore::run(ctx.clone(), never())),
                    tokio::spawn(clone::run(ctx.clone(), never())),
                ];
            }
            self.controller = Some(tokio::spawn(capmox::controllers::virtual_machine::run(
                ctx,
                std::future::pending::<()>(),
            )));
        }
    }

    /// Kills the controller (a crash: nothing is shut down gracefully).
    pub async fn kill(&mut self) {
        if let Some(t) = self.controller.take() {
            t.abort();
            let _ = t.await;
        }
        for t in std::mem::take(&mut self.op_controllers) {
            t.abort();
            let _ = t.await;
        }
    }

    /// Stops everything.
    pub async fn stop(mut self) {
        self.kill().await;
        self.sim.shutdown().await;
    }

    pub fn pvms(&self) -> Api<ProxmoxVirtualMachine> {
        Api::namespaced(self.client.clone(), NS)
    }

    /// Creates a ProxmoxVirtualMachine `name` with `spec`.
    pub async fn create(&self, name: &str, spec: Value) -> ProxmoxVirtualMachine {
        let obj: ProxmoxVirtualMachine = serde_json::from_value(json!({
            "apiVersion": capmox_api::vm::API_VERSION, "kind": capmox_api::vm::KIND,
            "metadata": {"name": name, "namespace": NS}, "spec": spec
        }))
        .unwrap();
        self.pvms().create(&PostParams::default(), &obj).await.unwrap()
    }

    /// Merge-patches `name` with `patch` (`Err`: the API server's refusal).
    pub async fn patch(&self, name: &str, patch: Value) -> Result<ProxmoxVirtualMachine, kube::Error> {
        self.pvms()
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
    }

    /// Waits until `name` satisfies `pred`.
    pub async fn wait(
        &self,
        name: &str,
        secs: u64,
        what: &str,
        pred: impl Fn(&ProxmoxVirtualMachine) -> bool,
    ) -> ProxmoxVirtualMachine {
        let api = self.pvms();
        let last = std::sync::Mutex::new(None::<ProxmoxVirtualMachine>);
        testenv::wait::wait_for_explained(
            secs,
            Duration::from_millis(50),
            &format!("{name}: {what}"),
            || async {
                let p = api.get_opt(name).await.ok().flatten()?;
                let ok = pred(&p);
                *last.lock().unwrap() = Some(p.clone());
                ok.then_some(p)
            },
            || async { format!("status: {:?}", last.lock().unwrap().as_ref().map(|p| &p.status)) },
        )
        .await
    }

    /// Waits until `name` is in `phase`.
    pub async fn wait_phase(&self, name: &str, phase: VmPhase, secs: u64) -> ProxmoxVirtualMachine {
        self.wait(name, secs, &format!("phase {phase:?}"), |p| {
            p.status.as_ref().and_then(|s| s.phase) == Some(phase)
        })
        .await
    }

    /// Waits until `name` is gone.
    pub async fn wait_gone(&self, name: &str, secs: u64) {
        let api = self.pvms();
        testenv::wait::wait_for(secs, &format!("{name} to be gone"), || async {
            api.get_opt(name).await.ok().flatten().is_none().then_some(())
        })
        .await;
    }
}

/// The status of a condition of `p` (`True`/`False`) and its message.
pub fn condition(p: &ProxmoxVirtualMachine, type_: &str) -> Option<(String, String)> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| (c.status.clone(), c.message.clone()))
}

impl Harness {
    /// A Proxmox client of the simulator (as an administrator would use it).
    pub fn proxmox(&self) -> capmox::proxmox::Client {
        let cfg = capmox::proxmox::ClientConfig::new(
            self.sim.url(),
            capmox::proxmox::Credentials::token(self.sim.token_id(), self.sim.token_secret()),
        )
        .with_ca_pem(self.sim.ca_pem().unwrap());
        capmox::proxmox::Client::new(cfg).unwrap()
    }

    /// Waits for task `upid` to end; returns its exit status.
    pub async fn task_done(&self, upid: &capmox::proxmox::Upid) -> String {
        let c = self.proxmox();
        testenv::wait::wait_for(30, "the task to end", || async {
            let s = c.task_status(upid).await.ok()?;
            s.is_finished().then(|| s.exitstatus.clone().unwrap_or_default())
        })
        .await
    }

    /// A VM nobody manages: template 100 cloned to `vmid` named `name`, started.
    pub async fn unmanaged_vm(&self, vmid: u32, name: &str) {
        let c = self.proxmox();
        let req = capmox::proxmox::types::CloneRequest {
            newid: vmid,
            name: Some(name.into()),
            ..Default::default()
        };
        let upid = c.clone_vm("pve1", 100, &req).await.unwrap();
        assert_eq!(self.task_done(&upid).await, "OK");
        let upid = c.start_vm("pve1", vmid, &Default::default()).await.unwrap();
        assert_eq!(self.task_done(&upid).await, "OK");
    }
}

impl Harness {
    /// Installs the IPAM CRDs (and the Cluster API kinds the stand-in looks at) and starts the
    /// in-cluster IPAM stand-in for [`NS`]; it stops when the handle is dropped.
    pub async fn start_ipam(&self) -> capmox_standins::StandInHandle {
        self.env
            .install_crds(capmox_standins::crds::all().unwrap())
            .await
            .unwrap();
        capmox_standins::InClusterIpamStandIn::spawn(self.client.clone(), Some(NS.into()))
    }

    /// The NoCloud ISO's `network-config` of VM `vmid` (`None`: no ISO yet).
    pub fn network_config(&self, vmid: u32) -> Option<String> {
        let st = self.sim.state();
        let vol = st
            .file_volumes()
            .into_iter()
            .find(|v| v.volid.ends_with(&format!("user-data-{vmid}.iso")))?;
        let iso = st.volume_bytes(&st.vm(vmid)?.node, &vol.volid)?;
        pve_sim::iso::read_file(&iso, "network-config")
    }
}

pub mod ops;
