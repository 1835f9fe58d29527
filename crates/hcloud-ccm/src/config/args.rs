//! Command-line flags and environment variables, exactly as written by the user.
//!
//! Values that can be wrong are kept as text here and parsed by
//! [`Args::validate`](crate::config::Args::validate), so that one run reports every problem at
//! once instead of stopping at the first.

use std::path::PathBuf;

use clap::Parser;

use super::values::{Secret, parse_secret};

/// Defaults of the environment variables; an empty variable counts as unset and gets these.
pub mod defaults {
    /// Default of `HCLOUD_DEBUG`.
    pub const HCLOUD_DEBUG: &str = "false";
    /// Default of `HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK`.
    pub const HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK: &str = "false";
    /// Default of `HCLOUD_NETWORK_ROUTES_ENABLED`.
    pub const HCLOUD_NETWORK_ROUTES_ENABLED: &str = "true";
    /// Default of `HCLOUD_INSTANCES_ADDRESS_FAMILY`.
    pub const HCLOUD_INSTANCES_ADDRESS_FAMILY: &str = "ipv4";
    /// Default of `HCLOUD_INSTANCES_ZONE_LABEL_ENABLED`.
    pub const HCLOUD_INSTANCES_ZONE_LABEL_ENABLED: &str = "true";
    /// Default of `HCLOUD_SERVER_CACHE_MODE`.
    pub const HCLOUD_SERVER_CACHE_MODE: &str = "all";
    /// Default of `HCLOUD_SERVER_CACHE_MAX_AGE`.
    pub const HCLOUD_SERVER_CACHE_MAX_AGE: &str = "10s";
    /// Default of `HCLOUD_METRICS_ENABLED`.
    pub const HCLOUD_METRICS_ENABLED: &str = "true";
    /// Default of `HCLOUD_METRICS_ADDRESS`.
    pub const HCLOUD_METRICS_ADDRESS: &str = ":8233";
    /// Default of `HCLOUD_LOAD_BALANCERS_ENABLED`.
    pub const HCLOUD_LOAD_BALANCERS_ENABLED: &str = "true";
    /// Default of `HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS`.
    pub const HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS: &str = "false";
    /// Default of `HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP`.
    pub const HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP: &str = "false";
    /// Default of `HCLOUD_LOAD_BALANCERS_DISABLE_IPV6`.
    pub const HCLOUD_LOAD_BALANCERS_DISABLE_IPV6: &str = "false";
    /// Default of `ROBOT_ENABLED`.
    pub const ROBOT_ENABLED: &str = "false";
    /// Default of `ROBOT_CACHE_TIMEOUT`.
    pub const ROBOT_CACHE_TIMEOUT: &str = "5m";
    /// Default of `ROBOT_RATE_LIMIT_WAIT_TIME`.
    pub const ROBOT_RATE_LIMIT_WAIT_TIME: &str = "0s";
    /// Default of `ROBOT_FORWARD_INTERNAL_IPS`.
    pub const ROBOT_FORWARD_INTERNAL_IPS: &str = "true";
}

const KUBE: &str = "Kubernetes client";
const CONTROLLERS: &str = "Controllers";
const LEADER: &str = "Leader election";
const SERVING: &str = "Secure serving";
const LOGGING: &str = "Logging";
const COMPAT: &str = "Accepted for compatibility";
const HCLOUD: &str = "Hetzner Cloud (environment)";
const LB: &str = "Load balancers (environment)";
const ROBOT: &str = "Robot dedicated servers (environment; not implemented yet)";

const LONG_ABOUT: &str = "\
Kubernetes cloud-controller-manager for Hetzner Cloud.

A drop-in replacement for the official hcloud-cloud-controller-manager: it takes the same \
command-line flags as every Kubernetes cloud-controller-manager and the same HCLOUD_* and ROBOT_* \
environment variables as the official Hetzner CCM. Each environment variable can also be given as \
the flag of the same name in lower case (HCLOUD_NETWORK = --hcloud-network); prefer the \
environment (or the *_FILE variants) for secrets.

Durations use Go syntax (\"30s\", \"5m\", \"1m30s\", \"200ms\"). Booleans accept Go's forms \
(true/false, 1/0, t/f, TRUE/FALSE, True/False); a boolean flag given without a value means true, \
and must be written --flag=false to switch it off.

Invalid configuration is reported all at once and the process exits with status 2.";

const AFTER_LONG_HELP: &str = "\
Logging: RUST_LOG, when set, overrides the level derived from -v (e.g. \
RUST_LOG=info,hcloud_api=debug).

Endpoints: /healthz, /readyz and /metrics on the secure port (HTTPS; /metrics needs a bearer token \
the apiserver authorises for GET /metrics) and /metrics on HCLOUD_METRICS_ADDRESS (plain HTTP).";

/// Every flag and environment variable the binary understands.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "hcloud-ccm",
    version,
    about = "Kubernetes cloud-controller-manager for Hetzner Cloud",
    long_about = LONG_ABOUT,
    after_long_help = AFTER_LONG_HELP,
    max_term_width = 110
)]
pub struct Args {
    // ---- Cloud provider and Kubernetes client ----
    /// The cloud provider; must be `hcloud`.
    #[arg(long, value_name = "NAME", help_heading = KUBE)]
    pub cloud_provider: Option<String>,

    /// Path to a kubeconfig file. Without it the in-cluster configuration is used.
    #[arg(long, value_name = "PATH", help_heading = KUBE)]
    pub kubeconfig: Option<PathBuf>,

    /// Address of the Kubernetes API server (overrides the server in the kubeconfig).
    #[arg(long, value_name = "URL", help_heading = KUBE)]
    pub master: Option<String>,

    /// Name of the cluster, passed to load balancer and route calls.
    #[arg(long, value_name = "NAME", default_value = "kubernetes", help_heading = KUBE)]
    pub cluster_name: String,

    // ---- Controllers ----
    /// Controllers to run: `*` for all, `name` to enable, `-name` to disable. Names:
    /// cloud-node-controller (cloud-node), cloud-node-lifecycle-controller
    /// (cloud-node-lifecycle), service-lb-controller (service), node-route-controller (route).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        default_value = "*",
        help_heading = CONTROLLERS
    )]
    pub controllers: Vec<String>,

    /// CIDR range(s) of pods (comma-separated; at most one IPv4 and one IPv6). Required when
    /// routes are configured.
    #[arg(long, value_name = "CIDRS", help_heading = CONTROLLERS)]
    pub cluster_cidr: Option<String>,

    /// Whether pod CIDRs are allocated to nodes (informational for this CCM).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
        require_equals = true, default_missing_value = "true", help_heading = CONTROLLERS)]
    pub allocate_node_cidrs: String,

    /// Whether routes for pod CIDRs are programmed in the cloud.
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1,
        require_equals = true, default_missing_value = "true", help_heading = CONTROLLERS)]
    pub configure_cloud_routes: String,

    /// Number of Services synchronised in parallel.
    #[arg(long, value_name = "N", default_value = "1", help_heading = CONTROLLERS)]
    pub concurrent_service_syncs: String,

    /// Number of Nodes initialised in parallel by the cloud node controller.
    #[arg(long, value_name = "N", default_value = "1", help_heading = CONTROLLERS)]
    pub concurrent_node_syncs: String,

    /// Number of workers updating Node status (0 = one pass at a time).
    #[arg(long, value_name = "N", default_value = "0", help_heading = CONTROLLERS)]
    pub concurrent_node_status_updates: String,

    /// Period of the node lifecycle check.
    #[arg(long, value_name = "DURATION", default_value = "5s", help_heading = CONTROLLERS)]
    pub node_monitor_period: String,

    /// Period of the node address and label refresh.
    #[arg(long, value_name = "DURATION", default_value = "5m", help_heading = CONTROLLERS)]
    pub node_status_update_frequency: String,

    /// Period of the route reconciliation.
    #[arg(long, value_name = "DURATION", default_value = "10s", help_heading = CONTROLLERS)]
    pub route_reconciliation_period: String,

    /// Minimum resync period of the informers (randomised between this and twice this).
    #[arg(long, value_name = "DURATION", default_value = "12h", help_heading = CONTROLLERS)]
    pub min_resync_period: String,

    // ---- Leader election ----
    /// Whether to elect a leader before running controllers (needed with several replicas).
    #[arg(long, value_name = "BOOL", default_value = "true", num_args = 0..=1,
        require_equals = true, default_missing_value = "true", help_heading = LEADER)]
    pub leader_elect: String,

    /// How long a standby waits after the last renewal before taking the lease over.
    #[arg(long, value_name = "DURATION", default_value = "15s", help_heading = LEADER)]
    pub leader_elect_lease_duration: String,

    /// How long the leader keeps trying to renew before giving up leadership.
    #[arg(long, value_name = "DURATION", default_value = "10s", help_heading = LEADER)]
    pub leader_elect_renew_deadline: String,

    /// Pause between attempts to acquire or renew the lease.
    #[arg(long, value_name = "DURATION", default_value = "2s", help_heading = LEADER)]
    pub leader_elect_retry_period: String,

    /// Lock object type; only `leases` is supported.
    #[arg(long, value_name = "TYPE", default_value = "leases", help_heading = LEADER)]
    pub leader_elect_resource_lock: String,

    /// Name of the Lease.
    #[arg(long, value_name = "NAME", default_value = "cloud-controller-manager",
        help_heading = LEADER)]
    pub leader_elect_resource_name: String,

    /// Namespace of the Lease.
    #[arg(long, value_name = "NAMESPACE", default_value = "kube-system", help_heading = LEADER)]
    pub leader_elect_resource_namespace: String,

    /// Leader migration from kube-controller-manager (not supported; must stay false).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
        require_equals = true, default_missing_value = "true", help_heading = LEADER)]
    pub enable_leader_migration: String,

    /// Leader migration configuration file (not supported).
    #[arg(long, value_name = "PATH", help_heading = LEADER)]
    pub leader_migration_config: Option<PathBuf>,

    // ---- Secure serving ----
    /// HTTPS port for /healthz, /readyz and /metrics; 0 disables it.
    #[arg(long, value_name = "PORT", default_value = "10258", help_heading = SERVING)]
    pub secure_port: String,

    /// IP address the secure port listens on.
    #[arg(long, value_name = "IP", default_value = "0.0.0.0", help_heading = SERVING)]
    pub bind_address: String,

    /// PEM certificate (chain) for the secure port. Without it a self-signed certificate is
    /// generated in memory.
    #[arg(long, value_name = "PATH", help_heading = SERVING)]
    pub tls_cert_file: Option<PathBuf>,

    /// PEM private key matching --tls-cert-file.
    #[arg(long, value_name = "PATH", help_heading = SERVING)]
    pub tls_private_key_file: Option<PathBuf>,

    /// Paths served on the secure port without authorisation.
    #[arg(long, value_name = "PATHS", value_delimiter = ',',
        default_value = "/healthz,/readyz,/livez", help_heading = SERVING)]
    pub authorization_always_allow_paths: Vec<String>,

    // ---- Logging ----
    /// Log format: text or json.
    #[arg(long, alias = "logging-format", value_name = "FORMAT", default_value = "text",
        help_heading = LOGGING)]
    pub log_format: String,

    /// Log verbosity: 0-2 info, 3-4 debug, 5 and more trace (RUST_LOG overrides).
    #[arg(short = 'v', long = "v", value_name = "LEVEL", default_value = "0",
        help_heading = LOGGING)]
    pub verbosity: String,

    // ---- Accepted for compatibility ----
    /// Cloud config file (unused: hcloud is configured through the environment).
    #[arg(long, value_name = "PATH", help_heading = COMPAT)]
    pub cloud_config: Option<PathBuf>,

    /// Deprecated and without effect.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
        require_equals = true, default_missing_value = "true", help_heading = COMPAT)]
    pub allow_untagged_cloud: String,

    /// Per-controller ServiceAccount credentials (not supported; the CCM's own are used).
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
        require_equals = true, default_missing_value = "true", help_heading = COMPAT)]
    pub use_service_account_credentials: String,

    /// Directory for generated serving certificates (unused: kept in memory).
    #[arg(long, value_name = "PATH", help_heading = COMPAT)]
    pub cert_dir: Option<PathBuf>,

    /// Kubeconfig for TokenReviews (unused: the main client is used).
    #[arg(long, value_name = "PATH", help_heading = COMPAT)]
    pub authentication_kubeconfig: Option<PathBuf>,

    /// Kubeconfig for SubjectAccessReviews (unused: the main client is used).
    #[arg(long, value_name = "PATH", help_heading = COMPAT)]
    pub authorization_kubeconfig: Option<PathBuf>,

    /// Profiling endpoints (not available).
    #[arg(long, value_name = "BOOL", num_args = 0..=1, require_equals = true,
        default_missing_value = "true", help_heading = COMPAT)]
    pub profiling: Option<String>,

    /// Kubernetes feature gates (none are implemented; a warning lists what was given).
    #[arg(long, value_name = "GATES", help_heading = COMPAT)]
    pub feature_gates: Option<String>,

    /// Deprecated and without effect.
    #[arg(long, value_name = "DURATION", help_heading = COMPAT)]
    pub node_sync_period: Option<String>,

    // ---- Hetzner Cloud (environment) ----
    /// API token (required, or HCLOUD_TOKEN_FILE).
    #[arg(long, env = "HCLOUD_TOKEN", hide_env_values = true, value_name = "TOKEN",
        value_parser = parse_secret, help_heading = HCLOUD)]
    pub hcloud_token: Option<Secret>,

    /// File holding the API token (used when HCLOUD_TOKEN is unset).
    #[arg(long, env = "HCLOUD_TOKEN_FILE", value_name = "PATH", help_heading = HCLOUD)]
    pub hcloud_token_file: Option<PathBuf>,

    /// API endpoint [default: https://api.hetzner.cloud/v1].
    #[arg(long, env = "HCLOUD_ENDPOINT", value_name = "URL", help_heading = HCLOUD)]
    pub hcloud_endpoint: Option<String>,

    /// Log every API request and response (debug level for the API client).
    #[arg(long, env = "HCLOUD_DEBUG", value_name = "BOOL", default_value = defaults::HCLOUD_DEBUG,
        help_heading = HCLOUD)]
    pub hcloud_debug: String,

    /// Private network (name or ID) whose IP becomes each node's InternalIP; enables routes.
    #[arg(long, env = "HCLOUD_NETWORK", value_name = "NAME_OR_ID", help_heading = HCLOUD)]
    pub hcloud_network: Option<String>,

    /// Skip the check that the CCM's own server is attached to HCLOUD_NETWORK.
    #[arg(long, env = "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK", value_name = "BOOL",
        default_value = defaults::HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK, help_heading = HCLOUD)]
    pub hcloud_network_disable_attached_check: String,

    /// Whether routes are programmed in HCLOUD_NETWORK (only when it is set).
    #[arg(long, env = "HCLOUD_NETWORK_ROUTES_ENABLED", value_name = "BOOL",
        default_value = defaults::HCLOUD_NETWORK_ROUTES_ENABLED, help_heading = HCLOUD)]
    pub hcloud_network_routes_enabled: String,

    /// Node address family: ipv4, ipv6 or dualstack.
    #[arg(long, env = "HCLOUD_INSTANCES_ADDRESS_FAMILY", value_name = "FAMILY",
        default_value = defaults::HCLOUD_INSTANCES_ADDRESS_FAMILY, help_heading = HCLOUD)]
    pub hcloud_instances_address_family: String,

    /// Whether the zone label uses the legacy datacenter names (nbg1-dc3, …).
    #[arg(long, env = "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED", value_name = "BOOL",
        default_value = defaults::HCLOUD_INSTANCES_ZONE_LABEL_ENABLED, help_heading = HCLOUD)]
    pub hcloud_instances_zone_label_enabled: String,

    /// Server cache mode: all, one or off (experimental upstream).
    #[arg(long, env = "HCLOUD_SERVER_CACHE_MODE", value_name = "MODE", default_value = defaults::HCLOUD_SERVER_CACHE_MODE,
        help_heading = HCLOUD)]
    pub hcloud_server_cache_mode: String,

    /// Maximum age of cached servers (experimental upstream).
    #[arg(long, env = "HCLOUD_SERVER_CACHE_MAX_AGE", value_name = "DURATION",
        default_value = defaults::HCLOUD_SERVER_CACHE_MAX_AGE, help_heading = HCLOUD)]
    pub hcloud_server_cache_max_age: String,

    /// Whether /metrics is served on plain HTTP at HCLOUD_METRICS_ADDRESS.
    #[arg(long, env = "HCLOUD_METRICS_ENABLED", value_name = "BOOL", default_value = defaults::HCLOUD_METRICS_ENABLED,
        help_heading = HCLOUD)]
    pub hcloud_metrics_enabled: String,

    /// Listen address of the plain-HTTP metrics endpoint.
    #[arg(long, env = "HCLOUD_METRICS_ADDRESS", value_name = "ADDRESS", default_value = defaults::HCLOUD_METRICS_ADDRESS,
        help_heading = HCLOUD)]
    pub hcloud_metrics_address: String,

    // ---- Load balancers ----
    /// Whether Services of type LoadBalancer are handled.
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_ENABLED", value_name = "BOOL",
        default_value = defaults::HCLOUD_LOAD_BALANCERS_ENABLED, help_heading = LB)]
    pub hcloud_load_balancers_enabled: String,

    /// Default location of new load balancers (exclusive with the network zone).
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_LOCATION", value_name = "LOCATION",
        help_heading = LB)]
    pub hcloud_load_balancers_location: Option<String>,

    /// Default network zone of new load balancers (exclusive with the location).
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", value_name = "ZONE",
        help_heading = LB)]
    pub hcloud_load_balancers_network_zone: Option<String>,

    /// Default load balancer type [default: lb11].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_TYPE", value_name = "TYPE", help_heading = LB)]
    pub hcloud_load_balancers_type: Option<String>,

    /// Default algorithm: round_robin or least_connections [default: round_robin].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE", value_name = "ALGORITHM",
        help_heading = LB)]
    pub hcloud_load_balancers_algorithm_type: Option<String>,

    /// Do not publish private IPs in the Service status by default.
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS", value_name = "BOOL",
        default_value = defaults::HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS, help_heading = LB)]
    pub hcloud_load_balancers_disable_private_ingress: String,

    /// Reach targets over the private network by default.
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP", value_name = "BOOL",
        default_value = defaults::HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP, help_heading = LB)]
    pub hcloud_load_balancers_use_private_ip: String,

    /// Do not publish the IPv6 address by default.
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6", value_name = "BOOL",
        default_value = defaults::HCLOUD_LOAD_BALANCERS_DISABLE_IPV6, help_heading = LB)]
    pub hcloud_load_balancers_disable_ipv6: String,

    /// Disable the public interface by default [default: false].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK", value_name = "BOOL",
        help_heading = LB)]
    pub hcloud_load_balancers_disable_public_network: Option<String>,

    /// Default subnet (CIDR) to attach load balancers in.
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE", value_name = "CIDR",
        help_heading = LB)]
    pub hcloud_load_balancers_private_subnet_ip_range: Option<String>,

    /// Enable the PROXY protocol by default [default: false].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL", value_name = "BOOL",
        help_heading = LB)]
    pub hcloud_load_balancers_uses_proxyprotocol: Option<String>,

    /// Default health check interval [default: API default, 10s].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", value_name = "DURATION",
        help_heading = LB)]
    pub hcloud_load_balancers_health_check_interval: Option<String>,

    /// Default health check timeout [default: API default, 15s].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", value_name = "DURATION",
        help_heading = LB)]
    pub hcloud_load_balancers_health_check_timeout: Option<String>,

    /// Default health check retries [default: API default, 3].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", value_name = "N",
        help_heading = LB)]
    pub hcloud_load_balancers_health_check_retries: Option<String>,

    // ---- Robot ----
    /// Enable support for Robot dedicated servers.
    #[arg(long, env = "ROBOT_ENABLED", value_name = "BOOL", default_value = defaults::ROBOT_ENABLED,
        help_heading = ROBOT)]
    pub robot_enabled: String,

    /// Robot web service user.
    #[arg(long, env = "ROBOT_USER", hide_env_values = true, value_name = "USER",
        value_parser = parse_secret, help_heading = ROBOT)]
    pub robot_user: Option<Secret>,

    /// File holding the Robot user (used when ROBOT_USER is unset).
    #[arg(long, env = "ROBOT_USER_FILE", value_name = "PATH", help_heading = ROBOT)]
    pub robot_user_file: Option<PathBuf>,

    /// Robot web service password.
    #[arg(long, env = "ROBOT_PASSWORD", hide_env_values = true, value_name = "PASSWORD",
        value_parser = parse_secret, help_heading = ROBOT)]
    pub robot_password: Option<Secret>,

    /// File holding the Robot password (used when ROBOT_PASSWORD is unset).
    #[arg(long, env = "ROBOT_PASSWORD_FILE", value_name = "PATH", help_heading = ROBOT)]
    pub robot_password_file: Option<PathBuf>,

    /// How long Robot server data is cached.
    #[arg(long, env = "ROBOT_CACHE_TIMEOUT", value_name = "DURATION", default_value = defaults::ROBOT_CACHE_TIMEOUT,
        help_heading = ROBOT)]
    pub robot_cache_timeout: String,

    /// How long to wait after hitting the Robot rate limit (0 = fail at once).
    #[arg(long, env = "ROBOT_RATE_LIMIT_WAIT_TIME", value_name = "DURATION",
        default_value = defaults::ROBOT_RATE_LIMIT_WAIT_TIME, help_heading = ROBOT)]
    pub robot_rate_limit_wait_time: String,

    /// Keep InternalIPs that the kubelet set (--node-ip) on Robot nodes.
    #[arg(long, env = "ROBOT_FORWARD_INTERNAL_IPS", value_name = "BOOL", default_value = defaults::ROBOT_FORWARD_INTERNAL_IPS,
        help_heading = ROBOT)]
    pub robot_forward_internal_ips: String,
}
