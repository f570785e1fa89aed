//! CRD version conversion through a conversion webhook (ConversionReview v1 over HTTPS, trusting the
//! CRD's caBundle). The webhook runs in the test on 127.0.0.1, so this works in both modes.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, ApiResource, DynamicObject, ListParams, PostParams};
use serde_json::{Value, json};

/// v1alpha1 has `spec.level`; v1 (storage) has `spec.value`.
fn convert(mut obj: Value, desired: &str) -> Value {
    let spec = obj["spec"].as_object_mut().unwrap();
    if desired.ends_with("/v1") {
        if let Some(v) = spec.remove("level") {
            spec.insert("value".into(), v);
        }
    } else if let Some(v) = spec.remove("value") {
        spec.insert("level".into(), v);
    }
    obj["apiVersion"] = json!(desired);
    obj
}

async fn handle(req: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let review: Value = serde_json::from_slice(&body).unwrap();
    let r = &review["request"];
    let desired = r["desiredAPIVersion"].as_str().unwrap();
    let objs: Vec<Value> = r["objects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| convert(o.clone(), desired))
        .collect();
    let out = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "ConversionReview",
        "response": {"uid": r["uid"], "convertedObjects": objs, "result": {"status": "Success"}}});
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(serde_json::to_vec(&out).unwrap())))
        .unwrap())
}

/// Starts the webhook; returns its URL and CA (PEM).
async fn webhook() -> (String, String) {
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
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else {
                break;
            };
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tls), hyper::service::service_fn(handle))
                    .await;
            });
        }
    });
    (format!("https://{addr}/convert"), certs.ca_pem)
}

fn dial_crd(url: &str, ca: &str) -> CustomResourceDefinition {
    let schema = |field: &str| {
        json!({"openAPIV3Schema": {"type": "object", "properties": {
        "spec": {"type": "object", "properties": {field: {"type": "integer"}}}}}})
    };
    serde_json::from_value(json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("dials.{}", common::GROUP)},
        "spec": {
            "group": common::GROUP,
            "scope": "Namespaced",
            "names": {"plural": "dials", "singular": "dial", "kind": "Dial"},
            "versions": [
                {"name": "v1alpha1", "served": true, "storage": false, "schema": schema("level")},
                {"name": "v1", "served": true, "storage": true, "schema": schema("value")},
            ],
            "conversion": {"strategy": "Webhook", "webhook": {
                "conversionReviewVersions": ["v1"],
                "clientConfig": {"url": url, "caBundle": base64::engine::general_purpose::STANDARD.encode(ca)},
            }},
        }
    }))
    .unwrap()
}

fn dials(c: &kube::Client, ns: &str, version: &str) -> Api<DynamicObject> {
    let ar = ApiResource {
        group: common::GROUP.into(),
        version: version.into(),
        api_version: format!("{}/{version}", common::GROUP),
        kind: "Dial".into(),
        plural: "dials".into(),
    };
    Api::namespaced_with(c.clone(), ns, &ar)
}

#[tokio::test(flavor = "multi_thread")]
async fn conversion_webhook_converts_between_versions() {
    let (url, ca) = webhook().await;
    let env = common::env().await;
    let c = env.client();
    env.install_crds(vec![dial_crd(&url, &ca)]).await.unwrap();
    let ns = common::namespace(&c).await;
    let old = dials(&c, &ns, "v1alpha1");
    let new = dials(&c, &ns, "v1");
    let obj: DynamicObject = serde_json::from_value(json!({
        "apiVersion": format!("{}/v1alpha1", common::GROUP), "kind": "Dial",
        "metadata": {"name": "d"}, "spec": {"level": 3}
    }))
    .unwrap();
    let created = old.create(&PostParams::default(), &obj).await.unwrap();
    assert_eq!(created.data["spec"]["level"], 3);
    let v1 = new.get("d").await.unwrap();
    assert_eq!(v1.data["spec"]["value"], 3, "{v1:?}");
    assert!(v1.data["spec"].get("level").is_none());
    let listed = old.list(&ListParams::default()).await.unwrap();
    assert_eq!(listed.items[0].data["spec"]["level"], 3);
    assert_eq!(
        listed.items[0].types.as_ref().unwrap().api_version,
        format!("{}/v1alpha1", common::GROUP)
    );
}
