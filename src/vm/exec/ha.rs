//! Applying and removing the VM's HA resource (see [`crate::vm::ha`]), on both HA APIs:
//!
//! * Proxmox VE 8: the resource carries its HA group. PVE accepts an unknown group when a
//!   resource is created (it only reports it in the resource list), so a group is checked
//!   (`GET /cluster/ha/groups/{group}`) before it is first applied.
//! * Proxmox VE 9: HA groups are replaced by node-affinity rules (PVE migrates each group `g` that
//!   has resources to the rule `ha-group-g`; resources lose their `group`). The resource is created
//!   without a group, and the owner's group `g` names the node-affinity rule the VM joins:
//!   `ha-group-g` (the migrated group), else a rule called `g`; when neither exists, the rule `g`
//!   is created, non-strict, with the nodes the VM may be placed on (or the node it runs on). A
//!   VM whose group changes leaves the old rule (a rule left without resources is deleted, as PVE
//!   does itself when it purges a resource); removing the resource (`DELETE …/resources/{sid}`,
//!   which purges it from every rule) takes it out of all of them.
//!
//! The version is read once per Proxmox cluster (`GET /version`, [`crate::proxmox::view::ProxmoxView::pve_major`]).

use super::{Env, Next, StepResult};
use crate::proxmox::Error;
use crate::proxmox::types::{HaRule, HaRuleCreate, HaRuleUpdate};
use crate::vm::adapter::Adapter;
use crate::vm::decide::Reason;
use crate::vm::error::VmError;
use crate::vm::ha::{HaResource, request};
use crate::vm::spec::VmRecord;

/// The rule type a group becomes on PVE 9.
const NODE_AFFINITY: &str = "node-affinity";

/// The node-affinity rule that stands for HA group `group` on PVE 9: the migrated group's
/// (`ha-group-<group>`), else one named like the group.
pub fn rule_for_group<'a>(rules: &'a [HaRule], group: &str) -> Option<&'a HaRule> {
    let migrated = format!("ha-group-{group}");
    let node_affinity = |r: &&HaRule| r.kind == NODE_AFFINITY;
    rules
        .iter()
        .filter(node_affinity)
        .find(|r| r.rule == migrated)
        .or_else(|| rules.iter().filter(node_affinity).find(|r| r.rule == group))
}

fn failed<A: Adapter>(env: &Env<'_, A>, message: String) -> StepResult {
    StepResult::failed(Reason::HaFailed, message, Some(env.settings.retry_delay)).warned()
}

/// A failed HA call: retried soon when Proxmox may answer better later, else reported.
fn refused<A: Adapter>(env: &Env<'_, A>, what: String, e: Error) -> Result<StepResult, A::Error> {
    if e.is_retryable() {
        Err(VmError::proxmox(what)(e).into())
    } else {
        Ok(failed(env, format!("{what}: {e}")))
    }
}

/// `Step::ApplyHa`.
pub async fn apply<A: Adapter>(
    env: &Env<'_, A>,
    record: &mut VmRecord,
    wanted: &HaResource,
) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    let what = format!("registering VM {} as HA resource {}", vm.vmid, wanted.sid);
    let rules_api = env.view.pve_major().await? >= 9;
    let old_group = record.ha.as_ref().and_then(|h| h.group.clone());
    let new_group = wanted.group.as_ref().filter(|g| old_group.as_ref() != Some(*g));
    // PVE 8 takes an unknown group on create: it is checked before it is first applied.
    if !rules_api && let Some(g) = new_group {
        match env.view.client().ha_group(g).await {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {
                return Ok(failed(env, format!("{what}: HA group '{g}' does not exist")));
            }
            Err(e) => return refused(env, format!("{what}: reading HA group '{g}'"), e),
        }
    }
    let exists = vm.ha_managed || record.ha.is_some();
    let resource = HaResource {
        group: wanted.group.clone().filter(|_| !rules_api),
        ..wanted.clone()
    };
    let create = request(&resource, true);
    let mut update = request(&resource, false);
    if rules_api {
        // No `group` on PVE 9: nothing to remove either.
        update.delete = None;
    }
    if let Err(e) = env
        .view
        .put_ha(vm.vmid, &wanted.sid, &create, &update, exists)
        .await
    {
        return refused(env, what, e);
    }
    if rules_api && (new_group.is_some() || (old_group.is_some() && wanted.group.is_none())) {
        let placement = match &env.spec.placement.allowed_nodes {
            Ok(Some(nodes)) if !nodes.is_empty() => nodes.clone(),
            _ => vec![vm.node.clone()],
        };
        if let Err(e) = follow_group(
            env,
            &wanted.sid,
            old_group.as_deref(),
            wanted.group.as_deref(),
            &placement,
        )
        .await
        {
            return refused(
                env,
                format!("{what}: applying its HA group as a node-affinity rule"),
                e,
            );
        }
    }
    record.ha = Some(wanted.clone());
    Ok(StepResult::next(Next::Now))
}

/// PVE 9: moves resource `sid` from the rule of group `old` to the rule of group `new` (created
/// with `nodes` when it does not exist).
async fn follow_group<A: Adapter>(
    env: &Env<'_, A>,
    sid: &str,
    old: Option<&str>,
    new: Option<&str>,
    nodes: &[String],
) -> Result<(), Error> {
    let view = env.view;
    let rules = view.client().ha_rules(NODE_AFFINITY).await?;
    if let Some(r) = old
        .filter(|o| Some(*o) != new)
        .and_then(|g| rule_for_group(&rules, g))
    {
        let rest: Vec<String> = r.resource_ids().into_iter().filter(|id| id != sid).collect();
        if rest.is_empty() {
            view.delete_ha_rule(&r.rule).await?;
        } else if rest.len() != r.resource_ids().len() {
            view.update_ha_rule(&r.rule, &rule_update(r, rest)).await?;
        }
    }
    let Some(g) = new else { return Ok(()) };
    match rule_for_group(&rules, g) {
        Some(r) if r.resource_ids().iter().any(|id| id == sid) => Ok(()),
        Some(r) => {
            let mut ids = r.resource_ids();
            ids.push(sid.to_owned());
            view.update_ha_rule(&r.rule, &rule_update(r, ids)).await
        }
        None => {
            let rule = HaRuleCreate {
                rule: g.to_owned(),
                kind: NODE_AFFINITY.to_owned(),
                resources: sid.to_owned(),
                nodes: nodes.join(","),
                strict: false,
                comment: Some(format!(
                    "HA group '{g}' of capmox-rs machines (Proxmox VE 9 has no HA groups)"
                )),
            };
            view.create_ha_rule(&rule).await
        }
    }
}

/// The update that gives rule `r` the resources `ids` (with the digest it was read with).
fn rule_update(r: &HaRule, ids: Vec<String>) -> HaRuleUpdate {
    HaRuleUpdate {
        kind: NODE_AFFINITY.to_owned(),
        resources: Some(ids.join(",")),
        digest: r.digest.clone(),
    }
}

/// `Step::RemoveHa` (HA is no longer wanted for a VM that is a resource).
pub async fn remove<A: Adapter>(
    env: &Env<'_, A>,
    record: &mut VmRecord,
    applied: &HaResource,
) -> Result<StepResult, A::Error> {
    let vm = env.vm()?;
    match env.view.delete_ha(vm.vmid, &applied.sid).await {
        Ok(()) => {
            record.ha = None;
            Ok(StepResult::next(Next::Now))
        }
        Err(e) => refused(env, format!("removing HA resource {}", applied.sid), e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule(id: &str, kind: &str, resources: &str) -> HaRule {
        HaRule {
            rule: id.into(),
            kind: kind.into(),
            resources: resources.into(),
            digest: None,
        }
    }

    #[test]
    fn a_group_is_its_migrated_rule_or_one_named_like_it() {
        let rules = [
            rule("g1", NODE_AFFINITY, "vm:1"),
            rule("ha-group-g1", NODE_AFFINITY, "vm:2,vm:3"),
            rule("g2", "resource-affinity", "vm:4"),
            rule("g3", NODE_AFFINITY, ""),
        ];
        assert_eq!(
            rule_for_group(&rules, "g1").map(|r| r.rule.as_str()),
            Some("ha-group-g1")
        );
        assert_eq!(rule_for_group(&rules, "g2"), None, "not a node-affinity rule");
        assert_eq!(rule_for_group(&rules, "g3").map(|r| r.rule.as_str()), Some("g3"));
        assert_eq!(rules[1].resource_ids(), ["vm:2", "vm:3"]);
        assert!(rules[3].resource_ids().is_empty());
    }
}
