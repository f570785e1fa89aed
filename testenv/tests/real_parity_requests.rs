//! Requests a lenient API server would let through, checked the same way against the in-tree
//! server and real kube-apiserver (`KUBEBUILDER_ASSETS=...`): `resourceVersion` on updates and
//! delete preconditions, type-meta errors, unserved paths, field-selector errors.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn resource_version_on_updates() {
    let (_env, c, ns) = parity_setup().await;
    let json = "application/json";
    let parts = coll(&ns, PARTS);
    send(
        &c,
        "POST",
        &parts,
        json,
        Some(&obj("Part", "p1", json!({"size": 1}))),
        &[],
    )
    .await;
    // Custom resources need one, on the object and on /status.
    for path in [format!("{parts}/p1"), format!("{parts}/p1/status")] {
        let r = send(
            &c,
            "PUT",
            &path,
            json,
            Some(&obj("Part", "p1", json!({"size": 2}))),
            &[],
        )
        .await;
        assert_eq!(
            (r.code, msg(&r)),
            (422, format!(r#"parts.{GROUP} "p1" is invalid: metadata.resourceVersion: Invalid value: 0x0: must be specified for an update"#).as_str()),
            "{path}"
        );
        assert_eq!(r.body["details"]["kind"], "parts");
    }
    // ConfigMaps do not.
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    send(
        &c,
        "POST",
        &cms,
        json,
        Some(&json!({"metadata": {"name": "c1"}, "data": {"a": "1"}})),
        &[],
    )
    .await;
    let r = send(
        &c,
        "PUT",
        &format!("{cms}/c1"),
        json,
        Some(&json!({"metadata": {"name": "c1"}, "data": {"a": "2"}})),
        &[],
    )
    .await;
    assert_eq!(r.code, 200);
    // A stale one conflicts; a missing object is 404 (update never creates).
    let r = send(
        &c,
        "PUT",
        &format!("{cms}/c1"),
        json,
        Some(&json!({"metadata": {"name": "c1", "resourceVersion": "1"}, "data": {"a": "3"}})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            409,
            "Operation cannot be fulfilled on configmaps \"c1\": the object has been modified; please apply your changes to the latest version and try again"
        )
    );
    let r = send(
        &c,
        "PUT",
        &format!("{cms}/nope"),
        json,
        Some(&json!({"metadata": {"name": "nope"}})),
        &[],
    )
    .await;
    assert_eq!((r.code, msg(&r)), (404, "configmaps \"nope\" not found"));
    // Server-side apply with a stale one.
    let apply = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Part", "metadata": {"name": "p1", "resourceVersion": "1"}, "spec": {"size": 1}});
    let r = send(
        &c,
        "PATCH",
        &format!("{parts}/p1?fieldManager=x"),
        "application/apply-patch+yaml",
        Some(&apply),
        &[],
    )
    .await;
    assert_eq!(r.code, 409);
    // Delete preconditions.
    let r = send(
        &c,
        "DELETE",
        &format!("{cms}/c1"),
        json,
        Some(&json!({"preconditions": {"resourceVersion": "1"}})),
        &[],
    )
    .await;
    assert_eq!(r.code, 409);
    assert!(
        msg(&r).starts_with("Operation cannot be fulfilled on ConfigMap \"c1\": the ResourceVersion in the precondition (1) does not match the ResourceVersion in record ("),
        "{}",
        msg(&r)
    );
    let r = send(
        &c,
        "DELETE",
        &format!("{parts}/p1"),
        json,
        Some(&json!({"preconditions": {"uid": "2"}})),
        &[],
    )
    .await;
    assert!(
        msg(&r).starts_with(&format!("Operation cannot be fulfilled on Part.{GROUP} \"p1\": the UID in the precondition (2) does not match the UID in record (")),
        "{}",
        msg(&r)
    );
}

#[tokio::test]
async fn type_meta_and_selector_errors() {
    let (_env, c, ns) = parity_setup().await;
    let json = "application/json";
    let parts = coll(&ns, PARTS);
    let r = send(
        &c,
        "POST",
        &parts,
        json,
        Some(&json!({"kind": "Part", "metadata": {"name": "a"}})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            400,
            format!("the API version in the data () does not match the expected API version ({GROUP}/v1)")
                .as_str()
        )
    );
    let r = send(
        &c,
        "POST",
        &parts,
        json,
        Some(&obj("PlainPart", "a", json!({}))),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            format!(r#"PlainPart.{GROUP} "a" is invalid: kind: Invalid value: "PlainPart": must be Part"#)
                .as_str()
        )
    );
    let r = send(&c, "PUT", &parts, json, Some(&json!({})), &[]).await;
    assert_eq!((r.code, msg(&r)), (400, "name must be provided"));
    let r = send(
        &c,
        "POST",
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        json,
        Some(&json!({})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            "ConfigMap \"\" is invalid: metadata.name: Required value: name or generateName is required"
        )
    );
    // Paths under a CRD group the server does not serve are plain-text 404s, not Status objects;
    // under the core group they are Status objects.
    let r = send(
        &c,
        "GET",
        &format!("/apis/{GROUP}/v9/namespaces/{ns}/parts"),
        "",
        None,
        &[],
    )
    .await;
    assert_eq!(r.code, 404);
    assert!(r.content_type.starts_with("text/plain"), "{}", r.content_type);
    let r = send(
        &c,
        "GET",
        &format!("/apis/{GROUP}/v1/namespaces/{ns}/nopes"),
        "",
        None,
        &[],
    )
    .await;
    assert!(r.content_type.starts_with("text/plain"), "{}", r.content_type);
    let r = send(
        &c,
        "GET",
        &format!("/api/v1/namespaces/{ns}/nopes"),
        "",
        None,
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (404, "the server could not find the requested resource")
    );
    // Field selectors the kind does not support.
    let r = send(
        &c,
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps?fieldSelector=spec.x=1"),
        "",
        None,
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            400,
            r#""spec.x" is not a known field selector: only "metadata.name", "metadata.namespace""#
        )
    );
    let r = send(
        &c,
        "GET",
        &format!("{parts}?fieldSelector=spec.x=1"),
        "",
        None,
        &[],
    )
    .await;
    assert_eq!((r.code, msg(&r)), (400, "field label not supported: spec.x"));
}
