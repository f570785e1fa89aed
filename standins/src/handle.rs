//! [`StandInHandle`]: a running stand-in, stopped on drop or with [`StandInHandle::stop`].

use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

/// How long [`StandInHandle::stop`] waits for the controllers to finish before aborting them.
const STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// A running stand-in. Dropping it stops the stand-in (its task is aborted); [`stop`](Self::stop)
/// stops it gracefully and waits.
#[derive(Debug)]
pub struct StandInHandle {
    name: &'static str,
    stop: watch::Sender<bool>,
    task: Option<JoinHandle<()>>,
}

/// The receiving side of a stop signal: completes once the handle is stopped or dropped.
#[derive(Debug, Clone)]
pub(crate) struct StopSignal(watch::Receiver<bool>);

impl StopSignal {
    /// Completes when the stand-in must stop.
    pub(crate) async fn wait(mut self) {
        let _ = self.0.wait_for(|stop| *stop).await;
    }
}

impl StandInHandle {
    /// Spawns `run` with a stop signal and returns its handle.
    pub(crate) fn spawn<F, Fut>(name: &'static str, run: F) -> Self
    where
        F: FnOnce(StopSignal) -> Fut,
        Fut: std::future::Future<Output = ()> + Send + 'static,
    {
        let (stop, rx) = watch::channel(false);
        let task = tokio::spawn(run(StopSignal(rx)));
        tracing::debug!(stand_in = name, "stand-in started");
        Self {
            name,
            stop,
            task: Some(task),
        }
    }

    /// Name of the stand-in (for logs).
    pub fn name(&self) -> &'static str {
        self.name
    }

    /// Whether the stand-in's task has ended (it only ends when stopped, or on a panic).
    pub fn is_finished(&self) -> bool {
        self.task.as_ref().is_none_or(JoinHandle::is_finished)
    }

    /// Stops the stand-in and waits (up to 10 s, then aborts) until its controllers have ended.
    pub async fn stop(mut self) {
        let _ = self.stop.send(true);
        if let Some(mut task) = self.task.take()
            && tokio::time::timeout(STOP_TIMEOUT, &mut task).await.is_err()
        {
            tracing::warn!(stand_in = self.name, "stand-in did not stop in time; aborting it");
            task.abort();
        }
    }
}

impl Drop for StandInHandle {
    fn drop(&mut self) {
        let _ = self.stop.send(true);
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}
