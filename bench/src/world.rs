//! The Kubernetes side every bench and chaos run shares: our CRDs and the stand-ins' installed
//! on the control plane, the bench namespace, the core-CAPI and IPAM stand-ins, a watch-fed
//! store of ProxmoxMachines, and the objects a user creates (the Cluster with its
//! ProxmoxCluster, and per machine a bootstrap Secret, a Machine and a ProxmoxMachine).

use capmox_api::capi::v1beta2::{Cluster, Machine};
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_standins::StandIns;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use testenv::TestEnv;

use crate::objects::{self, NAMESPACE};
use crate::{BENCH_AGENT, BenchError};

/// The workload cluster's objects and the processes that play core CAPI and IPAM.
pub(crate) struct World {
    /// The bench's own client (User-Agent [`BENCH_AGENT`]).
    pub(crate) client: kube::Client,
    /// Every ProxmoxMachine of the bench namespace, from a watch.
    pub(crate) pms: Store<ProxmoxMachine>,
    watch: tokio::task::JoinHandle<()>,
    stand_ins: StandIns,
}

impl World {
    /// Installs the CRDs, creates the namespace and starts the stand-ins and the store.
    ///
    /// Every CRD of the release is installed, the `vm.capmox-rs.io` ones too, as an install
    /// does: without them the manager's VM controllers would wait for their kinds, and their
    /// discovery polls would be counted as the machines' requests.
    pub(crate) async fn start(env: &TestEnv) -> Result<Self, BenchError> {
        let mut crds = capmox_api::crd::generated().map_err(|e| BenchError::Manager(e.to_string()))?;
        crds.extend(capmox_standins::crds::all().map_err(|e| BenchError::Manager(e.to_string()))?);
        env.install_crds(crds).await?;
        let client = crate::manager::kube_client(env.kubeconfig_path(), BENCH_AGENT).await?;
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))?;
        Api::<Namespace>::all(client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .map_err(BenchError::kube("creating the namespace"))?;
        let stand_ins = StandIns::spawn(client.clone(), Some(NAMESPACE.to_owned()));
        let (pms, writer) = reflector::store::<ProxmoxMachine>();
        let stream = reflector::reflector(
            writer,
            watcher(
                Api::<ProxmoxMachine>::namespaced(client.clone(), NAMESPACE),
                watcher::Config::default(),
            ),
        )
        .default_backoff()
        .applied_objects();
        let watch = tokio::spawn(async move {
            let mut stream = std::pin::pin!(stream);
            while stream.next().await.is_some() {}
        });
        Ok(Self {
            client,
            pms,
            watch,
            stand_ins,
        })
    }

    /// A namespaced API of the bench namespace.
    pub(crate) fn api<K>(&self) -> Api<K>
    where
        K: kube::Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// Creates the Cluster and its ProxmoxCluster.
    pub(crate) async fn create_cluster(&self) -> Result<(), BenchError> {
        let cluster = self
            .api::<Cluster>()
            .create(&PostParams::default(), &objects::cluster())
            .await
            .map_err(BenchError::kube("creating the Cluster"))?;
        let mut pc = objects::proxmox_cluster()?;
        capmox_standins::capi::objects::set_cluster_owner(&mut pc.metadata, &cluster);
        self.api::<ProxmoxCluster>()
            .create(&PostParams::default(), &pc)
            .await
            .map_err(BenchError::kube("creating the ProxmoxCluster"))?;
        Ok(())
    }

    /// Creates machine `name`: its bootstrap Secret, Machine and ProxmoxMachine.
    pub(crate) async fn create_machine(&self, name: &str) -> Result<(), BenchError> {
        let pp = PostParams::default();
        self.api::<Secret>()
            .create(&pp, &objects::bootstrap_secret(name))
            .await
            .map_err(BenchError::kube(format!("creating Secret {name}")))?;
        let machine = self
            .api::<Machine>()
            .create(&pp, &objects::machine(name))
            .await
            .map_err(BenchError::kube(format!("creating Machine {name}")))?;
        self.api::<ProxmoxMachine>()
            .create(&pp, &objects::proxmox_machine(name, &machine)?)
            .await
            .map_err(BenchError::kube(format!("creating ProxmoxMachine {name}")))?;
        Ok(())
    }

    /// Stops the store and the stand-ins.
    pub(crate) async fn stop(self) {
        self.watch.abort();
        self.stand_ins.stop().await;
    }
}
