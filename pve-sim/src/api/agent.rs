//! QEMU guest agent endpoints: readiness, osinfo, exec/exec-status (cloud-init), network interfaces.

use serde_json::{Value, json};

use super::config::conf_missing;
use super::{Ctx, HandlerResult, Reply, check_node};
use crate::error::ApiError;
use crate::params::{Params, value_text};
use crate::scenario::CloudInitResult;
use crate::state::vm::ExecResult;
use crate::state::{Cluster, PowerState, Vm};

/// The three synchronous agent checks: configured, VM running, agent answering.
fn ready<'a>(c: &'a Cluster, node: &str, vmid: u32) -> Result<&'a Vm, ApiError> {
    let vm = c.vm_on(node, vmid).ok_or_else(|| conf_missing(node, vmid))?;
    if !vm.agent_enabled() {
        return Err(ApiError::server("No QEMU guest agent configured"));
    }
    if !vm.is_running() {
        return Err(ApiError::server(format!("VM {vmid} is not running")));
    }
    let up = vm
        .started_at
        .is_some_and(|s| s.elapsed() >= c.latency.agent_ready());
    // A VM whose boot order reaches no disk with an OS runs, but its guest never comes up.
    if !c.guest.agent || !up || vm.power == PowerState::Paused || !vm.booted_os {
        return Err(ApiError::server("QEMU guest agent is not running"));
    }
    Ok(vm)
}

fn with_vm<R>(
    ctx: &Ctx,
    p: &Params,
    f: impl FnOnce(&mut Cluster, &str, u32) -> Result<R, ApiError>,
) -> Result<R, ApiError> {
    let node = p.node();
    check_node(ctx, &node)?;
    let vmid = p.vmid()?;
    ctx.state.with(|c| {
        ready(c, &node, vmid)?;
        f(c, &node, vmid)
    })
}

/// `POST .../agent/ping`.
pub fn ping(ctx: &Ctx, p: &Params) -> HandlerResult {
    with_vm(ctx, p, |_, _, _| Ok(Reply::data(json!({"result": {}}))))
}

/// `GET .../agent/get-osinfo`.
pub fn get_osinfo(ctx: &Ctx, p: &Params) -> HandlerResult {
    with_vm(ctx, p, |_, _, _| {
        Ok(Reply::data(json!({"result": {
            "id": "ubuntu",
            "name": "Ubuntu",
            "pretty-name": "Ubuntu 24.04.2 LTS",
            "version": "24.04.2 LTS (Noble Numbat)",
            "version-id": "24.04",
            "kernel-release": "6.8.0-60-generic",
            "kernel-version": "#63-Ubuntu SMP PREEMPT_DYNAMIC",
            "machine": "x86_64",
        }})))
    })
}

/// `GET .../agent/get-host-name`.
pub fn get_host_name(ctx: &Ctx, p: &Params) -> HandlerResult {
    with_vm(ctx, p, |c, node, vmid| {
        let name = c
            .vm_on(node, vmid)
            .and_then(|v| v.config.get("name").cloned())
            .unwrap_or_default();
        Ok(Reply::data(json!({"result": {"host-name": name}})))
    })
}

/// Output and exit code of `cloud-init status` at this moment.
fn cloud_init_status(c: &Cluster, vm: &Vm) -> ExecResult {
    let done = vm
        .started_at
        .is_some_and(|s| s.elapsed() >= c.latency.cloud_init_done());
    let (out, code) = if !done {
        ("status: running\n", 0)
    } else {
        match vm.cloud_init.unwrap_or(c.guest.cloud_init) {
            CloudInitResult::Done => ("status: done\n", 0),
            CloudInitResult::Error => ("status: error\n", 1),
            // cloud-init's short format keeps `done` for a degraded run (backwards compatibility);
            // only the exit code (2: recoverable errors) tells them apart.
            CloudInitResult::Degraded => ("status: done\n", 2),
        }
    };
    ExecResult {
        exitcode: code,
        out: out.to_string(),
        err: String::new(),
        waits_for_cloud_init: false,
    }
}

/// Whether cloud-init of `vm` is done.
fn cloud_init_done(c: &Cluster, vm: &Vm) -> bool {
    vm.started_at
        .is_some_and(|s| s.elapsed() >= c.latency.cloud_init_done())
}

/// `POST .../agent/exec`.
pub fn exec(ctx: &Ctx, p: &Params) -> HandlerResult {
    let command: Vec<String> = match p.get("command") {
        Some(Value::Array(items)) => items.iter().map(value_text).collect(),
        Some(other) => vec![value_text(other)],
        None => Vec::new(),
    };
    if command.is_empty() && !p.has("input-data") {
        return Err(ApiError::server("command or input-data (or both) required"));
    }
    with_vm(ctx, p, |c, node, vmid| {
        let result = {
            let vm = c.vm_on(node, vmid).ok_or_else(|| conf_missing(node, vmid))?;
            match command.iter().map(String::as_str).collect::<Vec<_>>().as_slice() {
                ["cloud-init", "status", rest @ ..] if rest.contains(&"--wait") => ExecResult {
                    waits_for_cloud_init: true,
                    ..cloud_init_status(c, vm)
                },
                ["cloud-init", "status", ..] => cloud_init_status(c, vm),
                ["hostname"] => ExecResult {
                    exitcode: 0,
                    out: format!("{}\n", vm.config.get("name").cloned().unwrap_or_default()),
                    err: String::new(),
                    waits_for_cloud_init: false,
                },
                ["true"] | [] => ExecResult {
                    exitcode: 0,
                    out: String::new(),
                    err: String::new(),
                    waits_for_cloud_init: false,
                },
                [prog, ..] => ExecResult {
                    exitcode: 127,
                    out: String::new(),
                    err: format!("{prog}: command not found\n"),
                    waits_for_cloud_init: false,
                },
            }
        };
        let vm = c.vm_on_mut(node, vmid).ok_or_else(|| conf_missing(node, vmid))?;
        let pid = vm.next_exec_pid;
        vm.next_exec_pid += 1;
        vm.exec.insert(pid, result);
        Ok(Reply::data(json!({"pid": pid})))
    })
}

/// `GET .../agent/exec-status`.
pub fn exec_status(ctx: &Ctx, p: &Params) -> HandlerResult {
    let pid = p.int("pid").unwrap_or(-1);
    with_vm(ctx, p, |c, node, vmid| {
        let vm = c.vm_on(node, vmid).ok_or_else(|| conf_missing(node, vmid))?;
        let r = vm
            .exec
            .get(&pid)
            .ok_or_else(|| ApiError::server("Agent error: Invalid parameter 'pid'"))?;
        if r.waits_for_cloud_init {
            if !cloud_init_done(c, vm) {
                // Still waiting: `cloud-init status --wait` prints a dot now and then.
                return Ok(Reply::data(json!({"exited": 0, "out-data": "."})));
            }
            let done = cloud_init_status(c, vm);
            let mut v =
                json!({"exited": 1, "exitcode": done.exitcode, "out-data": format!(".\n{}", done.out)});
            if !done.err.is_empty()
                && let Some(obj) = v.as_object_mut()
            {
                obj.insert("err-data".into(), json!(done.err));
            }
            return Ok(Reply::data(v));
        }
        let mut v = json!({"exited": 1, "exitcode": r.exitcode});
        if let Some(obj) = v.as_object_mut() {
            if !r.out.is_empty() {
                obj.insert("out-data".into(), json!(r.out));
            }
            if !r.err.is_empty() {
                obj.insert("err-data".into(), json!(r.err));
            }
        }
        Ok(Reply::data(v))
    })
}

/// `GET .../agent/network-get-interfaces`: addresses from the attached NoCloud ISO's network-config,
/// plus DHCP leases / SLAAC addresses for NICs it configures that way.
pub fn network_get_interfaces(ctx: &Ctx, p: &Params) -> HandlerResult {
    with_vm(ctx, p, |c, node, vmid| {
        let vm = c.vm_on(node, vmid).ok_or_else(|| conf_missing(node, vmid))?;
        let macs = vm.macs();
        // The agent answers only once the guest booted: DHCP has handed out its leases.
        let network_config = vm
            .config
            .iter()
            .filter(|(k, _)| crate::validate::is_disk_key(k))
            .filter_map(|(_, v)| {
                let m = crate::propstr::to_map(v, Some("file"));
                let file = m.get("file")?;
                if m.get("media").map(String::as_str) != Some("cdrom") || !file.contains(":iso/") {
                    return None;
                }
                let volume = c.find_volume(node, file)?;
                crate::iso::read_file(&volume.data, "network-config")
            })
            .next();
        let ifaces = crate::iso::interfaces_with_dhcp(network_config.as_deref(), &macs, Some(&mut c.dhcp));
        Ok(Reply::data(json!({"result": ifaces})))
    })
}
