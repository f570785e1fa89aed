//! Watch: newline-delimited `{"type","object"}` events as kube-runtime's watcher consumes them.
//! Supports `resourceVersion` (unset/"0" = synthetic ADDED for current state), 410 Expired as an ERROR
//! event for versions before the collection's watch window (server start for built-in kinds, CRD
//! creation for custom resources) or older than the retained history, `allowWatchBookmarks`
//! (every `ServerOptions::bookmark_interval` once the collection changed), `timeoutSeconds`,
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

/// Bookmarks go out this long before a watch's timeout (if the collection has changed), as the
/// real watch cache does.
const PRE_TIMEOUT: Duration = Duration::from_secs(2);

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
        fields: FieldSelector::parse_for(rr.q("fieldSelector").unwrap_or_default(), &rr.def)?,
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
    let requested_rv = match from {
        WatchFrom::After(rv) => Some(rv),
        WatchFrom::Now => None,
    };
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    tokio::spawn(async move {
        let (backlog, start_rv, mut live) = match started {
            Ok(x) => x,
            Err(oldest) => {
                let _ = tx
                    .send(line(
                        "ERROR",
                        &ApiError::expired(&format!("{rv_param} ({oldest})")).to_status(),
                    ))
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
        let started_at = tokio::time::Instant::now();
        let deadline_at = started_at + Duration::from_secs(timeout);
        let deadline = tokio::time::sleep_until(deadline_at);
        tokio::pin!(deadline);
        let interval = st.bookmark_interval.max(Duration::from_millis(10));
        // The next bookmark: after the interval, or shortly before the timeout if that is sooner.
        let next_bookmark = |from: tokio::time::Instant| {
            let pre = deadline_at.checked_sub(PRE_TIMEOUT).unwrap_or(started_at);
            let at = (from + interval).min(pre);
            (at > from).then_some(at)
        };
        let mut bookmark_at = next_bookmark(started_at);
        // The real watch cache sends nothing (bookmarks included) at or below the watch's version.
        let watch_rv = requested_rv.unwrap_or(start_rv);
        let res = rr.def.res_id();
        loop {
            let bookmark_due = async {
                match (bookmarks, bookmark_at) {
                    (true, Some(at)) => tokio::time::sleep_until(at).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut deadline => break,
                _ = tx.closed() => break,
                _ = bookmark_due => {
                    let now = tokio::time::Instant::now();
                    bookmark_at = next_bookmark(now).filter(|at| *at > now);
                    // Like the real watch cache: no bookmark until the collection changed after the watch's
                    // resourceVersion.
                    if let Some(rv) = st.store.collection_rv(&res).filter(|rv| *rv > watch_rv)
                        && tx.send(line("BOOKMARK", &bookmark_obj(rv, false))).await.is_err()
                    {
                        break;
                    }
                }
                got = live.recv() => match got {
                    Ok(ev) => {
                        if ev.rv <= start_rv {
                            continue;
                        }
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
