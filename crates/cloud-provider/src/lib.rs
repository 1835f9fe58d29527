//! Provider-neutral cloud-controller-manager framework.
//!
//! Laid out like `k8s.io/cloud-provider`: [`provider`] holds the contract a cloud implements,
//! [`node`] the cloud node controller, [`nodelifecycle`] the cloud node lifecycle controller.
//! [`cache`] is the shared Node reflector the binary starts before leader election,
//! [`events`] a core/v1 Event recorder, [`metrics`] the controllers' Prometheus metrics and
//! [`runtime`] the one controller runtime (informer, work queue, worker pool with lendable
//! slots, heartbeat) they all run on. Every controller reconciles as read → decide → apply;
//! its decisions are [`change`]s, and [`plan`] is the `plan` command's pass: the same reads and
//! decisions for every object, printed instead of carried out. `docs/architecture.md` draws
//! the whole.
//!
//! Leadership gates writes, not reads. A binary wires it like this:
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
//! # }
//! ```

pub mod cache;
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
pub mod service;
pub mod token_bucket;
pub mod well_known;
pub mod workqueue;

pub use cache::{NodeCache, NodeEvent, NodeReflector};

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

pub(crate) use token_bucket::refilled;

/// Lock the std `mutex`, also when a panic poisoned it: every lock of this crate guards plain
/// bookkeeping that stays consistent between statements. The crate's other locks are
/// `parking_lot` mutexes, which have no poisoning and need no helper.
pub(crate) fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}
pub use events::{EventRecorder, EventType};
pub use metrics::Metrics;
pub use node::{NodeController, NodeControllerConfig};
pub use nodelifecycle::{NodeLifecycleController, NodeLifecycleControllerConfig};
pub use provider::{
    Category, CloudProvider, Error, InstanceMetadata, Instances, LoadBalancer, LoadBalancerPlan,
    Outcome, Route, Routes,
};
pub use route::{RouteController, RouteControllerConfig, RouteMetrics};
pub use runtime::{Heartbeat, WatchScope};
pub use service::{ServiceController, ServiceControllerConfig, ServiceMetrics};
