//! Hand-written schema fragments for the Kubernetes and Cluster API types that
//! the v1alpha2 API reuses from `k8s-openapi` (whose generated schemas carry no
//! validation markers), plus the validation strings shared by several fields.

use schemars::{Schema, SchemaGenerator, json_schema};

/// Pattern of a zone name (`Zone` in capmox).
pub const ZONE_PATTERN: &str = r"^[a-z0-9A-Z](?:[a-z0-9A-Z-_.]{0,61}[a-z0-9A-Z])?$";

/// Pattern of a Proxmox NIC slot name (`net0`, `net1`, ...).
pub const NET_NAME_PATTERN: &str = r"^net[0-9]+$";

/// Pattern of a Proxmox tag.
pub const TAG_PATTERN: &str = r"^(?i)[a-z0-9_][a-z0-9_\-\+\.]*$";

/// Pattern of a `providerID` written by the controller.
pub const PROVIDER_ID_PATTERN: &str =
    r"^proxmox://[a-fA-F0-9]{8}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{4}-[a-fA-F0-9]{12}$";

/// Pattern of a NIC name in `status.ipAddresses` (a slot name or the synthetic `default`).
pub const IP_ADDRESSES_NET_PATTERN: &str = r"^(net[0-9]+|default)$";

/// Pattern of a MAC address.
pub const MAC_ADDRESS_PATTERN: &str = r"^([0-9A-Fa-f]{2}[:]){5}([0-9A-Fa-f]{2})$";

/// `metav1.Condition` list as used by every v1alpha2 status: a map keyed by `type`, at most 32 entries.
pub fn conditions(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Current service state, one entry per condition type.",
        "type": "array",
        "maxItems": 32,
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["type"],
        "items": {
            "description": "One aspect of the current state of this object.",
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {
                    "description": "When the condition last changed from one status to another.",
                    "type": "string",
                    "format": "date-time"
                },
                "message": {
                    "description": "Human-readable details about the transition.",
                    "type": "string",
                    "maxLength": 32768
                },
                "observedGeneration": {
                    "description": "The metadata.generation the condition was computed for.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0
                },
                "reason": {
                    "description": "Machine-readable CamelCase reason for the last transition.",
                    "type": "string",
                    "minLength": 1,
                    "maxLength": 1024,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
                },
                "status": {
                    "description": "Status of the condition: True, False or Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"]
                },
                "type": {
                    "description": "Condition type in CamelCase or foo.example.com/CamelCase form.",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                }
            }
        }
    })
}

/// A `metav1.Time` timestamp.
pub fn date_time(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "An RFC 3339 timestamp.",
        "type": "string",
        "format": "date-time"
    })
}

fn local_object_reference_value() -> serde_json::Value {
    serde_json::json!({
        "description": "Reference to an object in the same namespace.",
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "name": {
                "description": "Name of the referenced object.",
                "type": "string",
                "default": ""
            }
        }
    })
}

/// A `corev1.LocalObjectReference`.
pub fn local_object_reference(_: &mut SchemaGenerator) -> Schema {
    Schema::try_from(local_object_reference_value()).unwrap_or_default()
}

/// An atomic list of `corev1.LocalObjectReference`.
pub fn local_object_reference_list(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "References to objects in the same namespace.",
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": local_object_reference_value()
    })
}

/// A `corev1.SecretReference`.
pub fn secret_reference(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Reference to a Secret, possibly in another namespace.",
        "type": "object",
        "x-kubernetes-map-type": "atomic",
        "properties": {
            "name": {
                "description": "Name of the Secret.",
                "type": "string"
            },
            "namespace": {
                "description": "Namespace of the Secret; defaults to the namespace of the referring object.",
                "type": "string"
            }
        }
    })
}

/// The `ipPoolRef` list of a NIC: typed references restricted to CAPI IPAM in-cluster pools.
pub fn ip_pool_refs(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "Additional IPAM pools to allocate addresses for this device from, one address per pool.",
        "type": "array",
        "x-kubernetes-list-type": "atomic",
        "items": {
            "description": "Typed reference to an IP pool in the same namespace or cluster-wide.",
            "type": "object",
            "x-kubernetes-map-type": "atomic",
            "required": ["kind", "name"],
            "properties": {
                "apiGroup": {
                    "description": "API group of the pool.",
                    "type": "string"
                },
                "kind": {
                    "description": "Kind of the pool.",
                    "type": "string"
                },
                "name": {
                    "description": "Name of the pool.",
                    "type": "string"
                }
            },
            "x-kubernetes-validations": [
                {
                    "rule": "self.apiGroup == 'ipam.cluster.x-k8s.io'",
                    "message": "ipPoolRef allows only IPAM apiGroup ipam.cluster.x-k8s.io"
                },
                {
                    "rule": "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'",
                    "message": "ipPoolRef allows either InClusterIPPool or GlobalInClusterIPPool"
                }
            ]
        }
    })
}

/// Removes the `x-kubernetes-validations` entries whose rule is in `rules` from the top level of `schema`,
/// dropping the key when nothing is left. Used where capmox puts a rule on a kind's `spec` but not on the
/// same type embedded in a template.
pub fn remove_rules(schema: &mut Schema, rules: &[&str]) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let empty = match obj.get_mut("x-kubernetes-validations") {
        Some(serde_json::Value::Array(list)) => {
            list.retain(|v| {
                v.get("rule")
                    .and_then(serde_json::Value::as_str)
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

/// Disk slots an additional volume may use: `scsi0`–`scsi30`, `virtio0`–`virtio15`, `sata0`–`sata5`
/// (Proxmox's bus limits; `ide` is left to CD-ROMs and the bootstrap ISO on `ide0`).
pub const ADDITIONAL_VOLUME_DISK_PATTERN: &str =
    r"^(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5])$";

/// A Proxmox configuration id (`pve-configid`): HA group names, storage IDs.
pub const PVE_CONFIG_ID_PATTERN: &str = r"^[a-zA-Z][a-zA-Z0-9_\-]*$";

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_object_reference_is_an_atomic_object() {
        let mut generator = SchemaGenerator::default();
        let schema = local_object_reference(&mut generator);
        assert_eq!(schema.get("type"), Some(&serde_json::json!("object")));
        assert_eq!(
            schema.get("x-kubernetes-map-type"),
            Some(&serde_json::json!("atomic"))
        );
    }

    #[test]
    fn remove_rules_drops_only_named_rules() {
        let mut schema = json_schema!({
            "type": "object",
            "x-kubernetes-validations": [{"rule": "a", "message": "m"}, {"rule": "b", "message": "n"}]
        });
        remove_rules(&mut schema, &["a"]);
        assert_eq!(
            schema.get("x-kubernetes-validations"),
            Some(&serde_json::json!([{"rule": "b", "message": "n"}]))
        );
        remove_rules(&mut schema, &["b"]);
        assert_eq!(schema.get("x-kubernetes-validations"), None);
    }
}
