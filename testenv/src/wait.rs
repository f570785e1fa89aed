//! Waiting on a condition with a deadline — how tests against the control plane wait, instead of
//! sleeping for a fixed time.

use std::future::Future;
use std::time::{Duration, Instant};

/// Polls `f` every 50 ms until it returns `Some`, and panics with `what` after `secs` seconds.
/// Meant for tests: the panic is the test failure.
pub async fn wait_for<T, F, Fut>(secs: u64, what: &str, f: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    wait_for_explained(secs, Duration::from_millis(50), what, f, || async {
        String::new()
    })
    .await
}

/// Like [`wait_for`], polling every `every`; a timeout's panic message adds what `explain`
/// reports (where things stand), so a stall names itself.
pub async fn wait_for_explained<T, F, Fut, E, EFut>(
    secs: u64,
    every: Duration,
    what: &str,
    mut f: F,
    explain: E,
) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
    E: FnOnce() -> EFut,
    EFut: Future<Output = String>,
{
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        if let Some(v) = f().await {
            return v;
        }
        if Instant::now() >= deadline {
            let explanation = explain().await;
            if explanation.is_empty() {
                panic!("timed out waiting for {what}");
            }
            panic!("timed out waiting for {what}; {explanation}");
        }
        tokio::time::sleep(every).await;
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

    #[tokio::test]
    #[should_panic(expected = "timed out waiting for never; stuck at step 2")]
    async fn a_timeout_says_where_things_stand() {
        wait_for_explained(
            0,
            Duration::from_millis(1),
            "never",
            || async { None::<()> },
            || async { "stuck at step 2".to_owned() },
        )
        .await;
    }
}
