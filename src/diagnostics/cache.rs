//! A small bounded cache whose entries expire after a per-entry time to live, for the answers of
//! TokenReviews and SubjectAccessReviews (so a Prometheus scrape every few seconds does not cost
//! two API calls each time).

use std::collections::HashMap;
use std::hash::Hash;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// A map from `K` to `V` whose entries expire; at most `capacity` entries are kept (when full,
/// expired entries are dropped first, then everything: a flood of distinct keys cannot grow it).
#[derive(Debug)]
pub struct TtlCache<K, V> {
    capacity: usize,
    entries: Mutex<HashMap<K, (V, Instant)>>,
}

impl<K: Eq + Hash, V: Clone> TtlCache<K, V> {
    /// An empty cache holding at most `capacity` entries.
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity: capacity.max(1),
            entries: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<K, (V, Instant)>> {
        // A poisoned cache only lost an insert; the map itself is intact.
        self.entries
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The value of `key` if present and not expired at `now`.
    pub fn get(&self, key: &K, now: Instant) -> Option<V> {
        let mut m = self.lock();
        match m.get(key) {
            Some((v, until)) if *until > now => Some(v.clone()),
            Some(_) => {
                m.remove(key);
                None
            }
            None => None,
        }
    }

    /// Stores `value` for `key` until `now + ttl` (a zero `ttl` stores nothing).
    pub fn insert(&self, key: K, value: V, ttl: Duration, now: Instant) {
        if ttl.is_zero() {
            return;
        }
        let mut m = self.lock();
        if m.len() >= self.capacity && !m.contains_key(&key) {
            m.retain(|_, (_, until)| *until > now);
            if m.len() >= self.capacity {
                m.clear();
            }
        }
        m.insert(key, (value, now + ttl));
    }

    /// Number of entries (expired ones included until they are looked up or evicted).
    pub fn len(&self) -> usize {
        self.lock().len()
    }

    /// Whether the cache holds no entry.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_expire_after_their_ttl() {
        let c = TtlCache::new(8);
        let t0 = Instant::now();
        c.insert("a", 1, Duration::from_secs(5), t0);
        c.insert("b", 2, Duration::from_secs(1), t0);
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(2)), Some(1));
        assert_eq!(c.get(&"b", t0 + Duration::from_secs(2)), None);
        assert_eq!(c.get(&"a", t0 + Duration::from_secs(5)), None);
        assert!(c.is_empty());
        c.insert("z", 3, Duration::ZERO, t0);
        assert_eq!(c.get(&"z", t0), None);
    }

    #[test]
    fn capacity_is_never_exceeded() {
        let c = TtlCache::new(3);
        let t0 = Instant::now();
        c.insert(1, (), Duration::from_secs(1), t0);
        c.insert(2, (), Duration::from_secs(60), t0);
        c.insert(3, (), Duration::from_secs(60), t0);
        // Full: the expired entry goes first.
        let t1 = t0 + Duration::from_secs(2);
        c.insert(4, (), Duration::from_secs(60), t1);
        assert_eq!(c.len(), 3);
        assert_eq!(c.get(&2, t1), Some(()));
        // Full of live entries: cleared rather than grown.
        c.insert(5, (), Duration::from_secs(60), t1);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&5, t1), Some(()));
        for k in 0..1000 {
            c.insert(k, (), Duration::from_secs(60), t1);
            assert!(c.len() <= 3);
        }
    }
}
