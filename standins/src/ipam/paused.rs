//! CAIP's pause rule (`pkg/ipamutil/reconciler.go`): a claim linked to a Cluster — by
//! `spec.clusterName`, else the `cluster.x-k8s.io/cluster-name` label — is left alone while that
//! Cluster is paused (`spec.paused`, or the `cluster.x-k8s.io/paused` annotation), and, unless
//! the claim is being deleted, while the Cluster does not exist. Claims linked to no Cluster are
//! handled. The Clusters are read from a watch cache (in the version the API server serves), whose
//! events requeue the claims of a Cluster that is (or becomes) unpaused. `clusterctl move` relies
//! on it: the moved claims arrive before their IPAddresses, in a paused Cluster.

use capmox_api::capi::ipam_claims::v1beta2::IPAddressClaim;
use capmox_api::consts::{CLUSTER_NAME_LABEL, PAUSED_ANNOTATION};
use futures::Stream;
use kube::api::{Api, ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::runtime::reflector::{ObjectRef, Store, store::Writer};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Resource, ResourceExt};

const CLUSTER_GROUP: &str = "cluster.x-k8s.io";

/// The Cluster a claim is linked to.
pub(super) fn cluster_of(claim: &IPAddressClaim) -> Option<String> {
    claim
        .spec
        .cluster_name
        .clone()
        .filter(|n| !n.is_empty())
        .or_else(|| claim.labels().get(CLUSTER_NAME_LABEL).cloned())
        .filter(|n| !n.is_empty())
}

/// Whether a Cluster is paused.
pub(super) fn paused(cluster: &DynamicObject) -> bool {
    cluster
        .data
        .pointer("/spec/paused")
        .and_then(serde_json::Value::as_bool)
        == Some(true)
        || cluster.annotations().contains_key(PAUSED_ANNOTATION)
}

/// The watched Clusters.
#[derive(Clone)]
pub(super) struct Clusters {
    store: Store<DynamicObject>,
    ar: ApiResource,
}

impl Clusters {
    /// Whether `claim` must wait: its Cluster is paused, or missing while the claim is not being
    /// deleted.
    pub(super) fn holds(&self, claim: &IPAddressClaim) -> bool {
        let Some(name) = cluster_of(claim) else {
            return false;
        };
        let r = ObjectRef::new_with(&name, self.ar.clone()).within(&claim.namespace().unwrap_or_default());
        match self.store.get(&r) {
            Some(c) => paused(&c),
            None => claim.meta().deletion_timestamp.is_none(),
        }
    }
}

/// The `cluster.x-k8s.io` version the API server serves (`None`: no Cluster API, no pause rule).
async fn served(client: &kube::Client) -> Option<&'static str> {
    let groups = client.list_api_groups().await.ok()?;
    let g = groups.groups.iter().find(|g| g.name == CLUSTER_GROUP)?;
    ["v1beta2", "v1beta1"]
        .into_iter()
        .find(|v| g.versions.iter().any(|x| x.version == *v))
}

/// A cache of the Clusters in `ns` (all when `None`) and the stream that fills it (to be polled
/// by the controller, whose claims it requeues); `None` without Cluster API.
pub(super) async fn watch(
    client: &kube::Client,
    ns: Option<&str>,
) -> Option<(
    Clusters,
    ApiResource,
    impl Stream<Item = Result<DynamicObject, watcher::Error>> + Send + 'static,
)> {
    let version = served(client).await?;
    let gvk = GroupVersionKind::gvk(CLUSTER_GROUP, version, "Cluster");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "clusters");
    let api: Api<DynamicObject> = match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
        None => Api::all_with(client.clone(), &ar),
    };
    let writer = Writer::<DynamicObject>::new(ar.clone());
    let store = writer.as_reader();
    let stream = watcher(api, watcher::Config::default().any_semantic())
        .default_backoff()
        .reflect(writer)
        .applied_objects();
    Some((
        Clusters {
            store,
            ar: ar.clone(),
        },
        ar,
        stream,
    ))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn claim(spec_cluster: Option<&str>, label: Option<&str>) -> IPAddressClaim {
        let mut c: IPAddressClaim = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "c", "namespace": "ns"},
            "spec": {"poolRef": {"apiGroup": "ipam.cluster.x-k8s.io", "kind": "InClusterIPPool", "name": "p"}},
        }))
        .unwrap();
        c.spec.cluster_name = spec_cluster.map(str::to_owned);
        if let Some(l) = label {
            c.labels_mut().insert(CLUSTER_NAME_LABEL.to_owned(), l.to_owned());
        }
        c
    }

    #[test]
    fn the_spec_names_the_cluster_before_the_label() {
        assert_eq!(cluster_of(&claim(Some("a"), Some("b"))).as_deref(), Some("a"));
        assert_eq!(cluster_of(&claim(Some(""), Some("b"))).as_deref(), Some("b"));
        assert_eq!(cluster_of(&claim(None, Some(""))), None);
        assert_eq!(cluster_of(&claim(None, None)), None);
    }

    #[test]
    fn paused_by_spec_or_annotation() {
        let cluster = |v: serde_json::Value| -> DynamicObject { serde_json::from_value(v).unwrap() };
        let base = serde_json::json!({"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
            "metadata": {"name": "c"}});
        assert!(!paused(&cluster(base.clone())));
        let mut spec = base.clone();
        spec["spec"] = serde_json::json!({"paused": true});
        assert!(paused(&cluster(spec)));
        let mut annotated = base;
        annotated["metadata"]["annotations"] = serde_json::json!({PAUSED_ANNOTATION: ""});
        assert!(paused(&cluster(annotated)));
    }
}
