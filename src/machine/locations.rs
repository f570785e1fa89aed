//! The ProxmoxCluster's `status.nodeLocations`: which machine lives on which Proxmox node (the
//! scheduler's round-robin input). The machine controller is the only writer of this field, so
//! its updates are serialised in-process ([`Locations`], one lock per ProxmoxCluster) and written
//! as a merge patch of the field alone, starting from the freshest copy known (the watch cache or
//! this controller's own last write, whichever is newer): no read before the write, no conflict
//! retries, and a reservation schedules from locations that include every earlier one.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use capmox_api::v1alpha2::{NodeLocation, NodeLocations, ProxmoxCluster};
use k8s_openapi::api::core::v1::LocalObjectReference;
use kube::ResourceExt;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::reflector::ObjectRef;

use super::error::MachineError;
use super::latest::Latest;

fn remove(locations: &mut NodeLocations, machine: &str) {
    for list in [&mut locations.control_plane, &mut locations.workers] {
        if let Some(l) = list.as_mut() {
            l.retain(|e| e.machine.name != machine);
            if l.is_empty() {
                *list = None;
            }
        }
    }
}

/// The control-plane or the worker list.
fn list_of(locations: &mut NodeLocations, control_plane: bool) -> &mut Option<Vec<NodeLocation>> {
    if control_plane {
        &mut locations.control_plane
    } else {
        &mut locations.workers
    }
}

/// Puts `machine` on `node` in `locations` (replacing an older entry); `false` when it is there already.
pub fn place(
    locations: &mut NodeLocations,
    machine: &str,
    node: &str,
    zone: Option<&String>,
    control_plane: bool,
) -> bool {
    let already = list_of(locations, control_plane).as_ref().is_some_and(|l| {
        l.iter()
            .any(|e| e.machine.name == machine && e.node == node && e.zone.as_ref() == zone)
    });
    if already {
        return false;
    }
    remove(locations, machine);
    list_of(locations, control_plane)
        .get_or_insert_with(Vec::new)
        .push(NodeLocation {
            machine: LocalObjectReference {
                name: machine.to_owned(),
            },
            node: node.to_owned(),
            zone: zone.cloned(),
        });
    true
}

/// The control-plane or worker placements recorded in `ProxmoxCluster.status.nodeLocations`.
pub fn placements_for(locations: Option<&NodeLocations>, control_plane: bool) -> &[NodeLocation] {
    locations
        .and_then(|l| {
            if control_plane {
                l.control_plane.as_deref()
            } else {
                l.workers.as_deref()
            }
        })
        .unwrap_or_default()
}

/// Removes `machine` from `locations`; `false` when it was not there.
pub fn forget_in(locations: &mut NodeLocations, machine: &str) -> bool {
    let present = [&locations.control_plane, &locations.workers]
        .into_iter()
        .flatten()
        .any(|l| l.iter().any(|e| e.machine.name == machine));
    if present {
        remove(locations, machine);
    }
    present
}

/// The merge patch of `status.nodeLocations` alone (`null` removes the field).
#[derive(Debug, serde::Serialize)]
struct LocationsPatch<'a> {
    status: LocationsStatus<'a>,
}

#[derive(Debug, serde::Serialize)]
#[serde(rename_all = "camelCase")]
struct LocationsStatus<'a> {
    node_locations: Option<&'a NodeLocations>,
}

/// The node-location writer of one controller.
#[derive(Default)]
pub struct Locations {
    locks: Mutex<HashMap<ObjectRef<ProxmoxCluster>, Arc<tokio::sync::Mutex<()>>>>,
    /// ProxmoxClusters as this controller last wrote them.
    pub latest: Latest<ProxmoxCluster>,
}

impl std::fmt::Debug for Locations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locations").finish_non_exhaustive()
    }
}

impl Locations {
    fn lock_of(&self, pc: &ObjectRef<ProxmoxCluster>) -> Arc<tokio::sync::Mutex<()>> {
        Arc::clone(
            self.locks
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .entry(pc.clone())
                .or_default(),
        )
    }

    /// Runs `change` on the freshest node locations of `pc` (serialised with every other change of
    /// this controller) and writes them when `change` changed them; returns what `change` returned.
    pub async fn update<T>(
        &self,
        kube: &kube::Client,
        pc: &Arc<ProxmoxCluster>,
        change: impl FnOnce(&mut NodeLocations) -> T,
    ) -> Result<T, MachineError> {
        let key = ObjectRef::from_obj(pc.as_ref());
        let lock = self.lock_of(&key);
        let _guard = lock.lock().await;
        let current = self.latest.pick(Arc::clone(pc));
        let before = current.status.as_ref().and_then(|s| s.node_locations.as_ref());
        // One copy to change; the original is compared by reference.
        let mut after = before.cloned().unwrap_or_default();
        let out = change(&mut after);
        if before.map_or(after == NodeLocations::default(), |b| *b == after) {
            return Ok(out);
        }
        // Serialised straight from the typed list: no JSON tree of a thousand entries per write.
        let body = LocationsPatch {
            status: LocationsStatus {
                node_locations: (after.control_plane.is_some() || after.workers.is_some()).then_some(&after),
            },
        };
        let ns = pc.namespace().unwrap_or_default();
        let api: Api<ProxmoxCluster> = Api::namespaced(kube.clone(), &ns);
        match api
            .patch_status(&pc.name_any(), &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(written) => self.latest.record(written),
            // The ProxmoxCluster is gone: nothing to record.
            Err(kube::Error::Api(s)) if s.code == 404 => {}
            Err(e) => {
                return Err(MachineError::kube(format!(
                    "updating node locations of ProxmoxCluster {ns}/{}",
                    pc.name_any()
                ))(e));
            }
        }
        Ok(out)
    }

    /// Records that `machine` lives on `node` (replacing an older entry).
    pub async fn record(
        &self,
        kube: &kube::Client,
        pc: &Arc<ProxmoxCluster>,
        machine: &str,
        node: &str,
        zone: Option<String>,
        control_plane: bool,
    ) -> Result<(), MachineError> {
        self.update(kube, pc, |l| {
            place(l, machine, node, zone.as_ref(), control_plane);
        })
        .await
    }

    /// Forgets where `machine` lived.
    pub async fn forget(
        &self,
        kube: &kube::Client,
        pc: &Arc<ProxmoxCluster>,
        machine: &str,
    ) -> Result<(), MachineError> {
        self.update(kube, pc, |l| {
            forget_in(l, machine);
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remove_drops_empty_lists() {
        let entry = |m: &str| NodeLocation {
            machine: LocalObjectReference { name: m.into() },
            node: "pve1".into(),
            zone: None,
        };
        let mut l = NodeLocations {
            control_plane: Some(vec![entry("a")]),
            workers: Some(vec![entry("b"), entry("c")]),
        };
        remove(&mut l, "a");
        remove(&mut l, "b");
        assert_eq!(l.control_plane, None);
        assert_eq!(l.workers.as_ref().map(Vec::len), Some(1));
        assert!(place(&mut l, "d", "pve2", None, true));
        assert!(!place(&mut l, "d", "pve2", None, true));
        assert!(forget_in(&mut l, "d"));
        assert!(!forget_in(&mut l, "d"));
    }

    #[test]
    fn placements_for_picks_the_list() {
        let loc = |m: &str, n: &str| NodeLocation {
            machine: LocalObjectReference { name: m.into() },
            node: n.into(),
            zone: None,
        };
        let locations = NodeLocations {
            control_plane: Some(vec![loc("cp", "a")]),
            workers: Some(vec![loc("w1", "b"), loc("w2", "b")]),
        };
        assert_eq!(placements_for(Some(&locations), true), &[loc("cp", "a")]);
        assert_eq!(placements_for(Some(&locations), false).len(), 2);
        assert!(placements_for(None, true).is_empty());
        assert!(placements_for(Some(&NodeLocations::default()), false).is_empty());
    }
}
