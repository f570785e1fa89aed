//! Effective values of fields the CRD defaults (for objects that have not been through an API
//! server, e.g. in tests) and small accessors the controllers use.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::{
    InClusterZoneRef, IpConfigSpec, NetworkDevice, NetworkModel, NetworkSpec, ProxmoxCluster,
    ProxmoxClusterSpec, ProxmoxMachine, ProxmoxMachineSpec, TargetFileStorageFormat, TemplateMatchPolicy,
    TemplateSelector,
};
use crate::consts::DEFAULT_ZONE;

/// Default name of the first NIC.
pub const DEFAULT_NET_NAME: &str = "net0";
/// Default route metric of an IP pool's gateway.
pub const DEFAULT_GATEWAY_METRIC: i32 = 100;
/// Default share of node memory usable by VMs, in percent.
pub const DEFAULT_MEMORY_ADJUSTMENT: i64 = 100;

impl ProxmoxClusterSpec {
    /// Whether an external control-plane provider manages the endpoint (default false).
    pub fn is_external_managed_control_plane(&self) -> bool {
        self.external_managed_control_plane.unwrap_or(false)
    }

    /// Percentage of node memory the scheduler may hand out (default 100; 0 disables the check).
    pub fn memory_adjustment(&self) -> i64 {
        self.scheduler_hints
            .as_ref()
            .and_then(|h| h.memory_adjustment)
            .unwrap_or(DEFAULT_MEMORY_ADJUSTMENT)
    }
}

impl IpConfigSpec {
    /// Route metric of the gateway (default 100).
    pub fn metric_or_default(&self) -> i32 {
        self.metric.unwrap_or(DEFAULT_GATEWAY_METRIC)
    }
}

impl InClusterZoneRef {
    /// Zone name (default `default`).
    pub fn zone_or_default(&self) -> &str {
        self.zone.as_deref().unwrap_or(DEFAULT_ZONE)
    }
}

impl ProxmoxMachineSpec {
    /// Whether the VM is a full clone (default true).
    pub fn is_full_clone(&self) -> bool {
        self.full.unwrap_or(true)
    }
}

impl TemplateSelector {
    /// Tag match policy (default `exact`).
    pub fn policy(&self) -> TemplateMatchPolicy {
        self.match_policy.unwrap_or_default()
    }
}

impl ProxmoxClusterSpec {
    /// Whether the spec defines `zone` without any IP pool (a DHCP-only zone): the default zone
    /// without `ipv4Config`/`ipv6Config`, or a `zoneConfig` entry without either.
    pub fn zone_without_pools(&self, zone: &str) -> bool {
        if zone == DEFAULT_ZONE {
            return self.ipv4_config.is_none() && self.ipv6_config.is_none();
        }
        self.zone_config
            .iter()
            .flatten()
            .any(|z| z.zone == zone && z.ipv4_config.is_none() && z.ipv6_config.is_none())
    }
}

impl NetworkSpec {
    /// Zone whose default pools the machine uses (default `default`).
    pub fn zone_or_default(&self) -> &str {
        self.zone.as_deref().unwrap_or(DEFAULT_ZONE)
    }

    /// Some NIC learns an address by DHCP or SLAAC (from the guest agent, not from IPAM).
    pub fn uses_dynamic_addresses(&self) -> bool {
        self.network_devices
            .iter()
            .any(NetworkDevice::uses_dynamic_addresses)
    }
}

impl NetworkDevice {
    /// NIC slot name (default `net0`).
    pub fn name_or_default(&self) -> &str {
        self.name.as_deref().unwrap_or(DEFAULT_NET_NAME)
    }

    /// NIC model (default `virtio`).
    pub fn model_or_default(&self) -> NetworkModel {
        self.model.unwrap_or_default()
    }

    /// The guest gets this NIC's IPv4 address by DHCP (`ipv4: dhcp`).
    pub fn dhcp4(&self) -> bool {
        self.ipv4 == Some(super::Ipv4Mode::Dhcp)
    }

    /// The guest gets this NIC's IPv6 address by DHCPv6 (`ipv6: dhcp`).
    pub fn dhcp6(&self) -> bool {
        self.ipv6 == Some(super::Ipv6Mode::Dhcp)
    }

    /// The guest configures this NIC's IPv6 address from router advertisements (`ipv6: slaac`).
    pub fn slaac(&self) -> bool {
        self.ipv6 == Some(super::Ipv6Mode::Slaac)
    }

    /// Some address of this NIC is not static (DHCP or SLAAC): it is learnt from the guest agent.
    pub fn uses_dynamic_addresses(&self) -> bool {
        self.dhcp4() || self.dhcp6() || self.slaac()
    }
}

impl NetworkModel {
    /// The model name as Proxmox spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::E1000 => "e1000",
            Self::Virtio => "virtio",
            Self::Rtl8139 => "rtl8139",
            Self::Vmxnet3 => "vmxnet3",
        }
    }
}

impl TargetFileStorageFormat {
    /// The format name as Proxmox spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Raw => "raw",
            Self::Qcow2 => "qcow2",
            Self::Vmdk => "vmdk",
        }
    }
}

fn find<'a>(conditions: Option<&'a Vec<Condition>>, type_: &str) -> Option<&'a Condition> {
    conditions.into_iter().flatten().find(|c| c.type_ == type_)
}

impl ProxmoxCluster {
    /// `status.initialization.provisioned`, false when unset.
    pub fn is_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.provisioned)
            .unwrap_or(false)
    }

    /// The status condition of the given type.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        find(self.status.as_ref().and_then(|s| s.conditions.as_ref()), type_)
    }
}

impl ProxmoxMachine {
    /// `status.initialization.provisioned`, false when unset.
    pub fn is_provisioned(&self) -> bool {
        self.status
            .as_ref()
            .and_then(|s| s.initialization.as_ref())
            .and_then(|i| i.provisioned)
            .unwrap_or(false)
    }

    /// The status condition of the given type.
    pub fn condition(&self, type_: &str) -> Option<&Condition> {
        find(self.status.as_ref().and_then(|s| s.conditions.as_ref()), type_)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_match_the_crd_defaults() {
        assert!(ProxmoxMachineSpec::default().is_full_clone());
        assert_eq!(TemplateSelector::default().policy(), TemplateMatchPolicy::Exact);
        let nic = NetworkDevice::default();
        assert_eq!(nic.name_or_default(), "net0");
        assert_eq!(nic.model_or_default().as_str(), "virtio");
        assert_eq!(IpConfigSpec::default().metric_or_default(), 100);
        assert_eq!(InClusterZoneRef::default().zone_or_default(), "default");
        assert_eq!(ProxmoxClusterSpec::default().memory_adjustment(), 100);
        assert!(!ProxmoxClusterSpec::default().is_external_managed_control_plane());
    }

    #[test]
    fn enum_spellings_match_serde() {
        for model in [
            NetworkModel::E1000,
            NetworkModel::Virtio,
            NetworkModel::Rtl8139,
            NetworkModel::Vmxnet3,
        ] {
            assert_eq!(
                serde_json::to_value(model).unwrap(),
                serde_json::json!(model.as_str())
            );
        }
        for format in [
            TargetFileStorageFormat::Raw,
            TargetFileStorageFormat::Qcow2,
            TargetFileStorageFormat::Vmdk,
        ] {
            assert_eq!(
                serde_json::to_value(format).unwrap(),
                serde_json::json!(format.as_str())
            );
        }
    }

    #[test]
    fn provisioned_and_conditions_are_read_from_status() {
        let mut machine = ProxmoxMachine::new("m", ProxmoxMachineSpec::default());
        assert!(!machine.is_provisioned());
        machine.status = Some(super::super::ProxmoxMachineStatus {
            initialization: Some(super::super::InitializationStatus {
                provisioned: Some(true),
            }),
            conditions: Some(vec![Condition {
                type_: "Ready".into(),
                status: "True".into(),
                reason: "Provisioned".into(),
                message: String::new(),
                last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                    k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
                ),
                observed_generation: None,
            }]),
            ..Default::default()
        });
        assert!(machine.is_provisioned());
        assert_eq!(
            machine.condition("Ready").map(|c| c.status.as_str()),
            Some("True")
        );
        assert!(machine.condition("Other").is_none());
    }
}
