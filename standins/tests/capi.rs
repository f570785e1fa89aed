//! The core CAPI stand-in against the in-tree control plane (no provider running: the tests play
//! the provider by patching the Proxmox objects' status themselves).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use capmox_api::capi::v1beta2::{Cluster, Machine};
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_standins::CapiStandIn;
use capmox_standins::capi::{self, CLUSTER_FINALIZER, MACHINE_FINALIZER};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;
use support::{NS, wait_for};

async fn create_pc(client: &kube::Client, name: &str) -> ProxmoxCluster {
    let pc: ProxmoxCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {"addresses": ["10.10.10.10-10.10.10.50"], "prefix": 24, "gateway": "10.10.10.1"},
            "controlPlaneEndpoint": {"host": "10.10.10.5", "port": 6443},
        },
    }))
    .unwrap();
    Api::<ProxmoxCluster>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pc)
        .await
        .unwrap()
}

async fn create_pm(client: &kube::Client, name: &str) -> ProxmoxMachine {
    let pm: ProxmoxMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "sourceNode": "pve1",
            "templateID": 100,
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0", "defaultIPv4": true}]},
        },
    }))
    .unwrap();
    Api::<ProxmoxMachine>::namespaced(client.clone(), NS)
        .create(&PostParams::default(), &pm)
        .await
        .unwrap()
}

async fn patch_status<K>(api: &Api<K>, name: &str, status: serde_json::Value)
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug,
{
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(&json!({"status": status})),
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn cluster_owns_its_proxmox_cluster_and_becomes_infrastructure_provisioned() {
    let env = support::start(false).await;
    let capi = CapiStandIn::spawn(env.client.clone(), None);
    let clusters = Api::<Cluster>::namespaced(env.client.clone(), NS);
    let pcs = Api::<ProxmoxCluster>::namespaced(env.client.clone(), NS);
    let c = clusters
        .create(&PostParams::default(), &capi::cluster(NS, "demo", "demo"))
        .await
        .unwrap();
    create_pc(&env.client, "demo").await;

    // Adopted like core CAPI does: controller ownerRef and cluster-name label; finalizer on the Cluster.
    wait_for(20, "ProxmoxCluster owned by the Cluster", || {
        let (pcs, uid) = (pcs.clone(), c.meta().uid.clone());
        async move {
            let pc = pcs.get("demo").await.unwrap();
            let owned = pc
                .owner_references()
                .iter()
                .any(|o| o.kind == "Cluster" && Some(&o.uid) == uid.as_ref() && o.controller == Some(true));
            (owned
                && pc
                    .labels()
                    .get("cluster.x-k8s.io/cluster-name")
                    .map(String::as_str)
                    == Some("demo"))
            .then_some(())
        }
    })
    .await;
    let c = clusters.get("demo").await.unwrap();
    assert!(c.finalizers().iter().any(|f| f == CLUSTER_FINALIZER));
    assert!(
        c.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.infrastructure_provisioned)
            .is_none(),
        "not provisioned before the ProxmoxCluster is"
    );

    // The provider reports the ProxmoxCluster provisioned.
    patch_status(&pcs, "demo", json!({"initialization": {"provisioned": true}})).await;
    let c = wait_for(20, "Cluster infrastructureProvisioned", || {
        let clusters = clusters.clone();
        async move {
            let c = clusters.get("demo").await.unwrap();
            let done = c
                .status
                .as_ref()
                .and_then(|s| s.initialization.as_ref())
                .and_then(|i| i.infrastructure_provisioned)
                == Some(true);
            done.then_some(c)
        }
    })
    .await;
    let ep = c.spec.control_plane_endpoint.expect("endpoint copied");
    assert_eq!(ep.host.as_deref(), Some("10.10.10.5"));
    assert_eq!(ep.port, Some(6443));
    capi.stop().await;
}

#[tokio::test]
async fn machine_gets_provider_id_node_ref_and_addresses_and_deletion_cascades() {
    let env = support::start(false).await;
    let capi = CapiStandIn::spawn(env.client.clone(), Some(NS.into()));
    let client = &env.client;
    let clusters = Api::<Cluster>::namespaced(client.clone(), NS);
    let machines = Api::<Machine>::namespaced(client.clone(), NS);
    let pms = Api::<ProxmoxMachine>::namespaced(client.clone(), NS);
    let pcs = Api::<ProxmoxCluster>::namespaced(client.clone(), NS);
    let secrets = Api::<Secret>::namespaced(client.clone(), NS);

    clusters
        .create(&PostParams::default(), &capi::cluster(NS, "demo", "demo"))
        .await
        .unwrap();
    create_pc(client, "demo").await;
    secrets
        .create(
            &PostParams::default(),
            &capi::bootstrap_secret(NS, "cp-0", "#cloud-config\n", Some("cloud-config")),
        )
        .await
        .unwrap();
    let m = machines
        .create(
            &PostParams::default(),
            &capi::machine(NS, "cp-0", "demo", true, Some("cp-0"), "cp-0", "v1.33.0"),
        )
        .await
        .unwrap();
    create_pm(client, "cp-0").await;

    wait_for(20, "ProxmoxMachine owned by the Machine", || {
        let (pms, uid) = (pms.clone(), m.meta().uid.clone());
        async move {
            let pm = pms.get("cp-0").await.unwrap();
            let owned = pm
                .owner_references()
                .iter()
                .any(|o| o.kind == "Machine" && Some(&o.uid) == uid.as_ref() && o.controller == Some(true));
            let labels = pm.labels();
            (owned
                && labels.get("cluster.x-k8s.io/cluster-name").map(String::as_str) == Some("demo")
                && labels.contains_key("cluster.x-k8s.io/control-plane"))
            .then_some(())
        }
    })
    .await;
    assert!(
        machines
            .get("cp-0")
            .await
            .unwrap()
            .finalizers()
            .iter()
            .any(|f| f == MACHINE_FINALIZER)
    );

    // The provider provisions the machine.
    let id = "proxmox://5b0f8a44-3c2e-4d8e-9a51-0f6c2a1b7e10";
    pms.patch(
        "cp-0",
        &PatchParams::default(),
        &Patch::Merge(&json!({"spec": {"providerID": id}})),
    )
    .await
    .unwrap();
    patch_status(
        &pms,
        "cp-0",
        json!({
            "initialization": {"provisioned": true},
            "addresses": [{"type": "Hostname", "address": "cp-0"}, {"type": "InternalIP", "address": "10.10.10.10"}],
        }),
    )
    .await;
    let m = wait_for(20, "Machine joined", || {
        let machines = machines.clone();
        async move {
            let m = machines.get("cp-0").await.unwrap();
            m.status.as_ref()?.node_ref.as_ref()?;
            Some(m)
        }
    })
    .await;
    assert_eq!(m.spec.provider_id.as_deref(), Some(id));
    let st = m.status.unwrap();
    assert_eq!(st.node_ref.unwrap().name, "cp-0");
    let addrs: Vec<(String, String)> = st
        .addresses
        .unwrap()
        .into_iter()
        .map(|a| (a.type_, a.address))
        .collect();
    assert_eq!(
        addrs,
        vec![
            ("Hostname".to_owned(), "cp-0".to_owned()),
            ("InternalIP".to_owned(), "10.10.10.10".to_owned())
        ]
    );
    assert_eq!(st.initialization.unwrap().infrastructure_provisioned, Some(true));

    // Deleting the Cluster deletes the Machine (→ ProxmoxMachine, bootstrap Secret), then the
    // ProxmoxCluster, then the Cluster itself.
    clusters.delete("demo", &DeleteParams::default()).await.unwrap();
    wait_for(30, "everything deleted", || {
        let (clusters, machines, pms, pcs, secrets) = (
            clusters.clone(),
            machines.clone(),
            pms.clone(),
            pcs.clone(),
            secrets.clone(),
        );
        async move {
            let gone = clusters.get_opt("demo").await.unwrap().is_none()
                && machines.get_opt("cp-0").await.unwrap().is_none()
                && pms.get_opt("cp-0").await.unwrap().is_none()
                && pcs.get_opt("demo").await.unwrap().is_none()
                && secrets.get_opt("cp-0").await.unwrap().is_none();
            gone.then_some(())
        }
    })
    .await;
    capi.stop().await;
}

#[tokio::test]
async fn machine_deletion_waits_for_its_proxmox_machine() {
    let env = support::start(false).await;
    let capi = CapiStandIn::spawn(env.client.clone(), None);
    let machines = Api::<Machine>::namespaced(env.client.clone(), NS);
    let pms = Api::<ProxmoxMachine>::namespaced(env.client.clone(), NS);
    machines
        .create(
            &PostParams::default(),
            &capi::machine(NS, "w-0", "demo", false, None, "w-0", "v1.33.0"),
        )
        .await
        .unwrap();
    create_pm(&env.client, "w-0").await;
    // The provider's finalizer keeps the ProxmoxMachine while "the VM is being deleted".
    pms.patch(
        "w-0",
        &PatchParams::default(),
        &Patch::Merge(
            &json!({"metadata": {"finalizers": ["proxmoxmachine.infrastructure.cluster.x-k8s.io"]}}),
        ),
    )
    .await
    .unwrap();
    wait_for(20, "Machine finalizer", || {
        let machines = machines.clone();
        async move {
            let m = machines.get("w-0").await.unwrap();
            m.finalizers()
                .iter()
                .any(|f| f == MACHINE_FINALIZER)
                .then_some(())
        }
    })
    .await;
    machines.delete("w-0", &DeleteParams::default()).await.unwrap();
    wait_for(20, "ProxmoxMachine deletion requested", || {
        let pms = pms.clone();
        async move { pms.get("w-0").await.unwrap().meta().deletion_timestamp.clone() }
    })
    .await;
    // The Machine is still there while its ProxmoxMachine is.
    assert!(machines.get_opt("w-0").await.unwrap().is_some());
    pms.patch(
        "w-0",
        &PatchParams::default(),
        &Patch::Merge(&json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    wait_for(20, "Machine deleted", || {
        let machines = machines.clone();
        async move { machines.get_opt("w-0").await.unwrap().is_none().then_some(()) }
    })
    .await;
    capi.stop().await;
}
