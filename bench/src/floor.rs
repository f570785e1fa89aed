//! The request floor: the Proxmox requests one machine (or one standalone VM) cannot do without,
//! by endpoint, printed by `make bench` beside what a run measured so that the remaining gap is
//! visible per endpoint. What is not listed has a floor of 0 (list reads, storage listings, a
//! second config write, a second `exec-status`): every one of them is a cost we chose, not one
//! Proxmox imposes.
//!
//! The floors are for one object alone. A fleet can go below them per object where one request
//! serves many (one `/cluster/nextid` read for a batch of clones, one `/cluster/resources` read
//! confirming many stops).

/// Unavoidable requests of one phase, by endpoint (the keys of pve-sim's request counters).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Floor(&'static [(&'static str, u64)]);

impl Floor {
    /// The floor of `endpoint` (0 when it is avoidable).
    pub fn of(&self, endpoint: &str) -> u64 {
        self.0.iter().find(|(e, _)| *e == endpoint).map_or(0, |(_, n)| *n)
    }

    /// The endpoints with a floor above 0.
    pub fn endpoints(self) -> impl Iterator<Item = &'static str> {
        self.0.iter().map(|(e, _)| *e)
    }

    /// All unavoidable requests of the phase.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum()
    }
}

/// One machine from creation until its bootstrap ISO is removed: a VMID, the clone and the end
/// of its task, the clone's config (disks and MACs) and one write of everything it needs (CPU,
/// memory, network, the ISO, tags), the ISO's upload, the start, one `cloud-init status` run in
/// the guest and its result, and the ISO's removal.
pub const MACHINE_UP: Floor = Floor(&[
    ("GET /cluster/nextid", 1),
    ("POST /nodes/{node}/qemu/{vmid}/clone", 1),
    ("GET /nodes/{node}/tasks/{upid}/status", 1),
    ("GET /nodes/{node}/qemu/{vmid}/config", 1),
    ("PUT /nodes/{node}/qemu/{vmid}/config", 1),
    ("POST /nodes/{node}/storage/{storage}/upload", 1),
    ("POST /nodes/{node}/qemu/{vmid}/status/start", 1),
    ("POST /nodes/{node}/qemu/{vmid}/agent/exec", 1),
    ("GET /nodes/{node}/qemu/{vmid}/agent/exec-status", 1),
    ("DELETE /nodes/{node}/storage/{storage}/content/{volume}", 1),
]);

/// One machine deleted: its config (the VM at the recorded VMID must still be ours), the stop,
/// one read that it stopped, the destroy and the end of its task.
pub const MACHINE_DOWN: Floor = Floor(&[
    ("GET /nodes/{node}/qemu/{vmid}/config", 1),
    ("POST /nodes/{node}/qemu/{vmid}/status/stop", 1),
    ("GET /cluster/resources", 1),
    ("DELETE /nodes/{node}/qemu/{vmid}", 1),
    ("GET /nodes/{node}/tasks/{upid}/status", 1),
]);

/// One standalone VM until Running with an address: as a machine up to the start (its
/// cloud-init ISO stays attached), then the guest's interfaces for the address.
pub const VM_UP: Floor = Floor(&[
    ("GET /cluster/nextid", 1),
    ("POST /nodes/{node}/qemu/{vmid}/clone", 1),
    ("GET /nodes/{node}/tasks/{upid}/status", 1),
    ("GET /nodes/{node}/qemu/{vmid}/config", 1),
    ("PUT /nodes/{node}/qemu/{vmid}/config", 1),
    ("POST /nodes/{node}/storage/{storage}/upload", 1),
    ("POST /nodes/{node}/qemu/{vmid}/status/start", 1),
    ("GET /nodes/{node}/qemu/{vmid}/agent/network-get-interfaces", 1),
]);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floors_are_the_issues() {
        // "≈ 9 are unavoidable (nextid, clone, its task, config read, one config write, upload,
        // start, agent/exec, one exec-status, ISO delete)": ten requests, the target's ≤ 10.
        assert_eq!(MACHINE_UP.total(), 10);
        assert!(MACHINE_DOWN.total() <= 6, "the deletion target is ≤ 6");
        assert_eq!(VM_UP.total(), 8);
        assert_eq!(MACHINE_UP.of("GET /cluster/resources"), 0);
        assert_eq!(MACHINE_DOWN.of("GET /cluster/resources"), 1);
    }

    #[test]
    fn floor_endpoints_are_ones_pve_sim_serves() {
        // A key pve-sim does not serve would show a floor beside a row no run can ever measure.
        for version in pve_sim::PveVersion::ALL {
            for f in [MACHINE_UP, MACHINE_DOWN, VM_UP] {
                for e in f.endpoints() {
                    assert!(
                        pve_sim::access::checks::endpoint_check(version, e).is_some(),
                        "{e} on {version:?}"
                    );
                }
            }
        }
    }
}
