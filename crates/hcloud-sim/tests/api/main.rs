//! HTTP-level tests of the simulator (one test binary, one module per area).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod actions;
mod admin;
mod binary;
mod certificates;
mod load_balancers;
mod networks;
mod semantics;
mod servers;
