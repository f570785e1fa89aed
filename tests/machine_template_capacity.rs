//! ProxmoxMachineTemplate controller against the test control plane: a template gets
//! `status.capacity` and `status.nodeInfo` for the cluster-autoscaler, follows spec changes
//! (including entries that must disappear), and leaves an up-to-date status alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use capmox::context::{Context, ControllerSettings};
use capmox::controllers::machine_template;
use capmox::credentials::ProxmoxClients;
use capmox::metrics::Metrics;
use capmox_api::v1alpha2::{ProxmoxMachineTemplate, ProxmoxMachineTemplateStatus};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::{Value, json};
use testenv::{TestEnv, wait_for};

const NS: &str = "capmox-templates";

fn template(name: &str, sockets: i64, cores: i64, memory: Option<i64>) -> ProxmoxMachineTemplate {
    let mut spec = json!({
        "sourceNode": "pve1",
        "templateID": 100,
        "numSockets": sockets,
        "numCores": cores,
        "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}
    });
    if let Some(m) = memory {
        spec["memoryMiB"] = json!(m);
    }
    serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxMachineTemplate",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"template": {"spec": spec}}
    }))
    .unwrap()
}

fn status_json(t: &ProxmoxMachineTemplate) -> Value {
    serde_json::to_value(
        t.status
            .as_ref()
            .unwrap_or(&ProxmoxMachineTemplateStatus::default()),
    )
    .unwrap()
}

async fn wait_status(api: &Api<ProxmoxMachineTemplate>, name: &str, want: Value) -> ProxmoxMachineTemplate {
    let what = format!("status {want} on {name}");
    wait_for(30, &what, || async {
        let t = api.get(name).await.ok()?;
        (status_json(&t) == want).then_some(t)
    })
    .await
}

/// Reconciles of the template controller that have finished (the duration histogram's count).
fn finished(metrics: &Metrics) -> u64 {
    let prefix = "capmox_reconcile_duration_seconds_count{controller=\"proxmoxmachinetemplate\"} ";
    metrics
        .render()
        .lines()
        .find_map(|l| l.strip_prefix(prefix))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread")]
async fn template_status_follows_the_spec() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = TestEnv::start().await.expect("control plane starts");
    let client = env.client();
    env.install_crds(capmox_api::crd::all().unwrap()).await.unwrap();
    let ns: Namespace = serde_json::from_value(json!({"metadata": {"name": NS}})).unwrap();
    Api::<Namespace>::all(client.clone())
        .create(&PostParams::default(), &ns)
        .await
        .unwrap();
    let metrics = Arc::new(Metrics::new());
    let ctx = Arc::new(Context::new(
        client.clone(),
        metrics.clone(),
        ControllerSettings {
            concurrency: 2,
            ..ControllerSettings::default()
        },
        Arc::new(ProxmoxClients::new(None, metrics.proxmox_observer())),
    ));
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(machine_template::run(ctx.clone(), async move {
        let _ = rx.await;
    }));

    let api: Api<ProxmoxMachineTemplate> = Api::namespaced(client.clone(), NS);
    api.create(&PostParams::default(), &template("workers", 2, 4, Some(16384)))
        .await
        .unwrap();
    let node_info = json!({"architecture": "amd64", "operatingSystem": "linux"});
    wait_status(
        &api,
        "workers",
        json!({"capacity": {"cpu": "8", "memory": "16384Mi"}, "nodeInfo": node_info}),
    )
    .await;
    assert!(metrics.reconcile_count(machine_template::CONTROLLER) >= 1);
    assert!(
        metrics
            .render()
            .contains("capmox_reconcile_total{controller=\"proxmoxmachinetemplate\"}"),
        "reconcile counter with the controller label"
    );

    // numCores changes: the CPU count follows.
    api.patch(
        "workers",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"numCores": 6}}}})),
    )
    .await
    .unwrap();
    let t = wait_status(
        &api,
        "workers",
        json!({"capacity": {"cpu": "12", "memory": "16384Mi"}, "nodeInfo": node_info}),
    )
    .await;

    // memoryMiB removed (the VM keeps the Proxmox template's memory): `memory` disappears.
    api.patch(
        "workers",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"template": {"spec": {"memoryMiB": null}}}})),
    )
    .await
    .unwrap();
    let t2 = wait_status(
        &api,
        "workers",
        json!({"capacity": {"cpu": "12"}, "nodeInfo": node_info}),
    )
    .await;
    assert_ne!(t.metadata.resource_version, t2.metadata.resource_version);

    // A status already right is not written again: a label change reconciles the template
    // (the reconcile finishes, its duration is recorded) without a status write.
    let finished_before = finished(&metrics);
    let labelled = api
        .patch(
            "workers",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"pool": "a"}}})),
        )
        .await
        .unwrap();
    wait_for(30, "the reconcile after the label change", || async {
        (finished(&metrics) > finished_before).then_some(())
    })
    .await;
    let again = api.get("workers").await.unwrap();
    assert_eq!(
        again.metadata.resource_version,
        labelled.metadata.resource_version
    );
    assert_eq!(status_json(&again), status_json(&t2));

    // A second template gets its own status.
    api.create(&PostParams::default(), &template("small", 1, 2, Some(2048)))
        .await
        .unwrap();
    wait_status(
        &api,
        "small",
        json!({"capacity": {"cpu": "2", "memory": "2048Mi"}, "nodeInfo": node_info}),
    )
    .await;

    // A status someone else changed is put back.
    api.patch_status(
        "small",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"capacity": {"cpu": "99"}}})),
    )
    .await
    .unwrap();
    wait_status(
        &api,
        "small",
        json!({"capacity": {"cpu": "2", "memory": "2048Mi"}, "nodeInfo": node_info}),
    )
    .await;

    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(30), task)
        .await
        .expect("the controller stops on shutdown")
        .unwrap();
}
