//! A machine provisioned by the real controllers (pve-sim, CAPI and IPAM stand-ins) while our CRDs
//! convert through the webhook server and capmox's admission webhooks are registered: read through
//! `v1alpha1` it shows `status.ready: true`, and a CAPI v1beta1-contract reader (what CAPI v1.10
//! does: pick the version from the CRD's `cluster.x-k8s.io/v1beta1` label, read the object as
//! unstructured, look at `status.ready`) sees the cluster's and the machine's infrastructure ready.
//! Runs on the in-tree and the real API server.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;
mod webhook_support;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::Api;
use machine_support::*;
use serde_json::{Value, json};

/// Reads `name` the way a CAPI v1beta1-contract controller reads infrastructure objects.
async fn capi_v1beta1_read(client: &kube::Client, kind: &str, name: &str) -> Value {
    let plural = format!("{}s", kind.to_ascii_lowercase());
    let crd = Api::<CustomResourceDefinition>::all(client.clone())
        .get(&format!("{plural}.{}", webhook_support::GROUP))
        .await
        .unwrap();
    let labels = crd.metadata.labels.unwrap_or_default();
    // The label lists versions separated by `_`; CAPI takes the latest.
    let version = labels["cluster.x-k8s.io/v1beta1"]
        .rsplit('_')
        .next()
        .unwrap()
        .to_owned();
    assert_eq!(version, "v1alpha1");
    let obj = webhook_support::api(client, NS, kind, &version)
        .get(name)
        .await
        .unwrap();
    serde_json::to_value(obj).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn provisioned_machine_is_ready_through_v1alpha1_and_for_capi_v1beta1() {
    let h = Harness::start().await;
    let hooks = webhook_support::start().await;
    webhook_support::install_crds(&h.env, &hooks).await;
    webhook_support::install_admission(&h.client, &hooks).await;
    webhook_support::wait_effective(&h.client).await;

    h.create_cluster("c1", json!({})).await;
    h.create_machine(
        "c1",
        "c1-cp-0",
        true,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({}),
    )
    .await;
    let pm = h.wait_provisioned("c1-cp-0", 90).await;
    // The defaulting webhook put both default pools on net0 (as capmox does); the IPv4-only
    // cluster gives it an IPv4 address only.
    assert_eq!(pm.spec.network.network_devices[0].default_ipv4, Some(true));
    assert_eq!(pm.spec.network.network_devices[0].default_ipv6, Some(true));

    let machine = webhook_support::api(&h.client, NS, "ProxmoxMachine", "v1alpha1")
        .get("c1-cp-0")
        .await
        .unwrap();
    assert_eq!(
        machine.data["status"]["ready"], true,
        "{:?}",
        machine.data["status"]
    );
    assert_eq!(machine.data["spec"]["providerID"], json!(pm.spec.provider_id));
    assert_eq!(machine.data["spec"]["network"]["default"]["bridge"], "vmbr0");

    let m = capi_v1beta1_read(&h.client, "ProxmoxMachine", "c1-cp-0").await;
    assert_eq!(m["status"]["ready"], true);
    assert!(
        m["spec"]["providerID"]
            .as_str()
            .unwrap()
            .starts_with("proxmox://")
    );
    assert!(
        m["status"]["addresses"].as_array().is_some_and(|a| !a.is_empty()),
        "{}",
        m["status"]
    );
    let c = testenv::wait_for(60, "the cluster to read as ready through v1alpha1", || {
        let client = h.client.clone();
        async move {
            let c = capi_v1beta1_read(&client, "ProxmoxCluster", "c1").await;
            (c["status"]["ready"] == true).then_some(c)
        }
    })
    .await;
    assert_eq!(
        c["spec"]["controlPlaneEndpoint"],
        json!({"host": "10.10.10.5", "port": 6443})
    );
    h.stop().await;
}
