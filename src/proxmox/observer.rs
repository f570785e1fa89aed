//! Per-request observation hook for metrics.

use std::time::Duration;

/// Receives one call per HTTP request attempt made by the client.
///
/// `endpoint_template` has parameters replaced (`/nodes/{node}/qemu/{vmid}/config`), so label
/// cardinality stays bounded. `status` is `None` when no response was received.
pub trait RequestObserver: Send + Sync {
    /// Records one request.
    fn observe(&self, method: &str, endpoint_template: &str, status: Option<u16>, elapsed: Duration);
}

/// An observer that does nothing.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoopObserver;

impl RequestObserver for NoopObserver {
    fn observe(&self, _method: &str, _endpoint_template: &str, _status: Option<u16>, _elapsed: Duration) {}
}
