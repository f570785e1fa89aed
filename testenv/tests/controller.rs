//! A tiny kube-runtime `Controller` (plus an explicit `watcher` + `reflector`) against the control
//! plane: it mirrors ConfigMaps labelled `mirror=yes` into `<name>-mirror` and removes the mirror when
//! the source goes away.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams};
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, ObjectRef};
use kube::runtime::{Controller, WatchStreamExt, watcher};
use serde_json::json;

#[derive(Debug, thiserror::Error)]
#[error(transparent)]
struct ReconcileError(#[from] kube::Error);

struct Ctx {
    api: Api<ConfigMap>,
}

async fn reconcile(obj: Arc<ConfigMap>, ctx: Arc<Ctx>) -> Result<Action, ReconcileError> {
    let name = obj.metadata.name.clone().unwrap_or_default();
    let mirror = format!("{name}-mirror");
    if obj.metadata.deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let body = json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": mirror},
        "data": obj.data.clone().unwrap_or_default(),
    });
    ctx.api
        .patch(
            &mirror,
            &PatchParams::apply("mirror-controller").force(),
            &Patch::Apply(&body),
        )
        .await?;
    Ok(Action::await_change())
}

fn error_policy(_: Arc<ConfigMap>, _: &ReconcileError, _: Arc<Ctx>) -> Action {
    Action::requeue(Duration::from_millis(200))
}

async fn mirror_data(api: &Api<ConfigMap>, name: &str) -> Option<std::collections::BTreeMap<String, String>> {
    api.get_opt(name)
        .await
        .unwrap()
        .map(|c| c.data.unwrap_or_default())
}

#[tokio::test(flavor = "multi_thread")]
async fn controller_reacts_to_create_update_delete() {
    let env = common::env().await;
    let c = env.client();
    let ns = common::namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c.clone(), &ns);
    let sources = watcher::Config::default().labels("mirror=yes");
    let ctx = Arc::new(Ctx { api: api.clone() });
    let ctl_api = api.clone();
    let controller = tokio::spawn(
        Controller::new(api.clone(), sources)
            .run(reconcile, error_policy, ctx)
            .for_each(|_| async {}),
    );
    // Deletions: a reflector over sources; when one disappears, delete its mirror.
    let (reader, writer) = reflector::store::<ConfigMap>();
    let refl = reflector::reflector(
        writer,
        watcher(api.clone(), watcher::Config::default().labels("mirror=yes")),
    )
    .applied_objects()
    .for_each(|_| async {});
    let refl_task = tokio::spawn(refl);
    let cleaner = tokio::spawn(async move {
        let mut deleted = watcher(ctl_api.clone(), watcher::Config::default().labels("mirror=yes")).boxed();
        while let Some(ev) = deleted.next().await {
            if let Ok(watcher::Event::Delete(o)) = ev {
                let name = o.metadata.name.unwrap_or_default();
                let _ = ctl_api
                    .delete(&format!("{name}-mirror"), &DeleteParams::default())
                    .await;
            }
        }
    });

    let src: ConfigMap = serde_json::from_value(json!({
        "metadata": {"name": "src", "labels": {"mirror": "yes"}}, "data": {"k": "1"}
    }))
    .unwrap();
    api.create(&PostParams::default(), &src).await.unwrap();
    common::wait_for(30, "mirror created", || async {
        mirror_data(&api, "src-mirror")
            .await
            .filter(|d| d.get("k").map(String::as_str) == Some("1"))
    })
    .await;
    // The reflector store sees the source.
    common::wait_for(30, "reflector store holds src", || {
        let r = reader.clone();
        let ns = ns.clone();
        async move { r.get(&ObjectRef::new("src").within(&ns)) }
    })
    .await;

    api.patch(
        "src",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"k": "2"}})),
    )
    .await
    .unwrap();
    common::wait_for(30, "mirror updated", || async {
        mirror_data(&api, "src-mirror")
            .await
            .filter(|d| d.get("k").map(String::as_str) == Some("2"))
    })
    .await;

    api.delete("src", &DeleteParams::default()).await.unwrap();
    common::wait_for(30, "mirror removed", || async {
        mirror_data(&api, "src-mirror").await.is_none().then_some(())
    })
    .await;
    common::wait_for(30, "reflector store dropped src", || {
        let r = reader.clone();
        let ns = ns.clone();
        async move { r.get(&ObjectRef::new("src").within(&ns)).is_none().then_some(()) }
    })
    .await;
    // Unlabelled ConfigMaps are ignored.
    api.create(
        &PostParams::default(),
        &serde_json::from_value(json!({"metadata": {"name": "other"}})).unwrap(),
    )
    .await
    .unwrap();
    let names: Vec<String> = api
        .list(&ListParams::default())
        .await
        .unwrap()
        .items
        .into_iter()
        .filter_map(|c| c.metadata.name)
        .collect();
    assert!(!names.contains(&"other-mirror".to_string()));
    controller.abort();
    refl_task.abort();
    cleaner.abort();
}
