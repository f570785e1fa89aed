//! Small metadata helpers: finalizers (merge patches guarded by `resourceVersion`), owner references.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, Patch, PatchParams};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::error::{StandInError, is_not_found, kube_err};

/// Field manager of every write made by the stand-ins.
pub const FIELD_MANAGER: &str = "capmox-standins";

/// Patch parameters naming [`FIELD_MANAGER`].
pub(crate) fn patch_params() -> PatchParams {
    PatchParams {
        field_manager: Some(FIELD_MANAGER.to_owned()),
        ..PatchParams::default()
    }
}

/// `kind namespace/name` of an object, for logs and errors.
pub(crate) fn describe<K: Resource<DynamicType = ()>>(obj: &K) -> String {
    format!(
        "{} {}/{}",
        K::kind(&()),
        obj.namespace().unwrap_or_default(),
        obj.name_any()
    )
}

/// Patches the finalizer list to `finalizers`, failing with a 409 when the object changed since
/// it was read (so a concurrent finalizer change is never lost).
async fn set_finalizers<K>(api: &Api<K>, obj: &K, finalizers: Vec<String>) -> Result<(), StandInError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    let patch = json!({
        "metadata": {
            "finalizers": finalizers,
            "resourceVersion": obj.resource_version(),
        }
    });
    match api
        .patch(&obj.name_any(), &patch_params(), &Patch::Merge(&patch))
        .await
    {
        Ok(_) => Ok(()),
        // Removing the last finalizer may delete the object before we read the answer.
        Err(e) if is_not_found(&e) => Ok(()),
        Err(e) => Err(kube_err(format!("updating the finalizers of {}", describe(obj)))(
            e,
        )),
    }
}

/// Adds `finalizer` to `obj` unless present. Returns whether a patch was made.
pub(crate) async fn add_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<bool, StandInError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(false);
    }
    let mut list = obj.finalizers().to_vec();
    list.push(finalizer.to_owned());
    set_finalizers(api, obj, list).await?;
    Ok(true)
}

/// Removes `finalizer` from `obj` when present. Returns whether a patch was made.
pub(crate) async fn remove_finalizer<K>(api: &Api<K>, obj: &K, finalizer: &str) -> Result<bool, StandInError>
where
    K: Resource<DynamicType = ()> + Clone + DeserializeOwned + std::fmt::Debug,
{
    if !obj.finalizers().iter().any(|f| f == finalizer) {
        return Ok(false);
    }
    let list = obj
        .finalizers()
        .iter()
        .filter(|f| *f != finalizer)
        .cloned()
        .collect();
    set_finalizers(api, obj, list).await?;
    Ok(true)
}

/// An owner reference to `owner` (`controller` marks it as the managing controller;
/// `blockOwnerDeletion` is always set, as CAPI and the IPAM provider do).
pub fn owner_reference<K: Resource<DynamicType = ()>>(owner: &K, controller: bool) -> OwnerReference {
    OwnerReference {
        api_version: K::api_version(&()).into_owned(),
        kind: K::kind(&()).into_owned(),
        name: owner.name_any(),
        uid: owner.uid().unwrap_or_default(),
        controller: Some(controller),
        block_owner_deletion: Some(true),
    }
}

/// The name of the controller owner of kind `kind` in group `group` (any version), if any.
pub fn controller_owner<'a>(
    owners: &'a [OwnerReference],
    group: &str,
    kind: &str,
) -> Option<&'a OwnerReference> {
    owners.iter().find(|o| {
        o.controller == Some(true)
            && o.kind == kind
            && o.api_version.split_once('/').is_some_and(|(g, _)| g == group)
    })
}
