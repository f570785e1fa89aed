//! The demo's steps once everything runs: create the cluster the way core CAPI would, watch the
//! machines being provisioned, delete the cluster, report leaks.

use std::io::Write;
use std::time::{Duration, Instant};

use capmox::manager::ManagerError;
use capmox_api::capi::v1beta2::{Cluster, Machine};
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_standins::capi;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube::{Resource, ResourceExt};
use tokio::task::JoinHandle;

use crate::objects::{self, CLUSTER, KUBERNETES_VERSION, MACHINES, NAMESPACE};
use crate::progress::{Printer, ReasonTracker, is_provisioned};
use crate::report::{self, MachineSummary, table};
use crate::{DemoError, DemoOptions, DemoReport};

/// Poll interval of the progress loops.
const POLL: Duration = Duration::from_millis(200);

/// The running pieces the steps use.
pub(crate) struct Demo<'a> {
    pub client: &'a kube::Client,
    pub sim: &'a pve_sim::SimServer,
    pub opts: &'a DemoOptions,
    pub manager: &'a JoinHandle<Result<(), ManagerError>>,
}

fn kube_err(action: impl Into<String>) -> impl FnOnce(kube::Error) -> DemoError {
    let action = action.into();
    move |source| DemoError::Kube { action, source }
}

async fn create<K>(api: &Api<K>, obj: &K) -> Result<K, DemoError>
where
    K: Resource<DynamicType = ()> + Clone + serde::Serialize + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.create(&PostParams::default(), obj)
        .await
        .map_err(kube_err(format!("creating {} {}", K::kind(&()), obj.name_any())))
}

impl Demo<'_> {
    fn api<K>(&self) -> Api<K>
    where
        K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>,
    {
        Api::namespaced(self.client.clone(), NAMESPACE)
    }

    /// Fails when the manager is gone (its error is in the task's result).
    fn check_manager(&self) -> Result<(), DemoError> {
        if self.manager.is_finished() {
            return Err(DemoError::ManagerStopped(
                "see the log above (run with --verbose for details)".to_owned(),
            ));
        }
        Ok(())
    }

    pub(crate) async fn run<W: Write>(&self, p: &mut Printer<W>) -> Result<DemoReport, DemoError> {
        let created = Instant::now();
        self.create_cluster(p).await?;
        let mut tracker = ReasonTracker::default();
        let machines = self.wait_provisioned(p, &mut tracker).await?;
        let provisioning = created.elapsed();
        p.line(format!(
            "all {} machines provisioned in {:.1}s",
            machines.len(),
            provisioning.as_secs_f64()
        ))?;
        p.raw(format!("\n{}\n", table(&machines)))?;

        let deleting = Instant::now();
        self.delete_cluster(p, &mut tracker).await?;
        let deletion = deleting.elapsed();
        let leaks = self.wait_clean(p).await?;
        p.raw(format!("\n{}", leaks.render()))?;
        let total = p.start().elapsed();
        let verdict = if leaks.is_empty() {
            "OK: nothing leaked"
        } else {
            "FAILED: resources leaked"
        };
        p.raw(format!("\n{verdict} (total {:.1}s)\n", total.as_secs_f64()))?;
        Ok(DemoReport {
            machines,
            leaks,
            provisioning,
            deletion,
            total,
        })
    }

    /// Creates the namespace, the Cluster and ProxmoxCluster, and per machine its bootstrap
    /// Secret, Machine and ProxmoxMachine (owned by the Machine, as core CAPI arranges).
    async fn create_cluster<W: Write>(&self, p: &mut Printer<W>) -> Result<(), DemoError> {
        let ns: Namespace = serde_json::from_value(serde_json::json!({"metadata": {"name": NAMESPACE}}))?;
        create(&Api::<Namespace>::all(self.client.clone()), &ns).await?;
        let cluster = create(&self.api(), &capi::cluster(NAMESPACE, CLUSTER, CLUSTER)).await?;
        let mut pc = objects::proxmox_cluster()?;
        capi::set_cluster_owner(&mut pc.metadata, &cluster);
        create(&self.api::<ProxmoxCluster>(), &pc).await?;
        p.line(format!(
            "created Cluster {NAMESPACE}/{CLUSTER} and ProxmoxCluster {CLUSTER} (nodes pve1-pve3, IPs {}, endpoint {}:6443)",
            objects::NODE_IP_RANGE,
            objects::CONTROL_PLANE_ENDPOINT
        ))?;
        for m in MACHINES {
            let secret = capi::bootstrap_secret(
                NAMESPACE,
                m.name,
                &objects::user_data(m.name),
                Some("cloud-config"),
            );
            create(&self.api::<Secret>(), &secret).await?;
            let machine = capi::machine(
                NAMESPACE,
                m.name,
                CLUSTER,
                m.control_plane,
                Some(m.name),
                m.name,
                KUBERNETES_VERSION,
            );
            let machine = create(&self.api::<Machine>(), &machine).await?;
            let mut pm = objects::proxmox_machine(m.name)?;
            capi::set_machine_owner(&mut pm.metadata, &machine);
            create(&self.api::<ProxmoxMachine>(), &pm).await?;
        }
        p.line(format!(
            "created {} Machines with bootstrap Secrets and ProxmoxMachines ({})",
            MACHINES.len(),
            MACHINES.map(|m| m.name).join(", ")
        ))?;
        Ok(())
    }

    async fn list_machines(&self) -> Result<Vec<ProxmoxMachine>, DemoError> {
        let list = self
            .api::<ProxmoxMachine>()
            .list(&ListParams::default())
            .await
            .map_err(kube_err("listing ProxmoxMachines"))?;
        Ok(list.items)
    }

    /// Prints reason changes until every machine is provisioned.
    async fn wait_provisioned<W: Write>(
        &self,
        p: &mut Printer<W>,
        tracker: &mut ReasonTracker,
    ) -> Result<Vec<MachineSummary>, DemoError> {
        let deadline = Instant::now() + self.opts.provision_timeout;
        let mut cluster_ready = false;
        loop {
            self.check_manager()?;
            if !cluster_ready {
                let pc = self
                    .api::<ProxmoxCluster>()
                    .get_opt(CLUSTER)
                    .await
                    .map_err(kube_err("reading the ProxmoxCluster"))?;
                if pc
                    .as_ref()
                    .and_then(|pc| pc.status.as_ref()?.initialization.as_ref()?.provisioned)
                    == Some(true)
                {
                    cluster_ready = true;
                    p.line(format!(
                        "ProxmoxCluster {CLUSTER} provisioned (IP pool created, Proxmox reachable)"
                    ))?;
                }
            }
            let machines = self.list_machines().await?;
            for line in tracker.observe(&machines) {
                p.line(line)?;
            }
            let done: Vec<&ProxmoxMachine> = MACHINES
                .iter()
                .filter_map(|m| machines.iter().find(|pm| pm.name_any() == m.name))
                .filter(|pm| is_provisioned(pm))
                .collect();
            if done.len() == MACHINES.len() {
                return Ok(done.into_iter().map(MachineSummary::from_machine).collect());
            }
            if Instant::now() >= deadline {
                let state = tracker.summary();
                return Err(DemoError::Timeout {
                    step: "the machines to be provisioned",
                    after: self.opts.provision_timeout,
                    detail: if state.is_empty() {
                        "no ProxmoxMachine reported a VirtualMachineProvisioned condition (is the machine controller running?)".to_owned()
                    } else {
                        state
                    },
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Deletes the Cluster and waits until its ProxmoxMachines, ProxmoxCluster and itself are gone.
    async fn delete_cluster<W: Write>(
        &self,
        p: &mut Printer<W>,
        tracker: &mut ReasonTracker,
    ) -> Result<(), DemoError> {
        self.api::<Cluster>()
            .delete(CLUSTER, &DeleteParams::default())
            .await
            .map_err(kube_err("deleting the Cluster"))?;
        p.line(format!(
            "deleted Cluster {NAMESPACE}/{CLUSTER}; waiting for its machines and infrastructure to go"
        ))?;
        let deadline = Instant::now() + self.opts.delete_timeout;
        let mut remaining: Vec<String> = MACHINES.iter().map(|m| m.name.to_owned()).collect();
        let mut pc_gone = false;
        loop {
            self.check_manager()?;
            let machines = self.list_machines().await?;
            for line in tracker.observe(&machines) {
                p.line(line)?;
            }
            let mut gone = Vec::new();
            remaining.retain(|name| {
                let present = machines.iter().any(|pm| pm.name_any() == *name);
                if !present {
                    gone.push(name.clone());
                }
                present
            });
            for name in gone {
                p.line(format!("{name:<15} deleted (VM destroyed, finalizer released)"))?;
            }
            if !pc_gone
                && self
                    .api::<ProxmoxCluster>()
                    .get_opt(CLUSTER)
                    .await
                    .map_err(kube_err("reading the ProxmoxCluster"))?
                    .is_none()
            {
                pc_gone = true;
                p.line(format!("ProxmoxCluster {CLUSTER} deleted"))?;
            }
            let cluster_gone = self
                .api::<Cluster>()
                .get_opt(CLUSTER)
                .await
                .map_err(kube_err("reading the Cluster"))?
                .is_none();
            if remaining.is_empty() && pc_gone && cluster_gone {
                p.line(format!("Cluster {CLUSTER} deleted"))?;
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(DemoError::Timeout {
                    step: "the cluster to be deleted",
                    after: self.opts.delete_timeout,
                    detail: format!(
                        "ProxmoxMachines left: [{}] ({}); ProxmoxCluster gone: {pc_gone}; Cluster gone: {cluster_gone}",
                        remaining.join(", "),
                        tracker.summary()
                    ),
                });
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Waits (up to the cleanup grace) until nothing is left and returns what is.
    async fn wait_clean<W: Write>(&self, _p: &mut Printer<W>) -> Result<report::LeakReport, DemoError> {
        let deadline = Instant::now() + self.opts.cleanup_grace;
        loop {
            let leaks = report::leaks(self.client, NAMESPACE, self.sim).await?;
            if leaks.is_empty() || Instant::now() >= deadline {
                return Ok(leaks);
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
