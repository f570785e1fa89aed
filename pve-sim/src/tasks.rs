//! Worker tasks: UPIDs, asynchronous completion after the configured latency, status and log.

use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};

use crate::state::{Cluster, SimState};

/// Work done when a task's latency has elapsed: the log lines, or the error text that becomes the exitstatus.
pub type TaskRun = Box<dyn FnOnce(&mut Cluster) -> Result<Vec<String>, String> + Send>;
/// Cleanup run instead of the work when a task failure is injected.
pub type TaskRollback = Box<dyn FnOnce(&mut Cluster) + Send>;

/// A worker task.
#[derive(Debug, Clone)]
pub struct Task {
    /// The UPID.
    pub upid: String,
    /// Node running it.
    pub node: String,
    /// Worker pid.
    pub pid: u32,
    /// Process start.
    pub pstart: u32,
    /// Start time (epoch seconds).
    pub starttime: u64,
    /// Task type (`qmclone`, ...).
    pub kind: String,
    /// Task id (often the VMID).
    pub id: String,
    /// User or full token id.
    pub user: String,
    /// Log lines (without the final status line while running).
    pub log: Vec<String>,
    /// Exit status once stopped.
    pub exitstatus: Option<String>,
    /// End time once stopped.
    pub endtime: Option<u64>,
}

/// Seconds since the epoch.
pub fn now_epoch() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// Formats a UPID (`UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{type}:{id}:{user}:`).
pub fn format_upid(
    node: &str,
    pid: u32,
    pstart: u32,
    starttime: u64,
    kind: &str,
    id: &str,
    user: &str,
) -> String {
    format!("UPID:{node}:{pid:08X}:{pstart:08X}:{starttime:08X}:{kind}:{id}:{user}:")
}

/// Parsed UPID parts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UpidParts {
    /// Node.
    pub node: String,
}

/// Parses a UPID as PVE's `upid_decode` does.
pub fn parse_upid(upid: &str) -> Option<UpidParts> {
    let rest = upid.strip_prefix("UPID:")?;
    let parts: Vec<&str> = rest.split(':').collect();
    if parts.len() != 8 || !parts[7].is_empty() {
        return None;
    }
    let hex = |s: &str, min: usize, max: usize| {
        s.len() >= min && s.len() <= max && s.chars().all(|c| c.is_ascii_hexdigit())
    };
    let node = parts[0];
    if node.is_empty() || !node.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
        return None;
    }
    if !hex(parts[1], 8, 8)
        || !hex(parts[2], 8, 9)
        || !hex(parts[3], 8, 8)
        || parts[4].is_empty()
        || parts[6].is_empty()
    {
        return None;
    }
    Some(UpidParts {
        node: node.to_string(),
    })
}

/// Parameters of a new task.
pub struct TaskSpec {
    /// Node that runs it.
    pub node: String,
    /// Task type.
    pub kind: &'static str,
    /// Task id.
    pub id: String,
    /// Authenticated user or token id.
    pub user: String,
    /// Latency key (`qmclone-linked` etc.; usually equal to `kind`).
    pub latency_key: String,
    /// First log lines.
    pub log: Vec<String>,
}

/// Registers a task and schedules its completion. Must be called with the cluster locked (`c`); the
/// completion runs later on the tokio runtime and takes the lock itself.
pub fn start(
    state: &SimState,
    c: &mut Cluster,
    spec: TaskSpec,
    run: TaskRun,
    rollback: Option<TaskRollback>,
) -> String {
    let delay = c.latency.task(&spec.latency_key);
    let upid = start_pending(c, spec);
    let state = state.clone();
    let task_upid = upid.clone();
    tokio::spawn(async move {
        let stopped = wait_due(&state, &task_upid, tokio::time::Instant::now() + delay).await;
        let mut c = state.lock();
        if stopped || c.tasks.get(&task_upid).is_some_and(|t| t.exitstatus.is_some()) {
            // Stopped through DELETE /nodes/{node}/tasks/{upid}.
            if let Some(rb) = rollback {
                rb(&mut c);
            }
            return;
        }
        finish(&mut c, &task_upid, run, rollback);
    });
    upid
}

/// Whether the task was stopped (`DELETE /nodes/{node}/tasks/{upid}`).
fn is_stopped(state: &SimState, upid: &str) -> bool {
    state.with(|c| c.tasks.get(upid).is_some_and(|t| t.exitstatus.is_some()))
}

/// Waits until `deadline` has passed and tasks are not held, or until the task is stopped (then
/// `true`): a stop ends the wait at once so an interrupted task cleans up right away, as PVE's
/// worker does on SIGINT.
async fn wait_due(state: &SimState, upid: &str, deadline: tokio::time::Instant) -> bool {
    loop {
        let notify = state.with(|c| c.task_release.clone());
        let notified = notify.notified();
        tokio::pin!(notified);
        notified.as_mut().enable();
        let held = state.with(|c| c.tasks_held);
        if is_stopped(state, upid) {
            return true;
        }
        let elapsed = tokio::time::Instant::now() >= deadline;
        if elapsed && !held {
            return false;
        }
        if elapsed {
            notified.await;
        } else {
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => {}
                _ = notified => {}
            }
        }
    }
}

/// Ends a task that ran to its end: an injected failure (rolled back), else `run`'s result, as
/// the log's last lines and the exit status.
fn finish(c: &mut Cluster, task_upid: &str, run: TaskRun, rollback: Option<TaskRollback>) {
    let rate = c.faults.task_failure_rate;
    let injected = c.fault_roll("task", rate);
    let result = if injected {
        if let Some(rb) = rollback {
            rb(c);
        }
        let kind = c.tasks.get(task_upid).map(|t| t.kind.clone()).unwrap_or_default();
        if kind == "qmclone" {
            Err("clone failed: injected task failure".to_string())
        } else {
            Err("injected task failure".to_string())
        }
    } else {
        run(c)
    };
    end(c, task_upid, result);
}

/// Writes a task's end: the result's log lines and `TASK OK`, or the error's lines and
/// `TASK ERROR: <last line>`.
fn end(c: &mut Cluster, task_upid: &str, result: Result<Vec<String>, String>) {
    if let Some(task) = c.tasks.get_mut(task_upid) {
        match result {
            Ok(lines) => {
                task.log.extend(lines);
                task.log.push("TASK OK".into());
                task.exitstatus = Some("OK".into());
            }
            Err(msg) => {
                // A multi-line error logs its leading lines first; the last is the exit status
                // (`bridge 'x' does not exist` … `TASK ERROR: start failed: QEMU exited with code 1`).
                let mut lines: Vec<String> = msg.lines().map(str::to_owned).collect();
                let status = lines.pop().unwrap_or_default();
                task.log.extend(lines);
                task.log.push(status.clone());
                task.log.push(format!("TASK ERROR: {status}"));
                task.exitstatus = Some(status);
            }
        }
        task.endtime = Some(now_epoch());
    }
}

/// The asynchronous part of a worker (e.g. a download): it may append log lines while it runs
/// ([`log_line`]) and yields the work done under the lock at the end (or the task's error).
pub type Worker = std::pin::Pin<Box<dyn std::future::Future<Output = Result<TaskRun, String>> + Send>>;

/// Appends a line to a running task's log (what a worker prints as it goes).
pub fn log_line(state: &SimState, upid: &str, line: String) {
    state.with(|c| {
        if let Some(t) = c.tasks.get_mut(upid)
            && t.exitstatus.is_none()
        {
            t.log.push(line);
        }
    });
}

/// Registers a task whose work is asynchronous: `worker(upid)` runs at once (a stop ends it:
/// nothing of it is kept), then the task ends no earlier than its latency (and not while tasks
/// are held) with the worker's result. Must be called with the cluster locked (`c`).
pub fn start_worker(
    state: &SimState,
    c: &mut Cluster,
    spec: TaskSpec,
    worker: impl FnOnce(String) -> Worker,
) -> String {
    let delay = c.latency.task(&spec.latency_key);
    let upid = start_pending(c, spec);
    let fut = worker(upid.clone());
    let state = state.clone();
    let task_upid = upid.clone();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + delay;
        let stop = async {
            loop {
                let notify = state.with(|c| c.task_release.clone());
                let notified = notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if is_stopped(&state, &task_upid) {
                    return;
                }
                notified.await;
            }
        };
        let result = tokio::select! {
            r = fut => r,
            () = stop => return,
        };
        if wait_due(&state, &task_upid, deadline).await {
            return;
        }
        let mut c = state.lock();
        if c.tasks.get(&task_upid).is_some_and(|t| t.exitstatus.is_some()) {
            return;
        }
        match result {
            Ok(run) => finish(&mut c, &task_upid, run, None),
            Err(e) => end(&mut c, &task_upid, Err(e)),
        }
    });
    upid
}

/// Registers a running task (no completion scheduled); returns its UPID.
fn start_pending(c: &mut Cluster, spec: TaskSpec) -> String {
    let pid = c.next_pid;
    c.next_pid = c.next_pid.wrapping_add(1 + (c.next_pid % 7));
    let pstart = c.nodes.get(&spec.node).map(|n| n.pstart).unwrap_or(0x0100_0000);
    let starttime = now_epoch();
    // UPID fields cannot contain ':' or '/' (e.g. a volid as the id of `imgdel`).
    let id: String = spec
        .id
        .chars()
        .map(|ch| {
            if ch == ':' || ch == '/' || ch.is_whitespace() {
                '_'
            } else {
                ch
            }
        })
        .collect();
    let upid = format_upid(&spec.node, pid, pstart, starttime, spec.kind, &id, &spec.user);
    c.tasks.insert(
        upid.clone(),
        Task {
            upid: upid.clone(),
            node: spec.node.clone(),
            pid,
            pstart,
            starttime,
            kind: spec.kind.to_string(),
            id,
            user: spec.user.clone(),
            log: spec.log,
            exitstatus: None,
            endtime: None,
        },
    );
    upid
}

impl Task {
    /// `GET .../tasks/{upid}/status` data.
    pub fn status_json(&self) -> Value {
        let (user, tokenid) = match self.user.split_once('!') {
            Some((u, t)) => (u.to_string(), Some(t.to_string())),
            None => (self.user.clone(), None),
        };
        let mut v = json!({
            "upid": self.upid,
            "node": self.node,
            "pid": self.pid,
            "pstart": self.pstart,
            "starttime": self.starttime,
            "type": self.kind,
            "id": self.id,
            "user": user,
            "status": if self.exitstatus.is_some() { "stopped" } else { "running" },
        });
        if let Some(obj) = v.as_object_mut() {
            if let Some(t) = tokenid {
                obj.insert("tokenid".into(), json!(t));
            }
            if let Some(e) = &self.exitstatus {
                obj.insert("exitstatus".into(), json!(e));
            }
        }
        v
    }

    /// Entry of `GET /nodes/{node}/tasks`.
    pub fn list_json(&self) -> Value {
        let mut v = json!({
            "upid": self.upid,
            "node": self.node,
            "pid": self.pid,
            "pstart": self.pstart,
            "starttime": self.starttime,
            "type": self.kind,
            "id": self.id,
            "user": self.user,
        });
        if let Some(obj) = v.as_object_mut() {
            if let Some(e) = self.endtime {
                obj.insert("endtime".into(), json!(e));
            }
            if let Some(s) = &self.exitstatus {
                obj.insert("status".into(), json!(s));
            }
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upid_round_trip() {
        let upid = format_upid(
            "pve1",
            0x3C1A2,
            0x151B3A4,
            0x6740A1B2,
            "qmclone",
            "9000",
            "capi@pve!capmox",
        );
        assert_eq!(
            upid,
            "UPID:pve1:0003C1A2:0151B3A4:6740A1B2:qmclone:9000:capi@pve!capmox:"
        );
        assert_eq!(parse_upid(&upid).map(|p| p.node), Some("pve1".to_string()));
        assert!(parse_upid("UPID:pve1:bogus").is_none());
        let imgcopy = format_upid("pve2", 1, 2, 3, "imgcopy", "", "root@pam");
        assert!(parse_upid(&imgcopy).is_some());
    }
}
