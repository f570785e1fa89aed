//! Conversions of small shared types: conditions, references, endpoints, template metadata.

use k8s_openapi::api::core::v1 as corev1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as metav1;

use crate::{v1alpha1, v1alpha2};

/// Reason given to an up-converted condition that had none.
pub const API_CONVERSION_REASON: &str = "APIConversionReason";
/// Message given to an up-converted condition that had none.
pub const API_CONVERSION_MESSAGE: &str = "API Conversion";

/// CAPI v1beta1 conditions → `metav1.Condition`s.
pub fn conditions_up(conditions: &Option<Vec<v1alpha1::Condition>>) -> Option<Vec<metav1::Condition>> {
    conditions
        .as_ref()
        .map(|list| list.iter().map(condition_up).collect())
}

fn condition_up(c: &v1alpha1::Condition) -> metav1::Condition {
    let non_empty = |v: &Option<String>, fallback: &str| match v {
        Some(s) if !s.is_empty() => s.clone(),
        _ => fallback.to_string(),
    };
    metav1::Condition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        last_transition_time: c.last_transition_time.clone(),
        reason: non_empty(&c.reason, API_CONVERSION_REASON),
        message: non_empty(&c.message, API_CONVERSION_MESSAGE),
        observed_generation: None,
    }
}

/// `metav1.Condition`s → CAPI v1beta1 conditions (the conversion placeholders become absent).
pub fn conditions_down(conditions: &Option<Vec<metav1::Condition>>) -> Option<Vec<v1alpha1::Condition>> {
    conditions
        .as_ref()
        .map(|list| list.iter().map(condition_down).collect())
}

fn condition_down(c: &metav1::Condition) -> v1alpha1::Condition {
    let unless = |v: &str, placeholder: &str| (!v.is_empty() && v != placeholder).then(|| v.to_string());
    v1alpha1::Condition {
        type_: c.type_.clone(),
        status: c.status.clone(),
        severity: None,
        last_transition_time: c.last_transition_time.clone(),
        reason: unless(&c.reason, API_CONVERSION_REASON),
        message: unless(&c.message, API_CONVERSION_MESSAGE),
    }
}

/// Restores hub-only condition data (`observedGeneration`) by condition type.
pub fn restore_hub_conditions(
    hub: &mut Option<Vec<metav1::Condition>>,
    restored: &Option<Vec<metav1::Condition>>,
) {
    let (Some(hub), Some(restored)) = (hub.as_mut(), restored.as_ref()) else {
        return;
    };
    for c in hub.iter_mut() {
        if let Some(r) = restored.iter().find(|r| r.type_ == c.type_) {
            c.observed_generation = r.observed_generation;
        }
    }
}

/// Restores v1alpha1-only condition data (`severity`) for conditions whose state is unchanged.
pub fn restore_spoke_conditions(
    spoke: &mut Option<Vec<v1alpha1::Condition>>,
    restored: &Option<Vec<v1alpha1::Condition>>,
) {
    let (Some(spoke), Some(restored)) = (spoke.as_mut(), restored.as_ref()) else {
        return;
    };
    for c in spoke.iter_mut() {
        if let Some(r) = restored.iter().find(|r| r.type_ == c.type_)
            && r.status == c.status
            && r.reason == c.reason
        {
            c.severity = r.severity.clone();
        }
    }
}

/// `status.ready` → `status.initialization`.
pub fn ready_up(ready: Option<bool>) -> Option<v1alpha2::InitializationStatus> {
    ready.map(|r| v1alpha2::InitializationStatus { provisioned: Some(r) })
}

/// `status.initialization` → `status.ready`.
pub fn ready_down(init: &Option<v1alpha2::InitializationStatus>) -> Option<bool> {
    init.as_ref().and_then(|i| i.provisioned)
}

/// v1alpha1 `MachineAddress` → v1alpha2.
pub fn address_up(a: &v1alpha1::MachineAddress) -> v1alpha2::MachineAddress {
    use v1alpha1::MachineAddressType as S;
    use v1alpha2::MachineAddressType as H;
    let type_ = match a.type_ {
        S::Hostname => H::Hostname,
        S::ExternalIp => H::ExternalIp,
        S::InternalIp => H::InternalIp,
        S::ExternalDns => H::ExternalDns,
        S::InternalDns => H::InternalDns,
    };
    v1alpha2::MachineAddress {
        address: a.address.clone(),
        type_,
    }
}

/// v1alpha2 `MachineAddress` → v1alpha1.
pub fn address_down(a: &v1alpha2::MachineAddress) -> v1alpha1::MachineAddress {
    use v1alpha1::MachineAddressType as S;
    use v1alpha2::MachineAddressType as H;
    let type_ = match a.type_ {
        H::Hostname => S::Hostname,
        H::ExternalIp => S::ExternalIp,
        H::InternalIp => S::InternalIp,
        H::ExternalDns => S::ExternalDns,
        H::InternalDns => S::InternalDns,
    };
    v1alpha1::MachineAddress {
        address: a.address.clone(),
        type_,
    }
}

/// v1alpha1 typed reference → `corev1.TypedLocalObjectReference`.
pub fn typed_ref_up(r: &v1alpha1::TypedLocalObjectReference) -> corev1::TypedLocalObjectReference {
    corev1::TypedLocalObjectReference {
        api_group: r.api_group.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
    }
}

/// `corev1.TypedLocalObjectReference` → v1alpha1 typed reference.
pub fn typed_ref_down(r: &corev1::TypedLocalObjectReference) -> v1alpha1::TypedLocalObjectReference {
    v1alpha1::TypedLocalObjectReference {
        api_group: r.api_group.clone(),
        kind: r.kind.clone(),
        name: r.name.clone(),
    }
}

/// v1alpha1 local reference → `corev1.LocalObjectReference`.
pub fn local_ref_up(r: &v1alpha1::LocalObjectReference) -> corev1::LocalObjectReference {
    corev1::LocalObjectReference { name: r.name.clone() }
}

/// `corev1.LocalObjectReference` → v1alpha1 local reference.
pub fn local_ref_down(r: &corev1::LocalObjectReference) -> v1alpha1::LocalObjectReference {
    v1alpha1::LocalObjectReference { name: r.name.clone() }
}

/// v1alpha1 template metadata → v1alpha2.
pub fn template_meta_up(m: &Option<v1alpha1::TemplateObjectMeta>) -> Option<v1alpha2::TemplateObjectMeta> {
    m.as_ref().map(|m| v1alpha2::TemplateObjectMeta {
        labels: m.labels.clone(),
        annotations: m.annotations.clone(),
    })
}

/// v1alpha2 template metadata → v1alpha1.
pub fn template_meta_down(m: &Option<v1alpha2::TemplateObjectMeta>) -> Option<v1alpha1::TemplateObjectMeta> {
    m.as_ref().map(|m| v1alpha1::TemplateObjectMeta {
        labels: m.labels.clone(),
        annotations: m.annotations.clone(),
    })
}

/// Go-style `int32(x)` of a `uint32` (wrapping; the inverse of [`i32_to_u32`]).
pub fn u32_to_i32(v: u32) -> i32 {
    v as i32
}

/// Go-style `uint32(x)` of an `int32` (wrapping).
pub fn i32_to_u32(v: i32) -> u32 {
    v as u32
}

/// Go-style `int64(x)` of a `uint64` (wrapping).
pub fn u64_to_i64(v: u64) -> i64 {
    v as i64
}

/// Go-style `uint64(x)` of an `int64` (wrapping).
pub fn i64_to_u64(v: i64) -> u64 {
    v as u64
}

/// Go-style `uint16(x)` of an `int32` (truncating).
pub fn i32_to_u16(v: i32) -> u16 {
    v as u16
}

/// Go-style `int32(x)` of an `int64` (truncating).
pub fn i64_to_i32(v: i64) -> i32 {
    v as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn casts_wrap_like_go() {
        assert_eq!(u32_to_i32(u32::MAX), -1);
        assert_eq!(i32_to_u32(-1), u32::MAX);
        assert_eq!(i32_to_u16(65_536 + 7), 7);
        assert_eq!(i32_to_u16(1500), 1500);
        assert_eq!(i64_to_i32(1 << 32), 0);
        assert_eq!(i64_to_i32(-5), -5);
        assert_eq!(u64_to_i64(u64::MAX), -1);
    }
}
