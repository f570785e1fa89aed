//! Fault injection settings.

use serde::{Deserialize, Serialize};

/// Fault injection settings (deterministic under the server's seed).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
#[serde(default, deny_unknown_fields)]
pub struct FaultSpec {
    /// Per-endpoint faults.
    pub endpoints: Vec<EndpointFault>,
    /// Probability that a task fails (applied to every task).
    pub task_failure_rate: f64,
    /// Probability that a clone onto node-local storage fails with storage lock contention
    /// while another clone onto the same storage is running.
    pub storage_lock_contention: f64,
    /// Delay every 401 by 3 s as PVE does.
    pub auth_delay: bool,
    /// Probability that a `qmstart` task fails although the VM ends up running (CAPMOX tolerates this).
    pub start_fails_but_runs: f64,
}

/// A fault applied to one endpoint (or all, with `*`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct EndpointFault {
    /// Endpoint key, `METHOD /path/{template}` (e.g. `POST /nodes/{node}/qemu/{vmid}/clone`), or `*`.
    pub endpoint: String,
    /// Probability of answering with an error.
    #[serde(default)]
    pub error_rate: f64,
    /// HTTP status of injected errors.
    #[serde(default = "default_fault_status")]
    pub status: u16,
    /// Message of injected errors.
    #[serde(default = "default_fault_message")]
    pub message: String,
    /// Extra latency added to matching requests, milliseconds.
    #[serde(default)]
    pub latency_ms: u64,
    /// Probability that `latency_ms` is added to a request (absent: every request).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_rate: Option<f64>,
    /// Probability that the connection is closed before the request is processed (nothing
    /// happens; the client sees a dropped connection).
    #[serde(default)]
    pub drop_rate: f64,
    /// Probability that the request is processed but the connection is closed before the answer
    /// is sent (the change happened; the client never learns of it, e.g. a clone's UPID).
    #[serde(default)]
    pub drop_after_rate: f64,
}

impl Default for EndpointFault {
    /// A fault on every endpoint (`*`) that does nothing until a rate or latency is set.
    fn default() -> Self {
        Self {
            endpoint: "*".to_owned(),
            error_rate: 0.0,
            status: default_fault_status(),
            message: default_fault_message(),
            latency_ms: 0,
            latency_rate: None,
            drop_rate: 0.0,
            drop_after_rate: 0.0,
        }
    }
}

fn default_fault_status() -> u16 {
    500
}
fn default_fault_message() -> String {
    "injected fault".to_string()
}
