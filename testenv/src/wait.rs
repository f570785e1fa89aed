//! Waiting on a condition with a deadline — how tests against the control plane wait, instead of
//! sleeping for a fixed time.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it returns `Some`, and panics with `what` after `secs` seconds.
/// Meant for tests: the panic is the test failure.
pub async fn wait_for<T, F, Fut>(secs: u64, what: &str, mut f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn returns_the_first_some() {
        let mut n = 0;
        let v = wait_for(5, "n to reach 3", || {
            n += 1;
            let v = n;
            async move { (v >= 3).then_some(v) }
        })
        .await;
        assert_eq!(v, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "timed out waiting for never")]
    async fn panics_at_the_deadline() {
        wait_for(0, "never", || async { None::<()> }).await;
    }
}
