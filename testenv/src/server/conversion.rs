//! Version conversion of custom resources: `None` (rewrite `apiVersion`) or a ConversionReview v1 sent
//! to the CRD's conversion webhook over HTTPS, trusting the CRD's `caBundle`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::crds::{Conversion, ResourceDef};
use super::status::{ApiError, ApiResult};

/// Converts `obj` to `api_version` (a `group/version` string) using the kind's strategy.
pub async fn convert(def: &ResourceDef, mut obj: Value, api_version: &str) -> ApiResult<Value> {
    if def.conversion == Conversion::Events {
        return Ok(super::events::convert(obj, api_version));
    }
    if obj.get("apiVersion").and_then(Value::as_str) == Some(api_version) {
        return Ok(obj);
    }
    match &def.conversion {
        Conversion::None => {
            obj["apiVersion"] = json!(api_version);
            Ok(obj)
        }
        Conversion::Events => Ok(super::events::convert(obj, api_version)),
        Conversion::Webhook { url, ca_bundle } => {
            let mut out = review(url, ca_bundle.as_deref(), vec![obj], api_version).await?;
            out.pop()
                .ok_or_else(|| ApiError::internal("conversion webhook returned no objects"))
        }
    }
}

fn client(ca_bundle: Option<&[u8]>) -> ApiResult<reqwest::Client> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let mut roots = rustls::RootCertStore::empty();
    if let Some(pem) = ca_bundle {
        for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(pem) {
            let cert: rustls::pki_types::CertificateDer<'static> =
                cert.map_err(|e| ApiError::internal(format!("conversion webhook caBundle: {e}")))?;
            roots
                .add(cert)
                .map_err(|e| ApiError::internal(format!("conversion webhook caBundle: {e}")))?;
        }
    }
    let cfg = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| ApiError::internal(e.to_string()))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(cfg)
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| ApiError::internal(format!("building conversion webhook client: {e}")))
}

/// Sends one ConversionReview and returns the converted objects.
pub async fn review(
    url: &str,
    ca_bundle: Option<&[u8]>,
    objects: Vec<Value>,
    desired: &str,
) -> ApiResult<Vec<Value>> {
    let uid = uuid::Uuid::new_v4().to_string();
    let body = json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": uid, "desiredAPIVersion": desired, "objects": objects},
    });
    let fail = |m: String| ApiError::internal(format!("conversion webhook for {desired} failed: {m}"));
    let resp = client(ca_bundle)?
        .post(url)
        .json(&body)
        .send()
        .await
        .map_err(|e| fail(e.to_string()))?;
    if !resp.status().is_success() {
        return Err(fail(format!("HTTP {}", resp.status())));
    }
    let v: Value = resp.json().await.map_err(|e| fail(e.to_string()))?;
    let r = v
        .get("response")
        .ok_or_else(|| fail("no response in ConversionReview".into()))?;
    if r.get("uid").and_then(Value::as_str) != Some(uid.as_str()) {
        return Err(fail("response uid does not match request uid".into()));
    }
    if r.pointer("/result/status").and_then(Value::as_str) != Some("Success") {
        let msg = r
            .pointer("/result/message")
            .and_then(Value::as_str)
            .unwrap_or("conversion failed");
        return Err(fail(msg.to_string()));
    }
    let out = r
        .get("convertedObjects")
        .and_then(Value::as_array)
        .cloned()
        .ok_or_else(|| fail("no convertedObjects".into()))?;
    if out
        .iter()
        .any(|o| o.get("apiVersion").and_then(Value::as_str) != Some(desired))
    {
        return Err(fail(format!(
            "converted object has wrong apiVersion (want {desired})"
        )));
    }
    Ok(out)
}
