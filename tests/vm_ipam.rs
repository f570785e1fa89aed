//! A ProxmoxVirtualMachine NIC whose address comes from an IPAM pool (`ipPoolRef`), against
//! pve-sim and the in-cluster IPAM stand-in, on the in-tree API server or the real
//! kube-apiserver (`KUBEBUILDER_ASSETS`): the claim `<name>-net0-00-inet` is created, owned by the
//! object; while the pool is missing `NetworkConfigured` says `WaitingForIPAddress`; once the
//! pool exists its address, prefix and gateway (with the pool's metric) are in the NoCloud
//! network-config and the status;
//! deleting the object releases the claim.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod vm_support;

use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::capi::ipam_claims::v1beta2::{IPAddress, IPAddressClaim};
use capmox_api::vm::{NETWORK_CONFIGURED_CONDITION, VmPhase};
use kube::api::Api;
use serde_json::json;
use vm_support::*;

fn reason_of(p: &capmox_api::vm::ProxmoxVirtualMachine, type_: &str) -> Option<String> {
    p.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .map(|c| c.reason.clone())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_nic_gets_its_address_from_a_pool() {
    let h = Harness::start().await;
    let _ipam = h.start_ipam().await;
    let claims: Api<IPAddressClaim> = Api::namespaced(h.client.clone(), NS);
    let addresses: Api<IPAddress> = Api::namespaced(h.client.clone(), NS);
    h.create(
        "db",
        json!({
            "templateID": 100, "sourceNode": "pve1",
            "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0",
                "ipPoolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "vms"},
                "dnsServers": ["10.30.0.2"]}]}
        }),
    )
    .await;
    // No pool yet: the claim waits, and so does the VM.
    let p = h
        .wait("db", 60, "NetworkConfigured WaitingForIPAddress", |p| {
            reason_of(p, NETWORK_CONFIGURED_CONDITION).as_deref() == Some("WaitingForIPAddress")
        })
        .await;
    let claim = testenv::wait::wait_for(30, "the claim", || async {
        claims.get_opt("db-net0-00-inet").await.ok().flatten()
    })
    .await;
    let owner = &claim.metadata.owner_references.as_ref().unwrap()[0];
    assert_eq!(
        (owner.kind.as_str(), owner.controller),
        ("ProxmoxVirtualMachine", Some(true))
    );
    assert_eq!(Some(&owner.uid), p.metadata.uid.as_ref());
    assert_eq!(claim.spec.pool_ref.name, "vms");
    assert!(p.status.as_ref().unwrap().bootstrap_data_provided != Some(true));

    let pool: InClusterIPPool = serde_json::from_value(json!({
        "apiVersion": "ipam.cluster.x-k8s.io/v1alpha2", "kind": "InClusterIPPool",
        "metadata": {"name": "vms", "namespace": NS,
                     "annotations": {"ipam.capmox.cluster.x-k8s.io/gateway-metric": "250"}},
        "spec": {"addresses": ["10.30.0.10-10.30.0.20"], "prefix": 24, "gateway": "10.30.0.1"},
    }))
    .unwrap();
    Api::<InClusterIPPool>::namespaced(h.client.clone(), NS)
        .create(&Default::default(), &pool)
        .await
        .unwrap();
    let p = h
        .wait("db", 60, "Running with its pool address", |p| {
            let s = p.status.as_ref();
            s.and_then(|s| s.phase) == Some(VmPhase::Running)
                && s.and_then(|s| s.ip_addresses.as_ref())
                    .is_some_and(|i| !i.is_empty())
        })
        .await;
    let s = p.status.clone().unwrap();
    let pooled = s.pool_addresses.clone().expect("status.poolAddresses");
    assert_eq!(pooled.len(), 1);
    assert_eq!(pooled[0].net, "net0");
    assert_eq!(pooled[0].ipv4.as_deref(), Some(&["10.30.0.10".to_owned()][..]));
    assert_eq!(s.ip_addresses.clone().unwrap(), ["10.30.0.10"]);
    let vmid = u32::try_from(s.vmid.unwrap()).unwrap();
    let net = h.network_config(vmid).expect("the NoCloud ISO's network-config");
    assert!(
        net.contains("10.30.0.10/24")
            && net.contains("10.30.0.1")
            && net.lines().any(|l| l.contains("metric") && l.contains("250"))
            && !net.contains("dhcp4: true"),
        "{net}"
    );

    // Deleting the object releases the claim (and so the address).
    h.pvms().delete("db", &Default::default()).await.unwrap();
    h.wait_gone("db", 60).await;
    testenv::wait::wait_for(30, "the claim and its address to be gone", || async {
        let claim = claims.get_opt("db-net0-00-inet").await.ok()?;
        let address = addresses.get_opt("db-net0-00-inet").await.ok()?;
        (claim.is_none() && address.is_none()).then_some(())
    })
    .await;
    assert!(h.sim.state().vm(vmid).is_none(), "the VM is destroyed");
    h.stop().await;
}
