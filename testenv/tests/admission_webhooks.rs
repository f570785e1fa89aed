//! Admission webhooks through the API server: configuration objects (defaults, validation), rule
//! matching, `matchPolicy` Exact vs Equivalent, mutating patches (before validation, converted
//! back), denials in the API server's shape, warnings, `failurePolicy`, `dryRun`. The webhook runs
//! in the test on 127.0.0.1, so every test runs on the in-tree server and on real
//! kube-apiserver alike.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::Engine;
use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

/// Reviews received, by path.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

fn answer(path: &str, review: &Value) -> Value {
    let req = &review["request"];
    let obj = &req["object"];
    let uid = req["uid"].clone();
    let label = |k: &str| obj["metadata"]["labels"][k].as_str().map(str::to_owned);
    let mut resp = json!({"uid": uid, "allowed": true});
    match path {
        "/mutate" => {
            let ops = if obj["metadata"].get("labels").is_some() {
                json!([{"op": "add", "path": "/metadata/labels/mutated", "value": "yes"}])
            } else {
                json!([{"op": "add", "path": "/metadata/labels", "value": {"mutated": "yes"}}])
            };
            resp["patch"] = json!(base64::engine::general_purpose::STANDARD.encode(ops.to_string()));
            resp["patchType"] = json!("JSONPatch");
            resp["warnings"] = json!(["mutated by the test webhook"]);
        }
        "/validate" if label("deny").as_deref() == Some("yes") => {
            resp["allowed"] = json!(false);
            resp["status"] = json!({
                "status": "Failure", "code": 422, "reason": "Invalid",
                "message": format!("Widget.{GROUP} \"{}\" is invalid: spec.size: Invalid value: 3: three is not allowed", obj["metadata"]["name"].as_str().unwrap_or_default()),
                "details": {"name": obj["metadata"]["name"], "group": GROUP, "kind": "Widget",
                    "causes": [{"reason": "FieldValueInvalid", "message": "Invalid value: 3: three is not allowed", "field": "spec.size"}]},
            });
            resp["warnings"] = json!(["cannot create widget"]);
        }
        "/validate" if label("forbid").as_deref() == Some("yes") => {
            resp["allowed"] = json!(false);
            resp["status"] = json!({"code": 403, "reason": "Forbidden", "message": "no widgets today"});
        }
        "/validate" => resp["warnings"] = json!(["validated"]),
        "/bad-uid" => resp["uid"] = json!("not-the-uid"),
        "/validate-delete" if req["oldObject"]["metadata"]["labels"]["keep"] == "yes" => {
            resp["allowed"] = json!(false);
            resp["status"] = json!({"code": 403, "reason": "Forbidden",
                "message": format!("{} is kept", req["oldObject"]["metadata"]["name"].as_str().unwrap_or_default())});
        }
        _ => {}
    }
    json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": resp})
}

/// Starts the test webhook on 127.0.0.1; returns its base URL, CA (PEM) and what it saw.
async fn webhook() -> (String, String, Seen) {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let certs = testenv::certs::generate().unwrap();
    use rustls::pki_types::pem::PemObject;
    let chain = rustls::pki_types::CertificateDer::pem_slice_iter(certs.serving_pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = rustls::pki_types::PrivateKeyDer::from_pem_slice(certs.serving_key_pem.as_bytes()).unwrap();
    let cfg = rustls::ServerConfig::builder()
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let seen: Seen = Arc::default();
    let seen2 = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                break;
            };
            let acceptor = acceptor.clone();
            let seen = seen2.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| {
                    let seen = seen.clone();
                    async move {
                        let path = req.uri().path().to_owned();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let review: Value = serde_json::from_slice(&body).unwrap();
                        seen.lock().unwrap().push((path.clone(), review.clone()));
                        let out = answer(&path, &review);
                        Ok::<_, Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from(out.to_string())))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), svc)
                    .await;
            });
        }
    });
    (format!("https://{addr}"), certs.ca_pem, seen)
}

fn hook(name: &str, url: &str, ca: &str, versions: &[&str], extra: Value) -> Value {
    let mut h = json!({
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "clientConfig": {"url": url, "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)},
        "rules": [{"apiGroups": [GROUP], "apiVersions": versions, "operations": ["CREATE", "UPDATE"], "resources": ["widgets"]}],
    });
    merge(&mut h, extra);
    h
}

fn merge(base: &mut Value, extra: Value) {
    if let (Some(b), Value::Object(e)) = (base.as_object_mut(), extra) {
        for (k, v) in e {
            b.insert(k, v);
        }
    }
}

async fn configure(c: &kube::Client, mutating: Vec<Value>, validating: Vec<Value>) {
    if !mutating.is_empty() {
        let m: MutatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "test-mutating"}, "webhooks": mutating}))
        .unwrap();
        Api::<MutatingWebhookConfiguration>::all(c.clone())
            .create(&PostParams::default(), &m)
            .await
            .unwrap();
    }
    if !validating.is_empty() {
        let v: ValidatingWebhookConfiguration = serde_json::from_value(json!({
            "metadata": {"name": "test-validating"}, "webhooks": validating}))
        .unwrap();
        Api::<ValidatingWebhookConfiguration>::all(c.clone())
            .create(&PostParams::default(), &v)
            .await
            .unwrap();
    }
}

fn labelled(name: &str, version: &str, size: i64, labels: Value) -> DynamicObject {
    let mut w = widget(name, version, json!({"size": size}));
    w.metadata.labels = serde_json::from_value(labels).unwrap();
    w
}

/// Creates through the raw API to see the response's `Warning` headers and status.
async fn create_raw(
    c: &kube::Client,
    ns: &str,
    version: &str,
    obj: &DynamicObject,
    query: &str,
) -> (u16, Vec<String>, Value) {
    let req = http::Request::post(format!("/apis/{GROUP}/{version}/namespaces/{ns}/widgets{query}"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(obj).unwrap())
        .unwrap();
    let resp = c.send(req.map(kube::client::Body::from)).await.unwrap();
    let code = resp.status().as_u16();
    let warnings = resp
        .headers()
        .get_all("warning")
        .iter()
        .map(|v| v.to_str().unwrap().to_owned())
        .collect();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (code, warnings, serde_json::from_slice(&body).unwrap())
}

/// The API server keeps its webhook configuration cache eventually consistent: wait until a
/// dry-run create reaches the webhook at every one of `paths`.
async fn wait_effective(c: &kube::Client, ns: &str, seen: &Seen, paths: &[&str]) {
    let api = widgets(c, ns, "v1");
    let mut n = 0;
    wait_for(30, "the webhook configuration to take effect", || {
        n += 1;
        let name = format!("probe-{n}");
        let api = api.clone();
        let seen = seen.clone();
        let paths: Vec<String> = paths.iter().map(|p| (*p).to_owned()).collect();
        async move {
            let dry = PostParams {
                dry_run: true,
                ..PostParams::default()
            };
            let _ = api.create(&dry, &widget(&name, "v1", json!({"size": 1}))).await;
            let seen = seen.lock().unwrap();
            paths
                .iter()
                .all(|want| seen.iter().any(|(p, _)| p == want))
                .then_some(())
        }
    })
    .await;
    seen.lock().unwrap().clear();
}

#[tokio::test(flavor = "multi_thread")]
async fn configurations_get_the_api_server_defaults_and_validation() {
    let env = env().await;
    let c = env.client();
    let (url, ca, _) = webhook().await;
    configure(
        &c,
        vec![hook(
            "m.example.testenv.io",
            &format!("{url}/mutate"),
            &ca,
            &["v1"],
            json!({}),
        )],
        vec![hook(
            "v.example.testenv.io",
            &format!("{url}/validate"),
            &ca,
            &["v1"],
            json!({}),
        )],
    )
    .await;
    let m = Api::<MutatingWebhookConfiguration>::all(c.clone())
        .get("test-mutating")
        .await
        .unwrap();
    let h = &m.webhooks.unwrap()[0];
    assert_eq!(h.failure_policy.as_deref(), Some("Fail"));
    assert_eq!(h.match_policy.as_deref(), Some("Equivalent"));
    assert_eq!(h.reinvocation_policy.as_deref(), Some("Never"));
    assert_eq!(h.timeout_seconds, Some(10));
    assert_eq!(h.namespace_selector, Some(Default::default()));
    assert_eq!(h.object_selector, Some(Default::default()));
    assert_eq!(h.rules.as_ref().unwrap()[0].scope.as_deref(), Some("*"));
    let vs = Api::<ValidatingWebhookConfiguration>::all(c.clone());
    assert_eq!(vs.list(&Default::default()).await.unwrap().items.len(), 1);
    let v = vs.get("test-validating").await.unwrap();
    assert_eq!(v.webhooks.unwrap()[0].failure_policy.as_deref(), Some("Fail"));

    let bad = |extra: Value| -> ValidatingWebhookConfiguration {
        let mut h = hook(
            "bad.example.testenv.io",
            &format!("{url}/validate"),
            &ca,
            &["v1"],
            json!({}),
        );
        merge(&mut h, extra);
        if let Some(m) = h.as_object_mut() {
            m.retain(|_, v| !v.is_null());
        }
        serde_json::from_value(json!({"metadata": {"name": "bad"}, "webhooks": [h]})).unwrap()
    };
    let cases = [
        (
            json!({"sideEffects": ""}),
            "webhooks[0].sideEffects: Unsupported value: \"\": supported values: \"None\", \"NoneOnDryRun\"",
        ),
        (
            json!({"sideEffects": "Some"}),
            "webhooks[0].sideEffects: Unsupported value: \"Some\": supported values: \"None\", \"NoneOnDryRun\"",
        ),
        (
            json!({"clientConfig": {"url": "http://127.0.0.1:1/x"}}),
            "webhooks[0].clientConfig.url: Invalid value: \"http\": 'https' is the only allowed URL scheme; desired format: https://host[/path]",
        ),
        (
            json!({"timeoutSeconds": 31}),
            "webhooks[0].timeoutSeconds: Invalid value: 31: the timeout value must be between 1 and 30 seconds",
        ),
    ];
    for (extra, want) in cases {
        let e = api_err(vs.create(&PostParams::default(), &bad(extra)).await);
        assert_eq!(e.code, 422, "{e:?}");
        assert_eq!(e.reason, "Invalid");
        assert_eq!(
            e.message,
            format!("ValidatingWebhookConfiguration.admissionregistration.k8s.io \"bad\" is invalid: {want}")
        );
    }
    vs.delete("test-validating", &Default::default()).await.unwrap();
    assert!(vs.list(&Default::default()).await.unwrap().items.is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn mutating_then_validating_with_denials_and_warnings() {
    let env = env().await;
    let c = env.client();
    install_test_crds(&env).await;
    let ns = namespace(&c).await;
    let (url, ca, seen) = webhook().await;
    configure(
        &c,
        vec![hook(
            "m.example.testenv.io",
            &format!("{url}/mutate"),
            &ca,
            &["v1"],
            json!({}),
        )],
        vec![hook(
            "v.example.testenv.io",
            &format!("{url}/validate"),
            &ca,
            &["v1"],
            json!({}),
        )],
    )
    .await;
    wait_effective(&c, &ns, &seen, &["/mutate", "/validate"]).await;

    // Allowed: the patch is applied, the validating webhook sees the mutated, defaulted object.
    let (code, warnings, body) =
        create_raw(&c, &ns, "v1", &labelled("ok", "v1", 3, json!({"a": "b"})), "").await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["metadata"]["labels"], json!({"a": "b", "mutated": "yes"}));
    assert!(
        warnings.contains(&"299 - \"mutated by the test webhook\"".to_owned()),
        "{warnings:?}"
    );
    assert!(
        warnings.contains(&"299 - \"validated\"".to_owned()),
        "{warnings:?}"
    );
    {
        let seen = seen.lock().unwrap();
        let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, vec!["/mutate", "/validate"]);
        let m = &seen[0].1["request"];
        assert_eq!(m["operation"], "CREATE");
        assert_eq!(
            m["object"]["spec"]["color"], "red",
            "mutating webhooks see the defaulted object"
        );
        assert_eq!(
            m["kind"],
            json!({"group": GROUP, "version": "v1", "kind": "Widget"})
        );
        assert_eq!(
            m["resource"],
            json!({"group": GROUP, "version": "v1", "resource": "widgets"})
        );
        assert_eq!(m["namespace"], ns.as_str());
        assert_eq!(m["dryRun"], false);
        let v = &seen[1].1["request"];
        assert_eq!(v["object"]["metadata"]["labels"]["mutated"], "yes");
    }
    seen.lock().unwrap().clear();

    // Denied with the webhook's Status: code, reason, details and causes pass through.
    let (code, warnings, body) = create_raw(
        &c,
        &ns,
        "v1",
        &labelled("no", "v1", 3, json!({"deny": "yes"})),
        "",
    )
    .await;
    assert_eq!(code, 422, "{body}");
    assert_eq!(body["reason"], "Invalid");
    assert_eq!(
        body["message"],
        format!(
            "admission webhook \"v.example.testenv.io\" denied the request: Widget.{GROUP} \"no\" is invalid: spec.size: Invalid value: 3: three is not allowed"
        )
    );
    assert_eq!(body["details"]["causes"][0]["field"], "spec.size");
    assert_eq!(body["details"]["kind"], "Widget");
    assert!(
        warnings.contains(&"299 - \"cannot create widget\"".to_owned()),
        "{warnings:?}"
    );
    let (code, _, body) = create_raw(
        &c,
        &ns,
        "v1",
        &labelled("no2", "v1", 3, json!({"forbid": "yes"})),
        "",
    )
    .await;
    assert_eq!((code, body["reason"].as_str()), (403, Some("Forbidden")));
    assert_eq!(
        body["message"],
        "admission webhook \"v.example.testenv.io\" denied the request: no widgets today"
    );
    assert!(api_err(widgets(&c, &ns, "v1").get("no").await).code == 404);

    // UPDATE carries the old object; a status write does not match `widgets`.
    seen.lock().unwrap().clear();
    let api = widgets(&c, &ns, "v1");
    api.patch(
        "ok",
        &PatchParams::default(),
        &Patch::Merge(json!({"spec": {"size": 4}})),
    )
    .await
    .unwrap();
    api.patch_status(
        "ok",
        &PatchParams::default(),
        &Patch::Merge(json!({"status": {"phase": "x"}})),
    )
    .await
    .unwrap();
    {
        let seen = seen.lock().unwrap();
        let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, vec!["/mutate", "/validate"]);
        let v = &seen[1].1["request"];
        assert_eq!(v["operation"], "UPDATE");
        assert_eq!(v["oldObject"]["spec"]["size"], 3);
        assert_eq!(v["object"]["spec"]["size"], 4);
    }

    // dryRun reaches the webhooks and stores nothing.
    seen.lock().unwrap().clear();
    let (code, _, _) = create_raw(&c, &ns, "v1", &labelled("dry", "v1", 2, json!({})), "?dryRun=All").await;
    assert_eq!(code, 201);
    assert_eq!(seen.lock().unwrap()[0].1["request"]["dryRun"], true);
    assert_eq!(api_err(api.get("dry").await).code, 404);
}

#[tokio::test(flavor = "multi_thread")]
async fn match_policy_exact_and_equivalent() {
    let env = env().await;
    let c = env.client();
    install_test_crds(&env).await;
    let ns = namespace(&c).await;
    let (url, ca, seen) = webhook().await;
    configure(
        &c,
        vec![hook(
            "m.example.testenv.io",
            &format!("{url}/mutate"),
            &ca,
            &["v1"],
            json!({"matchPolicy": "Equivalent"}),
        )],
        vec![hook(
            "exact.example.testenv.io",
            &format!("{url}/validate"),
            &ca,
            &["v1"],
            json!({"matchPolicy": "Exact"}),
        )],
    )
    .await;
    wait_effective(&c, &ns, &seen, &["/mutate", "/validate"]).await;
    let (code, _, body) = create_raw(
        &c,
        &ns,
        "v1alpha1",
        &labelled("old", "v1alpha1", 2, json!({})),
        "",
    )
    .await;
    assert_eq!(code, 201, "{body}");
    assert_eq!(body["apiVersion"], format!("{GROUP}/v1alpha1"));
    assert_eq!(
        body["metadata"]["labels"]["mutated"], "yes",
        "the patch is converted back"
    );
    let seen = seen.lock().unwrap();
    let paths: Vec<&str> = seen.iter().map(|(p, _)| p.as_str()).collect();
    assert_eq!(paths, vec!["/mutate"], "Exact does not match a v1alpha1 request");
    let r = &seen[0].1["request"];
    assert_eq!(r["object"]["apiVersion"], format!("{GROUP}/v1"));
    assert_eq!(r["kind"]["version"], "v1");
    assert_eq!(r["requestKind"]["version"], "v1alpha1");
    assert_eq!(r["requestResource"]["version"], "v1alpha1");
}

#[tokio::test(flavor = "multi_thread")]
async fn failure_policy_fail_and_ignore() {
    let env = env().await;
    let c = env.client();
    install_test_crds(&env).await;
    let ns = namespace(&c).await;
    let (url, ca, seen) = webhook().await;
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let unreachable = format!("https://{closed}/validate");
    configure(
        &c,
        vec![],
        vec![
            hook(
                "probe.example.testenv.io",
                &format!("{url}/record"),
                &ca,
                &["v1"],
                json!({}),
            ),
            hook(
                "ignored.example.testenv.io",
                &unreachable,
                &ca,
                &["v1"],
                json!({"failurePolicy": "Ignore", "objectSelector": {"matchLabels": {"case": "ignore"}}}),
            ),
            hook(
                "failing.example.testenv.io",
                &unreachable,
                &ca,
                &["v1"],
                json!({"objectSelector": {"matchLabels": {"case": "fail"}}}),
            ),
            hook(
                "baduid.example.testenv.io",
                &format!("{url}/bad-uid"),
                &ca,
                &["v1"],
                json!({"objectSelector": {"matchLabels": {"case": "baduid"}}}),
            ),
        ],
    )
    .await;
    wait_effective(&c, &ns, &seen, &["/record"]).await;
    let api = widgets(&c, &ns, "v1");
    api.create(
        &PostParams::default(),
        &labelled("i", "v1", 1, json!({"case": "ignore"})),
    )
    .await
    .unwrap();
    let e = api_err(
        api.create(
            &PostParams::default(),
            &labelled("f", "v1", 1, json!({"case": "fail"})),
        )
        .await,
    );
    assert_eq!((e.code, e.reason.as_str()), (500, "InternalError"), "{e:?}");
    assert!(
        e.message.starts_with(&format!(
            "Internal error occurred: failed calling webhook \"failing.example.testenv.io\": failed to call webhook: Post \"{unreachable}?timeout=10s\": "
        )),
        "{}",
        e.message
    );
    let e = api_err(
        api.create(
            &PostParams::default(),
            &labelled("u", "v1", 1, json!({"case": "baduid"})),
        )
        .await,
    );
    assert_eq!(e.code, 500);
    assert!(
        e.message.starts_with(
            "Internal error occurred: failed calling webhook \"baduid.example.testenv.io\": received invalid webhook response: expected response.uid="
        ),
        "{}",
        e.message
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn validating_webhooks_see_deletes_of_one_object() {
    let env = env().await;
    let c = env.client();
    install_test_crds(&env).await;
    let (url, ca, seen) = webhook().await;
    let ns = namespace(&c).await;
    let on_delete = json!({"rules": [{"apiGroups": [GROUP], "apiVersions": ["v1"],
        "operations": ["CREATE", "DELETE"], "resources": ["widgets"]}]});
    configure(
        &c,
        vec![],
        vec![hook(
            "d.example.testenv.io",
            &format!("{url}/validate-delete"),
            &ca,
            &["v1"],
            on_delete,
        )],
    )
    .await;
    wait_effective(&c, &ns, &seen, &["/validate-delete"]).await;
    let api = widgets(&c, &ns, "v1");
    api.create(
        &PostParams::default(),
        &labelled("kept", "v1", 1, json!({"keep": "yes"})),
    )
    .await
    .unwrap();
    api.create(
        &PostParams::default(),
        &labelled("free", "v1", 1, json!({"keep": "no"})),
    )
    .await
    .unwrap();
    seen.lock().unwrap().clear();
    let e = api.delete("kept", &Default::default()).await.unwrap_err();
    let kube::Error::Api(s) = e else {
        panic!("expected a denial, got {e}")
    };
    assert_eq!(s.code, 403);
    assert_eq!(
        s.message,
        "admission webhook \"d.example.testenv.io\" denied the request: kept is kept"
    );
    assert!(
        api.get_opt("kept").await.unwrap().is_some(),
        "a denied delete deletes nothing"
    );
    api.delete("free", &Default::default()).await.unwrap();
    let seen = seen.lock().unwrap();
    let (_, review) = seen
        .iter()
        .find(|(_, r)| r["request"]["name"] == "free")
        .expect("the delete was reviewed");
    let req = &review["request"];
    assert_eq!(req["operation"], "DELETE");
    assert!(req["object"].is_null(), "{req}");
    assert_eq!(req["oldObject"]["metadata"]["name"], "free");
    assert_eq!(req["namespace"], ns.as_str());
    assert_eq!(req["options"]["kind"], "DeleteOptions");
}
