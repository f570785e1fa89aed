//! What the lifecycle asks of a ProxmoxVirtualMachine ([`Adapter`]): its addresses are its own
//! (given inline, or DHCP: nothing to wait for) or claimed from IPAM pools (waited for), its bootstrap image is the user's cloud-init
//! with a network-config rendered from its NICs, it has no siblings to spread over, and the
//! VMIDs the other ProxmoxVirtualMachines recorded are not free.

use std::collections::BTreeMap;
use std::net::IpAddr;

use capmox_api::vm::{ProxmoxVirtualMachine, VmNetworkDevice};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use super::addresses::PoolAddresses;
use super::error::VirtualMachineError;
use crate::bootstrap::{
    Address, BootstrapData, BootstrapError, BootstrapFormat, Device, ExtraMetadata, MachineBootstrapInput,
    NetworkConfigFormat, NetworkModel,
};
use crate::ipam::ResolvedAddress;
use crate::proxmox::view::VmFacts;
use crate::vm::scheduling::Placed;
use crate::vm::{Adapter, Addresses, Failure, Image, Reason, Report};

/// The default key of `spec.cloudInit.userDataSecretRef`.
pub const DEFAULT_USER_DATA_KEY: &str = "userdata";

/// User data when the spec gives none.
const EMPTY_USER_DATA: &str = "#cloud-config\n{}\n";

/// A ProxmoxVirtualMachine as the lifecycle's owner, for one pass.
pub struct VmAdapter<'a> {
    /// Kubernetes client (the user-data Secret is read when the image is rendered).
    pub kube: &'a kube::Client,
    /// The object.
    pub pvm: &'a ProxmoxVirtualMachine,
    /// VMIDs recorded by the other ProxmoxVirtualMachines.
    pub taken: Vec<i64>,
    /// How long a failure waits before it is retried.
    pub retry_delay: std::time::Duration,
    /// The NICs' pool addresses as read for this pass.
    pub pools: &'a PoolAddresses,
}

impl Adapter for VmAdapter<'_> {
    type Error = VirtualMachineError;

    fn addresses(&self) -> Result<Addresses, VirtualMachineError> {
        Ok(Addresses {
            facts: self.pools.facts(),
            tags: Vec::new(),
        })
    }

    async fn obtain_addresses(&self) -> Result<Report, VirtualMachineError> {
        let ns = self.pvm.namespace().unwrap_or_default();
        let created = self.pools.claim(self.kube, &ns).await?;
        Ok(Report::message(if created.is_empty() {
            "waiting for the IPAddresses of the NICs' pools".to_owned()
        } else {
            format!(
                "IPAddressClaims {} created; waiting for their IPAddresses",
                created.join(", ")
            )
        }))
    }

    async fn bootstrap_image(
        &self,
        vm: &VmFacts,
        region: Option<String>,
    ) -> Result<Image, VirtualMachineError> {
        let failed = |message: String| {
            Image::Failed(Failure {
                reason: Reason::VmFailed,
                message,
                retry_after: Some(self.retry_delay),
            })
        };
        let user_data = match self.user_data().await? {
            Ok(u) => u,
            Err(message) => return Ok(failed(message)),
        };
        let input = match render_input(self.pvm, vm, user_data, region, &self.pools.by_net()) {
            Ok(i) => i,
            Err(RenderError::Bootstrap(BootstrapError::MissingMacAddress { device })) => {
                return Ok(Image::Wait(format!("waiting for the MAC address of {device}")));
            }
            Err(e) => return Ok(failed(e.to_string())),
        };
        Ok(
            match crate::bootstrap::build_bootstrap_iso(&input, NetworkConfigFormat::NetplanV2Bare) {
                Ok(iso) => Image::Ready(iso),
                Err(e) => failed(e.to_string()),
            },
        )
    }

    async fn place<F>(&self, choose: F) -> Result<Result<String, String>, VirtualMachineError>
    where
        F: FnOnce(&[Placed<'_>]) -> Result<String, String> + Send,
    {
        Ok(choose(&[]))
    }

    async fn moved(&self, _node: &str) -> Result<(), VirtualMachineError> {
        Ok(())
    }

    fn taken_vmids(&self) -> Vec<i64> {
        self.taken.clone()
    }
}

impl VmAdapter<'_> {
    /// The user data: inline, from the Secret key, or an empty cloud-config (`Err`: why it cannot
    /// be had; the Secret or key is missing).
    async fn user_data(&self) -> Result<Result<Vec<u8>, String>, VirtualMachineError> {
        let Some(ci) = self.pvm.spec.cloud_init.as_ref() else {
            return Ok(Ok(EMPTY_USER_DATA.as_bytes().to_vec()));
        };
        if let Some(inline) = &ci.user_data {
            return Ok(Ok(inline.as_bytes().to_vec()));
        }
        let Some(r) = &ci.user_data_secret_ref else {
            return Ok(Ok(EMPTY_USER_DATA.as_bytes().to_vec()));
        };
        let ns = self.pvm.namespace().unwrap_or_default();
        let key = r.key.as_deref().unwrap_or(DEFAULT_USER_DATA_KEY);
        let secret = Api::<Secret>::namespaced(self.kube.clone(), &ns)
            .get_opt(&r.name)
            .await
            .map_err(VirtualMachineError::kube(format!(
                "getting Secret {ns}/{}",
                r.name
            )))?;
        Ok(match secret {
            None => Err(format!("user-data Secret {ns}/{} not found", r.name)),
            Some(s) => s
                .data
                .as_ref()
                .and_then(|d| d.get(key))
                .map(|b| b.0.clone())
                .ok_or_else(|| format!("user-data Secret {ns}/{} has no key {key:?}", r.name)),
        })
    }
}

/// Why the bootstrap input cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// The renderer refused.
    #[error(transparent)]
    Bootstrap(#[from] BootstrapError),
    /// An address of the spec does not parse.
    #[error("spec.network.networkDevices[{index}]: {value:?} is not an address with a prefix length")]
    Address {
        /// The NIC's position.
        index: usize,
        /// The value.
        value: String,
    },
}

/// The guest network of `nic` (its MAC from the VM's config; `pooled`: the addresses its IPAM
/// pool gave, each with the pool's gateway).
fn device(
    index: usize,
    nic: &VmNetworkDevice,
    vm: &VmFacts,
    pooled: &[ResolvedAddress],
) -> Result<Device, RenderError> {
    let mac = nic
        .name
        .strip_prefix("net")
        .and_then(|n| n.parse::<u32>().ok())
        .and_then(|i| vm.config.nets.get(&i))
        .and_then(|d| d.mac.clone())
        .ok_or_else(|| BootstrapError::MissingMacAddress {
            device: nic.name.clone(),
        })?;
    let gateway = |g: Option<&String>| g.and_then(|g| g.parse::<IpAddr>().ok());
    let mut addresses = Vec::new();
    for (list, gw) in [
        (nic.ipv4_addresses.as_deref(), gateway(nic.gateway.as_ref())),
        (nic.ipv6_addresses.as_deref(), gateway(nic.gateway6.as_ref())),
    ] {
        for (i, cidr) in list.unwrap_or_default().iter().enumerate() {
            let net: ipnet::IpNet = cidr.parse().map_err(|_| RenderError::Address {
                index,
                value: cidr.clone(),
            })?;
            addresses.push(Address {
                ip: net.addr(),
                prefix: net.prefix_len(),
                // The gateway becomes the default route of the family's first address.
                gateway: if i == 0 { gw } else { None },
                metric: None,
                is_default: false,
            });
        }
    }
    for p in pooled {
        addresses.push(Address {
            ip: p.address,
            prefix: p.prefix,
            gateway: p.gateway.as_deref().and_then(|g| g.parse::<IpAddr>().ok()),
            metric: p.metric,
            is_default: false,
        });
    }
    let static_v4 = nic.ipv4_addresses.as_ref().is_some_and(|a| !a.is_empty());
    let static_v6 = nic.ipv6_addresses.as_ref().is_some_and(|a| !a.is_empty());
    Ok(Device {
        proxmox_name: nic.name.clone(),
        index,
        mac,
        dhcp4: !static_v4 && !static_v6 && nic.ip_pool_ref.is_none(),
        dhcp6: false,
        accept_ra: false,
        addresses,
        dns_servers: nic.dns_servers.clone().unwrap_or_default(),
        routes: Vec::new(),
        routing_policy: Vec::new(),
        link_mtu: None,
    })
}

/// What the NoCloud ISO of `pvm`'s VM `vm` is rendered from (`pooled`: the IPAM addresses by NIC
/// slot). Without NICs in the spec, every NIC the VM has gets DHCP.
pub fn render_input(
    pvm: &ProxmoxVirtualMachine,
    vm: &VmFacts,
    user_data: Vec<u8>,
    region: Option<String>,
    pooled: &BTreeMap<String, Vec<ResolvedAddress>>,
) -> Result<MachineBootstrapInput, RenderError> {
    let instance_id = vm
        .config
        .smbios_uuid
        .clone()
        .ok_or(BootstrapError::MissingInstanceId)?;
    let template_nics: Vec<VmNetworkDevice>;
    let nics = if pvm.spec.nics().is_empty() {
        template_nics = vm
            .config
            .nets
            .keys()
            .map(|i| VmNetworkDevice {
                name: format!("net{i}"),
                ..VmNetworkDevice::default()
            })
            .collect();
        &template_nics
    } else {
        pvm.spec.nics()
    };
    let devices = nics
        .iter()
        .enumerate()
        .map(|(i, n)| device(i, n, vm, pooled.get(&n.name).map_or(&[][..], Vec::as_slice)))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(MachineBootstrapInput {
        hostname: pvm.name_any(),
        instance_id,
        provider_id_injection: false,
        kubernetes_version: None,
        network: NetworkModel {
            devices,
            vrfs: Vec::new(),
        },
        bootstrap: BootstrapData {
            value: user_data,
            format: BootstrapFormat::CloudConfig,
        },
        extra_metadata: ExtraMetadata {
            proxmox_node: Some(vm.node.clone()),
            zone: None,
            region,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxmox::types::VmConfig;
    use crate::proxmox::view::Power;
    use serde_json::json;

    #[test]
    fn network_config_from_inline_pool_and_dhcp_addresses() {
        let pvm: ProxmoxVirtualMachine = serde_json::from_value(json!({
            "apiVersion": "vm.capmox-rs.io/v1alpha1", "kind": "ProxmoxVirtualMachine",
            "metadata": {"name": "db-1", "namespace": "apps"},
            "spec": {"templateID": 100, "network": {"networkDevices": [
                {"name": "net0", "ipv4Addresses": ["10.0.0.5/24"], "gateway": "10.0.0.1", "dnsServers": ["10.0.0.2"]},
                {"name": "net1"},
                {"name": "net2", "ipPoolRef": {"kind": "InClusterIPPool", "name": "p"}}
            ]}}
        }))
        .unwrap();
        let raw: std::collections::BTreeMap<String, serde_json::Value> = serde_json::from_value(json!({
            "smbios1": "uuid=5b0c5a4a-0000-4000-8000-000000000001",
            "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
            "net1": "virtio=BC:24:11:00:00:02,bridge=vmbr0",
            "net2": "virtio=BC:24:11:00:00:03,bridge=vmbr0"
        }))
        .unwrap();
        let vm = VmFacts {
            vmid: 200,
            node: "pve1".into(),
            power: Power::Stopped,
            uptime_secs: 0,
            ha_managed: false,
            config: VmConfig::from(raw),
        };
        let pooled = ResolvedAddress {
            net: "net2".into(),
            device_index: 2,
            pool_offset: 0,
            pool: capmox_api::capi::ipam_claims::IpPoolReference {
                api_group: "ipam.cluster.x-k8s.io".into(),
                kind: "InClusterIPPool".into(),
                name: "p".into(),
            },
            family: crate::ipam::IpFamily::V4,
            address: "10.1.0.7".parse().unwrap(),
            prefix: 16,
            // A second default route would need its own metric (the renderer refuses two alike).
            gateway: None,
            is_default_pool: false,
            ip_address_name: "db-1-net2-00-inet".into(),
            metric: None,
        };
        let by_net = BTreeMap::from([("net2".to_owned(), vec![pooled])]);
        let input = render_input(&pvm, &vm, b"#cloud-config\n".to_vec(), None, &by_net).unwrap();
        let d = &input.network.devices;
        assert_eq!(d[0].addresses[0].cidr(), "10.0.0.5/24");
        assert!(!d[0].dhcp4 && d[1].dhcp4 && !d[2].dhcp4);
        assert_eq!(d[2].addresses[0].cidr(), "10.1.0.7/16");
        assert_eq!(d[0].addresses[0].gateway, Some("10.0.0.1".parse().unwrap()));
        let net = crate::bootstrap::render_network_config(&input.network, NetworkConfigFormat::NetplanV2Bare)
            .unwrap();
        assert!(
            net.contains("10.0.0.5/24") && net.contains("dhcp4: true") && net.contains("10.1.0.7/16"),
            "{net}"
        );
    }
}
