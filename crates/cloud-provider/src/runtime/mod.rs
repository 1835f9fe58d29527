//! The one controller runtime every controller of this crate runs on:
//!
//! - [`informer`]: a diffing informer over its own store (the service controller's Service
//!   watch), with the watch's progress for health checks, and the one feed loop
//!   ([`informer::feed`]) every controller runs over its events;
//! - [`cache`]: the shared Node cache, an informer of lean Nodes started before leader
//!   election;
//! - [`workqueue`]: the work queue (per-key exponential backoff plus the overall bucket, as
//!   client-go, with the upstream `workqueue_*` metrics), paced by [`token_bucket`];
//! - [`reconcile`]: the [`Reconciler`] shape, its categorised errors and the worker pool
//!   ([`reconcile::pool`]);
//! - [`health`]: a liveness/readiness [`Heartbeat`] per controller and the supervision of its
//!   tasks;
//! - [`scope`]: which objects the watches see ([`WatchScope`]): everything unless a library
//!   user narrows it.
//!
//! The node and service controllers queue one key per object. The two periodic controllers fit
//! the same shape: the route controller queues one key for the whole route table, the
//! lifecycle controller one per Node; after a successful reconcile each key queues itself again
//! one period later ([`workqueue::WorkQueue::reschedule`]), a failure is retried by the
//! pool like any other.
//!
//! A worker is a slot, not a task: the pool runs each reconcile as its own task and limits how
//! many run at once ([`Workers`]). The service controller hands its pool's [`Workers`] to the
//! load balancer provider (`LoadBalancer::use_workers`), which waits for the cloud (an action
//! to finish) inside [`Workers::waiting`]: the wait lends a slot to the next key and takes one
//! back afterwards, so `--concurrent-service-syncs=1` bounds the work done at once, not the
//! number of Services waiting for the cloud.

pub mod cache;
pub mod health;
pub mod informer;
pub mod reconcile;
pub mod scope;
pub mod token_bucket;
pub mod workqueue;

pub use health::{Heartbeat, Tasks};
pub use informer::{Feed, Informer, InformerDriver, WatchEvent, WatchProgress, feed, next_change};
pub use reconcile::{ReconcileError, Reconciler, Retry, Workers, kube_category};
pub use scope::WatchScope;
