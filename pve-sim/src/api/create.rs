//! `POST /nodes/{node}/qemu`: create a VM (`qmcreate` task).

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::config::normalise;
use super::specs::validate_config;
use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::{Params, value_text};
use crate::propstr;
use crate::state::{Cluster, PowerState, Vm};
use crate::tasks::{self, TaskSpec, now_epoch};
use crate::validate::{Rule, check_rule};
use crate::version::PveVersion;

/// Create-only parameters and their rules.
const CREATE_ONLY: &[(&str, Rule)] = &[
    ("start", Rule::Bool),
    ("ha-managed", Rule::Bool),
    ("pool", Rule::Str(None)),
    ("storage", Rule::StorageId),
    ("unique", Rule::Bool),
    ("live-restore", Rule::Bool),
];

/// Validator for VM create: the config keys plus create-only parameters.
pub fn validate_create(p: &mut Map<String, Value>, version: PveVersion) -> Result<(), ApiError> {
    let mut rest = p.clone();
    let mut errors = BTreeMap::new();
    for (name, rule) in CREATE_ONLY {
        if *name == "ha-managed" && !version.is_9() {
            continue;
        }
        if let Some(v) = rest.remove(*name)
            && let Err(msg) = check_rule(*rule, &v)
        {
            errors.insert((*name).to_string(), msg);
        }
    }
    for control in [
        "delete",
        "revert",
        "digest",
        "force",
        "skiplock",
        "background_delay",
    ] {
        if rest.contains_key(control) {
            errors.insert(
                control.to_string(),
                "property is not defined in schema and the schema does not allow additional properties"
                    .into(),
            );
            rest.remove(control);
        }
    }
    if let Err(e) = validate_config(&mut rest, false, version) {
        errors.extend(e.errors.unwrap_or_default());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(ApiError::params(errors))
    }
}

/// `POST /nodes/{node}/qemu`.
pub fn create(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let start = p.bool("start").unwrap_or(false);
    let ha_managed = p.bool("ha-managed").unwrap_or(false);
    let mut values = Vec::new();
    for (k, v) in &p.0 {
        if matches!(k.as_str(), "node" | "vmid") || CREATE_ONLY.iter().any(|(n, _)| n == k) {
            continue;
        }
        let text = match v {
            Value::Bool(b) => if *b { "1" } else { "0" }.to_string(),
            other => value_text(other),
        };
        values.push((k.clone(), text));
    }
    ctx.state.with(|c| {
        if let Some(existing) = c.vms.get(&vmid) {
            return Err(ApiError::server(format!(
                "unable to create VM {vmid} - VM {vmid} already exists on node '{}'",
                existing.node
            )));
        }
        let pool = p.str("pool");
        let storage = p.str("storage");
        crate::access::vmconfig::check_create(
            c,
            &ctx.user,
            vmid,
            pool.as_deref(),
            storage.as_deref(),
            (ha_managed, start),
            &values,
        )?;
        // Check values now so storage errors stay synchronous.
        let mut scratch = BTreeMap::new();
        let mut config = BTreeMap::new();
        let mut imports = Vec::new();
        for (k, v) in &values {
            if let Some(source) = super::import::check(c, &node, k, v)? {
                imports.push((k.clone(), source));
            }
            // Create validates tags but does not normalise them (only the update path does).
            let nv = if k == "tags" {
                v.clone()
            } else {
                normalise(c, &node, vmid, k, v, &scratch)?
            };
            scratch.insert(k.clone(), nv.clone());
            config.insert(k.clone(), nv);
        }
        let mut placeholder = BTreeMap::new();
        placeholder.insert("lock".to_string(), "create".to_string());
        c.vms.insert(vmid, Vm::new(vmid, &node, placeholder));
        let spec = TaskSpec {
            node: node.clone(),
            kind: "qmcreate",
            id: vmid.to_string(),
            user: ctx.user.clone(),
            latency_key: "qmcreate".into(),
            log: Vec::new(),
        };
        let n = node.clone();
        let n_rb = node.clone();
        let upid = tasks::start(
            &ctx.state,
            c,
            spec,
            Box::new(move |c: &mut Cluster| {
                let mut log = Vec::new();
                for (key, source) in &imports {
                    let value = config.get(key).cloned().unwrap_or_default();
                    match super::import::apply(c, &n, key, source, &value) {
                        Ok((value, lines)) => {
                            config.insert(key.clone(), value);
                            log.extend(lines);
                        }
                        Err(e) => {
                            // The create task removes the config it began (and the new disks).
                            c.vms.remove(&vmid);
                            return Err(format!("unable to create VM {vmid} - {e}"));
                        }
                    }
                }
                if !config.contains_key("smbios1") {
                    config.insert("smbios1".into(), format!("uuid={}", c.new_uuid()));
                }
                config.insert("vmgenid".into(), c.new_uuid());
                config.insert(
                    "meta".into(),
                    format!("creation-qemu=8.2.2,ctime={}", now_epoch()),
                );
                if !config.contains_key("boot") {
                    let order: Vec<String> = config
                        .keys()
                        .filter(|k| crate::validate::is_disk_key(k) || propstr::family(k) == Some("net"))
                        .cloned()
                        .collect();
                    if !order.is_empty() {
                        config.insert("boot".into(), format!("order={}", order.join(";")));
                    }
                }
                let vm = c
                    .vm_on_mut(&n, vmid)
                    .ok_or_else(|| format!("unable to create VM {vmid}"))?;
                vm.os_disks = crate::state::vm::hard_disk_keys(&config);
                vm.config = config;
                vm.pool = pool;
                vm.created_at = tokio::time::Instant::now();
                vm.touch();
                if ha_managed {
                    // 9.x: `ha-manager add vm:<id> --state started|stopped` after the create.
                    let state = if start { "started" } else { "stopped" };
                    log.push(format!(
                        "Add as HA resource\nAdd HA resource with request-state '{state}'"
                    ));
                    c.ha.insert(
                        vmid,
                        crate::state::HaResource {
                            sid: format!("vm:{vmid}"),
                            state: state.into(),
                            group: None,
                            max_restart: 1,
                            max_relocate: 1,
                            comment: None,
                        },
                    );
                    c.ha_generation += 1;
                }
                if start && let Some(vm) = c.vm_on_mut(&n, vmid) {
                    vm.set_power(PowerState::Running);
                }
                Ok(log)
            }),
            Some(Box::new(move |c: &mut Cluster| {
                if c.vm_on(&n_rb, vmid).is_some_and(|v| v.lock() == Some("create")) {
                    c.vms.remove(&vmid);
                }
            })),
        );
        Ok(Reply::data(json!(upid)))
    })
}
