//! The service (load balancer) controller: one cloud load balancer per Service of type
//! LoadBalancer without a `loadBalancerClass` (or of the one class it is configured to own, see
//! [`class`]), guarded by the `service.kubernetes.io/load-balancer-cleanup` finalizer, with the
//! eligible Nodes as targets.
//!
//! It runs on the [`crate::runtime`]: Service changes that matter ([`decisions::needs_update`])
//! and cleanups queue a full sync (`sync.rs`); Node changes that alter the eligible set
//! (exclusion label, autoscaler taint, deletion, providerID) and the periodic
//! `--node-sync-period` queue an "update targets" action (`node_sync.rs`) on each Service's own
//! key. A user error (a bad annotation, no NodePorts) gives one Warning naming it and waits
//! for the Service to change; other errors are retried with backoff.

pub mod class;
mod controller;
pub mod decisions;
mod errors;
mod metrics;
mod node_sync;
mod sync;

pub use class::OwnedClass;
pub use controller::{
    COMPONENT, CONTROLLER, MAX_RETRY_DELAY, MIN_RETRY_DELAY, NODE_SYNC_CONTROLLER,
    SERVICE_RESYNC_PERIOD, ServiceController, ServiceControllerConfig,
};
pub use decisions::NodeFilter;
pub use errors::ServiceSyncError;
pub use metrics::ServiceMetrics;
