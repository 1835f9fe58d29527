//! Configuration: the upstream cloud-controller-manager flags and the official Hetzner CCM's
//! environment variables, parsed into [`Args`] and validated into a [`Config`].
//!
//! Each setting is declared once, as a [`Setting`] in the file of its area (`kube.rs`,
//! `leader.rs`, `serving.rs`, `hcloud.rs`, `load_balancers.rs`, `robot.rs`, and `validate.rs`
//! for the controllers', logging and compatibility flags): flag, environment variable, default,
//! help text and parser, from which the command line, `--help` and the reference table of
//! docs/configuration.md are made. Its value goes into the type that uses it: the provider's
//! own settings ([`hcloud_provider::ProviderSettings`], `LoadBalancerSettings`,
//! `RobotSettings`) or the binary's ([`Config`]). Adding a setting therefore touches two
//! files: its area's file here (the declaration and the line that reads it), and the struct
//! that gets the value. Then regenerate the docs with
//! `UPDATE_DOCS=1 cargo test -p hcloud-ccm --lib config::tests::docs` and
//! `UPDATE_DOCS=1 cargo test -p hcloud-ccm --test it docs::`.
//!
//! [`Args::validate`] checks everything in one pass and returns every problem at once
//! ([`ConfigError`]), each naming the flag or environment variable at fault.
//!
//! Every upstream cloud-controller-manager flag is accepted: the ones that mean something here
//! are implemented, the others ([`NO_EFFECT_FLAGS`]) produce one startup warning each when given.

mod args;
mod checker;
mod controllers;
mod error;
mod feature_gates;
mod hcloud;
mod kube;
mod leader;
pub(crate) use leader::LEADER_ELECTION_JITTER;
mod load_balancers;
mod robot;
mod routes;
mod serving;
mod setting;
mod settings;
mod validate;
mod values;

pub use args::{
    Args, CommandLineError, FlagKind, GivenFlag, NO_EFFECT_FLAGS, NoEffectFlag, SECRET_FLAGS,
    all_settings, reference_table,
};
pub use cloud_provider::go::{
    DurationError, GoDuration, parse_bool as parse_go_bool, parse_duration as parse_go_duration,
};
pub use controllers::{Controller, EnabledControllers};
pub use error::{ConfigError, Problem};
pub use feature_gates::{FeatureGates, WATCH_BASED_ROUTES_GATE, parse_feature_gates};
pub use routes::parse_cluster_cidrs;
pub use setting::{Form, Setting, Spec};
pub use settings::{
    Config, HcloudSettings, KubeRateLimit, KubeSettings, LeaderElectionSettings, LoggingSettings,
    RobotClientSettings, SecureServingSettings, TlsFiles,
};
pub use values::{ListenAddress, LogFormat, Secret};

#[cfg(test)]
mod tests;
