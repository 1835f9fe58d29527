//! Process-level parts of the Hetzner Cloud cloud-controller-manager: configuration (flags and
//! variables named as the official CCM names them, every problem reported at once), logging,
//! signals, leader election, the HTTP endpoints and the `plan` command. `main.rs` wires them
//! together with the controllers of `cloud-provider` and the provider of `hcloud-provider`.

pub mod cloud;
pub mod config;
pub mod controllers;
pub mod credentials;
pub mod http;
pub mod kube_client;
pub mod leader;
pub mod logging;
pub mod memory;
pub mod metadata;
pub mod orphans;
pub mod plan;
pub mod process_metrics;
pub mod signals;
