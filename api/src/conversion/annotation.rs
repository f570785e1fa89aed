//! The `cluster.x-k8s.io/conversion-data` annotation.
//!
//! Its value is the JSON of an object of the *other* API version without `metadata`
//! (`apiVersion`, `kind`, `spec`, `status`), like CAPI's `MarshalData`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::Resource;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::ConversionError;
use crate::consts::CONVERSION_DATA_ANNOTATION;

/// `meta` without the conversion-data annotation (an emptied annotation map becomes absent).
pub fn without(meta: &ObjectMeta) -> ObjectMeta {
    let mut meta = meta.clone();
    if let Some(annotations) = meta.annotations.as_mut()
        && annotations.remove(CONVERSION_DATA_ANNOTATION).is_some()
        && annotations.is_empty()
    {
        meta.annotations = None;
    }
    meta
}

/// Splits `meta` into the metadata without the annotation and the object of type `K` stored in
/// it, if the annotation holds an object of `K`'s API version. An annotation holding another
/// version is dropped.
pub fn take<K>(meta: &ObjectMeta) -> Result<(ObjectMeta, Option<K>), ConversionError>
where
    K: Resource<DynamicType = ()> + DeserializeOwned,
{
    let stripped = without(meta);
    let Some(data) = meta
        .annotations
        .as_ref()
        .and_then(|a| a.get(CONVERSION_DATA_ANNOTATION))
    else {
        return Ok((stripped, None));
    };
    let decode_err = |source| ConversionError::Decode {
        kind: K::kind(&()).into_owned(),
        api_version: K::api_version(&()).into_owned(),
        source,
    };
    let mut value: Value = serde_json::from_str(data).map_err(decode_err)?;
    if value.get("apiVersion").and_then(Value::as_str) != Some(&*K::api_version(&())) {
        return Ok((stripped, None));
    }
    if let Some(obj) = value.as_object_mut() {
        obj.insert("metadata".into(), Value::Object(Default::default()));
    }
    let restored = serde_json::from_value(value).map_err(decode_err)?;
    Ok((stripped, Some(restored)))
}

/// Stores `obj` (without its metadata) in the conversion-data annotation of `meta`.
pub fn store<K>(meta: &mut ObjectMeta, obj: &K) -> Result<(), ConversionError>
where
    K: Resource<DynamicType = ()> + Serialize,
{
    let encode_err = |source| ConversionError::Encode {
        kind: K::kind(&()).into_owned(),
        source,
    };
    let mut value = serde_json::to_value(obj).map_err(encode_err)?;
    if let Some(map) = value.as_object_mut() {
        map.remove("metadata");
    }
    let data = serde_json::to_string(&value).map_err(encode_err)?;
    meta.annotations
        .get_or_insert_with(Default::default)
        .insert(CONVERSION_DATA_ANNOTATION.into(), data);
    Ok(())
}
