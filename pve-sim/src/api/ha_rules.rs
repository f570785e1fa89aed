//! `/cluster/ha/rules` (PVE 9; pve-ha-manager `PVE::API2::HA::Rules`, `PVE::HA::Rules`,
//! `Rules::NodeAffinity`, `Rules::ResourceAffinity`).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::{Ctx, HandlerResult, Reply};
use crate::error::ApiError;
use crate::params::Params;
use crate::state::ha::{RuleErrors, check_feasibility, next_ordinal};
use crate::state::{Cluster, HaRule, fnv64};

fn digest(c: &Cluster) -> String {
    format!("{:040x}", fnv64(format!("rules:{}", c.ha_generation).as_bytes()))
}

fn rule_json(c: &Cluster, id: &str, r: &HaRule, errors: Option<&BTreeMap<String, Vec<String>>>) -> Value {
    let mut v = json!({
        "rule": id,
        "type": r.kind,
        "digest": digest(c),
        "order": r.order,
        "resources": r.resources.iter().cloned().collect::<Vec<_>>().join(","),
    });
    if let Some(obj) = v.as_object_mut() {
        if r.kind == "node-affinity" {
            obj.insert("nodes".into(), json!(r.nodes_text()));
        }
        if let Some(s) = r.strict {
            obj.insert("strict".into(), json!(u8::from(s)));
        }
        if let Some(a) = &r.affinity {
            obj.insert("affinity".into(), json!(a));
        }
        if let Some(cm) = &r.comment {
            obj.insert("comment".into(), json!(cm));
        }
        if r.disable {
            obj.insert("disable".into(), json!(1));
        }
        if let Some(e) = errors {
            obj.insert("errors".into(), json!(e));
        }
    }
    v
}

/// Rules with the not yet migrated groups' rules, and their feasibility errors.
fn full(c: &Cluster) -> (BTreeMap<String, HaRule>, RuleErrors) {
    let rules = c.group_rules();
    let errors = check_feasibility(&rules, c.nodes.len());
    (rules, errors)
}

/// `GET /cluster/ha/rules[?type=..][&resource=..]`, sorted by order.
pub fn list(ctx: &Ctx, p: &Params) -> HandlerResult {
    let kind = p.str("type");
    let resource = p.str("resource");
    ctx.state.with(|c| {
        c.ha_tick();
        let (rules, errors) = full(c);
        let mut sorted: Vec<(&String, &HaRule)> = rules
            .iter()
            .filter(|(_, r)| kind.as_deref().is_none_or(|k| r.kind == k))
            .filter(|(_, r)| resource.as_deref().is_none_or(|s| r.resources.contains(s)))
            .collect();
        sorted.sort_by(|a, b| (a.1.order, a.0).cmp(&(b.1.order, b.0)));
        let items = sorted
            .into_iter()
            .map(|(id, r)| rule_json(c, id, r, errors.get(id)))
            .collect();
        Ok(Reply::data(Value::Array(items)))
    })
}

/// `GET /cluster/ha/rules/{rule}`.
pub fn get(ctx: &Ctx, p: &Params) -> HandlerResult {
    let id = p.str("rule").unwrap_or_default();
    ctx.state.with(|c| {
        c.ha_tick();
        let (rules, errors) = full(c);
        let r = rules
            .get(&id)
            .ok_or_else(|| ApiError::server(format!("no such ha rule '{id}'")))?;
        Ok(Reply::data(rule_json(c, &id, r, errors.get(&id))))
    })
}

/// The options a rule type has (`options` of its plugin): name → optional.
fn options(kind: &str) -> &'static [(&'static str, bool)] {
    if kind == "node-affinity" {
        &[
            ("resources", false),
            ("nodes", false),
            ("strict", true),
            ("disable", true),
            ("comment", true),
        ]
    } else {
        &[
            ("resources", false),
            ("affinity", false),
            ("disable", true),
            ("comment", true),
        ]
    }
}

/// `SectionConfig::check_config`: every given option must belong to the type; on create the
/// required ones must be there.
fn check_config(kind: &str, p: &Params, create: bool) -> Result<(), String> {
    let opts = options(kind);
    for key in
        p.0.keys()
            .filter(|k| !matches!(k.as_str(), "rule" | "digest" | "delete"))
    {
        if key == "type" && p.str("type").as_deref() == Some(kind) {
            continue;
        }
        if key == "disable" && !p.bool("disable").unwrap_or(false) {
            continue;
        }
        if !opts.iter().any(|(o, _)| o == key) {
            return Err(format!("unexpected property '{key}'"));
        }
    }
    if create && let Some((missing, _)) = opts.iter().find(|(o, optional)| !optional && !p.has(o)) {
        return Err(format!("missing value for required option '{missing}'"));
    }
    Ok(())
}

fn list_items(text: &str) -> impl Iterator<Item = &str> {
    text.split([',', ';', ' ', '\0']).filter(|x| !x.is_empty())
}

/// `resources` must name configured HA resources (`cannot use unmanaged resource(s) ...`).
fn check_resources(c: &Cluster, text: &str) -> Result<BTreeSet<String>, String> {
    let set: BTreeSet<String> = list_items(text).map(str::to_owned).collect();
    if set.is_empty() {
        return Err("no resources were specified".into());
    }
    let unmanaged: Vec<&str> = set
        .iter()
        .filter(|s| !c.ha.values().any(|h| &h.sid == *s))
        .map(String::as_str)
        .collect();
    if unmanaged.is_empty() {
        Ok(set)
    } else {
        Err(format!(
            "cannot use unmanaged resource(s) {}.",
            unmanaged.join(", ")
        ))
    }
}

/// `nodes` must be cluster members (`cannot use non-existent node(s) ...`).
fn check_nodes(c: &Cluster, text: &str) -> Result<BTreeMap<String, u32>, String> {
    let nodes: BTreeMap<String, u32> = list_items(text)
        .map(|n| match n.split_once(':') {
            Some((n, p)) => (n.to_owned(), p.parse().unwrap_or(0)),
            None => (n.to_owned(), 0),
        })
        .collect();
    if nodes.is_empty() {
        return Err("no nodes were specified".into());
    }
    let missing: Vec<&str> = nodes
        .keys()
        .filter(|n| !c.nodes.contains_key(*n))
        .map(String::as_str)
        .collect();
    if missing.is_empty() {
        Ok(nodes)
    } else {
        Err(format!("cannot use non-existent node(s) {}.", missing.join(", ")))
    }
}

/// `assert_feasibility`: a `400 Rule '<id>' is invalid.` exception whose text the lock wrapper
/// then turns into a plain 500 message.
fn assert_feasible(c: &Cluster, rules: &BTreeMap<String, HaRule>, id: &str) -> Result<(), String> {
    let errors = check_feasibility(rules, c.nodes.len());
    let Some(e) = errors.get(id) else { return Ok(()) };
    let mut msg = format!("400 Rule '{id}' is invalid.\n");
    for (opt, msgs) in e {
        msg.push_str(&format!("{opt}: {}\n", msgs.join(", ")));
    }
    Err(msg)
}

/// `POST /cluster/ha/rules`.
pub fn create(ctx: &Ctx, p: &Params) -> HandlerResult {
    let id = p.str("rule").unwrap_or_default();
    let kind = p.str("type").unwrap_or_default();
    ctx.state.with(|c| {
        c.ha_tick();
        if !c.ha_groups_migrated() {
            return Err(ApiError::server(
                "cannot create ha rule: ha groups have not been migrated yet",
            ));
        }
        check_config(&kind, p, true).map_err(ApiError::server)?;
        let fail = |m: String| ApiError::server(format!("create ha rule failed: {m}"));
        if c.ha_rules.contains_key(&id) {
            return Err(fail(format!("HA rule '{id}' already defined")));
        }
        let resources = check_resources(c, &p.str("resources").unwrap_or_default()).map_err(fail)?;
        let nodes = match p.str("nodes") {
            Some(n) => check_nodes(c, &n).map_err(fail)?,
            None => BTreeMap::new(),
        };
        let mut rules = c.ha_rules.clone();
        let order = next_ordinal(&rules);
        rules.insert(
            id.clone(),
            HaRule {
                kind: kind.clone(),
                resources,
                nodes,
                strict: p.bool("strict"),
                affinity: p.str("affinity"),
                comment: p.str("comment"),
                disable: p.bool("disable").unwrap_or(false),
                order,
            },
        );
        assert_feasible(c, &rules, &id).map_err(fail)?;
        c.ha_rules = rules;
        c.ha_generation += 1;
        Ok(Reply::data(Value::Null))
    })
}

/// `PUT /cluster/ha/rules/{rule}`.
pub fn update(ctx: &Ctx, p: &Params) -> HandlerResult {
    let id = p.str("rule").unwrap_or_default();
    let deletes = p.list("delete");
    ctx.state.with(|c| {
        c.ha_tick();
        if !c.ha_groups_migrated() {
            return Err(ApiError::server(
                "cannot update ha rule: ha groups have not been migrated yet",
            ));
        }
        let fail = |m: String| ApiError::server(format!("update HA rules failed: {m}"));
        if let Some(d) = p.str("digest")
            && d != digest(c)
        {
            return Err(fail(
                "detected modified configuration - file changed by other user? Try again.".into(),
            ));
        }
        let mut rule = c
            .ha_rules
            .get(&id)
            .cloned()
            .ok_or_else(|| fail(format!("HA rule '{id}' does not exist")))?;
        check_config(&rule.kind, p, false).map_err(fail)?;
        if let Some(r) = p.str("resources") {
            rule.resources = check_resources(c, &r).map_err(fail)?;
        }
        if let Some(n) = p.str("nodes") {
            rule.nodes = check_nodes(c, &n).map_err(fail)?;
        }
        let opts = options(&rule.kind);
        for d in &deletes {
            let Some((_, optional)) = opts.iter().find(|(o, _)| o == d) else {
                return Err(fail(format!("no such option '{d}'")));
            };
            if !optional {
                return Err(fail(format!("unable to delete required option '{d}'")));
            }
            if p.has(d) {
                return Err(fail(format!(
                    "cannot set and delete property '{d}' at the same time!"
                )));
            }
            match d.as_str() {
                "strict" => rule.strict = None,
                "comment" => rule.comment = None,
                _ => rule.disable = false,
            }
        }
        if let Some(s) = p.bool("strict") {
            rule.strict = Some(s);
        }
        if let Some(a) = p.str("affinity") {
            rule.affinity = Some(a);
        }
        if let Some(cm) = p.str("comment") {
            rule.comment = Some(cm);
        }
        if p.bool("disable") == Some(true) {
            rule.disable = true;
        }
        let mut rules = c.ha_rules.clone();
        rules.insert(id.clone(), rule);
        assert_feasible(c, &rules, &id).map_err(fail)?;
        c.ha_rules = rules;
        c.ha_generation += 1;
        Ok(Reply::data(Value::Null))
    })
}

/// `DELETE /cluster/ha/rules/{rule}` (deleting a rule that does not exist is no error).
pub fn delete(ctx: &Ctx, p: &Params) -> HandlerResult {
    let id = p.str("rule").unwrap_or_default();
    ctx.state.with(|c| {
        c.ha_tick();
        c.ha_rules.remove(&id);
        c.ha_generation += 1;
        Ok(Reply::data(Value::Null))
    })
}
