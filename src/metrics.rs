//! Prometheus metrics of the manager, exposed in text format on the metrics address.

use prometheus_client::registry::Registry;

/// The manager's metric families and the registry they are registered in.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Registry rendered by the metrics endpoint.
    pub registry: Registry,
}
