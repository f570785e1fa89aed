//! The controllers' event recorder against the API server (in-tree, or the real kube-apiserver
//! with `KUBEBUILDER_ASSETS`): a first event is created, a repeat within six minutes becomes a
//! series of the same Event (the patch the real server must accept), a different event is new.

use capmox::controllers::events::{Event, EventType, Recorder, Reporter};
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference};
use k8s_openapi::api::events::v1::Event as K8sEvent;
use kube::api::{ListParams, PostParams};
use kube::{Api, Resource};

fn event(reason: &str, note: &str) -> Event {
    Event {
        type_: EventType::Warning,
        reason: reason.into(),
        note: Some(note.into()),
        action: "Reconcile".into(),
        secondary: None,
    }
}

#[tokio::test]
async fn repeats_become_a_series_of_one_event() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let env = testenv::TestEnv::start().await.unwrap();
    let client = env.client();
    let cms: Api<ConfigMap> = Api::namespaced(client.clone(), "default");
    let mut cm = ConfigMap::default();
    cm.metadata.name = Some("regarded".into());
    let cm = cms.create(&PostParams::default(), &cm).await.unwrap();
    let regarding: ObjectReference = cm.object_ref(&());
    let recorder = Recorder::new(
        client.clone(),
        Reporter {
            controller: "proxmox-controller".into(),
            instance: Some("pod-a".into()),
        },
    );

    recorder
        .publish(&event("CloneFailed", "first"), &regarding)
        .await
        .unwrap();
    recorder
        .publish(&event("CloneFailed", "second"), &regarding)
        .await
        .unwrap();
    recorder
        .publish(&event("CloneFailed", "third"), &regarding)
        .await
        .unwrap();
    recorder
        .publish(&event("Provisioned", "other"), &regarding)
        .await
        .unwrap();

    let events: Api<K8sEvent> = Api::namespaced(client, "default");
    let list = events.list(&ListParams::default()).await.unwrap().items;
    let ours: Vec<&K8sEvent> = list
        .iter()
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some("regarded"))
        .collect();
    assert_eq!(ours.len(), 2, "one Event per distinct event: {ours:#?}");
    let failed = ours
        .iter()
        .find(|e| e.reason.as_deref() == Some("CloneFailed"))
        .expect("the repeated event");
    let series = failed.series.as_ref().expect("a series");
    assert_eq!(series.count, 3);
    assert_eq!(
        failed.note.as_deref(),
        Some("first"),
        "a series keeps its first note"
    );
    assert_eq!(failed.type_.as_deref(), Some("Warning"));
    assert_eq!(failed.reporting_controller.as_deref(), Some("proxmox-controller"));
    assert_eq!(failed.reporting_instance.as_deref(), Some("pod-a"));
    let other = ours
        .iter()
        .find(|e| e.reason.as_deref() == Some("Provisioned"))
        .expect("the other event");
    assert!(other.series.is_none());
}
