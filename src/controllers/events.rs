//! The event recorder: publishes `events.k8s.io/v1` Events the way kube-runtime's `Recorder` does
//! (a repeat of the same event within six minutes becomes a series: one patch of `series.count`
//! instead of a new Event), but remembers each recent event in a few dozen bytes — a hash of its
//! identity, its name and its count — instead of a full copy of the Event and its key. With a
//! thousand machines each publishing an event, kube-runtime's cache held megabytes.
//!
//! A manager whose role does not allow `events.k8s.io` (capmox v0.9's ClusterRole grants core
//! `v1` Events only: an image-only swap keeps it) publishes core `v1` Events instead, from the
//! first refusal on — the same Event, written through the API capmox's controller-runtime uses.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{Event as CoreEvent, EventSource, ObjectReference};
use k8s_openapi::api::events::v1::{Event as K8sEvent, EventSeries};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, Patch, PatchParams, PostParams};
pub use kube::runtime::events::{Event, EventType, Reporter};

/// How long a published event can still become a series (kube-runtime's and client-go's TTL).
const SERIES_TTL: SignedDuration = SignedDuration::from_mins(6);

/// A recently published event: its name, how often it was seen and when last, and whether it is
/// a core `v1` Event.
#[derive(Debug, Clone)]
struct Recent {
    name: String,
    count: i32,
    last: Timestamp,
    core: bool,
}

/// Whether the switch to core `v1` Events was logged (once per process).
static CORE_FALLBACK_LOGGED: AtomicBool = AtomicBool::new(false);

/// Publishes Events for the controllers (cheap to clone; clones share the series memory).
#[derive(Clone)]
pub struct Recorder {
    client: kube::Client,
    reporter: Reporter,
    recent: Arc<Mutex<HashMap<u64, Recent>>>,
    /// `events.k8s.io` was refused: publish core `v1` Events.
    core: Arc<AtomicBool>,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("reporter", &self.reporter)
            .finish_non_exhaustive()
    }
}

/// The identity of an event: what kube-runtime keys its series on (type, action, reason,
/// reporter, the object regarded and the related one).
fn identity(reporter: &Reporter, ev: &Event, regarding: &ObjectReference) -> u64 {
    let mut h = DefaultHasher::new();
    matches!(ev.type_, EventType::Warning).hash(&mut h);
    ev.action.hash(&mut h);
    ev.reason.hash(&mut h);
    reporter.controller.hash(&mut h);
    reporter.instance.hash(&mut h);
    for r in std::iter::once(Some(regarding)).chain(std::iter::once(ev.secondary.as_ref())) {
        match r {
            Some(r) => {
                true.hash(&mut h);
                (&r.api_version, &r.kind, &r.name, &r.namespace).hash(&mut h);
                (&r.uid, &r.resource_version, &r.field_path).hash(&mut h);
            }
            None => false.hash(&mut h),
        }
    }
    h.finish()
}

impl Recorder {
    /// A recorder publishing as `reporter`.
    pub fn new(client: kube::Client, reporter: Reporter) -> Self {
        Self {
            client,
            reporter,
            recent: Arc::default(),
            core: Arc::default(),
        }
    }

    fn recent(&self) -> std::sync::MutexGuard<'_, HashMap<u64, Recent>> {
        self.recent
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The Event a first occurrence creates.
    fn new_event(&self, ev: &Event, regarding: &ObjectReference, now: Timestamp) -> K8sEvent {
        let name = format!(
            "{}.{:x}",
            regarding.name.as_ref().unwrap_or(&self.reporter.controller),
            now.as_nanosecond()
        );
        K8sEvent {
            action: Some(ev.action.clone()),
            reason: Some(ev.reason.clone()),
            event_time: Some(MicroTime(now)),
            regarding: Some(regarding.clone()),
            note: ev.note.clone(),
            metadata: ObjectMeta {
                namespace: regarding.namespace.clone(),
                name: Some(name),
                ..Default::default()
            },
            reporting_controller: Some(self.reporter.controller.clone()),
            reporting_instance: Some(
                self.reporter
                    .instance
                    .clone()
                    .unwrap_or_else(|| self.reporter.controller.clone()),
            ),
            type_: Some(
                match ev.type_ {
                    EventType::Normal => "Normal",
                    EventType::Warning => "Warning",
                }
                .to_owned(),
            ),
            related: ev.secondary.clone(),
            ..Default::default()
        }
    }

    /// The core `v1` Event a first occurrence creates when `events.k8s.io` is refused (the fields
    /// client-go's legacy recorder writes).
    fn new_core_event(&self, ev: &K8sEvent) -> CoreEvent {
        let at = ev.event_time.as_ref().map(|t| Time(t.0));
        CoreEvent {
            metadata: ev.metadata.clone(),
            involved_object: ev.regarding.clone().unwrap_or_default(),
            reason: ev.reason.clone(),
            message: ev.note.clone(),
            type_: ev.type_.clone(),
            action: ev.action.clone(),
            related: ev.related.clone(),
            source: Some(EventSource {
                component: Some(self.reporter.controller.clone()),
                host: None,
            }),
            reporting_component: ev.reporting_controller.clone(),
            reporting_instance: ev.reporting_instance.clone(),
            first_timestamp: at.clone(),
            last_timestamp: at,
            count: Some(1),
            ..Default::default()
        }
    }

    /// Publishes `ev` about `regarding` (in its namespace, `default` for cluster-scoped
    /// objects): a new Event, or — when the same event was published in the last six minutes —
    /// one more occurrence of its series.
    pub async fn publish(&self, ev: &Event, regarding: &ObjectReference) -> Result<(), kube::Error> {
        let now = Timestamp::now();
        let key = identity(&self.reporter, ev, regarding);
        let repeat = {
            let mut recent = self.recent();
            recent.retain(|_, r| r.last + SERIES_TTL > now);
            recent.get(&key).cloned()
        };
        let ns = regarding.namespace.as_deref().unwrap_or("default");
        let remembered = match repeat {
            Some(r) => self.repeat(ns, r, now).await?,
            None => self.create(ns, ev, regarding, now).await?,
        };
        self.recent().insert(key, remembered);
        Ok(())
    }

    /// One more occurrence of a recent event: its series count (core: `count`, `lastTimestamp`).
    async fn repeat(&self, ns: &str, r: Recent, now: Timestamp) -> Result<Recent, kube::Error> {
        let count = r.count + 1;
        let pp = PatchParams::default();
        if r.core {
            let patch = serde_json::json!({"count": count, "lastTimestamp": Time(now)});
            let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), ns);
            events.patch(&r.name, &pp, &Patch::Merge(&patch)).await?;
        } else {
            let patch = serde_json::json!({"series": EventSeries {
                count,
                last_observed_time: MicroTime(now),
            }});
            let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), ns);
            events.patch(&r.name, &pp, &Patch::Merge(&patch)).await?;
        }
        Ok(Recent {
            count,
            last: now,
            ..r
        })
    }

    /// A first occurrence: an `events.k8s.io` Event, or a core one once that API was refused.
    async fn create(
        &self,
        ns: &str,
        ev: &Event,
        regarding: &ObjectReference,
        now: Timestamp,
    ) -> Result<Recent, kube::Error> {
        let event = self.new_event(ev, regarding, now);
        let recent = |name: Option<String>, core| Recent {
            name: name.or_else(|| event.metadata.name.clone()).unwrap_or_default(),
            count: 1,
            last: now,
            core,
        };
        if !self.core.load(Ordering::Relaxed) {
            let events: Api<K8sEvent> = Api::namespaced(self.client.clone(), ns);
            match events.create(&PostParams::default(), &event).await {
                Ok(created) => return Ok(recent(created.metadata.name, false)),
                Err(kube::Error::Api(e)) if e.code == 403 => {
                    self.core.store(true, Ordering::Relaxed);
                    if !CORE_FALLBACK_LOGGED.swap(true, Ordering::Relaxed) {
                        tracing::warn!(
                            error = %e.message,
                            "creating events.k8s.io/v1 Events is forbidden (capmox v0.9's ClusterRole grants core v1 Events only): publishing core v1 Events instead"
                        );
                    }
                }
                Err(e) => return Err(e),
            }
        }
        let events: Api<CoreEvent> = Api::namespaced(self.client.clone(), ns);
        let created = events
            .create(&PostParams::default(), &self.new_core_event(&event))
            .await?;
        Ok(recent(created.metadata.name, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(name: &str, rv: &str) -> ObjectReference {
        ObjectReference {
            api_version: Some("infrastructure.cluster.x-k8s.io/v1alpha2".into()),
            kind: Some("ProxmoxMachine".into()),
            name: Some(name.into()),
            namespace: Some("default".into()),
            resource_version: Some(rv.into()),
            ..Default::default()
        }
    }

    fn event(reason: &str, warning: bool) -> Event {
        Event {
            type_: if warning {
                EventType::Warning
            } else {
                EventType::Normal
            },
            reason: reason.into(),
            note: Some("note".into()),
            action: "Reconcile".into(),
            secondary: None,
        }
    }

    #[test]
    fn identity_covers_what_kube_runtime_keys_series_on() {
        let reporter = Reporter {
            controller: "proxmox-controller".into(),
            instance: None,
        };
        let base = identity(&reporter, &event("A", false), &reference("m", "1"));
        assert_eq!(
            base,
            identity(&reporter, &event("A", false), &reference("m", "1"))
        );
        // The note is not part of the identity (a series keeps the first note).
        let mut other_note = event("A", false);
        other_note.note = Some("different".into());
        assert_eq!(base, identity(&reporter, &other_note, &reference("m", "1")));
        for different in [
            identity(&reporter, &event("B", false), &reference("m", "1")),
            identity(&reporter, &event("A", true), &reference("m", "1")),
            identity(&reporter, &event("A", false), &reference("n", "1")),
            identity(&reporter, &event("A", false), &reference("m", "2")),
            identity(
                &Reporter {
                    controller: "proxmox-controller".into(),
                    instance: Some("pod".into()),
                },
                &event("A", false),
                &reference("m", "1"),
            ),
        ] {
            assert_ne!(base, different);
        }
    }
}
