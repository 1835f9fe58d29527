//! The one controller runtime every controller of this crate runs on:
//!
//! - [`informer`]: a diffing informer over a reflector store (the shared Node cache and the
//!   service controller's Service watch), with the watch's progress for health checks;
//! - [`crate::workqueue`]: the work queue (per-key exponential backoff plus the overall
//!   bucket, as client-go);
//! - [`reconcile`]: the [`Reconciler`] shape, its categorised errors and the worker pool;
//! - [`health`]: a liveness/readiness [`Heartbeat`] per controller and the supervision of its
//!   tasks.
//!
//! The node and service controllers queue one key per object. The two periodic controllers fit
//! the same shape: the route controller queues one key for the whole route table, the
//! lifecycle controller one per Node; after a successful reconcile each key queues itself again
//! one period later ([`crate::workqueue::WorkQueue::reschedule`]), a failure is retried by the
//! pool like any other.

pub mod health;
pub mod informer;
pub mod reconcile;

pub use health::{Heartbeat, Tasks};
pub use informer::{Change, Informer, InformerDriver, WatchProgress};
pub use reconcile::{ReconcileError, Reconciler, Retry, kube_category};
