//! Sharding one management cluster across managers, and controller-runtime's metric names.
//!
//! Two managers share a control plane and a Proxmox (pve-sim), started from the command line as
//! an operator would start them: `--watch-filter=a --namespace=<ns>,<ns2>` and
//! `--watch-filter=b --namespace=<ns>`. Each ProxmoxCluster labelled
//! `cluster.x-k8s.io/watch-filter=a` (in either namespace) is reconciled by the first manager
//! only, the one labelled `b` by the second only, and the unlabelled one and the `b` one outside
//! the second manager's namespaces by neither. Which manager reconciled a cluster shows in its
//! own `/metrics` (`capmox_proxmox_cluster_connected{name}`), scraped over HTTP, and the scrape
//! carries controller-runtime's families with their labels and buckets.

#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers outside #[test] fns

mod cluster_support;

use std::io::Write;
use std::time::Duration;

use capmox::cli::Cli;
use capmox::manager::{Manager, options_from_cli};
use capmox_api::capi::v1beta2;
use capmox_api::v1alpha2::ProxmoxCluster;
use clap::Parser;
use cluster_support::{Harness, NS, cond, fast_settings, spec, wait_for};
use k8s_openapi::api::core::v1::Namespace;
use kube::api::{Api, PostParams};
use kube::{Resource, ResourceExt};
use serde_json::json;

const NS2: &str = "capmox-test-2";

/// A Cluster and its ProxmoxCluster `name` in `ns`, labelled with `filter` when given.
async fn labelled_cluster(h: &Harness, ns: &str, name: &str, filter: Option<&str>) {
    let mut labels = json!({"cluster.x-k8s.io/cluster-name": name});
    if let Some(f) = filter {
        labels["cluster.x-k8s.io/watch-filter"] = json!(f);
    }
    let mut c = v1beta2::Cluster::new(
        name,
        v1beta2::ClusterSpec {
            infrastructure_ref: Some(v1beta2::ContractVersionedObjectReference {
                api_group: "infrastructure.cluster.x-k8s.io".into(),
                kind: "ProxmoxCluster".into(),
                name: name.into(),
            }),
            ..Default::default()
        },
    );
    c.metadata.namespace = Some(ns.into());
    c.metadata.labels = serde_json::from_value(labels.clone()).unwrap();
    let c = Api::<v1beta2::Cluster>::namespaced(h.client.clone(), ns)
        .create(&PostParams::default(), &c)
        .await
        .unwrap();
    let pc: ProxmoxCluster = serde_json::from_value(json!({
        "apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2",
        "kind": "ProxmoxCluster",
        "metadata": {
            "name": name, "namespace": ns, "labels": labels,
            "ownerReferences": [{
                "apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster", "name": name,
                "uid": c.meta().uid.clone().unwrap(), "controller": true, "blockOwnerDeletion": true,
            }],
        },
        "spec": spec(None),
    }))
    .unwrap();
    Api::<ProxmoxCluster>::namespaced(h.client.clone(), ns)
        .create(&PostParams::default(), &pc)
        .await
        .unwrap();
}

/// A manager started from `args` (plus the test's addresses and the simulator's credentials).
async fn start_manager(
    h: &Harness,
    ca_file: &std::path::Path,
    args: &[&str],
) -> (
    std::net::SocketAddr,
    tokio::sync::oneshot::Sender<()>,
    tokio::task::JoinHandle<()>,
) {
    let url = h.proxy.url();
    let token = format!("--proxmox-token={}", h.sim.token_id());
    let secret = format!("--proxmox-secret={}", h.sim.token_secret());
    let ca = format!("--proxmox-root-cert-file={}", ca_file.display());
    let url = format!("--proxmox-url={url}");
    let mut all = vec![
        "capmox",
        "--diagnostics-address=127.0.0.1:0",
        "--insecure-diagnostics",
        "--health-probe-bind-address=0",
        "--enable-webhooks=false",
        "--proxmox-insecure=false",
        url.as_str(),
        token.as_str(),
        secret.as_str(),
        ca.as_str(),
    ];
    all.extend_from_slice(args);
    let cli = Cli::try_parse_from(all).unwrap();
    let mut options = options_from_cli(&cli).unwrap();
    options.settings.cluster = fast_settings();
    let manager = Manager::new(h.client.clone(), options).await.unwrap();
    let addr = manager.metrics_addr().unwrap();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        manager
            .run(async move {
                let _ = stopped.await;
            })
            .await
            .unwrap();
    });
    (addr, stop, task)
}

async fn scrape(addr: std::net::SocketAddr) -> String {
    reqwest::Client::new()
        .get(format!("http://{addr}/metrics"))
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// The namespace/name pairs a scrape has a connectivity gauge for.
fn reconciled(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("capmox_proxmox_cluster_connected{"))
        .map(|l| {
            let field = |k: &str| {
                l.split(&format!("{k}=\""))
                    .nth(1)
                    .and_then(|r| r.split('"').next())
                    .unwrap_or("")
            };
            format!("{}/{}", field("namespace"), field("name"))
        })
        .collect();
    v.sort();
    v
}

/// The value of the first sample line starting with `prefix`.
fn sample(text: &str, prefix: &str) -> f64 {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no sample {prefix:?} in\n{text}"))
}

#[tokio::test]
async fn two_managers_split_clusters_by_watch_filter_and_namespace() {
    let h = Harness::start_without_controller().await;
    let ns2: Namespace = serde_json::from_value(json!({"metadata": {"name": NS2}})).unwrap();
    Api::<Namespace>::all(h.client.clone())
        .create(&PostParams::default(), &ns2)
        .await
        .unwrap();
    let mut ca = tempfile::NamedTempFile::new().unwrap();
    ca.write_all(h.sim.ca_pem().unwrap().as_bytes()).unwrap();

    let namespaces = format!("--namespace={NS},{NS2}");
    let only_ns = format!("--namespace={NS}");
    let (a_addr, a_stop, a_task) = start_manager(&h, ca.path(), &["--watch-filter=a", &namespaces]).await;
    let (b_addr, b_stop, b_task) = start_manager(&h, ca.path(), &["--watch-filter=b", &only_ns]).await;

    labelled_cluster(&h, NS, "shard-a", Some("a")).await;
    labelled_cluster(&h, NS2, "shard-a2", Some("a")).await;
    labelled_cluster(&h, NS, "shard-b", Some("b")).await;
    labelled_cluster(&h, NS2, "shard-b2", Some("b")).await;
    labelled_cluster(&h, NS, "unlabelled", None).await;

    for (ns, name) in [(NS, "shard-a"), (NS2, "shard-a2"), (NS, "shard-b")] {
        let api: Api<ProxmoxCluster> = Api::namespaced(h.client.clone(), ns);
        wait_for(30, &format!("{ns}/{name} available"), || {
            let api = api.clone();
            async move {
                let pc = api.get(name).await.unwrap();
                cond(pc.status.as_ref()?, "ProxmoxAvailable")
                    .is_some_and(|c| c.status == "True")
                    .then_some(())
            }
        })
        .await;
    }

    let a = scrape(a_addr).await;
    let b = scrape(b_addr).await;
    assert_eq!(
        reconciled(&a),
        [format!("{NS2}/shard-a2"), format!("{NS}/shard-a")],
        "{a}"
    );
    assert_eq!(reconciled(&b), [format!("{NS}/shard-b")], "{b}");
    // Nobody touched the clusters outside every shard.
    for (ns, name) in [(NS, "unlabelled"), (NS2, "shard-b2")] {
        let pc = Api::<ProxmoxCluster>::namespaced(h.client.clone(), ns)
            .get(name)
            .await
            .unwrap();
        assert!(
            pc.status.is_none() && pc.finalizers().is_empty(),
            "{ns}/{name} was reconciled: {pc:?}"
        );
    }

    // controller-runtime's families, under its names, labels and buckets.
    for needle in [
        "# TYPE controller_runtime_reconcile counter",
        "# TYPE controller_runtime_reconcile_errors counter",
        "# TYPE controller_runtime_reconcile_time_seconds histogram",
        "controller_runtime_reconcile_time_seconds_bucket{le=\"0.005\",controller=\"proxmoxcluster\"}",
        "controller_runtime_reconcile_time_seconds_bucket{le=\"60.0\",controller=\"proxmoxcluster\"}",
        "controller_runtime_reconcile_errors_total{controller=\"proxmoxmachine\"} 0",
        "controller_runtime_max_concurrent_reconciles{controller=\"proxmoxmachine\"} 10",
        "controller_runtime_active_workers{controller=\"proxmoxmachinetemplate\"}",
        "controller_runtime_terminal_reconcile_errors_total{controller=\"proxmoxcluster\"} 0",
        "controller_runtime_reconcile_panics_total{controller=\"proxmoxcluster\"} 0",
        "workqueue_depth{name=\"proxmoxcluster\",controller=\"proxmoxcluster\",priority=\"\"}",
        "# TYPE workqueue_queue_duration_seconds histogram",
        "workqueue_queue_duration_seconds_bucket{le=\"1e-8\",name=\"proxmoxcluster\",controller=\"proxmoxcluster\"}",
        "# TYPE workqueue_work_duration_seconds histogram",
        "workqueue_unfinished_work_seconds{name=\"proxmoxmachine\",controller=\"proxmoxmachine\"}",
        "workqueue_longest_running_processor_seconds{name=\"proxmoxcluster\",controller=\"proxmoxcluster\"}",
        "workqueue_retries_total{name=\"proxmoxcluster\",controller=\"proxmoxcluster\"}",
    ] {
        assert!(a.contains(needle), "missing {needle:?} in\n{a}");
    }
    let total: f64 = ["success", "error", "requeue", "requeue_after"]
        .iter()
        .map(|r| {
            sample(
                &a,
                &format!(
                    "controller_runtime_reconcile_total{{controller=\"proxmoxcluster\",result=\"{r}\"}}"
                ),
            )
        })
        .sum();
    assert!(total >= 2.0, "shard a has two clusters: {total}\n{a}");
    assert!(
        sample(
            &a,
            "workqueue_adds_total{name=\"proxmoxcluster\",controller=\"proxmoxcluster\"}"
        ) >= 2.0
    );
    assert!(
        sample(
            &a,
            "workqueue_work_duration_seconds_count{name=\"proxmoxcluster\",controller=\"proxmoxcluster\"}"
        ) >= 2.0
    );
    // A ready cluster is re-probed after a delay: a requeue, counted as a retry.
    assert!(
        sample(
            &a,
            "controller_runtime_reconcile_total{controller=\"proxmoxcluster\",result=\"requeue_after\"}"
        ) >= 1.0
    );

    for (stop, task) in [(a_stop, a_task), (b_stop, b_task)] {
        stop.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(20), task)
            .await
            .unwrap()
            .unwrap();
    }
    h.stop().await;
}
