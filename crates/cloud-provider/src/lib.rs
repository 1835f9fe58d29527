//! Provider-neutral cloud-controller-manager framework: what `k8s.io/cloud-provider` is for Go.
//!
//! A cloud implements the contract of [`provider`]; the framework runs the controllers that
//! keep the cluster and the cloud in step: [`node`] (the cloud node controller),
//! [`nodelifecycle`] (the cloud node lifecycle controller), [`service`] (load balancers) and
//! [`route`] (pod network routes). Nothing in this crate knows a particular cloud.
//!
//! # Building a cloud controller manager for your cloud
//!
//! The crate's example `memory_cloud` is a complete one, for a cloud that lives in memory:
//! `examples/memory_cloud/cloud.rs` is the provider (a few hundred lines, all four
//! capabilities), `examples/memory_cloud/controllers.rs` the wiring (one function,
//! `run_controllers`), `examples/memory_cloud/main.rs` the binary (flags, a kubeconfig, a
//! console to add, shut down and delete instances). Run it against any cluster whose kubelets
//! run with `--cloud-provider=external`:
//!
//! ```sh
//! cargo run -p cloud-provider --example memory_cloud -- \
//!     --kubeconfig ~/.kube/config --instance worker-1=10.0.0.2
//! ```
//!
//! The integration test `tests/integration/example_provider.rs` runs the same provider and
//! wiring against a real kube-apiserver. The steps, in the order the example takes them:
//!
//! 1. **Nodes: implement [`Instances`].** [`Instances::instance_metadata`] answers, for a Node,
//!    its instance's providerID (`<scheme>://<id>`), type, zone, region and addresses
//!    ([`InstanceMetadata`]). The [`NodeController`] applies them to every Node a kubelet
//!    registered with the [`well_known::TAINT_UNINITIALIZED`] taint (`spec.providerID`, the
//!    `topology.kubernetes.io/zone`, `.../region` and `node.kubernetes.io/instance-type`
//!    labels, `status.addresses`), removes the taint and keeps the addresses up to date.
//!    [`Instances::instance_exists`] and [`Instances::instance_shutdown`] serve the
//!    [`NodeLifecycleController`]: a NotReady Node whose instance is gone is deleted, one whose
//!    instance is powered off gets the [`well_known::TAINT_SHUTDOWN`] taint. Find the instance
//!    by `spec.providerID` first and by the Node's name only when there is none, and answer
//!    `Ok(false)` from `instance_exists` only on a fresh confirmation from the cloud: every
//!    error leaves the Node alone. Before deleting, the [`nodelifecycle::brake`] waits for a
//!    second confirmation a `node_monitor_period` later and holds every deletion while many
//!    Nodes are reported gone at once.
//! 2. **Services: implement [`LoadBalancer`].** The [`ServiceController`] calls
//!    [`LoadBalancer::ensure_load_balancer`] for every Service of type LoadBalancer it owns
//!    and writes the status returned into `status.loadBalancer`,
//!    [`LoadBalancer::update_load_balancer`] when the eligible Nodes change, and
//!    [`LoadBalancer::ensure_load_balancer_deleted`] when the Service goes or changes type
//!    (its finalizer keeps the Service until then). Answer [`Outcome::ImplementedElsewhere`]
//!    for load balancers another controller owns.
//! 3. **Pod routes: implement [`Routes`].** The [`RouteController`] lists the cluster's routes
//!    every period, creates one for every pod CIDR of a Node that lacks it (then sets the
//!    Node's `NetworkUnavailable` condition to `False`) and deletes the routes within the
//!    cluster CIDRs that lead to no Node.
//! 4. **Implement [`CloudProvider`]**: the providerID scheme and the capabilities you have.
//!    A capability you leave out (`None`) means its controllers do not run.
//! 5. **Wire the controllers.** Start the shared [`NodeCache`] and register the metrics at
//!    process start; initialise the provider and start the controllers once this replica may
//!    write. Your binary chooses the Kubernetes API version (a version feature of
//!    `k8s-openapi`, as for every library built on it). The example's `run_controllers`
//!    does, in short:
//!
//! ```no_run
//! # use std::sync::Arc;
//! # use cloud_provider::*;
//! # use tokio_util::sync::CancellationToken;
//! # async fn wire(
//! #     client: kube::Client,
//! #     provider: Arc<dyn CloudProvider>,
//! #     registry: &mut prometheus_client::registry::Registry,
//! #     lease_won: impl std::future::Future<Output = ()>,
//! # ) {
//! let shutdown = CancellationToken::new();
//! // From process start, on standbys too: the shared Node cache; `nodes.is_ready()` feeds /readyz.
//! let nodes = NodeCache::spawn(client.clone(), shutdown.clone());
//! let metrics = Metrics::new();
//! metrics.register(registry);
//!
//! lease_won.await; // losing the lease later must end the process
//! provider.initialize(client.clone(), shutdown.clone()).await.ok();
//! if let Some(instances) = provider.instances() {
//!     let node = NodeController::new(
//!         client.clone(),
//!         nodes.clone(),
//!         instances.clone(),
//!         metrics.clone(),
//!         NodeControllerConfig::default(),
//!     );
//!     let lifecycle = NodeLifecycleController::new(
//!         client.clone(),
//!         nodes.clone(),
//!         instances,
//!         metrics.clone(),
//!         NodeLifecycleControllerConfig::default(),
//!     );
//!     tokio::spawn(node.run(shutdown.clone()));
//!     tokio::spawn(lifecycle.run(shutdown.clone()));
//! }
//! if let Some(lb) = provider.load_balancer() {
//!     let config = ServiceControllerConfig::default();
//!     let service = ServiceController::new(client.clone(), nodes.clone(), lb, metrics.clone(), config);
//!     tokio::spawn(service.run(shutdown.clone()));
//! }
//! if let Some(routes) = provider.routes() {
//!     let config = RouteControllerConfig {
//!         cluster_cidrs: vec!["10.244.0.0/16".parse().expect("a CIDR")],
//!         ..RouteControllerConfig::default()
//!     };
//!     let route = RouteController::new(client, nodes, routes, metrics, config);
//!     tokio::spawn(route.run(shutdown.clone()));
//! }
//! # }
//! ```
//!
//! # What the framework does for you
//!
//! - **Work queues** ([`runtime::workqueue`]) with client-go's semantics: a key is queued once and never
//!   handled by two workers at a time, failures back off per key (exponentially, capped) under
//!   a queue-wide token bucket. Each queue exports client-go's work-queue metrics under their
//!   upstream names (`workqueue_depth`, `workqueue_adds_total`, `workqueue_retries_total`,
//!   `workqueue_queue_duration_seconds`, `workqueue_work_duration_seconds`), labelled with the
//!   controller's name.
//! - **Retries by category**: the [`Error`] your provider returns names a [`Category`]; the
//!   [`runtime`] retries transient, conflicting and refused calls with backoff and reports a
//!   user error (a bad annotation) once, as a Warning, until the object changes.
//! - **Caches**: one [`NodeCache`] (a reflector of every Node) shared by all controllers, and
//!   the service controller's Service informer; controllers reconcile from them and write only
//!   what changed.
//! - **Leadership**: the framework elects no leader; it keeps reads and writes apart so that
//!   you can. The cache and the metrics run from process start (a standby is warm); nothing
//!   writes until you start the controllers, which you do once your replica holds the lease.
//! - **Events** ([`events`]): core/v1 Events on the Nodes and Services (a Node synced or
//!   deleted, a load balancer ensured, a failed sync with its cause), aggregated, written off
//!   the controllers' path.
//! - **Metrics and health**: [`Metrics`], [`RouteMetrics`] and [`ServiceMetrics`] under
//!   upstream names; a [`Heartbeat`] per controller for `/healthz` and `/readyz`.
//! - **Plan** ([`plan`]): the controllers' read steps and decisions for every object, printed
//!   instead of carried out; a provider that implements [`LoadBalancer::plan_load_balancer`]
//!   shows its load balancer changes too.
//! - **Secrets** ([`secrets`]): with [`ServiceControllerConfig::secrets`], a Service whose
//!   load balancer is made from a TLS Secret ([`LoadBalancer::secrets_of`]) is synced again
//!   when the Secret changes, and the provider reads its content through [`secrets::TlsSecrets`].
//! - **Scopes** ([`WatchScope`]): several controller sets on one cluster (or tests on one
//!   apiserver) that each see only their Nodes and Services.
//!
//! Every controller reconciles as read → decide → apply; its decisions are [`change`]s. The
//! [`runtime`] (informer, work queue, worker pool with lendable slots, heartbeat) is the one
//! they all run on. `docs/architecture.md` draws the whole.

pub mod change;
pub mod events;
pub mod go;
pub mod metrics;
pub mod node;
pub mod nodelifecycle;
pub mod plan;
pub mod provider;
pub mod route;
pub mod runtime;
pub mod secrets;
pub mod service;
pub mod well_known;

pub use runtime::cache::{NodeCache, NodeEvent, NodeReflector};

/// A loop period that cannot spin: at least 10 ms.
pub(crate) fn period(configured: std::time::Duration) -> std::time::Duration {
    configured.max(std::time::Duration::from_millis(10))
}

/// `base` plus a random share of it below 100 % (client-go's `wait.Jitter` with factor 1.0):
/// the one pacing of retries within a reconcile.
pub(crate) fn jittered(base: std::time::Duration) -> std::time::Duration {
    use rand::Rng;
    base + base.mul_f64(rand::rng().random_range(0.0..1.0))
}

pub(crate) use runtime::token_bucket::refilled;

pub use events::{EventRecorder, EventType};
pub use metrics::Metrics;
pub use node::{NodeController, NodeControllerConfig};
pub use nodelifecycle::{NodeLifecycleController, NodeLifecycleControllerConfig};
pub use provider::{
    Category, CloudProvider, Error, InstanceMetadata, Instances, KnownServices, ListedServices,
    LoadBalancer, LoadBalancerPlan, Outcome, Route, Routes,
};
pub use route::{RouteController, RouteControllerConfig, RouteMetrics};
pub use runtime::{Heartbeat, WatchScope};
pub use service::{ServiceController, ServiceControllerConfig, ServiceMetrics};
