//! The request gate: lets a test stop the simulator between two API calls (crash-injection tests).
//!
//! Every request under `/api2/json` passes the gate once its body has been read and before anything
//! else happens (authentication, routing, counting, state changes). While the gate is closed, a
//! request that finds no allowance left waits there until the gate is opened
//! ([`Gate::open`]), or is discarded ([`Gate::discard_blocked`]: the connection is closed without
//! a response and nothing is processed). A blocked request whose client goes away is dropped by the
//! HTTP layer as soon as it sees the end of the connection, so it is never processed either.

use std::time::Duration;

use tokio::sync::watch;

/// What the gate decided for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Passage {
    /// Serve the request.
    Pass,
    /// Do not process the request; close the connection without a response.
    Discard,
}

#[derive(Debug, Default, Clone)]
struct GateState {
    /// The gate blocks requests once `allowance` is used up.
    closed: bool,
    /// Requests still allowed through while closed.
    allowance: u64,
    /// Requests currently waiting at the gate.
    blocked: u64,
    /// Bumped by every open: waiters from an older epoch pass.
    release_epoch: u64,
    /// Bumped by every discard: waiters from an older epoch are discarded.
    discard_epoch: u64,
    /// Requests that passed the gate (processed or being processed).
    total: u64,
    /// The server is shutting down: every waiting and later request is discarded.
    shut: bool,
}

/// Gate shared by the server and the test handle.
#[derive(Debug)]
pub struct Gate {
    tx: watch::Sender<GateState>,
}

impl Default for Gate {
    fn default() -> Self {
        Self {
            tx: watch::Sender::new(GateState::default()),
        }
    }
}

/// Decrements the blocked count when a waiting request leaves the gate, however it leaves
/// (released, discarded, or dropped because its connection ended).
struct Waiting<'a>(&'a watch::Sender<GateState>);

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        self.0.send_modify(|s| s.blocked = s.blocked.saturating_sub(1));
    }
}

impl Gate {
    /// Passes one request through the gate, waiting while it is closed.
    pub async fn pass(&self) -> Passage {
        let mut ticket = None;
        self.tx.send_modify(|s| {
            if s.shut {
                return;
            }
            if !s.closed {
                s.total += 1;
            } else if s.allowance > 0 {
                s.allowance -= 1;
                s.total += 1;
            } else {
                s.blocked += 1;
                ticket = Some((s.release_epoch, s.discard_epoch));
            }
        });
        let Some((release, discard)) = ticket else {
            return if self.tx.borrow().shut {
                Passage::Discard
            } else {
                Passage::Pass
            };
        };
        let _waiting = Waiting(&self.tx);
        let mut rx = self.tx.subscribe();
        let outcome = rx
            .wait_for(|s| s.shut || s.release_epoch != release || s.discard_epoch != discard)
            .await
            .map(|s| {
                if s.shut || s.discard_epoch != discard {
                    Passage::Discard
                } else {
                    Passage::Pass
                }
            })
            // The sender lives as long as the gate, which outlives this future.
            .unwrap_or(Passage::Discard);
        if outcome == Passage::Pass {
            self.tx.send_modify(|s| s.total += 1);
        }
        outcome
    }

    /// Lets the next `n` requests through, then blocks every later one.
    pub fn close_after(&self, n: u64) {
        self.tx.send_modify(|s| {
            s.closed = true;
            s.allowance = n;
        });
    }

    /// Opens the gate: blocked requests proceed and no later request blocks.
    pub fn open(&self) {
        self.tx.send_modify(|s| {
            s.closed = false;
            s.allowance = 0;
            s.release_epoch += 1;
        });
    }

    /// Fails every request blocked right now (connection closed, nothing processed). The gate
    /// stays closed for later requests.
    pub fn discard_blocked(&self) {
        self.tx.send_modify(|s| s.discard_epoch += 1);
    }

    /// Server shutdown: discards every waiting request and every later one.
    pub fn shut(&self) {
        self.tx.send_modify(|s| s.shut = true);
    }

    /// Number of requests waiting at the gate.
    pub fn blocked(&self) -> u64 {
        self.tx.borrow().blocked
    }

    /// Number of requests that passed the gate.
    pub fn total(&self) -> u64 {
        self.tx.borrow().total
    }

    /// Waits until at least one request is blocked; false after `timeout`.
    pub async fn wait_blocked(&self, timeout: Duration) -> bool {
        let mut rx = self.tx.subscribe();
        matches!(
            tokio::time::timeout(timeout, rx.wait_for(|s| s.blocked > 0)).await,
            Ok(Ok(_))
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn open_gate_passes_everything_and_counts() {
        let gate = Gate::default();
        assert_eq!(gate.pass().await, Passage::Pass);
        assert_eq!(gate.pass().await, Passage::Pass);
        assert_eq!(gate.total(), 2);
        assert!(!gate.wait_blocked(Duration::from_millis(1)).await);
    }

    #[tokio::test]
    async fn allowance_then_block_then_release() {
        let gate = Arc::new(Gate::default());
        gate.close_after(1);
        assert_eq!(gate.pass().await, Passage::Pass);
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.pass().await });
        assert!(gate.wait_blocked(Duration::from_secs(10)).await);
        assert_eq!(gate.blocked(), 1);
        assert_eq!(gate.total(), 1);
        gate.open();
        assert_eq!(waiter.await.unwrap(), Passage::Pass);
        assert_eq!(gate.blocked(), 0);
        assert_eq!(gate.total(), 2);
    }

    #[tokio::test]
    async fn discard_fails_current_waiters_only() {
        let gate = Arc::new(Gate::default());
        gate.close_after(0);
        let g = gate.clone();
        let first = tokio::spawn(async move { g.pass().await });
        assert!(gate.wait_blocked(Duration::from_secs(10)).await);
        gate.discard_blocked();
        assert_eq!(first.await.unwrap(), Passage::Discard);
        assert_eq!(gate.total(), 0);
        let g = gate.clone();
        let second = tokio::spawn(async move { g.pass().await });
        assert!(gate.wait_blocked(Duration::from_secs(10)).await);
        gate.open();
        assert_eq!(second.await.unwrap(), Passage::Pass);
        assert_eq!(gate.total(), 1);
    }

    #[tokio::test]
    async fn shutdown_discards_waiting_and_later_requests() {
        let gate = Arc::new(Gate::default());
        gate.close_after(0);
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.pass().await });
        assert!(gate.wait_blocked(Duration::from_secs(10)).await);
        gate.shut();
        assert_eq!(waiter.await.unwrap(), Passage::Discard);
        gate.open();
        assert_eq!(gate.pass().await, Passage::Discard);
        assert_eq!(gate.total(), 0);
    }

    #[tokio::test]
    async fn dropped_waiter_leaves_the_gate() {
        let gate = Arc::new(Gate::default());
        gate.close_after(0);
        let g = gate.clone();
        let waiter = tokio::spawn(async move { g.pass().await });
        assert!(gate.wait_blocked(Duration::from_secs(10)).await);
        waiter.abort();
        assert!(waiter.await.is_err());
        assert_eq!(gate.blocked(), 0);
        gate.open();
        assert_eq!(gate.total(), 0);
    }
}
