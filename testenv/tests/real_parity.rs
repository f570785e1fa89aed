//! Behaviours where a lenient API server would hide bugs, checked the same way against the in-tree
//! server and real kube-apiserver (`KUBEBUILDER_ASSETS=...`): unknown fields per
//! `fieldValidation` on every verb, `/status` without the status subresource, immutable fields
//! (`resourceVersion` and request errors: `real_parity_requests.rs`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::json;

#[tokio::test]
async fn unknown_fields_follow_field_validation_on_every_verb() {
    let (_env, c, ns) = parity_setup().await;
    let parts = coll(&ns, PARTS);
    let json = "application/json";
    let merge = "application/merge-patch+json";
    let bogus = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Part",
        "metadata": {"name": "p1", "bogusMeta": 1}, "spec": {"size": 1, "zb": 1, "za": 2}, "top": 1});

    // Default (Warn): created, pruned, one warning per field.
    let r = send(&c, "POST", &parts, json, Some(&bogus), &[]).await;
    assert_eq!(r.code, 201, "{:?}", r.body);
    assert_eq!(
        r.warnings,
        [
            r#"299 - "unknown field \"metadata.bogusMeta\"""#,
            r#"299 - "unknown field \"spec.za\"""#,
            r#"299 - "unknown field \"spec.zb\"""#,
            r#"299 - "unknown field \"top\"""#,
        ]
    );
    assert_eq!(r.body["spec"], json!({"size": 1}));
    assert!(r.body.get("top").is_none());

    // Strict create: 400 listing every unknown field.
    let mut strict = bogus.clone();
    strict["metadata"]["name"] = json!("p2");
    let r = send(
        &c,
        "POST",
        &format!("{parts}?fieldValidation=Strict"),
        json,
        Some(&strict),
        &[],
    )
    .await;
    assert_eq!((r.code, r.body["reason"].as_str()), (400, Some("BadRequest")));
    assert_eq!(
        msg(&r),
        r#"Part in version "v1" cannot be handled as a Part: strict decoding error: unknown field "metadata.bogusMeta", unknown field "spec.za", unknown field "spec.zb", unknown field "top""#
    );

    // Ignore: no warning.
    let mut ignored = bogus.clone();
    ignored["metadata"]["name"] = json!("p3");
    let r = send(
        &c,
        "POST",
        &format!("{parts}?fieldValidation=Ignore"),
        json,
        Some(&ignored),
        &[],
    )
    .await;
    assert_eq!(r.code, 201);
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);

    // Update: warning by default, 400 when strict.
    let live = send(&c, "GET", &format!("{parts}/p1"), json, None, &[])
        .await
        .body;
    let mut upd = live.clone();
    upd["spec"]["zz"] = json!(1);
    let r = send(
        &c,
        "PUT",
        &format!("{parts}/p1?fieldValidation=Strict"),
        json,
        Some(&upd),
        &[],
    )
    .await;
    assert_eq!(r.code, 400);
    assert!(
        msg(&r).ends_with(r#"strict decoding error: unknown field "spec.zz""#),
        "{}",
        msg(&r)
    );
    let r = send(&c, "PUT", &format!("{parts}/p1"), json, Some(&upd), &[]).await;
    assert_eq!(r.code, 200);
    assert_eq!(r.warnings, [r#"299 - "unknown field \"spec.zz\"""#]);

    // Patches: warning by default; strict is a 422 on the `patch`.
    let r = send(
        &c,
        "PATCH",
        &format!("{parts}/p1"),
        merge,
        Some(&json!({"spec": {"yy": 1}})),
        &[],
    )
    .await;
    assert_eq!((r.code, r.warnings.len()), (200, 1), "{:?}", r.warnings);
    for (ctype, patch) in [
        (merge, json!({"spec": {"yy": 1}})),
        (
            "application/json-patch+json",
            json!([{"op": "add", "path": "/spec/yy", "value": 1}]),
        ),
    ] {
        let r = send(
            &c,
            "PATCH",
            &format!("{parts}/p1?fieldValidation=Strict"),
            ctype,
            Some(&patch),
            &[],
        )
        .await;
        assert_eq!(
            (r.code, r.body["reason"].as_str()),
            (422, Some("Invalid")),
            "{ctype}"
        );
        assert!(
            msg(&r).starts_with(r#" "" is invalid: patch: Invalid value: "#),
            "{}",
            msg(&r)
        );
        assert!(
            msg(&r).ends_with(r#"strict decoding error: unknown field "spec.yy""#),
            "{}",
            msg(&r)
        );
        let cs = causes(&r);
        assert_eq!(cs.len(), 1);
        assert_eq!(
            (cs[0].0.as_str(), cs[0].1.as_str()),
            ("patch", "FieldValueInvalid")
        );
    }
    // The status subresource too.
    let r = send(
        &c,
        "PATCH",
        &format!("{parts}/p1/status"),
        merge,
        Some(&json!({"status": {"qq": 1}})),
        &[],
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.warnings, [r#"299 - "unknown field \"status.qq\"""#]);

    // Built-in kinds as well.
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    let cm = json!({"metadata": {"name": "cw"}, "data": {"a": "1"}, "bogus": 1});
    let r = send(&c, "POST", &cms, json, Some(&cm), &[]).await;
    assert_eq!(r.code, 201);
    assert_eq!(r.warnings, [r#"299 - "unknown field \"bogus\"""#]);
    assert!(r.body.get("bogus").is_none());
    let r = send(
        &c,
        "POST",
        &format!("{cms}?fieldValidation=Strict"),
        json,
        Some(&cm),
        &[],
    )
    .await;
    assert_eq!(r.code, 400);
    assert_eq!(
        msg(&r),
        r#"ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "bogus""#
    );
    let r = send(
        &c,
        "PATCH",
        &format!("{cms}/cw?fieldValidation=Strict"),
        merge,
        Some(&json!({"bogus": 1})),
        &[],
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(causes(&r)[0].0, "patch");

    // An unsupported fieldValidation value.
    let r = send(
        &c,
        "POST",
        &format!("{cms}?fieldValidation=Bogus"),
        json,
        Some(&cm),
        &[],
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        msg(&r),
        r#"CreateOptions.meta.k8s.io "" is invalid: fieldValidation: Unsupported value: "Bogus": supported values: "", "Ignore", "Strict", "Warn""#
    );
}

#[tokio::test]
async fn status_without_the_status_subresource_is_not_found() {
    let (_env, c, ns) = parity_setup().await;
    let plain = coll(&ns, PLAIN);
    let r = send(
        &c,
        "POST",
        &plain,
        "application/json",
        Some(&obj("PlainPart", "w1", json!({"size": 1}))),
        &[],
    )
    .await;
    assert_eq!(r.code, 201);
    let patch = json!({"status": {"phase": "y"}});
    for (method, body) in [("GET", None), ("PATCH", Some(&patch)), ("PUT", Some(&patch))] {
        let r = send(
            &c,
            method,
            &format!("{plain}/w1/status"),
            "application/merge-patch+json",
            body,
            &[],
        )
        .await;
        assert_eq!(r.code, 404, "{method}");
        assert_eq!(r.body["reason"], "NotFound", "{method}");
        assert_eq!(
            msg(&r),
            format!("plainparts.{GROUP} \"w1\" not found"),
            "{method}"
        );
    }
    // Only get, update and patch are served on /status.
    let parts = coll(&ns, PARTS);
    send(
        &c,
        "POST",
        &parts,
        "application/json",
        Some(&obj("Part", "p1", json!({"size": 1}))),
        &[],
    )
    .await;
    let r = send(
        &c,
        "DELETE",
        &format!("{parts}/p1/status"),
        "application/json",
        None,
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            405,
            format!("delete is not supported on resources of kind \"parts.{GROUP}\"").as_str()
        )
    );
    let r = send(
        &c,
        "POST",
        &format!("{parts}/p1/status"),
        "application/json",
        Some(&json!({})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            405,
            format!("create is not supported on resources of kind \"parts.{GROUP}\"").as_str()
        )
    );
    // Built-in kinds without one: the generic 404.
    let r = send(
        &c,
        "GET",
        &format!("/api/v1/namespaces/{ns}/configmaps/x/status"),
        "",
        None,
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (404, "the server could not find the requested resource")
    );
}

#[tokio::test]
async fn immutable_fields_are_rejected() {
    let (_env, c, ns) = parity_setup().await;
    let merge = "application/merge-patch+json";
    let cms = format!("/api/v1/namespaces/{ns}/configmaps");
    send(
        &c,
        "POST",
        &cms,
        "application/json",
        Some(&json!({"metadata": {"name": "c1"}, "data": {"a": "1"}})),
        &[],
    )
    .await;
    let c1 = format!("{cms}/c1");
    let r = send(
        &c,
        "PATCH",
        &c1,
        merge,
        Some(&json!({"metadata": {"uid": "x"}})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            r#"ConfigMap "c1" is invalid: metadata.uid: Invalid value: "x": field is immutable"#
        )
    );
    let cause = (
        "metadata.uid".to_string(),
        "FieldValueInvalid".to_string(),
        r#"Invalid value: "x": field is immutable"#.to_string(),
    );
    assert_eq!(
        causes(&r),
        [cause.clone(), cause],
        "reported twice, like the apiserver"
    );
    let r = send(
        &c,
        "PATCH",
        &c1,
        merge,
        Some(&json!({"metadata": {"deletionTimestamp": "2020-01-01T00:00:00Z"}})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            r#"ConfigMap "c1" is invalid: metadata.deletionTimestamp: Invalid value: 2020-01-01 00:00:00 +0000 UTC: field is immutable"#
        )
    );
    // Removing uid or changing creationTimestamp / generation is ignored.
    let before = send(&c, "GET", &c1, "", None, &[]).await.body;
    let r = send(
        &c,
        "PATCH",
        &c1,
        merge,
        Some(&json!({"metadata": {"uid": null, "creationTimestamp": "2020-01-01T00:00:00Z"}})),
        &[],
    )
    .await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["metadata"]["uid"], before["metadata"]["uid"]);
    assert_eq!(
        r.body["metadata"]["creationTimestamp"],
        before["metadata"]["creationTimestamp"]
    );
    // Moving the object.
    let r = send(
        &c,
        "PATCH",
        &c1,
        merge,
        Some(&json!({"metadata": {"name": "other"}})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            400,
            "the name of the object (other) does not match the name on the URL (c1)"
        )
    );
    let r = send(
        &c,
        "PATCH",
        &c1,
        merge,
        Some(&json!({"metadata": {"namespace": "default"}})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            400,
            "the namespace of the provided object does not match the namespace sent on the request"
        )
    );

    // immutable: true ConfigMaps and Secrets; a Secret's type.
    send(
        &c,
        "POST",
        &cms,
        "application/json",
        Some(&json!({"metadata": {"name": "im"}, "immutable": true, "data": {"a": "1"}})),
        &[],
    )
    .await;
    let r = send(
        &c,
        "PATCH",
        &format!("{cms}/im"),
        merge,
        Some(&json!({"data": {"a": "2"}})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            "ConfigMap \"im\" is invalid: data: Forbidden: field is immutable when `immutable` is set"
        )
    );
    let r = send(
        &c,
        "PATCH",
        &format!("{cms}/im"),
        merge,
        Some(&json!({"immutable": false})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            "ConfigMap \"im\" is invalid: immutable: Forbidden: field is immutable when `immutable` is set"
        )
    );
    let r = send(
        &c,
        "PATCH",
        &format!("{cms}/im"),
        merge,
        Some(&json!({"metadata": {"labels": {"a": "b"}}})),
        &[],
    )
    .await;
    assert_eq!(r.code, 200, "metadata stays mutable");
    let secrets = format!("/api/v1/namespaces/{ns}/secrets");
    send(
        &c,
        "POST",
        &secrets,
        "application/json",
        Some(&json!({"metadata": {"name": "s1"}, "data": {"a": "MQ=="}})),
        &[],
    )
    .await;
    let r = send(
        &c,
        "PATCH",
        &format!("{secrets}/s1"),
        merge,
        Some(&json!({"type": "foo"})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            r#"Secret "s1" is invalid: type: Invalid value: "foo": field is immutable"#
        )
    );

    // Custom resources: kind, apiVersion, CEL transition rules.
    let parts = coll(&ns, PARTS);
    send(
        &c,
        "POST",
        &parts,
        "application/json",
        Some(&obj("Part", "p1", json!({"size": 1, "name": "a"}))),
        &[],
    )
    .await;
    let p1 = format!("{parts}/p1");
    let r = send(&c, "PATCH", &p1, merge, Some(&json!({"kind": "Other"})), &[]).await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            format!(r#"Other.{GROUP} "p1" is invalid: kind: Invalid value: "Other": must be Part"#).as_str()
        )
    );
    let r = send(&c, "PATCH", &p1, merge, Some(&json!({"apiVersion": "v9"})), &[]).await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            format!(r#"Part "p1" is invalid: apiVersion: Invalid value: "v9": must be {GROUP}/v1"#).as_str()
        )
    );
    let r = send(
        &c,
        "PATCH",
        &p1,
        merge,
        Some(&json!({"spec": {"name": "b"}})),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            422,
            format!(r#"Part.{GROUP} "p1" is invalid: spec.name: Invalid value: "string": name is immutable"#)
                .as_str()
        )
    );
}
