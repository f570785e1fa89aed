//! Controllers: thin reconcile loops that fetch what a reconcile needs, call one service entry
//! point and write status back.

pub mod cluster;
pub mod decoded;
pub mod events;
pub mod instrument;
pub mod machine;
pub mod machine_template;
pub mod virtual_machine;
pub mod vm_image;
pub mod vm_operations;

pub mod rbac;
pub mod scope;
pub mod triggers;

use std::future::Future;

use capmox_api::consts::EVENT_RECORDER_NAME;
use events::{Recorder, Reporter};

/// What `clusterctl move` puts on the source objects it is about to delete after copying them to
/// the target (their finalizers stripped): such an object is left alone — its VM, pools and
/// Secret now belong to the target's objects.
pub const DELETE_FOR_MOVE_ANNOTATION: &str = "clusterctl.cluster.x-k8s.io/delete-for-move";

/// The event recorder controllers publish with: capmox's `proxmox-controller`, instance = pod name.
pub fn recorder(client: kube::Client) -> Recorder {
    let reporter = Reporter {
        controller: EVENT_RECORDER_NAME.to_owned(),
        instance: std::env::var("POD_NAME").ok(),
    };
    Recorder::new(client, reporter)
}

/// `shutdown` as the `Send + Sync` future kube-runtime's graceful shutdown wants (it is awaited
/// on its own task).
pub fn shutdown_signal(
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> impl Future<Output = ()> + Send + Sync + 'static {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(async move {
        shutdown.await;
        let _ = tx.send(());
    });
    async move {
        let _ = rx.await;
    }
}
