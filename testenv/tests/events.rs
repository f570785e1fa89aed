//! Events in core/v1 and events.k8s.io/v1 — one resource served through both APIs, as on
//! kube-apiserver (kube-runtime's `Recorder` writes the latter).
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
    // One resource, two APIs: the Recorder's events.k8s.io Event is a core Event too.
    let evs: Api<Event> = Api::namespaced(c.clone(), &ns);
    let core: Api<CoreEvent> = Api::namespaced(c.clone(), &ns);
    let list = evs.list(&ListParams::default()).await.unwrap();
    let recorded = list
        .items
        .iter()
        .find(|e| e.reason.as_deref() == Some("Tested"))
        .unwrap_or_else(|| panic!("{list:?}"));
    let name = recorded.metadata.name.clone().unwrap();
    let as_core = core.get(&name).await.unwrap();
    assert_eq!(as_core.message.as_deref(), Some("hello"), "note is message");
    assert_eq!(
        as_core.involved_object.name.as_deref(),
        Some("subject"),
        "regarding is involvedObject"
    );
    assert_eq!(as_core.involved_object.kind.as_deref(), Some("ConfigMap"));
    assert_eq!(as_core.reporting_component.as_deref(), Some("testenv-test"));
    assert_eq!(as_core.action.as_deref(), Some("Test"));
    assert!(as_core.event_time.is_some());

    let e: CoreEvent = serde_json::from_value(json!({
        "metadata": {"name": "core-ev"},
        "involvedObject": {"kind": "ConfigMap", "name": "subject", "namespace": ns},
        "reason": "CoreTested", "message": "hi", "type": "Normal",
        "source": {"component": "comp"}, "count": 3,
    }))
    .unwrap();
    core.create(&PostParams::default(), &e).await.unwrap();
    assert_eq!(
        core.get("core-ev").await.unwrap().reason.as_deref(),
        Some("CoreTested")
    );
    let as_new = evs.get("core-ev").await.unwrap();
    assert_eq!(as_new.note.as_deref(), Some("hi"));
    assert_eq!(as_new.regarding.unwrap().name.as_deref(), Some("subject"));
    assert_eq!(
        as_new.deprecated_source.unwrap().component.as_deref(),
        Some("comp")
    );
    assert_eq!(as_new.deprecated_count, Some(3));
    assert_eq!(core.list(&ListParams::default()).await.unwrap().items.len(), 2);
    assert_eq!(evs.list(&ListParams::default()).await.unwrap().items.len(), 2);

    // Field selectors on event fields (what `kubectl describe` uses), each API its own names.
    let sel = ListParams::default().fields("involvedObject.kind=ConfigMap,involvedObject.name=subject");
    assert_eq!(core.list(&sel).await.unwrap().items.len(), 2);
    let sel = ListParams::default().fields("regarding.name=subject,reason=CoreTested");
    assert_eq!(evs.list(&sel).await.unwrap().items.len(), 1);
    let none = ListParams::default().fields("involvedObject.name=other");
    assert!(core.list(&none).await.unwrap().items.is_empty());
    let e = common::api_err(
        evs.list(&ListParams::default().fields("involvedObject.name=x"))
            .await,
    );
    assert_eq!(
        (e.code, e.message.as_str()),
        (400, "field label not supported: involvedObject.name")
    );

    // events.k8s.io/v1 validates strictly: eventTime, reporting fields, no deprecated fields.
    let bad: Event = serde_json::from_value(json!({
        "metadata": {"name": "bad"},
        "regarding": {"kind": "ConfigMap", "name": "subject", "namespace": ns},
        "reason": "R", "note": "n", "type": "Normal",
    }))
    .unwrap();
    let e = common::api_err(evs.create(&PostParams::default(), &bad).await);
    assert_eq!(
        (e.code, e.message.as_str()),
        (422, "Event \"bad\" is invalid: eventTime: Required value")
    );
}
