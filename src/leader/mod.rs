//! Leader election on a `coordination.k8s.io/v1` Lease (client-go compatible record).
//!
//! [`LeaderElector::run`] reads the Lease every retry period, asks the pure [`decide`] function
//! what to do and writes with optimistic concurrency (the read `resourceVersion`; a 409 means
//! someone else wrote first, so the Lease is read again at once). Leadership is published on a
//! [`tokio::sync::watch`] channel. When the shutdown future completes the Lease is released
//! (empty holder, `leaseDurationSeconds: 1`, as client-go's `ReleaseOnCancel` does) so a standby
//! takes over without waiting for expiry. When leadership is lost the loop returns
//! [`LeaderError::Lost`] and the manager exits.
//!
//! The record uses the same fields as client-go, so a Go capmox and capmox-rs contending for the
//! Lease `controller-leader-elect-capmox` (e.g. during a migration) exclude each other correctly.

mod decide;

pub use decide::{Action, LeaseState, Role, Timing, decide};

use std::future::Future;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::Api;
use kube::api::PostParams;
use tokio::sync::watch;

/// Name of the leader Lease (capmox's leader election id).
pub const LEASE_NAME: &str = "controller-leader-elect-capmox";

/// Where the in-cluster service account namespace is mounted.
const SERVICE_ACCOUNT_NAMESPACE_FILE: &str = "/var/run/secrets/kubernetes.io/serviceaccount/namespace";

/// Leader election errors.
#[derive(Debug, thiserror::Error)]
pub enum LeaderError {
    /// We were leader and lost the Lease (renew deadline missed or taken over).
    #[error("leadership of Lease {namespace}/{name} lost")]
    Lost {
        /// Lease namespace.
        namespace: String,
        /// Lease name.
        name: String,
    },
    /// The timing is inconsistent.
    #[error("invalid leader election timing: {0}")]
    Config(String),
}

/// Leader election settings.
#[derive(Debug, Clone)]
pub struct LeaderConfig {
    /// Lease namespace.
    pub namespace: String,
    /// Lease name.
    pub name: String,
    /// Our identity written to `holderIdentity`.
    pub identity: String,
    /// Durations.
    pub timing: Timing,
}

impl LeaderConfig {
    /// The default Lease name in `namespace` with a fresh [`default_identity`].
    pub fn new(namespace: impl Into<String>, timing: Timing) -> Self {
        Self {
            namespace: namespace.into(),
            name: LEASE_NAME.to_owned(),
            identity: default_identity(),
            timing,
        }
    }
}

/// `hostname_<random hex>`: the pod name in Kubernetes, unique per process start.
pub fn default_identity() -> String {
    let host = std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_owned())
                .filter(|h| !h.is_empty())
        })
        .unwrap_or_else(|| "capmox".to_owned());
    format!("{}_{:08x}", host.trim(), rand::random::<u32>())
}

/// The leader-election namespace: `explicit`, else the in-cluster service account namespace,
/// else `default`. (`POD_NAMESPACE` is read into `explicit` by the command line.)
pub fn default_namespace(explicit: Option<&str>) -> String {
    explicit
        .map(str::trim)
        .filter(|n| !n.is_empty())
        .map(str::to_owned)
        .or_else(|| {
            std::fs::read_to_string(SERVICE_ACCOUNT_NAMESPACE_FILE)
                .ok()
                .map(|n| n.trim().to_owned())
                .filter(|n| !n.is_empty())
        })
        .unwrap_or_else(|| "default".to_owned())
}

/// Runs the election for one identity.
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderConfig,
    tx: watch::Sender<bool>,
}

impl std::fmt::Debug for LeaderElector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LeaderElector")
            .field("config", &self.config)
            .field("leader", &*self.tx.borrow())
            .finish_non_exhaustive()
    }
}

/// Last seen version of the Lease and the local time it was first seen.
struct Seen {
    resource_version: Option<String>,
    at: Instant,
}

impl LeaderElector {
    /// An elector writing `config.name` in `config.namespace`.
    pub fn new(client: kube::Client, config: LeaderConfig) -> Result<Self, LeaderError> {
        config.timing.validate().map_err(LeaderError::Config)?;
        let (tx, _) = watch::channel(false);
        Ok(Self {
            api: Api::namespaced(client, &config.namespace),
            config,
            tx,
        })
    }

    /// Our identity.
    pub fn identity(&self) -> &str {
        &self.config.identity
    }

    /// Leadership updates: `true` while we hold the Lease.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }

    /// Runs until `shutdown` completes (then releases the Lease if held and returns `Ok`) or
    /// leadership is lost (returns [`LeaderError::Lost`]).
    pub async fn run(self, shutdown: impl Future<Output = ()> + Send) -> Result<(), LeaderError> {
        tokio::pin!(shutdown);
        let timing = self.config.timing;
        let mut role = Role::Candidate;
        let mut seen: Option<Seen> = None;
        tracing::info!(
            lease = %format!("{}/{}", self.config.namespace, self.config.name),
            identity = %self.config.identity,
            "starting leader election"
        );
        loop {
            let now = Instant::now();
            let current = match self.call(self.api.get_opt(&self.config.name)).await {
                Ok(lease) => lease,
                Err(e) => {
                    tracing::warn!(error = %e, "reading the leader Lease failed");
                    if let Role::Leader { last_renewed } = role
                        && now.saturating_duration_since(last_renewed) > timing.renew_deadline
                    {
                        return self.lost();
                    }
                    if self.pause(now + timing.retry_period, &mut shutdown).await {
                        return self.shutdown(role).await;
                    }
                    continue;
                }
            };
            let state = match &current {
                None => LeaseState::Missing,
                Some(lease) => {
                    let rv = lease.metadata.resource_version.clone();
                    if seen.as_ref().is_none_or(|s| s.resource_version != rv) {
                        seen = Some(Seen {
                            resource_version: rv,
                            at: now,
                        });
                    }
                    let spec = lease.spec.as_ref();
                    LeaseState::Held {
                        holder: spec.and_then(|s| s.holder_identity.clone()),
                        lease_duration: spec
                            .and_then(|s| s.lease_duration_seconds)
                            .and_then(|d| u64::try_from(d).ok())
                            .map(Duration::from_secs),
                        observed_at: seen.as_ref().map_or(now, |s| s.at),
                    }
                }
            };
            let action = decide(now, &state, &self.config.identity, role, &timing);
            tracing::trace!(?action, ?state, "leader election step");
            let wake = match action {
                Action::Lost => return self.lost(),
                Action::Wait { until } => until,
                Action::Create | Action::Acquire | Action::Renew => match self.write(action, current).await {
                    Ok(written) => {
                        if !matches!(role, Role::Leader { .. }) {
                            tracing::info!(identity = %self.config.identity, "became leader");
                        }
                        role = Role::Leader { last_renewed: now };
                        seen = Some(Seen {
                            resource_version: written.metadata.resource_version,
                            at: now,
                        });
                        self.tx.send_replace(true);
                        now + timing.retry_period
                    }
                    Err(e) if is_conflict(&e) => {
                        tracing::debug!("leader Lease changed concurrently, reading it again");
                        continue;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, ?action, "writing the leader Lease failed");
                        now + timing.retry_period
                    }
                },
            };
            if self.pause(wake, &mut shutdown).await {
                return self.shutdown(role).await;
            }
        }
    }

    /// Sleeps until `until`; returns `true` when shutdown fired first.
    async fn pause<F: Future<Output = ()>>(
        &self,
        until: Instant,
        shutdown: &mut std::pin::Pin<&mut F>,
    ) -> bool {
        tokio::select! {
            () = tokio::time::sleep_until(until.into()) => false,
            () = shutdown.as_mut() => true,
        }
    }

    /// Runs one API call with the renew deadline as timeout.
    async fn call<T>(&self, fut: impl Future<Output = Result<T, kube::Error>>) -> Result<T, CallError> {
        match tokio::time::timeout(self.config.timing.renew_deadline, fut).await {
            Ok(r) => r.map_err(CallError::Kube),
            Err(_) => Err(CallError::Timeout),
        }
    }

    async fn write(&self, action: Action, current: Option<Lease>) -> Result<Lease, CallError> {
        let now = MicroTime(Timestamp::now());
        let duration_secs = i32::try_from(self.config.timing.lease_duration.as_millis().div_ceil(1000))
            .unwrap_or(i32::MAX)
            .max(1);
        let pp = PostParams::default();
        match (action, current) {
            (Action::Create, _) | (_, None) => {
                let lease = Lease {
                    metadata: ObjectMeta {
                        name: Some(self.config.name.clone()),
                        namespace: Some(self.config.namespace.clone()),
                        ..ObjectMeta::default()
                    },
                    spec: Some(LeaseSpec {
                        holder_identity: Some(self.config.identity.clone()),
                        lease_duration_seconds: Some(duration_secs),
                        acquire_time: Some(now.clone()),
                        renew_time: Some(now),
                        lease_transitions: Some(0),
                        ..LeaseSpec::default()
                    }),
                };
                self.call(self.api.create(&pp, &lease)).await
            }
            (_, Some(mut lease)) => {
                let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
                let ours = spec.holder_identity.as_deref() == Some(self.config.identity.as_str());
                if !ours {
                    spec.lease_transitions = Some(spec.lease_transitions.unwrap_or(0).saturating_add(1));
                    spec.acquire_time = Some(now.clone());
                    spec.holder_identity = Some(self.config.identity.clone());
                }
                spec.lease_duration_seconds = Some(duration_secs);
                spec.renew_time = Some(now);
                lease.metadata.managed_fields = None;
                self.call(self.api.replace(&self.config.name, &pp, &lease)).await
            }
        }
    }

    fn lost(&self) -> Result<(), LeaderError> {
        self.tx.send_replace(false);
        tracing::error!(identity = %self.config.identity, "leader election lost");
        Err(LeaderError::Lost {
            namespace: self.config.namespace.clone(),
            name: self.config.name.clone(),
        })
    }

    /// Releases the Lease when we hold it; always ends with leadership `false`.
    async fn shutdown(&self, role: Role) -> Result<(), LeaderError> {
        self.tx.send_replace(false);
        if matches!(role, Role::Leader { .. }) {
            match self.release().await {
                Ok(true) => tracing::info!("released the leader Lease"),
                Ok(false) => tracing::info!("leader Lease no longer ours, nothing to release"),
                Err(e) => {
                    tracing::warn!(error = %e, "releasing the leader Lease failed; it expires on its own")
                }
            }
        }
        Ok(())
    }

    async fn release(&self) -> Result<bool, CallError> {
        for _ in 0..3 {
            let Some(mut lease) = self.call(self.api.get_opt(&self.config.name)).await? else {
                return Ok(false);
            };
            let spec = lease.spec.get_or_insert_with(LeaseSpec::default);
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            let now = MicroTime(Timestamp::now());
            spec.holder_identity = None;
            spec.lease_duration_seconds = Some(1);
            spec.renew_time = Some(now.clone());
            spec.acquire_time = Some(now);
            lease.metadata.managed_fields = None;
            match self
                .call(
                    self.api
                        .replace(&self.config.name, &PostParams::default(), &lease),
                )
                .await
            {
                Ok(_) => return Ok(true),
                Err(e) if is_conflict(&e) => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(false)
    }
}

/// A failed Lease API call.
#[derive(Debug, thiserror::Error)]
enum CallError {
    #[error(transparent)]
    Kube(kube::Error),
    #[error("Lease API call timed out")]
    Timeout,
}

fn is_conflict(e: &CallError) -> bool {
    matches!(e, CallError::Kube(kube::Error::Api(s)) if s.code == 409)
}
