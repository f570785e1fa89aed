//! Prometheus metrics of the manager, exposed in text format on the metrics address.
//!
//! Families (all prefixed `capmox_`):
//! - `capmox_reconcile_total{controller}`: reconciles started;
//! - `capmox_reconcile_errors_total{controller, reason}`: reconciles that ended in an error;
//! - `capmox_reconcile_duration_seconds{controller}`: reconcile wall time;
//! - `capmox_proxmox_cluster_connected{namespace, name}`: 1 when the ProxmoxCluster's Proxmox API
//!   answered the last probe, else 0;
//! - `capmox_proxmox_tls_insecure{namespace, name}`: 1 when the ProxmoxCluster's Proxmox client
//!   does not verify the server certificate (`PROXMOX_INSECURE`, or the credentials Secret's
//!   `insecure` key, absent meaning insecure as in capmox), 0 when it does;
//! - `capmox_proxmox_global_tls_insecure`: 1 when there is a global Proxmox client (from
//!   `PROXMOX_URL`/`PROXMOX_TOKEN`/`PROXMOX_SECRET`) and it does not verify certificates, else 0;
//! - `capmox_proxmox_requests_total{endpoint, method, status}` and
//!   `capmox_proxmox_request_duration_seconds{endpoint, method}`: every Proxmox HTTP request attempt
//!   (`status` is `error` when no response arrived);
//! - `capmox_machines{phase, node}`: ProxmoxMachines by lifecycle phase (the
//!   `VirtualMachineProvisioned` reason, `Deleting`, …) and Proxmox node (empty before placement);
//! - `capmox_leader`: 1 while this process holds the leader Lease (or runs without leader election).
//!
//! Beside them, controller-runtime's own families under its names (see [`runtime`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::proxmox::RequestObserver;

pub mod runtime;

/// Label set `{controller}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ControllerLabels {
    /// Controller name, e.g. `proxmoxcluster`.
    pub controller: String,
}

/// Label set `{controller, reason}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ErrorLabels {
    /// Controller name.
    pub controller: String,
    /// Short machine-readable error reason.
    pub reason: String,
}

/// Label set `{namespace, name}` of a namespaced object.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ObjectLabels {
    /// Object namespace.
    pub namespace: String,
    /// Object name.
    pub name: String,
}

/// Label set `{endpoint, method, status}` of a Proxmox request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct RequestLabels {
    /// Endpoint template, e.g. `/nodes/{node}/qemu/{vmid}/config`.
    pub endpoint: String,
    /// HTTP method.
    pub method: String,
    /// HTTP status code, or `error` when no response was received.
    pub status: String,
}

/// Label set `{phase, node}` of the machine gauge.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct PhaseLabels {
    /// Lifecycle phase.
    pub phase: String,
    /// Proxmox node.
    pub node: String,
}

/// Label set `{endpoint, method}` of a Proxmox request.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct EndpointLabels {
    /// Endpoint template.
    pub endpoint: String,
    /// HTTP method.
    pub method: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_histogram() -> Histogram {
    // 10 ms .. ~80 s
    Histogram::new(exponential_buckets(0.01, 2.0, 14))
}

fn request_histogram() -> Histogram {
    // 5 ms .. ~40 s
    Histogram::new(exponential_buckets(0.005, 2.0, 14))
}

/// The manager's metric families and the registry they are registered in.
#[derive(Debug)]
pub struct Metrics {
    /// Registry rendered by the metrics endpoint. Later controllers register their families here.
    pub registry: Registry,
    reconcile_total: Family<ControllerLabels, Counter>,
    reconcile_errors: Family<ErrorLabels, Counter>,
    reconcile_duration: HistogramFamily<ControllerLabels>,
    cluster_connected: Family<ObjectLabels, Gauge>,
    tls_insecure: Family<ObjectLabels, Gauge>,
    global_tls_insecure: Gauge,
    proxmox_requests: Family<RequestLabels, Counter>,
    proxmox_request_duration: HistogramFamily<EndpointLabels>,
    leader: Gauge,
    machines: Family<PhaseLabels, Gauge>,
    machine_phases: std::sync::Mutex<std::collections::HashMap<(String, String), PhaseLabels>>,
    runtime: Arc<runtime::RuntimeMetrics>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates all families and registers them in a fresh registry.
    pub fn new() -> Self {
        let mut registry = Registry::default();
        let reconcile_total = Family::<ControllerLabels, Counter>::default();
        let reconcile_errors = Family::<ErrorLabels, Counter>::default();
        let reconcile_duration: HistogramFamily<ControllerLabels> =
            Family::new_with_constructor(reconcile_histogram);
        let cluster_connected = Family::<ObjectLabels, Gauge>::default();
        let tls_insecure = Family::<ObjectLabels, Gauge>::default();
        let global_tls_insecure = Gauge::default();
        let proxmox_requests = Family::<RequestLabels, Counter>::default();
        let proxmox_request_duration: HistogramFamily<EndpointLabels> =
            Family::new_with_constructor(request_histogram);
        let leader = Gauge::default();
        let machines = Family::<PhaseLabels, Gauge>::default();

        // Counters get the `_total` suffix from the encoder.
        registry.register(
            "capmox_reconcile",
            "Reconciles started, by controller",
            reconcile_total.clone(),
        );
        registry.register(
            "capmox_reconcile_errors",
            "Reconciles that returned an error, by controller and reason",
            reconcile_errors.clone(),
        );
        registry.register(
            "capmox_reconcile_duration_seconds",
            "Reconcile duration in seconds, by controller",
            reconcile_duration.clone(),
        );
        registry.register(
            "capmox_proxmox_cluster_connected",
            "1 when the ProxmoxCluster's Proxmox API answered the last probe, else 0",
            cluster_connected.clone(),
        );
        registry.register(
            "capmox_proxmox_tls_insecure",
            "1 when the ProxmoxCluster's Proxmox client does not verify the server certificate, else 0",
            tls_insecure.clone(),
        );
        registry.register(
            "capmox_proxmox_global_tls_insecure",
            "1 when the global Proxmox client does not verify the server certificate (PROXMOX_INSECURE), else 0",
            global_tls_insecure.clone(),
        );
        registry.register(
            "capmox_proxmox_requests",
            "Proxmox API request attempts, by endpoint template, method and status",
            proxmox_requests.clone(),
        );
        registry.register(
            "capmox_proxmox_request_duration_seconds",
            "Proxmox API request duration in seconds, by endpoint template and method",
            proxmox_request_duration.clone(),
        );
        registry.register(
            "capmox_leader",
            "1 while this process is the active manager (holds the leader Lease)",
            leader.clone(),
        );

        registry.register(
            "capmox_machines",
            "ProxmoxMachines by lifecycle phase and Proxmox node",
            machines.clone(),
        );

        let runtime = runtime::RuntimeMetrics::register(&mut registry);

        Self {
            registry,
            runtime,
            reconcile_total,
            reconcile_errors,
            reconcile_duration,
            cluster_connected,
            tls_insecure,
            global_tls_insecure,
            proxmox_requests,
            proxmox_request_duration,
            leader,
            machines,
            machine_phases: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    /// Records the phase and node of one ProxmoxMachine (replacing its previous entry).
    pub fn set_machine_phase(&self, namespace: &str, name: &str, phase: &str, node: &str) {
        let labels = PhaseLabels {
            phase: phase.to_owned(),
            node: node.to_owned(),
        };
        let mut m = self
            .machine_phases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let old = m.insert((namespace.to_owned(), name.to_owned()), labels.clone());
        if old.as_ref() == Some(&labels) {
            return;
        }
        if let Some(old) = old {
            self.machines.get_or_create(&old).dec();
        }
        self.machines.get_or_create(&labels).inc();
    }

    /// Forgets a deleted ProxmoxMachine.
    pub fn remove_machine(&self, namespace: &str, name: &str) {
        let mut m = self
            .machine_phases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(old) = m.remove(&(namespace.to_owned(), name.to_owned())) {
            self.machines.get_or_create(&old).dec();
        }
    }

    /// Creates the per-controller series at zero so the families show up before the first
    /// reconcile (called by the manager for every controller it starts).
    pub fn init_controller(&self, controller: &str) {
        let labels = ControllerLabels {
            controller: controller.to_owned(),
        };
        let _ = self.reconcile_total.get_or_create(&labels);
        let _ = self.reconcile_duration.get_or_create(&labels);
    }

    /// Counts a reconcile of `controller` and returns a guard that records its duration on drop.
    pub fn reconcile_started(&self, controller: &str) -> ReconcileTimer {
        let labels = ControllerLabels {
            controller: controller.to_owned(),
        };
        self.reconcile_total.get_or_create(&labels).inc();
        ReconcileTimer {
            histogram: self.reconcile_duration.get_or_create(&labels).clone(),
            start: Instant::now(),
        }
    }

    /// Counts a failed reconcile of `controller` with a short `reason`.
    pub fn reconcile_error(&self, controller: &str, reason: &str) {
        self.reconcile_errors
            .get_or_create(&ErrorLabels {
                controller: controller.to_owned(),
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Number of reconciles of `controller` started so far.
    pub fn reconcile_count(&self, controller: &str) -> u64 {
        self.reconcile_total
            .get_or_create(&ControllerLabels {
                controller: controller.to_owned(),
            })
            .get()
    }

    /// Sets `capmox_proxmox_cluster_connected{namespace, name}` to 1 or 0.
    pub fn set_cluster_connected(&self, namespace: &str, name: &str, connected: bool) {
        self.cluster_connected
            .get_or_create(&ObjectLabels {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            })
            .set(i64::from(connected));
    }

    /// Sets `capmox_proxmox_tls_insecure{namespace, name}`; returns whether the cluster just
    /// became insecure (first seen insecure, or verified before), i.e. when to warn once.
    pub fn set_cluster_tls_insecure(&self, namespace: &str, name: &str, insecure: bool) -> bool {
        let labels = ObjectLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        let known = self.tls_insecure.get(&labels).is_some();
        let previous = self.tls_insecure.get_or_create(&labels).set(i64::from(insecure));
        insecure && (!known || previous == 0)
    }

    /// Sets `capmox_proxmox_global_tls_insecure`.
    pub fn set_global_tls_insecure(&self, insecure: bool) {
        self.global_tls_insecure.set(i64::from(insecure));
    }

    /// Drops the per-cluster series of a deleted ProxmoxCluster.
    pub fn remove_cluster(&self, namespace: &str, name: &str) {
        let labels = ObjectLabels {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        };
        self.cluster_connected.remove(&labels);
        self.tls_insecure.remove(&labels);
    }

    /// Sets `capmox_leader`.
    pub fn set_leader(&self, leader: bool) {
        self.leader.set(i64::from(leader));
    }

    /// Records one Proxmox request attempt.
    pub fn observe_proxmox_request(
        &self,
        method: &str,
        endpoint: &str,
        status: Option<u16>,
        elapsed: Duration,
    ) {
        let status = status.map_or_else(|| "error".to_owned(), |s| s.to_string());
        self.proxmox_requests
            .get_or_create(&RequestLabels {
                endpoint: endpoint.to_owned(),
                method: method.to_owned(),
                status,
            })
            .inc();
        self.proxmox_request_duration
            .get_or_create(&EndpointLabels {
                endpoint: endpoint.to_owned(),
                method: method.to_owned(),
            })
            .observe(elapsed.as_secs_f64());
    }

    /// A [`RequestObserver`] feeding the Proxmox request families, for `proxmox::Client::with_observer`.
    pub fn proxmox_observer(self: &Arc<Self>) -> Arc<dyn RequestObserver> {
        Arc::new(MetricsObserver {
            metrics: Arc::clone(self),
        })
    }

    /// controller-runtime's families (`controller_runtime_*`, `workqueue_*`).
    pub fn runtime(&self) -> &Arc<runtime::RuntimeMetrics> {
        &self.runtime
    }

    /// Renders all families in the Prometheus/OpenMetrics text format.
    pub fn render(&self) -> String {
        self.runtime.refresh();
        let mut out = String::new();
        if let Err(e) = prometheus_client::encoding::text::encode(&mut out, &self.registry) {
            // Writing into a String cannot fail; keep what was written and note the problem.
            tracing::warn!(error = %e, "encoding metrics failed");
        }
        out
    }
}

/// Records a reconcile's duration when dropped (see [`Metrics::reconcile_started`]).
#[derive(Debug)]
#[must_use = "the duration is recorded when the timer is dropped"]
pub struct ReconcileTimer {
    histogram: Histogram,
    start: Instant,
}

impl Drop for ReconcileTimer {
    fn drop(&mut self) {
        self.histogram.observe(self.start.elapsed().as_secs_f64());
    }
}

/// Feeds Proxmox client requests into [`Metrics`].
struct MetricsObserver {
    metrics: Arc<Metrics>,
}

impl RequestObserver for MetricsObserver {
    fn observe(&self, method: &str, endpoint_template: &str, status: Option<u16>, elapsed: Duration) {
        self.metrics
            .observe_proxmox_request(method, endpoint_template, status, elapsed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn render_contains_every_family() {
        let m = Arc::new(Metrics::new());
        m.set_cluster_connected("ns", "c1", true);
        {
            let _t = m.reconcile_started("proxmoxcluster");
        }
        m.reconcile_error("proxmoxcluster", "ProxmoxUnreachable");
        m.proxmox_observer()
            .observe("GET", "/version", Some(200), Duration::from_millis(3));
        m.proxmox_observer()
            .observe("POST", "/nodes/{node}/qemu", None, Duration::from_millis(3));
        m.set_leader(true);
        let text = m.render();
        for needle in [
            "capmox_reconcile_total{controller=\"proxmoxcluster\"} 1",
            "capmox_reconcile_errors_total{controller=\"proxmoxcluster\",reason=\"ProxmoxUnreachable\"} 1",
            "capmox_reconcile_duration_seconds_count{controller=\"proxmoxcluster\"} 1",
            "capmox_proxmox_cluster_connected{namespace=\"ns\",name=\"c1\"} 1",
            "capmox_proxmox_requests_total{endpoint=\"/version\",method=\"GET\",status=\"200\"} 1",
            "capmox_proxmox_requests_total{endpoint=\"/nodes/{node}/qemu\",method=\"POST\",status=\"error\"} 1",
            "capmox_proxmox_request_duration_seconds_count{endpoint=\"/version\",method=\"GET\"} 1",
            "capmox_leader 1",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        assert_eq!(m.reconcile_count("proxmoxcluster"), 1);
        assert_eq!(m.reconcile_count("proxmoxmachine"), 0);
    }

    #[test]
    fn tls_insecure_warns_once_per_transition() {
        let m = Metrics::new();
        assert!(m.set_cluster_tls_insecure("ns", "c1", true), "first sight");
        assert!(!m.set_cluster_tls_insecure("ns", "c1", true), "unchanged");
        assert!(!m.set_cluster_tls_insecure("ns", "c1", false));
        assert!(
            m.set_cluster_tls_insecure("ns", "c1", true),
            "verified, then insecure again"
        );
        assert!(!m.set_cluster_tls_insecure("ns", "c2", false));
        let text = m.render();
        assert!(
            text.contains("capmox_proxmox_tls_insecure{namespace=\"ns\",name=\"c1\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("capmox_proxmox_tls_insecure{namespace=\"ns\",name=\"c2\"} 0"),
            "{text}"
        );
        assert!(text.contains("capmox_proxmox_global_tls_insecure 0"), "{text}");
        m.set_global_tls_insecure(true);
        assert!(m.render().contains("capmox_proxmox_global_tls_insecure 1"));
        m.remove_cluster("ns", "c1");
        assert!(!m.render().contains("name=\"c1\""));
        assert!(
            m.set_cluster_tls_insecure("ns", "c1", true),
            "a recreated cluster warns again"
        );
    }

    #[test]
    fn cluster_connected_flips_and_is_removed() {
        let m = Metrics::new();
        m.set_cluster_connected("ns", "c1", true);
        m.set_cluster_connected("ns", "c1", false);
        assert!(
            m.render()
                .contains("capmox_proxmox_cluster_connected{namespace=\"ns\",name=\"c1\"} 0")
        );
        m.remove_cluster("ns", "c1");
        assert!(!m.render().contains("name=\"c1\""));
    }
}
