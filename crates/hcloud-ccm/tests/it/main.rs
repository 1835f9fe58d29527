//! The integration tests of `hcloud-ccm`, in one test binary: the dependency graph is linked
//! once, and the tests that need Kubernetes share one control plane. `tests/image.rs` (the
//! container image) is a test binary of its own.
//!
//! Run one file's tests with its module name, e.g. `cargo test -p hcloud-ccm --test it rbac::`.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

mod api_versions;
mod binary;
mod deploy;
mod docs;
mod failover;
mod fuzz;
mod health;
mod leader_election;
mod lease_handover;
mod lifecycle;
mod load_balancer_races;
mod load_balancers;
mod migration;
mod node_burst;
mod plan;
mod rbac;
mod routes;
mod secure_port;
mod upstream_metrics;
