//! Which optional `InClusterIPPool` fields the served in-cluster IPAM CRD declares.
//!
//! `spec.addressReuseGracePeriodSeconds` exists from in-cluster IPAM provider v1.1 on. A server-side
//! apply that carries a field the CRD schema does not declare is refused by kube-apiserver (`500
//! failed to create typed patch object … field not declared in schema`, whatever `fieldValidation`
//! says), so with a v1.0 provider no ProxmoxCluster would ever become ready. The served schema is
//! read from the API server's OpenAPI v3 document of `ipam.cluster.x-k8s.io/v1alpha2` (readable by
//! every authenticated client through `system:discovery`) and cached for a while, so an IPAM
//! upgrade is picked up without a restart. When the document does not tell (no schema
//! published), the field is sent and [`PoolFieldSupport::refused`] records a refusal, after which
//! the apply is retried without it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use capmox_api::capi::ipam::{IN_CLUSTER_IP_POOL_API_VERSION, IN_CLUSTER_IP_POOL_KIND};
use serde_json::Value;

/// JSON name of the optional field.
pub const REUSE_GRACE_PERIOD_FIELD: &str = "addressReuseGracePeriodSeconds";

/// How long a discovery answer is trusted before the document is read again.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(600);

/// What is known about the served schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldSupport {
    /// The schema declares the field: send it.
    Declared,
    /// The schema lacks it (or the server refused it): leave it out.
    Missing,
    /// The server publishes no schema for the kind: send it, fall back on refusal.
    Unknown,
}

/// Cached knowledge about `spec.addressReuseGracePeriodSeconds`, shared by all reconciles.
#[derive(Debug, Default)]
pub struct PoolFieldSupport {
    cached: Mutex<Option<(Instant, FieldSupport)>>,
}

impl PoolFieldSupport {
    /// Whether to send the field, reading the OpenAPI document when the cached answer is missing
    /// or older than [`DISCOVERY_TTL`].
    pub async fn reuse_grace_period(&self, client: &kube::Client) -> FieldSupport {
        if let Some(s) = self.fresh() {
            return s;
        }
        let found = match discover(client).await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "reading the InClusterIPPool schema failed");
                FieldSupport::Unknown
            }
        };
        if found == FieldSupport::Missing {
            tracing::info!(
                "the served InClusterIPPool CRD has no spec.{REUSE_GRACE_PERIOD_FIELD} (in-cluster IPAM provider < v1.1); pools are applied without it"
            );
        }
        self.store(found);
        found
    }

    /// Records that the API server refused an apply carrying the field.
    pub fn refused(&self) {
        tracing::info!(
            "the API server refused InClusterIPPool spec.{REUSE_GRACE_PERIOD_FIELD}; pools are applied without it"
        );
        self.store(FieldSupport::Missing);
    }

    fn fresh(&self) -> Option<FieldSupport> {
        let g = self
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        g.filter(|(at, _)| at.elapsed() < DISCOVERY_TTL).map(|(_, s)| s)
    }

    fn store(&self, s: FieldSupport) {
        *self
            .cached
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((Instant::now(), s));
    }
}

/// Reads `/openapi/v3`, follows the entry of the IPAM group version and inspects its schema.
async fn discover(client: &kube::Client) -> Result<FieldSupport, kube::Error> {
    let index: Value = get_json(client, "/openapi/v3").await?;
    let key = format!("apis/{IN_CLUSTER_IP_POOL_API_VERSION}");
    let Some(url) = index
        .pointer(&format!("/paths/{}", key.replace('/', "~1")))
        .and_then(|p| p.get("serverRelativeURL"))
        .and_then(Value::as_str)
    else {
        return Ok(FieldSupport::Unknown);
    };
    let doc: Value = get_json(client, url).await?;
    Ok(support_in_document(&doc))
}

async fn get_json(client: &kube::Client, path: &str) -> Result<Value, kube::Error> {
    let req = http::Request::get(path)
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    client.request::<Value>(req).await
}

/// Finds the `InClusterIPPool` schema of an OpenAPI v3 group-version document (by its
/// `x-kubernetes-group-version-kind`) and tells whether its `spec` declares the field.
pub fn support_in_document(doc: &Value) -> FieldSupport {
    let (group, version) = IN_CLUSTER_IP_POOL_API_VERSION
        .split_once('/')
        .unwrap_or((IN_CLUSTER_IP_POOL_API_VERSION, ""));
    let schemas = doc.pointer("/components/schemas").and_then(Value::as_object);
    let Some(schema) = schemas.into_iter().flat_map(|m| m.values()).find(|s| {
        s.get("x-kubernetes-group-version-kind")
            .and_then(Value::as_array)
            .is_some_and(|gvks| {
                gvks.iter().any(|g| {
                    g.get("group").and_then(Value::as_str) == Some(group)
                        && g.get("version").and_then(Value::as_str) == Some(version)
                        && g.get("kind").and_then(Value::as_str) == Some(IN_CLUSTER_IP_POOL_KIND)
                })
            })
    }) else {
        return FieldSupport::Unknown;
    };
    let Some(spec) = schema.pointer("/properties/spec") else {
        return FieldSupport::Unknown;
    };
    if spec.get("x-kubernetes-preserve-unknown-fields") == Some(&Value::Bool(true)) {
        return FieldSupport::Declared;
    }
    match spec.get("properties").and_then(Value::as_object) {
        Some(p) if p.contains_key(REUSE_GRACE_PERIOD_FIELD) => FieldSupport::Declared,
        Some(_) => FieldSupport::Missing,
        None => FieldSupport::Unknown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn doc(spec_props: Value) -> Value {
        json!({"components": {"schemas": {
            "io.x-k8s.cluster.ipam.v1alpha2.InClusterIPPoolList": {
                "x-kubernetes-group-version-kind": [{"group": "ipam.cluster.x-k8s.io", "version": "v1alpha2", "kind": "InClusterIPPoolList"}],
            },
            "io.x-k8s.cluster.ipam.v1alpha2.InClusterIPPool": {
                "x-kubernetes-group-version-kind": [{"group": "ipam.cluster.x-k8s.io", "version": "v1alpha2", "kind": "InClusterIPPool"}],
                "properties": {"spec": {"type": "object", "properties": spec_props}},
            },
        }}})
    }

    #[test]
    fn reads_the_field_from_the_kinds_schema() {
        let v10 = doc(json!({"addresses": {}, "prefix": {}, "gateway": {}}));
        assert_eq!(support_in_document(&v10), FieldSupport::Missing);
        let v11 = doc(json!({"addresses": {}, "addressReuseGracePeriodSeconds": {"type": "integer"}}));
        assert_eq!(support_in_document(&v11), FieldSupport::Declared);
        assert_eq!(
            support_in_document(&json!({"components": {"schemas": {}}})),
            FieldSupport::Unknown
        );
        let open = json!({"components": {"schemas": {"x": {
            "x-kubernetes-group-version-kind": [{"group": "ipam.cluster.x-k8s.io", "version": "v1alpha2", "kind": "InClusterIPPool"}],
            "properties": {"spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
        }}}});
        assert_eq!(support_in_document(&open), FieldSupport::Declared);
    }

    #[test]
    fn a_refusal_is_remembered() {
        let s = PoolFieldSupport::default();
        assert_eq!(s.fresh(), None);
        s.refused();
        assert_eq!(s.fresh(), Some(FieldSupport::Missing));
    }
}
