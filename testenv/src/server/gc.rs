//! Opt-in garbage collector: background deletion of dependents whose owners (by `ownerReferences`
//! uid) are all gone, and handling of the `foregroundDeletion` and `orphan` finalizers.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{broadcast, watch};

use super::State;
use super::crud::meta_str;
use super::delete::delete_object;
use super::store::{ResId, rv_of};

fn owner_uids(o: &Value) -> Vec<String> {
    o.pointer("/metadata/ownerReferences")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|r| r.get("uid").and_then(Value::as_str).map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn has_finalizer(o: &Value, f: &str) -> bool {
    o.pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(|a| a.iter().any(|x| x.as_str() == Some(f)))
}

fn remove_finalizer(st: &State, res: &ResId, o: &Value, f: &str) {
    let mut n = o.clone();
    if let Some(a) = n
        .pointer_mut("/metadata/finalizers")
        .and_then(Value::as_array_mut)
    {
        a.retain(|x| x.as_str() != Some(f));
    }
    let empty = n
        .pointer("/metadata/finalizers")
        .and_then(Value::as_array)
        .is_some_and(Vec::is_empty);
    let deleting = !meta_str(&n, "deletionTimestamp").is_empty();
    let (ns, name) = (
        meta_str(o, "namespace").to_string(),
        meta_str(o, "name").to_string(),
    );
    if empty && deleting {
        let _ = st.store.delete(res, &ns, &name, Some(rv_of(o)));
    } else {
        let _ = st.store.update(res, n, rv_of(o));
    }
}

/// Looks up a kind without keeping the registry locked (deletions may need to write to it).
fn def_of(st: &State, res: &ResId) -> Option<Arc<super::crds::ResourceDef>> {
    let reg = st.registry();
    reg.by_res(&res.0, &res.1)
}

/// One collection pass; returns whether anything changed.
fn pass(st: &State) -> bool {
    let all = st.store.all_objects();
    let existing: HashSet<String> = all.iter().map(|(_, o)| meta_str(o, "uid").to_string()).collect();
    let mut changed = false;
    for (res, o) in &all {
        let uid = meta_str(o, "uid").to_string();
        let deleting = !meta_str(o, "deletionTimestamp").is_empty();
        let dependents: Vec<&(ResId, Value)> =
            all.iter().filter(|(_, d)| owner_uids(d).contains(&uid)).collect();
        if deleting && has_finalizer(o, "orphan") {
            for (dres, d) in &dependents {
                let mut n = d.clone();
                if let Some(a) = n
                    .pointer_mut("/metadata/ownerReferences")
                    .and_then(Value::as_array_mut)
                {
                    a.retain(|r| r.get("uid").and_then(Value::as_str) != Some(uid.as_str()));
                }
                let _ = st.store.update(dres, n, rv_of(d));
            }
            remove_finalizer(st, res, o, "orphan");
            changed = true;
            continue;
        }
        if deleting && has_finalizer(o, "foregroundDeletion") {
            if dependents.is_empty() {
                remove_finalizer(st, res, o, "foregroundDeletion");
                changed = true;
            } else {
                for (dres, d) in &dependents {
                    if meta_str(d, "deletionTimestamp").is_empty()
                        && let Some(def) = def_of(st, dres)
                    {
                        let _ = delete_object(
                            st,
                            &def,
                            meta_str(d, "namespace"),
                            meta_str(d, "name"),
                            Some("Foreground"),
                            false,
                        );
                        changed = true;
                    }
                }
            }
            continue;
        }
        let owners = owner_uids(o);
        if !owners.is_empty()
            && !deleting
            && owners.iter().all(|u| !existing.contains(u))
            && let Some(def) = def_of(st, res)
        {
            let _ = delete_object(
                st,
                &def,
                meta_str(o, "namespace"),
                meta_str(o, "name"),
                None,
                false,
            );
            changed = true;
        }
    }
    changed
}

/// Runs the collector until `stop` fires, reacting to every store event.
pub fn spawn(st: Arc<State>, mut stop: watch::Receiver<bool>) {
    let mut rx: broadcast::Receiver<_> = st.store.subscribe();
    tokio::spawn(async move {
        loop {
            while pass(&st) {}
            tokio::select! {
                _ = stop.changed() => break,
                r = rx.recv() => if matches!(r, Err(broadcast::error::RecvError::Closed)) { break },
            }
        }
    });
}
