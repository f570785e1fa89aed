//! Node scheduling: on which allowed Proxmox node a new VM is placed.
//!
//! Follows capmox's scheduler (reservable memory = `memoryAdjustment` percent of the node's memory minus
//! the `maxmem` of its guests; round-robin over the cluster's `status.nodeLocations`), with its known
//! problems fixed:
//! * templates do not count against a node's memory (capmox #36);
//! * offline and unknown nodes are never chosen;
//! * `memoryAdjustment: 0` really disables the memory constraint;
//! * the arithmetic cannot overflow (percentages are applied in 128-bit and saturated).
//!
//! The exact rule of [`schedule`]: among the allowed nodes that are online, keep those whose reservable
//! memory is at least the requested memory (all of them when the constraint is disabled); of these, pick
//! the node with the fewest existing placements of the same kind (control plane or worker), ties broken
//! by the lexicographically smallest node name. If no node has enough memory, fail with
//! [`SchedulingError::InsufficientMemory`] naming the node with the most reservable memory (ties: smallest
//! name). The answer depends only on the sets passed in, never on their order.

use std::collections::{BTreeMap, BTreeSet};

use crate::proxmox::types::ClusterResource;

/// Bytes per MiB.
const MIB: u64 = 1024 * 1024;

/// The memory adjustment (percent) when none is given.
pub const DEFAULT_MEMORY_ADJUSTMENT: i64 = 100;

/// Where one VM of the group being scheduled lives (round-robin input): its owner's name and node.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placed<'a> {
    /// The name of the VM's owner.
    pub owner: &'a str,
    /// The node.
    pub node: &'a str,
}

/// Why no node could be chosen.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchedulingError {
    /// Not even the best allowed node can hold the requested memory (message as in capmox).
    #[error("cannot reserve {requested}B of memory on node {node}: {available}B available memory left")]
    InsufficientMemory {
        /// Requested memory in bytes.
        requested: u64,
        /// The allowed node with the most reservable memory.
        node: String,
        /// Its reservable memory in bytes.
        available: u64,
    },
    /// None of the allowed nodes is known to Proxmox and online.
    #[error("none of the allowed nodes [{}] is online", .allowed.join(", "))]
    NoOnlineNode {
        /// The allowed nodes, sorted and deduplicated.
        allowed: Vec<String>,
    },
    /// The allowed node list is empty (the caller should not schedule then).
    #[error("no allowed nodes to schedule on")]
    NoAllowedNodes,
    /// `memoryAdjustment` is negative (the CRD rules normally prevent this).
    #[error("memoryAdjustment {0} is negative")]
    InvalidMemoryAdjustment(i64),
}

/// What the scheduler knows about one Proxmox node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeInfo {
    /// Node name.
    pub name: String,
    /// Whether the node is online (`/cluster/status` or `/cluster/resources?type=node`).
    pub online: bool,
    /// `memory.total` of `GET /nodes/{node}/status`, in bytes.
    pub memory_total: u64,
}

impl NodeInfo {
    /// Node facts from the `node` entries of `GET /cluster/resources` (`maxmem` is the node's total
    /// memory, `status` is `online` for an online node); other entries are ignored. This saves the
    /// per-node `GET /nodes/{node}/status` calls.
    pub fn from_cluster_resources(resources: &[ClusterResource]) -> Vec<Self> {
        resources
            .iter()
            .filter(|r| r.resource_type == "node")
            .filter_map(|r| {
                let name = r.node.as_deref().map(str::trim).filter(|n| !n.is_empty())?;
                Some(Self {
                    name: name.to_owned(),
                    online: r.status.as_deref() == Some("online"),
                    memory_total: r.maxmem.unwrap_or(0),
                })
            })
            .collect()
    }
}

/// Everything [`schedule`] decides on.
#[derive(Debug, Clone, Copy)]
pub struct SchedulingRequest<'a> {
    /// Nodes the machine may be placed on (see [`effective_allowed_nodes`]).
    pub allowed_nodes: &'a [String],
    /// `schedulerHints.memoryAdjustment` of the `ProxmoxCluster` (`None` = 100 percent, 0 = no constraint).
    pub memory_adjustment: Option<i64>,
    /// Memory the new VM needs, in bytes (see [`requested_memory_bytes`]).
    pub requested_memory: u64,
    /// Node facts; nodes missing here are treated as offline.
    pub nodes: &'a [NodeInfo],
    /// `GET /cluster/resources?type=vm`: the guests whose `maxmem` is committed on their node.
    pub guests: &'a [ClusterResource],
    /// Existing placements of the same group (e.g. the control plane or the workers of a cluster).
    pub placements: &'a [Placed<'a>],
    /// The owner being scheduled; its own placement entry, if any, is not counted.
    pub owner_name: Option<&'a str>,
}

/// The scheduler's choice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Placement {
    /// The chosen node (the clone `target`).
    pub node: String,
    /// Its reservable memory in bytes before this VM, `None` when the memory constraint is disabled.
    pub available_memory: Option<u64>,
    /// How many machines of the same kind were already placed on it.
    pub existing_placements: usize,
}

/// The allowed nodes: the machine's list when non-empty, else the cluster's list when non-empty, else
/// `None` (no scheduling; the VM stays on its source node).
pub fn effective_allowed_nodes<'a>(
    machine: Option<&'a [String]>,
    cluster: Option<&'a [String]>,
) -> Option<&'a [String]> {
    machine
        .filter(|m| !m.is_empty())
        .or(cluster.filter(|c| !c.is_empty()))
}

/// Converts `memoryAdjustment` to a percentage: `None` means 100, negative values are rejected.
pub fn memory_adjustment_percent(adjustment: Option<i64>) -> Result<u64, SchedulingError> {
    let value = adjustment.unwrap_or(DEFAULT_MEMORY_ADJUSTMENT);
    u64::try_from(value).map_err(|_| SchedulingError::InvalidMemoryAdjustment(value))
}

/// `memoryMiB` in bytes; 0 when unset or negative (the VM then keeps the template's memory, which the
/// caller may pass instead if it knows it).
pub fn requested_memory_bytes(memory_mib: Option<i32>) -> u64 {
    memory_mib
        .and_then(|m| u64::try_from(m).ok())
        .map_or(0, |m| m * MIB)
}

/// Sum of `maxmem` of every qemu VM and lxc container on `node` that is not a template (saturating).
pub fn committed_memory(node: &str, guests: &[ClusterResource]) -> u64 {
    guests
        .iter()
        .filter(|g| !g.template)
        .filter(|g| g.resource_type == "qemu" || g.resource_type == "lxc")
        .filter(|g| g.node.as_deref() == Some(node))
        .filter_map(|g| g.maxmem)
        .fold(0u64, u64::saturating_add)
}

/// Memory that can still be reserved on a node: `adjustment_percent` percent of `total` minus
/// `committed`, floored at 0. An adjustment of 0 disables the constraint and returns `total` (as capmox).
///
/// The percentage is applied as `total * adj / 100` in 128-bit (capmox computes `total / 100 * adj`,
/// which differs by less than `adj` bytes); the result saturates at `u64::MAX`.
pub fn reservable_memory(total: u64, adjustment_percent: u64, committed: u64) -> u64 {
    if adjustment_percent == 0 {
        return total;
    }
    // Cannot overflow: both factors are below 2^64, so the product is below 2^128.
    let scaled = u128::from(total) * u128::from(adjustment_percent) / 100;
    u64::try_from(scaled.saturating_sub(u128::from(committed))).unwrap_or(u64::MAX)
}

/// How many placements each node has, not counting `exclude_owner`'s own entry.
pub fn placement_counts<'a>(
    placements: &[Placed<'a>],
    exclude_owner: Option<&str>,
) -> BTreeMap<&'a str, usize> {
    let mut counts = BTreeMap::new();
    for p in placements {
        if exclude_owner.is_some_and(|m| m == p.owner) {
            continue;
        }
        *counts.entry(p.node).or_insert(0) += 1;
    }
    counts
}

/// Chooses the node for a new VM (rule in the module documentation).
pub fn schedule(request: &SchedulingRequest<'_>) -> Result<Placement, SchedulingError> {
    let allowed: BTreeSet<&str> = request
        .allowed_nodes
        .iter()
        .map(|n| n.trim())
        .filter(|n| !n.is_empty())
        .collect();
    if allowed.is_empty() {
        return Err(SchedulingError::NoAllowedNodes);
    }
    let adjustment = memory_adjustment_percent(request.memory_adjustment)?;
    // A node listed twice is merged conservatively (online only if every entry says so, the smaller
    // memory total), so the order of `nodes` never matters.
    let mut facts: BTreeMap<&str, (bool, u64)> = BTreeMap::new();
    for n in request.nodes {
        facts
            .entry(n.name.as_str())
            .and_modify(|(online, total)| {
                *online &= n.online;
                *total = (*total).min(n.memory_total);
            })
            .or_insert((n.online, n.memory_total));
    }
    let eligible: Vec<(&str, u64)> = allowed
        .iter()
        .filter_map(|name| match facts.get(name) {
            Some((true, total)) => Some((*name, *total)),
            _ => None,
        })
        .collect();
    if eligible.is_empty() {
        return Err(SchedulingError::NoOnlineNode {
            allowed: allowed.into_iter().map(str::to_owned).collect(),
        });
    }
    let counts = placement_counts(request.placements, request.owner_name);
    let count_of = |node: &str| counts.get(node).copied().unwrap_or(0);

    if adjustment == 0 {
        // Memory constraint disabled: pure round-robin. `eligible` is sorted by name.
        return eligible
            .iter()
            .min_by_key(|(name, _)| (count_of(name), *name))
            .map(|(name, _)| Placement {
                node: (*name).to_owned(),
                available_memory: None,
                existing_placements: count_of(name),
            })
            .ok_or(SchedulingError::NoAllowedNodes);
    }

    let with_memory: Vec<(&str, u64)> = eligible
        .iter()
        .map(|(name, total)| {
            let available = reservable_memory(*total, adjustment, committed_memory(name, request.guests));
            (*name, available)
        })
        .collect();
    let fitting = with_memory
        .iter()
        .filter(|(_, available)| *available >= request.requested_memory)
        .min_by_key(|(name, _)| (count_of(name), *name));
    if let Some((name, available)) = fitting {
        return Ok(Placement {
            node: (*name).to_owned(),
            available_memory: Some(*available),
            existing_placements: count_of(name),
        });
    }
    // Nothing fits: report the node with the most memory (ties: smallest name, hence `Reverse`).
    let (node, available) = with_memory
        .iter()
        .max_by_key(|(name, available)| (*available, std::cmp::Reverse(*name)))
        .map(|(name, available)| ((*name).to_owned(), *available))
        .ok_or(SchedulingError::NoAllowedNodes)?;
    Err(SchedulingError::InsufficientMemory {
        requested: request.requested_memory,
        node,
        available,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const GIB: u64 = 1024 * MIB;

    fn node(name: &str, online: bool, gib: u64) -> NodeInfo {
        NodeInfo {
            name: name.into(),
            online,
            memory_total: gib * GIB,
        }
    }

    fn guest(kind: &str, node: &str, vmid: u32, template: bool, maxmem: u64) -> ClusterResource {
        serde_json::from_value(serde_json::json!({
            "id": format!("{kind}/{vmid}"), "type": kind, "vmid": vmid, "node": node,
            "template": u8::from(template), "maxmem": maxmem,
        }))
        .unwrap()
    }

    fn loc<'a>(owner: &'a str, node: &'a str) -> Placed<'a> {
        Placed { owner, node }
    }

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| (*s).to_owned()).collect()
    }

    fn request<'a>(
        allowed: &'a [String],
        nodes: &'a [NodeInfo],
        guests: &'a [ClusterResource],
        placements: &'a [Placed<'a>],
        requested: u64,
    ) -> SchedulingRequest<'a> {
        SchedulingRequest {
            allowed_nodes: allowed,
            memory_adjustment: None,
            requested_memory: requested,
            nodes,
            guests,
            placements,
            owner_name: None,
        }
    }

    #[test]
    fn machine_allowed_nodes_override_cluster() {
        let m = names(&["a"]);
        let c = names(&["b", "c"]);
        assert_eq!(effective_allowed_nodes(Some(&m), Some(&c)), Some(&m[..]));
        assert_eq!(effective_allowed_nodes(Some(&[]), Some(&c)), Some(&c[..]));
        assert_eq!(effective_allowed_nodes(None, Some(&c)), Some(&c[..]));
        assert_eq!(effective_allowed_nodes(None, Some(&[])), None);
        assert_eq!(effective_allowed_nodes(None, None), None);
    }

    #[test]
    fn memory_adjustment_defaults_to_100() {
        assert_eq!(memory_adjustment_percent(None), Ok(100));
        assert_eq!(memory_adjustment_percent(Some(0)), Ok(0));
        assert_eq!(memory_adjustment_percent(Some(300)), Ok(300));
        assert_eq!(
            memory_adjustment_percent(Some(-1)),
            Err(SchedulingError::InvalidMemoryAdjustment(-1))
        );
    }

    #[test]
    fn requested_memory_is_mib_in_bytes() {
        assert_eq!(requested_memory_bytes(None), 0);
        assert_eq!(requested_memory_bytes(Some(-8)), 0);
        assert_eq!(requested_memory_bytes(Some(2048)), 2 * GIB);
        assert_eq!(
            requested_memory_bytes(Some(i32::MAX)),
            u64::try_from(i32::MAX).unwrap() * MIB
        );
    }

    #[test]
    fn reservable_memory_math() {
        assert_eq!(reservable_memory(100 * GIB, 100, 30 * GIB), 70 * GIB);
        assert_eq!(reservable_memory(100 * GIB, 95, 0), 95 * GIB);
        assert_eq!(reservable_memory(100 * GIB, 300, 50 * GIB), 250 * GIB);
        assert_eq!(reservable_memory(10 * GIB, 100, 30 * GIB), 0);
        assert_eq!(reservable_memory(10 * GIB, 0, 30 * GIB), 10 * GIB);
        // No overflow on big hosts or absurd adjustments (capmox #71).
        assert_eq!(reservable_memory(u64::MAX, 100, 0), u64::MAX);
        assert_eq!(reservable_memory(u64::MAX, u64::MAX, 1), u64::MAX);
        assert_eq!(reservable_memory(u64::MAX, 100, 1), u64::MAX - 1);
        assert_eq!(reservable_memory(4 * 1024 * GIB, 200, GIB), 8 * 1024 * GIB - GIB);
    }

    #[test]
    fn committed_memory_ignores_templates_and_other_nodes() {
        let guests = [
            guest("qemu", "a", 100, false, 4 * GIB),
            guest("lxc", "a", 101, false, GIB),
            guest("qemu", "a", 102, true, 32 * GIB),
            guest("qemu", "b", 103, false, 8 * GIB),
            guest("storage", "a", 0, false, 64 * GIB),
        ];
        assert_eq!(committed_memory("a", &guests), 5 * GIB);
        assert_eq!(committed_memory("b", &guests), 8 * GIB);
        assert_eq!(committed_memory("c", &guests), 0);
        let huge = [
            guest("qemu", "a", 100, false, u64::MAX),
            guest("qemu", "a", 101, false, u64::MAX),
        ];
        assert_eq!(committed_memory("a", &huge), u64::MAX);
    }

    #[test]
    fn node_info_from_cluster_resources() {
        let resources: Vec<ClusterResource> = serde_json::from_value(serde_json::json!([
            {"id": "node/pve1", "type": "node", "node": "pve1", "status": "online", "maxmem": 8 * GIB},
            {"id": "node/pve2", "type": "node", "node": "pve2", "status": "offline"},
            {"id": "node/pve3", "type": "node", "node": "pve3", "status": "unknown", "maxmem": GIB},
            {"id": "qemu/100", "type": "qemu", "vmid": 100, "node": "pve1", "maxmem": GIB},
            {"id": "node/x", "type": "node"}
        ]))
        .unwrap();
        assert_eq!(
            NodeInfo::from_cluster_resources(&resources),
            vec![
                node("pve1", true, 8),
                node("pve2", false, 0),
                node("pve3", false, 1)
            ]
        );
    }

    #[test]
    fn templates_do_not_block_scheduling() {
        // capmox #36: a node full of templates looked full.
        let allowed = names(&["a"]);
        let nodes = [node("a", true, 16)];
        let guests = [guest("qemu", "a", 100, true, 16 * GIB)];
        let got = schedule(&request(&allowed, &nodes, &guests, &[], 8 * GIB)).unwrap();
        assert_eq!(got.node, "a");
        assert_eq!(got.available_memory, Some(16 * GIB));
    }

    #[test]
    fn round_robin_by_placement_count_then_name() {
        let allowed = names(&["c", "a", "b"]);
        let nodes = [node("a", true, 64), node("b", true, 64), node("c", true, 64)];
        let placements = [loc("m1", "a"), loc("m2", "b")];
        let got = schedule(&request(&allowed, &nodes, &[], &placements, GIB)).unwrap();
        assert_eq!(got.node, "c");
        assert_eq!(got.existing_placements, 0);
        let got = schedule(&request(&allowed, &nodes, &[], &[], GIB)).unwrap();
        assert_eq!(got.node, "a");
    }

    #[test]
    fn own_placement_is_not_counted() {
        let allowed = names(&["a", "b"]);
        let nodes = [node("a", true, 64), node("b", true, 64)];
        let placements = [loc("me", "a"), loc("x", "a"), loc("y", "b")];
        let mut req = request(&allowed, &nodes, &[], &placements, GIB);
        let got = schedule(&req).unwrap();
        assert_eq!((got.node.as_str(), got.existing_placements), ("b", 1));
        req.owner_name = Some("me");
        let got = schedule(&req).unwrap();
        assert_eq!((got.node.as_str(), got.existing_placements), ("a", 1));
    }

    #[test]
    fn nodes_without_enough_memory_are_skipped() {
        let allowed = names(&["a", "b"]);
        let nodes = [node("a", true, 8), node("b", true, 64)];
        let guests = [guest("qemu", "a", 100, false, 6 * GIB)];
        let got = schedule(&request(&allowed, &nodes, &guests, &[loc("x", "b")], 4 * GIB)).unwrap();
        assert_eq!(got.node, "b");
        assert_eq!(got.existing_placements, 1);
        assert_eq!(got.available_memory, Some(64 * GIB));
        // Exactly the available amount fits.
        let got = schedule(&request(&allowed, &nodes, &guests, &[], 2 * GIB)).unwrap();
        assert_eq!(got.node, "a");
    }

    #[test]
    fn insufficient_memory_reports_best_node_with_capmox_message() {
        let allowed = names(&["a", "b", "c"]);
        let nodes = [node("a", true, 8), node("b", true, 16), node("c", true, 16)];
        let guests = [guest("qemu", "c", 100, false, GIB)];
        let err = schedule(&request(&allowed, &nodes, &guests, &[], 32 * GIB)).unwrap_err();
        assert_eq!(
            err,
            SchedulingError::InsufficientMemory {
                requested: 32 * GIB,
                node: "b".into(),
                available: 16 * GIB,
            }
        );
        assert_eq!(
            err.to_string(),
            "cannot reserve 34359738368B of memory on node b: 17179869184B available memory left"
        );
    }

    #[test]
    fn adjustment_zero_disables_memory_constraint() {
        let allowed = names(&["a", "b"]);
        let nodes = [node("a", true, 1), node("b", true, 1)];
        let guests = [guest("qemu", "a", 100, false, 64 * GIB)];
        let placements = [loc("x", "b")];
        let mut req = request(&allowed, &nodes, &guests, &placements, 512 * GIB);
        req.memory_adjustment = Some(0);
        let got = schedule(&req).unwrap();
        assert_eq!(got.node, "a");
        assert_eq!(got.available_memory, None);
    }

    #[test]
    fn overcommit_adjustment() {
        let allowed = names(&["a"]);
        let nodes = [node("a", true, 10)];
        let guests = [guest("qemu", "a", 100, false, 20 * GIB)];
        let mut req = request(&allowed, &nodes, &guests, &[], 10 * GIB);
        assert!(matches!(
            schedule(&req),
            Err(SchedulingError::InsufficientMemory { available: 0, .. })
        ));
        req.memory_adjustment = Some(300);
        assert_eq!(schedule(&req).unwrap().available_memory, Some(10 * GIB));
    }

    #[test]
    fn offline_and_unknown_nodes_are_excluded() {
        let allowed = names(&["a", "b", "ghost"]);
        let nodes = [node("a", false, 64), node("b", true, 8)];
        let got = schedule(&request(&allowed, &nodes, &[], &[loc("x", "b")], GIB)).unwrap();
        assert_eq!(got.node, "b");
        let only_offline = names(&["a", "ghost"]);
        let err = schedule(&request(&only_offline, &nodes, &[], &[], GIB)).unwrap_err();
        assert_eq!(
            err,
            SchedulingError::NoOnlineNode {
                allowed: names(&["a", "ghost"])
            }
        );
        assert_eq!(err.to_string(), "none of the allowed nodes [a, ghost] is online");
    }

    #[test]
    fn empty_allowed_list_and_negative_adjustment_are_errors() {
        let nodes = [node("a", true, 8)];
        assert_eq!(
            schedule(&request(&[], &nodes, &[], &[], 0)),
            Err(SchedulingError::NoAllowedNodes)
        );
        let allowed = names(&["a"]);
        let mut req = request(&allowed, &nodes, &[], &[], 0);
        req.memory_adjustment = Some(-5);
        assert_eq!(schedule(&req), Err(SchedulingError::InvalidMemoryAdjustment(-5)));
    }

    const NODE_NAMES: [&str; 4] = ["n1", "n2", "n3", "n4"];

    fn arb_nodes() -> impl Strategy<Value = Vec<NodeInfo>> {
        prop::collection::vec(
            (
                prop::sample::select(NODE_NAMES.to_vec()),
                prop::bool::weighted(0.8),
                0u64..64,
            )
                .prop_map(|(n, online, gib)| node(n, online, gib)),
            0..6,
        )
    }

    fn arb_guests() -> impl Strategy<Value = Vec<ClusterResource>> {
        prop::collection::vec(
            (prop::sample::select(NODE_NAMES.to_vec()), any::<bool>(), 0u64..16)
                .prop_map(|(n, template, gib)| guest("qemu", n, 100, template, gib * GIB)),
            0..10,
        )
    }

    fn arb_placements() -> impl Strategy<Value = Vec<Placed<'static>>> {
        prop::collection::vec(
            prop::sample::select(NODE_NAMES.to_vec()).prop_map(|n| loc("m", n)),
            0..10,
        )
    }

    proptest! {
        #[test]
        fn reservable_memory_matches_exact_model(
            total in any::<u64>(),
            adj in 0u64..100_000,
            committed in any::<u64>(),
        ) {
            let got = reservable_memory(total, adj, committed);
            if adj == 0 {
                prop_assert_eq!(got, total);
            } else {
                let scaled = u128::from(total) * u128::from(adj) / 100;
                let expected = scaled.saturating_sub(u128::from(committed)).min(u128::from(u64::MAX));
                prop_assert_eq!(u128::from(got), expected);
            }
        }

        #[test]
        fn result_is_independent_of_input_order(
            allowed in prop::sample::subsequence(NODE_NAMES.to_vec(), 1..=4),
            nodes in arb_nodes(),
            guests in arb_guests(),
            placements in arb_placements(),
            adjustment in prop::option::of(0i64..300),
            requested_gib in 0u64..40,
        ) {
            let allowed = names(&allowed);
            let mut req = request(&allowed, &nodes, &guests, &placements, requested_gib * GIB);
            req.memory_adjustment = adjustment;
            let expected = schedule(&req);
            let mut allowed_r = allowed.clone();
            allowed_r.reverse();
            let mut nodes_r = nodes.clone();
            nodes_r.reverse();
            let mut guests_r = guests.clone();
            guests_r.reverse();
            let mut placements_r = placements.clone();
            placements_r.reverse();
            let mut req_r = request(&allowed_r, &nodes_r, &guests_r, &placements_r, requested_gib * GIB);
            req_r.memory_adjustment = adjustment;
            prop_assert_eq!(schedule(&req_r), expected);
        }

        #[test]
        fn chosen_node_is_valid_and_least_loaded(
            allowed in prop::sample::subsequence(NODE_NAMES.to_vec(), 1..=4),
            nodes in arb_nodes(),
            guests in arb_guests(),
            placements in arb_placements(),
            adjustment in prop::option::of(1i64..300),
            requested_gib in 0u64..40,
        ) {
            let allowed = names(&allowed);
            let requested = requested_gib * GIB;
            let mut req = request(&allowed, &nodes, &guests, &placements, requested);
            req.memory_adjustment = adjustment;
            let adj = memory_adjustment_percent(adjustment).unwrap();
            // Independent model of a single node's availability (node listed once or more).
            let available = |name: &str| -> Option<u64> {
                let entries: Vec<&NodeInfo> = nodes.iter().filter(|n| n.name == name).collect();
                if entries.is_empty() || entries.iter().any(|n| !n.online) {
                    return None;
                }
                let total = entries.iter().map(|n| n.memory_total).min().unwrap();
                Some(reservable_memory(total, adj, committed_memory(name, &guests)))
            };
            let count = |name: &str| placements.iter().filter(|p| p.node == name).count();
            let fitting: Vec<&String> = allowed
                .iter()
                .filter(|n| available(n).is_some_and(|a| a >= requested))
                .collect();
            match schedule(&req) {
                Ok(p) => {
                    prop_assert!(allowed.contains(&p.node));
                    prop_assert_eq!(p.available_memory, available(&p.node));
                    prop_assert!(p.available_memory.unwrap() >= requested);
                    prop_assert_eq!(p.existing_placements, count(&p.node));
                    for other in &fitting {
                        prop_assert!(
                            (count(&p.node), p.node.as_str()) <= (count(other), other.as_str())
                        );
                    }
                }
                Err(SchedulingError::InsufficientMemory { node, available: best, .. }) => {
                    prop_assert!(fitting.is_empty());
                    prop_assert_eq!(Some(best), available(&node));
                    for other in &allowed {
                        prop_assert!(available(other).is_none_or(|a| a <= best));
                    }
                }
                Err(SchedulingError::NoOnlineNode { .. }) => {
                    prop_assert!(allowed.iter().all(|n| available(n).is_none()));
                }
                Err(e) => prop_assert!(false, "unexpected error {e}"),
            }
        }

        #[test]
        fn repeated_scheduling_spreads_evenly(
            allowed in prop::sample::subsequence(NODE_NAMES.to_vec(), 1..=4),
            machines in 1usize..20,
        ) {
            let allowed = names(&allowed);
            let nodes: Vec<NodeInfo> = NODE_NAMES.iter().map(|n| node(n, true, 1024)).collect();
            let mut chosen: Vec<String> = Vec::new();
            for _ in 0..machines {
                let placements: Vec<Placed<'_>> = chosen.iter().map(|n| loc("m", n)).collect();
                let p = schedule(&request(&allowed, &nodes, &[], &placements, GIB)).unwrap();
                chosen.push(p.node);
            }
            let placements: Vec<Placed<'_>> = chosen.iter().map(|n| loc("m", n)).collect();
            let counts = placement_counts(&placements, None);
            let max = allowed.iter().map(|n| counts.get(n.as_str()).copied().unwrap_or(0)).max().unwrap();
            let min = allowed.iter().map(|n| counts.get(n.as_str()).copied().unwrap_or(0)).min().unwrap();
            prop_assert!(max - min <= 1, "uneven spread {counts:?}");
        }
    }
}
