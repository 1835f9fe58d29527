//! Leader election on a `coordination.k8s.io/v1` Lease, compatible with client-go's
//! `LeaseLock` (so a Go cloud-controller-manager and this one can hand over to each other) and
//! with every apiserver since Kubernetes 1.14 (plain GET / POST / PUT, no server-side apply).
//!
//! Rules, as in client-go's leader elector:
//! - Every try reads the Lease. A Lease held by someone else is taken over only when it has
//!   expired: its holder is empty (released), or the record has not changed for
//!   `leaseDurationSeconds` as observed on our own monotonic clock. Wall-clock times in the
//!   Lease are never compared with ours, so clock skew between replicas cannot hand over a
//!   live Lease (a fresh candidate therefore waits one lease duration before taking over a
//!   dead holder's Lease, as client-go does).
//! - Writes are fenced: updates carry the `resourceVersion` that was read, so of two concurrent
//!   writers exactly one wins (the loser gets 409 Conflict).
//! - Taking over sets `acquireTime` and increments `leaseTransitions`; renewals keep both.
//! - Candidates try again after one to 2.2 retry periods (client-go's `wait.Jitter` with its
//!   `JitterFactor` 1.2: `period + random(0..1.2) × period`); the leader renews every retry
//!   period and gives up leadership when it has not renewed for the renew deadline, counted
//!   from the *start* of its last successful renewal (a slow renewal cannot stretch it past the
//!   moment candidates may take over), or at once when it finds another holder.
//! - On graceful stop the leader releases the Lease (empty holder, 1 s duration), so a standby
//!   takes over at its next try.
//! - Winning the Lease records a `Normal` `LeaderElection` Event `<identity> became leader` on
//!   it (client-go's `LeaseLock.RecordEvent`), once per acquisition and never on a renewal.

use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use cloud_provider::{EventRecorder, EventType};

use crate::config::LeaderElectionSettings;
use crate::http::MetricsRegistry;

/// `source.component` of the leader election Events: upstream's recorder is the
/// cloud-controller-manager's own (`CloudControllerManagerUserAgent`).
pub const EVENT_COMPONENT: &str = "cloud-controller-manager";
/// Reason of the leader election Events (client-go's `LeaseLock.RecordEvent`).
pub const EVENT_REASON: &str = "LeaderElection";

/// Extra time the `/healthz` leader check allows past the lease duration (as upstream).
const HEALTH_GRACE: Duration = Duration::from_secs(20);

/// Leader election parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionConfig {
    /// Lease name (`cloud-controller-manager`).
    pub lease_name: String,
    /// Lease namespace (`kube-system`).
    pub lease_namespace: String,
    /// This candidate's identity (`hostname_<uuid>`).
    pub identity: String,
    /// How long a Lease stays valid after its last renewal (15 s).
    pub lease_duration: Duration,
    /// How long the leader keeps retrying a renewal before giving up (10 s).
    pub renew_deadline: Duration,
    /// Pause between tries (2 s).
    pub retry_period: Duration,
}

impl LeaderElectionConfig {
    /// From the validated flags, with the given identity.
    pub fn from_settings(settings: &LeaderElectionSettings, identity: impl Into<String>) -> Self {
        LeaderElectionConfig {
            lease_name: settings.lease_name.clone(),
            lease_namespace: settings.lease_namespace.clone(),
            identity: identity.into(),
            lease_duration: settings.lease_duration,
            renew_deadline: settings.renew_deadline,
            retry_period: settings.retry_period,
        }
    }

    fn lease_duration_seconds(&self) -> i32 {
        let secs = self.lease_duration.as_secs_f64().ceil();
        if secs < 1.0 {
            1
        } else if secs > f64::from(i32::MAX) {
            i32::MAX
        } else {
            // Bounds checked above.
            #[allow(clippy::cast_possible_truncation)]
            let secs = secs as i32;
            secs
        }
    }
}

/// `<hostname>_<random uuid>`, the identity format of Kubernetes controller managers.
pub fn default_identity() -> String {
    let host = hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    format!("{host}_{}", uuid::Uuid::new_v4())
}

/// Where the election stands, as seen by this candidate.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaderState {
    /// No try has succeeded yet (e.g. the apiserver is unreachable).
    Unknown,
    /// Someone else holds the Lease (`holder`), or it is free and we have not won it yet.
    Following {
        /// The current holder, if any.
        holder: Option<String>,
    },
    /// We hold the Lease.
    Leading,
    /// We held the Lease and lost it (terminal): the process should exit.
    Lost,
    /// The elector stopped on request (terminal); a held Lease was released.
    Stopped,
}

impl LeaderState {
    /// Whether the state will never change again.
    pub fn is_terminal(&self) -> bool {
        matches!(self, LeaderState::Lost | LeaderState::Stopped)
    }

    /// Whether this candidate knows who leads (itself or another).
    pub fn is_known(&self) -> bool {
        !matches!(self, LeaderState::Unknown)
    }
}

/// Errors of a single Lease operation (logged and retried by the loop).
#[derive(Debug, thiserror::Error)]
enum LeaseError {
    #[error("lease request failed: {0}")]
    Api(#[from] kube::Error),
    #[error("lease request timed out")]
    Timeout,
    /// Our own renewal lost an optimistic-concurrency race (409): the Lease changed between
    /// our read and our write. Retried (re-read) until the renew deadline, as client-go does;
    /// only a read showing another live holder ends leadership early.
    #[error("renewing the lease conflicted with another write (409); re-reading")]
    Conflict,
}

/// The outcome of one try.
#[derive(Debug, PartialEq, Eq)]
enum TryOutcome {
    /// We hold the Lease now.
    Held,
    /// Someone else holds it (or won the race).
    HeldBy(Option<String>),
}

/// The last Lease content we saw, and when we first saw it.
#[derive(Debug)]
struct Observation {
    /// The whole spec: any change (holder, times, duration, transitions) counts.
    record: LeaseSpec,
    at: Instant,
}

/// Runs the election for one candidate. Create with [`LeaderElector::new`], start with
/// [`LeaderElector::spawn`].
#[derive(Debug)]
pub struct LeaderElector {
    api: Api<Lease>,
    config: LeaderElectionConfig,
    observed: Option<Observation>,
    status_gauge: Option<Gauge>,
    recorder: Option<EventRecorder>,
    /// The Lease as our last successful write returned it (the involved object of our Events).
    written: Option<Lease>,
}

impl LeaderElector {
    /// An elector for `config.lease_namespace/config.lease_name`.
    pub fn new(client: kube::Client, config: LeaderElectionConfig) -> Self {
        LeaderElector {
            api: Api::namespaced(client, &config.lease_namespace),
            config,
            observed: None,
            status_gauge: None,
            recorder: None,
            written: None,
        }
    }

    /// Records `<identity> became leader` (type `Normal`, reason `LeaderElection`) on the Lease
    /// each time this candidate wins it, as client-go's `LeaseLock` with an `EventRecorder`.
    pub fn with_recorder(mut self, recorder: EventRecorder) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// Exports `leader_election_master_status{name=<lease name>}` (1 while leading), the gauge
    /// client-go based managers export.
    pub fn with_metrics(mut self, registry: &MetricsRegistry) -> Self {
        let family = Family::<Vec<(String, String)>, Gauge>::default();
        let gauge = family
            .get_or_create(&vec![("name".to_owned(), self.config.lease_name.clone())])
            .clone();
        registry.register(
            "leader_election_master_status",
            "Gauge of if the reporting system is master of the relevant lease, 0 indicates \
             backup, 1 indicates master. 'name' is the string used to identify the lease.",
            family,
        );
        self.status_gauge = Some(gauge);
        self
    }

    /// Starts the election in a task. It stops (releasing a held Lease) when `shutdown` fires
    /// or [`LeaderHandle::stop`] is called.
    pub fn spawn(self, shutdown: &CancellationToken) -> LeaderHandle {
        let (tx, rx) = watch::channel(LeaderState::Unknown);
        let last_renewal = Arc::new(Mutex::new(None));
        let stop = shutdown.child_token();
        let lease_duration = self.config.lease_duration;
        let task = tokio::spawn(self.run(tx, Arc::clone(&last_renewal), stop.clone()));
        LeaderHandle {
            state: rx,
            task: Some(task),
            stop,
            last_renewal,
            lease_duration,
        }
    }

    async fn run(
        mut self,
        tx: watch::Sender<LeaderState>,
        last_renewal: Arc<Mutex<Option<Instant>>>,
        stop: CancellationToken,
    ) {
        let identity = self.config.identity.clone();
        tracing::info!(
            lease = %format!("{}/{}", self.config.lease_namespace, self.config.lease_name),
            %identity,
            "attempting to acquire the leader lease"
        );
        // ---- Acquire ----
        let acquired_at = loop {
            if stop.is_cancelled() {
                tx.send_replace(LeaderState::Stopped);
                return;
            }
            let attempt_started = Instant::now();
            match self.try_once(self.config.renew_deadline).await {
                Ok(TryOutcome::Held) => break attempt_started,
                Ok(TryOutcome::HeldBy(holder)) => {
                    let state = LeaderState::Following { holder };
                    if *tx.borrow() != state {
                        tracing::info!(?state, "lease held by another candidate");
                        tx.send_replace(state);
                    }
                }
                Err(e) => tracing::warn!(error = %e, "acquiring the leader lease failed"),
            }
            let pause = jittered(self.config.retry_period);
            tokio::select! {
                () = stop.cancelled() => {}
                () = tokio::time::sleep(pause) => {}
            }
        };
        // Counted from the start of the winning attempt, like every renewal below.
        let mut renewed_at = acquired_at;
        *last_renewal.lock() = Some(renewed_at);
        tracing::info!(%identity, "acquired the leader lease");
        self.record_event("became leader").await;
        self.set_gauge(1);
        tx.send_replace(LeaderState::Leading);

        // ---- Renew ----
        loop {
            tokio::select! {
                () = stop.cancelled() => {
                    self.release().await;
                    self.set_gauge(0);
                    tx.send_replace(LeaderState::Stopped);
                    return;
                }
                () = tokio::time::sleep(self.config.retry_period) => {}
            }
            // Keep trying until the renew deadline, counted from the last successful renewal.
            loop {
                let remaining = self
                    .config
                    .renew_deadline
                    .saturating_sub(renewed_at.elapsed());
                if remaining.is_zero() {
                    tracing::error!(%identity, "failed to renew the leader lease within the renew deadline");
                    self.lose(&tx);
                    return;
                }
                let attempt_started = Instant::now();
                match self.try_once(remaining).await {
                    Ok(TryOutcome::Held) => {
                        // The renewal wrote a renewTime from before it was sent; candidates
                        // count from there, so the deadline must too.
                        renewed_at = attempt_started;
                        *last_renewal.lock() = Some(renewed_at);
                        break;
                    }
                    Ok(TryOutcome::HeldBy(holder)) => {
                        tracing::error!(?holder, "the leader lease was taken over");
                        self.lose(&tx);
                        return;
                    }
                    Err(e) => {
                        tracing::warn!(error = %e, "renewing the leader lease failed; retrying");
                        let pause = self.config.retry_period.min(
                            self.config
                                .renew_deadline
                                .saturating_sub(renewed_at.elapsed()),
                        );
                        tokio::select! {
                            () = stop.cancelled() => {
                                // Shutting down while unable to renew: nothing to release safely.
                                self.set_gauge(0);
                                tx.send_replace(LeaderState::Stopped);
                                return;
                            }
                            () = tokio::time::sleep(pause) => {}
                        }
                    }
                }
            }
        }
    }

    fn lose(&self, tx: &watch::Sender<LeaderState>) {
        self.set_gauge(0);
        tx.send_replace(LeaderState::Lost);
    }

    /// `<identity> <what>` on the Lease as last written, as client-go's `LeaseLock.RecordEvent`
    /// (queued: never waits for the write).
    async fn record_event(&self, what: &str) {
        if let (Some(recorder), Some(lease)) = (&self.recorder, &self.written) {
            let message = format!("{} {what}", self.config.identity);
            recorder
                .publish(lease, EventType::Normal, EVENT_REASON, &message)
                .await;
        }
    }

    fn set_gauge(&self, value: i64) {
        if let Some(gauge) = &self.status_gauge {
            gauge.set(value);
        }
    }

    /// One acquire-or-renew attempt bounded by `timeout`.
    async fn try_once(&mut self, timeout: Duration) -> Result<TryOutcome, LeaseError> {
        match tokio::time::timeout(timeout, self.try_acquire_or_renew()).await {
            Ok(result) => result,
            Err(_) => Err(LeaseError::Timeout),
        }
    }

    async fn try_acquire_or_renew(&mut self) -> Result<TryOutcome, LeaseError> {
        let now = Timestamp::now();
        let identity = self.config.identity.clone();
        let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else {
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(self.config.lease_name.clone()),
                    namespace: Some(self.config.lease_namespace.clone()),
                    ..ObjectMeta::default()
                },
                spec: Some(LeaseSpec {
                    holder_identity: Some(identity),
                    lease_duration_seconds: Some(self.config.lease_duration_seconds()),
                    acquire_time: Some(MicroTime(now)),
                    renew_time: Some(MicroTime(now)),
                    lease_transitions: Some(0),
                    ..LeaseSpec::default()
                }),
            };
            return match self.api.create(&PostParams::default(), &lease).await {
                Ok(created) => {
                    self.observe(&created);
                    self.written = Some(created);
                    Ok(TryOutcome::Held)
                }
                Err(kube::Error::Api(status)) if status.code == 409 => Ok(TryOutcome::HeldBy(None)),
                Err(e) => Err(e.into()),
            };
        };
        let spec = lease.spec.clone().unwrap_or_default();
        self.observe(&lease);
        let holder = spec.holder_identity.clone().filter(|h| !h.is_empty());
        let is_mine = holder.as_deref() == Some(identity.as_str());
        if let Some(other) = &holder
            && !is_mine
            && !self.expired(&spec)
        {
            return Ok(TryOutcome::HeldBy(Some(other.clone())));
        }
        let transitions = spec.lease_transitions.unwrap_or(0);
        lease.spec = Some(LeaseSpec {
            holder_identity: Some(identity),
            lease_duration_seconds: Some(self.config.lease_duration_seconds()),
            acquire_time: if is_mine {
                spec.acquire_time.clone()
            } else {
                Some(MicroTime(now))
            },
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(if is_mine {
                transitions
            } else {
                transitions.saturating_add(1)
            }),
            ..spec
        });
        // `lease.metadata.resource_version` is the one we read: the update is fenced by it.
        match self
            .api
            .replace(&self.config.lease_name, &PostParams::default(), &lease)
            .await
        {
            Ok(updated) => {
                self.observe(&updated);
                self.written = Some(updated);
                Ok(TryOutcome::Held)
            }
            // Our own renewal raced another write: read again (the renew loop retries until
            // its deadline). Losing a takeover race is final for this try.
            Err(kube::Error::Api(status)) if status.code == 409 && is_mine => {
                Err(LeaseError::Conflict)
            }
            Err(kube::Error::Api(status)) if status.code == 409 => Ok(TryOutcome::HeldBy(holder)),
            Err(e) => Err(e.into()),
        }
    }

    /// Records the Lease content; the observation time only moves when the content changes.
    fn observe(&mut self, lease: &Lease) {
        let record = lease.spec.clone().unwrap_or_default();
        match &self.observed {
            Some(o) if o.record == record => {}
            _ => {
                self.observed = Some(Observation {
                    record,
                    at: Instant::now(),
                })
            }
        }
    }

    /// Whether the (observed) Lease held by someone else may be taken over: its record has not
    /// changed for its lease duration as measured on our own monotonic clock.
    fn expired(&self, spec: &LeaseSpec) -> bool {
        let duration_secs = spec
            .lease_duration_seconds
            .filter(|s| *s > 0)
            .unwrap_or_else(|| self.config.lease_duration_seconds());
        let duration = Duration::from_secs(u64::try_from(duration_secs).unwrap_or(1));
        self.observed
            .as_ref()
            .is_some_and(|o| o.at.elapsed() >= duration)
    }

    /// Gives the Lease up if we still hold it: empty holder, 1 s duration, as client-go does.
    async fn release(&mut self) {
        let result = tokio::time::timeout(self.config.renew_deadline, async {
            let Some(mut lease) = self.api.get_opt(&self.config.lease_name).await? else {
                return Ok::<bool, kube::Error>(false);
            };
            let spec = lease.spec.clone().unwrap_or_default();
            if spec.holder_identity.as_deref() != Some(self.config.identity.as_str()) {
                return Ok(false);
            }
            let now = MicroTime(Timestamp::now());
            lease.spec = Some(LeaseSpec {
                holder_identity: None,
                lease_duration_seconds: Some(1),
                acquire_time: Some(now.clone()),
                renew_time: Some(now),
                ..spec
            });
            self.api
                .replace(&self.config.lease_name, &PostParams::default(), &lease)
                .await?;
            Ok(true)
        })
        .await;
        match result {
            Ok(Ok(true)) => tracing::info!("released the leader lease"),
            Ok(Ok(false)) => tracing::info!("leader lease no longer ours; nothing to release"),
            Ok(Err(e)) => tracing::warn!(error = %e, "releasing the leader lease failed"),
            Err(_) => tracing::warn!("releasing the leader lease timed out"),
        }
    }
}

/// `period` plus a random part of up to `JitterFactor` (1.2) periods, as client-go's
/// `wait.Jitter(period, JitterFactor)` waits between a candidate's attempts.
fn jittered(period: Duration) -> Duration {
    use rand::Rng as _;
    let factor: f64 = rand::rng().random_range(0.0..crate::config::LEADER_ELECTION_JITTER);
    period + period.mul_f64(factor)
}

/// A running (or finished) election. Dropping the handle does not stop the election; call
/// [`LeaderHandle::stop`] or cancel the shutdown token given to [`LeaderElector::spawn`].
#[derive(Debug)]
pub struct LeaderHandle {
    state: watch::Receiver<LeaderState>,
    task: Option<JoinHandle<()>>,
    stop: CancellationToken,
    last_renewal: Arc<Mutex<Option<Instant>>>,
    lease_duration: Duration,
}

impl LeaderHandle {
    /// A handle that leads from the start (for `--leader-elect=false`).
    pub fn always_leading() -> Self {
        let (tx, rx) = watch::channel(LeaderState::Leading);
        // The receiver keeps the last value after the sender is gone.
        drop(tx);
        LeaderHandle {
            state: rx,
            task: None,
            stop: CancellationToken::new(),
            last_renewal: Arc::new(Mutex::new(None)),
            lease_duration: Duration::ZERO,
        }
    }

    /// A receiver of every state change.
    pub fn subscribe(&self) -> watch::Receiver<LeaderState> {
        self.state.clone()
    }

    /// The current state.
    pub fn state(&self) -> LeaderState {
        self.state.borrow().clone()
    }

    /// Waits until this candidate leads. `Err` carries the terminal state reached instead
    /// (stopped before winning).
    pub async fn acquired(&self) -> Result<(), LeaderState> {
        let mut rx = self.state.clone();
        let result = rx
            .wait_for(|s| matches!(s, LeaderState::Leading) || s.is_terminal())
            .await
            .map(|s| s.clone());
        match result {
            Ok(LeaderState::Leading) => Ok(()),
            Ok(other) => Err(other),
            // The elector task ended without a terminal state (it panicked or was aborted).
            Err(_) => Err(self.state()),
        }
    }

    /// Resolves when leadership ends after having been held: [`LeaderState::Lost`], or
    /// [`LeaderState::Stopped`] after a graceful stop. Never resolves for
    /// [`LeaderHandle::always_leading`].
    pub async fn lost(&self) -> LeaderState {
        let mut rx = self.state.clone();
        match rx.wait_for(LeaderState::is_terminal).await {
            Ok(state) => state.clone(),
            Err(_) => {
                if self.task.is_none() {
                    std::future::pending::<()>().await;
                }
                // The elector task died without saying so: treat as lost.
                LeaderState::Lost
            }
        }
    }

    /// A `/healthz` check: fails when we lead but have not renewed for the lease duration plus
    /// 20 s (a stuck elector), like upstream's `leaderElection` check.
    pub fn health_check(&self) -> impl Fn() -> Result<(), String> + Send + Sync + 'static {
        let state = self.state.clone();
        let last_renewal = Arc::clone(&self.last_renewal);
        let limit = self.lease_duration + HEALTH_GRACE;
        move || {
            if *state.borrow() != LeaderState::Leading {
                return Ok(());
            }
            match *last_renewal.lock() {
                Some(at) if at.elapsed() > limit => Err(format!(
                    "the leader lease was last renewed {:.0?} ago (limit {limit:.0?})",
                    at.elapsed()
                )),
                _ => Ok(()),
            }
        }
    }

    /// Stops the election and waits for it; a held Lease is released first, so a standby can
    /// take over at its next try.
    pub async fn stop(mut self) {
        self.stop.cancel();
        if let Some(task) = self.task.take()
            && let Err(e) = task.await
        {
            tracing::warn!(error = %e, "leader election task failed");
        }
    }

    /// Kills the election without releasing the Lease, as a crash would (for tests and for
    /// fatal paths where no further API calls should be made).
    pub fn abort(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identity_format() {
        let id = default_identity();
        let (host, uuid) = id.rsplit_once('_').unwrap();
        assert!(!host.is_empty());
        assert!(uuid::Uuid::parse_str(uuid).is_ok(), "{id}");
        assert_ne!(default_identity(), id);
    }

    #[test]
    fn lease_seconds_round_up() {
        let mut config = LeaderElectionConfig {
            lease_name: "l".into(),
            lease_namespace: "n".into(),
            identity: "i".into(),
            lease_duration: Duration::from_millis(1500),
            renew_deadline: Duration::from_secs(1),
            retry_period: Duration::from_millis(200),
        };
        assert_eq!(config.lease_duration_seconds(), 2);
        config.lease_duration = Duration::from_millis(10);
        assert_eq!(config.lease_duration_seconds(), 1);
        config.lease_duration = Duration::from_secs(15);
        assert_eq!(config.lease_duration_seconds(), 15);
    }

    #[test]
    fn jitter_bounds() {
        // client-go's wait.Jitter(2 s, 1.2): from 2 s up to (not including) 4.4 s, and spread
        // over that range rather than bunched in its first fifth.
        let waits: Vec<Duration> = (0..200).map(|_| jittered(Duration::from_secs(2))).collect();
        assert!(
            waits
                .iter()
                .all(|d| *d >= Duration::from_secs(2) && *d < Duration::from_millis(4400)),
            "{waits:?}"
        );
        assert!(
            waits.iter().any(|d| *d > Duration::from_millis(3200)),
            "{waits:?}"
        );
    }

    #[tokio::test]
    async fn always_leading_handle() {
        let handle = LeaderHandle::always_leading();
        assert_eq!(handle.state(), LeaderState::Leading);
        assert_eq!(handle.acquired().await, Ok(()));
        assert!(handle.health_check()().is_ok());
        // Its sender is gone and it has no elector task: `lost` parks for good at its first
        // poll instead of reporting the closed channel as a loss.
        use futures::FutureExt as _;
        assert_eq!(handle.lost().now_or_never(), None, "never loses");
    }
}
