//! What the demo reports: the provisioned machines and what was left behind after deletion.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use capmox_api::capi::ipam::InClusterIPPool;
use capmox_api::capi::ipam_claims::v1beta2::{IPAddress, IPAddressClaim};
use capmox_api::v1alpha2::{MachineAddressType, ProxmoxMachine};
use kube::api::{Api, ListParams};
use kube::{Resource, ResourceExt};

use crate::DemoError;

/// One provisioned machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MachineSummary {
    /// ProxmoxMachine (and VM) name.
    pub name: String,
    /// Proxmox node the VM runs on.
    pub node: Option<String>,
    /// VMID of the VM.
    pub vmid: Option<i64>,
    /// Internal IP addresses.
    pub ips: Vec<String>,
    /// `spec.providerID`.
    pub provider_id: Option<String>,
}

impl MachineSummary {
    /// Reads a ProxmoxMachine.
    pub fn from_machine(pm: &ProxmoxMachine) -> Self {
        let status = pm.status.as_ref();
        let ips = status
            .and_then(|s| s.addresses.as_ref())
            .into_iter()
            .flatten()
            .filter(|a| a.type_ == MachineAddressType::InternalIp)
            .map(|a| a.address.clone())
            .collect();
        Self {
            name: pm.name_any(),
            node: status.and_then(|s| s.proxmox_node.clone()),
            vmid: pm.spec.virtual_machine_id,
            ips,
            provider_id: pm.spec.provider_id.clone(),
        }
    }
}

/// The machine table.
pub fn table(machines: &[MachineSummary]) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{:<15} {:<6} {:<6} {:<16} PROVIDER ID",
        "MACHINE", "NODE", "VMID", "IPS"
    );
    for m in machines {
        let _ = writeln!(
            s,
            "{:<15} {:<6} {:<6} {:<16} {}",
            m.name,
            m.node.as_deref().unwrap_or("-"),
            m.vmid.map_or_else(|| "-".to_owned(), |v| v.to_string()),
            if m.ips.is_empty() {
                "-".to_owned()
            } else {
                m.ips.join(",")
            },
            m.provider_id.as_deref().unwrap_or("-"),
        );
    }
    s
}

/// Everything left behind after the cluster was deleted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LeakReport {
    /// Non-template VMs still in Proxmox (`VMID name on node`).
    pub vms: Vec<String>,
    /// ISO volumes still on Proxmox storages.
    pub isos: Vec<String>,
    /// IPAddresses still in the demo namespace.
    pub ip_addresses: Vec<String>,
    /// IPAddressClaims still in the demo namespace.
    pub ip_address_claims: Vec<String>,
    /// InClusterIPPools still in the demo namespace.
    pub ip_pools: Vec<String>,
}

impl LeakReport {
    /// Whether nothing leaked.
    pub fn is_empty(&self) -> bool {
        self.vms.is_empty()
            && self.isos.is_empty()
            && self.ip_addresses.is_empty()
            && self.ip_address_claims.is_empty()
            && self.ip_pools.is_empty()
    }

    /// The report as text.
    pub fn render(&self) -> String {
        let mut s = String::from("Leak report\n");
        let mut row = |what: &str, items: &[String]| {
            let v = if items.is_empty() {
                "none".to_owned()
            } else {
                items.join(", ")
            };
            let _ = writeln!(s, "  {what:<36} {v}");
        };
        row("VMs (non-template) left in Proxmox:", &self.vms);
        row("ISO volumes left on storages:", &self.isos);
        row("IPAddresses left:", &self.ip_addresses);
        row("IPAddressClaims left:", &self.ip_address_claims);
        row("InClusterIPPools left:", &self.ip_pools);
        s
    }
}

/// Non-template VMs and ISO volumes left in the simulator.
pub fn proxmox_leaks(sim: &pve_sim::SimServer) -> (Vec<String>, Vec<String>) {
    let state = sim.state();
    let vms = state.with(|c| {
        c.vms
            .iter()
            .filter(|(_, vm)| !vm.is_template())
            .map(|(id, vm)| {
                let name = vm.config.get("name").map(String::as_str).unwrap_or("?");
                format!("{id} {name} on {}", vm.node)
            })
            .collect()
    });
    let isos: BTreeSet<String> = state.with(|c| {
        c.volumes
            .values()
            .flat_map(|m| m.keys())
            .filter(|v| v.contains(":iso/") || v.ends_with(".iso"))
            .cloned()
            .collect()
    });
    (vms, isos.into_iter().collect())
}

async fn names<K>(client: &kube::Client, ns: &str) -> Result<Vec<String>, DemoError>
where
    K: Resource<DynamicType = (), Scope = k8s_openapi::NamespaceResourceScope>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    let api: Api<K> = Api::namespaced(client.clone(), ns);
    let list = api
        .list(&ListParams::default())
        .await
        .map_err(|source| DemoError::Kube {
            action: format!("listing {}", K::plural(&())),
            source,
        })?;
    Ok(list.items.iter().map(ResourceExt::name_any).collect())
}

/// Collects the leak report.
pub async fn leaks(
    client: &kube::Client,
    ns: &str,
    sim: &pve_sim::SimServer,
) -> Result<LeakReport, DemoError> {
    let (vms, isos) = proxmox_leaks(sim);
    Ok(LeakReport {
        vms,
        isos,
        ip_addresses: names::<IPAddress>(client, ns).await?,
        ip_address_claims: names::<IPAddressClaim>(client, ns).await?,
        ip_pools: names::<InClusterIPPool>(client, ns).await?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_and_report_render() {
        let t = table(&[MachineSummary {
            name: "demo-cp-0".into(),
            node: Some("pve1".into()),
            vmid: Some(103),
            ips: vec!["192.168.100.10".into()],
            provider_id: Some("proxmox://x".into()),
        }]);
        assert!(
            t.lines()
                .nth(1)
                .unwrap()
                .starts_with("demo-cp-0       pve1   103    192.168.100.10")
        );
        let clean = LeakReport::default();
        assert!(clean.is_empty());
        assert!(
            clean
                .render()
                .contains("IPAddresses left:                    none")
        );
        let leaky = LeakReport {
            isos: vec!["local:iso/user-data-103.iso".into()],
            ..LeakReport::default()
        };
        assert!(!leaky.is_empty());
        assert!(leaky.render().contains("local:iso/user-data-103.iso"));
    }
}
