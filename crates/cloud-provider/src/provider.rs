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

use crate::change::{Change, Verb, Warning, Write};
use crate::runtime::Workers;

/// Boxed source error carried by [`Error`].
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// Result of a provider call.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// What a controller does with a failed reconcile, chosen by whoever built the [`Error`].
///
/// The runtime ([`crate::runtime`]) reads only this, never the message or a source chain:
///
/// | category | retried? | delay |
/// |---|---|---|
/// | [`Category::Transient`] | yes | `max(retry-after, per-key backoff)`, through the queue-wide bucket |
/// | [`Category::Conflict`] | yes | as transient (someone else changed the object meanwhile) |
/// | [`Category::NotFound`] | yes | as transient (the cloud may still be catching up) |
/// | [`Category::Rejected`] | yes | as transient, the per-key backoff growing to its cap (5 min for Services); at once when the object changes |
/// | [`Category::User`] | no | one Warning with [`Error::user_reason`]; waits for the object to change |
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// A failure that may go away by itself (network, 5xx, rate limit, busy resource).
    Transient,
    /// The object asks for something impossible (a bad annotation, no NodePorts, an unknown
    /// location): retrying without a change to the object cannot help.
    User,
    /// Something the call needs does not exist.
    NotFound,
    /// An optimistic-concurrency conflict (the object or cloud resource changed meanwhile).
    Conflict,
    /// The cloud refused the request, or something the object refers to does not exist (yet):
    /// nothing is wrong with the object itself, and the world outside it may change (a
    /// certificate uploaded later, a location that becomes available, a quota raised, another
    /// Service letting go of a name). Retried with a growing delay, never given up.
    Rejected,
}

impl Category {
    /// A short, stable label for metrics (`transient`, `user`, `not_found`, `conflict`,
    /// `rejected`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Transient => "transient",
            Self::User => "user",
            Self::NotFound => "not_found",
            Self::Conflict => "conflict",
            Self::Rejected => "rejected",
        }
    }

    /// Whether the runtime retries errors of this category on its own.
    pub fn is_retried(self) -> bool {
        !matches!(self, Self::User)
    }
}

impl std::fmt::Display for Category {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The event reason of a user error whose provider named none.
pub const REASON_INVALID_CONFIGURATION: &str = "InvalidConfiguration";

/// What is special about an [`Error`] beyond its [`Category`]: the few answers a controller
/// tells apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Nothing beyond the category.
    Plain,
    /// The instance behind a Node does not exist (a metadata lookup found nothing).
    InstanceNotFound,
    /// The provider does not implement the call.
    NotImplemented,
}

/// The one error of the provider contract: what failed (a message naming the object, the
/// annotation or the cloud call, and its cause) and what the controllers do about it (a
/// [`Category`], the event reason of a user error, the shortest delay before a retry).
///
/// The runtime reads [`Error::category`], [`Error::user_reason`] and [`Error::retry_after`],
/// never the message or a source chain. Build it with the constructor that names its
/// category: [`Error::transient`] (and [`Error::api`], [`Error::retry`]), [`Error::user`]
/// (and [`Error::invalid_input`]), [`Error::rejected`], [`Error::not_found`],
/// [`Error::conflict`], [`Error::instance_not_found`], [`Error::not_implemented`].
///
/// Callers tell an absent instance ([`Error::is_instance_not_found`]) apart from every other
/// failure. Controllers never read any error as "the instance is gone": only
/// [`Instances::instance_exists`] answering `Ok(false)` is.
#[derive(Debug)]
pub struct Error {
    category: Category,
    kind: Kind,
    reason: Option<String>,
    message: String,
    retry_after: Option<Duration>,
    source: Option<BoxError>,
    /// The Warning that says why, for the object (see [`Error::with_warning`]); boxed, so
    /// that the error stays small.
    warning: Option<Box<Warning>>,
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|source| source as &(dyn std::error::Error + 'static))
    }
}

impl Error {
    fn new(category: Category, message: impl Into<String>) -> Self {
        Self {
            category,
            kind: Kind::Plain,
            reason: None,
            message: message.into(),
            retry_after: None,
            source: None,
            warning: None,
        }
    }

    fn caused_by(mut self, source: impl Into<BoxError>) -> Self {
        self.source = Some(source.into());
        self
    }

    /// A failure that may go away by itself ([`Category::Transient`]).
    pub fn transient(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::new(Category::Transient, message).caused_by(source)
    }

    /// Any other transient failure, without a separate cause.
    pub fn other(message: impl Into<String>) -> Self {
        Self::new(Category::Transient, message)
    }

    /// A failed cloud API call (transient), with its cause.
    pub fn api(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::api_msg(message).caused_by(source)
    }

    /// A failed cloud API call (transient), without a separate cause.
    pub fn api_msg(message: impl Into<String>) -> Self {
        Self::new(
            Category::Transient,
            format!("cloud API call failed: {}", message.into()),
        )
    }

    /// A transient failure that must not be retried sooner than `retry_after` (e.g. a cloud
    /// resource locked by a running action). The caller waits `max(retry_after, its backoff)`.
    pub fn retry(message: impl Into<String>, retry_after: Duration) -> Self {
        let mut err = Self::new(
            Category::Transient,
            format!("{} (retry after {retry_after:?})", message.into()),
        );
        err.retry_after = Some(retry_after);
        err
    }

    /// A user error: one Warning with `reason` (e.g. [`REASON_INVALID_CONFIGURATION`]), then
    /// nothing until the object changes. `message` names the field or annotation and value.
    pub fn user(reason: impl Into<String>, message: impl Into<String>) -> Self {
        let mut err = Self::new(Category::User, message);
        err.reason = Some(reason.into());
        err
    }

    /// The object handed to the provider is unusable on its face (an unparsable providerID, a
    /// bad annotation): a user error with reason [`REASON_INVALID_CONFIGURATION`].
    pub fn invalid_input(message: impl Into<String>) -> Self {
        Self::user(
            REASON_INVALID_CONFIGURATION,
            format!("invalid input: {}", message.into()),
        )
    }

    /// Refused for now (see [`Category::Rejected`]): retried with a growing delay.
    pub fn rejected(message: impl Into<String>) -> Self {
        Self::new(Category::Rejected, message)
    }

    /// Refused for now, with a cause (see [`Category::Rejected`]).
    pub fn rejected_by(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::rejected(message).caused_by(source)
    }

    /// Something the call needs is missing in the cloud (not the instance itself: that is
    /// [`Error::instance_not_found`]).
    pub fn not_found(message: impl Into<String>, source: impl Into<BoxError>) -> Self {
        Self::not_found_msg(message).caused_by(source)
    }

    /// Something the call needs is missing in the cloud, without a separate cause.
    pub fn not_found_msg(message: impl Into<String>) -> Self {
        Self::new(Category::NotFound, format!("not found: {}", message.into()))
    }

    /// A concurrent change got in the way (optimistic concurrency).
    pub fn conflict(message: impl Into<String>, retry_after: Option<Duration>) -> Self {
        let mut err = Self::new(Category::Conflict, format!("conflict: {}", message.into()));
        err.retry_after = retry_after;
        err
    }

    /// The instance does not exist in the cloud (e.g. a metadata lookup found nothing).
    ///
    /// Like every other error it never makes a controller delete a Node: deletion happens
    /// only when [`Instances::instance_exists`] returns `Ok(false)`.
    pub fn instance_not_found() -> Self {
        let mut err = Self::new(Category::NotFound, "instance not found");
        err.kind = Kind::InstanceNotFound;
        err
    }

    /// The same error, with the Warning the controller records on the object instead of its
    /// generic one (e.g. why no instance could be found for a Node: which addresses, which
    /// servers). `plan` prints the same Warning.
    #[must_use]
    pub fn with_warning(mut self, warning: Warning) -> Self {
        self.warning = Some(Box::new(warning));
        self
    }

    /// The Warning the provider gave for this error ([`Error::with_warning`]).
    pub fn warning(&self) -> Option<&Warning> {
        self.warning.as_deref()
    }

    /// The provider does not implement this call (a user error: no retry helps).
    pub fn not_implemented() -> Self {
        let mut err = Self::user("NotImplemented", "not implemented");
        err.kind = Kind::NotImplemented;
        err
    }

    /// What the controllers do with this error.
    pub fn category(&self) -> Category {
        self.category
    }

    /// The event reason of a user error (`InvalidConfiguration` unless the provider named
    /// one); `None` for the other categories.
    pub fn user_reason(&self) -> Option<&str> {
        (self.category == Category::User).then(|| {
            self.reason
                .as_deref()
                .unwrap_or(REASON_INVALID_CONFIGURATION)
        })
    }

    /// True only for [`Error::instance_not_found`].
    pub fn is_instance_not_found(&self) -> bool {
        self.kind == Kind::InstanceNotFound
    }

    /// True only for [`Error::not_implemented`].
    pub fn is_not_implemented(&self) -> bool {
        self.kind == Kind::NotImplemented
    }

    /// The shortest delay before the next attempt, when the provider named one. Read from this
    /// error only: the category and the delay are the provider's typed answer, nothing is
    /// searched for in a source chain.
    pub fn retry_after(&self) -> Option<Duration> {
        self.retry_after
    }

    /// A short, stable label for metrics: the category, or what is special about the error.
    pub fn metric_label(&self) -> &'static str {
        match self.kind {
            Kind::InstanceNotFound => "instance_not_found",
            Kind::NotImplemented => "not_implemented",
            Kind::Plain => self.category.as_str(),
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
    /// Warnings about the Node that the lookup found (e.g. its name is not its instance's):
    /// recorded on the Node when it is initialised (and printed by `plan`), never a failure.
    pub warnings: Vec<Warning>,
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
    /// [`Error::instance_not_found()`]) leaves the Node untouched.
    async fn instance_exists(&self, node: &Node) -> Result<bool>;

    /// Whether the instance is shut down (powered off but still existing).
    async fn instance_shutdown(&self, node: &Node) -> Result<bool>;

    /// Metadata used to initialize the Node and to refresh its addresses.
    ///
    /// `Ok(None)` means "nothing to do now": the Node stays as it is and is not retried until it
    /// changes again.
    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>>;

    /// The caller is about to ask for the metadata of `nodes` Nodes in a row (the periodic
    /// address refresh of every Node). A provider that reads instances in pages can then
    /// answer all of them from one listing rather than read the first one alone. The default
    /// does nothing.
    fn expect_lookups(&self, _nodes: usize) {}
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

    /// Create or fully reconcile the load balancer and return its status, or say that
    /// another controller owns it ([`Outcome::ImplementedElsewhere`]).
    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Outcome<LoadBalancerStatus>>;

    /// The caller is about to update the load balancers of `services` Services in a row (a
    /// Node joined or left, and every load balancer follows). A provider that finds load
    /// balancers in a paged listing can then answer all of them from one listing rather than
    /// look up the first one alone. The default does nothing.
    fn expect_lookups(&self, _services: usize) {}

    /// Whether the provider picks targets among the eligible Nodes by their labels (a node
    /// selector): then a change of a Node's labels alone updates the targets too. The default
    /// (as upstream) is no.
    fn selects_nodes_by_label(&self) -> bool {
        false
    }

    /// Update the backend set only, or say that another controller owns the load balancer.
    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Outcome<()>>;

    /// Delete the load balancer (done when it is already absent), or say that another
    /// controller owns it.
    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Outcome<()>>;

    /// The service controller's worker pool, handed over before its first call: a call of this
    /// trait that waits for the cloud (an action to finish) may do so inside
    /// [`Workers::waiting`], lending its slot to the pool so that the next Service need not
    /// wait for this one's actions.
    fn use_workers(&self, _workers: Workers) {}

    /// The Services of the cluster as the caller knows them (the service controller's
    /// informer, `plan`'s listing), handed over before its first call, again whenever the
    /// caller has a newer view: a provider that finds a load balancer labelled for another
    /// Service can ask whether that Service still exists without a request of its own. The
    /// default ignores it.
    fn use_services(&self, _services: Arc<dyn KnownServices>) {}

    /// The Secrets of the Service's namespace that its load balancer is made from (a TLS
    /// certificate the provider uploads): the service controller syncs the Service again when
    /// one of them changes. The default: none.
    fn secrets_of(&self, _service: &Service) -> Vec<String> {
        Vec::new()
    }

    /// The reader of the Secrets [`LoadBalancer::secrets_of`] names, handed over before the
    /// first call when the caller reads Secrets (never when that is turned off). The default
    /// ignores it.
    fn use_secrets(&self, _secrets: Arc<dyn crate::secrets::TlsSecrets>) {}

    /// What [`LoadBalancer::ensure_load_balancer`] would change, found with reads only.
    ///
    /// Used by `plan` ([`crate::plan`]); it must never write to the cloud. Providers that
    /// cannot tell answer [`Error::not_implemented`].
    async fn plan_load_balancer(
        &self,
        _cluster_name: &str,
        _service: &Service,
        _nodes: &[Arc<Node>],
    ) -> Result<LoadBalancerPlan> {
        Err(Error::not_implemented())
    }

    /// What [`LoadBalancer::ensure_load_balancer_deleted`] would change, found with reads
    /// only. By default: the load balancer [`LoadBalancer::get_load_balancer`] finds is
    /// deleted (the requests that takes are not named).
    async fn plan_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<LoadBalancerPlan> {
        let mut out = LoadBalancerPlan::default();
        if self
            .get_load_balancer(cluster_name, service)
            .await?
            .is_some()
        {
            out.changes.push(Change::new(
                Verb::Delete,
                format!(
                    "load balancer {:?}",
                    self.get_load_balancer_name(cluster_name, service)
                ),
            ));
        }
        Ok(out)
    }
}

/// The Services of the cluster, as a controller's cache (or a listing) holds them: whether a
/// Service with a UID exists, answered from memory.
pub trait KnownServices: Send + Sync + std::fmt::Debug {
    /// Whether a Service with `uid` exists in the cluster (in the caller's scope); `None` while
    /// the caller cannot tell (its cache has not been filled yet).
    fn exists(&self, uid: &str) -> Option<bool>;

    /// `namespace/name` of the Service with `uid`, when known (for messages). The default
    /// knows none.
    fn name_of(&self, _uid: &str) -> Option<String> {
        None
    }
}

/// A fixed set of Service UIDs (a listing's), as [`KnownServices`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ListedServices(pub std::collections::HashSet<String>);

impl ListedServices {
    /// The UIDs of `services`.
    pub fn of<'a>(services: impl IntoIterator<Item = &'a Service>) -> Self {
        Self(
            services
                .into_iter()
                .filter_map(|s| s.metadata.uid.clone())
                .collect(),
        )
    }
}

impl KnownServices for ListedServices {
    fn exists(&self, uid: &str) -> Option<bool> {
        Some(self.0.contains(uid))
    }
}

/// What a load balancer call came to when it did not fail.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome<T> {
    /// Done; for ensure, the load balancer's status.
    Done(T),
    /// Another controller owns this load balancer (upstream's `ImplementedElsewhere`): this
    /// controller writes nothing, the Service keeps its finalizer and its status.
    ImplementedElsewhere,
}

impl<T> Outcome<T> {
    /// The value when done; `None` when the load balancer is implemented elsewhere.
    pub fn done(self) -> Option<T> {
        match self {
            Self::Done(value) => Some(value),
            Self::ImplementedElsewhere => None,
        }
    }
}

/// What [`LoadBalancer::ensure_load_balancer`] would do now: the outcome of
/// [`LoadBalancer::plan_load_balancer`], from the same decision ensure carries out.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct LoadBalancerPlan {
    /// Every cloud change ensure would make, in order (e.g. create load balancer `"web" (lb11
    /// in fsn1)`, change `algorithm round_robin -> least_connections`); empty when the load
    /// balancer is as wanted.
    pub changes: Vec<Change>,
    /// The cloud requests that carry the changes out, one per request, in order.
    pub writes: Vec<Write>,
    /// Warnings ensure would report (on the Service, or `(on Node x) …`).
    pub warnings: Vec<Warning>,
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
    /// The instance the traffic goes to, as a providerID: on creation the target Node's
    /// `spec.providerID`, on listing the instance the route leads to, when the provider knows
    /// it. Empty when unknown. A listed route that leads to another instance than its Node's
    /// does not serve that Node: the route controller creates the right one over it.
    pub target_provider_id: String,
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

    /// How many route calls the controller makes at once (capped at upstream's
    /// [`crate::route::MAX_CONCURRENT_ROUTE_OPERATIONS`]). A cloud that carries out changes one
    /// at a time gains nothing from hundreds of calls waiting in its queue, and every waiting
    /// call keeps its state in memory.
    fn concurrent_operations(&self) -> usize {
        crate::route::MAX_CONCURRENT_ROUTE_OPERATIONS
    }

    /// Whether the cloud can route pod traffic to `destination` at all. The route controller
    /// leaves the pod CIDRs it cannot route alone: it creates no route for them and they do not
    /// count for the Node's `NetworkUnavailable` condition (e.g. the IPv6 pod CIDRs of a
    /// dual-stack cluster in a cloud whose networks route IPv4 only).
    fn can_route(&self, _destination: &IpNet) -> bool {
        true
    }

    /// Whether the cloud can route pod traffic to `node` at all (e.g. not to a dedicated
    /// server outside the cloud's networks). The route controller makes no route for a Node
    /// it cannot route, records one Warning on it and leaves its `NetworkUnavailable`
    /// condition to the CNI.
    fn routes_node(&self, _node: &Node) -> bool {
        true
    }

    /// The cloud requests that create one route and delete one, as `plan` names them (`None`:
    /// not named). They must be what [`Routes::create_route`] and [`Routes::delete_route`]
    /// send when nothing unexpected happens.
    fn route_writes(&self) -> RouteWrites {
        RouteWrites::default()
    }
}

/// See [`Routes::route_writes`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RouteWrites {
    /// The request that creates a route.
    pub create: Option<Write>,
    /// The request that deletes a route.
    pub delete: Option<Write>,
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

    /// The cloud API's recoveries: a count that changes each time a call succeeds after one or
    /// more transient failures (5xx, timeouts, connection errors, rate limits). The controllers
    /// given it retry their transiently failed objects promptly instead of after their grown
    /// backoff ([`crate::runtime::workqueue::WorkQueue::expedite_transient`]). `None` (the default):
    /// the provider cannot tell, and backoffs run their course.
    fn recoveries(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_is_read_from_the_error_itself_only() {
        let direct = Error::retry("busy", Duration::from_secs(7));
        assert_eq!(direct.retry_after(), Some(Duration::from_secs(7)));
        assert_eq!(direct.category(), Category::Transient);
        // No downcasting through chains: a wrapped hint is the wrapper's business.
        let wrapped = Error::transient(
            "ensure failed",
            Error::retry("locked", Duration::from_secs(3)),
        );
        assert_eq!(wrapped.retry_after(), None);
        assert_eq!(Error::api_msg("boom").retry_after(), None);
        let conflict = Error::conflict("changed", Some(Duration::from_secs(2)));
        assert_eq!(conflict.retry_after(), Some(Duration::from_secs(2)));
        assert_eq!(conflict.category(), Category::Conflict);
    }

    #[test]
    fn every_constructor_names_its_category() {
        let cases = [
            (Error::instance_not_found(), Category::NotFound),
            (Error::not_found("server 7", "404"), Category::NotFound),
            (Error::not_implemented(), Category::User),
            (Error::invalid_input("x"), Category::User),
            (Error::user("InvalidConfiguration", "bad"), Category::User),
            (Error::conflict("x", None), Category::Conflict),
            (Error::rejected("x"), Category::Rejected),
            (Error::retry("x", Duration::ZERO), Category::Transient),
            (Error::api_msg("x"), Category::Transient),
            (Error::other("x"), Category::Transient),
        ];
        for (err, category) in cases {
            assert_eq!(err.category(), category, "{err}");
            assert_eq!(
                err.user_reason().is_some(),
                category == Category::User,
                "{err}"
            );
        }
        let user = Error::user(
            "UnsupportedLocation",
            "annotation x: \"mars\" is no location",
        );
        assert_eq!(user.user_reason(), Some("UnsupportedLocation"));
        assert_eq!(user.to_string(), "annotation x: \"mars\" is no location");
        assert_eq!(
            Error::invalid_input("bad id").user_reason(),
            Some(REASON_INVALID_CONFIGURATION)
        );
        assert!(!Category::User.is_retried());
        assert!(Category::Transient.is_retried());
        assert!(Category::Rejected.is_retried());
    }

    #[test]
    fn messages_and_sources() {
        let err = Error::api("get server", std::io::Error::other("connection reset"));
        assert_eq!(err.to_string(), "cloud API call failed: get server");
        assert_eq!(
            std::error::Error::source(&err).map(ToString::to_string),
            Some("connection reset".to_owned())
        );
        assert_eq!(
            Error::invalid_input("cidr").to_string(),
            "invalid input: cidr"
        );
        assert_eq!(
            Error::retry("busy", Duration::from_secs(2)).to_string(),
            "busy (retry after 2s)"
        );
    }

    #[test]
    fn only_instance_not_found_is_not_found() {
        assert!(Error::instance_not_found().is_instance_not_found());
        for err in [
            Error::api_msg("404 from a list call"),
            Error::not_implemented(),
            Error::other("x"),
            Error::invalid_input("bad"),
            Error::not_found_msg("the network"),
        ] {
            assert!(!err.is_instance_not_found(), "{err}");
        }
    }

    #[test]
    fn metric_labels_are_the_category_or_what_is_special() {
        assert_eq!(Error::api_msg("x").metric_label(), "transient");
        assert_eq!(Error::rejected("x").metric_label(), "rejected");
        assert_eq!(Error::invalid_input("x").metric_label(), "user");
        assert_eq!(
            Error::instance_not_found().metric_label(),
            "instance_not_found"
        );
        assert_eq!(Error::not_implemented().metric_label(), "not_implemented");
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
