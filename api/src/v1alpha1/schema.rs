//! Schema helpers that make the generated v1alpha1 schemas match capmox's CRD.

use schemars::Schema;
use serde_json::Value;

/// Container transform for `IPConfigSpec`: capmox marks the defaulted `metric` required.
pub fn ip_config_required(schema: &mut Schema) {
    if let Some(obj) = schema.as_object_mut() {
        let required = obj.entry("required").or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = required {
            if !list.iter().any(|v| v == "metric") {
                list.push(Value::String("metric".into()));
            }
            list.sort_by(|a, b| a.as_str().cmp(&b.as_str()));
        }
    }
}

/// Recursively removes `null` from `type` arrays and drops `nullable` markers.
fn strip_null(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Array(types)) = map.get_mut("type") {
                types.retain(|t| t != "null");
                if types.len() == 1 {
                    let single = types.remove(0);
                    map.insert("type".into(), single);
                }
            }
            map.remove("nullable");
            if let Some(Value::Array(values)) = map.get_mut("enum") {
                values.retain(|v| !v.is_null());
            }
            unwrap_nullable_any_of(map);
            for child in map.values_mut() {
                strip_null(child);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(strip_null),
        _ => {}
    }
}

/// Schema of an unsigned Go integer that controller-gen renders without a format.
pub fn int_no_format(_: &mut schemars::SchemaGenerator) -> Schema {
    schemars::json_schema!({ "type": "integer" })
}

/// Optional variant of [`int_no_format`].
pub fn opt_int_no_format(_: &mut schemars::SchemaGenerator) -> Schema {
    schemars::json_schema!({ "type": "integer" })
}

/// Pattern of a Proxmox tag.
pub const TAG_PATTERN: &str = r"^(?i)[a-z0-9_][a-z0-9_\-\+\.]*$";

/// Rules capmox puts on a ProxmoxMachine's `spec` but not on the same type
/// embedded in templates or in a cluster's `cloneSpec`.
pub const MACHINE_ONLY_RULES: [&str; 2] = [
    crate::v1alpha2::RULE_MACHINE_SOURCE_NODE_XOR_SELECTOR,
    crate::v1alpha2::RULE_MACHINE_TEMPLATE_ID_XOR_SELECTOR,
];

/// Rule capmox puts on a ProxmoxCluster's `spec` but not on the template's copy.
pub const CLUSTER_ONLY_RULES: [&str; 1] = [crate::v1alpha2::RULE_CLUSTER_IP_CONFIG];

/// Container transform for a top-level `spec`/`status` type: strips `nullable`.
pub fn finalize(schema: &mut Schema) {
    with_value(schema, strip_null);
}

/// Removes the validation rules in `rules` from the top level of `schema`.
pub fn remove_rules(schema: &mut Schema, rules: &[&str]) {
    with_value(schema, |v| remove_rules_value(v, rules));
}

fn remove_rules_value(value: &mut Value, rules: &[&str]) {
    let Some(obj) = value.as_object_mut() else {
        return;
    };
    let empty = match obj.get_mut("x-kubernetes-validations") {
        Some(Value::Array(list)) => {
            list.retain(|v| {
                v.get("rule")
                    .and_then(Value::as_str)
                    .is_none_or(|r| !rules.contains(&r))
            });
            list.is_empty()
        }
        _ => false,
    };
    if empty {
        obj.remove("x-kubernetes-validations");
    }
}

/// Field transform: drops the ProxmoxMachine-only rules from an embedded machine spec.
pub fn embedded_machine_spec(schema: &mut Schema) {
    remove_rules(schema, &MACHINE_ONLY_RULES);
}

/// Field transform: drops the ProxmoxMachine-only rules from the values of a machine spec map
/// (a ProxmoxCluster's deprecated `cloneSpec`), and `imageRef` with its rule: capmox-rs reads
/// no `cloneSpec`, so it keeps capmox's schema there.
pub fn embedded_machine_spec_map(schema: &mut Schema) {
    if let Some(values) = schema
        .as_object_mut()
        .and_then(|o| o.get_mut("additionalProperties"))
    {
        remove_rules_value(values, &MACHINE_ONLY_RULES);
        remove_rules_value(values, &[crate::v1alpha2::RULE_MACHINE_IMAGE_REF_ALONE]);
        if let Some(props) = values.get_mut("properties").and_then(Value::as_object_mut) {
            props.remove("imageRef");
        }
    }
}

/// Field transform: drops the ProxmoxCluster-only rule from an embedded cluster spec.
pub fn embedded_cluster_spec(schema: &mut Schema) {
    remove_rules(schema, &CLUSTER_ONLY_RULES);
}

/// Replaces `anyOf: [X, {type: null}]` (schemars' shape for `Option<X>`) by `X`.
fn unwrap_nullable_any_of(map: &mut serde_json::Map<String, Value>) {
    let Some(Value::Array(options)) = map.get("anyOf") else {
        return;
    };
    let is_null = |v: &Value| {
        v.get("type") == Some(&Value::String("null".into()))
            || v.get("const") == Some(&Value::Null)
            || v.get("enum") == Some(&Value::Array(vec![Value::Null]))
    };
    let non_null: Vec<Value> = options.iter().filter(|v| !is_null(v)).cloned().collect();
    if non_null.len() != 1 || non_null.len() == options.len() {
        return;
    }
    map.remove("anyOf");
    if let Some(Value::Object(inner)) = non_null.into_iter().next() {
        for (k, v) in inner {
            map.entry(k).or_insert(v);
        }
    }
}

/// Runs `f` on the JSON object behind `schema` (boolean schemas are left alone).
fn with_value(schema: &mut Schema, f: impl FnOnce(&mut Value)) {
    if let Some(obj) = schema.as_object_mut() {
        let mut value = Value::Object(std::mem::take(obj));
        f(&mut value);
        if let Value::Object(map) = value {
            *obj = map;
        }
    }
}

/// Implements `Serialize` and a `Deserialize` that accepts a missing or `null` value (as the
/// default) for a type whose derived serde impls are generated with `#[serde(remote = "Self")]`.
///
/// capmox's v1alpha1 schemas do not require `spec`, and the API server prunes a `spec: null`
/// (as in capmox's own samples), so a v1alpha1 object may arrive without one; Go decodes that
/// as the zero value, and so does this.
macro_rules! tolerant_serde {
    ($ty:ty) => {
        impl serde::Serialize for $ty {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                <$ty>::serialize(self, serializer)
            }
        }

        impl<'de> serde::Deserialize<'de> for $ty {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                #[derive(serde::Deserialize)]
                struct Present(#[serde(with = "Remote")] $ty);
                type Remote = $ty;
                Ok(Option::<Present>::deserialize(deserializer)?
                    .map(|p| p.0)
                    .unwrap_or_default())
            }
        }
    };
}
pub(crate) use tolerant_serde;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::v1alpha1::{ProxmoxMachine, ProxmoxMachineSpec, ProxmoxMachineTemplate};

    #[test]
    fn absent_or_null_spec_decodes_to_the_zero_value() {
        let meta = json!({"name": "m"});
        let absent = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxMachine", "metadata": meta});
        let machine: ProxmoxMachine = serde_json::from_value(absent).expect("absent spec decodes");
        assert_eq!(machine.spec, ProxmoxMachineSpec::default());
        let null = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxMachineTemplate", "metadata": meta, "spec": null});
        let template: ProxmoxMachineTemplate = serde_json::from_value(null).expect("null spec decodes");
        assert_eq!(template.spec, Default::default());
    }

    #[test]
    fn present_spec_still_rejects_wrong_types() {
        let bad = json!({"apiVersion": "infrastructure.cluster.x-k8s.io/v1alpha1", "kind": "ProxmoxMachine",
                         "metadata": {"name": "m"}, "spec": {"numCores": "four"}});
        assert!(serde_json::from_value::<ProxmoxMachine>(bad).is_err());
        let spec: ProxmoxMachineSpec = serde_json::from_value(json!({"numCores": 4})).expect("decodes");
        assert_eq!(
            serde_json::to_value(&spec).expect("encodes"),
            json!({"numCores": 4})
        );
    }
}
