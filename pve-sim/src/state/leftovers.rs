//! Inventory helpers for tests: what a provider left behind (VMs, file volumes, HA resources, tasks).

use super::SimState;

/// A file volume (ISO, container template, import file) kept by the simulator.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct VolumeRef {
    /// Node of a node-local storage; `None` for shared storage (one namespace for all nodes).
    pub node: Option<String>,
    /// Storage id.
    pub storage: String,
    /// Volume id, e.g. `local:iso/user-data-201.iso`.
    pub volid: String,
    /// Content type (`iso`, `vztmpl`, `import`).
    pub content: String,
}

/// Everything a provider may leave behind, as listed by [`SimState::leftovers`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Leftovers {
    /// VMIDs of VMs that are not templates (half-created clones with `lock: clone` included).
    pub vms: Vec<u32>,
    /// File volumes on every storage.
    pub volumes: Vec<VolumeRef>,
    /// HA resource SIDs (`vm:201`).
    pub ha_resources: Vec<String>,
    /// Number of tasks still running.
    pub running_tasks: usize,
}

impl Leftovers {
    /// True when there is no VM, volume, HA resource or running task.
    pub fn is_empty(&self) -> bool {
        self.vms.is_empty()
            && self.volumes.is_empty()
            && self.ha_resources.is_empty()
            && self.running_tasks == 0
    }
}

impl SimState {
    /// Every clone that completed since the start, in order: the new VM's VMID and name.
    pub fn clone_history(&self) -> Vec<(u32, String)> {
        self.with(|c| c.clone_history.clone())
    }

    /// VMIDs of all VMs that are not templates, ascending.
    pub fn non_template_vmids(&self) -> Vec<u32> {
        self.with(|c| {
            c.vms
                .values()
                .filter(|v| !v.is_template())
                .map(|v| v.vmid)
                .collect()
        })
    }

    /// Every file volume on every storage, sorted by node, storage and volid.
    pub fn file_volumes(&self) -> Vec<VolumeRef> {
        self.with(|c| {
            let mut out: Vec<VolumeRef> = c
                .volumes
                .iter()
                .flat_map(|((scope, storage), vols)| {
                    vols.values().map(move |v| VolumeRef {
                        node: (!scope.is_empty()).then(|| scope.clone()),
                        storage: storage.clone(),
                        volid: v.volid.clone(),
                        content: v.content.clone(),
                    })
                })
                .collect();
            out.sort();
            out
        })
    }

    /// Volids of ISO images on a storage as seen from `node`.
    pub fn iso_volume_ids(&self, node: &str, storage: &str) -> Vec<String> {
        self.with(|c| {
            c.storage_on(node, storage)
                .and_then(|s| c.volumes_of(node, s))
                .map(|m| {
                    m.values()
                        .filter(|v| v.content == "iso")
                        .map(|v| v.volid.clone())
                        .collect()
                })
                .unwrap_or_default()
        })
    }

    /// Non-template VMs, file volumes, HA resources and running tasks in one snapshot.
    pub fn leftovers(&self) -> Leftovers {
        Leftovers {
            vms: self.non_template_vmids(),
            volumes: self.file_volumes(),
            ha_resources: self.ha_resources(),
            running_tasks: self.running_tasks(),
        }
    }
}
