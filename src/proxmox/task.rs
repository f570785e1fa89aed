//! Tasks: UPID parsing, status and log endpoints, and polling until a task ends.

use std::fmt;
use std::str::FromStr;
use std::time::{Duration, Instant};

use serde::Deserialize;

use super::Client;
use super::error::Error;
use super::lenient;
use super::path::ApiPath;

/// A parsed task id: `UPID:node:pid:pstart:starttime:type:id:user:`.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Upid {
    raw: String,
    /// Node that runs the task (poll its status there).
    pub node: String,
    /// Worker process id.
    pub pid: u32,
    /// Process start time (clock ticks since boot).
    pub pstart: u64,
    /// Task start (Unix epoch seconds).
    pub starttime: u64,
    /// Task type, e.g. `qmclone`, `qmstart`, `resize`, `imgcopy`.
    pub task_type: String,
    /// Task object id (the source VMID for `qmclone`; may be empty).
    pub id: String,
    /// User or token id that started the task.
    pub user: String,
}

impl Upid {
    /// Parses a UPID string as PVE's `upid_decode` does.
    pub fn parse(s: &str) -> Result<Self, Error> {
        let invalid = |m: &str| Error::Invalid {
            what: "UPID",
            message: format!("{m}: '{s}'"),
        };
        let rest = s
            .strip_prefix("UPID:")
            .ok_or_else(|| invalid("missing UPID: prefix"))?;
        let rest = rest
            .strip_suffix(':')
            .ok_or_else(|| invalid("missing trailing ':'"))?;
        let parts: Vec<&str> = rest.split(':').collect();
        // PVE's regex forbids ':' in the id; tolerate it anyway (type is field 5, user the last
        // field) so a sloppy server cannot make an accepted call look failed.
        if parts.len() < 7 {
            return Err(invalid("expected 7 fields"));
        }
        let node = parts[0];
        let node_ok = !node.is_empty()
            && node.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
            && !node.starts_with('-')
            && !node.ends_with('-');
        if !node_ok {
            return Err(invalid("invalid node name"));
        }
        let hex = |f: &str, min: usize, max: usize| -> Result<u64, Error> {
            if f.len() < min || f.len() > max || !f.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(invalid("invalid hex field"));
            }
            u64::from_str_radix(f, 16).map_err(|_| invalid("invalid hex field"))
        };
        let pid = u32::try_from(hex(parts[1], 8, 8)?).map_err(|_| invalid("pid out of range"))?;
        let pstart = hex(parts[2], 8, 9)?;
        let starttime = hex(parts[3], 8, 8)?;
        let bad = |f: &str| f.chars().any(|c| c.is_whitespace() || c == '/');
        let task_type = parts[4];
        let user = parts[parts.len() - 1];
        let id = parts[5..parts.len() - 1].join(":");
        if task_type.is_empty()
            || user.is_empty()
            || bad(task_type)
            || bad(user)
            || id.chars().any(char::is_whitespace)
        {
            return Err(invalid("invalid type, id or user"));
        }
        Ok(Self {
            raw: s.to_owned(),
            node: node.to_owned(),
            pid,
            pstart,
            starttime,
            task_type: task_type.to_owned(),
            id,
            user: user.to_owned(),
        })
    }

    /// The UPID string as PVE sent it.
    pub fn as_str(&self) -> &str {
        &self.raw
    }
}

impl fmt::Display for Upid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

impl FromStr for Upid {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

/// `GET /nodes/{node}/tasks/{upid}/status`.
#[derive(Debug, Clone, Deserialize, PartialEq)]
pub struct TaskStatus {
    /// The UPID.
    #[serde(default)]
    pub upid: String,
    /// Node.
    #[serde(default)]
    pub node: String,
    /// `running` or `stopped`.
    #[serde(default)]
    pub status: String,
    /// Only when stopped: `OK`, `WARNINGS: N` or the error text.
    #[serde(default)]
    pub exitstatus: Option<String>,
    /// Task type.
    #[serde(rename = "type", default)]
    pub task_type: String,
    /// Task object id.
    #[serde(default, deserialize_with = "lenient::string")]
    pub id: String,
    /// User (without the token part).
    #[serde(default)]
    pub user: String,
    /// Token name, for token-started tasks.
    #[serde(default)]
    pub tokenid: Option<String>,
    /// Start time (epoch seconds).
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub starttime: Option<u64>,
    /// Worker pid.
    #[serde(default, deserialize_with = "lenient::opt_u64")]
    pub pid: Option<u64>,
}

impl TaskStatus {
    /// Whether the task has ended.
    pub fn is_finished(&self) -> bool {
        self.status == "stopped"
    }

    /// Whether the task is finished and succeeded (`OK` or `WARNINGS: N`).
    pub fn is_success(&self) -> bool {
        self.is_finished() && self.exitstatus.as_deref().is_some_and(exitstatus_is_success)
    }
}

/// PVE's success rule: `OK` or `WARNINGS: <digits>`.
pub fn exitstatus_is_success(exitstatus: &str) -> bool {
    exitstatus == "OK"
        || exitstatus
            .strip_prefix("WARNINGS: ")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

/// The cause of a failed task that its exit status leaves out, from its log: PVE ends a start
/// that QEMU could not begin with the generic `start failed: QEMU exited with code 1` and logs
/// the reason before it (`bridge 'vmbr9' does not exist`). `None` for other exit statuses or
/// when the log has nothing more (QEMU's own `kvm: ...` command-line echoes are left out).
pub fn failure_detail(exitstatus: &str, log: &[TaskLogLine]) -> Option<String> {
    if !has_detail_in_log(exitstatus) {
        return None;
    }
    let end = log
        .iter()
        .position(|l| l.t.starts_with("TASK ERROR:"))
        .unwrap_or(log.len());
    let lines: Vec<&str> = log[..end]
        .iter()
        .map(|l| l.t.trim())
        .filter(|t| !t.is_empty() && *t != exitstatus && !t.starts_with("kvm: "))
        .collect();
    (!lines.is_empty()).then(|| lines.join("; "))
}

fn has_detail_in_log(exitstatus: &str) -> bool {
    exitstatus.starts_with("start failed: QEMU exited with code")
}

/// One task log line.
#[derive(Debug, Clone, Deserialize, PartialEq, Eq)]
pub struct TaskLogLine {
    /// 1-based line number.
    #[serde(default, deserialize_with = "lenient::u64")]
    pub n: u64,
    /// Line text.
    #[serde(default)]
    pub t: String,
}

/// How [`Client::wait_for_task`] polls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskPollPolicy {
    /// First poll delay; doubles after every poll.
    pub initial: Duration,
    /// Maximum delay between polls.
    pub max: Duration,
}

impl Default for TaskPollPolicy {
    fn default() -> Self {
        Self {
            initial: Duration::from_millis(200),
            max: Duration::from_secs(5),
        }
    }
}

impl TaskPollPolicy {
    /// The delay before poll number `n` (0-based).
    pub fn delay(&self, n: u32) -> Duration {
        super::error::backoff_with(n, self.initial, self.max)
    }
}

fn task_path(upid: &Upid) -> ApiPath {
    ApiPath::node(&upid.node)
        .lit("tasks")
        .param("upid", upid.as_str())
}

impl Client {
    /// `GET /nodes/{node}/tasks/{upid}/status`; the node comes from the UPID.
    pub async fn task_status(&self, upid: &Upid) -> Result<TaskStatus, Error> {
        self.get(&task_path(upid).lit("status"), &[]).await
    }

    /// `GET /nodes/{node}/tasks/{upid}/log?start=..&limit=..`.
    pub async fn task_log(&self, upid: &Upid, start: u64, limit: u64) -> Result<Vec<TaskLogLine>, Error> {
        let q = vec![
            ("start".to_owned(), start.to_string()),
            ("limit".to_owned(), limit.to_string()),
        ];
        self.get(&task_path(upid).lit("log"), &q).await
    }

    /// [`failure_detail`] of a failed task, reading its log (`None` when the log cannot be read).
    pub async fn task_failure_detail(&self, upid: &Upid, exitstatus: &str) -> Option<String> {
        if !has_detail_in_log(exitstatus) {
            return None;
        }
        let log = self.task_log(upid, 0, 500).await.ok()?;
        failure_detail(exitstatus, &log)
    }

    /// Polls a task until it ends or `timeout` passes.
    ///
    /// Returns the final status on success (`OK` / `WARNINGS: N`), [`Error::TaskFailed`] with the
    /// exit status text on failure, and [`Error::TaskTimeout`] when the deadline passes.
    /// Transient errors while polling (network, 5xx, locks) are retried until the deadline.
    pub async fn wait_for_task(&self, upid: &Upid, timeout: Duration) -> Result<TaskStatus, Error> {
        let start = Instant::now();
        let policy = self.config().task_poll;
        let mut n = 0u32;
        loop {
            match self.task_status(upid).await {
                Ok(st) if st.is_finished() => {
                    return if st.is_success() {
                        Ok(st)
                    } else {
                        Err(Error::TaskFailed {
                            upid: upid.to_string(),
                            task_type: upid.task_type.clone(),
                            exitstatus: st
                                .exitstatus
                                .clone()
                                .unwrap_or_else(|| "unexpected status".into()),
                        })
                    };
                }
                Ok(_) => {}
                Err(e) if e.is_retryable() => {
                    tracing::debug!(upid = %upid, error = %e, "task poll failed, retrying")
                }
                Err(e) => return Err(e),
            }
            let elapsed = start.elapsed();
            if elapsed >= timeout {
                return Err(Error::TaskTimeout {
                    upid: upid.to_string(),
                    waited: elapsed,
                });
            }
            let delay = policy.delay(n).min(timeout - elapsed);
            tokio::time::sleep(delay).await;
            n = n.saturating_add(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failed_starts_are_explained_by_their_log() {
        let line = |n: u64, t: &str| TaskLogLine { n, t: t.to_owned() };
        let status = "start failed: QEMU exited with code 1";
        let log = [
            line(1, "bridge 'vmbr9' does not exist"),
            line(
                2,
                "kvm: -netdev type=tap,id=net0: network script failed with status 512",
            ),
            line(3, "TASK ERROR: start failed: QEMU exited with code 1"),
        ];
        assert_eq!(
            failure_detail(status, &log).as_deref(),
            Some("bridge 'vmbr9' does not exist")
        );
        assert_eq!(failure_detail(status, &log[2..]), None);
        assert_eq!(failure_detail("clone failed: out of space", &log), None);
    }

    #[test]
    fn parses_upids() {
        let u = Upid::parse("UPID:pve1:000A1B2C:0151B3A4:6740A1B2:qmclone:9000:root@pam!capmox:").unwrap();
        assert_eq!(u.node, "pve1");
        assert_eq!(u.pid, 0x000A_1B2C);
        assert_eq!(u.pstart, 0x0151_B3A4);
        assert_eq!(u.starttime, 0x6740_A1B2);
        assert_eq!(u.task_type, "qmclone");
        assert_eq!(u.id, "9000");
        assert_eq!(u.user, "root@pam!capmox");
        assert_eq!(
            u.to_string(),
            "UPID:pve1:000A1B2C:0151B3A4:6740A1B2:qmclone:9000:root@pam!capmox:"
        );
        // empty id (imgcopy) and 9-digit pstart
        let u: Upid = "UPID:node-2:00000001:123456789:6740A1B2:imgcopy::capi@pve:"
            .parse()
            .unwrap();
        assert_eq!(u.id, "");
        assert_eq!(u.pstart, 0x1_2345_6789);
        // Tolerated: an id with ':' and '/' (not produced by real PVE).
        let u = Upid::parse("UPID:pve1:000E368E:0A0F6F15:6B027B1A:imgdel:local:iso/a.iso:capmox@pve!capi:")
            .unwrap();
        assert_eq!(
            (u.task_type.as_str(), u.id.as_str(), u.user.as_str()),
            ("imgdel", "local:iso/a.iso", "capmox@pve!capi")
        );
    }

    #[test]
    fn rejects_bad_upids() {
        for bad in [
            "",
            "UPID:pve1:000A1B2C:0151B3A4:6740A1B2:qmclone:9000:root@pam",
            "XPID:pve1:000A1B2C:0151B3A4:6740A1B2:qmclone:9000:root@pam:",
            "UPID:-pve:000A1B2C:0151B3A4:6740A1B2:qmclone:9000:root@pam:",
            "UPID:pve1:A1B2C:0151B3A4:6740A1B2:qmclone:9000:root@pam:",
            "UPID:pve1:000A1B2C:0151B3A4:6740A1B2::9000:root@pam:",
            "UPID:pve1:000A1B2C:0151B3A4:6740A1B2:qmclone:9000::",
            "UPID:pve1:000A1B2G:0151B3A4:6740A1B2:qmclone:9000:root@pam:",
            "UPID:pve1:000A1B2C:0151B3A4:6740A1B2:qm clone:9000:root@pam:",
        ] {
            assert!(Upid::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn success_rule() {
        assert!(exitstatus_is_success("OK"));
        assert!(exitstatus_is_success("WARNINGS: 3"));
        assert!(!exitstatus_is_success("WARNINGS: "));
        assert!(!exitstatus_is_success("WARNINGS: x"));
        assert!(!exitstatus_is_success("VM 100 already running"));
        assert!(!exitstatus_is_success("ok"));
        let st: TaskStatus = serde_json::from_value(serde_json::json!({
            "upid": "UPID:pve1:000A1B2C:0151B3A4:6740A1B2:qmclone:9000:root@pam!capmox:",
            "node": "pve1", "pid": 246178, "pstart": 22131620, "starttime": 1732288946,
            "type": "qmclone", "id": "9000", "user": "capi@pve", "tokenid": "capmox",
            "status": "stopped", "exitstatus": "WARNINGS: 1"
        }))
        .unwrap();
        assert!(st.is_success());
        let running: TaskStatus =
            serde_json::from_value(serde_json::json!({"status": "running", "id": 100})).unwrap();
        assert!(!running.is_finished() && !running.is_success());
        assert_eq!(running.id, "100");
    }

    #[test]
    fn poll_policy_backs_off() {
        let p = TaskPollPolicy {
            initial: Duration::from_millis(100),
            max: Duration::from_millis(500),
        };
        let d: Vec<u128> = (0..5).map(|n| p.delay(n).as_millis()).collect();
        assert_eq!(d, vec![100, 200, 400, 500, 500]);
    }

    proptest::proptest! {
        #[test]
        fn upid_roundtrip(
            node in "[a-z][a-z0-9-]{0,10}[a-z0-9]",
            pid in 0u32..=u32::MAX,
            pstart in 0u64..0x1_0000_0000u64,
            start in 0u64..0x1_0000_0000u64,
            ty in "[a-z]{2,10}",
            id in "[0-9]{0,6}",
            user in "[a-z]{1,8}@(pam|pve)(![a-z]{1,6})?",
        ) {
            let s = format!("UPID:{node}:{pid:08X}:{pstart:08X}:{start:08X}:{ty}:{id}:{user}:");
            let u = Upid::parse(&s).unwrap();
            proptest::prop_assert_eq!(&u.node, &node);
            proptest::prop_assert_eq!(u.pid, pid);
            proptest::prop_assert_eq!(u.pstart, pstart);
            proptest::prop_assert_eq!(u.starttime, start);
            proptest::prop_assert_eq!(&u.task_type, &ty);
            proptest::prop_assert_eq!(&u.id, &id);
            proptest::prop_assert_eq!(&u.user, &user);
            proptest::prop_assert_eq!(u.as_str(), s.as_str());
        }

        #[test]
        fn upid_parse_never_panics(s in "\\PC{0,80}") {
            let _ = Upid::parse(&s);
        }
    }
}
