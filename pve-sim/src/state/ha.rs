//! The HA manager's configuration: resources, groups and (PVE 9) rules, the migration of groups
//! to node-affinity rules and the rules' feasibility checks (pve-ha-manager `PVE::HA::Config`,
//! `PVE::HA::Groups`, `PVE::HA::Rules*`, `PVE::HA::Manager::try_persistent_group_migration`).

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use tokio::time::Instant;

use super::Cluster;

/// An HA resource.
#[derive(Debug, Clone)]
pub struct HaResource {
    /// `vm:100`.
    pub sid: String,
    /// Requested state.
    pub state: String,
    /// Group.
    pub group: Option<String>,
    /// Max restarts.
    pub max_restart: i64,
    /// Max relocations.
    pub max_relocate: i64,
    /// Comment.
    pub comment: Option<String>,
}

/// An HA group (`/etc/pve/ha/groups.cfg`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct HaGroup {
    /// Member nodes with their priority (`None`: no priority given).
    pub nodes: BTreeMap<String, Option<u32>>,
    /// `restricted` as written (absent when never set).
    pub restricted: Option<bool>,
    /// `nofailback` as written.
    pub nofailback: Option<bool>,
    /// Comment.
    pub comment: Option<String>,
}

impl HaGroup {
    /// `nodes` as PVE prints it (`node[:prio]`, comma separated, in our sorted order).
    pub fn nodes_text(&self) -> String {
        self.nodes
            .iter()
            .map(|(n, p)| match p {
                Some(p) => format!("{n}:{p}"),
                None => n.clone(),
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// An HA rule (`/etc/pve/ha/rules.cfg`, PVE 9).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HaRule {
    /// `node-affinity` or `resource-affinity`.
    pub kind: String,
    /// Resource ids (`vm:100`).
    pub resources: BTreeSet<String>,
    /// Node-affinity: node → priority (0 when not given).
    pub nodes: BTreeMap<String, u32>,
    /// Node-affinity: `strict` as written.
    pub strict: Option<bool>,
    /// Resource-affinity: `positive` / `negative`.
    pub affinity: Option<String>,
    /// Comment.
    pub comment: Option<String>,
    /// Disabled (only stored when set).
    pub disable: bool,
    /// Position in the section config.
    pub order: u64,
}

impl HaRule {
    /// `nodes` as `NodeAffinity::encode_plugin_value` prints it: sorted, `node:prio` when the
    /// priority is not 0.
    pub fn nodes_text(&self) -> String {
        self.nodes
            .iter()
            .map(|(n, p)| if *p == 0 { n.clone() } else { format!("{n}:{p}") })
            .collect::<Vec<_>>()
            .join(",")
    }
}

/// `PVE::HA::Rules::get_next_ordinal`: one more than the *smallest* order in use (sic).
pub fn next_ordinal(rules: &BTreeMap<String, HaRule>) -> u64 {
    rules.values().map(|r| r.order).min().unwrap_or(0) + 1
}

/// Rule id → property → error messages (`check_feasibility`).
pub type RuleErrors = BTreeMap<String, BTreeMap<String, Vec<String>>>;

fn push(errors: &mut RuleErrors, rule: &str, msg: String) {
    errors
        .entry(rule.to_owned())
        .or_default()
        .entry("resources".to_owned())
        .or_default()
        .push(msg);
}

/// Positive rules merged into connected resource sets (`find_disjoint_rules_resource_sets`).
fn positive_sets(rules: &BTreeMap<&String, &HaRule>) -> Vec<(Vec<String>, BTreeSet<String>)> {
    let mut sets: Vec<(Vec<String>, BTreeSet<String>)> = Vec::new();
    for (id, r) in rules
        .iter()
        .filter(|(_, r)| r.affinity.as_deref() == Some("positive"))
    {
        let mut merged = (vec![(*id).clone()], r.resources.clone());
        sets.retain(|(ids, res)| {
            if res.is_disjoint(&merged.1) {
                true
            } else {
                merged.0.extend(ids.iter().cloned());
                merged.1.extend(res.iter().cloned());
                false
            }
        });
        sets.push(merged);
    }
    sets
}

/// The feasibility errors of a rule set on a cluster of `node_count` nodes.
pub fn check_feasibility(rules: &BTreeMap<String, HaRule>, node_count: usize) -> RuleErrors {
    let mut errors = RuleErrors::new();
    let enabled: BTreeMap<&String, &HaRule> = rules.iter().filter(|(_, r)| !r.disable).collect();
    let node_rules: BTreeMap<&String, &HaRule> = enabled
        .iter()
        .filter(|(_, r)| r.kind == "node-affinity")
        .map(|(k, v)| (*k, *v))
        .collect();
    let res_rules: BTreeMap<&String, &HaRule> = enabled
        .iter()
        .filter(|(_, r)| r.kind == "resource-affinity")
        .map(|(k, v)| (*k, *v))
        .collect();
    // A resource may be in one node-affinity rule only.
    let mut by_sid: BTreeMap<&String, Vec<&String>> = BTreeMap::new();
    for (id, r) in &node_rules {
        for sid in &r.resources {
            by_sid.entry(sid).or_default().push(id);
        }
    }
    for (sid, ids) in &by_sid {
        if ids.len() > 1 {
            for id in ids {
                push(
                    &mut errors,
                    id,
                    format!("resource '{sid}' is already used in another node affinity rule"),
                );
            }
        }
    }
    for (id, r) in &res_rules {
        if r.resources.len() < 2 {
            push(
                &mut errors,
                id,
                "rule is ineffective as there are less than two resources".into(),
            );
        }
    }
    for (id, r) in &res_rules {
        if r.affinity.as_deref() == Some("negative") && r.resources.len() > node_count {
            push(
                &mut errors,
                id,
                "rule defines more resources than available nodes".into(),
            );
        }
    }
    let positives = positive_sets(&res_rules);
    for (ids, set) in &positives {
        for (nid, neg) in res_rules
            .iter()
            .filter(|(_, r)| r.affinity.as_deref() == Some("negative"))
        {
            if set.intersection(&neg.resources).count() >= 2 {
                push(
                    &mut errors,
                    nid,
                    "rule shares two or more resources with a positive resource affinity rule".into(),
                );
                for pid in ids {
                    push(
                        &mut errors,
                        pid,
                        "rule shares two or more resources with a negative resource affinity rule".into(),
                    );
                }
            }
        }
    }
    for (rid, r) in &res_rules {
        let paired: Vec<&&String> = node_rules
            .iter()
            .filter(|(_, n)| !n.resources.is_disjoint(&r.resources))
            .map(|(k, _)| k)
            .collect();
        let multi = paired.iter().any(|k| {
            let prios: BTreeSet<u32> = node_rules[**k].nodes.values().copied().collect();
            prios.len() > 1
        });
        if multi {
            push(
                &mut errors,
                rid,
                "resources are in node affinity rules with multiple priorities".into(),
            );
            for k in paired {
                push(&mut errors, k, "resources are in a resource affinity rule and cannot be in a node affinity rule with multiple priorities".into());
            }
        }
    }
    for (ids, set) in &positives {
        let paired: Vec<&&String> = node_rules
            .iter()
            .filter(|(_, n)| !n.resources.is_disjoint(set))
            .map(|(k, _)| k)
            .collect();
        if paired.len() > 1 {
            for pid in ids {
                push(
                    &mut errors,
                    pid,
                    "resources are in multiple node affinity rules".into(),
                );
            }
            for k in paired {
                push(&mut errors, k, "at least one resource is in a positive resource affinity rule and there are other resources in at least one other node affinity rule already".into());
            }
        }
    }
    errors
}

/// The HA manager retries a failed group migration after 6 rounds (~60 s).
const MIGRATION_RETRY: Duration = Duration::from_secs(60);

impl Cluster {
    /// PVE 9: whether HA groups count as migrated to rules (`have_groups_been_migrated`: there
    /// are none left). Always false on 8.4.
    pub fn ha_groups_migrated(&self) -> bool {
        self.version.is_9() && self.ha_groups.is_empty()
    }

    /// The rules `migrate_groups_to_rules` makes of the groups that have resources.
    pub fn group_rules(&self) -> BTreeMap<String, HaRule> {
        let mut rules = self.ha_rules.clone();
        let mut by_group: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for h in self.ha.values() {
            if let Some(g) = &h.group {
                by_group.entry(g.clone()).or_default().insert(h.sid.clone());
            }
        }
        for (g, resources) in by_group {
            let Some(group) = self.ha_groups.get(&g) else {
                continue;
            };
            let order = next_ordinal(&rules);
            rules.insert(
                format!("ha-group-{g}"),
                HaRule {
                    kind: "node-affinity".into(),
                    resources,
                    nodes: group
                        .nodes
                        .iter()
                        .map(|(n, p)| (n.clone(), p.unwrap_or(0)))
                        .collect(),
                    strict: group.restricted,
                    affinity: None,
                    comment: Some(
                        group
                            .comment
                            .clone()
                            .unwrap_or_else(|| format!("Generated from HA group '{g}'.")),
                    ),
                    disable: false,
                    order,
                },
            );
        }
        rules
    }

    /// PVE 9: runs the CRM's group migration when it is due (called before every HA request):
    /// groups with resources become `ha-group-<group>` node-affinity rules, the resources lose
    /// `group` (and get `failback 0` when the group had `nofailback`), and the group config is
    /// deleted. It waits while a node is offline, then retries every 60 s.
    pub fn ha_tick(&mut self) {
        if !self.version.is_9() || self.ha_groups.is_empty() {
            self.ha_group_migration_due = None;
            return;
        }
        let now = Instant::now();
        let due = *self
            .ha_group_migration_due
            .get_or_insert_with(|| now + self.latency.ha_group_migration());
        if now < due {
            return;
        }
        if self.nodes.values().any(|n| !n.online) {
            self.ha_group_migration_due = Some(now + MIGRATION_RETRY);
            return;
        }
        self.migrate_ha_groups();
    }

    /// Removes the HA resource of `vmid` (`delete_service_from_config`); with `purge` (9.x) it
    /// also leaves every rule, and rules left without resources are deleted.
    pub fn remove_ha_resource(&mut self, vmid: u32, purge: bool) -> Option<HaResource> {
        let h = self.ha.remove(&vmid)?;
        self.ha_failback.remove(&vmid);
        if purge {
            for r in self.ha_rules.values_mut() {
                r.resources.remove(&h.sid);
            }
            self.ha_rules.retain(|_, r| !r.resources.is_empty());
        }
        self.ha_generation += 1;
        Some(h)
    }

    /// PVE 9: migrates HA groups to rules now (what the CRM does, see [`Cluster::ha_tick`]).
    pub fn migrate_ha_groups(&mut self) {
        if !self.version.is_9() {
            return;
        }
        self.ha_rules = self.group_rules();
        let groups = std::mem::take(&mut self.ha_groups);
        for (vmid, h) in self.ha.iter_mut() {
            let Some(g) = h.group.take() else { continue };
            if groups.get(&g).is_some_and(|g| g.nofailback == Some(true)) {
                self.ha_failback.insert(*vmid, false);
            }
        }
        self.ha_generation += 1;
        self.ha_group_migration_due = None;
    }
}
