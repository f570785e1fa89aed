//! Supervision of the leader's controller tasks and the elector: what ends the run, and a
//! bounded stop.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinSet;

use super::ManagerError;
use crate::leader::LeaderError;

/// A one-shot broadcast "stop" flag; [`Signal::waiter`] futures complete once it is fired.
#[derive(Debug, Clone)]
pub(super) struct Signal(Arc<watch::Sender<bool>>);

impl Signal {
    pub(super) fn new() -> Self {
        Self(Arc::new(watch::channel(false).0))
    }

    pub(super) fn fire(&self) {
        self.0.send_replace(true);
    }

    pub(super) fn waiter(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.0.subscribe();
        async move {
            // An error means the sender is gone, which only happens when the manager is done.
            let _ = rx.wait_for(|stop| *stop).await;
        }
    }
}

/// What ended the supervised phase.
enum Ended {
    Shutdown,
    Controller(Option<Result<&'static str, tokio::task::JoinError>>),
    Elector(Result<Result<(), LeaderError>, tokio::task::JoinError>),
}

/// Waits for whichever ends first: shutdown, a controller, the elector.
pub(super) async fn supervise(
    tasks: &mut JoinSet<&'static str>,
    elector_task: &mut Option<tokio::task::JoinHandle<Result<(), LeaderError>>>,
    shutdown_requested: &Signal,
) -> Result<(), ManagerError> {
    let ended = {
        let elector_done = async {
            match elector_task.as_mut() {
                Some(t) => t.await,
                None => std::future::pending().await,
            }
        };
        let controller_done = async {
            if tasks.is_empty() {
                std::future::pending::<()>().await;
            }
            tasks.join_next().await
        };
        tokio::select! {
            () = shutdown_requested.waiter() => Ended::Shutdown,
            joined = controller_done => Ended::Controller(joined),
            r = elector_done => Ended::Elector(r),
        }
    };
    match ended {
        Ended::Shutdown => {
            tracing::info!("shutdown requested");
            Ok(())
        }
        Ended::Controller(joined) => {
            let name = match joined {
                Some(Ok(name)) => name.to_owned(),
                Some(Err(e)) => format!("<task failed: {e}>"),
                None => "<none>".to_owned(),
            };
            Err(ManagerError::ControllerStopped(name))
        }
        Ended::Elector(r) => {
            // The handle completed; it must not be awaited again.
            *elector_task = None;
            match r {
                Ok(Err(e)) => Err(ManagerError::Leader(e)),
                Ok(Ok(())) => Err(ManagerError::ControllerStopped("leader election".into())),
                Err(e) => Err(ManagerError::Leader(LeaderError::Config(format!(
                    "leader election task failed: {e}"
                )))),
            }
        }
    }
}

/// Waits up to `grace` for the controller tasks, then aborts the rest.
pub(super) async fn stop_controllers(tasks: &mut JoinSet<&'static str>, grace: Duration) {
    let drained = tokio::time::timeout(grace, async { while tasks.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        tracing::warn!(
            ?grace,
            remaining = tasks.len(),
            "controllers did not stop in time, aborting them"
        );
        tasks.abort_all();
        while tasks.join_next().await.is_some() {}
    }
}

pub(super) async fn join_elector(
    t: tokio::task::JoinHandle<Result<(), LeaderError>>,
) -> Result<(), ManagerError> {
    match t.await {
        Ok(r) => r.map_err(ManagerError::Leader),
        Err(e) => Err(ManagerError::Leader(LeaderError::Config(format!(
            "leader election task failed: {e}"
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_elector() -> Option<tokio::task::JoinHandle<Result<(), LeaderError>>> {
        None
    }

    #[tokio::test]
    async fn shutdown_ends_supervision_cleanly() {
        let mut tasks = JoinSet::new();
        tasks.spawn(async {
            std::future::pending::<()>().await;
            "forever"
        });
        let stop = Signal::new();
        stop.fire();
        assert!(supervise(&mut tasks, &mut no_elector(), &stop).await.is_ok());
        stop_controllers(&mut tasks, Duration::from_millis(10)).await;
        assert!(
            tasks.is_empty(),
            "a stuck controller is aborted after the grace period"
        );
    }

    #[tokio::test]
    async fn a_controller_ending_is_an_error() {
        let mut tasks = JoinSet::new();
        tasks.spawn(async { "proxmoxcluster" });
        let r = supervise(&mut tasks, &mut no_elector(), &Signal::new()).await;
        assert!(
            matches!(&r, Err(ManagerError::ControllerStopped(n)) if n == "proxmoxcluster"),
            "{r:?}"
        );
    }

    #[tokio::test]
    async fn lost_leadership_is_an_error_and_the_handle_is_consumed() {
        let mut tasks = JoinSet::new();
        tasks.spawn(async {
            std::future::pending::<()>().await;
            "forever"
        });
        let mut elector = Some(tokio::spawn(async {
            Err(LeaderError::Lost {
                namespace: "ns".into(),
                name: "lease".into(),
            })
        }));
        let r = supervise(&mut tasks, &mut elector, &Signal::new()).await;
        assert!(
            matches!(r, Err(ManagerError::Leader(LeaderError::Lost { .. }))),
            "{r:?}"
        );
        assert!(elector.is_none());
        tasks.abort_all();
    }

    #[tokio::test]
    async fn without_controllers_only_shutdown_ends_supervision() {
        let stop = Signal::new();
        let waiter = stop.clone();
        let handle = tokio::spawn(async move {
            let mut tasks: JoinSet<&'static str> = JoinSet::new();
            supervise(&mut tasks, &mut no_elector(), &waiter).await
        });
        // An empty task set must not count as "a controller ended".
        tokio::task::yield_now().await;
        assert!(!handle.is_finished());
        stop.fire();
        assert!(handle.await.unwrap().is_ok());
    }
}
