//! Watched objects that may not decode. An object our types cannot read — e.g. a ProxmoxMachine
//! whose `spec.network` lost its devices when it was written through `v1alpha1` while the CRD had
//! no conversion webhook — must not stop a controller: a typed watch fails its whole list on one
//! such object, and nothing would be reconciled any more. Watching [`Decoded<K>`] instead turns
//! that object into [`Decoded::Unreadable`] (its metadata, the field and the error), which the
//! reconciler reports ([`report`]: a Warning event and a log line naming the object and the
//! field) while the other objects go on.

use std::borrow::Cow;
use std::sync::Arc;

use crate::controllers::events::{Event, EventType, Recorder};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::de::{DeserializeOwned, Error as _};
use serde::{Deserialize, Deserializer};
use serde_json::Value;

/// Reason of the Warning event about an object that cannot be read.
pub const UNREADABLE_REASON: &str = "UnreadableObject";

/// An object as watched: decoded, or why it cannot be.
#[derive(Debug, Clone)]
pub enum Decoded<K> {
    /// The object.
    Ok(Arc<K>),
    /// The object does not decode as `K`.
    Unreadable(Box<Unreadable>),
}

/// What is known of an object that does not decode.
#[derive(Debug, Clone)]
pub struct Unreadable {
    /// Its metadata (name, namespace, uid, resourceVersion, ...).
    pub metadata: ObjectMeta,
    /// Path of the offending field, e.g. `spec.network` (`.` when it is the object itself).
    pub field: String,
    /// What is wrong there, e.g. ``missing field `networkDevices` ``.
    pub error: String,
    /// The object as served (what can still be read of it, e.g. a recorded VMID).
    pub raw: Value,
}

impl<K> Decoded<K> {
    /// The decoded object, if it decoded.
    pub fn ok(&self) -> Option<&Arc<K>> {
        match self {
            Decoded::Ok(k) => Some(k),
            Decoded::Unreadable(_) => None,
        }
    }
}

impl<'de, K: DeserializeOwned> Deserialize<'de> for Decoded<K> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let value = Value::deserialize(d)?;
        match serde_path_to_error::deserialize::<_, K>(&value) {
            Ok(k) => Ok(Decoded::Ok(Arc::new(k))),
            Err(e) => {
                // Without readable metadata the object cannot even be named: a real error.
                let metadata = ObjectMeta::deserialize(value.get("metadata").unwrap_or(&Value::Null))
                    .map_err(D::Error::custom)?;
                Ok(Decoded::Unreadable(Box::new(Unreadable {
                    metadata,
                    field: e.path().to_string(),
                    error: e.into_inner().to_string(),
                    raw: value,
                })))
            }
        }
    }
}

impl<K> Resource for Decoded<K>
where
    K: Resource + Clone,
{
    type DynamicType = K::DynamicType;
    type Scope = K::Scope;

    fn kind(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::kind(dt)
    }

    fn group(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::group(dt)
    }

    fn version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::version(dt)
    }

    fn api_version(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::api_version(dt)
    }

    fn plural(dt: &Self::DynamicType) -> Cow<'_, str> {
        K::plural(dt)
    }

    fn meta(&self) -> &ObjectMeta {
        match self {
            Decoded::Ok(k) => k.meta(),
            Decoded::Unreadable(u) => &u.metadata,
        }
    }

    fn meta_mut(&mut self) -> &mut ObjectMeta {
        match self {
            Decoded::Ok(k) => Arc::make_mut(k).meta_mut(),
            Decoded::Unreadable(u) => &mut u.metadata,
        }
    }
}

/// The one-line description of why `obj` cannot be read.
pub fn describe<K: Resource<DynamicType = ()>>(u: &Unreadable) -> String {
    format!(
        "cannot read {} {}/{} as {}: field {}: {}; it is not reconciled until it is fixed",
        K::kind(&()),
        u.metadata.namespace.as_deref().unwrap_or_default(),
        u.metadata.name.as_deref().unwrap_or_default(),
        K::api_version(&()),
        u.field,
        u.error
    )
}

/// Reports an object that cannot be read: a log line and a Warning event, both naming the
/// object and the field.
pub async fn report<K>(recorder: &Recorder, obj: &Decoded<K>, u: &Unreadable)
where
    K: Resource<DynamicType = ()> + Clone,
{
    let note = describe::<K>(u);
    tracing::warn!(
        kind = %K::kind(&()),
        namespace = u.metadata.namespace.as_deref().unwrap_or_default(),
        name = u.metadata.name.as_deref().unwrap_or_default(),
        field = %u.field,
        error = %u.error,
        "{note}"
    );
    let ev = Event {
        type_: EventType::Warning,
        reason: UNREADABLE_REASON.to_owned(),
        note: Some(note),
        action: "Reconcile".to_owned(),
        secondary: None,
    };
    if let Err(e) = recorder.publish(&ev, &obj.object_ref(&())).await {
        tracing::debug!(error = %e, "publishing event failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use capmox_api::v1alpha2::ProxmoxMachine;
    use serde_json::json;

    #[test]
    fn an_undecodable_object_keeps_its_name_and_says_which_field() {
        let list: Vec<Decoded<ProxmoxMachine>> = serde_json::from_value(json!([
            {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
             "metadata": {"name": "broken", "namespace": "ns", "resourceVersion": "7"},
             "spec": {"sourceNode": "pve1", "templateID": 100, "network": {}}},
            {"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha2", "kind": "ProxmoxMachine",
             "metadata": {"name": "fine", "namespace": "ns"},
             "spec": {"sourceNode": "pve1", "templateID": 100,
                      "network": {"networkDevices": [{"name": "net0", "bridge": "vmbr0"}]}}},
        ]))
        .unwrap();
        let Decoded::Unreadable(u) = &list[0] else {
            panic!("decoded: {:?}", list[0]);
        };
        assert_eq!(u.field, "spec.network");
        assert_eq!(u.error, "missing field `networkDevices`");
        assert_eq!(list[0].meta().resource_version.as_deref(), Some("7"));
        assert_eq!(
            describe::<ProxmoxMachine>(u),
            "cannot read ProxmoxMachine ns/broken as infrastructure.cluster.x-k8s.io/v1alpha2: field \
             spec.network: missing field `networkDevices`; it is not reconciled until it is fixed"
        );
        assert_eq!(
            list[1].ok().map(|m| m.meta().name.clone()),
            Some(Some("fine".into()))
        );
        assert_eq!(list[1].object_ref(&()).kind.as_deref(), Some("ProxmoxMachine"));
        // Without readable metadata it is an error.
        assert!(serde_json::from_value::<Decoded<ProxmoxMachine>>(json!({"metadata": 5})).is_err());
    }
}
