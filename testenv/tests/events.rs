//! Events in core/v1 and events.k8s.io/v1 (kube-runtime's `Recorder` writes the latter).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use k8s_openapi::api::core::v1::{ConfigMap, Event as CoreEvent};
use k8s_openapi::api::events::v1::Event;
use kube::Resource;
use kube::api::{Api, ListParams, PostParams};
use kube::runtime::events::{Event as RecordedEvent, EventType, Recorder, Reporter};
use serde_json::json;

#[tokio::test]
async fn core_and_events_k8s_io_events() {
    let env = common::env().await;
    let c = env.client();
    let ns = common::namespace(&c).await;
    let cms: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let cm = cms
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "subject"}})).unwrap(),
        )
        .await
        .unwrap();

    let recorder = Recorder::new(
        c.clone(),
        Reporter {
            controller: "testenv-test".into(),
            instance: None,
        },
    );
    recorder
        .publish(
            &RecordedEvent {
                type_: EventType::Normal,
                reason: "Tested".into(),
                note: Some("hello".into()),
                action: "Test".into(),
                secondary: None,
            },
            &cm.object_ref(&()),
        )
        .await
        .unwrap();
    let evs: Api<Event> = Api::namespaced(c.clone(), &ns);
    let list = evs.list(&ListParams::default()).await.unwrap();
    assert!(
        list.items.iter().any(|e| e.reason.as_deref() == Some("Tested")),
        "{list:?}"
    );

    let core: Api<CoreEvent> = Api::namespaced(c.clone(), &ns);
    let e: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "core-ev"},
        "involvedObject": {"kind": "ConfigMap", "name": "subject", "namespace": ns},
        "reason": "CoreTested", "message": "hi", "type": "Normal"
    }))
    .unwrap();
    core.create(&PostParams::default(), &e).await.unwrap();
    assert_eq!(
        core.get("core-ev").await.unwrap().reason.as_deref(),
        Some("CoreTested")
    );
    // Field selectors on event fields (what `kubectl describe` uses).
    let sel = ListParams::default().fields("involvedObject.kind=ConfigMap,involvedObject.name=subject");
    assert_eq!(core.list(&sel).await.unwrap().items.len(), 1);
    let none = ListParams::default().fields("involvedObject.name=other");
    assert!(core.list(&none).await.unwrap().items.is_empty());
}
