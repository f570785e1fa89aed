//! End to end with the real Cluster API core manager, both contract generations (`make e2e`).
//!
//! For CAPI v1.13.4 (v1beta2 contract) and v1.10.2 (v1beta1 contract, CozyStack): the real
//! kube-apiserver + etcd (`KUBEBUILDER_ASSETS`), CAPI's CRDs converting through CAPI's own
//! `/convert`, the in-cluster IPAM CRDs, the CAPI core manager from `../shared/tools/capi` with
//! its admission webhooks registered by URL, pve-sim, our `capmox` binary as a separate process
//! with its conversion and admission webhooks registered by URL, and the project's in-cluster IPAM
//! stand-in. Two tenants side by side, one applying the Proxmox kinds as `v1alpha2`, one as
//! `v1alpha1` (capmox v0.7 shapes): a Cluster, two Machines with bootstrap `dataSecretName`
//! Secrets, a MachineDeployment of two. Checked per tenant (see `e2e_support/scenario.rs`):
//! CAPI adopts and clones the objects without losing a field (read through both versions),
//! the Cluster's infrastructure is ready with the endpoint copied, every Machine is `Provisioned`
//! with our providerID and addresses, a scale-down deletes exactly one VM, and deleting the
//! Cluster leaves no VM, ISO or IP.
//!
//! `CAPMOX_E2E_WITHOUT_CONVERSION=1` installs our CRDs as before the webhook server existed
//! (conversion `None`) and starts the manager with `--enable-webhooks=false`: on CAPI v1.10.2
//! this reproduces issue 9's data loss, and the test fails saying what was lost and where the
//! Machines stopped.
//!
//! A third case is CozyStack's path: a tenant's node group on CAPI v1.10.2 — v1alpha1 Proxmox
//! objects, a MachineDeployment of ProxmoxMachines whose Cluster's control plane is a
//! KamajiControlPlane, the test playing Kamaji v0.19's controller (`e2e_support/kamaji.rs`).
//!
//! A fourth case moves a provisioned cluster with the real `clusterctl move` (v1.13.4) from one
//! management cluster to another, both with the real CAPI core manager and our manager on the
//! same pve-sim (`e2e_support/moving.rs`).
//!
//! Ignored by `cargo test` (it takes minutes); `make e2e` runs it. Skips with one line when
//! `../shared/tools/{envtest,capi}` are missing.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod e2e_support;
mod webhook_support;

use e2e_support::objects::{Capi, Tenant};
use e2e_support::rig::Rig;
use e2e_support::scenario::Run;
use e2e_support::{checks, kamaji};

/// Set to reproduce the behaviour without our conversion webhook.
const WITHOUT_CONVERSION: &str = "CAPMOX_E2E_WITHOUT_CONVERSION";

#[tokio::test(flavor = "multi_thread")]
#[ignore = "end to end with the real CAPI core manager (minutes): make e2e"]
async fn capi_v1_13_4_v1beta2_contract() {
    end_to_end(Capi::V1_13_4).await;
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "end to end with the real CAPI core manager (minutes): make e2e"]
async fn capi_v1_10_2_v1beta1_contract() {
    end_to_end(Capi::V1_10_2).await;
}

async fn end_to_end(capi: Capi) {
    let with_conversion = std::env::var_os(WITHOUT_CONVERSION).is_none();
    let tag = format!("e2e CAPI {} ({} contract)", capi.release, capi.api);
    let Some(rig) = Rig::start(capi, with_conversion, &tag).await else {
        return;
    };
    let ipam_av = if capi.v1beta1() {
        "ipam.cluster.x-k8s.io/v1beta1"
    } else {
        "ipam.cluster.x-k8s.io/v1beta2"
    };
    let tenants = [
        Tenant::new(capi, "v1alpha2", 20),
        Tenant::new(capi, "v1alpha1", 21),
    ];
    let runs = tenants.iter().map(|t| {
        let (client, sim) = (&rig.client, &rig.sim);
        async move {
            let mut run = Run {
                client,
                sim,
                t,
                failures: Vec::new(),
            };
            run.create().await;
            if run.adopted().await {
                run.fields("after CAPI adopted the objects").await;
            }
            if run.provisioned().await {
                run.fields("once provisioned").await;
                if run.scale_down().await {
                    run.delete(ipam_av).await;
                }
            }
            run.failures
        }
    });
    let mut failures: Vec<String> = futures::future::join_all(runs)
        .await
        .into_iter()
        .flatten()
        .collect();

    if failures.is_empty() {
        let vms = checks::vms(&rig.sim, "");
        let isos = checks::isos(&rig.sim);
        if !vms.is_empty() || !isos.is_empty() {
            failures.push(format!("left in pve-sim: VMs {vms:?}, ISOs {isos:?}"));
        }
    }
    rig.stop(&tag, failures).await;
}

/// CozyStack's tenant node group on CAPI v1.10.2 with Kamaji's control plane (v0.19 semantics,
/// played by the test): see `e2e_support/kamaji.rs`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "end to end with the real CAPI core manager (minutes): make e2e"]
async fn capi_v1_10_2_kamaji_tenant_node_group() {
    let capi = Capi::V1_10_2;
    let tag = "e2e CAPI v1.10.2 + Kamaji (played) tenant node group";
    let Some(rig) = Rig::start(capi, true, tag).await else {
        return;
    };
    let failures = kamaji::tenant_node_group(&rig).await;
    if failures.is_empty() {
        let vms = checks::vms(&rig.sim, "");
        let isos = checks::isos(&rig.sim);
        if !vms.is_empty() || !isos.is_empty() {
            rig.stop(tag, vec![format!("left in pve-sim: VMs {vms:?}, ISOs {isos:?}")])
                .await;
            return;
        }
    }
    rig.stop(tag, failures).await;
}

/// `clusterctl move` between two management clusters (real clusterctl, kube-apiservers, CAPI
/// v1.13.4 and our manager in both): see `e2e_support/moving.rs`.
#[tokio::test(flavor = "multi_thread")]
#[ignore = "end to end with the real CAPI core manager (minutes): make e2e"]
async fn clusterctl_move_between_management_clusters() {
    let capi = Capi::V1_13_4;
    let tag = "e2e clusterctl move (CAPI v1.13.4)";
    let Some(bin) = e2e_support::moving::clusterctl(capi) else {
        return;
    };
    let Some(rig) = Rig::start(capi, true, tag).await else {
        return;
    };
    let failures = e2e_support::moving::clusterctl_move(&rig, capi, &bin).await;
    rig.stop(tag, failures).await;
}
