//! One tenant's life with the real CAPI core manager: create the objects, let CAPI adopt and
//! clone them, check that no applied field was lost, wait until the Cluster's infrastructure is
//! ready and every Machine is `Provisioned`, scale the MachineDeployment down by one, delete the
//! Cluster, and check what is left. Checks that fail are collected (a later step that cannot run
//! without an earlier one is skipped), so one run shows every symptom.

use std::collections::BTreeSet;
use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use super::capi::phase;
use super::checks::{self, api};
use super::objects::{POOL_LABEL, Tenant};

const V1ALPHA2: &str = "infrastructure.cluster.x-k8s.io/v1alpha2";

/// Polls `f` every 200 ms for up to `secs` seconds; `None` on timeout.
async fn poll<T, F, Fut>(secs: u64, mut f: F) -> Option<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return Some(v);
        }
        if Instant::now() > deadline {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn list(client: &kube::Client, ns: &str, api_version: &str, kind: &str) -> Vec<Value> {
    api(client, ns, api_version, kind)
        .list(&ListParams::default())
        .await
        .map(|l| {
            l.items
                .into_iter()
                .map(|o| serde_json::to_value(o).unwrap_or_default())
                .collect()
        })
        .unwrap_or_default()
}

fn name(o: &Value) -> &str {
    o["metadata"]["name"].as_str().unwrap_or("")
}

fn owned_by(o: &Value, kind: &str) -> bool {
    o["metadata"]["ownerReferences"]
        .as_array()
        .is_some_and(|l| l.iter().any(|r| r["kind"] == kind))
}

/// The tenant as one test sees it.
pub struct Run<'a> {
    /// Client of the control plane.
    pub client: &'a kube::Client,
    /// The simulator.
    pub sim: &'a pve_sim::SimServer,
    /// The tenant.
    pub t: &'a Tenant,
    /// Failed checks.
    pub failures: Vec<String>,
}

impl Run<'_> {
    fn fail(&mut self, what: impl Into<String>) {
        let what = what.into();
        eprintln!("e2e {}: FAILED: {what}", self.t.ns);
        self.failures.push(format!("{}: {what}", self.t.ns));
    }

    fn note(&self, what: impl std::fmt::Display) {
        eprintln!("e2e {}: {what}", self.t.ns);
    }

    fn capi_av(&self) -> String {
        self.t.capi.api_version()
    }

    /// Cluster, Machines and ProxmoxMachines in one line each, for failure messages.
    async fn state(&self) -> String {
        let c = self.client;
        let ns = &self.t.ns;
        let mut s = String::new();
        for cl in list(c, ns, &self.capi_av(), "Cluster").await {
            s += &format!(
                "\n  Cluster {}: phase {:?}, status.initialization {}, infrastructureReady {}, endpoint {}",
                name(&cl),
                phase(&cl),
                cl["status"]["initialization"],
                cl["status"]["infrastructureReady"],
                cl["spec"]["controlPlaneEndpoint"]
            );
        }
        for m in list(c, ns, &self.capi_av(), "Machine").await {
            s += &format!(
                "\n  Machine {}: phase {:?}, providerID {}, addresses {}",
                name(&m),
                phase(&m),
                m["spec"]["providerID"],
                m["status"]["addresses"]
            );
        }
        for pm in list(c, ns, V1ALPHA2, "ProxmoxMachine").await {
            let reason = pm["status"]["conditions"]
                .as_array()
                .and_then(|l| l.iter().find(|c| c["type"] == "VirtualMachineProvisioned"))
                .map(|c| format!("{} {}", c["reason"], c["message"]))
                .unwrap_or_default();
            s += &format!(
                "\n  ProxmoxMachine {}: provisioned {}, network {}, VirtualMachineProvisioned {reason}",
                name(&pm),
                pm["status"]["initialization"]["provisioned"],
                pm["spec"]["network"]
            );
        }
        s
    }

    /// Creates the namespace and every object, the Proxmox kinds first.
    pub async fn create(&mut self) {
        let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": self.t.ns}})).unwrap();
        Api::<Namespace>::all(self.client.clone())
            .create(&PostParams::default(), &ns)
            .await
            .unwrap();
        for obj in self.t.infrastructure().iter().chain(&self.t.capi_objects()) {
            if let Err(e) = checks::create(self.client, obj).await {
                panic!("{}: {e}", self.t.ns);
            }
        }
        self.note(format!(
            "created the Cluster, 2 Machines and a MachineDeployment of 2 ({}), ProxmoxCluster, ProxmoxMachines and ProxmoxMachineTemplate ({})",
            self.t.capi.api, self.t.infra
        ));
    }

    /// Waits until CAPI owns the ProxmoxCluster and the ProxmoxMachines (its ownerReference
    /// patches go through the contract version) and has created the MachineDeployment's two.
    pub async fn adopted(&mut self) -> bool {
        let (c, ns) = (self.client, self.t.ns.clone());
        let done = poll(120, || async {
            let pcs = list(c, &ns, V1ALPHA2, "ProxmoxCluster").await;
            let pms = list(c, &ns, V1ALPHA2, "ProxmoxMachine").await;
            let ok = pcs.iter().all(|pc| owned_by(pc, "Cluster"))
                && pms.len() == 4
                && pms.iter().all(|pm| owned_by(pm, "Machine"));
            ok.then_some(())
        })
        .await;
        if done.is_none() {
            let state = self.state().await;
            self.fail(format!("CAPI did not adopt the objects within 120 s:{state}"));
        }
        done.is_some()
    }

    /// Compares every stored Proxmox object with what was applied (the MachineDeployment's
    /// ProxmoxMachines with the template), read through both versions.
    pub async fn fields(&mut self, when: &str) {
        let mut lost = Vec::new();
        for obj in self.t.infrastructure() {
            lost.extend(checks::lost_fields(self.client, &obj, None).await);
        }
        let template = self.t.proxmox_machine_template();
        let from_template = json!({
            "apiVersion": template["apiVersion"], "kind": "ProxmoxMachine",
            "metadata": {"namespace": self.t.ns, "name": ""},
            "spec": template["spec"]["template"]["spec"],
        });
        let standalone: BTreeSet<String> = self.t.machines().into_iter().map(|(n, _)| n).collect();
        let mut cloned = 0;
        for pm in list(self.client, &self.t.ns, V1ALPHA2, "ProxmoxMachine").await {
            if standalone.contains(name(&pm)) {
                continue;
            }
            cloned += 1;
            lost.extend(checks::lost_fields(self.client, &from_template, Some(name(&pm))).await);
        }
        if lost.is_empty() {
            self.note(format!(
                "{when}: no field lost ({} applied objects and {cloned} template copies, read as v1alpha1 and v1alpha2)",
                self.t.infrastructure().len()
            ));
        } else {
            self.fail(format!("{when}: fields lost:\n  {}", lost.join("\n  ")));
        }
    }

    /// Waits until the Cluster's infrastructure is ready with the endpoint copied and every
    /// Machine is `Provisioned` with a providerID and addresses; then checks them against the
    /// ProxmoxMachines and the VMs.
    pub async fn provisioned(&mut self) -> bool {
        let started = Instant::now();
        let (c, ns, capi_av) = (self.client, self.t.ns.clone(), self.capi_av());
        let v1beta1 = self.t.capi.v1beta1();
        let (host, port) = self.t.endpoint();
        let done = poll(240, || async {
            let cluster = api(c, &ns, &capi_av, "Cluster").get(&ns).await.ok()?;
            let cluster = serde_json::to_value(cluster).ok()?;
            let ready = if v1beta1 {
                cluster["status"]["infrastructureReady"] == true
            } else {
                cluster["status"]["initialization"]["infrastructureProvisioned"] == true
            };
            let ep = &cluster["spec"]["controlPlaneEndpoint"];
            let machines = list(c, &ns, &capi_av, "Machine").await;
            let all = machines.len() == 4
                && machines.iter().all(|m| {
                    phase(m) == "Provisioned"
                        && m["spec"]["providerID"].as_str().is_some_and(|p| !p.is_empty())
                        && m["status"]["addresses"].as_array().is_some_and(|a| !a.is_empty())
                });
            (ready && ep["host"] == host.as_str() && ep["port"] == port && all).then_some(machines)
        })
        .await;
        let Some(machines) = done else {
            let state = self.state().await;
            self.fail(format!(
                "within 240 s the Cluster's infrastructure was not ready with the endpoint {host}:{port} copied, or not every Machine was Provisioned with providerID and addresses:{state}"
            ));
            return false;
        };
        self.note(format!(
            "infrastructure ready, endpoint {host}:{port} on the Cluster, 4 Machines Provisioned in {:.1} s",
            started.elapsed().as_secs_f64()
        ));
        let pms = api(c, &ns, V1ALPHA2, "ProxmoxMachine");
        for m in &machines {
            let infra = m["spec"]["infrastructureRef"]["name"]
                .as_str()
                .unwrap_or_default();
            let Ok(pm) = pms.get(infra).await else {
                self.fail(format!("Machine {} has no ProxmoxMachine {infra}", name(m)));
                continue;
            };
            let pm = serde_json::to_value(pm).unwrap_or_default();
            if m["spec"]["providerID"] != pm["spec"]["providerID"] {
                self.fail(format!(
                    "Machine {} providerID {} differs from its ProxmoxMachine's {}",
                    name(m),
                    m["spec"]["providerID"],
                    pm["spec"]["providerID"]
                ));
            }
            let machine_addrs = m["status"]["addresses"].as_array().cloned().unwrap_or_default();
            for a in pm["status"]["addresses"].as_array().into_iter().flatten() {
                if !machine_addrs.contains(a) {
                    self.fail(format!(
                        "Machine {} lacks address {a} of its ProxmoxMachine",
                        name(m)
                    ));
                }
            }
        }
        let vms = checks::vms(self.sim, &format!("{ns}-"));
        let mut names: Vec<&str> = machines
            .iter()
            .map(|m| {
                m["spec"]["infrastructureRef"]["name"]
                    .as_str()
                    .unwrap_or_default()
            })
            .collect();
        names.sort_unstable();
        if vms.keys().map(String::as_str).collect::<Vec<_>>() != names {
            self.fail(format!(
                "pve-sim has VMs {vms:?}, expected one per Machine: {names:?}"
            ));
        }
        true
    }

    /// Scales the MachineDeployment from 2 to 1: exactly one VM goes, that of the deleted
    /// Machine.
    pub async fn scale_down(&mut self) -> bool {
        let (c, ns, capi_av) = (self.client, self.t.ns.clone(), self.capi_av());
        let before = checks::vms(self.sim, &format!("{ns}-"));
        let md = self.t.deployment();
        api(c, &ns, &capi_av, "MachineDeployment")
            .patch(
                &md,
                &PatchParams::default(),
                &Patch::Merge(json!({"spec": {"replicas": 1}})),
            )
            .await
            .unwrap();
        let sim = self.sim;
        let done = poll(180, || async {
            let machines = list(c, &ns, &capi_av, "Machine").await;
            let of_md = machines
                .iter()
                .filter(|m| m["metadata"]["labels"][POOL_LABEL] == md.as_str())
                .count();
            let pms = list(c, &ns, V1ALPHA2, "ProxmoxMachine").await;
            let vms = checks::vms(sim, &format!("{ns}-"));
            (of_md == 1 && machines.len() == 3 && pms.len() == 3 && vms.len() == 3).then_some(pms)
        })
        .await;
        let Some(pms) = done else {
            let state = self.state().await;
            let vms = checks::vms(self.sim, &format!("{ns}-"));
            self.fail(format!(
                "scaling the MachineDeployment to 1 did not leave 3 Machines, ProxmoxMachines and VMs within 180 s (VMs {vms:?}):{state}"
            ));
            return false;
        };
        let after = checks::vms(self.sim, &format!("{ns}-"));
        let gone: Vec<&String> = before.keys().filter(|n| !after.contains_key(*n)).collect();
        let remaining: BTreeSet<&str> = pms.iter().map(name).collect();
        let kept_ids = after.iter().all(|(n, id)| before.get(n) == Some(id));
        if gone.len() != 1
            || after.len() != before.len() - 1
            || !kept_ids
            || remaining.contains(gone[0].as_str())
        {
            self.fail(format!(
                "scale-down: VMs before {before:?}, after {after:?}, ProxmoxMachines {remaining:?}"
            ));
        } else {
            self.note(format!("scale-down: exactly one VM deleted ({})", gone[0]));
        }
        true
    }

    /// Deletes the Cluster and waits until its objects are gone, deleting what a garbage
    /// collector would (there is no kube-controller-manager); then nothing may be left in
    /// pve-sim or of the IP claims, addresses and pools.
    pub async fn delete(&mut self, ipam_av: &str) {
        let started = Instant::now();
        let (c, ns, capi_av) = (self.client, self.t.ns.clone(), self.capi_av());
        api(c, &ns, &capi_av, "Cluster")
            .delete(&ns, &DeleteParams::background())
            .await
            .unwrap();
        let kinds: Vec<(String, &str)> = vec![
            (capi_av.clone(), "MachineDeployment"),
            (capi_av.clone(), "MachineSet"),
            (capi_av.clone(), "Machine"),
            (V1ALPHA2.into(), "ProxmoxMachineTemplate"),
            (V1ALPHA2.into(), "ProxmoxMachine"),
            (V1ALPHA2.into(), "ProxmoxCluster"),
            ("ipam.cluster.x-k8s.io/v1alpha2".into(), "InClusterIPPool"),
            (ipam_av.into(), "IPAddressClaim"),
            (ipam_av.into(), "IPAddress"),
        ];
        let mut collected: Vec<String> = Vec::new();
        let mut left: Vec<String> = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(240);
        let gone = loop {
            collected.extend(checks::collect_garbage(c, &ns, &kinds).await);
            left.clear();
            for (av, kind) in &kinds {
                for n in checks::names(c, &ns, av, kind).await {
                    left.push(format!("{kind}/{n}"));
                }
            }
            for n in checks::names(c, &ns, &capi_av, "Cluster").await {
                left.push(format!("Cluster/{n}"));
            }
            if left.is_empty() {
                break Some(());
            }
            if Instant::now() > deadline {
                break None;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        };
        if gone.is_none() {
            let state = self.state().await;
            self.fail(format!(
                "240 s after deleting the Cluster these are left: {left:?}:{state}"
            ));
            return;
        }
        self.note(format!(
            "Cluster deleted with everything in {:.1} s; the test's garbage collection deleted {collected:?}",
            started.elapsed().as_secs_f64()
        ));
        // CAPI deletes the infrastructure objects it references, we delete the claims, the IPAM
        // provider the addresses: none of them may be left to a garbage collector.
        let by_gc: Vec<&String> = collected
            .iter()
            .filter(|k| {
                [
                    "Machine/",
                    "ProxmoxMachine/",
                    "ProxmoxCluster/",
                    "IPAddressClaim/",
                    "IPAddress/",
                ]
                .iter()
                .any(|p| k.starts_with(p))
            })
            .collect();
        if !by_gc.is_empty() {
            self.fail(format!(
                "the deletion left these to a garbage collector: {by_gc:?}"
            ));
        }
        let vms = checks::vms(self.sim, &format!("{ns}-"));
        if !vms.is_empty() {
            self.fail(format!("VMs left in pve-sim: {vms:?}"));
        }
    }
}
