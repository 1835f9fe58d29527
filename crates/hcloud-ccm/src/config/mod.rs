//! Configuration: the upstream cloud-controller-manager flags and the official Hetzner CCM's
//! environment variables, parsed into [`Args`] and validated into a [`Config`].
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
mod settings;
mod validate;
mod values;

pub use args::{
    Args, CommandLineError, FlagKind, GivenFlag, NO_EFFECT_FLAGS, NoEffectFlag, defaults,
};
pub use cloud_provider::go::{
    DurationError, GoDuration, parse_bool as parse_go_bool, parse_duration as parse_go_duration,
};
pub use controllers::{Controller, EnabledControllers};
pub use error::{ConfigError, Problem};
pub use feature_gates::{FeatureGates, WATCH_BASED_ROUTES_GATE, parse_feature_gates};
pub use routes::parse_cluster_cidrs;
pub use settings::{
    Config, HcloudSettings, KubeRateLimit, KubeSettings, LeaderElectionSettings,
    LoadBalancerSettings, LoggingSettings, RobotSettings, SecureServingSettings, TlsFiles,
};
pub use values::{
    AddressFamily, ListenAddress, LoadBalancerAlgorithm, LogFormat, Secret, ServerCacheMode,
};

#[cfg(test)]
mod tests;
