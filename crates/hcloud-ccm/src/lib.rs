//! Process-level parts of the Hetzner Cloud cloud-controller-manager: configuration, logging,
//! signals, leader election and the HTTP endpoints. `main.rs` wires them together.

pub mod cloud;
pub mod config;
pub mod controllers;
pub mod http;
pub mod kube_client;
pub mod leader;
pub mod logging;
pub mod memory;
pub mod metadata;
pub mod plan;
pub mod process_metrics;
pub mod signals;
