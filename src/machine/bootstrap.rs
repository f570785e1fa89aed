//! A ProxmoxMachine's bootstrap image: the CAPI bootstrap Secret's data, the network config of its
//! NICs with their IPAM addresses and the MACs Proxmox gave them, and capmox's meta-data (instance
//! ID = the VM's SMBIOS UUID, Proxmox node, zone, region), rendered as a NoCloud ISO.

use std::collections::BTreeMap;

use capmox_api::capi::views::MachineView;
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::Api;

use super::caches::Caches;
use super::error::MachineError;
use crate::bootstrap::{
    self, BootstrapData, BootstrapError, ExtraMetadata, MachineBootstrapInput, ResolvedDevice,
};
use crate::ipam;
use crate::proxmox::view::VmFacts;
use crate::vm::{Failure, Image, Reason};

/// The bootstrap data of the Machine's Secret (`Err`: the failure message to show).
async fn bootstrap_data(
    kube: &kube::Client,
    machine: &MachineView,
    ns: &str,
) -> Result<Result<BootstrapData, String>, MachineError> {
    let Some(name) = machine.bootstrap_data_secret_name.as_deref() else {
        return Ok(Err("the Machine has no bootstrap data secret".into()));
    };
    let api: Api<Secret> = Api::namespaced(kube.clone(), ns);
    let secret = api.get_opt(name).await.map_err(MachineError::kube(format!(
        "getting bootstrap secret {ns}/{name}"
    )))?;
    let Some(secret) = secret else {
        return Ok(Err(format!("bootstrap secret {ns}/{name} not found")));
    };
    let data = secret.data.unwrap_or_default();
    Ok(BootstrapData::from_secret(
        data.get("value").map(|b| b.0.as_slice()),
        data.get("format").map(|b| b.0.as_slice()),
    )
    .map_err(|e| match e {
        // Its text already is capmox's full message.
        BootstrapError::MissingBootstrapValue => e.to_string(),
        e => format!("error retrieving bootstrap data: {e}"),
    }))
}

/// What the renderer needs, from the machine, its VM and its addresses.
fn render_input(
    pm: &ProxmoxMachine,
    pc: &ProxmoxCluster,
    machine: &MachineView,
    vm: &VmFacts,
    bootstrap: BootstrapData,
    resolved: &[ipam::ResolvedAddress],
    region: Option<String>,
) -> Result<MachineBootstrapInput, BootstrapError> {
    let instance_id = vm
        .config
        .smbios_uuid
        .clone()
        .ok_or(BootstrapError::MissingInstanceId)?;
    let mut devices: BTreeMap<String, ResolvedDevice> = ipam::bootstrap_addresses(resolved)
        .into_iter()
        .map(|(net, addresses)| {
            (
                net,
                ResolvedDevice {
                    mac: String::new(),
                    addresses,
                },
            )
        })
        .collect();
    for nic in &pm.spec.network.network_devices {
        let net = nic.name_or_default();
        let index: Option<u32> = net.strip_prefix("net").and_then(|n| n.parse().ok());
        let mac = index
            .and_then(|i| vm.config.nets.get(&i))
            .and_then(|d| d.mac.clone())
            .unwrap_or_default();
        devices.entry(net.to_owned()).or_default().mac = mac;
    }
    let network = bootstrap::network_from_api(&pm.spec.network, &devices, &pc.spec.dns_servers)?;
    Ok(MachineBootstrapInput {
        hostname: pm.name_any(),
        instance_id,
        provider_id_injection: pm
            .spec
            .metadata_settings
            .as_ref()
            .is_some_and(|m| m.provider_id_injection),
        kubernetes_version: machine.version.clone(),
        network,
        bootstrap,
        extra_metadata: ExtraMetadata {
            proxmox_node: Some(vm.node.clone()),
            zone: Some(pm.spec.network.zone_or_default().to_owned()),
            region,
        },
    })
}

/// Everything the image of one machine is rendered from.
pub struct ImageInputs<'a> {
    /// Kubernetes client (the bootstrap Secret is read once, when the image is rendered).
    pub kube: &'a kube::Client,
    /// The machine (zone applied).
    pub pm: &'a ProxmoxMachine,
    /// Its ProxmoxCluster.
    pub pc: &'a ProxmoxCluster,
    /// Its Machine.
    pub machine: &'a MachineView,
    /// Watch caches (the IP pools' annotations).
    pub caches: &'a dyn Caches,
    /// How long a failure waits before it is retried.
    pub retry: std::time::Duration,
}

/// Renders the NoCloud ISO of the machine's VM `vm` with its resolved addresses.
pub async fn image(
    inp: &ImageInputs<'_>,
    vm: &VmFacts,
    resolved: Vec<ipam::ResolvedAddress>,
    region: Option<String>,
) -> Result<Image, MachineError> {
    let retry = Some(inp.retry);
    let failed = |reason, message: String| {
        Image::Failed(Failure {
            reason,
            message,
            retry_after: retry,
        })
    };
    let pm = inp.pm;
    let ns = pm.namespace().unwrap_or_default();
    let bootstrap = match bootstrap_data(inp.kube, inp.machine, &ns).await? {
        Ok(b) => b,
        Err(message) => return Ok(failed(Reason::Owner(api::CLONING_FAILED_REASON), message)),
    };
    let pools = super::addresses::pools(inp.caches, &ns, &ipam::desired_claims(pm, inp.pc)?);
    let mut resolved = resolved;
    // Pool annotations carry the default-route metric; a bad annotation is reported, not ignored.
    if let Err(e) = ipam::apply_gateway_metrics(&mut resolved, |p| pools.get(&p.name).map(|(_, a)| a)) {
        return Ok(failed(
            Reason::Owner(api::WAITING_FOR_BOOTSTRAP_DATA_RECONCILIATION_REASON),
            e.to_string(),
        ));
    }
    let input = match render_input(pm, inp.pc, inp.machine, vm, bootstrap, &resolved, region) {
        Ok(i) => i,
        Err(BootstrapError::MissingMacAddress { device }) => {
            return Ok(Image::Wait(format!("waiting for the MAC address of {device}")));
        }
        Err(e) => return Ok(failed(Reason::VmFailed, e.to_string())),
    };
    let format = match pm.spec.network_config_format_or_default() {
        api::NetworkConfigFormat::Capmox => bootstrap::NetworkConfigFormat::CapmoxV2,
        api::NetworkConfigFormat::V2 => bootstrap::NetworkConfigFormat::NetplanV2Bare,
    };
    Ok(match bootstrap::build_bootstrap_iso(&input, format) {
        Ok(iso) => Image::Ready(iso),
        Err(e) => failed(Reason::VmFailed, e.to_string()),
    })
}
