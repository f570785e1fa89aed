//! Object storage: objects by resource, a global monotonic resourceVersion and watch fan-out with a
//! bounded event history (older versions answer 410 Expired).

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard};

use serde_json::Value;
use tokio::sync::broadcast;

/// Identity of a stored collection: (group, plural).
pub type ResId = (String, String);

/// Kind of a watch event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Object created.
    Added,
    /// Object changed.
    Modified,
    /// Object removed.
    Deleted,
}

impl EventType {
    /// Wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Added => "ADDED",
            Self::Modified => "MODIFIED",
            Self::Deleted => "DELETED",
        }
    }
}

/// A change recorded in the history and fanned out to watchers.
#[derive(Debug, Clone)]
pub struct Event {
    /// resourceVersion of the change.
    pub rv: u64,
    /// Collection.
    pub res: ResId,
    /// Type.
    pub ty: EventType,
    /// Object after the change (for deletes: the last state, with the deletion's resourceVersion).
    pub obj: Value,
    /// Object before the change.
    pub old: Option<Value>,
}

/// Store write failures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreError {
    /// Object does not exist.
    NotFound,
    /// Object already exists.
    AlreadyExists,
    /// resourceVersion precondition failed.
    Conflict,
}

/// Where a watch starts.
#[derive(Debug, Clone, Copy)]
pub enum WatchFrom {
    /// Synthetic ADDED events for the current state, then changes.
    Now,
    /// Changes after this resourceVersion.
    After(u64),
}

type Key = (String, String);

/// The watch window of one collection, like kube-apiserver's per-resource watch cache: it starts
/// when the server starts (built-in kinds) or when the CRD is created (custom resources), and
/// remembers the resourceVersion of the collection's last change.
#[derive(Debug, Clone, Copy)]
struct Window {
    start: u64,
    last: Option<u64>,
}

struct Inner {
    rv: u64,
    oldest_rv: u64,
    objects: HashMap<ResId, BTreeMap<Key, Value>>,
    history: VecDeque<Arc<Event>>,
    windows: HashMap<ResId, Window>,
}

/// The object store.
pub struct Store {
    inner: Mutex<Inner>,
    tx: broadcast::Sender<Arc<Event>>,
    history_cap: usize,
}

/// The resourceVersion the store starts at (etcd's revisions start low; the watch window of
/// built-in kinds starts at 1, so any version since the server's start can be watched from).
pub const FIRST_RV: u64 = 100;

/// Start of the watch window of collections created with the server (built-in kinds).
const SERVER_START_WINDOW: u64 = 1;

fn set_rv(obj: &mut Value, rv: u64) {
    if let Some(m) = obj.get_mut("metadata").and_then(Value::as_object_mut) {
        m.insert("resourceVersion".into(), Value::String(rv.to_string()));
    }
}

/// Reads `metadata.resourceVersion` as a number.
pub fn rv_of(obj: &Value) -> u64 {
    obj.pointer("/metadata/resourceVersion")
        .and_then(Value::as_str)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn key_of(obj: &Value) -> Key {
    let ns = obj
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = obj
        .pointer("/metadata/name")
        .and_then(Value::as_str)
        .unwrap_or_default();
    (ns.to_string(), name.to_string())
}

impl Store {
    /// A store keeping at most `history_cap` events for watch resumption.
    pub fn new(history_cap: usize) -> Self {
        let (tx, _) = broadcast::channel(8192);
        Self {
            inner: Mutex::new(Inner {
                rv: FIRST_RV,
                oldest_rv: 0,
                objects: HashMap::new(),
                history: VecDeque::new(),
                windows: HashMap::new(),
            }),
            tx,
            history_cap: history_cap.max(1),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A receiver of every future event.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        self.tx.subscribe()
    }

    /// Current global resourceVersion.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// Reads one object.
    pub fn get(&self, res: &ResId, ns: &str, name: &str) -> Option<Value> {
        let g = self.lock();
        g.objects
            .get(res)
            .and_then(|m| m.get(&(ns.to_string(), name.to_string())))
            .cloned()
    }

    /// Lists a collection (all namespaces when `ns` is None), ordered by namespace then name.
    pub fn list(&self, res: &ResId, ns: Option<&str>) -> (Vec<Value>, u64) {
        let g = self.lock();
        let items = g
            .objects
            .get(res)
            .map(|m| {
                m.iter()
                    .filter(|((n, _), _)| ns.is_none_or(|want| want == n))
                    .map(|(_, v)| v.clone())
                    .collect()
            })
            .unwrap_or_default();
        (items, g.rv)
    }

    /// Every stored object with its collection (used by the garbage collector).
    pub fn all_objects(&self) -> Vec<(ResId, Value)> {
        let g = self.lock();
        g.objects
            .iter()
            .flat_map(|(r, m)| m.values().map(move |v| (r.clone(), v.clone())))
            .collect()
    }

    fn record(&self, g: &mut Inner, ev: Event) {
        let w = g.windows.entry(ev.res.clone()).or_insert(Window {
            start: SERVER_START_WINDOW,
            last: None,
        });
        w.last = Some(ev.rv);
        let ev = Arc::new(ev);
        g.history.push_back(ev.clone());
        while g.history.len() > self.history_cap {
            if let Some(old) = g.history.pop_front() {
                g.oldest_rv = old.rv;
            }
        }
        let _ = self.tx.send(ev);
    }

    /// Creates an object; returns it with its new resourceVersion.
    pub fn create(&self, res: &ResId, mut obj: Value) -> Result<Value, StoreError> {
        let mut g = self.lock();
        let key = key_of(&obj);
        if g.objects.get(res).is_some_and(|m| m.contains_key(&key)) {
            return Err(StoreError::AlreadyExists);
        }
        g.rv += 1;
        let rv = g.rv;
        set_rv(&mut obj, rv);
        g.objects.entry(res.clone()).or_default().insert(key, obj.clone());
        self.record(
            &mut g,
            Event {
                rv,
                res: res.clone(),
                ty: EventType::Added,
                obj: obj.clone(),
                old: None,
            },
        );
        Ok(obj)
    }

    /// Replaces an object if its stored resourceVersion is `expected_rv`.
    pub fn update(&self, res: &ResId, mut obj: Value, expected_rv: u64) -> Result<Value, StoreError> {
        let mut g = self.lock();
        let key = key_of(&obj);
        let old = match g.objects.get(res).and_then(|m| m.get(&key)) {
            Some(o) => o.clone(),
            None => return Err(StoreError::NotFound),
        };
        if rv_of(&old) != expected_rv {
            return Err(StoreError::Conflict);
        }
        if old == {
            let mut o2 = obj.clone();
            set_rv(&mut o2, expected_rv);
            o2
        } {
            // No-op update: the real server neither bumps resourceVersion nor emits an event.
            return Ok(old);
        }
        g.rv += 1;
        let rv = g.rv;
        set_rv(&mut obj, rv);
        g.objects.entry(res.clone()).or_default().insert(key, obj.clone());
        self.record(
            &mut g,
            Event {
                rv,
                res: res.clone(),
                ty: EventType::Modified,
                obj: obj.clone(),
                old: Some(old),
            },
        );
        Ok(obj)
    }

    /// Removes an object (optionally only if its resourceVersion is `expected_rv`).
    pub fn delete(
        &self,
        res: &ResId,
        ns: &str,
        name: &str,
        expected_rv: Option<u64>,
    ) -> Result<Value, StoreError> {
        let mut g = self.lock();
        let key = (ns.to_string(), name.to_string());
        let old = match g.objects.get(res).and_then(|m| m.get(&key)) {
            Some(o) => o.clone(),
            None => return Err(StoreError::NotFound),
        };
        if expected_rv.is_some_and(|e| e != rv_of(&old)) {
            return Err(StoreError::Conflict);
        }
        if let Some(m) = g.objects.get_mut(res) {
            m.remove(&key);
        }
        g.rv += 1;
        let rv = g.rv;
        let mut obj = old.clone();
        set_rv(&mut obj, rv);
        self.record(
            &mut g,
            Event {
                rv,
                res: res.clone(),
                ty: EventType::Deleted,
                obj: obj.clone(),
                old: Some(old),
            },
        );
        Ok(obj)
    }

    /// Starts a watch: returns the backlog (synthetic or historical events) and a live receiver, or
    /// `Err(oldest)` when `from` is older than the retained history.
    #[allow(clippy::type_complexity)]
    pub fn watch(
        &self,
        res: &ResId,
        from: WatchFrom,
    ) -> Result<(Vec<Arc<Event>>, u64, broadcast::Receiver<Arc<Event>>), u64> {
        let g = self.lock();
        let rx = self.tx.subscribe();
        let backlog = match from {
            WatchFrom::Now => g
                .objects
                .get(res)
                .map(|m| {
                    m.values()
                        .map(|o| {
                            Arc::new(Event {
                                rv: rv_of(o),
                                res: res.clone(),
                                ty: EventType::Added,
                                obj: o.clone(),
                                old: None,
                            })
                        })
                        .collect()
                })
                .unwrap_or_default(),
            WatchFrom::After(rv) => {
                let start = g.windows.get(res).map_or(SERVER_START_WINDOW, |w| w.start);
                if rv < start {
                    return Err(start);
                }
                if rv < g.oldest_rv {
                    return Err(g.oldest_rv);
                }
                g.history
                    .iter()
                    .filter(|e| e.rv > rv && &e.res == res)
                    .cloned()
                    .collect()
            }
        };
        Ok((backlog, g.rv, rx))
    }

    /// Starts the watch window of a collection now (a CRD was created: its watch cache starts).
    pub fn start_window(&self, res: &ResId) {
        let mut g = self.lock();
        let start = g.rv;
        g.windows.insert(res.clone(), Window { start, last: None });
    }

    /// The resourceVersion of the collection's last change since its window started, if any
    /// (what a real watch cache puts in its bookmarks; none before the first change).
    pub fn collection_rv(&self, res: &ResId) -> Option<u64> {
        self.lock().windows.get(res).and_then(|w| w.last)
    }

    /// Drops every object of a collection (CRD removal) without events per object.
    pub fn drop_collection(&self, res: &ResId) {
        let mut g = self.lock();
        g.objects.remove(res);
        g.windows.remove(res);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn watch_windows_start_with_the_server_or_the_crd() {
        let s = Store::new(100);
        let (backlog, _, _) = s.watch(&res(), WatchFrom::After(1)).unwrap();
        assert!(backlog.is_empty());
        let custom: ResId = ("example.io".into(), "widgets".into());
        s.create(&res(), json!({"metadata": {"name": "a", "namespace": "d"}}))
            .unwrap();
        s.start_window(&custom);
        assert_eq!(s.watch(&custom, WatchFrom::After(1)).err(), Some(s.current_rv()));
        assert!(s.watch(&custom, WatchFrom::After(s.current_rv())).is_ok());
        assert_eq!(s.collection_rv(&custom), None);
    }

    fn res() -> ResId {
        (String::new(), "configmaps".into())
    }

    #[test]
    fn rv_and_conflict() {
        let s = Store::new(10);
        let o = s
            .create(&res(), json!({"metadata": {"name": "a", "namespace": "d"}}))
            .unwrap();
        let rv = rv_of(&o);
        assert!(rv > FIRST_RV);
        let mut o2 = o.clone();
        o2["data"] = json!({"k": "v"});
        let o3 = s.update(&res(), o2.clone(), rv).unwrap();
        assert!(rv_of(&o3) > rv);
        assert_eq!(s.update(&res(), o2, rv), Err(StoreError::Conflict));
    }

    #[test]
    fn history_is_bounded() {
        let s = Store::new(2);
        for i in 0..5 {
            s.create(
                &res(),
                json!({"metadata": {"name": format!("n{i}"), "namespace": "d"}}),
            )
            .unwrap();
        }
        assert!(s.watch(&res(), WatchFrom::After(FIRST_RV)).is_err());
        assert_eq!(s.collection_rv(&res()), Some(s.current_rv()));
        let (backlog, _, _) = s.watch(&res(), WatchFrom::After(s.current_rv() - 1)).unwrap();
        assert_eq!(backlog.len(), 1);
    }
}
