//! Configuration: the upstream cloud-controller-manager flags and the official Hetzner CCM's
//! environment variables, parsed into [`Args`] and validated into a [`Config`].
//!
//! [`Args::validate`] checks everything in one pass and returns every problem at once
//! ([`ConfigError`]), each naming the flag or environment variable at fault.
//!
//! Every upstream cloud-controller-manager flag is accepted: the ones that mean something here
//! are implemented, the others ([`NO_EFFECT_FLAGS`]) produce one startup warning each when given.
//!
//! # Features that are not implemented yet
//! Robot dedicated servers are not implemented yet (see [`Capabilities::CURRENT`]); their
//! variables are still parsed and validated, and `ROBOT_ENABLED=true` is an error. Without Robot
//! support, dedicated-server Nodes (`hrobot://`) could be mistaken for deleted cloud servers.

mod args;
mod controllers;
mod duration;
mod values;

use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use ipnet::IpNet;

pub use args::{
    Args, CommandLineError, FlagKind, GivenFlag, NO_EFFECT_FLAGS, NoEffectFlag, defaults,
};
pub use controllers::{Controller, EnabledControllers};
pub use duration::{DurationError, GoDuration, parse_go_duration};
pub use values::{
    AddressFamily, ListenAddress, LoadBalancerAlgorithm, LogFormat, Secret, ServerCacheMode,
    parse_go_bool,
};

/// Which optional features this build implements. Validation turns settings that need a missing
/// feature into warnings or errors (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Robot dedicated servers.
    pub robot: bool,
}

impl Capabilities {
    /// What this build implements.
    pub const CURRENT: Capabilities = Capabilities { robot: false };

    /// Everything implemented (for tests of the remaining validation rules).
    pub const ALL: Capabilities = Capabilities { robot: true };
}

/// Feature gates (`--feature-gates`) this CCM implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FeatureGates {
    /// `CloudControllerManagerWatchBasedRoutesReconciliation`: the route controller also
    /// reconciles when Nodes are added or deleted or change pod CIDRs or addresses.
    pub watch_based_routes: bool,
}

/// Name of the watch-based route reconciliation gate.
pub const WATCH_BASED_ROUTES_GATE: &str = "CloudControllerManagerWatchBasedRoutesReconciliation";

/// Parses `Name=BOOL,Name=BOOL` (spaces around entries allowed). Returns the gates and the names
/// this CCM does not know (upstream refuses unknown names; this CCM implements a subset of
/// upstream's gates, so it only warns), or the first syntax error.
pub fn parse_feature_gates(value: &str) -> Result<(FeatureGates, Vec<String>), String> {
    let mut gates = FeatureGates::default();
    let mut unknown = Vec::new();
    for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let Some((name, raw)) = entry.split_once('=') else {
            return Err(format!("{entry:?} is not Name=true or Name=false"));
        };
        let name = name.trim();
        let Some(enabled) = parse_go_bool(raw.trim()) else {
            return Err(format!("invalid boolean {:?} for {name}", raw.trim()));
        };
        if name == WATCH_BASED_ROUTES_GATE {
            gates.watch_based_routes = enabled;
        } else {
            unknown.push(name.to_owned());
        }
    }
    Ok((gates, unknown))
}

/// Client-side limit of requests to the Kubernetes API (`--kube-api-qps`, `--kube-api-burst`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KubeRateLimit {
    /// Tokens added per second (> 0).
    pub qps: f64,
    /// Bucket size (≥ 1).
    pub burst: u32,
}

// Validation only produces finite, positive rates.
impl Eq for KubeRateLimit {}

/// One configuration problem, naming the flag or environment variable at fault.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// `--flag` or `ENV_VAR` (several joined by `/` when the problem involves them together).
    pub setting: String,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.setting, self.message)
    }
}

/// Every problem found by [`Args::validate`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct ConfigError {
    /// The problems, in the order the settings are checked.
    pub problems: Vec<Problem>,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "invalid configuration ({} problem", self.problems.len())?;
        if self.problems.len() != 1 {
            f.write_str("s")?;
        }
        f.write_str("):")?;
        for problem in &self.problems {
            write!(f, "\n  - {problem}")?;
        }
        Ok(())
    }
}

impl ConfigError {
    /// Whether some problem names `setting`.
    pub fn mentions(&self, setting: &str) -> bool {
        self.problems
            .iter()
            .any(|p| p.setting.split('/').any(|s| s == setting))
    }
}

/// How to reach the Kubernetes API.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct KubeSettings {
    /// `--kubeconfig`; `None` = in-cluster configuration.
    pub kubeconfig: Option<PathBuf>,
    /// `--master`: overrides the server URL.
    pub master: Option<String>,
    /// `--kube-api-qps` / `--kube-api-burst`; `None` = unlimited (negative QPS).
    pub rate_limit: Option<KubeRateLimit>,
}

/// Leader election settings (`--leader-elect*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaderElectionSettings {
    /// `--leader-elect`.
    pub enabled: bool,
    /// `--leader-elect-lease-duration`.
    pub lease_duration: Duration,
    /// `--leader-elect-renew-deadline`.
    pub renew_deadline: Duration,
    /// `--leader-elect-retry-period`.
    pub retry_period: Duration,
    /// `--leader-elect-resource-name`.
    pub lease_name: String,
    /// `--leader-elect-resource-namespace`.
    pub lease_namespace: String,
}

/// The secure (HTTPS) port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecureServingSettings {
    /// `--bind-address`.
    pub bind_address: IpAddr,
    /// `--secure-port` (never 0 here: 0 turns serving off).
    pub port: u16,
    /// `--tls-cert-file` / `--tls-private-key-file`; `None` = self-signed in memory.
    pub tls_files: Option<TlsFiles>,
    /// `--authorization-always-allow-paths`.
    pub always_allow_paths: Vec<String>,
}

/// A certificate chain and its key, both PEM.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsFiles {
    /// Certificate chain.
    pub cert: PathBuf,
    /// Private key.
    pub key: PathBuf,
}

/// Log output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoggingSettings {
    /// `--log-format`.
    pub format: LogFormat,
    /// `-v`.
    pub verbosity: u8,
    /// `HCLOUD_DEBUG`: log API requests and responses.
    pub hcloud_debug: bool,
}

/// Hetzner Cloud API and instance settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HcloudSettings {
    /// `HCLOUD_TOKEN` or the content of `HCLOUD_TOKEN_FILE`.
    pub token: Secret,
    /// `HCLOUD_ENDPOINT`; `None` = the public API.
    pub endpoint: Option<String>,
    /// `HCLOUD_DEBUG`.
    pub debug: bool,
    /// `HCLOUD_NETWORK` (name or ID).
    pub network: Option<String>,
    /// Inverse of `HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK`.
    pub network_attached_check: bool,
    /// `--cluster-cidr`, parsed (same as [`Config::cluster_cidrs`]), for the provider's route
    /// checks.
    pub cluster_cidrs: Vec<IpNet>,
    /// `HCLOUD_METADATA_ENDPOINT`: the metadata service asked by the attached-network check.
    pub metadata_endpoint: String,
    /// `HCLOUD_NETWORK_ROUTES_ENABLED`, effective only with a network (false without one, and
    /// false when `--cluster-cidr` is missing or unusable, as the official CCM).
    pub routes_enabled: bool,
    /// `HCLOUD_INSTANCES_ADDRESS_FAMILY`.
    pub address_family: AddressFamily,
    /// `HCLOUD_INSTANCES_ZONE_LABEL_ENABLED`.
    pub zone_label_enabled: bool,
    /// `HCLOUD_SERVER_CACHE_MODE`.
    pub server_cache_mode: ServerCacheMode,
    /// `HCLOUD_SERVER_CACHE_MAX_AGE`.
    pub server_cache_max_age: Duration,
}

/// Load balancer defaults (`HCLOUD_LOAD_BALANCERS_*`); not used until load balancers exist.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LoadBalancerSettings {
    /// `HCLOUD_LOAD_BALANCERS_ENABLED`.
    pub enabled: bool,
    /// `HCLOUD_LOAD_BALANCERS_LOCATION`.
    pub location: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_NETWORK_ZONE`.
    pub network_zone: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_TYPE` (`lb11` when unset).
    pub lb_type: Option<String>,
    /// `HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE`.
    pub algorithm: Option<LoadBalancerAlgorithm>,
    /// Inverse of `HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS`.
    pub private_ingress_enabled: bool,
    /// `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP`.
    pub use_private_ip: bool,
    /// Inverse of `HCLOUD_LOAD_BALANCERS_DISABLE_IPV6`.
    pub ipv6_enabled: bool,
    /// `HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK` (`None` = unset).
    pub disable_public_network: Option<bool>,
    /// `HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE`.
    pub private_subnet_ip_range: Option<IpNet>,
    /// `HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL` (`None` = unset).
    pub uses_proxy_protocol: Option<bool>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL`.
    pub health_check_interval: Option<Duration>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT`.
    pub health_check_timeout: Option<Duration>,
    /// `HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES`.
    pub health_check_retries: Option<u32>,
}

/// Robot settings (`ROBOT_*`); not used until Robot support exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotSettings {
    /// `ROBOT_ENABLED`.
    pub enabled: bool,
    /// `ROBOT_USER` or the content of `ROBOT_USER_FILE`.
    pub user: Option<Secret>,
    /// `ROBOT_PASSWORD` or the content of `ROBOT_PASSWORD_FILE`.
    pub password: Option<Secret>,
    /// `ROBOT_CACHE_TIMEOUT` (0 means the default, 5 minutes, as upstream).
    pub cache_timeout: Duration,
    /// `ROBOT_RATE_LIMIT_WAIT_TIME`.
    pub rate_limit_wait_time: Duration,
    /// `ROBOT_FORWARD_INTERNAL_IPS`, effective only with Robot enabled.
    pub forward_internal_ips: bool,
}

/// The validated configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// `--cloud-provider` (always `hcloud`).
    pub cloud_provider: String,
    /// Kubernetes client.
    pub kube: KubeSettings,
    /// `--controllers`.
    pub controllers: EnabledControllers,
    /// Leader election.
    pub leader_election: LeaderElectionSettings,
    /// `--cluster-name`.
    pub cluster_name: String,
    /// `--cluster-cidr`, parsed; empty when unset (or unparsable while routes are off).
    pub cluster_cidrs: Vec<IpNet>,
    /// `--allocate-node-cidrs`.
    pub allocate_node_cidrs: bool,
    /// `--configure-cloud-routes`.
    pub configure_cloud_routes: bool,
    /// `--concurrent-service-syncs` (≥ 1).
    pub concurrent_service_syncs: usize,
    /// `--concurrent-node-syncs` (≥ 1).
    pub concurrent_node_syncs: usize,
    /// `--concurrent-node-status-updates` (≥ 0).
    pub concurrent_node_status_updates: usize,
    /// `--node-monitor-period`.
    pub node_monitor_period: Duration,
    /// `--node-status-update-frequency`.
    pub node_status_update_frequency: Duration,
    /// `--route-reconciliation-period`.
    pub route_reconciliation_period: Duration,
    /// `--min-resync-period` (accepted; the caches here are watches without resync).
    pub min_resync_period: Duration,
    /// `--node-sync-period`: period of a full load balancer backend pass; zero = off.
    pub node_sync_period: Duration,
    /// `--feature-gates`.
    pub feature_gates: FeatureGates,
    /// The secure port; `None` when `--secure-port=0`.
    pub secure_serving: Option<SecureServingSettings>,
    /// Plain-HTTP metrics address; `None` when `HCLOUD_METRICS_ENABLED=false`.
    pub metrics_address: Option<ListenAddress>,
    /// Logging.
    pub logging: LoggingSettings,
    /// Hetzner Cloud.
    pub hcloud: HcloudSettings,
    /// Load balancer defaults.
    pub load_balancers: LoadBalancerSettings,
    /// Robot.
    pub robot: RobotSettings,
    /// Things worth a warning at startup (log them once logging is set up).
    pub warnings: Vec<String>,
}

impl Config {
    /// Whether the user's settings ask for `controller` to run: `--controllers`, plus
    /// `HCLOUD_LOAD_BALANCERS_ENABLED` for the service controller and
    /// `--configure-cloud-routes` / HCLOUD_NETWORK / `HCLOUD_NETWORK_ROUTES_ENABLED` for routes.
    /// Whether the provider can do it is a separate question, decided at startup.
    pub fn controller_wanted(&self, controller: Controller) -> bool {
        self.controllers.is_enabled(controller)
            && match controller {
                Controller::ServiceLb => self.load_balancers.enabled,
                Controller::NodeRoute => self.configure_cloud_routes && self.hcloud.routes_enabled,
                Controller::CloudNode | Controller::CloudNodeLifecycle => true,
            }
    }
}

/// Parses `--cluster-cidr` like the route controller: comma-separated without trimming, every
/// entry a CIDR, at most two, and two only when one is IPv4 and the other IPv6.
pub fn parse_cluster_cidrs(value: &str) -> Result<Vec<IpNet>, String> {
    let mut cidrs = Vec::new();
    let mut errors = Vec::new();
    for part in value.split(',') {
        match IpNet::from_str(part) {
            Ok(net) => cidrs.push(net),
            Err(_) => errors.push(format!("{part:?} is not a CIDR")),
        }
    }
    if !errors.is_empty() {
        return Err(errors.join("; "));
    }
    match cidrs.as_slice() {
        [_] => Ok(cidrs),
        [a, b] => {
            if matches!(
                (a, b),
                (IpNet::V4(_), IpNet::V4(_)) | (IpNet::V6(_), IpNet::V6(_))
            ) {
                Err(
                    "two CIDRs of the same IP family; a dual-stack value needs one IPv4 and one \
                     IPv6 CIDR"
                        .to_owned(),
                )
            } else {
                Ok(cidrs)
            }
        }
        _ => Err(format!(
            "{} CIDRs given, at most two (one IPv4, one IPv6) allowed",
            cidrs.len()
        )),
    }
}

/// Collects problems and warnings while settings are parsed.
#[derive(Debug, Default)]
struct Checker {
    problems: Vec<Problem>,
    warnings: Vec<String>,
}

impl Checker {
    fn problem(&mut self, setting: &str, message: impl Into<String>) {
        self.problems.push(Problem {
            setting: setting.to_owned(),
            message: message.into(),
        });
    }

    fn warn(&mut self, message: impl Into<String>) {
        self.warnings.push(message.into());
    }

    fn bool(&mut self, setting: &str, value: &str) -> bool {
        parse_go_bool(value).unwrap_or_else(|| {
            self.problem(
                setting,
                format!("invalid boolean {value:?} (expected true or false, 1 or 0)"),
            );
            false
        })
    }

    /// An environment-backed boolean: empty means the default.
    fn env_bool(&mut self, setting: &str, value: &str, default: &str) -> bool {
        self.bool(setting, or_default(value, default))
    }

    fn opt_bool(&mut self, setting: &str, value: Option<&str>) -> Option<bool> {
        non_empty(value).map(|v| self.bool(setting, v))
    }

    fn duration(&mut self, setting: &str, value: &str) -> Duration {
        parse_go_duration(value).unwrap_or_else(|e| {
            self.problem(setting, e.to_string());
            Duration::ZERO
        })
    }

    fn positive_duration(&mut self, setting: &str, value: &str) -> Duration {
        match parse_go_duration(value) {
            Ok(d) if d.is_zero() => {
                self.problem(setting, "must be greater than zero");
                d
            }
            Ok(d) => d,
            Err(e) => {
                self.problem(setting, e.to_string());
                Duration::ZERO
            }
        }
    }

    fn number<T>(&mut self, setting: &str, value: &str, min: T) -> T
    where
        T: FromStr + Default + PartialOrd + fmt::Display + Copy,
    {
        match value.parse::<T>() {
            Ok(n) if n < min => {
                self.problem(setting, format!("must be at least {min}, got {n}"));
                n
            }
            Ok(n) => n,
            Err(_) => {
                self.problem(setting, format!("{value:?} is not a valid number"));
                T::default()
            }
        }
    }

    fn parsed<T: FromStr<Err = String> + Default>(&mut self, setting: &str, value: &str) -> T {
        value.parse().unwrap_or_else(|e| {
            self.problem(setting, e);
            T::default()
        })
    }

    /// A secret from `VAR` or, when that is unset or empty, the file named by `VAR_FILE`.
    fn secret_with_file(
        &mut self,
        setting: &str,
        direct: Option<&Secret>,
        file: Option<&Path>,
    ) -> Option<Secret> {
        let direct = direct.filter(|s| !s.is_empty());
        let file = file.filter(|f| !f.as_os_str().is_empty());
        let file_setting = format!("{setting}_FILE");
        if let (Some(_), Some(_)) = (direct, file) {
            self.warn(format!(
                "both {setting} and {file_setting} are set; using {setting}"
            ));
        }
        if let Some(secret) = direct {
            return Some(secret.clone());
        }
        let path = file?;
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let value = text.trim();
                if value.is_empty() {
                    self.problem(&file_setting, format!("file {} is empty", path.display()));
                    None
                } else {
                    Some(Secret::new(value))
                }
            }
            Err(e) => {
                self.problem(
                    &file_setting,
                    format!("cannot read {}: {e}", path.display()),
                );
                None
            }
        }
    }
}

fn or_default<'a>(value: &'a str, default: &'a str) -> &'a str {
    if value.is_empty() { default } else { value }
}

fn non_empty(value: Option<&str>) -> Option<&str> {
    value.filter(|v| !v.is_empty())
}

/// Go's `RetryPeriod * JitterFactor` bound for the renew deadline (client-go's JitterFactor).
const LEADER_ELECTION_JITTER: f64 = 1.2;

impl Args {
    /// Validates everything against what this build implements ([`Capabilities::CURRENT`]).
    pub fn validate(&self) -> Result<Config, ConfigError> {
        self.validate_with(Capabilities::CURRENT)
    }

    /// Validates everything; `capabilities` says which optional features exist. Returns every
    /// problem at once. Reads the `*_FILE` secrets and checks that TLS files exist.
    pub fn validate_with(&self, capabilities: Capabilities) -> Result<Config, ConfigError> {
        let mut c = Checker::default();

        // ---- Cloud provider and client ----
        let cloud_provider = self.cloud_provider.clone().unwrap_or_default();
        match cloud_provider.as_str() {
            "" => c.problem("--cloud-provider", "required; set --cloud-provider=hcloud"),
            "hcloud" => {}
            other => c.problem(
                "--cloud-provider",
                format!("unknown cloud provider {other:?}; this binary implements only \"hcloud\""),
            ),
        }
        if let Some(master) = non_empty(self.master.as_deref()) {
            check_url(&mut c, "--master", master);
        }
        if self.cluster_name.is_empty() {
            c.problem("--cluster-name", "must not be empty");
        }

        // ---- Controllers ----
        let controllers = EnabledControllers::parse(&self.controllers).unwrap_or_else(|errors| {
            for e in errors {
                c.problem("--controllers", e);
            }
            // Keep checking the rest as if the unknown entries were absent.
            let known: Vec<&String> = self
                .controllers
                .iter()
                .filter(|e| {
                    let e = e.trim();
                    e == "*" || Controller::from_name(e.strip_prefix('-').unwrap_or(e)).is_some()
                })
                .collect();
            EnabledControllers::parse(&known).unwrap_or_default()
        });
        let allocate_node_cidrs = c.bool("--allocate-node-cidrs", &self.allocate_node_cidrs);
        let configure_cloud_routes =
            c.bool("--configure-cloud-routes", &self.configure_cloud_routes);
        let concurrent_service_syncs = c.number(
            "--concurrent-service-syncs",
            &self.concurrent_service_syncs,
            1usize,
        );
        let concurrent_node_syncs = c.number(
            "--concurrent-node-syncs",
            &self.concurrent_node_syncs,
            1usize,
        );
        let concurrent_node_status_updates = c.number(
            "--concurrent-node-status-updates",
            &self.concurrent_node_status_updates,
            0usize,
        );
        let node_monitor_period =
            c.positive_duration("--node-monitor-period", &self.node_monitor_period);
        let node_status_update_frequency = c.positive_duration(
            "--node-status-update-frequency",
            &self.node_status_update_frequency,
        );
        let route_reconciliation_period = c.positive_duration(
            "--route-reconciliation-period",
            &self.route_reconciliation_period,
        );
        let min_resync_period = c.positive_duration("--min-resync-period", &self.min_resync_period);
        if self.min_resync_period != "12h" {
            c.warn(format!(
                "--min-resync-period={} has no effect: the caches here are watches, kept current \
                 without periodic resyncs",
                self.min_resync_period
            ));
        }
        if allocate_node_cidrs {
            c.warn(
                "--allocate-node-cidrs=true has no effect: this CCM allocates no pod CIDRs \
                 (kube-controller-manager's node IPAM does); routes need only --cluster-cidr",
            );
        }
        let node_sync_period = c.duration("--node-sync-period", &self.node_sync_period);
        let rate_limit = self.check_kube_rate_limit(&mut c);

        // ---- Leader election ----
        let leader_election = self.check_leader_election(&mut c);

        // ---- Secure serving ----
        let secure_serving = self.check_secure_serving(&mut c);

        // ---- Logging ----
        let log_format: LogFormat = c.parsed("--log-format", &self.log_format);
        let verbosity: u8 = c.number("-v", &self.verbosity, 0u8);

        // ---- Compatibility flags ----
        if !c.bool("--allow-untagged-cloud", &self.allow_untagged_cloud) {
            c.warn(
                "--allow-untagged-cloud is not set: the official CCM refuses to start without it \
                 (Hetzner Cloud has no cluster ID); this one starts anyway",
            );
        }
        let mut feature_gates = FeatureGates::default();
        if let Some(value) = non_empty(self.feature_gates.as_deref()) {
            match parse_feature_gates(value) {
                Ok((gates, unknown)) => {
                    feature_gates = gates;
                    for name in unknown {
                        c.warn(format!(
                            "--feature-gates: {name} is not a feature gate of this CCM; ignored \
                             (implemented: {WATCH_BASED_ROUTES_GATE})"
                        ));
                    }
                }
                Err(e) => c.problem("--feature-gates", e),
            }
        }
        if let Some(value) = non_empty(self.webhook_secure_port.as_deref()) {
            match value.parse::<u16>() {
                Ok(0) => {}
                Ok(_) => c.warn(format!(
                    "--webhook-secure-port={value} has no effect: this CCM serves no webhooks"
                )),
                Err(_) => c.problem(
                    "--webhook-secure-port",
                    format!("{value:?} is not a port number (0-65535)"),
                ),
            }
        }
        for given in &self.no_effect {
            let flag = format!("--{}", given.flag.name);
            let valid = match given.flag.kind {
                FlagKind::Bool => {
                    c.bool(&flag, &given.value);
                    true
                }
                FlagKind::Duration => parse_go_duration(&given.value)
                    .map_err(|e| c.problem(&flag, e.to_string()))
                    .is_ok(),
                FlagKind::Int => {
                    c.number(&flag, &given.value, i64::MIN);
                    true
                }
                FlagKind::Text => true,
            };
            if valid {
                c.warn(format!(
                    "{flag}={} has no effect: {}",
                    given.value, given.flag.reason
                ));
            }
        }

        // ---- Hetzner Cloud ----
        let hcloud = self.check_hcloud(&mut c);
        let metrics_enabled = c.env_bool(
            "HCLOUD_METRICS_ENABLED",
            &self.hcloud_metrics_enabled,
            defaults::HCLOUD_METRICS_ENABLED,
        );
        let metrics_address: ListenAddress = c.parsed(
            "HCLOUD_METRICS_ADDRESS",
            or_default(
                &self.hcloud_metrics_address,
                defaults::HCLOUD_METRICS_ADDRESS,
            ),
        );
        if let Some(secure) = &secure_serving
            && metrics_enabled
            && metrics_address.port == secure.port
            && secure.port != 0
        {
            c.problem(
                "HCLOUD_METRICS_ADDRESS/--secure-port",
                format!("both use port {}; choose different ports", secure.port),
            );
        }

        // ---- Load balancers ----
        let load_balancers = self.check_load_balancers(&mut c);

        // ---- Robot ----
        let robot = self.check_robot(&mut c, hcloud.routes_enabled, capabilities);

        // ---- Routes and --cluster-cidr ----
        let mut hcloud = hcloud;
        let routes_would_run = controllers.is_enabled(Controller::NodeRoute)
            && configure_cloud_routes
            && hcloud.routes_enabled;
        let mut cluster_cidrs = Vec::new();
        match self.cluster_cidr.as_deref() {
            None if routes_would_run => {
                c.warn(
                    "HCLOUD_NETWORK is set but --cluster-cidr is not: routes are turned off (set \
                     --cluster-cidr to the pod CIDR range to program routes, or \
                     HCLOUD_NETWORK_ROUTES_ENABLED=false to silence this warning)",
                );
                hcloud.routes_enabled = false;
            }
            None => {}
            Some(value) => match parse_cluster_cidrs(value) {
                Ok(cidrs) => cluster_cidrs = cidrs,
                Err(e) if routes_would_run => {
                    c.warn(format!(
                        "--cluster-cidr is invalid ({e}): routes are turned off although \
                         HCLOUD_NETWORK is set"
                    ));
                    hcloud.routes_enabled = false;
                }
                Err(e) => c.warn(format!(
                    "--cluster-cidr is invalid ({e}); ignored because routes are not configured"
                )),
            },
        }

        hcloud.cluster_cidrs = cluster_cidrs.clone();

        if !c.problems.is_empty() {
            return Err(ConfigError {
                problems: c.problems,
            });
        }
        Ok(Config {
            cloud_provider,
            kube: KubeSettings {
                kubeconfig: self
                    .kubeconfig
                    .clone()
                    .filter(|p| !p.as_os_str().is_empty()),
                master: non_empty(self.master.as_deref()).map(str::to_owned),
                rate_limit,
            },
            controllers,
            leader_election,
            cluster_name: self.cluster_name.clone(),
            cluster_cidrs,
            allocate_node_cidrs,
            configure_cloud_routes,
            concurrent_service_syncs,
            concurrent_node_syncs,
            concurrent_node_status_updates,
            node_monitor_period,
            node_status_update_frequency,
            route_reconciliation_period,
            min_resync_period,
            node_sync_period,
            feature_gates,
            secure_serving,
            metrics_address: metrics_enabled.then_some(metrics_address),
            logging: LoggingSettings {
                format: log_format,
                verbosity,
                hcloud_debug: hcloud.debug,
            },
            hcloud,
            load_balancers,
            robot,
            warnings: c.warnings,
        })
    }

    /// client-go's rules: a negative QPS disables the limit; 0 means 5 QPS and a 0 burst 10.
    fn check_kube_rate_limit(&self, c: &mut Checker) -> Option<KubeRateLimit> {
        let burst: u32 = c.number("--kube-api-burst", &self.kube_api_burst, 0u32);
        let qps = match self.kube_api_qps.trim().parse::<f64>() {
            Ok(q) if q.is_finite() => q,
            _ => {
                c.problem(
                    "--kube-api-qps",
                    format!("{:?} is not a number", self.kube_api_qps),
                );
                return None;
            }
        };
        if qps < 0.0 {
            return None;
        }
        Some(KubeRateLimit {
            qps: if qps == 0.0 { 5.0 } else { qps },
            burst: if burst == 0 { 10 } else { burst },
        })
    }

    fn check_leader_election(&self, c: &mut Checker) -> LeaderElectionSettings {
        let enabled = c.bool("--leader-elect", &self.leader_elect);
        let lease_duration = c.positive_duration(
            "--leader-elect-lease-duration",
            &self.leader_elect_lease_duration,
        );
        let renew_deadline = c.positive_duration(
            "--leader-elect-renew-deadline",
            &self.leader_elect_renew_deadline,
        );
        let retry_period = c.positive_duration(
            "--leader-elect-retry-period",
            &self.leader_elect_retry_period,
        );
        if enabled {
            if !lease_duration.is_zero()
                && !renew_deadline.is_zero()
                && lease_duration <= renew_deadline
            {
                c.problem(
                    "--leader-elect-lease-duration/--leader-elect-renew-deadline",
                    format!(
                        "the lease duration ({}) must be greater than the renew deadline ({})",
                        GoDuration(lease_duration),
                        GoDuration(renew_deadline)
                    ),
                );
            }
            if !renew_deadline.is_zero()
                && !retry_period.is_zero()
                && renew_deadline.as_secs_f64()
                    <= retry_period.as_secs_f64() * LEADER_ELECTION_JITTER
            {
                c.problem(
                    "--leader-elect-renew-deadline/--leader-elect-retry-period",
                    format!(
                        "the renew deadline ({}) must be greater than 1.2 × the retry period ({})",
                        GoDuration(renew_deadline),
                        GoDuration(retry_period)
                    ),
                );
            }
            if self.leader_elect_resource_name.is_empty() {
                c.problem("--leader-elect-resource-name", "must not be empty");
            }
            if self.leader_elect_resource_namespace.is_empty() {
                c.problem("--leader-elect-resource-namespace", "must not be empty");
            }
        }
        if self.leader_elect_resource_lock != "leases" {
            c.problem(
                "--leader-elect-resource-lock",
                format!(
                    "{:?} is not supported; only \"leases\" is",
                    self.leader_elect_resource_lock
                ),
            );
        }
        if c.bool("--enable-leader-migration", &self.enable_leader_migration) {
            c.problem(
                "--enable-leader-migration",
                "leader migration is not supported",
            );
        }
        if self.leader_migration_config.is_some() {
            c.problem(
                "--leader-migration-config",
                "leader migration is not supported",
            );
        }
        LeaderElectionSettings {
            enabled,
            lease_duration,
            renew_deadline,
            retry_period,
            lease_name: self.leader_elect_resource_name.clone(),
            lease_namespace: self.leader_elect_resource_namespace.clone(),
        }
    }

    fn check_secure_serving(&self, c: &mut Checker) -> Option<SecureServingSettings> {
        let port: u16 = match self.secure_port.parse() {
            Ok(p) => p,
            Err(_) => {
                c.problem(
                    "--secure-port",
                    format!("{:?} is not a port number (0-65535)", self.secure_port),
                );
                0
            }
        };
        let bind_address: Option<IpAddr> = match self.bind_address.parse() {
            Ok(ip) => Some(ip),
            Err(_) => {
                c.problem(
                    "--bind-address",
                    format!("{:?} is not an IP address", self.bind_address),
                );
                None
            }
        };
        let cert = self
            .tls_cert_file
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let key = self
            .tls_private_key_file
            .as_ref()
            .filter(|p| !p.as_os_str().is_empty());
        let tls_files = match (cert, key) {
            (Some(cert), Some(key)) => {
                for (flag, path) in [("--tls-cert-file", cert), ("--tls-private-key-file", key)] {
                    if !path.is_file() {
                        c.problem(flag, format!("{} is not a readable file", path.display()));
                    }
                }
                Some(TlsFiles {
                    cert: cert.clone(),
                    key: key.clone(),
                })
            }
            (Some(_), None) => {
                c.problem(
                    "--tls-private-key-file",
                    "required when --tls-cert-file is set",
                );
                None
            }
            (None, Some(_)) => {
                c.problem(
                    "--tls-cert-file",
                    "required when --tls-private-key-file is set",
                );
                None
            }
            (None, None) => None,
        };
        let always_allow_paths: Vec<String> = self
            .authorization_always_allow_paths
            .iter()
            .map(|p| p.trim().to_owned())
            .filter(|p| !p.is_empty())
            .collect();
        for path in &always_allow_paths {
            if !path.starts_with('/') {
                c.problem(
                    "--authorization-always-allow-paths",
                    format!("{path:?} must start with '/'"),
                );
            }
        }
        match (port, bind_address) {
            (0, _) | (_, None) => None,
            (port, Some(bind_address)) => Some(SecureServingSettings {
                bind_address,
                port,
                tls_files,
                always_allow_paths,
            }),
        }
    }

    fn check_hcloud(&self, c: &mut Checker) -> HcloudSettings {
        let token = c.secret_with_file(
            "HCLOUD_TOKEN",
            self.hcloud_token.as_ref(),
            self.hcloud_token_file.as_deref(),
        );
        let token = match token {
            Some(token) => {
                if token.expose().len() != 64 {
                    c.warn(format!(
                        "HCLOUD_TOKEN has {} characters, Hetzner Cloud tokens have 64; proceeding \
                         anyway",
                        token.expose().len()
                    ));
                }
                token
            }
            None => {
                if !c.problems.iter().any(|p| p.setting == "HCLOUD_TOKEN_FILE") {
                    c.problem(
                        "HCLOUD_TOKEN",
                        "required: set HCLOUD_TOKEN or HCLOUD_TOKEN_FILE to a Hetzner Cloud API \
                         token",
                    );
                }
                Secret::default()
            }
        };
        let endpoint = non_empty(self.hcloud_endpoint.as_deref()).map(str::to_owned);
        if let Some(url) = &endpoint {
            check_url(c, "HCLOUD_ENDPOINT", url);
        }
        let debug = c.env_bool("HCLOUD_DEBUG", &self.hcloud_debug, defaults::HCLOUD_DEBUG);
        let network = non_empty(self.hcloud_network.as_deref()).map(str::to_owned);
        let disable_attached_check = c.env_bool(
            "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK",
            &self.hcloud_network_disable_attached_check,
            defaults::HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK,
        );
        let metadata_endpoint = or_default(
            &self.hcloud_metadata_endpoint,
            defaults::HCLOUD_METADATA_ENDPOINT,
        )
        .trim_end_matches('/')
        .to_owned();
        check_url(c, "HCLOUD_METADATA_ENDPOINT", &metadata_endpoint);
        let routes_enabled = c.env_bool(
            "HCLOUD_NETWORK_ROUTES_ENABLED",
            &self.hcloud_network_routes_enabled,
            defaults::HCLOUD_NETWORK_ROUTES_ENABLED,
        );
        let address_family: AddressFamily = c.parsed(
            "HCLOUD_INSTANCES_ADDRESS_FAMILY",
            or_default(
                &self.hcloud_instances_address_family,
                defaults::HCLOUD_INSTANCES_ADDRESS_FAMILY,
            ),
        );
        let zone_label_enabled = c.env_bool(
            "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED",
            &self.hcloud_instances_zone_label_enabled,
            defaults::HCLOUD_INSTANCES_ZONE_LABEL_ENABLED,
        );
        let server_cache_mode: ServerCacheMode = c.parsed(
            "HCLOUD_SERVER_CACHE_MODE",
            or_default(
                &self.hcloud_server_cache_mode,
                defaults::HCLOUD_SERVER_CACHE_MODE,
            ),
        );
        let server_cache_max_age = c.duration(
            "HCLOUD_SERVER_CACHE_MAX_AGE",
            or_default(
                &self.hcloud_server_cache_max_age,
                defaults::HCLOUD_SERVER_CACHE_MAX_AGE,
            ),
        );
        HcloudSettings {
            token,
            endpoint,
            debug,
            routes_enabled: network.is_some() && routes_enabled,
            network,
            network_attached_check: !disable_attached_check,
            metadata_endpoint,
            cluster_cidrs: Vec::new(),
            address_family,
            zone_label_enabled,
            server_cache_mode,
            server_cache_max_age,
        }
    }

    fn check_load_balancers(&self, c: &mut Checker) -> LoadBalancerSettings {
        let enabled = c.env_bool(
            "HCLOUD_LOAD_BALANCERS_ENABLED",
            &self.hcloud_load_balancers_enabled,
            defaults::HCLOUD_LOAD_BALANCERS_ENABLED,
        );
        let location = non_empty(self.hcloud_load_balancers_location.as_deref()).map(str::to_owned);
        let network_zone =
            non_empty(self.hcloud_load_balancers_network_zone.as_deref()).map(str::to_owned);
        if location.is_some() && network_zone.is_some() {
            c.problem(
                "HCLOUD_LOAD_BALANCERS_LOCATION/HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
                "only one of them can be set",
            );
        }
        let algorithm = non_empty(self.hcloud_load_balancers_algorithm_type.as_deref())
            .map(|v| c.parsed("HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", v));
        let disable_private_ingress = c.env_bool(
            "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS",
            &self.hcloud_load_balancers_disable_private_ingress,
            defaults::HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS,
        );
        let use_private_ip = c.env_bool(
            "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
            &self.hcloud_load_balancers_use_private_ip,
            defaults::HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP,
        );
        let disable_ipv6 = c.env_bool(
            "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6",
            &self.hcloud_load_balancers_disable_ipv6,
            defaults::HCLOUD_LOAD_BALANCERS_DISABLE_IPV6,
        );
        let disable_public_network = c.opt_bool(
            "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK",
            self.hcloud_load_balancers_disable_public_network.as_deref(),
        );
        let uses_proxy_protocol = c.opt_bool(
            "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL",
            self.hcloud_load_balancers_uses_proxyprotocol.as_deref(),
        );
        let private_subnet_ip_range = non_empty(
            self.hcloud_load_balancers_private_subnet_ip_range
                .as_deref(),
        )
        .and_then(|v| match IpNet::from_str(v) {
            Ok(net @ IpNet::V4(_)) => Some(net),
            Ok(IpNet::V6(_)) => {
                c.problem(
                    "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
                    format!(
                        "{v:?} is an IPv6 range; Hetzner Cloud subnets (and so load balancer \
                         private IPs) are IPv4"
                    ),
                );
                None
            }
            Err(_) => {
                c.problem(
                    "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
                    format!("{v:?} is not a valid CIDR"),
                );
                None
            }
        });
        let health_check_interval =
            non_empty(self.hcloud_load_balancers_health_check_interval.as_deref())
                .map(|v| c.duration("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", v));
        let health_check_timeout =
            non_empty(self.hcloud_load_balancers_health_check_timeout.as_deref())
                .map(|v| c.duration("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", v));
        let health_check_retries =
            non_empty(self.hcloud_load_balancers_health_check_retries.as_deref())
                .map(|v| c.number("HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", v, 0u32));
        LoadBalancerSettings {
            enabled,
            location,
            network_zone,
            lb_type: non_empty(self.hcloud_load_balancers_type.as_deref()).map(str::to_owned),
            algorithm,
            private_ingress_enabled: !disable_private_ingress,
            use_private_ip,
            ipv6_enabled: !disable_ipv6,
            disable_public_network,
            private_subnet_ip_range,
            uses_proxy_protocol,
            health_check_interval,
            health_check_timeout,
            health_check_retries,
        }
    }

    fn check_robot(
        &self,
        c: &mut Checker,
        routes_enabled: bool,
        capabilities: Capabilities,
    ) -> RobotSettings {
        let enabled = c.env_bool(
            "ROBOT_ENABLED",
            &self.robot_enabled,
            defaults::ROBOT_ENABLED,
        );
        let user = c.secret_with_file(
            "ROBOT_USER",
            self.robot_user.as_ref(),
            self.robot_user_file.as_deref(),
        );
        let password = c.secret_with_file(
            "ROBOT_PASSWORD",
            self.robot_password.as_ref(),
            self.robot_password_file.as_deref(),
        );
        let mut cache_timeout = c.duration(
            "ROBOT_CACHE_TIMEOUT",
            or_default(&self.robot_cache_timeout, defaults::ROBOT_CACHE_TIMEOUT),
        );
        if cache_timeout.is_zero() {
            cache_timeout = Duration::from_secs(300);
        }
        let rate_limit_wait_time = c.duration(
            "ROBOT_RATE_LIMIT_WAIT_TIME",
            or_default(
                &self.robot_rate_limit_wait_time,
                defaults::ROBOT_RATE_LIMIT_WAIT_TIME,
            ),
        );
        let forward_internal_ips = c.env_bool(
            "ROBOT_FORWARD_INTERNAL_IPS",
            &self.robot_forward_internal_ips,
            defaults::ROBOT_FORWARD_INTERNAL_IPS,
        );
        if enabled {
            if !capabilities.robot {
                c.problem(
                    "ROBOT_ENABLED",
                    "Robot dedicated servers are not implemented yet; unset ROBOT_ENABLED or set it \
                     to false",
                );
            }
            if user.is_some() != password.is_some() {
                c.problem(
                    "ROBOT_USER/ROBOT_PASSWORD",
                    "both must be provided, or neither (partial Robot credentials)",
                );
            }
            if routes_enabled {
                c.problem(
                    "ROBOT_ENABLED/HCLOUD_NETWORK_ROUTES_ENABLED",
                    "routes are not supported together with Robot; set \
                     HCLOUD_NETWORK_ROUTES_ENABLED=false",
                );
            }
        } else if user.is_some() || password.is_some() {
            c.warn("Robot credentials are set but ROBOT_ENABLED is false; they are not used");
        }
        RobotSettings {
            enabled,
            user,
            password,
            cache_timeout,
            rate_limit_wait_time,
            forward_internal_ips: enabled && forward_internal_ips,
        }
    }
}

fn check_url(c: &mut Checker, setting: &str, value: &str) {
    match value.parse::<http::Uri>() {
        Ok(uri) if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() => {}
        _ => c.problem(setting, format!("{value:?} is not an http(s) URL")),
    }
}

#[cfg(test)]
mod tests;
