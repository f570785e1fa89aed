//! Watches over the namespaces the manager is limited to (`--namespace a,b`): one watch per
//! namespace (so a namespaced Role in each is enough), merged into one event stream a reflector
//! can read.
//!
//! A reflector's store swaps in a complete list at `InitDone`, so the merge holds back the first
//! lists until every namespace has listed, then hands on one `Init` … `InitDone`; after that
//! a namespace that lists again (its watch expired) becomes `Apply` events plus a `Delete` for
//! each of its objects the new list no longer has.

use std::collections::{HashMap, HashSet};
use std::fmt::Debug;

use futures::stream::{self, BoxStream};
use futures::{Stream, StreamExt};
use kube::Resource;
use kube::api::Api;
use kube::runtime::watcher::{self, Event, watcher};
use serde::de::DeserializeOwned;

use crate::context::ControllerSettings;

/// The watch events of `api(namespace)` over every namespace of `settings`.
pub fn watch<K>(
    settings: &ControllerSettings,
    api: impl Fn(Option<&str>) -> Api<K>,
    wc: watcher::Config,
) -> BoxStream<'static, Result<Event<K>, watcher::Error>>
where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
{
    let namespaces = settings.watched_namespaces();
    if let [only] = namespaces.as_slice() {
        return watcher(api(only.as_deref()), wc).boxed();
    }
    let streams = namespaces
        .iter()
        .map(|ns| watcher(api(ns.as_deref()), wc.clone()).boxed())
        .collect();
    merge(streams).boxed()
}

/// Merges per-namespace watch streams into one that a reflector can apply (see the module docs).
pub fn merge<K, S>(streams: Vec<S>) -> impl Stream<Item = Result<Event<K>, watcher::Error>> + Send
where
    K: Resource + Clone + Send + 'static,
    S: Stream<Item = Result<Event<K>, watcher::Error>> + Send + Unpin + 'static,
{
    let mut merger = Merger::new(streams.len());
    let tagged = streams
        .into_iter()
        .enumerate()
        .map(|(i, s)| s.map(move |e| (i, e)).boxed());
    stream::select_all(tagged).flat_map(move |(i, e)| stream::iter(merger.on(i, e)))
}

type Key = (Option<String>, String);

fn key_of<K: Resource>(o: &K) -> Key {
    (
        o.meta().namespace.clone(),
        o.meta().name.clone().unwrap_or_default(),
    )
}

/// One namespace's objects as last seen, and its relist in progress.
struct Source<K> {
    known: HashMap<Key, K>,
    listed: bool,
    relist: Option<HashSet<Key>>,
}

struct Merger<K> {
    sources: Vec<Source<K>>,
    /// Whether the merged stream has handed on its first complete list.
    ready: bool,
}

impl<K: Resource + Clone> Merger<K> {
    fn new(n: usize) -> Self {
        Self {
            sources: (0..n)
                .map(|_| Source {
                    known: HashMap::new(),
                    listed: false,
                    relist: None,
                })
                .collect(),
            ready: false,
        }
    }

    fn on(
        &mut self,
        i: usize,
        event: Result<Event<K>, watcher::Error>,
    ) -> Vec<Result<Event<K>, watcher::Error>> {
        let event = match event {
            Ok(e) => e,
            Err(e) => return vec![Err(e)],
        };
        let ready = self.ready;
        let Some(src) = self.sources.get_mut(i) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        match event {
            Event::Init if !ready => {
                src.known.clear();
                src.listed = false;
            }
            Event::Init => src.relist = Some(HashSet::new()),
            Event::InitApply(o) | Event::Apply(o) => {
                if let Some(seen) = src.relist.as_mut() {
                    seen.insert(key_of(&o));
                }
                src.known.insert(key_of(&o), o.clone());
                if ready {
                    out.push(Ok(Event::Apply(o)));
                }
            }
            Event::Delete(o) => {
                src.known.remove(&key_of(&o));
                if ready {
                    out.push(Ok(Event::Delete(o)));
                }
            }
            Event::InitDone if !ready => {
                src.listed = true;
                if self.sources.iter().all(|s| s.listed) {
                    self.ready = true;
                    out.push(Ok(Event::Init));
                    for s in &self.sources {
                        out.extend(s.known.values().cloned().map(|o| Ok(Event::InitApply(o))));
                    }
                    out.push(Ok(Event::InitDone));
                }
            }
            Event::InitDone => {
                if let Some(seen) = src.relist.take() {
                    let gone: Vec<Key> = src.known.keys().filter(|k| !seen.contains(*k)).cloned().collect();
                    for k in gone {
                        if let Some(o) = src.known.remove(&k) {
                            out.push(Ok(Event::Delete(o)));
                        }
                    }
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;
    use kube::runtime::reflector;

    fn cm(ns: &str, name: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({"metadata": {"name": name, "namespace": ns}})).unwrap()
    }

    fn names(store: &reflector::Store<ConfigMap>) -> Vec<String> {
        let mut v: Vec<_> = store
            .state()
            .iter()
            .map(|c| {
                format!(
                    "{}/{}",
                    c.metadata.namespace.as_deref().unwrap_or(""),
                    c.metadata.name.as_deref().unwrap_or("")
                )
            })
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_store_sees_every_namespace_and_relists_delete_what_is_gone() {
        let mut m = Merger::<ConfigMap>::new(2);
        let (store, mut writer) = reflector::store::<ConfigMap>();
        let mut apply = |out: Vec<Result<Event<ConfigMap>, watcher::Error>>| {
            for e in out {
                writer.apply_watcher_event(&e.unwrap());
            }
        };
        use Event::{Apply, Delete, Init, InitApply, InitDone};
        apply(m.on(0, Ok(Init)));
        apply(m.on(0, Ok(InitApply(cm("a", "1")))));
        apply(m.on(0, Ok(InitDone)));
        apply(m.on(0, Ok(Apply(cm("a", "2")))));
        // b has not listed yet: nothing is handed on.
        assert!(names(&store).is_empty());
        apply(m.on(1, Ok(Init)));
        apply(m.on(1, Ok(InitApply(cm("b", "1")))));
        apply(m.on(1, Ok(InitDone)));
        assert_eq!(names(&store), ["a/1", "a/2", "b/1"]);
        apply(m.on(1, Ok(Apply(cm("b", "2")))));
        apply(m.on(0, Ok(Delete(cm("a", "1")))));
        assert_eq!(names(&store), ["a/2", "b/1", "b/2"]);
        // b's watch expired: it lists again without b/1.
        apply(m.on(1, Ok(Init)));
        apply(m.on(1, Ok(InitApply(cm("b", "2")))));
        apply(m.on(1, Ok(InitApply(cm("b", "3")))));
        apply(m.on(1, Ok(InitDone)));
        assert_eq!(names(&store), ["a/2", "b/2", "b/3"]);
    }
}
