//! A small recorder of core/v1 `Event`s, the kind every apiserver since 1.0 accepts.
//!
//! Cluster-scoped objects (Nodes) get their events in namespace `default` with an involved
//! object that has no namespace, as the Go recorder does; namespaced objects get them in their
//! own namespace. Identical events (same object, type, reason and message) are aggregated by
//! bumping `count` and `lastTimestamp` of the event already written.
//!
//! As client-go's broadcaster, [`EventRecorder::publish`] does not wait for the write: events
//! queue (up to [`EVENT_QUEUE`], then they are dropped with a log line) and one task per
//! recorder writes them in order. A controller's work is never held up by its events, which
//! share the controller's `--kube-api-qps` budget: a Node joining 100 load balancers used to
//! pace the 100 target changes at the rate of their events.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use k8s_openapi::api::core::v1::{Event, EventSource, ObjectReference};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Patch, PatchParams, PostParams};
use kube::{Api, Client, Resource};
use parking_lot::Mutex;

/// Namespace for events about cluster-scoped objects.
pub const CLUSTER_SCOPED_EVENT_NAMESPACE: &str = "default";
/// Longest message written; longer ones are cut.
pub const MAX_MESSAGE_BYTES: usize = 1024;
const DEDUP_CAPACITY: usize = 4096;
/// Events waiting to be written, per recorder; more are dropped (client-go: 1000).
pub const EVENT_QUEUE: usize = 1000;
/// Events one object may get in a burst (client-go's spam filter).
const SPAM_BURST: f64 = 25.0;
/// After the burst, one more event per object every this often (client-go: 1/300 qps).
const SPAM_REFILL: Duration = Duration::from_secs(300);

/// A token bucket per involved object, as client-go's `EventSourceObjectSpamFilter`: a
/// controller failing on one Node every few seconds writes 25 events, then one per five
/// minutes, instead of one per failure.
#[derive(Debug, Default)]
struct SpamFilter {
    buckets: HashMap<(String, String, String, String), (f64, Instant)>,
}

impl SpamFilter {
    fn allow(&mut self, key: (String, String, String, String), now: Instant) -> bool {
        if self.buckets.len() >= DEDUP_CAPACITY && !self.buckets.contains_key(&key) {
            // Forget objects whose bucket has refilled: they behave like new ones anyway.
            let refilled = SPAM_REFILL.mul_f64(SPAM_BURST);
            self.buckets
                .retain(|_, (_, at)| now.saturating_duration_since(*at) < refilled);
        }
        let (tokens, at) = self.buckets.entry(key).or_insert((SPAM_BURST, now));
        let elapsed = now.saturating_duration_since(*at);
        let per_second = SPAM_REFILL.as_secs_f64().recip();
        *tokens = crate::refilled(*tokens, elapsed, per_second, SPAM_BURST);
        *at = now;
        if *tokens >= 1.0 {
            *tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// `Normal` or `Warning`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Informational.
    Normal,
    /// Something went wrong.
    Warning,
}

impl EventType {
    /// The API string.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Normal => "Normal",
            Self::Warning => "Warning",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct DedupKey {
    namespace: String,
    kind: String,
    name: String,
    uid: String,
    type_: EventType,
    reason: String,
    message: String,
}

#[derive(Clone, Debug)]
struct Written {
    event_name: String,
    count: i32,
}

#[derive(Debug, Default)]
struct DedupCache {
    entries: HashMap<DedupKey, Written>,
    order: VecDeque<DedupKey>,
}

impl DedupCache {
    fn remember(&mut self, key: DedupKey, written: Written) {
        if self.entries.insert(key.clone(), written).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > DEDUP_CAPACITY {
            if let Some(oldest) = self.order.pop_front() {
                self.entries.remove(&oldest);
            }
        }
    }
}

/// Writes core/v1 Events on behalf of one component (e.g. `cloud-node-controller`).
#[derive(Clone)]
pub struct EventRecorder {
    client: Client,
    component: String,
    cache: Arc<Mutex<DedupCache>>,
    spam: Arc<Mutex<SpamFilter>>,
    /// The queue of the writer task, started by the first event published in a runtime.
    queue: Arc<OnceLock<tokio::sync::mpsc::Sender<Pending>>>,
}

/// An event waiting for the writer.
struct Pending {
    involved: ObjectReference,
    type_: EventType,
    reason: String,
    message: String,
}

impl std::fmt::Debug for EventRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EventRecorder")
            .field("component", &self.component)
            .finish_non_exhaustive()
    }
}

/// The message of the last Warning written per object (a Node's name, a Service's key): a
/// failure that comes back with the same message writes no new event, so each distinct
/// failure is reported once while it lasts.
#[derive(Debug, Default)]
pub(crate) struct LastWarnings(Mutex<HashMap<String, String>>);

impl LastWarnings {
    /// Remember `message` as the last Warning of `key`; whether it is news (differs from the
    /// one remembered before), that is whether to write it.
    pub(crate) fn is_news(&self, key: &str, message: &str) -> bool {
        self.0
            .lock()
            .insert(key.to_owned(), message.to_owned())
            .is_none_or(|last| last != message)
    }

    /// `key` is fine again (or gone): its next failure is news.
    pub(crate) fn forget(&self, key: &str) {
        self.0.lock().remove(key);
    }
}

/// Cut `message` to at most [`MAX_MESSAGE_BYTES`] bytes on a character boundary.
pub fn truncate_message(message: &str) -> &str {
    if message.len() <= MAX_MESSAGE_BYTES {
        return message;
    }
    let mut end = MAX_MESSAGE_BYTES;
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    &message[..end]
}

/// The error and all its sources joined with `": "`.
pub fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.ends_with(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

/// A reference to `obj` as an event's involved object.
pub fn object_reference<K>(obj: &K) -> ObjectReference
where
    K: Resource<DynamicType = ()>,
{
    let meta = obj.meta();
    ObjectReference {
        api_version: Some(K::api_version(&()).into_owned()),
        kind: Some(K::kind(&()).into_owned()),
        name: meta.name.clone(),
        namespace: meta.namespace.clone(),
        uid: meta.uid.clone(),
        resource_version: meta.resource_version.clone(),
        ..ObjectReference::default()
    }
}

impl EventRecorder {
    /// A recorder whose events carry `source.component = component`.
    pub fn new(client: Client, component: impl Into<String>) -> Self {
        Self {
            client,
            component: component.into(),
            cache: Arc::default(),
            spam: Arc::default(),
            queue: Arc::default(),
        }
    }

    /// The component written into `source.component`.
    pub fn component(&self) -> &str {
        &self.component
    }

    /// Record an event about `obj`. Failures are logged, never returned: events are best effort.
    pub async fn publish<K>(&self, obj: &K, type_: EventType, reason: &str, message: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish_for(object_reference(obj), type_, reason, message)
            .await;
    }

    /// Record an event about the object `involved` refers to: queued for the writer task
    /// (written at once outside a Tokio runtime).
    pub async fn publish_for(
        &self,
        involved: ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        let pending = Pending {
            involved,
            type_,
            reason: reason.to_owned(),
            message: truncate_message(message).to_owned(),
        };
        let Some(queue) = self.queue() else {
            self.write(pending).await;
            return;
        };
        if let Err(err) = queue.try_send(pending) {
            let (tokio::sync::mpsc::error::TrySendError::Full(pending)
            | tokio::sync::mpsc::error::TrySendError::Closed(pending)) = err;
            tracing::warn!(
                reason = pending.reason,
                object = pending.involved.name.as_deref().unwrap_or_default(),
                "event dropped: {EVENT_QUEUE} events are waiting to be written"
            );
        }
    }

    /// The writer's queue, starting the writer on the current runtime the first time.
    fn queue(&self) -> Option<&tokio::sync::mpsc::Sender<Pending>> {
        if let Some(queue) = self.queue.get() {
            return Some(queue);
        }
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(self.queue.get_or_init(|| {
            let (queue, mut pending) = tokio::sync::mpsc::channel::<Pending>(EVENT_QUEUE);
            // The writer shares the caches but not the queue: it ends when the last handle
            // holding the queue is dropped.
            let writer = EventRecorder {
                queue: Arc::default(),
                ..self.clone()
            };
            runtime.spawn(async move {
                while let Some(event) = pending.recv().await {
                    writer.write(event).await;
                }
            });
            queue
        }))
    }

    async fn write(&self, event: Pending) {
        let Pending {
            involved,
            type_,
            reason,
            message,
        } = event;
        if let Err(err) = self.try_publish(involved, type_, &reason, &message).await {
            tracing::warn!(
                reason,
                error = %error_chain(&err),
                "failed to record event"
            );
        }
    }

    /// Record an event, returning the API error if neither an update nor a create worked.
    pub async fn try_publish(
        &self,
        involved: ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) -> Result<(), kube::Error> {
        let message = truncate_message(message);
        let namespace = involved
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| CLUSTER_SCOPED_EVENT_NAMESPACE.to_owned());
        let key = DedupKey {
            namespace: namespace.clone(),
            kind: involved.kind.clone().unwrap_or_default(),
            name: involved.name.clone().unwrap_or_default(),
            uid: involved.uid.clone().unwrap_or_default(),
            type_,
            reason: reason.to_owned(),
            message: message.to_owned(),
        };
        let allowed = self.spam.lock().allow(
            (
                key.namespace.clone(),
                key.kind.clone(),
                key.name.clone(),
                key.uid.clone(),
            ),
            Instant::now(),
        );
        if !allowed {
            tracing::debug!(reason, object = %key.name, "event dropped: too many events about this object");
            return Ok(());
        }
        let api: Api<Event> = Api::namespaced(self.client.clone(), &namespace);
        let now = Time(Timestamp::now());

        let previous = self.cache.lock().entries.get(&key).cloned();
        if let Some(previous) = previous {
            let count = previous.count.saturating_add(1);
            let patch = serde_json::json!({ "count": count, "lastTimestamp": now });
            match api
                .patch(
                    &previous.event_name,
                    &PatchParams::default(),
                    &Patch::Merge(&patch),
                )
                .await
            {
                Ok(_) => {
                    self.cache.lock().remember(
                        key,
                        Written {
                            event_name: previous.event_name,
                            count,
                        },
                    );
                    return Ok(());
                }
                Err(err) => {
                    tracing::debug!(error = %err, "could not update aggregated event, creating a new one");
                }
            }
        }

        let object_name = involved.name.clone().unwrap_or_else(|| "unknown".into());
        let event_name = format!("{object_name}.{:x}", now.0.as_nanosecond());
        let event = Event {
            metadata: ObjectMeta {
                name: Some(event_name.clone()),
                namespace: Some(namespace),
                ..ObjectMeta::default()
            },
            involved_object: involved,
            reason: Some(reason.to_owned()),
            message: Some(message.to_owned()),
            type_: Some(type_.as_str().to_owned()),
            source: Some(EventSource {
                component: Some(self.component.clone()),
                host: None,
            }),
            count: Some(1),
            first_timestamp: Some(now.clone()),
            last_timestamp: Some(now),
            reporting_component: Some(self.component.clone()),
            ..Event::default()
        };
        api.create(&PostParams::default(), &event).await?;
        self.cache.lock().remember(
            key,
            Written {
                event_name,
                count: 1,
            },
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_warning_is_news_once_per_distinct_message() {
        let last = LastWarnings::default();
        assert!(last.is_news("n1", "cloud down"));
        assert!(!last.is_news("n1", "cloud down"), "the same failure again");
        assert!(last.is_news("n2", "cloud down"), "another object");
        assert!(last.is_news("n1", "not found"), "another failure");
        assert!(last.is_news("n1", "cloud down"), "back to the first one");
        last.forget("n1");
        assert!(last.is_news("n1", "cloud down"), "after a success");
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        assert_eq!(truncate_message("short"), "short");
        let long = "é".repeat(MAX_MESSAGE_BYTES);
        let cut = truncate_message(&long);
        assert!(cut.len() <= MAX_MESSAGE_BYTES);
        assert_eq!(cut.len(), MAX_MESSAGE_BYTES);
        let odd = format!("x{}", "é".repeat(MAX_MESSAGE_BYTES));
        assert_eq!(truncate_message(&odd).len(), MAX_MESSAGE_BYTES - 1);
    }

    #[test]
    fn error_chain_joins_sources_once() {
        let inner =
            crate::provider::Error::api("get server", std::io::Error::other("connection reset"));
        assert_eq!(
            error_chain(&inner),
            "cloud API call failed: get server: connection reset"
        );
    }

    #[test]
    fn spam_filter_allows_a_burst_then_one_event_per_refill_period() {
        let mut filter = SpamFilter::default();
        let key = || {
            (
                "default".to_owned(),
                "Node".to_owned(),
                "n1".to_owned(),
                "u1".to_owned(),
            )
        };
        let other = (
            "default".to_owned(),
            "Node".to_owned(),
            "n2".to_owned(),
            "u2".to_owned(),
        );
        let start = Instant::now();
        for i in 0..25 {
            assert!(filter.allow(key(), start), "event {i} of the burst");
        }
        assert!(!filter.allow(key(), start), "the 26th is dropped");
        assert!(
            filter.allow(other, start),
            "other objects have their own bucket"
        );
        assert!(!filter.allow(key(), start + SPAM_REFILL / 2));
        assert!(filter.allow(key(), start + SPAM_REFILL + SPAM_REFILL / 2));
        assert!(!filter.allow(key(), start + SPAM_REFILL + SPAM_REFILL / 2));
    }

    #[test]
    fn dedup_cache_is_bounded() {
        let mut cache = DedupCache::default();
        for i in 0..(DEDUP_CAPACITY + 10) {
            let key = DedupKey {
                namespace: "default".into(),
                kind: "Node".into(),
                name: format!("n{i}"),
                uid: String::new(),
                type_: EventType::Normal,
                reason: "Synced".into(),
                message: String::new(),
            };
            cache.remember(
                key,
                Written {
                    event_name: format!("e{i}"),
                    count: 1,
                },
            );
        }
        assert_eq!(cache.entries.len(), DEDUP_CAPACITY);
        assert_eq!(cache.order.len(), DEDUP_CAPACITY);
    }
}
