//! A shared read with a freshness contract: one value (e.g. the `/cluster/resources` list) that
//! every machine of a Proxmox cluster may reuse as long as it is fresh enough for the asking
//! pass, fetched by at most one caller at a time (the others wait for that fetch and reuse it).

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How fresh a shared read must be for one use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freshness {
    /// The read must have been requested at or after this instant (read-your-writes: the time of
    /// this controller's last write that the answer must reflect).
    pub not_before: Option<Instant>,
    /// The read may be at most this old.
    pub max_age: Duration,
}

impl Freshness {
    /// At most `max_age` old.
    pub fn within(max_age: Duration) -> Self {
        Self {
            not_before: None,
            max_age,
        }
    }

    /// Also requested at or after `at` (when given).
    pub fn after(mut self, at: Option<Instant>) -> Self {
        self.not_before = match (self.not_before, at) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self
    }

    /// Whether a read requested at `requested` satisfies this.
    pub fn accepts(&self, requested: Instant, now: Instant) -> bool {
        self.not_before.is_none_or(|nb| requested >= nb)
            && now.saturating_duration_since(requested) <= self.max_age
    }
}

/// One shared value and when it was requested.
#[derive(Debug)]
pub struct Shared<T> {
    slot: tokio::sync::Mutex<Option<(Instant, Arc<T>)>>,
}

impl<T> Default for Shared<T> {
    fn default() -> Self {
        Self {
            slot: tokio::sync::Mutex::new(None),
        }
    }
}

impl<T> Shared<T> {
    /// The value if it satisfies `fresh`, else the result of `fetch` (which then becomes the
    /// shared value). Concurrent callers wait for a running fetch and take its result when it
    /// satisfies them.
    pub async fn get<E, F, Fut>(&self, fresh: Freshness, fetch: F) -> Result<(Instant, Arc<T>), E>
    where
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let mut slot = self.slot.lock().await;
        if let Some((at, v)) = slot.as_ref()
            && fresh.accepts(*at, Instant::now())
        {
            return Ok((*at, Arc::clone(v)));
        }
        let requested = Instant::now();
        let value = Arc::new(fetch().await?);
        *slot = Some((requested, Arc::clone(&value)));
        Ok((requested, value))
    }

    /// The current value without fetching (`None` while a fetch runs or before the first).
    pub fn peek(&self) -> Option<(Instant, Arc<T>)> {
        self.slot
            .try_lock()
            .ok()
            .and_then(|s| s.as_ref().map(|(at, v)| (*at, Arc::clone(v))))
    }

    /// Forgets the value (the next use fetches).
    pub async fn invalidate(&self) {
        *self.slot.lock().await = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};

    #[tokio::test]
    async fn fetches_once_while_fresh_and_again_after_a_write() {
        let shared: Shared<u32> = Shared::default();
        let calls = AtomicU32::new(0);
        let fetch = || async { Ok::<_, ()>(calls.fetch_add(1, Ordering::SeqCst) + 1) };
        let long = Freshness::within(Duration::from_secs(60));
        assert_eq!(*shared.get(long, fetch).await.unwrap().1, 1);
        assert_eq!(*shared.get(long, fetch).await.unwrap().1, 1);
        let write = Instant::now();
        assert_eq!(*shared.get(long.after(Some(write)), fetch).await.unwrap().1, 2);
        assert_eq!(
            *shared
                .get(Freshness::within(Duration::ZERO), fetch)
                .await
                .unwrap()
                .1,
            3
        );
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        assert_eq!(shared.peek().map(|(_, v)| *v), Some(3));
    }

    #[tokio::test]
    async fn concurrent_callers_share_one_fetch() {
        let shared: Arc<Shared<u32>> = Arc::default();
        let calls = Arc::new(AtomicU32::new(0));
        let mut tasks = Vec::new();
        for _ in 0..8 {
            let (shared, calls) = (Arc::clone(&shared), Arc::clone(&calls));
            tasks.push(tokio::spawn(async move {
                let start = Instant::now();
                let fresh = Freshness::within(Duration::from_secs(60)).after(Some(start));
                shared
                    .get(fresh, || async {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        Ok::<_, ()>(calls.fetch_add(1, Ordering::SeqCst))
                    })
                    .await
                    .map(|(_, v)| *v)
            }));
        }
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        // Each caller needs a read requested after it started: the first fetch serves all that
        // started before it, one more serves the rest.
        assert!(calls.load(Ordering::SeqCst) <= 2);
    }

    #[test]
    fn freshness_rules() {
        let now = Instant::now();
        let f = Freshness::within(Duration::from_secs(1));
        assert!(f.accepts(now, now));
        assert!(!f.accepts(now, now + Duration::from_secs(2)));
        let f = f.after(Some(now + Duration::from_millis(5)));
        assert!(!f.accepts(now, now + Duration::from_millis(10)));
        assert_eq!(
            Freshness::within(Duration::ZERO)
                .after(Some(now))
                .after(None)
                .not_before,
            Some(now)
        );
    }
}
