//! API-semantics suite: written against `TestEnv`, so it runs on the in-tree server and on real
//! etcd + kube-apiserver binaries alike.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::collections::BTreeMap;

use common::*;
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{
    Api, DeleteParams, DynamicObject, ListParams, Patch, PatchParams, PostParams, WatchEvent, WatchParams,
};
use serde_json::json;

fn cm(name: &str, data: &[(&str, &str)]) -> ConfigMap {
    ConfigMap {
        metadata: kube::api::ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        data: Some(
            data.iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect::<BTreeMap<_, _>>(),
        ),
        ..Default::default()
    }
}

#[tokio::test]
async fn discovery_lists_core_kinds_and_crds() {
    let env = env().await;
    let c = env.client();
    let v = c.apiserver_version().await.unwrap();
    assert_eq!(v.major, "1");
    let core = c.list_core_api_resources("v1").await.unwrap();
    for r in ["namespaces", "configmaps", "secrets", "events"] {
        assert!(core.resources.iter().any(|x| x.name == r), "core/v1 lacks {r}");
    }
    let groups = c.list_api_groups().await.unwrap();
    for g in ["apiextensions.k8s.io", "coordination.k8s.io", "events.k8s.io"] {
        assert!(groups.groups.iter().any(|x| x.name == g), "missing group {g}");
    }
    install_test_crds(&env).await;
    let groups = c.list_api_groups().await.unwrap();
    let g = groups
        .groups
        .iter()
        .find(|x| x.name == GROUP)
        .expect("CRD group discovered");
    assert_eq!(g.preferred_version.as_ref().unwrap().version, "v1");
    let rl = c
        .list_api_group_resources(&format!("{GROUP}/v1alpha1"))
        .await
        .unwrap();
    let w = rl.resources.iter().find(|r| r.name == "widgets").unwrap();
    assert!(w.namespaced);
    assert_eq!(w.kind, "Widget");
    assert!(rl.resources.iter().any(|r| r.name == "widgets/status"));
    // kube's discovery client sees the CRD kinds too.
    let disc = kube::discovery::Discovery::new(c.clone()).run().await.unwrap();
    assert!(disc.groups().any(|g| g.name() == GROUP));
}

#[tokio::test]
async fn crud_on_core_kinds() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let created = api
        .create(&PostParams::default(), &cm("a", &[("k", "v")]))
        .await
        .unwrap();
    let meta = &created.metadata;
    assert!(meta.uid.is_some() && meta.creation_timestamp.is_some() && meta.resource_version.is_some());
    assert_eq!(api.get("a").await.unwrap().data.unwrap()["k"], "v");
    let mut changed = created.clone();
    changed.data = Some([("k".to_string(), "w".to_string())].into());
    let replaced = api.replace("a", &PostParams::default(), &changed).await.unwrap();
    assert_eq!(replaced.data.unwrap()["k"], "w");
    api.create(&PostParams::default(), &cm("b", &[])).await.unwrap();
    assert_eq!(api.list(&ListParams::default()).await.unwrap().items.len(), 2);
    api.delete("a", &DeleteParams::default()).await.unwrap();
    assert!(api.get_opt("a").await.unwrap().is_none());
    api.delete_collection(&DeleteParams::default(), &ListParams::default())
        .await
        .unwrap();
    assert!(api.list(&ListParams::default()).await.unwrap().items.is_empty());

    // Secrets: stringData is folded into data.
    let secrets: Api<Secret> = Api::namespaced(c.clone(), &ns);
    let s: Secret =
        serde_json::from_value(json!({"metadata": {"name": "s"}, "stringData": {"password": "hunter2"}}))
            .unwrap();
    secrets.create(&PostParams::default(), &s).await.unwrap();
    let got = secrets.get("s").await.unwrap();
    assert_eq!(got.data.unwrap()["password"].0, b"hunter2");
    assert_eq!(got.type_.as_deref(), Some("Opaque"));

    // Leases.
    let leases: Api<Lease> = Api::namespaced(c.clone(), &ns);
    let l: Lease =
        serde_json::from_value(json!({"metadata": {"name": "l"}, "spec": {"holderIdentity": "me"}})).unwrap();
    leases.create(&PostParams::default(), &l).await.unwrap();
    assert_eq!(
        leases
            .get("l")
            .await
            .unwrap()
            .spec
            .unwrap()
            .holder_identity
            .as_deref(),
        Some("me")
    );

    // generateName.
    let mut g = cm("", &[]);
    g.metadata.name = None;
    g.metadata.generate_name = Some("gen-".into());
    let made = api.create(&PostParams::default(), &g).await.unwrap();
    let name = made.metadata.name.unwrap();
    assert!(name.starts_with("gen-") && name.len() == 9, "{name}");
}

#[tokio::test]
async fn error_bodies_are_status_objects() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let e = api_err(api.get("missing").await);
    assert_eq!((e.code, e.reason.as_str()), (404, "NotFound"));
    assert_eq!(e.message, "configmaps \"missing\" not found");
    api.create(&PostParams::default(), &cm("x", &[])).await.unwrap();
    let e = api_err(api.create(&PostParams::default(), &cm("x", &[])).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "AlreadyExists"));
    assert_eq!(e.message, "configmaps \"x\" already exists");
    let e = api_err(api.create(&PostParams::default(), &cm("Bad_Name", &[])).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    install_test_crds(&env).await;
    let w = widgets(&c, &ns, "v1");
    let e = api_err(w.get("nope").await);
    assert_eq!(e.message, format!("widgets.{GROUP} \"nope\" not found"));
}

#[tokio::test]
async fn namespaces_exist_and_are_required() {
    let env = env().await;
    let c = env.client();
    let nss: Api<Namespace> = Api::all(c.clone());
    for n in ["default", "kube-system"] {
        let ns = nss.get(n).await.unwrap();
        assert_eq!(ns.status.unwrap().phase.as_deref(), Some("Active"));
    }
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), "does-not-exist");
    let e = api_err(api.create(&PostParams::default(), &cm("x", &[])).await);
    assert_eq!(e.code, 404);
    assert_eq!(e.message, "namespaces \"does-not-exist\" not found");
    let ns = namespace(&c).await;
    let list = Api::<ConfigMap>::all(c.clone())
        .list(&ListParams::default())
        .await
        .unwrap();
    assert!(
        list.items
            .iter()
            .all(|i| i.metadata.namespace.as_deref() != Some(ns.as_str()))
    );
}

#[tokio::test]
async fn resource_version_conflicts_and_generation() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let v1 = api
        .create(&PostParams::default(), &cm("a", &[("k", "1")]))
        .await
        .unwrap();
    let mut v2 = v1.clone();
    v2.data = Some([("k".to_string(), "2".to_string())].into());
    let after = api.replace("a", &PostParams::default(), &v2).await.unwrap();
    let (r1, r2): (u64, u64) = (
        v1.metadata.resource_version.unwrap().parse().unwrap(),
        after.metadata.resource_version.unwrap().parse().unwrap(),
    );
    assert!(r2 > r1);
    let e = api_err(api.replace("a", &PostParams::default(), &v2).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    assert_eq!(
        e.message,
        "Operation cannot be fulfilled on configmaps \"a\": the object has been modified; please apply your changes to the latest version and try again"
    );

    install_test_crds(&env).await;
    let w = widgets(&c, &ns, "v1");
    let created = w
        .create(&PostParams::default(), &widget("w", "v1", json!({"size": 1})))
        .await
        .unwrap();
    assert_eq!(created.metadata.generation, Some(1));
    let p = w
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {"a": "b"}}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(1), "metadata changes keep generation");
    let p = w
        .patch_status(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"phase": "Ready"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(1), "status changes keep generation");
    let p = w
        .patch(
            "w",
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"size": 2}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2), "spec changes bump generation");
    // Custom resources need a resourceVersion on update.
    let mut stale = p.clone();
    stale.metadata.resource_version = Some(created.metadata.resource_version.clone().unwrap());
    let e = api_err(w.replace("w", &PostParams::default(), &stale).await);
    assert_eq!(e.code, 409);
    // Without a status subresource every non-metadata change bumps generation.
    let g: Api<DynamicObject> = Api::all_with(c.clone(), &gadget_ar());
    let obj: DynamicObject =
        serde_json::from_value(json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Gadget",
        "metadata": {"name": format!("g-{ns}")}, "spec": {"a": 1}}))
        .unwrap();
    g.create(&PostParams::default(), &obj).await.unwrap();
    let p = g
        .patch(
            &format!("g-{ns}"),
            &PatchParams::default(),
            &Patch::Merge(json!({"status": {"x": 1}})),
        )
        .await
        .unwrap();
    assert_eq!(p.metadata.generation, Some(2));
}

#[tokio::test]
async fn patches_merge_json_strategic() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    api.create(&PostParams::default(), &cm("a", &[("x", "1"), ("y", "2")]))
        .await
        .unwrap();
    let p = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"data": {"x": null, "z": "3"}})),
        )
        .await
        .unwrap();
    assert_eq!(
        p.data.unwrap(),
        [
            ("y".to_string(), "2".to_string()),
            ("z".to_string(), "3".to_string())
        ]
        .into()
    );
    let jp = serde_json::from_value(json!([{"op": "replace", "path": "/data/y", "value": "9"}])).unwrap();
    let p = api
        .patch("a", &PatchParams::default(), &Patch::<()>::Json(jp))
        .await
        .unwrap();
    assert_eq!(p.data.as_ref().unwrap()["y"], "9");
    let p = api
        .patch(
            "a",
            &PatchParams::default(),
            &Patch::Strategic(json!({"data": {"s": "1"}})),
        )
        .await
        .unwrap();
    assert_eq!(p.data.as_ref().unwrap()["s"], "1");
    // A stale resourceVersion in a patch conflicts.
    let e = api_err(
        api.patch(
            "a",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"resourceVersion": "1"}, "data": {"q": "1"}})),
        )
        .await,
    );
    assert_eq!(e.code, 409);
    // Strategic merge patch is not supported for custom resources.
    install_test_crds(&env).await;
    let w = widgets(&c, &ns, "v1");
    w.create(&PostParams::default(), &widget("w", "v1", json!({"size": 1})))
        .await
        .unwrap();
    let e = api_err(
        w.patch(
            "w",
            &PatchParams::default(),
            &Patch::Strategic(json!({"spec": {"size": 2}})),
        )
        .await,
    );
    assert_eq!(e.code, 415);
    let e = api_err(
        api.patch("missing", &PatchParams::default(), &Patch::Merge(json!({})))
            .await,
    );
    assert_eq!(e.code, 404);
}

#[tokio::test]
async fn server_side_apply() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    install_test_crds(&env).await;
    let w = widgets(&c, &ns, "v1");
    let cfg = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "1"}},
        "spec": {"size": 3, "label": "abc"}});
    let created = w
        .patch("w", &PatchParams::apply("alice"), &Patch::Apply(&cfg))
        .await
        .unwrap();
    assert_eq!(created.data["spec"]["size"], 3);
    assert_eq!(
        created.data["spec"]["color"], "red",
        "defaults applied on create by apply"
    );
    // Another manager changing alice's field conflicts, unless forced.
    let bob = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": "w"}, "spec": {"size": 4}});
    let e = api_err(
        w.patch("w", &PatchParams::apply("bob"), &Patch::Apply(&bob))
            .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
    let forced = w
        .patch("w", &PatchParams::apply("bob").force(), &Patch::Apply(&bob))
        .await
        .unwrap();
    assert_eq!(forced.data["spec"]["size"], 4);
    // Alice drops `label` from her configuration: the field is removed; bob's size stays.
    let alice2 = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": "w", "labels": {"a": "1"}}, "spec": {}});
    let after = w
        .patch("w", &PatchParams::apply("alice"), &Patch::Apply(&alice2))
        .await
        .unwrap();
    assert!(after.data["spec"].get("label").is_none(), "{after:?}");
    assert_eq!(after.data["spec"]["size"], 4);
    // fieldManager is required.
    let req = http::Request::patch(format!("/apis/{GROUP}/v1/namespaces/{ns}/widgets/w"))
        .header("content-type", "application/apply-patch+yaml")
        .body(serde_json::to_vec(&bob).unwrap())
        .unwrap();
    let e = api_err(c.request::<DynamicObject>(req).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
    // Apply on the status subresource.
    let st = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": "w"}, "status": {"phase": "Up"}});
    let s = w
        .patch_status("w", &PatchParams::apply("ctrl").force(), &Patch::Apply(&st))
        .await
        .unwrap();
    assert_eq!(s.data["status"]["phase"], "Up");
    assert_eq!(s.data["spec"]["size"], 4);
}

#[tokio::test]
async fn status_subresource_separates_spec_and_status() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    install_test_crds(&env).await;
    let w = widgets(&c, &ns, "v1");
    let mut obj = widget("w", "v1", json!({"size": 1}));
    obj.data["status"] = json!({"phase": "ignored-on-create"});
    let created = w.create(&PostParams::default(), &obj).await.unwrap();
    assert!(created.data.get("status").is_none(), "status dropped on create");
    let mut upd = created.clone();
    upd.data["spec"]["size"] = json!(5);
    upd.data["status"] = json!({"phase": "Running"});
    let s = w.replace_status("w", &PostParams::default(), &upd).await.unwrap();
    assert_eq!(s.data["status"]["phase"], "Running");
    assert_eq!(s.data["spec"]["size"], 1, "spec ignored on /status");
    let mut upd = s.clone();
    upd.data["spec"]["size"] = json!(6);
    upd.data["status"] = json!({"phase": "Changed"});
    let m = w.replace("w", &PostParams::default(), &upd).await.unwrap();
    assert_eq!(m.data["spec"]["size"], 6);
    assert_eq!(
        m.data["status"]["phase"], "Running",
        "status ignored on main resource"
    );
    // A status write with a stale resourceVersion is a conflict, as on the main resource.
    let mut stale = s.clone();
    stale.data["status"] = json!({"phase": "Stale"});
    let e = api_err(w.replace_status("w", &PostParams::default(), &stale).await);
    assert_eq!((e.code, e.reason.as_str()), (409, "Conflict"));
}

#[tokio::test]
async fn finalizers_and_deletion_timestamp() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let mut o = cm("f", &[]);
    o.metadata.finalizers = Some(vec!["example.io/keep".into()]);
    api.create(&PostParams::default(), &o).await.unwrap();
    api.delete("f", &DeleteParams::default()).await.unwrap();
    let marked = api.get("f").await.unwrap();
    assert!(marked.metadata.deletion_timestamp.is_some());
    // No new finalizers while deleting.
    let e = api_err(
        api.patch(
            "f",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": ["example.io/keep", "x/y"]}})),
        )
        .await,
    );
    assert_eq!(e.code, 422);
    api.patch(
        "f",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"finalizers": null}})),
    )
    .await
    .unwrap();
    assert!(
        api.get_opt("f").await.unwrap().is_none(),
        "removing the last finalizer deletes"
    );
    // Delete preconditions.
    let x = api.create(&PostParams::default(), &cm("p", &[])).await.unwrap();
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            resource_version: Some("1".into()),
            uid: None,
        }),
        ..Default::default()
    };
    assert_eq!(api_err(api.delete("p", &dp).await).code, 409);
    let dp = DeleteParams {
        preconditions: Some(kube::api::Preconditions {
            resource_version: x.metadata.resource_version,
            uid: x.metadata.uid,
        }),
        ..Default::default()
    };
    api.delete("p", &dp).await.unwrap();
}

#[tokio::test]
async fn no_garbage_collector_by_default() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let owner = api
        .create(&PostParams::default(), &cm("owner", &[]))
        .await
        .unwrap();
    let mut dep = cm("dep", &[]);
    dep.metadata.owner_references = Some(vec![
        k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference {
            api_version: "v1".into(),
            kind: "ConfigMap".into(),
            name: "owner".into(),
            uid: owner.metadata.uid.unwrap(),
            ..Default::default()
        },
    ]);
    api.create(&PostParams::default(), &dep).await.unwrap();
    api.delete("owner", &DeleteParams::default()).await.unwrap();
    // Write something after the deletion and read it back: the dependent is still there.
    api.create(&PostParams::default(), &cm("later", &[]))
        .await
        .unwrap();
    assert!(api.get_opt("later").await.unwrap().is_some());
    assert!(api.get_opt("dep").await.unwrap().is_some());
}

#[tokio::test]
async fn label_and_field_selectors() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    for (name, labels) in [
        ("a", vec![("env", "prod"), ("tier", "web")]),
        ("b", vec![("env", "dev")]),
        ("c", vec![]),
    ] {
        let mut o = cm(name, &[]);
        o.metadata.labels = Some(
            labels
                .into_iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        );
        api.create(&PostParams::default(), &o).await.unwrap();
    }
    let names = |l: kube::api::ObjectList<ConfigMap>| {
        let mut v: Vec<String> = l.items.into_iter().map(|i| i.metadata.name.unwrap()).collect();
        v.sort();
        v
    };
    let q = |s: &str| ListParams::default().labels(s);
    assert_eq!(names(api.list(&q("env=prod")).await.unwrap()), ["a"]);
    assert_eq!(names(api.list(&q("env!=prod")).await.unwrap()), ["b", "c"]);
    assert_eq!(
        names(api.list(&q("env in (prod,dev)")).await.unwrap()),
        ["a", "b"]
    );
    assert_eq!(names(api.list(&q("env notin (prod)")).await.unwrap()), ["b", "c"]);
    assert_eq!(names(api.list(&q("tier")).await.unwrap()), ["a"]);
    assert_eq!(names(api.list(&q("!env")).await.unwrap()), ["c"]);
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name=b"))
                .await
                .unwrap()
        ),
        ["b"]
    );
    assert_eq!(
        names(
            api.list(&ListParams::default().fields("metadata.name!=b"))
                .await
                .unwrap()
        ),
        ["a", "c"]
    );
    let all: Api<ConfigMap> = Api::all(c.clone());
    let l = all
        .list(&ListParams::default().fields(&format!("metadata.namespace={ns}")))
        .await
        .unwrap();
    assert_eq!(l.items.len(), 3);
}

#[tokio::test]
async fn list_pagination() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    for i in 0..7 {
        api.create(&PostParams::default(), &cm(&format!("c{i}"), &[]))
            .await
            .unwrap();
    }
    let mut seen = Vec::new();
    let mut lp = ListParams::default().limit(3);
    let mut pages = 0;
    loop {
        let page = api.list(&lp).await.unwrap();
        pages += 1;
        assert!(page.items.len() <= 3);
        seen.extend(page.items.into_iter().map(|i| i.metadata.name.unwrap()));
        match page.metadata.continue_.filter(|c| !c.is_empty()) {
            Some(tok) => lp = lp.continue_token(&tok),
            None => break,
        }
    }
    assert_eq!(pages, 3);
    seen.sort();
    assert_eq!(seen, (0..7).map(|i| format!("c{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn watch_semantics() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    api.create(&PostParams::default(), &cm("before", &[]))
        .await
        .unwrap();
    let rv = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .metadata
        .resource_version
        .unwrap();
    let mut stream = api
        .watch(&WatchParams::default().labels("w=1").timeout(30), &rv)
        .await
        .unwrap()
        .boxed();
    let mut o = cm("a", &[]);
    o.metadata.labels = Some([("w".to_string(), "1".to_string())].into());
    api.create(&PostParams::default(), &o).await.unwrap();
    api.create(&PostParams::default(), &cm("unlabelled", &[]))
        .await
        .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "v"}})),
    )
    .await
    .unwrap();
    api.patch(
        "a",
        &PatchParams::default(),
        &Patch::Merge(json!({"metadata": {"labels": {"w": "2"}}})),
    )
    .await
    .unwrap();
    let mut kinds = Vec::new();
    while kinds.len() < 3 {
        match stream.try_next().await.unwrap().expect("watch ended early") {
            WatchEvent::Added(o) => kinds.push(format!("ADDED {}", o.metadata.name.unwrap())),
            WatchEvent::Modified(o) => kinds.push(format!("MODIFIED {}", o.metadata.name.unwrap())),
            WatchEvent::Deleted(o) => kinds.push(format!("DELETED {}", o.metadata.name.unwrap())),
            WatchEvent::Bookmark(_) => {}
            WatchEvent::Error(e) => panic!("watch error {e:?}"),
        }
    }
    assert_eq!(
        kinds,
        ["ADDED a", "MODIFIED a", "DELETED a"],
        "leaving the selector is a DELETED"
    );

    // A watch cache starts with the server for built-in kinds: resourceVersion "1" is served
    // (events since then are replayed)...
    let mut old = api.watch(&WatchParams::default(), "1").await.unwrap().boxed();
    match old.try_next().await {
        Ok(Some(WatchEvent::Added(o))) => assert_eq!(o.metadata.namespace.as_deref(), Some(ns.as_str())),
        other => panic!("expected ADDED events from resourceVersion 1, got {other:?}"),
    }
    // ...and with the CRD for custom resources: older versions are 410 Expired, reporting where
    // the window starts.
    install_test_crds(&env).await;
    let w = widgets(&c, &ns, "v1");
    let mut old = w.watch(&WatchParams::default(), "1").await.unwrap().boxed();
    let status = match old.try_next().await {
        Ok(Some(WatchEvent::Error(e))) => *e,
        Err(kube::Error::Api(s)) => *s,
        other => panic!("expected 410, got {other:?}"),
    };
    assert_eq!((status.code, status.reason.as_str()), (410, "Expired"));
    assert!(
        status.message.starts_with("too old resource version: 1 ("),
        "{}",
        status.message
    );

    // timeoutSeconds ends the stream.
    let mut short = api
        .watch(&WatchParams::default().timeout(1), &rv)
        .await
        .unwrap()
        .boxed();
    let ended = tokio::time::timeout(std::time::Duration::from_secs(30), async {
        while short.try_next().await.unwrap().is_some() {}
    })
    .await;
    assert!(ended.is_ok(), "watch with timeoutSeconds=1 did not end");
}

#[tokio::test]
async fn crd_versions_defaulting_pruning_validation() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    install_test_crds(&env).await;
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let crd = crds.get(&format!("widgets.{GROUP}")).await.unwrap();
    let conds = crd.status.unwrap().conditions.unwrap();
    for t in ["Established", "NamesAccepted"] {
        assert!(conds.iter().any(|x| x.type_ == t && x.status == "True"), "{t}");
    }
    // Create in v1alpha1, read in v1 (None conversion rewrites apiVersion).
    let old = widgets(&c, &ns, "v1alpha1");
    let mut obj = widget("w", "v1alpha1", json!({"size": 2, "unknown": "dropped"}));
    obj.data["junk"] = json!(1);
    let created = old.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.data["spec"]["color"], "red", "defaulted");
    assert!(created.data["spec"].get("unknown").is_none(), "pruned");
    assert!(created.data.get("junk").is_none(), "pruned at root");
    let new = widgets(&c, &ns, "v1");
    let got = new.get("w").await.unwrap();
    assert_eq!(got.types.unwrap().api_version, format!("{GROUP}/v1"));
    assert_eq!(got.data["spec"]["size"], 2);

    let bad = |spec: serde_json::Value| widget("bad", "v1", spec);
    let cases = [
        (json!({}), "spec.size", "FieldValueRequired"),
        (json!({"size": 11}), "spec.size", "FieldValueInvalid"),
        (
            json!({"size": 1, "color": "green"}),
            "spec.color",
            "FieldValueNotSupported",
        ),
        (
            json!({"size": 1, "label": "toolong"}),
            "spec.label",
            "FieldValueTooLong",
        ),
        (
            json!({"size": 1, "label": "ABC"}),
            "spec.label",
            "FieldValueInvalid",
        ),
        (
            json!({"size": 1, "tags": ["a", "b", "c"]}),
            "spec.tags",
            "FieldValueTooMany",
        ),
        (json!({"size": "x"}), "spec.size", "FieldValueTypeInvalid"),
        (json!({"size": 7}), "spec", "FieldValueInvalid"),
    ];
    for (spec, field, reason) in cases {
        let e = api_err(new.create(&PostParams::default(), &bad(spec.clone())).await);
        assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"), "{spec}");
        assert!(
            e.message
                .starts_with(&format!("Widget.{GROUP} \"bad\" is invalid: ")),
            "{}",
            e.message
        );
        let causes = e.details.unwrap().causes;
        assert!(
            causes.iter().any(|c| c.field == field && c.reason == reason),
            "{spec}: {causes:?}"
        );
    }
    let e = api_err(new.create(&PostParams::default(), &bad(json!({"size": 7}))).await);
    assert!(e.message.contains("size must not be 7"), "{}", e.message);
}

#[tokio::test]
async fn crd_rejects_non_structural_schema() {
    let env = env().await;
    let c = env.client();
    let mut crd = gadget_crd();
    crd.metadata.name = Some(format!("bads.{GROUP}"));
    crd.spec.names.plural = "bads".into();
    crd.spec.names.kind = "Bad".into();
    crd.spec.names.singular = Some("bad".into());
    crd.spec.versions[0].schema = serde_json::from_value(json!({"openAPIV3Schema": {
        "type": "object", "properties": {"spec": {"properties": {"a": {"type": "string"}}}}}}))
    .unwrap();
    let crds: Api<CustomResourceDefinition> = Api::all(c.clone());
    let e = api_err(crds.create(&PostParams::default(), &crd).await);
    assert_eq!((e.code, e.reason.as_str()), (422, "Invalid"));
}
