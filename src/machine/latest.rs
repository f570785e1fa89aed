//! Read-your-writes on top of a watch cache: the object a write of this controller returned is
//! kept until the cache has caught up with it, and every read takes whichever copy is newer (by
//! `resourceVersion`, which the API server makes comparable for one object: etcd revisions).
//! A reconcile therefore never needs a fresh GET to see its own last write.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

use kube::Resource;
use kube::runtime::reflector::ObjectRef;

/// The numeric `resourceVersion` of an object (`None` when absent or not a number).
pub fn resource_version<K: Resource>(obj: &K) -> Option<u64> {
    obj.meta().resource_version.as_deref()?.parse().ok()
}

/// How many expected states of one object are remembered.
const EXPECTED: usize = 4;

/// Objects as this controller last wrote them, and the states its writes in flight will produce
/// (so their watch events are recognised as its own even when they arrive before the answer).
pub struct Latest<K: Resource> {
    written: Mutex<HashMap<ObjectRef<K>, Arc<K>>>,
    expected: Mutex<HashMap<ObjectRef<K>, VecDeque<u64>>>,
}

impl<K: Resource> Default for Latest<K> {
    fn default() -> Self {
        Self {
            written: Mutex::new(HashMap::new()),
            expected: Mutex::new(HashMap::new()),
        }
    }
}

impl<K> Latest<K>
where
    K: Resource + Clone,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    fn map(&self) -> std::sync::MutexGuard<'_, HashMap<ObjectRef<K>, Arc<K>>> {
        self.written
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Remembers what a write returned.
    pub fn record(&self, written: K) {
        let key = ObjectRef::from_obj(&written);
        let mut map = self.map();
        let newer = map
            .get(&key)
            .is_none_or(|old| resource_version(old.as_ref()) <= resource_version(&written));
        if newer {
            map.insert(key, Arc::new(written));
        }
    }

    /// The newer of `cached` and this controller's last write of the same object. Once the cache
    /// has caught up, the written copy is dropped.
    pub fn pick(&self, cached: Arc<K>) -> Arc<K> {
        let key = ObjectRef::from_obj(cached.as_ref());
        let mut map = self.map();
        let Some(written) = map.get(&key) else {
            return cached;
        };
        let same_object = written.meta().uid == cached.meta().uid;
        match (
            resource_version(written.as_ref()),
            resource_version(cached.as_ref()),
        ) {
            (Some(w), Some(c)) if same_object && w > c => Arc::clone(written),
            _ => {
                map.remove(&key);
                cached
            }
        }
    }

    /// Forgets `obj` (deleted).
    pub fn forget(&self, obj: &ObjectRef<K>) {
        self.map().remove(obj);
        self.expected
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(obj);
    }

    /// A write about to be sent will leave `obj` in a state with `fingerprint`.
    pub fn expect(&self, obj: &ObjectRef<K>, fingerprint: u64) {
        let mut m = self
            .expected
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let q = m.entry(obj.clone()).or_default();
        if q.len() == EXPECTED {
            q.pop_front();
        }
        q.push_back(fingerprint);
    }

    /// Whether a state with `fingerprint` of `obj` is one this controller's writes produced
    /// (each expected state is recognised once).
    pub fn is_expected(&self, obj: &ObjectRef<K>, fingerprint: u64) -> bool {
        let mut m = self
            .expected
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(q) = m.get_mut(obj) else {
            return false;
        };
        match q.iter().position(|f| *f == fingerprint) {
            Some(i) => {
                q.remove(i);
                true
            }
            None => false,
        }
    }

    /// The resourceVersion this controller last wrote for `obj`.
    pub fn written_version(&self, obj: &ObjectRef<K>) -> Option<u64> {
        self.map().get(obj).and_then(|o| resource_version(o.as_ref()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::ConfigMap;

    fn cm(rv: &str, data: &str) -> ConfigMap {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "a", "namespace": "ns", "uid": "u1", "resourceVersion": rv},
            "data": {"v": data}
        }))
        .unwrap()
    }

    #[test]
    fn expected_states_are_recognised_once() {
        let latest: Latest<ConfigMap> = Latest::default();
        let r = ObjectRef::new("a").within("ns");
        latest.expect(&r, 7);
        assert!(!latest.is_expected(&r, 8));
        assert!(latest.is_expected(&r, 7));
        assert!(!latest.is_expected(&r, 7));
        for f in 0..10 {
            latest.expect(&r, f);
        }
        assert!(!latest.is_expected(&r, 0), "only the last few are kept");
        assert!(latest.is_expected(&r, 9));
    }

    #[test]
    fn the_newer_copy_wins_and_caught_up_writes_are_dropped() {
        let latest: Latest<ConfigMap> = Latest::default();
        latest.record(cm("10", "written"));
        let picked = latest.pick(Arc::new(cm("9", "cached")));
        assert_eq!(picked.data.as_ref().unwrap()["v"], "written");
        assert_eq!(
            latest.written_version(&ObjectRef::new("a").within("ns")),
            Some(10)
        );
        let picked = latest.pick(Arc::new(cm("12", "cached")));
        assert_eq!(picked.data.as_ref().unwrap()["v"], "cached");
        assert_eq!(latest.written_version(&ObjectRef::new("a").within("ns")), None);
        latest.record(cm("13", "newer"));
        latest.record(cm("11", "older write answered late"));
        assert_eq!(
            latest.written_version(&ObjectRef::new("a").within("ns")),
            Some(13)
        );
    }
}
