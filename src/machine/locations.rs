//! The ProxmoxCluster's `status.nodeLocations`: which machine lives on which Proxmox node (the
//! scheduler's round-robin input). Several machine reconciles update the list at once, so every
//! change is a read-modify-replace guarded by `resourceVersion`, retried on conflicts.

use capmox_api::v1alpha2::{NodeLocation, NodeLocations, ProxmoxCluster};
use k8s_openapi::api::core::v1::LocalObjectReference;
use kube::ResourceExt;
use kube::api::{Api, PostParams};

use super::error::MachineError;

/// Attempts before a conflicting update is reported as an error.
const ATTEMPTS: usize = 8;

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

/// Writes `pc`'s status guarded by its `resourceVersion`; `false` on a conflict (it changed meanwhile).
async fn replace(api: &Api<ProxmoxCluster>, pc: &ProxmoxCluster) -> Result<bool, MachineError> {
    match api
        .replace_status(&pc.name_any(), &PostParams::default(), pc)
        .await
    {
        Ok(_) => Ok(true),
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(MachineError::kube(format!(
            "updating node locations of ProxmoxCluster {}/{}",
            pc.namespace().unwrap_or_default(),
            pc.name_any()
        ))(e)),
    }
}

/// Applies `change` to the current node locations; `false` from `change` means nothing changed.
async fn update(
    kube: &kube::Client,
    pc: &ProxmoxCluster,
    mut change: impl FnMut(&mut NodeLocations) -> bool,
) -> Result<(), MachineError> {
    let ns = pc.namespace().unwrap_or_default();
    let name = pc.name_any();
    let api: Api<ProxmoxCluster> = Api::namespaced(kube.clone(), &ns);
    for _ in 0..ATTEMPTS {
        let Some(mut current) = api
            .get_opt(&name)
            .await
            .map_err(MachineError::kube(format!("getting ProxmoxCluster {ns}/{name}")))?
        else {
            return Ok(());
        };
        let status = current.status.get_or_insert_with(Default::default);
        let locations = status.node_locations.get_or_insert_with(Default::default);
        if !change(locations) {
            return Ok(());
        }
        if locations.control_plane.is_none() && locations.workers.is_none() {
            status.node_locations = None;
        }
        if replace(&api, &current).await? {
            return Ok(());
        }
    }
    Err(MachineError::Invalid(format!(
        "node locations of ProxmoxCluster {ns}/{name} kept changing; retrying"
    )))
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
fn place(
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

/// Records that `machine` lives on `node` (replacing an older entry).
pub async fn record(
    kube: &kube::Client,
    pc: &ProxmoxCluster,
    machine: &str,
    node: &str,
    zone: Option<String>,
    control_plane: bool,
) -> Result<(), MachineError> {
    update(kube, pc, |locations| {
        place(locations, machine, node, zone.as_ref(), control_plane)
    })
    .await
}

/// Records that `machine` lives on `node` only if the ProxmoxCluster is still exactly `pc` (same
/// `resourceVersion`), i.e. the node locations the scheduler chose `node` from are still current.
/// `false` when another machine was placed meanwhile: the caller schedules again with fresh data,
/// so concurrent reservations cannot all pick the same node.
pub async fn record_if_unchanged(
    kube: &kube::Client,
    pc: &ProxmoxCluster,
    machine: &str,
    node: &str,
    zone: Option<String>,
    control_plane: bool,
) -> Result<bool, MachineError> {
    let mut current = pc.clone();
    let status = current.status.get_or_insert_with(Default::default);
    let locations = status.node_locations.get_or_insert_with(Default::default);
    if !place(locations, machine, node, zone.as_ref(), control_plane) {
        return Ok(true);
    }
    let api: Api<ProxmoxCluster> = Api::namespaced(kube.clone(), &pc.namespace().unwrap_or_default());
    replace(&api, &current).await
}

/// Forgets where `machine` lived.
pub async fn forget(kube: &kube::Client, pc: &ProxmoxCluster, machine: &str) -> Result<(), MachineError> {
    update(kube, pc, |locations| {
        let present = [&locations.control_plane, &locations.workers]
            .into_iter()
            .flatten()
            .any(|l| l.iter().any(|e| e.machine.name == machine));
        if present {
            remove(locations, machine);
        }
        present
    })
    .await
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
    }
}
