//! The client's integration tests against the simulator, one test binary (one link of the
//! dependency graph instead of one per file); `fuzz.rs` stays apart for its counting allocator.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

mod common;

mod actions;
mod api_2026;
mod catalog;
mod certificates;
mod credentials;
mod errors_and_retries;
mod golden;
mod load_balancers;
mod networks;
mod rate_limit;
mod robot;
mod servers;
