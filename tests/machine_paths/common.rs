//! Helpers shared by the machine path tests: fault presets, ISO and condition readers, and object
//! builders the harness does not offer.

use std::collections::BTreeMap;

use capmox_api::consts::PAUSED_ANNOTATION;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use capmox_standins::capi::objects;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, PostParams};
use pve_sim::{EndpointFault, FaultSpec};
use serde_json::json;

use crate::machine_support::*;

pub(crate) const AGENT_OSINFO: &str = "GET /nodes/{node}/qemu/{vmid}/agent/get-osinfo";
pub(crate) const AGENT_EXEC: &str = "POST /nodes/{node}/qemu/{vmid}/agent/exec";
pub(crate) const AGENT_EXEC_STATUS: &str = "GET /nodes/{node}/qemu/{vmid}/agent/exec-status";
pub(crate) const CLONE: &str = "POST /nodes/{node}/qemu/{vmid}/clone";
pub(crate) const START: &str = "POST /nodes/{node}/qemu/{vmid}/status/start";
pub(crate) const MINIMAL_IGNITION: &str = r#"{"ignition":{"version":"2.3.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/motd","mode":420,"contents":{"source":"data:,hello"}}]}}"#;

pub(crate) fn fault(endpoint: &str, rate: f64, status: u16, message: &str, latency_ms: u64) -> EndpointFault {
    EndpointFault {
        endpoint: endpoint.to_owned(),
        error_rate: rate,
        status,
        message: message.to_owned(),
        latency_ms,
        ..Default::default()
    }
}

/// The guest agent of every VM answers "not running" (on every agent endpoint the controller
/// uses): machines stop at `WaitingForCloudInit`.
pub(crate) fn agent_stalled() -> FaultSpec {
    FaultSpec {
        endpoints: [AGENT_OSINFO, AGENT_EXEC, AGENT_EXEC_STATUS]
            .into_iter()
            .map(|ep| fault(ep, 1.0, 500, "QEMU guest agent is not running", 0))
            .collect(),
        ..FaultSpec::default()
    }
}

pub(crate) fn message_of(pm: &ProxmoxMachine) -> String {
    pm.condition("VirtualMachineProvisioned")
        .map(|c| c.message.clone())
        .unwrap_or_default()
}

pub(crate) fn vmid_of(pm: &ProxmoxMachine) -> u32 {
    u32::try_from(pm.spec.virtual_machine_id.expect("a VMID is recorded")).unwrap()
}

pub(crate) fn failed_with(pm: &ProxmoxMachine, reason: &str, needle: &str) -> bool {
    reason_of(pm).as_deref() == Some(reason) && message_of(pm).contains(needle)
}

/// Waits until the machine's VM waits for its guest agent with the bootstrap ISO attached.
pub(crate) async fn wait_stalled_at_guest(h: &Harness, name: &str) -> ProxmoxMachine {
    h.wait_pm(name, 60, "waiting for the guest agent", |pm| {
        reason_of(pm).as_deref() == Some("WaitingForCloudInit") && message_of(pm).contains("guest agent")
    })
    .await
}

/// The bootstrap ISO of `vmid`: its volid and bytes (read through the VM's node).
pub(crate) fn bootstrap_iso(h: &Harness, vmid: u32) -> (String, Vec<u8>) {
    let st = h.sim.state();
    let file = format!("user-data-{vmid}.iso");
    let vol = st
        .file_volumes()
        .into_iter()
        .find(|v| v.volid.ends_with(&file))
        .unwrap_or_else(|| panic!("no ISO {file} on any storage"));
    let node = st.vm(vmid).expect("the VM exists").node;
    let bytes = st.volume_bytes(&node, &vol.volid).expect("the ISO is readable");
    (vol.volid, bytes)
}

pub(crate) fn iso_file(iso: &[u8], name: &str) -> String {
    pve_sim::iso::read_file(iso, name).unwrap_or_else(|| panic!("the ISO has no {name}"))
}

/// Sum of `capmox_reconcile_errors_total` samples of the machine controller.
pub(crate) fn machine_errors(h: &Harness) -> f64 {
    h.metrics
        .render()
        .lines()
        .filter(|l| {
            l.starts_with("capmox_reconcile_errors_total{") && l.contains("controller=\"proxmoxmachine\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Warning events with `reason` about the ProxmoxMachine `name`.
pub(crate) async fn warnings(h: &Harness, name: &str, reason: &str) -> Vec<Event> {
    Api::<Event>::namespaced(h.client.clone(), NS)
        .list(&Default::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some(reason)
                && e.type_.as_deref() == Some("Warning")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}

/// Waits (up to 30 s) until at least one Warning event with `reason` regards `name`, and returns
/// them: events are posted after the status write, so the condition can be seen first.
pub(crate) async fn wait_warnings(h: &Harness, name: &str, reason: &str) -> Vec<Event> {
    wait_for(30, &format!("{reason} warning on {name}"), || async {
        let e = warnings(h, name, reason).await;
        (!e.is_empty()).then_some(e)
    })
    .await
}

/// Adds a non-template VM named `name` at `vmid` on pve1 directly in the simulator.
pub(crate) fn foreign_vm(h: &Harness, vmid: u32, name: &str) {
    h.sim.state().with(|c| {
        let config = BTreeMap::from([
            ("name".to_owned(), name.to_owned()),
            ("memory".to_owned(), "512".to_owned()),
            ("cores".to_owned(), "1".to_owned()),
        ]);
        c.vms.insert(vmid, pve_sim::state::Vm::new(vmid, "pve1", config));
    });
}

/// Creates a Cluster and a ProxmoxCluster carrying the paused annotation (the cluster controller
/// leaves it alone, so the Cluster's infrastructure never becomes provisioned).
pub(crate) async fn create_cluster_with_paused_infra(h: &Harness, name: &str) {
    let cluster = h
        .clusters()
        .create(&PostParams::default(), &objects::cluster(NS, name, name))
        .await
        .unwrap();
    let mut pc: ProxmoxCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {"name": name, "namespace": NS, "annotations": {PAUSED_ANNOTATION: ""}},
        "spec": {
            "dnsServers": ["10.0.0.1"],
            "ipv4Config": {"addresses": ["10.10.20.10-10.10.20.50"], "prefix": 24, "gateway": "10.10.20.1"},
            "controlPlaneEndpoint": {"host": "10.10.20.5", "port": 6443},
        },
    }))
    .unwrap();
    objects::set_cluster_owner(&mut pc.metadata, &cluster);
    h.pcs().create(&PostParams::default(), &pc).await.unwrap();
}

/// Like [`Harness::create_machine`] with a cloud-config secret, but the ProxmoxMachine is created
/// with `annotations` already set.
pub(crate) async fn create_annotated_machine(
    h: &Harness,
    cluster: &str,
    name: &str,
    annotations: serde_json::Value,
) {
    let secret_name = format!("{name}-bootstrap");
    Api::<Secret>::namespaced(h.client.clone(), NS)
        .create(
            &PostParams::default(),
            &objects::bootstrap_secret(NS, &secret_name, CLOUD_CONFIG, Some("cloud-config")),
        )
        .await
        .unwrap();
    let machine = objects::machine(NS, name, cluster, false, Some(&secret_name), name, "v1.33.0");
    let machine = h
        .machines()
        .create(&PostParams::default(), &machine)
        .await
        .unwrap();
    let mut pm: ProxmoxMachine = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachine",
        "metadata": {"name": name, "namespace": NS, "annotations": annotations},
        "spec": default_machine_spec(),
    }))
    .unwrap();
    objects::set_machine_owner(&mut pm.metadata, &machine);
    h.pms().create(&PostParams::default(), &pm).await.unwrap();
}

pub(crate) fn cloud_config() -> Option<(&'static str, Option<&'static str>)> {
    Some((CLOUD_CONFIG, Some("cloud-config")))
}
