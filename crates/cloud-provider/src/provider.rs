//! The provider contract: what a cloud implementation offers to the controllers.
//!
//! The shape follows `k8s.io/cloud-provider` (`cloud.go`): a [`CloudProvider`] hands out optional
//! capabilities ([`Instances`] in its InstancesV2 form, [`LoadBalancer`], [`Routes`]); a missing
//! capability means the controller that needs it is not started.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service};
use tokio_util::sync::CancellationToken;

/// Boxed source error carried by [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result of a provider call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The one error type of the provider contract.
///
/// Callers tell an absent instance ([`Error::InstanceNotFound`]) apart from every other failure.
/// Controllers never read any other variant as "the instance is gone".
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The instance does not exist in the cloud (e.g. a metadata lookup found nothing).
    ///
    /// Like every other `Err`, it never makes a controller delete a Node: deletion happens only
    /// when [`Instances::instance_exists`] returns `Ok(false)`.
    #[error("instance not found")]
    InstanceNotFound,
    /// The provider does not implement this call.
    #[error("not implemented")]
    NotImplemented,
    /// Another controller owns this load balancer (Ensure/Update only).
    #[error("load balancer is implemented elsewhere")]
    ImplementedElsewhere,
    /// Ask the caller to retry after a fixed delay instead of its usual backoff.
    #[error("{message} (retry after {retry_after:?})")]
    Retry {
        /// Human readable reason.
        message: String,
        /// Fixed delay before the next attempt.
        retry_after: Duration,
    },
    /// The object handed to the provider is unusable (e.g. an unparsable providerID).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The cloud API call failed (transport, HTTP status, rate limit, ...).
    #[error("cloud API call failed: {message}")]
    Api {
        /// What was attempted.
        message: String,
        /// The underlying cause, if any.
        #[source]
        source: Option<BoxError>,
    },
    /// The provider is misconfigured.
    #[error("configuration error: {0}")]
    Config(String),
    /// Anything else.
    #[error("{message}")]
    Other {
        /// Description.
        message: String,
        /// The underlying cause, if any.
        #[source]
        source: Option<BoxError>,
    },
}

impl Error {
    /// A cloud API failure with a cause.
    pub fn api(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::Api {
            message: message.into(),
            source: Some(source.into()),
        }
    }

    /// A cloud API failure without a separate cause.
    pub fn api_msg(message: impl Into<String>) -> Self {
        Self::Api {
            message: message.into(),
            source: None,
        }
    }

    /// Any other failure.
    pub fn other(message: impl Into<String>) -> Self {
        Self::Other {
            message: message.into(),
            source: None,
        }
    }

    /// A [`Error::Retry`] asking for a fixed-delay retry.
    pub fn retry(message: impl Into<String>, retry_after: Duration) -> Self {
        Self::Retry {
            message: message.into(),
            retry_after,
        }
    }

    /// True only for [`Error::InstanceNotFound`].
    pub fn is_instance_not_found(&self) -> bool {
        matches!(self, Self::InstanceNotFound)
    }

    /// True for [`Error::ImplementedElsewhere`].
    pub fn is_implemented_elsewhere(&self) -> bool {
        matches!(self, Self::ImplementedElsewhere)
    }

    /// The fixed retry delay, when this error (or any error in its source chain) is a
    /// [`Error::Retry`].
    pub fn retry_after(&self) -> Option<Duration> {
        if let Self::Retry { retry_after, .. } = self {
            return Some(*retry_after);
        }
        let mut source = std::error::Error::source(self);
        while let Some(err) = source {
            if let Some(Self::Retry { retry_after, .. }) = err.downcast_ref::<Self>() {
                return Some(*retry_after);
            }
            source = err.source();
        }
        None
    }

    /// A short, stable label for metrics.
    pub fn metric_label(&self) -> &'static str {
        match self {
            Self::InstanceNotFound => "instance_not_found",
            Self::NotImplemented => "not_implemented",
            Self::ImplementedElsewhere => "implemented_elsewhere",
            Self::Retry { .. } => "retry",
            Self::InvalidInput(_) => "invalid_input",
            Self::Api { .. } => "cloud_api",
            Self::Config(_) => "configuration",
            Self::Other { .. } => "other",
        }
    }
}

/// What the cloud knows about the instance behind a Node (InstancesV2 `InstanceMetadata`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct InstanceMetadata {
    /// `<provider name>://<id>`; empty means "use the Node's own `spec.providerID`".
    pub provider_id: String,
    /// Instance type, for `node.kubernetes.io/instance-type`; empty means unknown.
    pub instance_type: String,
    /// Addresses in the order the cloud wants them; empty means "leave the Node's alone".
    pub node_addresses: Vec<NodeAddress>,
    /// Zone, for `topology.kubernetes.io/zone`; empty means unknown.
    pub zone: String,
    /// Region, for `topology.kubernetes.io/region`; empty means unknown.
    pub region: String,
    /// Extra labels. Keys in the `kubernetes.io` / `k8s.io` domains are dropped and keys that
    /// already exist on the Node are never overwritten.
    pub additional_labels: BTreeMap<String, String>,
}

/// Instance capability (the InstancesV2 contract).
///
/// Implementations should locate the instance by `spec.providerID` first and fall back to the
/// node name (or labels) only when the Node has none.
#[async_trait]
pub trait Instances: Send + Sync {
    /// Whether the instance behind `node` still exists.
    ///
    /// `Ok(false)` makes the lifecycle controller **delete the Node**. Return it only on a fresh,
    /// direct confirmation from the cloud that the instance is gone (e.g. a lookup by ID that
    /// answered "not found"), never from a stale cache, a failed call, a timeout or a partial
    /// listing; those are `Err`. A stopped instance exists. Any `Err` (including
    /// [`Error::InstanceNotFound`]) leaves the Node untouched.
    async fn instance_exists(&self, node: &Node) -> Result<bool>;

    /// Whether the instance is shut down (powered off but still existing).
    async fn instance_shutdown(&self, node: &Node) -> Result<bool>;

    /// Metadata used to initialize the Node and to refresh its addresses.
    ///
    /// `Ok(None)` means "nothing to do now": the Node stays as it is and is not retried until it
    /// changes again.
    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>>;
}

/// Load balancer capability, used by the service controller.
#[async_trait]
pub trait LoadBalancer: Send + Sync {
    /// The load balancer's current status, or `None` when it does not exist.
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>>;

    /// The name the provider uses for this Service's load balancer.
    fn get_load_balancer_name(&self, _cluster_name: &str, service: &Service) -> String {
        default_load_balancer_name(service)
    }

    /// Create or fully reconcile the load balancer and return its status.
    ///
    /// May return [`Error::ImplementedElsewhere`] or [`Error::Retry`].
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerStatus>;

    /// Update the backend set only.
    ///
    /// May return [`Error::ImplementedElsewhere`] or [`Error::Retry`].
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<()>;

    /// Delete the load balancer; `Ok(())` when it is already absent.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<()>;

    /// What [`LoadBalancer::ensure_load_balancer`] would change, found with reads only.
    ///
    /// Used by dry runs ([`crate::dryrun`]); it must never write to the cloud. Providers that
    /// cannot tell answer [`Error::NotImplemented`].
    async fn plan_load_balancer(
        &self,
        _cluster_name: &str,
        _service: &Service,
        _nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerPlan> {
        Err(Error::NotImplemented)
    }
}

/// The outcome of [`LoadBalancer::plan_load_balancer`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadBalancerPlan {
    /// One line per cloud change ensure would make, in order (e.g. `create load balancer
    /// "web" (lb11 in fsn1)`, `change algorithm round_robin -> least_connections`); empty when
    /// the load balancer is as wanted.
    pub changes: Vec<String>,
    /// Warnings ensure would report on the Service: (event reason, message).
    pub warnings: Vec<(String, String)>,
    /// The status ensure would write, when it can be known without writing (an existing load
    /// balancer that needs no change, or whose addresses the changes keep).
    pub status: Option<LoadBalancerStatus>,
}

/// `"a"` + the Service UID without dashes, cut to 32 characters.
pub fn default_load_balancer_name(service: &Service) -> String {
    let uid = service.metadata.uid.as_deref().unwrap_or_default();
    std::iter::once('a')
        .chain(uid.chars().filter(|c| *c != '-'))
        .take(32)
        .collect()
}

/// A route in the cloud network.
#[derive(Clone, Debug, PartialEq)]
pub struct Route {
    /// Provider-assigned name (ignored on create).
    pub name: String,
    /// Name of the Node the traffic goes to; empty or unknown for blackholes.
    pub target_node: String,
    /// The pod CIDR routed to the node.
    pub destination_cidr: IpNet,
    /// The route's target no longer exists.
    pub blackhole: bool,
    /// Whether the provider keys routes by node addresses as well.
    pub enable_node_addresses: bool,
    /// The target Node's addresses (when `enable_node_addresses`).
    pub target_node_addresses: Vec<NodeAddress>,
}

/// Route capability, used by the route controller.
#[async_trait]
pub trait Routes: Send + Sync {
    /// All routes of the cluster.
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>>;
    /// Create a route; `name_hint` is the Node UID, `route.name` is ignored.
    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()>;
    /// Delete a route as returned by [`Routes::list_routes`].
    async fn delete_route(&self, cluster_name: &str, route: &Route) -> Result<()>;
}

/// A cloud implementation.
#[async_trait]
pub trait CloudProvider: Send + Sync {
    /// The providerID scheme, e.g. `hcloud`.
    fn provider_name(&self) -> &str;

    /// Called once after leadership is won and before any controller starts. May start
    /// background work that ends with `shutdown`.
    async fn initialize(&self, _client: kube::Client, _shutdown: CancellationToken) -> Result<()> {
        Ok(())
    }

    /// Whether the provider tags resources with a cluster ID.
    fn has_cluster_id(&self) -> bool {
        true
    }

    /// Instance capability; `None` disables the node and node-lifecycle controllers.
    fn instances(&self) -> Option<Arc<dyn Instances>>;

    /// Load balancer capability; `None` disables the service controller.
    fn load_balancer(&self) -> Option<Arc<dyn LoadBalancer>> {
        None
    }

    /// Route capability; `None` disables the route controller.
    fn routes(&self) -> Option<Arc<dyn Routes>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_found_directly_and_through_wrapping() {
        let direct = Error::retry("busy", Duration::from_secs(7));
        assert_eq!(direct.retry_after(), Some(Duration::from_secs(7)));

        let wrapped = Error::Other {
            message: "ensure failed".into(),
            source: Some(Box::new(Error::retry("locked", Duration::from_secs(3)))),
        };
        assert_eq!(wrapped.retry_after(), Some(Duration::from_secs(3)));
        assert_eq!(Error::api_msg("boom").retry_after(), None);
    }

    #[test]
    fn only_instance_not_found_is_not_found() {
        assert!(Error::InstanceNotFound.is_instance_not_found());
        for err in [
            Error::api_msg("404 from a list call"),
            Error::NotImplemented,
            Error::other("x"),
            Error::InvalidInput("bad".into()),
        ] {
            assert!(!err.is_instance_not_found(), "{err}");
        }
    }

    #[test]
    fn metric_labels_are_distinct() {
        let labels = [
            Error::InstanceNotFound.metric_label(),
            Error::NotImplemented.metric_label(),
            Error::ImplementedElsewhere.metric_label(),
            Error::retry("", Duration::ZERO).metric_label(),
            Error::InvalidInput(String::new()).metric_label(),
            Error::api_msg("").metric_label(),
            Error::Config(String::new()).metric_label(),
            Error::other("").metric_label(),
        ];
        let unique: std::collections::BTreeSet<_> = labels.iter().collect();
        assert_eq!(unique.len(), labels.len());
    }

    #[test]
    fn default_load_balancer_name_strips_dashes_and_cuts() {
        let mut svc = Service::default();
        svc.metadata.uid = Some("0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab".into());
        let name = default_load_balancer_name(&svc);
        assert_eq!(name, "a0f2f6c0e1b2a4c3d9e8f0123456789a");
        assert_eq!(name.len(), 32);
    }
}
