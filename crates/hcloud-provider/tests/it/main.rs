//! The provider's integration tests, one test binary: instances, load balancers and routes
//! against the simulator, and the controllers (run in-process) against one control plane that
//! every test of the binary shares (each test in a scope of its own). One binary instead of
//! one per file: one link of the dependency graph, one apiserver start.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

mod controllers;
mod instances;
mod lb_type_cache;
mod load_balancers;
mod per_port;
mod robot;
mod routes;
