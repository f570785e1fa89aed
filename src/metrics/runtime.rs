//! controller-runtime's metric families, under controller-runtime's names, labels and buckets, so
//! the dashboards and alerts written for Go providers (capmox's, CAPI's) work unchanged.
//!
//! kube-runtime has no client-go workqueue; what each family measures for us:
//! - `controller_runtime_reconcile_total{controller,result}`: finished reconciles; `result` is
//!   `success` (the reconcile asked for nothing), `requeue_after` (it asked to run again after a
//!   delay), `requeue` (again at once) or `error`;
//! - `controller_runtime_reconcile_errors_total{controller}`: reconciles that returned an error;
//! - `controller_runtime_terminal_reconcile_errors_total{controller}`: always 0 (every error of
//!   ours is retried);
//! - `controller_runtime_reconcile_panics_total{controller}`: reconciles that panicked;
//! - `controller_runtime_reconcile_time_seconds{controller}`: reconcile wall time;
//! - `controller_runtime_max_concurrent_reconciles{controller}`: the controller's concurrency;
//! - `controller_runtime_active_workers{controller}`: reconciles running now;
//! - `workqueue_adds_total{name,controller}`: reconcile requests that entered the queue: a watch
//!   event mapped to an object that was not already waiting (kube-runtime's scheduler merges
//!   repeated requests of one object exactly like client-go's dirty set), or a requested requeue
//!   whose delay ran out;
//! - `workqueue_depth{name,controller,priority}`: requests waiting for a worker (`priority` is
//!   always empty: there is no priority queue);
//! - `workqueue_queue_duration_seconds{name,controller}`: how long a request waited before its
//!   reconcile started;
//! - `workqueue_work_duration_seconds{name,controller}`: reconcile wall time;
//! - `workqueue_retries_total{name,controller}`: requeues with a delay (after an error, or asked by
//!   the reconcile), as client-go counts `AddAfter`;
//! - `workqueue_unfinished_work_seconds{name,controller}`: seconds of work in progress (the sum over
//!   running reconciles);
//! - `workqueue_longest_running_processor_seconds{name,controller}`: the longest running reconcile.
//!
//! The queue name is the controller name (`proxmoxcluster`, `proxmoxmachine`, …), as in
//! controller-runtime where both labels carry it.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use super::ControllerLabels;

/// controller-runtime's `controller_runtime_reconcile_time_seconds` buckets.
pub const RECONCILE_TIME_BUCKETS: [f64; 40] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25,
    1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0, 15.0, 20.0, 25.0, 30.0, 40.0,
    50.0, 60.0,
];

/// The `result` values of `controller_runtime_reconcile_total`.
pub const RESULTS: [&str; 4] = ["success", "error", "requeue", "requeue_after"];

/// Label set `{controller, result}`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct ResultLabels {
    /// Controller name.
    pub controller: String,
    /// `success`, `error`, `requeue` or `requeue_after`.
    pub result: String,
}

/// Label set `{name, controller}` of the workqueue families.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct QueueLabels {
    /// Queue name (the controller name).
    pub name: String,
    /// Controller name.
    pub controller: String,
}

/// Label set `{name, controller, priority}` of `workqueue_depth`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, EncodeLabelSet)]
pub struct DepthLabels {
    /// Queue name (the controller name).
    pub name: String,
    /// Controller name.
    pub controller: String,
    /// Always empty (no priority queue).
    pub priority: String,
}

type HistogramFamily<L> = Family<L, Histogram, fn() -> Histogram>;

fn reconcile_time() -> Histogram {
    Histogram::new(RECONCILE_TIME_BUCKETS)
}

fn queue_histogram() -> Histogram {
    // client-go's ExponentialBuckets(10e-9, 10, 12): 10 ns .. 1000 s.
    Histogram::new(exponential_buckets(1e-8, 10.0, 12))
}

/// The families, registered once per [`super::Metrics`].
#[derive(Debug)]
pub struct RuntimeMetrics {
    reconcile_total: Family<ResultLabels, Counter>,
    reconcile_errors: Family<ControllerLabels, Counter>,
    terminal_errors: Family<ControllerLabels, Counter>,
    panics: Family<ControllerLabels, Counter>,
    reconcile_time: HistogramFamily<ControllerLabels>,
    max_concurrent: Family<ControllerLabels, Gauge>,
    active_workers: Family<ControllerLabels, Gauge>,
    depth: Family<DepthLabels, Gauge>,
    adds: Family<QueueLabels, Counter>,
    queue_duration: HistogramFamily<QueueLabels>,
    work_duration: HistogramFamily<QueueLabels>,
    unfinished: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    longest_running: Family<QueueLabels, Gauge<f64, AtomicU64>>,
    retries: Family<QueueLabels, Counter>,
    probes: Mutex<HashMap<String, Arc<ControllerProbe>>>,
}

impl RuntimeMetrics {
    /// Creates the families and registers them in `registry`.
    pub fn register(registry: &mut Registry) -> Arc<Self> {
        let m = Arc::new(Self {
            reconcile_total: Family::default(),
            reconcile_errors: Family::default(),
            terminal_errors: Family::default(),
            panics: Family::default(),
            reconcile_time: Family::new_with_constructor(reconcile_time),
            max_concurrent: Family::default(),
            active_workers: Family::default(),
            depth: Family::default(),
            adds: Family::default(),
            queue_duration: Family::new_with_constructor(queue_histogram),
            work_duration: Family::new_with_constructor(queue_histogram),
            unfinished: Family::default(),
            longest_running: Family::default(),
            retries: Family::default(),
            probes: Mutex::default(),
        });
        // Counters get the `_total` suffix from the encoder.
        registry.register(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            m.reconcile_total.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            m.reconcile_errors.clone(),
        );
        registry.register(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            m.terminal_errors.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            m.panics.clone(),
        );
        registry.register(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            m.reconcile_time.clone(),
        );
        registry.register(
            "controller_runtime_max_concurrent_reconciles",
            "Maximum number of concurrent reconciles per controller",
            m.max_concurrent.clone(),
        );
        registry.register(
            "controller_runtime_active_workers",
            "Number of currently used workers per controller",
            m.active_workers.clone(),
        );
        registry.register(
            "workqueue_depth",
            "Current depth of workqueue by workqueue and priority",
            m.depth.clone(),
        );
        registry.register(
            "workqueue_adds",
            "Total number of adds handled by workqueue",
            m.adds.clone(),
        );
        registry.register(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            m.queue_duration.clone(),
        );
        registry.register(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes",
            m.work_duration.clone(),
        );
        registry.register(
            "workqueue_unfinished_work_seconds",
            "How many seconds of work has been done that is in progress and hasn't been observed by work_duration. Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases",
            m.unfinished.clone(),
        );
        registry.register(
            "workqueue_longest_running_processor_seconds",
            "How many seconds has the longest running processor for workqueue been running",
            m.longest_running.clone(),
        );
        registry.register(
            "workqueue_retries",
            "Total number of retries handled by workqueue",
            m.retries.clone(),
        );
        m
    }

    /// The probe of `controller` (a fresh one each time the controller starts, e.g. after a
    /// leadership change), with its series created at zero and its concurrency recorded.
    pub fn controller(self: &Arc<Self>, controller: &str, max_concurrent: u16) -> Arc<ControllerProbe> {
        let c = ControllerLabels {
            controller: controller.to_owned(),
        };
        for result in RESULTS {
            let _ = self.reconcile_total.get_or_create(&ResultLabels {
                controller: controller.to_owned(),
                result: result.to_owned(),
            });
        }
        for family in [&self.reconcile_errors, &self.terminal_errors, &self.panics] {
            let _ = family.get_or_create(&c);
        }
        let _ = self.reconcile_time.get_or_create(&c);
        self.max_concurrent
            .get_or_create(&c)
            .set(i64::from(max_concurrent));
        self.active_workers.get_or_create(&c).set(0);
        let q = QueueLabels {
            name: controller.to_owned(),
            controller: controller.to_owned(),
        };
        let _ = (self.adds.get_or_create(&q), self.retries.get_or_create(&q));
        let _ = (
            self.queue_duration.get_or_create(&q),
            self.work_duration.get_or_create(&q),
        );
        let probe = Arc::new(ControllerProbe {
            metrics: Arc::clone(self),
            labels: c,
            queue: q,
            state: Mutex::default(),
            next_run: AtomicU64::new(0),
        });
        probe.refresh();
        lock(&self.probes).insert(controller.to_owned(), Arc::clone(&probe));
        probe
    }

    /// Brings the gauges computed from time (depth, unfinished work, longest running) up to now;
    /// called before every scrape.
    pub fn refresh(&self) {
        let probes: Vec<_> = lock(&self.probes).values().cloned().collect();
        for p in probes {
            p.refresh();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `namespace/name` of an object in the queue.
pub type QueueKey = (String, String);

#[derive(Debug, Default)]
struct QueueState {
    /// Requests waiting for a worker, with when they became ready.
    waiting: HashMap<QueueKey, Instant>,
    /// Requested requeues not yet due, with when they are.
    delayed: HashMap<QueueKey, Instant>,
    /// Running reconciles by run id, with when they started.
    running: HashMap<u64, Instant>,
}

/// How a reconcile ended, for `controller_runtime_reconcile_total{result}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing requested.
    Success,
    /// Run again after this delay (zero: at once).
    Requeue(Duration),
    /// Returned an error (the error policy's requeue is recorded by [`ControllerProbe::requeued`]).
    Error,
}

/// One controller's view of its queue and workers.
#[derive(Debug)]
pub struct ControllerProbe {
    metrics: Arc<RuntimeMetrics>,
    labels: ControllerLabels,
    queue: QueueLabels,
    state: Mutex<QueueState>,
    next_run: AtomicU64,
}

fn key(namespace: Option<&str>, name: &str) -> QueueKey {
    (namespace.unwrap_or_default().to_owned(), name.to_owned())
}

impl ControllerProbe {
    /// The controller name.
    pub fn controller(&self) -> &str {
        &self.labels.controller
    }

    /// Moves due requeues into the waiting set (each is an add, as client-go's delaying queue
    /// adds an item when its delay runs out).
    fn promote(&self, s: &mut QueueState, now: Instant) {
        let due: Vec<QueueKey> = s
            .delayed
            .iter()
            .filter(|(_, at)| **at <= now)
            .map(|(k, _)| k.clone())
            .collect();
        for k in due {
            if let Some(at) = s.delayed.remove(&k)
                && !s.waiting.contains_key(&k)
            {
                s.waiting.insert(k, at);
                self.metrics.adds.get_or_create(&self.queue).inc();
            }
        }
    }

    fn set_depth(&self, s: &QueueState) {
        let labels = DepthLabels {
            name: self.queue.name.clone(),
            controller: self.queue.controller.clone(),
            priority: String::new(),
        };
        self.metrics
            .depth
            .get_or_create(&labels)
            .set(i64::try_from(s.waiting.len()).unwrap_or(i64::MAX));
    }

    /// A watch event asked to reconcile `namespace/name`.
    pub fn triggered(&self, namespace: Option<&str>, name: &str) {
        let now = Instant::now();
        let mut s = lock(&self.state);
        self.promote(&mut s, now);
        let k = key(namespace, name);
        if let std::collections::hash_map::Entry::Vacant(e) = s.waiting.entry(k) {
            e.insert(now);
            self.metrics.adds.get_or_create(&self.queue).inc();
        }
        self.set_depth(&s);
    }

    /// A reconcile of `namespace/name` starts; finish it with [`Run::finish`].
    pub fn started(self: &Arc<Self>, namespace: Option<&str>, name: &str) -> Run {
        let now = Instant::now();
        let k = key(namespace, name);
        let id = self.next_run.fetch_add(1, Ordering::Relaxed);
        {
            let mut s = lock(&self.state);
            self.promote(&mut s, now);
            // The scheduler merged any pending request of this object into this run.
            s.delayed.remove(&k);
            let waited = match s.waiting.remove(&k) {
                Some(since) => now.saturating_duration_since(since),
                None => {
                    // A request no probe saw (e.g. a requeue whose delay could not be read).
                    self.metrics.adds.get_or_create(&self.queue).inc();
                    Duration::ZERO
                }
            };
            self.metrics
                .queue_duration
                .get_or_create(&self.queue)
                .observe(waited.as_secs_f64());
            s.running.insert(id, now);
            self.set_depth(&s);
        }
        self.metrics.active_workers.get_or_create(&self.labels).inc();
        Run {
            probe: Arc::clone(self),
            key: k,
            id,
            start: now,
            done: false,
        }
    }

    /// A requeue of `namespace/name` after `delay` was requested (by the reconcile or the error
    /// policy); `retry` counts it in `workqueue_retries_total` (a resync does not).
    pub fn requeued(&self, namespace: Option<&str>, name: &str, delay: Duration, retry: bool) {
        if retry {
            self.metrics.retries.get_or_create(&self.queue).inc();
        }
        let due = Instant::now() + delay;
        let mut s = lock(&self.state);
        let entry = s.delayed.entry(key(namespace, name)).or_insert(due);
        *entry = (*entry).min(due);
    }

    /// A request for an object that is no longer in the cache was dropped by the controller.
    pub fn dropped(&self, namespace: Option<&str>, name: &str) {
        let k = key(namespace, name);
        let mut s = lock(&self.state);
        s.waiting.remove(&k);
        s.delayed.remove(&k);
        self.set_depth(&s);
    }

    /// Updates depth, unfinished work and the longest running reconcile to now.
    pub fn refresh(&self) {
        let now = Instant::now();
        let mut s = lock(&self.state);
        self.promote(&mut s, now);
        self.set_depth(&s);
        let ages = s
            .running
            .values()
            .map(|t| now.saturating_duration_since(*t).as_secs_f64());
        let (sum, max) = ages.fold((0.0, 0.0), |(sum, max): (f64, f64), a| (sum + a, max.max(a)));
        self.metrics.unfinished.get_or_create(&self.queue).set(sum);
        self.metrics.longest_running.get_or_create(&self.queue).set(max);
    }

    fn end(&self, id: u64) {
        lock(&self.state).running.remove(&id);
        self.metrics.active_workers.get_or_create(&self.labels).dec();
    }
}

/// A running reconcile (see [`ControllerProbe::started`]); dropping it unfinished (a cancelled
/// reconcile) only frees the worker.
#[derive(Debug)]
#[must_use = "finish the run with its outcome"]
pub struct Run {
    probe: Arc<ControllerProbe>,
    key: QueueKey,
    id: u64,
    start: Instant,
    done: bool,
}

impl Run {
    /// Records how the reconcile ended.
    pub fn finish(mut self, outcome: Outcome) {
        let m = &self.probe.metrics;
        let elapsed = self.start.elapsed().as_secs_f64();
        m.reconcile_time
            .get_or_create(&self.probe.labels)
            .observe(elapsed);
        m.work_duration.get_or_create(&self.probe.queue).observe(elapsed);
        let result = match outcome {
            Outcome::Success => "success",
            Outcome::Requeue(d) if d.is_zero() => "requeue",
            Outcome::Requeue(_) => "requeue_after",
            Outcome::Error => {
                m.reconcile_errors.get_or_create(&self.probe.labels).inc();
                "error"
            }
        };
        m.reconcile_total
            .get_or_create(&ResultLabels {
                controller: self.probe.labels.controller.clone(),
                result: result.to_owned(),
            })
            .inc();
        if let Outcome::Requeue(d) = outcome {
            let (ns, name) = &self.key;
            self.probe.requeued(Some(ns), name, d, true);
        }
        self.done = true;
        self.probe.end(self.id);
    }

    /// Records a panicking reconcile.
    pub fn panicked(mut self) {
        self.probe.metrics.panics.get_or_create(&self.probe.labels).inc();
        self.done = true;
        self.probe.end(self.id);
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        if !self.done {
            self.probe.end(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(registry: &Registry) -> String {
        let mut out = String::new();
        prometheus_client::encoding::text::encode(&mut out, registry).unwrap();
        out
    }

    #[test]
    fn queue_counts_like_client_go() {
        let mut registry = Registry::default();
        let m = RuntimeMetrics::register(&mut registry);
        let p = m.controller("proxmoxmachine", 10);
        p.triggered(Some("ns"), "a");
        p.triggered(Some("ns"), "a"); // merged: not an add
        p.triggered(Some("ns"), "b");
        m.refresh();
        let text = render(&registry);
        for needle in [
            "controller_runtime_max_concurrent_reconciles{controller=\"proxmoxmachine\"} 10",
            "workqueue_adds_total{name=\"proxmoxmachine\",controller=\"proxmoxmachine\"} 2",
            "workqueue_depth{name=\"proxmoxmachine\",controller=\"proxmoxmachine\",priority=\"\"} 2",
            "controller_runtime_reconcile_total{controller=\"proxmoxmachine\",result=\"error\"} 0",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        let run = p.started(Some("ns"), "a");
        m.refresh();
        assert!(
            render(&registry).contains("controller_runtime_active_workers{controller=\"proxmoxmachine\"} 1")
        );
        run.finish(Outcome::Requeue(Duration::ZERO));
        p.started(Some("ns"), "b").finish(Outcome::Error);
        p.requeued(Some("ns"), "b", Duration::from_secs(3600), true);
        p.started(Some("ns"), "c").finish(Outcome::Success);
        m.refresh();
        let text = render(&registry);
        for needle in [
            "controller_runtime_reconcile_total{controller=\"proxmoxmachine\",result=\"requeue\"} 1",
            "controller_runtime_reconcile_total{controller=\"proxmoxmachine\",result=\"error\"} 1",
            "controller_runtime_reconcile_total{controller=\"proxmoxmachine\",result=\"success\"} 1",
            "controller_runtime_reconcile_errors_total{controller=\"proxmoxmachine\"} 1",
            "controller_runtime_active_workers{controller=\"proxmoxmachine\"} 0",
            // a's immediate requeue is due at once: waiting again; b's is an hour away.
            "workqueue_depth{name=\"proxmoxmachine\",controller=\"proxmoxmachine\",priority=\"\"} 1",
            "workqueue_retries_total{name=\"proxmoxmachine\",controller=\"proxmoxmachine\"} 2",
            // a, b, a again, and c (which no trigger announced).
            "workqueue_adds_total{name=\"proxmoxmachine\",controller=\"proxmoxmachine\"} 4",
            "controller_runtime_reconcile_time_seconds_bucket{le=\"60.0\",controller=\"proxmoxmachine\"} 3",
            "workqueue_work_duration_seconds_count{name=\"proxmoxmachine\",controller=\"proxmoxmachine\"} 3",
            "workqueue_queue_duration_seconds_count{name=\"proxmoxmachine\",controller=\"proxmoxmachine\"} 3",
        ] {
            assert!(text.contains(needle), "missing {needle:?} in\n{text}");
        }
        p.dropped(Some("ns"), "a");
        m.refresh();
        assert!(render(&registry).contains(
            "workqueue_depth{name=\"proxmoxmachine\",controller=\"proxmoxmachine\",priority=\"\"} 0"
        ));
    }

    #[test]
    fn running_work_is_measured_and_cancelled_runs_free_their_worker() {
        let mut registry = Registry::default();
        let m = RuntimeMetrics::register(&mut registry);
        let p = m.controller("proxmoxcluster", 2);
        let run = p.started(None, "x");
        m.refresh();
        let text = render(&registry);
        let line = text
            .lines()
            .find(|l| l.starts_with("workqueue_longest_running_processor_seconds{"))
            .unwrap();
        let v: f64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert!(v > 0.0, "{line}");
        drop(run);
        m.refresh();
        let text = render(&registry);
        assert!(
            text.contains("controller_runtime_active_workers{controller=\"proxmoxcluster\"} 0"),
            "{text}"
        );
        assert!(text.contains(
            "workqueue_longest_running_processor_seconds{name=\"proxmoxcluster\",controller=\"proxmoxcluster\"} 0.0"
        ), "{text}");
    }
}
