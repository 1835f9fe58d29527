//! HTTP-level tests of the simulator (one test binary, one module per area).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

mod actions;
mod admin;
mod api_2026;
mod binary;
mod certificates;
mod limits;
mod load_balancers;
mod metadata;
mod networks;
mod robot;
mod seeding;
mod semantics;
mod servers;
