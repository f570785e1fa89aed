//! The owner Cluster of a ProxmoxCluster, found by ownerRef group and kind (any apiVersion) and
//! read as a dynamic object so both `v1beta1` and `v1beta2` Clusters work.

use capmox_api::capi::{CLUSTER_GROUP, CLUSTER_KIND, CLUSTER_PLURAL, api_version_in_group};
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;

use super::ClusterError;
use super::error::OWNER_CLUSTER_LOOKUP_FAILED_REASON;

/// What the ProxmoxCluster controller needs to know about its Cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerCluster {
    /// Cluster name.
    pub name: String,
    /// `spec.paused`.
    pub paused: bool,
    /// The Cluster has a deletion timestamp.
    pub deleting: bool,
}

/// The `(apiVersion, name)` of the owner Cluster's ownerRef, if any.
pub fn owner_ref(meta: &kube::api::ObjectMeta) -> Option<(String, String)> {
    meta.owner_references
        .iter()
        .flatten()
        .find(|r| r.kind == CLUSTER_KIND && api_version_in_group(&r.api_version, CLUSTER_GROUP))
        .map(|r| (r.api_version.clone(), r.name.clone()))
}

/// Fetches the owner Cluster with the ownerRef's apiVersion; `None` when there is no ownerRef or
/// the Cluster does not exist.
pub async fn fetch(
    client: &kube::Client,
    namespace: &str,
    meta: &kube::api::ObjectMeta,
) -> Result<Option<OwnerCluster>, ClusterError> {
    let Some((api_version, name)) = owner_ref(meta) else {
        return Ok(None);
    };
    let version = api_version.split_once('/').map(|(_, v)| v).unwrap_or_default();
    let gvk = GroupVersionKind::gvk(CLUSTER_GROUP, version, CLUSTER_KIND);
    let ar = ApiResource::from_gvk_with_plural(&gvk, CLUSTER_PLURAL);
    let api: Api<DynamicObject> = Api::namespaced_with(client.clone(), namespace, &ar);
    let obj = api.get_opt(&name).await.map_err(ClusterError::kube(
        OWNER_CLUSTER_LOOKUP_FAILED_REASON,
        format!("getting Cluster {namespace}/{name}"),
    ))?;
    Ok(obj.map(|o| OwnerCluster {
        paused: o
            .data
            .pointer("/spec/paused")
            .and_then(serde_json::Value::as_bool)
            .unwrap_or(false),
        deleting: o.metadata.deletion_timestamp.is_some(),
        name,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;

    #[test]
    fn owner_matched_by_group_and_kind() {
        let r = |api_version: &str, kind: &str, name: &str| OwnerReference {
            api_version: api_version.into(),
            kind: kind.into(),
            name: name.into(),
            ..Default::default()
        };
        let meta = kube::api::ObjectMeta {
            owner_references: Some(vec![
                r("controlplane.cluster.x-k8s.io/v1beta2", "Cluster", "nope"),
                r("cluster.x-k8s.io/v1beta1", "Machine", "nope2"),
                r("cluster.x-k8s.io/v1beta1", "Cluster", "c1"),
            ]),
            ..Default::default()
        };
        assert_eq!(
            owner_ref(&meta),
            Some(("cluster.x-k8s.io/v1beta1".into(), "c1".into()))
        );
        assert_eq!(owner_ref(&kube::api::ObjectMeta::default()), None);
    }
}
