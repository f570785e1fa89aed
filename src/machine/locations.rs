//! The ProxmoxCluster's `status.nodeLocations`: which machine lives on which Proxmox node (the
//! scheduler's round-robin input). The machine controller is the only writer of this field, so
//! its changes are serialised in-process ([`Locations`], per ProxmoxCluster) and written in
//! batches as a merge patch of the field alone, starting from the freshest copy known (the watch
//! cache or this controller's own last write, whichever is newer): no read before the write, no
//! conflict retries, and a reservation schedules from locations that include every earlier one.

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

/// The node locations of one ProxmoxCluster as this controller changed them, and how far those
/// changes are written.
#[derive(Debug, Default)]
struct Slot {
    /// Changed and not all written yet (`None`: every change is written; start from the freshest
    /// copy of the ProxmoxCluster).
    pending: Option<NodeLocations>,
    /// Changes made (a sequence number per change).
    applied: u64,
    /// Changes written.
    written: u64,
    /// A write is under way (its writer writes every change made before it started).
    writing: bool,
    /// The last write failed: the last change it covered and the error its waiters get.
    failed: Option<(u64, kube::core::Status)>,
}

/// One ProxmoxCluster's slot and the wake-up of those waiting for its writes.
#[derive(Debug, Default)]
struct Batch {
    slot: Mutex<Slot>,
    written: tokio::sync::Notify,
}

/// The node-location writer of one controller.
///
/// Changes are made in memory, one at a time, and written in batches (group commit): a change
/// made while a write is under way waits for it and is written with every other change made
/// meanwhile in the next one. A hundred machines placed at once cost a handful of writes, and a
/// placement waits for one write, not for a queue of them — each change still returns only once
/// it is written (or its write failed).
#[derive(Default)]
pub struct Locations {
    batches: Mutex<HashMap<ObjectRef<ProxmoxCluster>, Arc<Batch>>>,
    /// ProxmoxClusters as this controller last wrote them.
    pub latest: Latest<ProxmoxCluster>,
}

impl std::fmt::Debug for Locations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locations").finish_non_exhaustive()
    }
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What a waiter of a batch does next.
enum Turn {
    Done,
    Failed(Box<kube::core::Status>),
    Write(NodeLocations, u64),
    Wait,
}

impl Locations {
    fn batch_of(&self, pc: &ObjectRef<ProxmoxCluster>) -> Arc<Batch> {
        Arc::clone(locked(&self.batches).entry(pc.clone()).or_default())
    }

    /// Runs `change` on the freshest node locations of `pc` (serialised with every other change of
    /// this controller) and returns what it returned once the change is written — with the other
    /// changes made meanwhile, in one write. A change that changes nothing returns at once, unless
    /// earlier changes are not written yet (it may depend on them): it then waits for them.
    pub async fn update<T>(
        &self,
        kube: &kube::Client,
        pc: &Arc<ProxmoxCluster>,
        change: impl FnOnce(&mut NodeLocations) -> T,
    ) -> Result<T, MachineError> {
        let key = ObjectRef::from_obj(pc.as_ref());
        let batch = self.batch_of(&key);
        let (out, mine) = {
            let mut slot = locked(&batch.slot);
            // The unwritten changes, else the freshest copy known (the watch cache or this
            // controller's own last write, whichever is newer).
            let before = match &slot.pending {
                Some(p) => Some(p.clone()),
                None => {
                    let current = self.latest.pick(Arc::clone(pc));
                    current.status.as_ref().and_then(|s| s.node_locations.clone())
                }
            };
            let mut after = before.clone().unwrap_or_default();
            let out = change(&mut after);
            let changed = before.map_or(after != NodeLocations::default(), |b| b != after);
            if !changed && slot.pending.is_none() {
                return Ok(out);
            }
            if changed {
                slot.applied += 1;
                slot.pending = Some(after);
            }
            (out, slot.applied)
        };
        loop {
            let notified = batch.written.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            let turn = {
                let mut slot = locked(&batch.slot);
                if slot.written >= mine {
                    Turn::Done
                } else if let Some((_, status)) = slot.failed.as_ref().filter(|(upto, _)| *upto >= mine) {
                    Turn::Failed(Box::new(status.clone()))
                } else if slot.writing {
                    Turn::Wait
                } else {
                    slot.writing = true;
                    Turn::Write(slot.pending.clone().unwrap_or_default(), slot.applied)
                }
            };
            match turn {
                Turn::Done => return Ok(out),
                Turn::Failed(status) => return Err(write_failed(pc, kube::Error::Api(status))),
                Turn::Wait => notified.await,
                Turn::Write(locations, upto) => {
                    let result = self.write(kube, pc, &locations).await;
                    let mut slot = locked(&batch.slot);
                    slot.writing = false;
                    let outcome = match result {
                        Ok(()) => {
                            slot.written = upto;
                            slot.failed = None;
                            if slot.applied == upto {
                                slot.pending = None;
                            }
                            Ok(())
                        }
                        Err(e) => {
                            let status = match &e {
                                kube::Error::Api(s) => (**s).clone(),
                                other => kube::core::Status::failure(&other.to_string(), "WriteFailed"),
                            };
                            slot.failed = Some((upto, status));
                            Err(write_failed(pc, e))
                        }
                    };
                    drop(slot);
                    batch.written.notify_waiters();
                    outcome?;
                    // Every change up to `upto`, ours among them, is written.
                    return Ok(out);
                }
            }
        }
    }

    /// Writes `locations` as `pc`'s node locations (a ProxmoxCluster that is gone has nothing to
    /// record).
    async fn write(
        &self,
        kube: &kube::Client,
        pc: &Arc<ProxmoxCluster>,
        locations: &NodeLocations,
    ) -> Result<(), kube::Error> {
        // Serialised straight from the typed list: no JSON tree of a thousand entries per write.
        let body = LocationsPatch {
            status: LocationsStatus {
                node_locations: (locations.control_plane.is_some() || locations.workers.is_some())
                    .then_some(locations),
            },
        };
        let ns = pc.namespace().unwrap_or_default();
        let api: Api<ProxmoxCluster> = Api::namespaced(kube.clone(), &ns);
        match api
            .patch_status(&pc.name_any(), &PatchParams::default(), &Patch::Merge(&body))
            .await
        {
            Ok(written) => {
                self.latest.record(written);
                Ok(())
            }
            Err(kube::Error::Api(s)) if s.code == 404 => Ok(()),
            Err(e) => Err(e),
        }
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

fn write_failed(pc: &ProxmoxCluster, e: kube::Error) -> MachineError {
    MachineError::kube(format!(
        "updating node locations of ProxmoxCluster {}/{}",
        pc.namespace().unwrap_or_default(),
        pc.name_any()
    ))(e)
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
