//! apimachinery's owner-reference rule, the same on both servers: at most one owner reference may
//! be the controller, on create, update, merge patch and server-side apply.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::api::{Api, Patch, PatchParams, PostParams};
use serde_json::json;

fn owner(name: &str, uid: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap", "name": name, "uid": uid, "controller": true})
}

fn refused(r: Result<ConfigMap, kube::Error>, what: &str) {
    match r {
        Err(kube::Error::Api(e)) => {
            assert_eq!(e.code, 422, "{what}: {e:?}");
            assert!(
                e.message
                    .contains("Only one reference can have Controller set to true"),
                "{what}: {}",
                e.message
            );
        }
        other => panic!("{what}: expected 422, got {other:?}"),
    }
}

#[tokio::test]
async fn only_one_controller_reference() {
    let env = env().await;
    let c = env.client();
    let ns = namespace(&c).await;
    let api: Api<ConfigMap> = Api::namespaced(c, &ns);
    let two: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "two",
        "ownerReferences": [owner("a", "u1"), owner("b", "u2")]}}))
    .unwrap();
    refused(api.create(&PostParams::default(), &two).await, "create");
    let one: ConfigMap = serde_json::from_value(json!({"metadata": {"name": "one",
        "ownerReferences": [owner("a", "u1")]}}))
    .unwrap();
    api.create(&PostParams::default(), &one).await.unwrap();
    let second = json!({"metadata": {"ownerReferences": [owner("a", "u1"), owner("b", "u2")]}});
    refused(
        api.patch("one", &PatchParams::default(), &Patch::Merge(&second))
            .await,
        "merge patch",
    );
    // An apply adds its reference beside the one another manager set (the list is a map by uid).
    let applied = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "one", "ownerReferences": [owner("b", "u2")]}});
    refused(
        api.patch(
            "one",
            &PatchParams::apply("other").force(),
            &Patch::Apply(&applied),
        )
        .await,
        "apply",
    );
    // Dropping the first makes room.
    let swap = json!({"metadata": {"ownerReferences": [owner("b", "u2")]}});
    let cm = api
        .patch("one", &PatchParams::default(), &Patch::Merge(&swap))
        .await
        .unwrap();
    assert_eq!(cm.metadata.owner_references.unwrap()[0].uid, "u2");
}
