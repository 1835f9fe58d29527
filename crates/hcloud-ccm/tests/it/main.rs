//! The integration tests of `hcloud-ccm`, in one test binary: the dependency graph is linked
//! once, and the tests that need Kubernetes share one control plane (`support::plane`: dual-stack
//! Nodes and an audit log of every request, reads included; `support::scope` keeps the binary
//! under test to its own test's Nodes and Services). `tests/image.rs` (the container image) is a
//! test binary of its own.
//!
//! Run one file's tests with its module name, e.g. `cargo test -p hcloud-ccm --test it rbac::`.
//!
//! Most of these tests wait (for backoffs, resync and status periods, lease times) rather than
//! compute: on an otherwise idle 2-core machine the binary took about 185 s with the default 2
//! test threads and about 62 s with `-- --test-threads=8`; the test command runs six at a time.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test code

mod support;

mod api_versions;
mod binary;
mod credentials;
mod deploy;
mod docs;
mod failover;
mod fuzz;
mod health;
mod identity;
mod leader_election;
mod lease_handover;
mod lifecycle;
mod load_balancer_races;
mod load_balancers;
mod migration;
mod node_burst;
mod orphans;
mod per_port;
mod plan;
mod rbac;
mod robot;
mod routes;
mod secure_port;
mod startup_errors;
mod upstream_metrics;
