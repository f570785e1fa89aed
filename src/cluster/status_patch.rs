//! The ProxmoxCluster status write: a merge patch of the fields this controller changed.
//!
//! A reconcile works on a copy from the watch cache, which can be older than the object (the
//! cache has not yet seen the last write). Sending every owned field would put that old copy's
//! values back, and a reconcile that fails early on such a copy would wipe `inClusterZoneRef` and
//! `initialization` (machines then stop at "zone default not found", and CAPI sees the
//! infrastructure go from provisioned to not). So only the fields the reconcile changed relative
//! to its copy are sent (CAPI's patch helper does the same); a field it cleared is sent as `null`.

use capmox_api::v1alpha2::ProxmoxClusterStatus;
use serde_json::{Map, Value};

/// Status fields written by the ProxmoxCluster controller (`nodeLocations` belongs to the machine
/// controller).
pub const OWNED_STATUS_FIELDS: &[&str] = &[
    "conditions",
    "initialization",
    "inClusterIPPoolRef",
    "inClusterZoneRef",
    "failureDomains",
    "nodeInventory",
];

/// The merge patch (`{"status": {...}}`) that turns `before` (the copy the reconcile started
/// from) into `after` for the owned fields that differ; `None` when none does.
pub fn status_patch(before: &ProxmoxClusterStatus, after: &ProxmoxClusterStatus) -> Option<Value> {
    let owned = |s: &ProxmoxClusterStatus| {
        let v = serde_json::to_value(s).unwrap_or(Value::Null);
        let fields: Map<String, Value> = OWNED_STATUS_FIELDS
            .iter()
            .filter_map(|f| v.get(*f).map(|x| ((*f).to_owned(), x.clone())))
            .collect();
        Value::Object(fields)
    };
    let patch = crate::merge_patch::diff(&owned(before), &owned(after));
    let changed = patch.as_object().is_some_and(|p| !p.is_empty());
    changed.then(|| serde_json::json!({ "status": patch }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn status(v: Value) -> ProxmoxClusterStatus {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn only_changed_fields_are_sent() {
        let before = status(json!({
            "initialization": {"provisioned": true},
            "inClusterZoneRef": [{"inClusterIPPoolRefV4": {"name": "c-v4-icip"}}],
            "nodeInventory": [{"node": "pve1", "online": true}],
            "nodeLocations": {"workers": [{"machine": {"name": "m"}, "node": "pve1"}]},
        }));
        let mut after = before.clone();
        assert_eq!(
            status_patch(&before, &after),
            None,
            "nothing changed, nothing sent"
        );
        after.node_inventory = None;
        after.node_locations = None;
        assert_eq!(
            status_patch(&before, &after),
            Some(json!({"status": {"nodeInventory": null}})),
            "a cleared field is sent as null; nodeLocations is not ours"
        );
    }

    #[test]
    fn a_failure_on_an_old_copy_sends_nothing_it_did_not_compute() {
        // The copy predates the first status write; the reconcile failed before it set anything
        // but the conditions. The zone refs and `initialization` on the server must survive.
        let before = ProxmoxClusterStatus::default();
        let after = status(json!({"conditions": [{
            "type": "ProxmoxAvailable", "status": "False", "reason": "ProxmoxUnreachable",
            "message": "down", "lastTransitionTime": "2026-01-01T00:00:00Z",
        }]}));
        let patch = status_patch(&before, &after).unwrap();
        let sent: Vec<&String> = patch["status"].as_object().unwrap().keys().collect();
        assert_eq!(sent, ["conditions"]);
    }
}
