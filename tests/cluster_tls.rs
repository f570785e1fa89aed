//! TLS to Proxmox per ProxmoxCluster, with capmox's reading of the credentials Secret: no
//! `insecure` key means no verification (signalled by the `capmox_proxmox_tls_insecure` gauge and
//! one `ProxmoxTLSInsecure` Warning event, not one per reconcile); `insecure: "false"` with the
//! right `root_ca` verifies; a wrong or missing CA fails closed with a condition that names the
//! certificate problem, and fixing the Secret recovers.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod cluster_support;

use std::collections::BTreeMap;

use cluster_support::{Harness, NS, cond, spec, wait_for};
use k8s_openapi::ByteString;
use k8s_openapi::api::core::v1::Secret;
use k8s_openapi::api::events::v1::Event;
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use serde_json::json;

async fn secret(h: &Harness, name: &str, tls: &[(&str, &str)]) {
    let mut data = BTreeMap::from([
        ("url".to_owned(), h.proxy.url()),
        ("token".to_owned(), h.sim.token_id().to_owned()),
        ("secret".to_owned(), h.sim.token_secret().to_owned()),
    ]);
    for (k, v) in tls {
        data.insert((*k).to_owned(), (*v).to_owned());
    }
    let s = Secret {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            namespace: Some(NS.into()),
            ..Default::default()
        },
        data: Some(
            data.into_iter()
                .map(|(k, v)| (k, ByteString(v.into_bytes())))
                .collect(),
        ),
        ..Default::default()
    };
    h.secrets().create(&PostParams::default(), &s).await.unwrap();
}

fn gauge(h: &Harness, name: &str) -> Option<i64> {
    let text = h.ctx.metrics.render();
    text.lines()
        .filter(|l| l.starts_with("capmox_proxmox_tls_insecure{"))
        .find(|l| l.contains(&format!("name=\"{name}\"")))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.trim().parse().ok())
}

async fn tls_events(h: &Harness, name: &str) -> Vec<Event> {
    let events: kube::Api<Event> = kube::Api::namespaced(h.client.clone(), NS);
    events
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| {
            e.reason.as_deref() == Some("ProxmoxTLSInsecure")
                && e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name)
        })
        .collect()
}

async fn more_probes(h: &Harness, n: u64) {
    let before = h.sim.state().request_count("GET /version");
    wait_for(30, "more Proxmox probes", || async {
        (h.sim.state().request_count("GET /version") >= before + n).then_some(())
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn insecure_secret_is_signalled_once_and_verified_secret_is_not() {
    let h = Harness::start().await;
    // capmox's pre-v0.7 Secrets have no `insecure` key: verification is off.
    secret(&h, "legacy", &[]).await;
    secret(
        &h,
        "verified",
        &[("insecure", "false"), ("root_ca", &h.sim.ca_pem().unwrap())],
    )
    .await;
    for (name, creds) in [("legacy", "legacy"), ("verified", "verified")] {
        let c = h.create_cluster(name, false).await;
        h.create_pc(name, Some(&c), spec(Some(creds)), json!({})).await;
    }
    h.wait_available("legacy", "True", "Provisioned").await;
    h.wait_available("verified", "True", "Provisioned").await;
    assert_eq!(gauge(&h, "legacy"), Some(1));
    assert_eq!(gauge(&h, "verified"), Some(0));

    let warned = wait_for(30, "the ProxmoxTLSInsecure event", || async {
        let e = tls_events(&h, "legacy").await;
        (!e.is_empty()).then_some(e)
    })
    .await;
    let note = warned[0].note.clone().unwrap_or_default();
    assert_eq!(warned[0].type_.as_deref(), Some("Warning"));
    assert!(
        note.contains("is disabled") && note.contains(&format!("{NS}/legacy")) && note.contains("root_ca"),
        "{note}"
    );
    assert!(!note.contains(h.sim.token_secret()), "{note}");
    // Several resyncs later: still one event, not one per reconcile.
    more_probes(&h, 4).await;
    let again = tls_events(&h, "legacy").await;
    assert_eq!(again.len(), 1, "{again:?}");
    assert!(
        again[0].series.is_none() && again[0].deprecated_count.unwrap_or(1) <= 1,
        "{again:?}"
    );
    assert!(tls_events(&h, "verified").await.is_empty());

    // Turning verification on clears the gauge; the cluster stays available.
    let patch = json!({"stringData": {"insecure": "false", "root_ca": h.sim.ca_pem().unwrap()}});
    h.secrets()
        .patch("legacy", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    wait_for(30, "the gauge to drop", || async {
        (gauge(&h, "legacy") == Some(0)).then_some(())
    })
    .await;
    h.wait_available("legacy", "True", "Provisioned").await;
    h.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn wrong_or_missing_ca_fails_closed_with_the_certificate_problem() {
    let h = Harness::start().await;
    let other_ca = testenv::certs::generate().unwrap().ca_pem;
    secret(&h, "wrong-ca", &[("insecure", "false"), ("root_ca", &other_ca)]).await;
    // Verification on without a root_ca: the public roots do not know the simulator's CA.
    secret(&h, "no-ca", &[("insecure", "0")]).await;
    for name in ["wrong-ca", "no-ca"] {
        let c = h.create_cluster(name, false).await;
        h.create_pc(name, Some(&c), spec(Some(name)), json!({})).await;
    }
    for name in ["wrong-ca", "no-ca"] {
        let pc = h.wait_available(name, "False", "ProxmoxUnreachable").await;
        let s = pc.status.as_ref().unwrap();
        let msg = &cond(s, "ProxmoxAvailable").unwrap().message;
        assert!(
            msg.contains("TLS certificate verification failed")
                && msg.contains("unknown certificate authority")
                && msg.contains("root_ca"),
            "{name}: {msg}"
        );
        assert!(!msg.contains(h.sim.token_secret()), "{msg}");
        assert_ne!(
            s.initialization.as_ref().and_then(|i| i.provisioned),
            Some(true),
            "{name}"
        );
        assert_eq!(gauge(&h, name), Some(0), "verification is on for {name}");
        assert!(tls_events(&h, name).await.is_empty());
    }
    // No request got through: the simulator never answered an authenticated call for them
    // (only the insecure/verified clusters of other tests would).
    assert_eq!(h.sim.state().request_count("GET /version"), 0);

    // Fixing the Secret (the right CA) recovers without a restart.
    let patch = json!({"stringData": {"root_ca": h.sim.ca_pem().unwrap()}});
    h.secrets()
        .patch("wrong-ca", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    h.wait_available("wrong-ca", "True", "Provisioned").await;
    h.stop().await;
}
