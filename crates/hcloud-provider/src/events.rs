//! Kubernetes events written by the provider itself (as opposed to the controllers).
//!
//! The official CCM creates one recorder in `Initialize` whose events carry the component
//! [`EVENT_COMPONENT`]; [`Events`] is its counterpart. It is created empty with the provider and
//! shared (cheaply cloned) by every capability; [`crate::HcloudProvider`]'s
//! `CloudProvider::initialize` sets the recorder once the Kubernetes client is known. Until then
//! (and in commands that never initialize the provider, such as `plan`) an event is only
//! logged, never written.

use std::sync::{Arc, OnceLock};

use cloud_provider::events::object_reference;
use cloud_provider::{EventRecorder, EventType};
use k8s_openapi::api::core::v1::ObjectReference;
use kube::Resource;

/// `source.component` of the provider's events, as the official CCM writes it.
pub const EVENT_COMPONENT: &str = "hcloud-cloud-controller-manager";

/// A cheap, cloneable handle for the provider's events; all clones share one recorder.
#[derive(Clone, Debug, Default)]
pub struct Events {
    recorder: Arc<OnceLock<EventRecorder>>,
}

impl Events {
    /// A handle without a recorder: events are only logged until [`Events::set_recorder`].
    pub fn new() -> Self {
        Self::default()
    }

    /// A handle that writes with `recorder` right away.
    pub fn with_recorder(recorder: EventRecorder) -> Self {
        let events = Self::default();
        events.set_recorder(recorder);
        events
    }

    /// Start writing events with `recorder` (for every clone). Only the first recorder set is
    /// used; returns whether this one was.
    pub fn set_recorder(&self, recorder: EventRecorder) -> bool {
        self.recorder.set(recorder).is_ok()
    }

    /// Whether events are written (a recorder was set).
    pub fn is_recording(&self) -> bool {
        self.recorder.get().is_some()
    }

    /// A `Warning` event about `obj`.
    pub async fn warn<K>(&self, obj: &K, reason: &str, message: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish(object_reference(obj), EventType::Warning, reason, message)
            .await;
    }

    /// A `Normal` event about `obj`.
    pub async fn normal<K>(&self, obj: &K, reason: &str, message: &str)
    where
        K: Resource<DynamicType = ()>,
    {
        self.publish(object_reference(obj), EventType::Normal, reason, message)
            .await;
    }

    /// An event about the object `involved` refers to (for callers that have no object at
    /// hand, only its kind, name and UID).
    pub async fn publish(
        &self,
        involved: ObjectReference,
        type_: EventType,
        reason: &str,
        message: &str,
    ) {
        let kind = involved.kind.as_deref().unwrap_or_default();
        let namespace = involved.namespace.as_deref().unwrap_or_default();
        let name = involved.name.as_deref().unwrap_or_default();
        match type_ {
            EventType::Warning => {
                tracing::warn!(kind, namespace, name, reason, "{message}");
            }
            EventType::Normal => {
                tracing::info!(kind, namespace, name, reason, "{message}");
            }
        }
        if let Some(recorder) = self.recorder.get() {
            recorder.publish_for(involved, type_, reason, message).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::Node;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn node() -> Node {
        Node {
            metadata: ObjectMeta {
                name: Some("n1".into()),
                ..ObjectMeta::default()
            },
            ..Node::default()
        }
    }

    #[tokio::test]
    async fn without_a_recorder_events_are_only_logged() {
        let events = Events::new();
        assert!(!events.is_recording());
        // Must neither panic nor need a cluster.
        events.warn(&node(), "Reason", "message").await;
        events.normal(&node(), "Reason", "message").await;
        assert!(!events.clone().is_recording());
    }

    #[tokio::test]
    async fn clones_share_the_recorder_and_only_the_first_is_kept() {
        let events = Events::new();
        let clone = events.clone();
        let config = kube::Config::new("http://127.0.0.1:9".parse().expect("static URL"));
        let client = kube::Client::try_from(config).expect("client from config");
        assert!(events.set_recorder(EventRecorder::new(client.clone(), EVENT_COMPONENT)));
        assert!(clone.is_recording());
        assert!(!clone.set_recorder(EventRecorder::new(client, "other")));
        assert_eq!(
            events.recorder.get().map(EventRecorder::component),
            Some(EVENT_COMPONENT)
        );
    }
}
