//! What every controller runs its reconciles through: controller-runtime's metrics (see
//! [`crate::metrics::runtime`]) and the resync (`--sync-period`).
//!
//! kube-runtime's `Controller` has no queue of its own to observe, so the probe sees requests
//! where they enter: the trigger streams and mappers pass through [`Instrument::objects`],
//! [`Instrument::mapper`] and [`Instrument::refs`], requeues through the wrapped reconcile and
//! error policy of [`RunInstrumented::run_instrumented`].

use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::{FutureExt, Stream, StreamExt};
use kube::Resource;
use kube::runtime::Controller;
use kube::runtime::controller::{Action, Error as ControllerError};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;

use crate::context::Context;
use crate::metrics::runtime::{ControllerProbe, Outcome};

/// The delay an [`Action`] asks for (`None`: await a change). kube-runtime keeps it private; its
/// `Debug` form (`Action { requeue_after: Some(5s) }`) is pinned by a test.
pub fn requeue_after(action: &Action) -> Option<Duration> {
    if *action == Action::await_change() {
        return None;
    }
    let text = format!("{action:?}");
    let inner = text.split_once("Some(")?.1.rsplit_once(')')?.0;
    parse_debug_duration(inner.trim())
}

/// Parses Rust's `Debug` form of a `Duration` (`1.5s`, `250ms`, `10µs`, `7ns`) exactly.
fn parse_debug_duration(s: &str) -> Option<Duration> {
    let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.'))?;
    let (num, unit) = s.split_at(split);
    let scale: u32 = match unit {
        "s" => 9,
        "ms" => 6,
        "µs" | "us" => 3,
        "ns" => 0,
        _ => return None,
    };
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    let frac = frac.get(..frac.len().min(scale as usize))?;
    let digits = format!("{frac:0<width$}", width = scale as usize);
    let nanos = int
        .parse::<u128>()
        .ok()?
        .checked_mul(10u128.pow(scale))?
        .checked_add(if digits.is_empty() {
            0
        } else {
            digits.parse::<u128>().ok()?
        })?;
    let secs = u64::try_from(nanos / 1_000_000_000).ok()?;
    Some(Duration::new(secs, u32::try_from(nanos % 1_000_000_000).ok()?))
}

/// A controller's probe and resync period.
#[derive(Debug, Clone)]
pub struct Instrument {
    probe: Arc<ControllerProbe>,
    sync_period: Option<Duration>,
}

impl Instrument {
    /// The instrument of `controller`, running `concurrency` reconciles at once.
    pub fn new(ctx: &Context, controller: &str, concurrency: u16) -> Self {
        Self {
            probe: ctx.metrics.runtime().controller(controller, concurrency),
            sync_period: ctx.settings.sync_period.filter(|d| !d.is_zero()),
        }
    }

    /// The probe.
    pub fn probe(&self) -> &Arc<ControllerProbe> {
        &self.probe
    }

    /// A trigger stream of the controller's own kind: each object is a request.
    pub fn objects<K, E, S>(&self, stream: S) -> impl Stream<Item = Result<K, E>> + Send + use<K, E, S>
    where
        K: Resource,
        S: Stream<Item = Result<K, E>> + Send,
    {
        let probe = Arc::clone(&self.probe);
        stream.inspect(move |r| {
            if let Ok(o) = r {
                probe.triggered(
                    o.meta().namespace.as_deref(),
                    o.meta().name.as_deref().unwrap_or_default(),
                );
            }
        })
    }

    /// A stream of object references (`reconcile_on`): each is a request.
    pub fn refs<K, S>(&self, stream: S) -> impl Stream<Item = ObjectRef<K>> + Send + use<K, S>
    where
        K: Resource,
        S: Stream<Item = ObjectRef<K>> + Send,
    {
        let probe = Arc::clone(&self.probe);
        stream.inspect(move |r| probe.triggered(r.namespace.as_deref(), &r.name))
    }

    /// A watch mapper: every object reference it returns is a request.
    pub fn mapper<T, I, K>(
        &self,
        map: impl Fn(T) -> I + Send + Sync + 'static,
    ) -> impl Fn(T) -> Vec<ObjectRef<K>> + Send + Sync + 'static
    where
        I: IntoIterator<Item = ObjectRef<K>>,
        K: Resource,
    {
        let probe = Arc::clone(&self.probe);
        move |obj| {
            let refs: Vec<_> = map(obj).into_iter().collect();
            for r in &refs {
                probe.triggered(r.namespace.as_deref(), &r.name);
            }
            refs
        }
    }

    /// The resync: a reconcile that asks for nothing (or for a later run) runs again within the
    /// sync period, jittered by up to 10 % like controller-runtime's.
    fn resync(&self, action: Action) -> (Action, Option<Duration>) {
        let Some(period) = self.sync_period else {
            return (action.clone(), requeue_after(&action));
        };
        use rand::Rng;
        let max_ms = u64::try_from(period.as_millis() / 10).unwrap_or(u64::MAX);
        let period = period + Duration::from_millis(rand::rng().random_range(0..=max_ms));
        match requeue_after(&action) {
            Some(d) if d <= period => (action, Some(d)),
            _ => (Action::requeue(period), Some(period)),
        }
    }
}

/// Result stream of [`Controller::run`].
type RunStream<K, E> = std::pin::Pin<
    Box<dyn Stream<Item = Result<(ObjectRef<K>, Action), ControllerError<E, watcher::Error>>> + Send>,
>;

/// [`Controller::run`] through an [`Instrument`].
pub trait RunInstrumented<K: Resource> {
    /// Runs the controller like [`Controller::run`], recording every reconcile, requeue and
    /// dropped request in the instrument's probe and applying its resync.
    fn run_instrumented<Ctx, Fut, E>(
        self,
        instrument: &Instrument,
        reconcile: impl Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        error_policy: impl Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
        ctx: Arc<Ctx>,
    ) -> RunStream<K, E>
    where
        Ctx: Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + 'static;
}

impl<K> RunInstrumented<K> for Controller<K>
where
    K: Resource + Clone + serde::de::DeserializeOwned + std::fmt::Debug + Send + Sync + 'static,
    K::DynamicType: std::fmt::Debug + Eq + std::hash::Hash + Clone + Unpin + Send + Sync,
{
    fn run_instrumented<Ctx, Fut, E>(
        self,
        instrument: &Instrument,
        reconcile: impl Fn(Arc<K>, Arc<Ctx>) -> Fut + Send + Sync + 'static,
        error_policy: impl Fn(Arc<K>, &E, Arc<Ctx>) -> Action + Send + Sync + 'static,
        ctx: Arc<Ctx>,
    ) -> RunStream<K, E>
    where
        Ctx: Send + Sync + 'static,
        Fut: Future<Output = Result<Action, E>> + Send + 'static,
        E: std::error::Error + Send + 'static,
    {
        let inst = instrument.clone();
        let wrapped = move |obj: Arc<K>, ctx: Arc<Ctx>| {
            let run = inst.probe.started(
                obj.meta().namespace.as_deref(),
                obj.meta().name.as_deref().unwrap_or_default(),
            );
            let fut = AssertUnwindSafe(reconcile(obj, ctx)).catch_unwind();
            let inst = inst.clone();
            async move {
                match fut.await {
                    Ok(Ok(action)) => {
                        let asked = requeue_after(&action);
                        run.finish(asked.map_or(Outcome::Success, Outcome::Requeue));
                        let (action, _) = inst.resync(action);
                        Ok(action)
                    }
                    Ok(Err(e)) => {
                        run.finish(Outcome::Error);
                        Err(e)
                    }
                    Err(panic) => {
                        run.panicked();
                        std::panic::resume_unwind(panic)
                    }
                }
            }
        };
        let probe = Arc::clone(&instrument.probe);
        let policy = move |obj: Arc<K>, err: &E, ctx: Arc<Ctx>| {
            let (ns, name) = (
                obj.meta().namespace.clone(),
                obj.meta().name.clone().unwrap_or_default(),
            );
            let action = error_policy(obj, err, ctx);
            if let Some(d) = requeue_after(&action) {
                probe.requeued(ns.as_deref(), &name, d, true);
            }
            action
        };
        let sync = instrument.clone();
        let dropped = Arc::clone(&instrument.probe);
        self.run(wrapped, policy, ctx)
            .inspect(move |r| match r {
                Err(ControllerError::ObjectNotFound(obj)) => {
                    dropped.dropped(obj.namespace.as_deref(), &obj.name)
                }
                Ok((obj, action)) => {
                    // The resync's requeue (the reconcile's own was recorded by the run).
                    if let (Some(d), true) = (requeue_after(action), sync.sync_period.is_some()) {
                        sync.probe.requeued(obj.namespace.as_deref(), &obj.name, d, false);
                    }
                }
                Err(_) => {}
            })
            .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requeue_delay_is_read_from_actions() {
        assert_eq!(requeue_after(&Action::await_change()), None);
        for d in [
            Duration::ZERO,
            Duration::from_millis(1500),
            Duration::from_millis(250),
            Duration::from_micros(10),
            Duration::from_secs(600),
            Duration::from_secs(3 * 3600 + 7),
            Duration::from_nanos(7),
        ] {
            assert_eq!(requeue_after(&Action::requeue(d)), Some(d), "{d:?}");
        }
    }

    #[test]
    fn resync_caps_long_and_absent_requeues() {
        let metrics = Arc::new(crate::metrics::Metrics::new());
        let probe = metrics.runtime().controller("test", 1);
        let inst = Instrument {
            probe,
            sync_period: Some(Duration::from_secs(600)),
        };
        let (_, d) = inst.resync(Action::await_change());
        let d = d.unwrap();
        assert!(
            d >= Duration::from_secs(600) && d <= Duration::from_secs(660),
            "{d:?}"
        );
        let (_, d) = inst.resync(Action::requeue(Duration::from_secs(5)));
        assert_eq!(d, Some(Duration::from_secs(5)));
        let (_, d) = inst.resync(Action::requeue(Duration::from_secs(7200)));
        assert!(d.unwrap() <= Duration::from_secs(660));
        let none = Instrument {
            sync_period: None,
            ..inst
        };
        assert_eq!(none.resync(Action::await_change()).1, None);
    }
}
