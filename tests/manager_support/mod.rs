//! Helpers shared by the manager and leader-election integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use capmox::leader::LEASE_NAME;
use k8s_openapi::api::coordination::v1::Lease;
use kube::Api;
use tokio::time::Instant;

/// Polls `cond` every 50 ms until it holds or `within` passes.
pub async fn eventually<F, Fut>(within: Duration, what: &str, mut cond: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = Instant::now() + within;
    loop {
        if cond().await {
            return;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until the lease (held by `by` throughout) has been rewritten `n` times.
pub async fn wait_renewals(api: &Api<Lease>, by: &str, n: u32, within: Duration) {
    let deadline = Instant::now() + within;
    let mut last_rv: Option<String> = None;
    let mut renewals = 0;
    while renewals < n {
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {n} renewals by {by}"
        );
        let lease = api.get(LEASE_NAME).await.unwrap();
        let held = lease.spec.as_ref().and_then(|s| s.holder_identity.as_deref()) == Some(by);
        assert!(held, "lease left {by} while it runs: {lease:?}");
        let rv = lease.metadata.resource_version.clone();
        if last_rv.is_some() && rv != last_rv {
            renewals += 1;
        }
        last_rv = rv;
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
