//! The service (load balancer) controller: one cloud load balancer per Service of type
//! LoadBalancer without a `loadBalancerClass`, guarded by the
//! `service.kubernetes.io/load-balancer-cleanup` finalizer, with the eligible Nodes as backends.
//!
//! Service changes that matter ([`decisions::needs_update`]) and cleanups go through a work
//! queue (`syncService`); Node changes that alter the backend set trigger one global pass that
//! calls `UpdateLoadBalancer` for every load balancer whose set changed.

mod controller;
pub mod decisions;

pub use controller::{
    COMPONENT, CONTROLLER, MAX_RETRY_DELAY, MIN_RETRY_DELAY, NODE_SYNC_CONTROLLER,
    SERVICE_RESYNC_PERIOD, ServiceController, ServiceControllerConfig, ServiceMetrics,
    ServiceSyncError,
};
