//! The client's error type, its classification and the retry/backoff policy.
//!
//! PVE reports almost every semantic error as HTTP 500 with the message in the status
//! line's reason phrase. This module turns (status, reason phrase, body) into a typed
//! [`Error`] so controllers can match on variants or [`ErrorClass`] instead of strings.

use std::collections::BTreeMap;
use std::time::Duration;

/// Errors returned by the Proxmox VE client.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// 401/403: bad or missing credentials, invalid CSRF token, or a missing privilege.
    #[error("proxmox auth error (HTTP {status}): {message}")]
    Auth {
        /// HTTP status (401 or 403).
        status: u16,
        /// Reason phrase or message.
        message: String,
    },
    /// 400 `Parameter verification failed.` with the per-parameter messages.
    #[error("proxmox parameter verification failed: {message} {errors:?}")]
    ParameterVerification {
        /// Top-level message.
        message: String,
        /// `errors` map from the body: parameter name to message.
        errors: BTreeMap<String, String>,
    },
    /// The VM, volume, task or configuration does not exist (PVE reports this as 500 or 400).
    #[error("proxmox object not found: {message}")]
    NotFound {
        /// PVE's message.
        message: String,
    },
    /// The object is locked, a file lock timed out, or the config changed concurrently
    /// (`VM is locked (clone)`, `can't lock file ...`, `checksum mismatch ...`, 409).
    #[error("proxmox object locked or conflicting: {message}")]
    Locked {
        /// PVE's message.
        message: String,
    },
    /// The VMID is already in use (`nextid?vmid=` 400, or create/clone onto a used id).
    #[error("proxmox object already exists: {message}")]
    AlreadyExists {
        /// PVE's message.
        message: String,
    },
    /// The operation conflicts with the VM's power state (`VM 100 not running`,
    /// `VM 100 is running - destroy failed`, `VM is paused - cannot shutdown`, ...).
    #[error("proxmox VM in wrong state: {message}")]
    WrongState {
        /// PVE's message.
        message: String,
    },
    /// The guest agent is configured but not (yet) answering.
    #[error("proxmox guest agent not ready: {message}")]
    AgentNotReady {
        /// PVE's message.
        message: String,
    },
    /// The VM has no `agent` configured.
    #[error("proxmox guest agent not configured: {message}")]
    AgentNotConfigured {
        /// PVE's message.
        message: String,
    },
    /// Any other 5xx answer (including 595/596/597 proxy errors).
    #[error("proxmox server error (HTTP {status}): {message}")]
    Server {
        /// HTTP status.
        status: u16,
        /// Reason phrase or message.
        message: String,
    },
    /// A request PVE rejects and no retry can fix: other 4xx, 501 (`Method ... not implemented`),
    /// and 500s such as `Linked clone feature is not supported ...`,
    /// `unable to remove VM 100 - used in HA resources and purge parameter not set.`,
    /// `can't remove VM 100 - protection mode enabled`, `you can't start a vm if it's a template`.
    #[error("proxmox request rejected (HTTP {status}): {message}")]
    Rejected {
        /// HTTP status.
        status: u16,
        /// Reason phrase or message.
        message: String,
    },
    /// Connection, TLS or timeout failure before a response was read.
    #[error("proxmox network error: {message}")]
    Network {
        /// Description of the transport failure.
        message: String,
        /// Whether the failure was a timeout.
        timeout: bool,
    },
    /// The response could not be decoded.
    #[error("proxmox response decode error at {context}: {message}")]
    Decode {
        /// What was being decoded (endpoint template).
        context: String,
        /// Decoder message.
        message: String,
    },
    /// A task ended with an error exit status.
    #[error("proxmox task {task_type} failed: {exitstatus} ({upid})")]
    TaskFailed {
        /// The UPID of the task.
        upid: String,
        /// The task type (e.g. `qmclone`).
        task_type: String,
        /// The exit status text, e.g. `VM 100 already running`.
        exitstatus: String,
    },
    /// A task did not finish before the caller's deadline.
    #[error("proxmox task {upid} still running after {waited:?}")]
    TaskTimeout {
        /// The UPID of the task.
        upid: String,
        /// How long the client waited.
        waited: Duration,
    },
    /// A value could not be parsed (UPID, property string, ...).
    #[error("invalid {what}: {message}")]
    Invalid {
        /// What was being parsed.
        what: &'static str,
        /// Why it failed.
        message: String,
    },
    /// The client configuration is invalid (URL, CA bundle, TLS).
    #[error("proxmox client configuration error: {0}")]
    Config(String),
}

/// Coarse classification of [`Error`] for controllers and metrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// See [`Error::Auth`].
    Auth,
    /// See [`Error::ParameterVerification`].
    ParameterVerification,
    /// See [`Error::NotFound`].
    NotFound,
    /// See [`Error::Locked`].
    Locked,
    /// See [`Error::AlreadyExists`].
    AlreadyExists,
    /// See [`Error::WrongState`].
    WrongState,
    /// See [`Error::AgentNotReady`].
    AgentNotReady,
    /// See [`Error::AgentNotConfigured`].
    AgentNotConfigured,
    /// See [`Error::Server`].
    Server,
    /// See [`Error::Rejected`].
    Rejected,
    /// See [`Error::Network`].
    Network,
    /// See [`Error::Decode`].
    Decode,
    /// See [`Error::TaskFailed`].
    TaskFailed,
    /// See [`Error::TaskTimeout`].
    TaskTimeout,
    /// See [`Error::Invalid`] and [`Error::Config`].
    Invalid,
}

impl ErrorClass {
    /// A short lower-case label for metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auth => "auth",
            Self::ParameterVerification => "parameter_verification",
            Self::NotFound => "not_found",
            Self::Locked => "locked",
            Self::AlreadyExists => "already_exists",
            Self::WrongState => "wrong_state",
            Self::AgentNotReady => "agent_not_ready",
            Self::AgentNotConfigured => "agent_not_configured",
            Self::Server => "server",
            Self::Rejected => "rejected",
            Self::Network => "network",
            Self::Decode => "decode",
            Self::TaskFailed => "task_failed",
            Self::TaskTimeout => "task_timeout",
            Self::Invalid => "invalid",
        }
    }
}

impl Error {
    /// The error's class.
    pub fn class(&self) -> ErrorClass {
        match self {
            Self::Auth { .. } => ErrorClass::Auth,
            Self::ParameterVerification { .. } => ErrorClass::ParameterVerification,
            Self::NotFound { .. } => ErrorClass::NotFound,
            Self::Locked { .. } => ErrorClass::Locked,
            Self::AlreadyExists { .. } => ErrorClass::AlreadyExists,
            Self::WrongState { .. } => ErrorClass::WrongState,
            Self::AgentNotReady { .. } => ErrorClass::AgentNotReady,
            Self::AgentNotConfigured { .. } => ErrorClass::AgentNotConfigured,
            Self::Server { .. } => ErrorClass::Server,
            Self::Rejected { .. } => ErrorClass::Rejected,
            Self::Network { .. } => ErrorClass::Network,
            Self::Decode { .. } => ErrorClass::Decode,
            Self::TaskFailed { .. } => ErrorClass::TaskFailed,
            Self::TaskTimeout { .. } => ErrorClass::TaskTimeout,
            Self::Invalid { .. } | Self::Config(_) => ErrorClass::Invalid,
        }
    }

    /// Whether retrying the same call later can succeed (with [`backoff`] between attempts).
    ///
    /// Locks, server and network errors, agent start-up, wrong power state and task timeouts
    /// are transient; auth, parameter, not-found, already-exists, decode and task failures are not.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self.class(),
            ErrorClass::Locked
                | ErrorClass::Server
                | ErrorClass::Network
                | ErrorClass::AgentNotReady
                | ErrorClass::WrongState
                | ErrorClass::TaskTimeout
        )
    }

    /// Whether this is [`Error::NotFound`].
    pub fn is_not_found(&self) -> bool {
        matches!(self, Self::NotFound { .. })
    }

    /// The message PVE sent (or the local description for client-side errors).
    pub fn message(&self) -> String {
        match self {
            Self::Auth { message, .. }
            | Self::ParameterVerification { message, .. }
            | Self::NotFound { message }
            | Self::Locked { message }
            | Self::AlreadyExists { message }
            | Self::WrongState { message }
            | Self::AgentNotReady { message }
            | Self::AgentNotConfigured { message }
            | Self::Server { message, .. }
            | Self::Rejected { message, .. }
            | Self::Network { message, .. }
            | Self::Decode { message, .. }
            | Self::Invalid { message, .. } => message.clone(),
            Self::TaskFailed { exitstatus, .. } => exitstatus.clone(),
            Self::TaskTimeout { upid, .. } => format!("task {upid} timed out"),
            Self::Config(m) => m.clone(),
        }
    }

    /// Builds the error for an HTTP error answer.
    ///
    /// `reason` is the raw status-line reason phrase (PVE puts the message there), `body` the
    /// response body (JSON `{"data":null,"message":..,"errors":{..}}`, plain text or empty).
    pub fn from_response(status: u16, reason: Option<&str>, body: &[u8]) -> Self {
        let parsed: Option<serde_json::Value> = serde_json::from_slice(body).ok();
        let body_message = parsed
            .as_ref()
            .and_then(|v| v.get("message"))
            .and_then(|m| m.as_str())
            .map(|s| s.trim_end().to_owned())
            .filter(|s| !s.is_empty());
        let errors: BTreeMap<String, String> = parsed
            .as_ref()
            .and_then(|v| v.get("errors"))
            .and_then(|e| e.as_object())
            .map(|m| {
                m.iter()
                    .map(|(k, v)| {
                        let text = v
                            .as_str()
                            .map(|s| s.trim_end().to_owned())
                            .unwrap_or_else(|| v.to_string());
                        (k.clone(), text)
                    })
                    .collect()
            })
            .unwrap_or_default();
        let plain_body = if parsed.is_none() {
            std::str::from_utf8(body)
                .ok()
                .map(|s| s.trim().to_owned())
                .filter(|s| !s.is_empty())
        } else {
            None
        };
        let reason = reason.map(str::trim).filter(|r| !r.is_empty()).map(str::to_owned);
        let message = reason
            .clone()
            .filter(|r| !is_canonical_reason(status, r))
            .or(body_message)
            .or(plain_body)
            .or(reason)
            .unwrap_or_else(|| format!("HTTP {status}"));
        classify(status, message, errors)
    }
}

fn is_canonical_reason(status: u16, reason: &str) -> bool {
    http::StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .is_some_and(|c| c.eq_ignore_ascii_case(reason))
}

/// Fragments of 500 messages that no retry can fix (the request must change).
const PERMANENT: &[&str] = &[
    "not supported",
    "not allowed",
    "protection mode enabled",
    "purge parameter not set",
    "you can't",
    "can't remove",
    "is required",
    "unable to create template",
    // The node named in the path is not a member of the cluster (PVE proxies by node name).
    "hostname lookup",
];

/// Classifies a message PVE reported on the call or as a task exit status.
fn message_kind(message: &str) -> Option<ErrorClass> {
    let m = message.to_ascii_lowercase();
    if m.contains("does not exist")
        || m.contains("unable to find configuration file")
        || m.contains("no such vm")
        || m.contains("no such task")
        || m.contains("no such resource")
        || m.contains("no such ha group")
        || m.contains("not ha managed")
    {
        Some(ErrorClass::NotFound)
    } else if m.contains("vm is locked")
        || m.contains("can't lock file")
        || m.contains("ct is locked")
        || m.contains("checksum mismatch")
    {
        Some(ErrorClass::Locked)
    } else if m.contains("already exists") || m.contains("already defined") {
        Some(ErrorClass::AlreadyExists)
    } else if m.contains("qemu guest agent is not running")
        || (m.contains("qmp command 'guest-") && m.contains("got timeout"))
    {
        Some(ErrorClass::AgentNotReady)
    } else if m.contains("no qemu guest agent configured") {
        Some(ErrorClass::AgentNotConfigured)
    } else if m.contains("not running")
        || m.contains("already running")
        || m.contains("is running - destroy failed")
        || m.contains("cannot shutdown")
    {
        Some(ErrorClass::WrongState)
    } else if PERMANENT.iter().any(|p| m.contains(p)) {
        Some(ErrorClass::Rejected)
    } else {
        None
    }
}

fn classify(status: u16, message: String, errors: BTreeMap<String, String>) -> Error {
    match status {
        401 | 403 => Error::Auth { status, message },
        409 => Error::Locked { message },
        400 => {
            let all: Vec<&String> = errors.values().collect();
            if all
                .iter()
                .any(|e| message_kind(e) == Some(ErrorClass::AlreadyExists))
            {
                let detail = all.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ");
                Error::AlreadyExists { message: detail }
            } else if all.iter().any(|e| message_kind(e) == Some(ErrorClass::NotFound)) {
                let detail = all.iter().map(|s| s.as_str()).collect::<Vec<_>>().join("; ");
                Error::NotFound { message: detail }
            } else {
                Error::ParameterVerification { message, errors }
            }
        }
        500..=599 if status != 501 => match message_kind(&message) {
            Some(ErrorClass::NotFound) => Error::NotFound { message },
            Some(ErrorClass::Locked) => Error::Locked { message },
            Some(ErrorClass::AlreadyExists) => Error::AlreadyExists { message },
            Some(ErrorClass::AgentNotReady) => Error::AgentNotReady { message },
            Some(ErrorClass::AgentNotConfigured) => Error::AgentNotConfigured { message },
            Some(ErrorClass::WrongState) => Error::WrongState { message },
            Some(ErrorClass::Rejected) => Error::Rejected { status, message },
            _ => Error::Server { status, message },
        },
        _ => Error::Rejected { status, message },
    }
}

/// Classifies a failed task's exit status the same way as a synchronous error message.
///
/// Returns `None` for messages with no specific class (plain task failures).
pub fn classify_task_exitstatus(exitstatus: &str) -> Option<ErrorClass> {
    message_kind(exitstatus)
}

impl From<reqwest::Error> for Error {
    fn from(e: reqwest::Error) -> Self {
        let timeout = e.is_timeout();
        // Walk the source chain for a useful description without URLs carrying secrets
        // (our URLs never carry secrets, but keep it short).
        let mut message = e.to_string();
        let mut src = std::error::Error::source(&e);
        while let Some(s) = src {
            message.push_str(": ");
            message.push_str(&s.to_string());
            src = s.source();
        }
        if e.is_decode() {
            return Error::Decode {
                context: "response body".into(),
                message,
            };
        }
        // A certificate problem is named first: "connection error" hides what to fix.
        if let Some(problem) = super::tls::describe_certificate_failure(&e) {
            message = format!("{problem}; {message}");
        }
        Error::Network { message, timeout }
    }
}

/// Base delay of the backoff table.
pub const BACKOFF_BASE: Duration = Duration::from_secs(1);
/// Maximum delay of the backoff table.
pub const BACKOFF_CAP: Duration = Duration::from_secs(300);

/// The retry delay before attempt `attempt + 1`: 1, 2, 4, 8, … seconds, capped at 5 minutes.
///
/// `attempt` counts from 0 (the delay after the first failure is `backoff(0)` = 1 s).
pub fn backoff(attempt: u32) -> Duration {
    backoff_with(attempt, BACKOFF_BASE, BACKOFF_CAP)
}

/// Exponential backoff with a custom base and cap: `min(base * 2^attempt, cap)`.
pub fn backoff_with(attempt: u32, base: Duration, cap: Duration) -> Duration {
    let factor = 1u32.checked_shl(attempt.min(31)).unwrap_or(u32::MAX);
    base.checked_mul(factor).map_or(cap, |d| d.min(cap))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err(status: u16, reason: Option<&str>, body: &str) -> Error {
        Error::from_response(status, reason, body.as_bytes())
    }

    #[test]
    fn backoff_table() {
        let secs: Vec<u64> = (0..12).map(|a| backoff(a).as_secs()).collect();
        assert_eq!(secs, vec![1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(300));
        assert_eq!(
            backoff_with(3, Duration::from_millis(10), Duration::from_millis(50)),
            Duration::from_millis(50)
        );
        assert_eq!(
            backoff_with(2, Duration::from_millis(10), Duration::from_secs(1)),
            Duration::from_millis(40)
        );
    }

    #[test]
    fn auth_errors() {
        let e = err(401, Some("No ticket"), "");
        assert_eq!(e.class(), ErrorClass::Auth);
        assert!(!e.is_retryable());
        assert!(e.message().contains("No ticket"));
        let e = err(
            403,
            Some("Permission check failed (/vms/100, VM.Audit)"),
            r#"{"data":null}"#,
        );
        assert!(matches!(e, Error::Auth { status: 403, .. }));
    }

    #[test]
    fn parameter_verification_keeps_errors() {
        let e = err(
            400,
            Some("Parameter verification failed."),
            r#"{"data":null,"errors":{"newid":"value must have a minimum value of 100"},"message":"Parameter verification failed.\n"}"#,
        );
        match &e {
            Error::ParameterVerification { message, errors } => {
                assert_eq!(message, "Parameter verification failed.");
                assert_eq!(
                    errors.get("newid").map(String::as_str),
                    Some("value must have a minimum value of 100")
                );
            }
            other => panic!("unexpected {other:?}"),
        }
        assert!(!e.is_retryable());
    }

    #[test]
    fn nextid_taken_is_already_exists() {
        let e = err(
            400,
            Some("Parameter verification failed."),
            r#"{"data":null,"errors":{"vmid":"VM 101 already exists"},"message":"Parameter verification failed.\n"}"#,
        );
        assert_eq!(e.class(), ErrorClass::AlreadyExists);
        assert!(e.message().contains("VM 101 already exists"));
        assert!(!e.is_retryable());
        let e = err(
            500,
            Some("unable to create VM 100 - VM 100 already exists on node 'pve2'"),
            "",
        );
        assert_eq!(e.class(), ErrorClass::AlreadyExists);
    }

    #[test]
    fn not_found_variants() {
        for msg in [
            "Configuration file 'nodes/pve1/qemu-server/117.conf' does not exist",
            "unable to find configuration file for VM 117 on node 'pve1'",
            "no such VM ('117')",
        ] {
            let e = err(500, Some(msg), "");
            assert!(e.is_not_found(), "{msg}");
            assert_eq!(e.message(), msg);
        }
        let e = err(
            400,
            Some("Parameter verification failed."),
            r#"{"errors":{"upid":"no such task"}}"#,
        );
        assert!(e.is_not_found());
    }

    #[test]
    fn locked_and_conflict() {
        for (status, msg) in [
            (500, "VM is locked (clone)"),
            (
                500,
                "can't lock file '/var/lock/qemu-server/lock-100.conf' - got timeout",
            ),
            (409, "Conflict"),
            (500, "checksum mismatch (file change by other user?)"),
        ] {
            let e = err(status, Some(msg), "");
            assert_eq!(e.class(), ErrorClass::Locked, "{msg}");
            assert!(e.is_retryable());
        }
    }

    #[test]
    fn message_from_body_when_reason_is_canonical_or_missing() {
        let e = err(
            500,
            Some("Internal Server Error"),
            r#"{"data":null,"message":"VM 100 not running\n"}"#,
        );
        assert_eq!(e.class(), ErrorClass::WrongState);
        assert_eq!(e.message(), "VM 100 not running");
        let e = err(
            500,
            None,
            r#"{"data":null,"message":"QEMU guest agent is not running\n"}"#,
        );
        assert_eq!(e.class(), ErrorClass::AgentNotReady);
        assert!(e.is_retryable());
        let e = err(500, Some("No QEMU guest agent configured"), "");
        assert_eq!(e.class(), ErrorClass::AgentNotConfigured);
        assert!(!e.is_retryable());
    }

    #[test]
    fn server_rejected_and_proxy() {
        let e = err(500, Some("something odd happened"), "");
        assert!(matches!(e, Error::Server { status: 500, .. }));
        assert!(e.is_retryable());
        let e = err(
            595,
            Some("Errors during connection establishment, proxy handshake: No route to host"),
            "",
        );
        assert_eq!(e.class(), ErrorClass::Server);
        let e = err(
            501,
            Some("Method 'GET /nodes/pve/foo' not implemented"),
            "Method 'GET /nodes/pve/foo' not implemented",
        );
        assert_eq!(e.class(), ErrorClass::Rejected);
        assert!(!e.is_retryable());
        assert!(e.message().contains("not implemented"));
        let e = err(502, None, "");
        assert_eq!(e.message(), "HTTP 502");
    }

    #[test]
    fn permanent_500s_are_rejected() {
        for msg in [
            "Linked clone feature is not supported for 'local-lvm:vm-101-disk-0' (scsi0)",
            "parameter 'storage' not allowed for linked clones",
            "unable to remove VM 101 - used in HA resources and purge parameter not set.",
            "can't remove VM 101 - protection mode enabled",
            "you can't convert a template to a template",
            "hostname lookup 'pve9' failed - failed to get address info for: pve9: Name or service not known",
        ] {
            let e = err(500, Some(msg), "");
            assert!(matches!(e, Error::Rejected { status: 500, .. }), "{msg}: {e:?}");
            assert!(!e.is_retryable());
        }
    }

    #[test]
    fn task_exitstatus_classification() {
        assert_eq!(
            classify_task_exitstatus("VM is locked (clone)"),
            Some(ErrorClass::Locked)
        );
        assert_eq!(
            classify_task_exitstatus("VM 100 already running"),
            Some(ErrorClass::WrongState)
        );
        assert_eq!(classify_task_exitstatus("clone failed: out of space"), None);
        assert_eq!(
            classify_task_exitstatus("you can't start a vm if it's a template"),
            Some(ErrorClass::Rejected)
        );
        assert_eq!(
            classify_task_exitstatus("shrinking disks is not supported"),
            Some(ErrorClass::Rejected)
        );
    }

    #[test]
    fn class_labels_are_unique() {
        let all = [
            ErrorClass::Auth,
            ErrorClass::ParameterVerification,
            ErrorClass::NotFound,
            ErrorClass::Locked,
            ErrorClass::AlreadyExists,
            ErrorClass::WrongState,
            ErrorClass::AgentNotReady,
            ErrorClass::AgentNotConfigured,
            ErrorClass::Server,
            ErrorClass::Rejected,
            ErrorClass::Network,
            ErrorClass::Decode,
            ErrorClass::TaskFailed,
            ErrorClass::TaskTimeout,
            ErrorClass::Invalid,
        ];
        let labels: std::collections::BTreeSet<_> = all.iter().map(|c| c.as_str()).collect();
        assert_eq!(labels.len(), all.len());
    }

    proptest::proptest! {
        #[test]
        fn backoff_monotonic_and_capped(a in 0u32..1000) {
            let d = backoff(a);
            proptest::prop_assert!(d >= BACKOFF_BASE && d <= BACKOFF_CAP);
            proptest::prop_assert!(backoff(a + 1) >= d);
        }

        #[test]
        fn from_response_never_panics(status in 100u16..600, reason in proptest::option::of("\\PC{0,40}"), body in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let e = Error::from_response(status, reason.as_deref(), &body);
            proptest::prop_assert!(!e.message().is_empty());
        }
    }
}
