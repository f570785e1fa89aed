//! What the lifecycle asks of a ProxmoxMachine ([`Adapter`]): its IPAM claims, its bootstrap
//! image, its place among the nodes of its ProxmoxCluster (`status.nodeLocations`) and the VMIDs
//! its cluster's other machines recorded.

use std::sync::{Arc, Mutex};

use capmox_api::capi::views::MachineView;
use capmox_api::consts::CLUSTER_NAME_LABEL;
use capmox_api::v1alpha2::{self as api, ProxmoxCluster, ProxmoxMachine};
use kube::ResourceExt;

use super::bootstrap::{ImageInputs, image};
use super::caches::Caches;
use super::error::MachineError;
use super::locations::{self, Locations};
use crate::ipam;
use crate::proxmox::view::VmFacts;
use crate::vm::scheduling::Placed;
use crate::vm::{Adapter, Addresses, Failure, Image, Reason, Report};

/// A ProxmoxMachine as the lifecycle's owner, for one pass.
pub struct MachineAdapter<'a> {
    /// Kubernetes client.
    pub kube: &'a kube::Client,
    /// The machine (its working copy, zone applied).
    pub pm: &'a ProxmoxMachine,
    /// Its ProxmoxCluster.
    pub pc: &'a Arc<ProxmoxCluster>,
    /// Its Machine.
    pub machine: &'a MachineView,
    /// The IPAM API version the API server serves.
    pub ipam_version: ipam::IpamApiVersion,
    /// Watch caches.
    pub caches: &'a dyn Caches,
    /// The node-location writer.
    pub locations: &'a Locations,
    /// How long a failed step waits before it is retried.
    pub retry_delay: std::time::Duration,
    /// The IPAM resolution this pass saw ([`Adapter::addresses`]).
    resolution: Mutex<Option<ipam::Resolution>>,
}

impl<'a> MachineAdapter<'a> {
    /// The adapter of `pm` for one pass.
    #[allow(clippy::too_many_arguments)] // Everything a pass reads, each from its own place.
    pub fn new(
        kube: &'a kube::Client,
        pm: &'a ProxmoxMachine,
        pc: &'a Arc<ProxmoxCluster>,
        machine: &'a MachineView,
        ipam_version: ipam::IpamApiVersion,
        caches: &'a dyn Caches,
        locations: &'a Locations,
        retry_delay: std::time::Duration,
    ) -> Self {
        Self {
            kube,
            pm,
            pc,
            machine,
            ipam_version,
            caches,
            locations,
            retry_delay,
            resolution: Mutex::new(None),
        }
    }

    /// The resolution the pass saw (`None`: the claims were not looked at).
    pub fn resolution(&self) -> Option<ipam::Resolution> {
        self.resolution
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    fn resolved(&self) -> Vec<ipam::ResolvedAddress> {
        self.resolution().map(|r| r.resolved).unwrap_or_default()
    }
}

impl Adapter for MachineAdapter<'_> {
    type Error = MachineError;

    fn addresses(&self) -> Result<Addresses, MachineError> {
        let (facts, resolution) =
            super::addresses::claim_facts(self.caches, self.ipam_version, self.pm, self.pc)?;
        let tags = if facts == crate::vm::AddressFacts::Ready {
            ipam::default_ipv4_tags(&resolution.resolved)
        } else {
            Vec::new()
        };
        *self
            .resolution
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(resolution);
        Ok(Addresses { facts, tags })
    }

    async fn obtain_addresses(&self) -> Result<Report, MachineError> {
        let ns = self.pm.namespace().unwrap_or_default();
        let mut desired = match ipam::desired_claims(self.pm, self.pc) {
            Ok(d) => d,
            Err(e) => {
                return Ok(Report::failed(Failure {
                    reason: Reason::Owner(api::WAITING_FOR_STATIC_IP_ALLOCATION_REASON),
                    message: e.to_string(),
                    retry_after: Some(self.retry_delay),
                }));
            }
        };
        let pools = super::addresses::pools(self.caches, &ns, &desired);
        ipam::apply_pool_zones(&mut desired, |p| {
            pools
                .get(&p.name)
                .and_then(|(labels, _)| labels.get(capmox_api::consts::PROXMOX_ZONE_LABEL))
                .map(String::as_str)
        });
        let out = ipam::ensure_claims(self.kube, self.ipam_version, &ns, &desired).await?;
        let mut report = Report::message(format!(
            "waiting for {} IP address claim(s)",
            out.created.len() + out.existing.len()
        ));
        if let Some(res) = self.resolution()
            && !res.orphaned.is_empty()
        {
            report.warning = Some((
                Reason::Owner(capmox_api::consts::EVENT_ORPHANED_IP_ADDRESS),
                format!(
                    "recreated claims for existing IPAddresses: {}",
                    res.orphaned.join(", ")
                ),
            ));
        }
        Ok(report)
    }

    async fn bootstrap_image(&self, vm: &VmFacts, region: Option<String>) -> Result<Image, MachineError> {
        let inputs = ImageInputs {
            kube: self.kube,
            pm: self.pm,
            pc: self.pc,
            machine: self.machine,
            caches: self.caches,
            retry: self.retry_delay,
        };
        image(&inputs, vm, self.resolved(), region).await
    }

    async fn place<F>(&self, choose: F) -> Result<Result<String, String>, MachineError>
    where
        F: FnOnce(&[Placed<'_>]) -> Result<String, String> + Send,
    {
        let name = self.pm.name_any();
        let zone = self.pm.spec.network.zone.clone();
        let cp = self.machine.control_plane;
        self.locations
            .update(self.kube, self.pc, |l| {
                let node = {
                    let placements: Vec<Placed<'_>> = locations::placements_for(Some(&*l), cp)
                        .iter()
                        .map(|p| Placed {
                            owner: &p.machine.name,
                            node: &p.node,
                        })
                        .collect();
                    choose(&placements)?
                };
                locations::place(l, &name, &node, zone.as_ref(), cp);
                Ok(node)
            })
            .await
    }

    async fn moved(&self, node: &str) -> Result<(), MachineError> {
        let zone = self.pm.spec.network.zone.clone();
        self.locations
            .record(
                self.kube,
                self.pc,
                &self.pm.name_any(),
                node,
                zone,
                self.machine.control_plane,
            )
            .await
    }

    fn taken_vmids(&self) -> Vec<i64> {
        let ns = self.pm.namespace().unwrap_or_default();
        let Some(cluster) = self.pm.labels().get(CLUSTER_NAME_LABEL) else {
            return Vec::new();
        };
        self.caches
            .recorded_vmids(&ns, cluster, self.pm.metadata.uid.as_deref())
    }
}
