//! Injected endpoint faults: latency, errors, dropped connections.

use std::time::Duration;

use crate::error::ApiError;
use crate::state::SimState;

/// What the injected faults decided for one request.
#[derive(Default)]
pub(super) struct FaultOutcome {
    /// Answer with this error instead of processing the request.
    pub(super) error: Option<ApiError>,
    /// Close the connection without processing the request.
    pub(super) drop_before: bool,
    /// Process the request, then close the connection without answering.
    pub(super) drop_after: bool,
}

/// Rolls the configured faults for one request (after waiting out any injected latency).
pub(super) async fn apply_faults(state: &SimState, key: &'static str) -> FaultOutcome {
    let (latency, outcome) = state.with(|c| {
        let faults: Vec<_> = c
            .faults
            .endpoints
            .iter()
            .filter(|f| f.endpoint == key || f.endpoint == "*")
            .cloned()
            .collect();
        let mut latency = 0;
        let mut out = FaultOutcome::default();
        for f in faults {
            if f.latency_ms > 0
                && f.latency_rate
                    .is_none_or(|p| c.fault_roll(&format!("latency {key}"), p))
            {
                latency += f.latency_ms;
            }
            if !out.drop_before && c.fault_roll(&format!("drop {key}"), f.drop_rate) {
                out.drop_before = true;
            }
            if !out.drop_after && c.fault_roll(&format!("drop-after {key}"), f.drop_after_rate) {
                out.drop_after = true;
            }
            if out.error.is_none() && c.fault_roll(key, f.error_rate) {
                out.error = Some(ApiError::status(f.status, f.message.clone()));
            }
        }
        (latency, out)
    });
    if latency > 0 {
        tokio::time::sleep(Duration::from_millis(latency)).await;
    }
    outcome
}
