//! More API semantics: streaming lists (`sendInitialEvents`), kube-runtime's watcher on both list
//! strategies, dry-run, deletecollection with selectors, CRD deletion.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, ListParams, PostParams, WatchEvent, WatchParams};
use kube::runtime::{WatchStreamExt, watcher};
use serde_json::json;

fn cm(name: &str, labels: serde_json::Value) -> ConfigMap {
    serde_json::from_value(json!({"metadata": {"name": name, "labels": labels}})).unwrap()
}

async fn seen_names(api: Api<ConfigMap>, cfg: watcher::Config, want: usize) -> BTreeSet<String> {
    let mut stream = watcher(api, cfg).default_backoff().applied_objects().boxed();
    let mut names = BTreeSet::new();
    tokio::time::timeout(Duration::from_secs(30), async {
        while names.len() < want {
            let o = stream.try_next().await.unwrap().expect("watcher ended");
            names.insert(o.metadata.name.unwrap());
        }
    })
    .await
    .expect("watcher delivered the objects");
    names
}

#[tokio::test]
async fn watcher_list_watch_and_streaming_list() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    for n in ["a", "b", "c"] {
        api.create(&PostParams::default(), &cm(n, json!({"s": "1"})))
            .await
            .unwrap();
    }
    let want: BTreeSet<String> = ["a", "b", "c"].iter().map(|s| s.to_string()).collect();
    let got = seen_names(
        api.clone(),
        watcher::Config::default().labels("s=1").page_size(2),
        3,
    )
    .await;
    assert_eq!(got, want);

    // Raw streaming list: ADDED for existing objects, then a bookmark marking the end. A
    // kube-apiserver on etcd 3.4 (Debian's) cannot serve it: it answers with an ERROR event
    // (`RequestWatchProgress is disabled`); the product does not use streaming lists.
    let wp = WatchParams::streaming_lists().labels("s=1");
    let mut raw = match api.watch(&wp, "").await {
        Ok(s) => s.boxed(),
        Err(kube::Error::Api(e)) if env.is_real() && e.code == 422 => {
            eprintln!(
                "skipped: this kube-apiserver does not serve streaming lists (WatchList): {}",
                e.message
            );
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let mut added = BTreeSet::new();
    loop {
        match raw.try_next().await.unwrap().expect("stream ended") {
            WatchEvent::Error(e) if env.is_real() && e.message.contains("RequestWatchProgress") => {
                eprintln!(
                    "skipped streaming lists: this kube-apiserver's etcd cannot serve them: {}",
                    e.message
                );
                return;
            }
            WatchEvent::Added(o) => {
                added.insert(o.metadata.name.unwrap());
            }
            WatchEvent::Bookmark(b) if b.metadata.annotations.contains_key("k8s.io/initial-events-end") => {
                break;
            }
            WatchEvent::Bookmark(_) => {}
            other => panic!("unexpected {other:?}"),
        }
    }
    assert_eq!(added, want);
    let got = seen_names(
        api.clone(),
        watcher::Config::default().labels("s=1").streaming_lists(),
        3,
    )
    .await;
    assert_eq!(got, want);
}

#[tokio::test]
async fn dry_run_and_deletecollection_with_selector() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let pp = PostParams {
        dry_run: true,
        ..Default::default()
    };
    let out = api.create(&pp, &cm("dry", json!({}))).await.unwrap();
    assert_eq!(out.metadata.name.as_deref(), Some("dry"));
    assert!(
        api.get_opt("dry").await.unwrap().is_none(),
        "dry run stores nothing"
    );
    for (n, l) in [("a", "x"), ("b", "x"), ("c", "y")] {
        api.create(&PostParams::default(), &cm(n, json!({"grp": l})))
            .await
            .unwrap();
    }
    api.delete_collection(&DeleteParams::default(), &ListParams::default().labels("grp=x"))
        .await
        .unwrap();
    let left: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|i| i.metadata.name)
        .collect();
    assert_eq!(left, ["c"]);
}

#[tokio::test]
async fn deleting_a_crd_removes_its_api() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    install_test_crds(&env).await;
    let w = widgets(&c, &ns, "v1");
    w.create(&PostParams::default(), &widget("w", "v1", json!({"size": 1})))
        .await
        .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    crds.delete(&format!("widgets.{GROUP}"), &DeleteParams::default())
        .await
        .unwrap();
    wait_for(60, "CRD deleted", || async {
        crds.get_opt(&format!("widgets.{GROUP}"))
            .await
            .unwrap()
            .is_none()
            .then_some(())
    })
    .await;
    wait_for(60, "widgets no longer served", || async {
        match w.list(&ListParams::default()).await {
            Err(kube::Error::Api(e)) if e.code == 404 => Some(()),
            _ => None,
        }
    })
    .await;
    // Re-installing starts empty.
    install_test_crds(&env).await;
    let w = widgets(&c, &ns, "v1");
    assert!(w.list(&ListParams::default()).await.unwrap().items.is_empty());
}

#[tokio::test]
async fn unserved_versions_and_unsupported_methods() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let mut crd = widget_crd();
    crd.metadata.name = Some(format!("sprockets.{GROUP}"));
    crd.spec.names =
        serde_json::from_value(json!({"plural": "sprockets", "singular": "sprocket", "kind": "Sprocket"}))
            .unwrap();
    crd.spec.versions[0].served = false;
    env.install_crds(vec![crd]).await.unwrap();
    let path = |v: &str| format!("/apis/{GROUP}/{v}/namespaces/{ns}/sprockets");
    let list = |v: &str| http::Request::get(path(v)).body(Vec::new()).unwrap();
    c.request::<serde_json::Value>(list("v1")).await.unwrap();
    let e = api_err(c.request::<serde_json::Value>(list("v1alpha1")).await);
    assert_eq!(e.code, 404);
    // POST to a named custom resource path creates the object the body describes (its name
    // wins); a body without a kind is a 400 from the decoder.
    let post = |path: String, body: serde_json::Value| {
        http::Request::post(path)
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    let e = api_err(
        c.request::<serde_json::Value>(post(format!("{}/x", path("v1")), json!({})))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert_eq!(
        e.message,
        "the object provided is unrecognized (must be of type Sprocket): Object 'Kind' is missing in '{}' ({})"
    );
    let body = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Sprocket", "metadata": {"name": "from-body"}, "spec": {"size": 1}});
    let created = c
        .request::<serde_json::Value>(post(format!("{}/x", path("v1")), body))
        .await
        .unwrap();
    assert_eq!(created["metadata"]["name"], "from-body");
    // Built-in kinds do not allow it.
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
    let e = api_err(
        c.request::<serde_json::Value>(post(format!("/api/v1/namespaces/{ns}/configmaps/x"), cm))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (405, "MethodNotAllowed"));
}

#[tokio::test]
async fn strict_field_validation_rejects_unknown_fields() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    install_test_crds(&env).await;
    let body = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": "s"},
        "spec": {"size": 1, "bogus": true}});
    let post = |q: &str| {
        http::Request::post(format!("/apis/{GROUP}/v1/namespaces/{ns}/widgets{q}"))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap())
            .unwrap()
    };
    let e = api_err(
        c.request::<serde_json::Value>(post("?fieldValidation=Strict"))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (400, "BadRequest"));
    assert!(
        e.message
            .contains("strict decoding error: unknown field \"spec.bogus\""),
        "{}",
        e.message
    );
    // Without Strict the field is pruned.
    let created = c
        .request::<serde_json::Value>(post("?fieldValidation=Ignore"))
        .await
        .unwrap();
    assert!(created["spec"].get("bogus").is_none());
}

#[tokio::test]
async fn partial_object_metadata_get_list_watch() {
    use kube::core::PartialObjectMeta;
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    api.create(&PostParams::default(), &cm("m", json!({"x": "1"})))
        .await
        .unwrap();
    let m = api.get_metadata("m").await.unwrap();
    assert_eq!(m.metadata.labels.unwrap()["x"], "1");
    assert_eq!(m.types.unwrap().kind, "PartialObjectMetadata");
    let l = api.list_metadata(&ListParams::default()).await.unwrap();
    assert_eq!(l.items.len(), 1);
    let meta_api: Api<PartialObjectMeta<ConfigMap>> = Api::namespaced(c.clone(), &ns);
    let mut names = BTreeSet::new();
    let mut stream = watcher(meta_api, watcher::Config::default())
        .default_backoff()
        .applied_objects()
        .boxed();
    api.create(&PostParams::default(), &cm("n", json!({})))
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(30), async {
        while names.len() < 2 {
            names.insert(stream.try_next().await.unwrap().unwrap().metadata.name.unwrap());
        }
    })
    .await
    .expect("metadata watcher saw both objects");
}

#[tokio::test]
async fn watch_bookmarks() {
    // The real watch cache sends a BOOKMARK about once a minute, and only once the collection
    // changed after the watch's resourceVersion; the in-tree server does the same on its
    // configurable interval (1 s here).
    let env = testenv::TestEnv::start_with(testenv::TestEnvOptions {
        server: testenv::ServerOptions {
            bookmark_interval: std::time::Duration::from_secs(1),
            ..Default::default()
        },
        ..Default::default()
    })
    .await
    .unwrap();
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().timeout(150), &rv)
        .await
        .unwrap()
        .boxed();
    // Activity after the watch's version, so the collection's version moves past it.
    let made = api
        .create(&PostParams::default(), &cm("activity", json!({})))
        .await
        .unwrap();
    let made_rv: u64 = made.metadata.resource_version.unwrap().parse().unwrap();
    let bm = tokio::time::timeout(std::time::Duration::from_secs(100), async {
        loop {
            if let WatchEvent::Bookmark(b) = stream.try_next().await.unwrap().expect("stream ended") {
                return b;
            }
        }
    })
    .await
    .expect("a bookmark arrives");
    let bm_rv: u64 = bm.metadata.resource_version.parse().unwrap();
    assert!(bm_rv >= made_rv, "bookmark {bm_rv} before the change {made_rv}");
}
