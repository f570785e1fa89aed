//! Trigger streams that fire only on changes a controller depends on: an object passes when its
//! fingerprint (a hash of the fields the controller reads) differs from the one it had when it
//! last passed, or when it is deleted. Status churn of watched objects (CAPI conditions, IPAM
//! pool counters, our own writes elsewhere) therefore does not requeue anything.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Mutex;

use futures::{Stream, StreamExt, future};
use kube::Resource;
use kube::runtime::watcher;

/// A hash of `v` for fingerprints.
pub fn hash_of(v: impl Hash) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

fn key_of<K: Resource>(obj: &K) -> String {
    obj.meta()
        .uid
        .clone()
        .unwrap_or_else(|| format!("{:?}/{:?}", obj.meta().namespace, obj.meta().name))
}

/// The objects of a watch whose `fingerprint` changed (first sightings pass when `first` says so;
/// deletions always pass).
pub fn changes<K, S>(
    events: S,
    fingerprint: impl Fn(&K) -> u64 + Send + 'static,
    first: impl Fn(&K) -> bool + Send + 'static,
) -> impl Stream<Item = Result<K, watcher::Error>> + Send
where
    K: Resource + Send + 'static,
    S: Stream<Item = Result<watcher::Event<K>, watcher::Error>> + Send,
{
    let seen: Mutex<HashMap<String, u64>> = Mutex::new(HashMap::new());
    events.filter_map(move |event| {
        let mut seen = seen.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let out = match event {
            Ok(watcher::Event::Apply(obj) | watcher::Event::InitApply(obj)) => {
                let fp = fingerprint(&obj);
                let pass = match seen.insert(key_of(&obj), fp) {
                    None => first(&obj),
                    Some(old) => old != fp,
                };
                pass.then_some(Ok(obj))
            }
            Ok(watcher::Event::Delete(obj)) => {
                seen.remove(&key_of(&obj));
                Some(Ok(obj))
            }
            Ok(watcher::Event::Init | watcher::Event::InitDone) => None,
            Err(e) => Some(Err(e)),
        };
        future::ready(out)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(v: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({"metadata": {"name": "a", "uid": "u"}, "data": {"v": v}}))
            .unwrap()
    }

    #[tokio::test]
    async fn only_changes_and_deletions_pass() {
        use watcher::Event::{Apply, Delete, Init, InitApply, InitDone};
        let events = futures::stream::iter(
            vec![
                Init,
                InitApply(cm("1")),
                InitDone,
                Apply(cm("1")),
                Apply(cm("2")),
                Apply(cm("2")),
                Delete(cm("2")),
            ]
            .into_iter()
            .map(Ok),
        );
        let out: Vec<_> = changes(
            events,
            |c: &ConfigMap| hash_of(c.data.as_ref().and_then(|d| d.get("v").cloned())),
            |_| true,
        )
        .collect()
        .await;
        assert_eq!(out.len(), 3, "first sight, the change, the deletion");
    }
}
