//! The route controller: one cloud route per (Node, pod CIDR), reported in each Node's
//! `NetworkUnavailable` condition.
//!
//! Every period it lists the cluster's routes, deletes the routes it owns (their CIDR lies in a
//! cluster CIDR) that no Node needs any more, creates the missing ones and writes
//! `NetworkUnavailable` on the Nodes that have pod CIDRs or routes. A creation that fails is
//! tried again with a growing delay and reported once per reason ([`backoff`]).

pub mod backoff;
mod controller;
pub mod decisions;

pub use controller::{
    COMPONENT, CONDITION_ATTEMPTS, CONTROLLER, CREATE_ATTEMPTS, CREATE_BACKOFF_MAX,
    MAX_CONCURRENT_ROUTE_OPERATIONS, ReconcileSummary, RouteController, RouteControllerConfig,
    RouteMetrics, condition_patch, create_retry_delay,
};
