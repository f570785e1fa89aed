//! An object our types cannot read must not stop the controllers. Such objects exist: written
//! through `v1alpha1` while the CRDs had no conversion webhook (what capmox-rs shipped before the
//! webhook server, and what the CRDs in `config/crd/bases` still say), a ProxmoxMachine's
//! `network.default` is pruned to `network: {}` and a ProxmoxCluster's gateway-less `ipv4Config`
//! misses the field v1alpha2 requires. A typed watch fails its whole list on one of them, so before
//! the fix nothing at all was reconciled any more. Now each is reported — a Warning event and a
//! log line naming the object and the field — and the other objects are provisioned, including a
//! machine of the same cluster as the damaged one.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod machine_support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use capmox::controllers::decoded::UNREADABLE_REASON;
use capmox_api::v1alpha2::{ProxmoxCluster, ProxmoxMachine};
use k8s_openapi::api::core::v1::Event;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use kube::core::GroupVersionKind;
use machine_support::{CLOUD_CONFIG, Harness, NS};
use serde_json::json;
use testenv::wait_for;

/// The log lines of this test process.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn capture() -> Self {
        let logs = Logs::default();
        let writer = logs.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_env_filter("capmox=info")
            .with_writer(move || writer.clone())
            .init();
        logs
    }

    fn text(&self) -> String {
        String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
    }
}

/// Creates `obj` through `v1alpha1` (no conversion: stored as it is under `v1alpha2`).
async fn create_v1alpha1(client: &kube::Client, kind: &str, obj: serde_json::Value) {
    let gvk = GroupVersionKind::gvk("infrastructure.cluster.x-k8s.io", "v1alpha1", kind);
    let ar = ApiResource::from_gvk_with_plural(&gvk, &format!("{}s", kind.to_lowercase()));
    let obj: DynamicObject = serde_json::from_value(obj).unwrap();
    Api::<DynamicObject>::namespaced_with(client.clone(), NS, &ar)
        .create(&PostParams::default(), &obj)
        .await
        .unwrap();
}

async fn warning(client: &kube::Client, name: &str) -> String {
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let sel = ListParams::default().fields(&format!("involvedObject.name={name}"));
    wait_for(30, &format!("a Warning event about {name}"), || {
        let (events, sel) = (events.clone(), sel.clone());
        async move {
            events.list(&sel).await.ok()?.items.into_iter().find_map(|e| {
                (e.type_.as_deref() == Some("Warning") && e.reason.as_deref() == Some(UNREADABLE_REASON))
                    .then(|| e.message.unwrap_or_default())
            })
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn unreadable_objects_are_reported_and_the_others_go_on() {
    let logs = Logs::capture();
    let mut h = Harness::start().await;
    // A damaged machine of cluster c1 exists before the controllers start (their first list holds it).
    h.kill_controllers().await;
    create_v1alpha1(
        &h.client,
        "ProxmoxMachine",
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxMachine",
            "metadata": {"name": "damaged-machine", "namespace": NS, "labels": {"cluster.x-k8s.io/cluster-name": "c1"}},
            "spec": {"sourceNode": "pve1", "templateID": 100,
                     "network": {"default": {"bridge": "vmbr0"}}},
        }),
    )
    .await;
    let typed = h.pms().get("damaged-machine").await;
    assert!(
        matches!(&typed, Err(kube::Error::SerdeError(e)) if e.to_string().contains("networkDevices")),
        "the stored machine should not decode: {typed:?}"
    );
    h.start_controllers();
    // A damaged cluster appears while they run (a watch event).
    create_v1alpha1(
        &h.client,
        "ProxmoxCluster",
        json!({
            "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxCluster",
            "metadata": {"name": "damaged-cluster", "namespace": NS},
            "spec": {"dnsServers": ["10.0.0.1"], "ipv4Config": {"addresses": ["10.9.0.10-10.9.0.20"], "prefix": 24}},
        }),
    )
    .await;
    assert!(
        Api::<ProxmoxCluster>::namespaced(h.client.clone(), NS)
            .get("damaged-cluster")
            .await
            .is_err()
    );

    // The others go on: a cluster and a machine of the damaged machine's cluster.
    h.create_cluster("c1", json!({})).await;
    h.create_machine(
        "c1",
        "m1",
        true,
        Some((CLOUD_CONFIG, Some("cloud-config"))),
        json!({}),
    )
    .await;
    let m1: ProxmoxMachine = h.wait_provisioned("m1", 120).await;
    assert!(m1.spec.provider_id.is_some());

    let note = warning(&h.client, "damaged-machine").await;
    assert_eq!(
        note,
        format!(
            "cannot read ProxmoxMachine {NS}/damaged-machine as infrastructure.cluster.x-k8s.io/v1alpha2: \
             field spec.network: missing field `networkDevices`; it is not reconciled until it is fixed"
        )
    );
    let note = warning(&h.client, "damaged-cluster").await;
    assert!(
        note.contains("ProxmoxCluster machines/damaged-cluster")
            && note.contains("field spec.ipv4Config: missing field `gateway`"),
        "{note}"
    );
    let text = logs.text();
    for (object, field) in [
        ("ProxmoxMachine machines/damaged-machine", "field spec.network"),
        ("ProxmoxCluster machines/damaged-cluster", "field spec.ipv4Config"),
    ] {
        assert!(
            text.lines()
                .any(|l| l.contains("WARN") && l.contains(object) && l.contains(field)),
            "no log line about {object}:\n{text}"
        );
    }
    h.stop().await;
}
