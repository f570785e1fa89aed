//! `status/current` and the power actions, with PVE's sync-vs-task failure rules.

use serde_json::json;

use super::config::{conf_missing, find_missing};
use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::Params;
use crate::state::{Cluster, PowerState};
use crate::tasks::{self, TaskRun, TaskSpec};

/// `GET .../status/current`.
pub fn current(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    ctx.state.with(|c| {
        let vm = c.vm_on(&node, vmid).ok_or_else(|| conf_missing(&node, vmid))?;
        Ok(Reply::data(vm.status_json(c.ha.get(&vmid), c.version)))
    })
}

fn spawn(ctx: &Ctx, c: &mut Cluster, node: &str, kind: &'static str, vmid: u32, run: TaskRun) -> String {
    spawn_timed(ctx, c, node, (kind, kind.to_string()), vmid, run)
}

/// The latency key of a shutdown that waits out its timeout: `qmshutdown-timeout:<seconds>`.
pub const TIMEOUT_KEY: &str = "qmshutdown-timeout:";

fn spawn_timed(
    ctx: &Ctx,
    c: &mut Cluster,
    node: &str,
    (kind, latency_key): (&'static str, String),
    vmid: u32,
    run: TaskRun,
) -> String {
    let spec = TaskSpec {
        node: node.to_string(),
        kind,
        id: vmid.to_string(),
        user: ctx.user.clone(),
        latency_key,
        log: Vec::new(),
    };
    tasks::start(&ctx.state, c, spec, run, None)
}

fn check_skiplock(ctx: &Ctx, p: &Params) -> Result<bool, ApiError> {
    if p.has("skiplock") && ctx.user != "root@pam" {
        return Err(ApiError::param("skiplock", "Only root may use this option."));
    }
    Ok(p.bool("skiplock").unwrap_or(false))
}

/// The first `netN` (by index) whose bridge is not among the node's `bridges` (none when the
/// node lists no bridges: any is accepted).
fn missing_bridge(
    config: &std::collections::BTreeMap<String, String>,
    bridges: &[String],
) -> Option<(String, String)> {
    if bridges.is_empty() {
        return None;
    }
    let mut nets: Vec<(u32, &String, &String)> = config
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("net")?.parse().ok()?, k, v)))
        .collect();
    nets.sort();
    nets.into_iter().find_map(|(_, k, v)| {
        let bridge = crate::propstr::to_map(v, Some("model")).get("bridge").cloned()?;
        (!bridges.contains(&bridge)).then(|| (k.clone(), bridge))
    })
}

/// `POST .../status/start`: every failure is reported inside the task.
pub fn start(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let skiplock = check_skiplock(ctx, p)?;
    ctx.state.with(|c| {
        let ha = c.ha.contains_key(&vmid);
        let kind = if ha { "hastart" } else { "qmstart" };
        let n = node.clone();
        let upid = spawn(
            ctx,
            c,
            &node,
            kind,
            vmid,
            Box::new(move |c: &mut Cluster| {
                if let Some(h) = c.ha.get_mut(&vmid) {
                    h.state = "started".into();
                }
                let vm = c
                    .vm_on_mut(&n, vmid)
                    .ok_or_else(|| conf_missing(&n, vmid).message)?;
                if !skiplock && vm.lock() != Some("suspended") {
                    vm.check_lock()?;
                }
                if vm.is_template() {
                    return Err("you can't start a vm if it's a template".into());
                }
                if vm.is_running() {
                    return Err(format!("VM {vmid} already running"));
                }
                if vm.lock() == Some("suspended") {
                    vm.config.remove("lock");
                }
                vm.apply_pending();
                if let Some(e) = super::hotplug::start_refusal(&vm.config, vm.memory_mib()) {
                    // Refused while the command line is built: no QEMU was started.
                    return Err(e);
                }
                let wanted = crate::devices::mappings_in(&vm.config);
                if let Some(e) = crate::devices::missing_on_node(&c.pci_mappings, &wanted, &n) {
                    return Err(e);
                }
                let bridges = c.nodes.get(&n).map(|node| node.bridges.clone()).unwrap_or_default();
                let vm = c
                    .vm_on_mut(&n, vmid)
                    .ok_or_else(|| conf_missing(&n, vmid).message)?;
                if let Some((net, bridge)) = missing_bridge(&vm.config, &bridges) {
                    return Err(format!(
                        "bridge '{bridge}' does not exist\nkvm: -netdev type=tap,id={net},ifname=tap{vmid}i{idx},script=/var/lib/qemu-server/pve-bridge,downscript=/var/lib/qemu-server/pve-bridgedown,vhost=on: network script /var/lib/qemu-server/pve-bridge failed with status 512\nstart failed: QEMU exited with code 1",
                        idx = net.trim_start_matches("net"),
                    ));
                }
                vm.set_power(PowerState::Running);
                let rate = c.faults.start_fails_but_runs;
                if c.fault_roll("start-fails-but-runs", rate) {
                    return Err(format!(
                        "start failed: command '/usr/bin/kvm -id {vmid} -name vm{vmid}' failed: got timeout"
                    ));
                }
                Ok(vec![format!("start VM {vmid}")])
            }),
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// `POST .../status/stop`: stopping a stopped VM is an OK no-op task.
pub fn stop(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let skiplock = check_skiplock(ctx, p)?;
    ctx.state.with(|c| {
        let kind = if c.ha.contains_key(&vmid) {
            "hastop"
        } else {
            "qmstop"
        };
        let n = node.clone();
        let upid = spawn(
            ctx,
            c,
            &node,
            kind,
            vmid,
            Box::new(move |c: &mut Cluster| stop_vm(c, &n, vmid, skiplock)),
        );
        Ok(Reply::data(json!(upid)))
    })
}

fn stop_vm(c: &mut Cluster, node: &str, vmid: u32, skiplock: bool) -> Result<Vec<String>, String> {
    if let Some(h) = c.ha.get_mut(&vmid) {
        h.state = "stopped".into();
    }
    let vm = c.vm_on_mut(node, vmid).ok_or_else(|| find_missing(node, vmid))?;
    if !vm.is_running() {
        return Ok(Vec::new());
    }
    if !skiplock {
        vm.check_lock()?;
    }
    vm.set_power(PowerState::Stopped);
    Ok(Vec::new())
}

/// `POST .../status/shutdown`.
pub fn shutdown(ctx: &Ctx, p: &Params) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    let skiplock = check_skiplock(ctx, p)?;
    let force = p.bool("forceStop").unwrap_or(false);
    ctx.state.with(|c| {
        if let Some(vm) = c.vm_on(&node, vmid)
            && vm.power == PowerState::Paused
            && !force
        {
            return Err(ApiError::server("VM is paused - cannot shutdown"));
        }
        let kind = if c.ha.contains_key(&vmid) {
            "hastop"
        } else {
            "qmshutdown"
        };
        let n = node.clone();
        // A guest that ignores the shutdown request keeps the task waiting for the whole
        // `timeout` (default 60 s) before it fails or, with `forceStop`, the VM is killed.
        let ignores = c.guest.ignore_shutdown && c.vm_on(&node, vmid).is_some_and(|v| v.is_running());
        let latency_key = if ignores {
            format!("{TIMEOUT_KEY}{}", p.int("timeout").unwrap_or(60).max(0))
        } else {
            kind.to_string()
        };
        let upid = spawn_timed(
            ctx,
            c,
            &node,
            (kind, latency_key),
            vmid,
            Box::new(move |c: &mut Cluster| {
                let ignores = c.guest.ignore_shutdown && c.vm_on(&n, vmid).is_some_and(|v| v.is_running());
                if ignores && !force {
                    return Err("VM quit/powerdown failed - got timeout".into());
                }
                let mut log = stop_vm(c, &n, vmid, skiplock)?;
                if ignores {
                    log.insert(0, "VM still running - terminating now with SIGTERM".into());
                }
                Ok(log)
            }),
        );
        Ok(Reply::data(json!(upid)))
    })
}

/// Synchronous checks of reboot/reset/suspend/resume: the VM must exist and run.
fn check_running(c: &Cluster, node: &str, vmid: u32) -> Result<(), ApiError> {
    let vm = c
        .vm_on(node, vmid)
        .ok_or_else(|| ApiError::server(find_missing(node, vmid)))?;
    if vm.is_running() {
        Ok(())
    } else {
        Err(ApiError::server(format!("VM {vmid} not running")))
    }
}

fn simple(ctx: &Ctx, p: &Params, kind: &'static str, action: fn(&mut crate::state::Vm)) -> HandlerResult {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    ctx.state.with(|c| {
        check_running(c, &node, vmid)?;
        let n = node.clone();
        let upid = spawn(
            ctx,
            c,
            &node,
            kind,
            vmid,
            Box::new(move |c: &mut Cluster| {
                let vm = c.vm_on_mut(&n, vmid).ok_or_else(|| find_missing(&n, vmid))?;
                if !vm.is_running() {
                    return Err(format!("VM {vmid} not running"));
                }
                action(vm);
                Ok(Vec::new())
            }),
        );
        Ok(Reply::data(json!(upid)))
    })
}

fn restart(vm: &mut crate::state::Vm) {
    vm.set_power(PowerState::Stopped);
    vm.set_power(PowerState::Running);
}

/// `POST .../status/reboot`: a stopped VM fails on the call, and so does a paused one (a reboot
/// is a shutdown and a start: `VM is paused - cannot shutdown`). The restart applies pending
/// changes (qmeventd starts a new QEMU).
pub fn reboot(ctx: &Ctx, p: &Params) -> HandlerResult {
    let paused = ctx.state.with(|c| {
        c.vm_on(&p.node(), p.vmid().unwrap_or(0))
            .is_some_and(|v| v.power == PowerState::Paused)
    });
    if paused {
        return Err(ApiError::server("VM is paused - cannot shutdown"));
    }
    simple(ctx, p, "qmreboot", restart)
}

/// `POST .../status/reset`: QMP `system_reset` — the guest restarts in the same QEMU process, so
/// pending changes stay pending.
pub fn reset(ctx: &Ctx, p: &Params) -> HandlerResult {
    check_skiplock(ctx, p)?;
    simple(ctx, p, "qmreset", |vm| vm.touch())
}

/// `POST .../status/suspend` (`qmpause`, or `qmsuspend` with `todisk`).
pub fn suspend(ctx: &Ctx, p: &Params) -> HandlerResult {
    check_skiplock(ctx, p)?;
    if p.bool("todisk").unwrap_or(false) {
        return simple(ctx, p, "qmsuspend", |vm| {
            vm.set_power(PowerState::Stopped);
            vm.config.insert("lock".into(), "suspended".into());
            vm.touch();
        });
    }
    simple(ctx, p, "qmpause", |vm| vm.set_power(PowerState::Paused))
}

/// `POST .../status/resume`.
pub fn resume(ctx: &Ctx, p: &Params) -> HandlerResult {
    check_skiplock(ctx, p)?;
    simple(ctx, p, "qmresume", |vm| vm.set_power(PowerState::Running))
}
