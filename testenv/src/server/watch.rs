//! Watch: newline-delimited `{"type","object"}` events as kube-runtime's watcher consumes them.
//! Supports `resourceVersion` (unset/"0" = synthetic ADDED for current state), 410 Expired as an ERROR
//! event for versions older than the retained history, `allowWatchBookmarks`, `timeoutSeconds`,
//! `sendInitialEvents=true` (initial ADDED events then a BOOKMARK annotated
//! `k8s.io/initial-events-end`), label/field selectors (objects leaving the selection are DELETED).

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use http_body_util::{BodyExt, StreamBody};
use hyper::Response;
use hyper::body::Frame;
use serde_json::{Value, json};
use tokio::sync::{broadcast, mpsc};

use super::crud::{partial_metadata, to_version};
use super::routes::ResourceReq;
use super::selectors::{FieldSelector, LabelSelector};
use super::status::{ApiError, ApiResult};
use super::store::{Event, EventType, WatchFrom};
use super::{Body, State};

/// Interval between bookmarks when `allowWatchBookmarks=true`.
const BOOKMARK_EVERY: Duration = Duration::from_secs(1);

struct Filter {
    ns: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn matches(&self, o: &Value) -> bool {
        let ns_ok = self
            .ns
            .as_deref()
            .is_none_or(|n| o.pointer("/metadata/namespace").and_then(Value::as_str) == Some(n));
        ns_ok && self.labels.matches(o) && self.fields.matches(o)
    }

    /// The event type a watcher with this filter sees, if any.
    fn project(&self, ev: &Event) -> Option<EventType> {
        let now = self.matches(&ev.obj);
        let before = ev.old.as_ref().is_some_and(|o| self.matches(o));
        match ev.ty {
            EventType::Added => now.then_some(EventType::Added),
            EventType::Deleted => (now || before).then_some(EventType::Deleted),
            EventType::Modified => match (before, now) {
                (true, true) => Some(EventType::Modified),
                (false, true) => Some(EventType::Added),
                (true, false) => Some(EventType::Deleted),
                (false, false) => None,
            },
        }
    }
}

fn line(ty: &str, obj: &Value) -> Bytes {
    let mut b = serde_json::to_vec(&json!({"type": ty, "object": obj})).unwrap_or_default();
    b.push(b'\n');
    Bytes::from(b)
}

/// GET with `watch=true`.
pub async fn watch(st: Arc<State>, rr: ResourceReq) -> ApiResult<Response<Body>> {
    let filter = Filter {
        ns: rr.ns.clone(),
        labels: LabelSelector::parse(rr.q("labelSelector").unwrap_or_default())?,
        fields: FieldSelector::parse(rr.q("fieldSelector").unwrap_or_default(), &rr.def.kind)?,
    };
    let send_initial = rr.flag("sendInitialEvents");
    if send_initial && rr.q("resourceVersionMatch") != Some("NotOlderThan") {
        return Err(ApiError::invalid(
            "",
            "",
            "",
            "resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan".into(),
            vec![],
        ));
    }
    let rv_param = rr.q("resourceVersion").unwrap_or_default().to_string();
    let from = if send_initial || rv_param.is_empty() || rv_param == "0" {
        WatchFrom::Now
    } else {
        WatchFrom::After(
            rv_param
                .parse()
                .map_err(|_| ApiError::bad_request(format!("invalid resource version: {rv_param}")))?,
        )
    };
    let bookmarks = rr.flag("allowWatchBookmarks");
    let timeout = rr
        .q("timeoutSeconds")
        .and_then(|t| t.parse::<u64>().ok())
        .filter(|t| *t > 0)
        .unwrap_or(1800);
    let started = st.store.watch(&rr.def.res_id(), from);
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let (backlog, start_rv, mut live) = match started {
            Ok(x) => x,
            Err(_) => {
                let _ = tx
                    .send(line("ERROR", &ApiError::expired(&rv_param).to_status()))
                    .await;
                return;
            }
        };
        let bookmark_obj = |rv: u64, initial_end: bool| {
            let mut meta = json!({"resourceVersion": rv.to_string()});
            if initial_end {
                meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
            }
            json!({"apiVersion": rr.def.api_version(&rr.version), "kind": rr.def.kind, "metadata": meta})
        };
        let mut last_rv = start_rv;
        for ev in backlog {
            let Some(ty) = filter.project(&ev) else { continue };
            let Ok(obj) = to_version(&st, &rr.def, ev.obj.clone(), &rr.version).await else {
                return;
            };
            let obj = if rr.wants_meta {
                partial_metadata(&obj)
            } else {
                obj
            };
            if tx.send(line(ty.as_str(), &obj)).await.is_err() {
                return;
            }
        }
        if send_initial
            && tx
                .send(line("BOOKMARK", &bookmark_obj(start_rv, true)))
                .await
                .is_err()
        {
            return;
        }
        let deadline = tokio::time::sleep(Duration::from_secs(timeout));
        tokio::pin!(deadline);
        let mut ticker = tokio::time::interval(BOOKMARK_EVERY);
        ticker.tick().await;
        let res = rr.def.res_id();
        loop {
            tokio::select! {
                _ = &mut deadline => break,
                _ = tx.closed() => break,
                _ = ticker.tick(), if bookmarks => {
                    if tx.send(line("BOOKMARK", &bookmark_obj(last_rv, false))).await.is_err() {
                        break;
                    }
                }
                got = live.recv() => match got {
                    Ok(ev) => {
                        if ev.rv <= start_rv {
                            continue;
                        }
                        last_rv = last_rv.max(ev.rv);
                        if ev.res != res {
                            continue;
                        }
                        let Some(ty) = filter.project(&ev) else { continue };
                        let Ok(obj) = to_version(&st, &rr.def, ev.obj.clone(), &rr.version).await else { break };
                        let obj = if rr.wants_meta { partial_metadata(&obj) } else { obj };
                        if tx.send(line(ty.as_str(), &obj)).await.is_err() {
                            break;
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) | Err(broadcast::error::RecvError::Closed) => break,
                },
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv()
            .await
            .map(|b| (Ok::<_, std::convert::Infallible>(Frame::data(b)), rx))
    })
    .boxed();
    let body = StreamBody::new(stream).boxed_unsync();
    Response::builder()
        .status(200)
        .header("content-type", "application/json")
        .body(body)
        .map_err(|e| ApiError::internal(e.to_string()))
}
