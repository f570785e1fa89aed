//! Server-side apply and `metadata.managedFields`, checked the same way against the in-tree server
//! and real kube-apiserver: undeclared fields and type mismatches (500 whatever
//! `fieldValidation` says), conflicts with apply and update managers, shared ownership, force,
//! removal of fields a manager stops applying, associative lists, nulls, and the managed fields'
//! shape.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use common::*;
use serde_json::{Value, json};

const APPLY: &str = "application/apply-patch+yaml";

async fn setup() -> (testenv::TestEnv, kube::Client, String) {
    let env = env().await;
    env.install_crds(vec![part_crd("parts", "Part", true)])
        .await
        .unwrap();
    let c = env.client();
    let ns = namespace(&c).await;
    (env, c, ns)
}

fn parts(ns: &str) -> String {
    format!("/apis/{GROUP}/v1/namespaces/{ns}/parts")
}

fn cfg(name: &str, rest: Value) -> Value {
    let mut v = json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Part", "metadata": {"name": name}});
    if let (Some(m), Some(r)) = (v.as_object_mut(), rest.as_object()) {
        for (k, x) in r {
            if k == "metadata" {
                for (mk, mv) in x.as_object().unwrap() {
                    m["metadata"][mk] = mv.clone();
                }
            } else {
                m.insert(k.clone(), x.clone());
            }
        }
    }
    v
}

async fn apply(c: &kube::Client, ns: &str, name: &str, manager: &str, body: &Value, extra: &str) -> Raw {
    let path = format!("{}/{name}?fieldManager={manager}{extra}", parts(ns));
    send(c, "PATCH", &path, APPLY, Some(body), &[]).await
}

/// managedFields without times, as (manager, operation, subresource, fieldsV1).
fn owners(obj: &Value) -> Vec<(String, String, String, Value)> {
    obj["metadata"]["managedFields"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .map(|e| {
            let s = |k: &str| e[k].as_str().unwrap_or_default().to_string();
            (
                s("manager"),
                s("operation"),
                s("subresource"),
                e["fieldsV1"].clone(),
            )
        })
        .collect()
}

fn owner_of<'a>(obj: &'a [(String, String, String, Value)], manager: &str) -> &'a Value {
    &obj.iter()
        .find(|(m, ..)| m == manager)
        .unwrap_or_else(|| panic!("no entry for {manager}: {obj:?}"))
        .3
}

#[tokio::test]
async fn apply_of_undeclared_fields_is_a_500() {
    let (_env, c, ns) = setup().await;
    for q in ["", "&fieldValidation=Strict", "&fieldValidation=Ignore"] {
        let r = apply(
            &c,
            &ns,
            "p1",
            "t",
            &cfg("p1", json!({"spec": {"size": 1, "bogus": 2}})),
            q,
        )
        .await;
        assert_eq!(r.code, 500, "{q}");
        assert_eq!(
            msg(&r),
            format!(
                "failed to create typed patch object (/p1; {GROUP}/v1, Kind=Part): .spec.bogus: field not declared in schema"
            ),
            "{q}"
        );
        assert_eq!(r.body["status"], "Failure");
    }
    let r = apply(
        &c,
        &ns,
        "p1",
        "t",
        &cfg("p1", json!({"metadata": {"bogus": 1}})),
        "",
    )
    .await;
    assert!(
        msg(&r).ends_with(": .metadata.bogus: field not declared in schema"),
        "{}",
        msg(&r)
    );
    let r = apply(&c, &ns, "p1", "t", &cfg("p1", json!({"spec": {"size": "x"}})), "").await;
    assert_eq!(r.code, 500);
    assert!(
        msg(&r).ends_with(": .spec.size: expected numeric (int or float), got string"),
        "{}",
        msg(&r)
    );
    // The same check on an existing object, and on built-in kinds.
    assert_eq!(
        apply(&c, &ns, "p1", "t", &cfg("p1", json!({"spec": {"size": 1}})), "")
            .await
            .code,
        201
    );
    let r = apply(
        &c,
        &ns,
        "p1",
        "t",
        &cfg("p1", json!({"spec": {"size": 1, "q": 3}})),
        "",
    )
    .await;
    assert!(
        msg(&r).ends_with(": .spec.q: field not declared in schema"),
        "{}",
        msg(&r)
    );
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s1"}, "data": {"a": "1"}, "bogus": 1});
    let r = send(
        &c,
        "PATCH",
        &format!("/api/v1/namespaces/{ns}/configmaps/s1?fieldManager=t"),
        APPLY,
        Some(&cm),
        &[],
    )
    .await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            500,
            "failed to create typed patch object (/s1; /v1, Kind=ConfigMap): .bogus: field not declared in schema"
        )
    );
    // Nulls are kept by apply, so validation sees them (a create would prune them).
    let r = apply(
        &c,
        &ns,
        "p2",
        "t",
        &cfg("p2", json!({"spec": {"size": null}})),
        "",
    )
    .await;
    assert_eq!(r.code, 422);
    assert_eq!(
        r.body["details"]["causes"][0],
        json!({"reason": "FieldValueTypeInvalid", "field": "spec.size",
            "message": "Invalid value: \"null\": spec.size in body must be of type integer: \"null\""})
    );
    // The CRD has CEL rules, which a type error keeps from running.
    assert_eq!(
        r.body["details"]["causes"][1]["message"],
        "Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation"
    );
    let created = send(
        &c,
        "POST",
        &parts(&ns),
        "application/json",
        Some(&cfg("p3", json!({"spec": {"size": null}}))),
        &[],
    )
    .await;
    assert_eq!((created.code, &created.body["spec"]), (201, &json!({})));
}

#[tokio::test]
async fn apply_conflicts_with_apply_and_update_managers() {
    let (_env, c, ns) = setup().await;
    // An update manager (the creator) owns what it wrote: another value conflicts...
    let created = send(
        &c,
        "POST",
        &format!("{}?fieldManager=creator", parts(&ns)),
        "application/json",
        Some(&cfg("g1", json!({"spec": {"size": 1}}))),
        &[],
    )
    .await;
    assert_eq!(created.code, 201);
    let r = apply(
        &c,
        &ns,
        "g1",
        "applier",
        &cfg("g1", json!({"spec": {"size": 2}})),
        "",
    )
    .await;
    assert_eq!(r.code, 409);
    assert_eq!(r.body["reason"], "Conflict");
    assert_eq!(
        msg(&r),
        format!("Apply failed with 1 conflict: conflict with \"creator\" using {GROUP}/v1: .spec.size")
    );
    assert_eq!(
        r.body["details"]["causes"],
        json!([{"reason": "FieldManagerConflict", "message": format!("conflict with \"creator\" using {GROUP}/v1"), "field": ".spec.size"}])
    );
    // ...the same value is shared ownership.
    let r = apply(
        &c,
        &ns,
        "g1",
        "applier",
        &cfg("g1", json!({"spec": {"size": 1}})),
        "",
    )
    .await;
    assert_eq!(r.code, 200);
    let o = owners(&r.body);
    assert_eq!(owner_of(&o, "applier"), &json!({"f:spec": {"f:size": {}}}));
    assert_eq!(
        owner_of(&o, "creator"),
        &json!({"f:spec": {".": {}, "f:size": {}}})
    );

    // Two appliers: every conflicting field is listed; force takes them over.
    let a = cfg(
        "m1",
        json!({"metadata": {"labels": {"a": "1"}}, "spec": {"size": 1, "name": "n"}}),
    );
    assert_eq!(apply(&c, &ns, "m1", "alice", &a, "").await.code, 201);
    let b = cfg(
        "m1",
        json!({"metadata": {"labels": {"a": "2"}}, "spec": {"size": 2}}),
    );
    let r = apply(&c, &ns, "m1", "bob", &b, "").await;
    assert_eq!(
        (r.code, msg(&r)),
        (
            409,
            "Apply failed with 2 conflicts: conflicts with \"alice\":\n- .metadata.labels.a\n- .spec.size"
        )
    );
    let r = apply(&c, &ns, "m1", "bob", &b, "&force=true").await;
    assert_eq!(r.code, 200);
    assert_eq!(r.body["spec"]["size"], 2);
    let o = owners(&r.body);
    assert_eq!(owner_of(&o, "alice"), &json!({"f:spec": {"f:name": {}}}));
    // An update takes fields over without conflict (it is forced by nature).
    let r = send(
        &c,
        "PATCH",
        &format!("{}/m1?fieldManager=carol", parts(&ns)),
        "application/merge-patch+json",
        Some(&json!({"spec": {"size": 5}})),
        &[],
    )
    .await;
    assert_eq!(r.code, 200);
    let o = owners(&r.body);
    assert_eq!(owner_of(&o, "carol"), &json!({"f:spec": {"f:size": {}}}));
    assert_eq!(
        owner_of(&o, "bob"),
        &json!({"f:metadata": {"f:labels": {"f:a": {}}}})
    );
    let r = apply(&c, &ns, "m1", "bob", &b, "").await;
    assert_eq!(
        msg(&r),
        format!("Apply failed with 1 conflict: conflict with \"carol\" using {GROUP}/v1: .spec.size")
    );
    // Alice stops applying spec.name: nobody else owns it, so it goes.
    let r = apply(&c, &ns, "m1", "alice", &cfg("m1", json!({"spec": {}})), "").await;
    assert_eq!(r.code, 200, "{:?}", r.body);
    assert!(r.body["spec"].get("name").is_none(), "{:?}", r.body["spec"]);
    assert_eq!(r.body["spec"]["size"], 5);
}

#[tokio::test]
async fn apply_merges_associative_lists_and_replaces_atomic_ones() {
    let (_env, c, ns) = setup().await;
    let a = cfg(
        "l1",
        json!({"spec": {"items": [{"name": "a", "value": "1"}], "tags": ["x"]}}),
    );
    assert_eq!(apply(&c, &ns, "l1", "alice", &a, "").await.code, 201);
    let b = cfg("l1", json!({"spec": {"items": [{"name": "b", "value": "2"}]}}));
    let r = apply(&c, &ns, "l1", "bob", &b, "").await;
    assert_eq!(r.code, 200, "{:?}", r.body);
    assert_eq!(
        r.body["spec"]["items"],
        json!([{"name": "a", "value": "1"}, {"name": "b", "value": "2"}])
    );
    let o = owners(&r.body);
    assert_eq!(
        owner_of(&o, "bob"),
        &json!({"f:spec": {"f:items": {"k:{\"name\":\"b\"}": {".": {}, "f:name": {}, "f:value": {}}}}})
    );
    assert_eq!(
        owner_of(&o, "alice"),
        &json!({"f:spec": {"f:items": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:value": {}}}, "f:tags": {}}})
    );
    // An atomic list is one field: another value conflicts, forced it is replaced.
    let t = cfg("l1", json!({"spec": {"tags": ["y"]}}));
    let r = apply(&c, &ns, "l1", "bob", &t, "").await;
    assert_eq!(
        msg(&r),
        "Apply failed with 1 conflict: conflict with \"alice\": .spec.tags"
    );
    let r = apply(&c, &ns, "l1", "bob", &t, "&force=true").await;
    assert_eq!(r.body["spec"]["tags"], json!(["y"]));
    // Bob dropped his item from the configuration: it is removed.
    assert_eq!(r.body["spec"]["items"], json!([{"name": "a", "value": "1"}]));
}

#[tokio::test]
async fn managed_fields_shape() {
    let (_env, c, ns) = setup().await;
    let body = cfg(
        "m4",
        json!({"metadata": {"labels": {"x": "y"}, "annotations": {"q": "r"}, "finalizers": ["a/b"]}, "spec": {"size": 1}}),
    );
    let r = send(
        &c,
        "POST",
        &parts(&ns),
        "application/json",
        Some(&body),
        &[("user-agent", "parity-test/1.0 (linux/amd64)")],
    )
    .await;
    assert_eq!(r.code, 201);
    let mf = r.body["metadata"]["managedFields"].as_array().unwrap().clone();
    assert_eq!(mf.len(), 1);
    let e = &mf[0];
    assert_eq!(
        e["manager"], "parity-test",
        "default manager: the user agent's product"
    );
    assert_eq!(e["operation"], "Update");
    assert_eq!(e["apiVersion"], format!("{GROUP}/v1"));
    assert_eq!(e["fieldsType"], "FieldsV1");
    assert!(e["time"].as_str().unwrap().ends_with('Z'));
    assert_eq!(
        e["fieldsV1"],
        json!({"f:metadata": {"f:annotations": {".": {}, "f:q": {}}, "f:finalizers": {".": {}, "v:\"a/b\"": {}},
            "f:labels": {".": {}, "f:x": {}}}, "f:spec": {".": {}, "f:size": {}}})
    );
    // A status write: its own entry, marked with the subresource.
    let r = send(
        &c,
        "PATCH",
        &format!("{}/m4/status?fieldManager=st", parts(&ns)),
        "application/merge-patch+json",
        Some(&json!({"status": {"phase": "p"}})),
        &[],
    )
    .await;
    let o = owners(&r.body);
    let st = o.iter().find(|(m, ..)| m == "st").unwrap();
    assert_eq!(
        (st.1.as_str(), st.2.as_str(), &st.3),
        ("Update", "status", &json!({"f:status": {".": {}, "f:phase": {}}}))
    );
    // A no-op write changes nothing, not even the resourceVersion or the managed fields' times.
    let rv = r.body["metadata"]["resourceVersion"].clone();
    let again = send(
        &c,
        "PATCH",
        &format!("{}/m4/status?fieldManager=st", parts(&ns)),
        "application/merge-patch+json",
        Some(&json!({"status": {"phase": "p"}})),
        &[],
    )
    .await;
    assert_eq!(again.body["metadata"]["resourceVersion"], rv);
    assert_eq!(
        again.body["metadata"]["managedFields"],
        r.body["metadata"]["managedFields"]
    );
    // Apply entries: operation Apply, no "." for maps.
    let r = apply(
        &c,
        &ns,
        "m4",
        "ap",
        &cfg("m4", json!({"metadata": {"labels": {"z": "1"}}})),
        "",
    )
    .await;
    let o = owners(&r.body);
    let ap = o.iter().find(|(m, ..)| m == "ap").unwrap();
    assert_eq!(
        (ap.1.as_str(), ap.2.as_str(), &ap.3),
        ("Apply", "", &json!({"f:metadata": {"f:labels": {"f:z": {}}}}))
    );
    // Core Events: involvedObject is atomic.
    let ev = json!({"metadata": {"name": "e1"}, "involvedObject": {"kind": "ConfigMap", "name": "c", "namespace": ns},
        "reason": "R", "message": "m", "type": "Normal"});
    let r = send(
        &c,
        "POST",
        &format!("/api/v1/namespaces/{ns}/events?fieldManager=ev"),
        "application/json",
        Some(&ev),
        &[],
    )
    .await;
    assert_eq!(
        r.body["metadata"]["managedFields"][0]["fieldsV1"],
        json!({"f:involvedObject": {}, "f:message": {}, "f:reason": {}, "f:type": {}})
    );
}

/// Conflicts are judged on the defaulted object, as the apiserver stores it: re-applying what
/// was created (with defaults filled in by the server) conflicts with nobody, whether the kind
/// is a CRD (built-in defaults) or a custom resource (schema defaults); changing a defaulted
/// value conflicts with the creator, who owns it.
#[tokio::test]
async fn apply_judges_conflicts_on_the_defaulted_object() {
    let env = env().await;
    let c = env.client();
    install_test_crds(&env).await;
    let ns = namespace(&c).await;

    // The CRD was created by testenv (an update manager); applying the same CRD is no conflict,
    // also when its numbers are spelled differently (`1` where the creator sent `1.0`).
    let mut crd = serde_json::to_value(widget_crd()).unwrap();
    for v in crd["spec"]["versions"].as_array_mut().unwrap() {
        v["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["size"]["minimum"] = json!(1);
    }
    let path = format!(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/widgets.{GROUP}?fieldManager=release-test"
    );
    let r = send(&c, "PATCH", &path, APPLY, Some(&crd), &[]).await;
    assert_eq!(r.code, 200, "{:?}", r.body);

    // A widget created without `color` gets the schema default `red`, owned by its creator.
    let w = |spec: Value| json!({"apiVersion": format!("{GROUP}/v1"), "kind": "Widget", "metadata": {"name": "d1"}, "spec": spec});
    let created = send(
        &c,
        "POST",
        &format!("/apis/{GROUP}/v1/namespaces/{ns}/widgets?fieldManager=creator"),
        "application/json",
        Some(&w(json!({"size": 1}))),
        &[],
    )
    .await;
    assert_eq!(created.code, 201, "{:?}", created.body);
    assert_eq!(created.body["spec"]["color"], "red");
    let at = format!("/apis/{GROUP}/v1/namespaces/{ns}/widgets/d1?fieldManager=applier");
    let same = send(&c, "PATCH", &at, APPLY, Some(&w(json!({"size": 1}))), &[]).await;
    assert_eq!(same.code, 200, "{:?}", same.body);
    let red = send(
        &c,
        "PATCH",
        &at,
        APPLY,
        Some(&w(json!({"size": 1, "color": "red"}))),
        &[],
    )
    .await;
    assert_eq!(red.code, 200, "{:?}", red.body);
    let blue = send(
        &c,
        "PATCH",
        &at,
        APPLY,
        Some(&w(json!({"size": 1, "color": "blue"}))),
        &[],
    )
    .await;
    assert_eq!(blue.code, 409, "{:?}", blue.body);
    assert!(msg(&blue).contains("conflict with \"creator\""), "{}", msg(&blue));
    assert!(msg(&blue).contains(".spec.color"), "{}", msg(&blue));
}

/// A CRD gets kube-apiserver's defaults (conversion strategy `None`, `names.singular`,
/// `names.listKind`), owned by its creator: applying another conversion strategy without force
/// conflicts with the creator, with force it succeeds.
#[tokio::test]
async fn crd_defaults_are_owned_by_the_creator() {
    let env = env().await;
    let c = env.client();
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("things.{GROUP}")},
        "spec": {"group": GROUP, "scope": "Namespaced", "names": {"plural": "things", "kind": "Thing"},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]},
    });
    let base = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
    let created = send(
        &c,
        "POST",
        &format!("{base}?fieldManager=creator"),
        "application/json",
        Some(&crd),
        &[],
    )
    .await;
    assert_eq!(created.code, 201, "{:?}", created.body);
    let spec = &created.body["spec"];
    assert_eq!(spec["conversion"], json!({"strategy": "None"}));
    assert_eq!(spec["names"]["singular"], "thing");
    assert_eq!(spec["names"]["listKind"], "ThingList");

    let mut webhook = crd.clone();
    webhook["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "conversionReviewVersions": ["v1"],
        "clientConfig": {"url": "https://127.0.0.1:1/convert"}}});
    let at = format!("{base}/things.{GROUP}?fieldManager=applier");
    let r = send(&c, "PATCH", &at, APPLY, Some(&webhook), &[]).await;
    assert_eq!(r.code, 409, "{:?}", r.body);
    assert!(msg(&r).contains("conflict with \"creator\""), "{}", msg(&r));
    assert!(msg(&r).contains(".spec.conversion.strategy"), "{}", msg(&r));
    let forced = send(
        &c,
        "PATCH",
        &format!("{at}&force=true"),
        APPLY,
        Some(&webhook),
        &[],
    )
    .await;
    assert_eq!(forced.code, 200, "{:?}", forced.body);
    assert_eq!(forced.body["spec"]["conversion"]["strategy"], "Webhook");
}
