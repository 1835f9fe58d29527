//! Command-line flags and environment variables, exactly as written by the user.
//!
//! Values that can be wrong are kept as text here and parsed by
//! [`Args::validate`](crate::config::Args::validate), so that one run reports every problem at
//! once instead of stopping at the first.
//!
//! Deliberate repetition: the `defaults` constants, the fields of [`Args`] and the rows of
//! [`NO_EFFECT_FLAGS`] are each one entry of the official CCM's command line and environment
//! (a flag or variable with its name, value type, default and help text). They are written out
//! one by one because that list is the contract users read and compare with upstream; folding
//! them into a generator would hide exactly the names and defaults a reader looks for.

use std::ffi::OsString;
use std::path::PathBuf;

use clap::parser::ValueSource;
use clap::{CommandFactory, FromArgMatches, Parser};

use super::values::Secret;

/// Defaults of the environment variables; an empty variable counts as unset and gets these.
pub mod defaults {
    /// Default of `HCLOUD_DEBUG`.
    pub const HCLOUD_DEBUG: &str = "false";
    /// Default of `HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK`.
    pub const HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK: &str = "false";
    /// Default of `HCLOUD_METADATA_ENDPOINT` (as hcloud-go's metadata client).
    pub const HCLOUD_METADATA_ENDPOINT: &str = "http://169.254.169.254/hetzner/v1/metadata";
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
    /// Default of `HCLOUD_RATE_LIMIT_RESERVE` (requests per hour).
    pub const HCLOUD_RATE_LIMIT_RESERVE: &str = "600";
    /// Default of `HCLOUD_NODE_DELETION_MAX_PERCENT`.
    pub const HCLOUD_NODE_DELETION_MAX_PERCENT: &str = "50";
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
const COMPAT: &str = "Upstream compatibility";
const NO_EFFECT: &str = "Accepted without effect (a startup line says so when one is given)";
const HCLOUD: &str = "Hetzner Cloud (environment)";
const LB: &str = "Load balancers (environment)";
const ROBOT: &str = "Robot dedicated servers (environment)";

const LONG_ABOUT: &str = "\
Kubernetes cloud-controller-manager for Hetzner Cloud.

A drop-in replacement for the official hcloud-cloud-controller-manager: it takes the same \
command-line flags as every Kubernetes cloud-controller-manager and the same HCLOUD_* and ROBOT_* \
environment variables as the official Hetzner CCM. Each environment variable except the secrets \
can also be given as the flag of the same name in lower case (HCLOUD_NETWORK = --hcloud-network). \
The secrets HCLOUD_TOKEN, ROBOT_USER and ROBOT_PASSWORD are read from the environment (or the \
file named by their *_FILE variable) only: a secret on a command line shows in `ps` and in Pod \
specs.

Upstream flags that mean nothing here are accepted and listed under \"Accepted without effect\"; \
each one given logs a warning at startup. Flag names may use _ for - (--leader_elect), and a flag \
given twice takes its last value.

Durations use Go syntax (\"30s\", \"5m\", \"1m30s\", \"200ms\"). Booleans accept Go's forms \
(true/false, 1/0, t/f, TRUE/FALSE, True/False); a boolean flag given without a value means true, \
and must be written --flag=false to switch it off.

Invalid configuration is reported all at once and the process exits with status 2. So does a \
configuration the Hetzner Cloud refuses at start, naming the setting: a rejected token, no API at \
HCLOUD_ENDPOINT, an unknown HCLOUD_NETWORK or this server not attached to it, a metadata service \
that refuses the attached-network check. What may pass by itself (no connection, a timeout, a \
5xx, a 429) is tried again, with /readyz red and /healthz green meanwhile. Exit status: 0 after \
SIGTERM or SIGINT, 1 a failure (leadership lost, a controller stopped), 2 a configuration to fix.";

const AFTER_LONG_HELP: &str = "\
Logging: RUST_LOG, when set, overrides the level derived from -v (e.g. \
RUST_LOG=info,hcloud_api=debug).

Endpoints: /healthz, /readyz and /metrics on the secure port (HTTPS; /metrics needs a bearer token \
the apiserver authorises for GET /metrics) and on HCLOUD_METRICS_ADDRESS (plain HTTP, :8233 by \
default).";

/// `hcloud-ccm --version`: the crate version and the commit it was built from (build.rs).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (commit ",
    env!("HCLOUD_CCM_COMMIT"),
    ")"
);

/// Every flag and environment variable the binary understands.
#[derive(Debug, Clone, Parser)]
#[command(
    name = "hcloud-ccm",
    version = VERSION,
    about = "Kubernetes cloud-controller-manager for Hetzner Cloud",
    long_about = LONG_ABOUT,
    max_term_width = 110,
    args_override_self = true
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

    /// Requests per second to the Kubernetes API, per client (client-side token bucket; a
    /// negative value disables the limit, 0 means client-go's default of 5). Upstream's
    /// default is 20; see docs/migration.md.
    #[arg(long, value_name = "QPS", default_value = "200", help_heading = KUBE)]
    pub kube_api_qps: String,

    /// Burst of requests to the Kubernetes API above --kube-api-qps, per client (0 means
    /// client-go's default of 10). Upstream's default is 30; see docs/migration.md.
    #[arg(long, value_name = "N", default_value = "400", help_heading = KUBE)]
    pub kube_api_burst: String,

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

    /// CIDR range(s) of pods (comma-separated; at most one IPv4 and one IPv6). Routes need it:
    /// with HCLOUD_NETWORK set but this missing or unusable, routes are off (a warning says so).
    #[arg(long, value_name = "CIDRS", help_heading = CONTROLLERS)]
    pub cluster_cidr: Option<String>,

    /// Whether pod CIDRs are allocated to nodes. Accepted; no effect here (true logs so once):
    /// kube-controller-manager allocates them, and routes do not need it.
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

    /// Minimum resync period of informers. Accepted; no effect here (another value logs so
    /// once): the caches are watches without periodic resyncs.
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

    // ---- Compatibility with upstream ----
    /// Required by the official CCM, which stops without it (Hetzner Cloud has no cluster ID);
    /// here `false` only logs a warning.
    #[arg(long, value_name = "BOOL", default_value = "false", num_args = 0..=1,
        require_equals = true, default_missing_value = "true", help_heading = COMPAT)]
    pub allow_untagged_cloud: String,

    /// Feature gates, `Name=BOOL,...`. Implemented:
    /// CloudControllerManagerWatchBasedRoutesReconciliation (routes also reconcile on Node
    /// changes). Other names are warned about and ignored.
    #[arg(long, value_name = "GATES", help_heading = COMPAT)]
    pub feature_gates: Option<String>,

    /// Period of a full load balancer backend pass (every Service's targets re-sent even when
    /// no Node changed); 0 = only on Node changes, as upstream.
    #[arg(long, value_name = "DURATION", default_value = "0s", help_heading = COMPAT)]
    pub node_sync_period: String,

    /// Secure port of cloud provider webhooks [default: 10260]. This CCM has none: 0 (off, as
    /// the official manifests pass) is silent, another port has no effect.
    #[arg(long, value_name = "PORT", help_heading = COMPAT)]
    pub webhook_secure_port: Option<String>,

    // ---- Hetzner Cloud (environment) ----
    /// `HCLOUD_TOKEN`, read from the environment only: there is no `--hcloud-token` flag, a
    /// token on a command line shows in `ps` and Pod specs.
    #[arg(skip)]
    pub hcloud_token: Option<Secret>,

    /// File holding the API token, used when HCLOUD_TOKEN is unset. The token itself is read
    /// from the environment variable HCLOUD_TOKEN only (no flag).
    #[arg(long, env = "HCLOUD_TOKEN_FILE", value_name = "PATH", help_heading = HCLOUD)]
    pub hcloud_token_file: Option<PathBuf>,

    /// API endpoint [default: <https://api.hetzner.cloud/v1>].
    #[arg(long, env = "HCLOUD_ENDPOINT", value_name = "URL", help_heading = HCLOUD)]
    pub hcloud_endpoint: Option<String>,

    /// Log every API request and response in full, the token redacted (trace level for the
    /// API client).
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

    /// Hetzner metadata service asked for the attached-network check (this project's variable,
    /// for tests and unusual setups).
    #[arg(long, env = "HCLOUD_METADATA_ENDPOINT", value_name = "URL",
        default_value = defaults::HCLOUD_METADATA_ENDPOINT, help_heading = HCLOUD)]
    pub hcloud_metadata_endpoint: String,

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

    /// Requests per hour of the API's budget kept for other tools (CSI driver, autoscaler,
    /// people): spend freely while the API reports more remaining, pace to the refill rate
    /// once it reports this few; 0 paces only at an empty budget (this project's variable).
    #[arg(long, env = "HCLOUD_RATE_LIMIT_RESERVE", value_name = "REQUESTS",
        default_value = defaults::HCLOUD_RATE_LIMIT_RESERVE, help_heading = HCLOUD)]
    pub hcloud_rate_limit_reserve: String,

    /// Deletion brake: when one pass of the lifecycle controller would delete more than this
    /// percentage of the Nodes with an hcloud:// providerID (and at least 2 Nodes), it deletes
    /// none until fewer are reported gone; 100 turns the brake off (this project's variable).
    #[arg(long, env = "HCLOUD_NODE_DELETION_MAX_PERCENT", value_name = "PERCENT",
        default_value = defaults::HCLOUD_NODE_DELETION_MAX_PERCENT, help_heading = HCLOUD)]
    pub hcloud_node_deletion_max_percent: String,

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

    /// Default health check interval [default: API default, 15s].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL", value_name = "DURATION",
        help_heading = LB)]
    pub hcloud_load_balancers_health_check_interval: Option<String>,

    /// Default health check timeout [default: API default, 10s].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT", value_name = "DURATION",
        help_heading = LB)]
    pub hcloud_load_balancers_health_check_timeout: Option<String>,

    /// Default health check retries [default: API default, 3].
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES", value_name = "N",
        help_heading = LB)]
    pub hcloud_load_balancers_health_check_retries: Option<String>,

    /// Beyond the official CCM: this cluster's name, for several clusters in one project. Every
    /// load balancer and managed certificate created gets the label
    /// hcloud-ccm/cluster-name=NAME, lookups see only this cluster's (and unlabelled) ones, and
    /// `plan` lists orphans. Unset: no label, no selector (the official behaviour).
    #[arg(long, env = "HCLOUD_LOAD_BALANCERS_CLUSTER_NAME", value_name = "NAME",
        help_heading = LB)]
    pub hcloud_load_balancers_cluster_name: Option<String>,
    /// Handle only Services whose spec.loadBalancerClass is this class [default: unset, only
    /// Services without a class] (this project's variable).
    #[arg(long = "load-balancer-class", alias = "hcloud-load-balancer-class",
        env = "HCLOUD_LOAD_BALANCER_CLASS", value_name = "CLASS", help_heading = LB)]
    pub load_balancer_class: Option<String>,

    // ---- Robot ----
    /// Enable support for Robot dedicated servers.
    #[arg(long, env = "ROBOT_ENABLED", value_name = "BOOL", default_value = defaults::ROBOT_ENABLED,
        help_heading = ROBOT)]
    pub robot_enabled: String,

    /// `ROBOT_USER`, read from the environment only (no flag, as for `HCLOUD_TOKEN`).
    #[arg(skip)]
    pub robot_user: Option<Secret>,

    /// File holding the Robot user, used when ROBOT_USER is unset. The user itself is read
    /// from the environment variable ROBOT_USER only (no flag).
    #[arg(long, env = "ROBOT_USER_FILE", value_name = "PATH", help_heading = ROBOT)]
    pub robot_user_file: Option<PathBuf>,

    /// `ROBOT_PASSWORD`, read from the environment only (no flag, as for `HCLOUD_TOKEN`).
    #[arg(skip)]
    pub robot_password: Option<Secret>,

    /// File holding the Robot password, used when ROBOT_PASSWORD is unset. The password itself
    /// is read from the environment variable ROBOT_PASSWORD only (no flag).
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

    /// The Robot webservice (default: the real one). Beyond the official CCM: for a test
    /// webservice or a proxy.
    #[arg(long, env = "ROBOT_ENDPOINT", value_name = "URL", help_heading = ROBOT)]
    pub robot_endpoint: Option<String>,

    /// Keep InternalIPs that the kubelet set (--node-ip) on Robot nodes.
    #[arg(long, env = "ROBOT_FORWARD_INTERNAL_IPS", value_name = "BOOL", default_value = defaults::ROBOT_FORWARD_INTERNAL_IPS,
        help_heading = ROBOT)]
    pub robot_forward_internal_ips: String,

    /// Flags of [`NO_EFFECT_FLAGS`] given on the command line (filled by
    /// [`Args::try_parse_command_line`]).
    #[arg(skip)]
    pub no_effect: Vec<GivenFlag>,
}

/// The value type of a flag accepted without effect (checked like upstream would).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FlagKind {
    /// A boolean; given without a value it means true.
    Bool,
    /// A Go duration.
    Duration,
    /// An integer.
    Int,
    /// Anything.
    Text,
}

/// An upstream cloud-controller-manager flag that means nothing for this CCM.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoEffectFlag {
    /// Name without the leading dashes.
    pub name: &'static str,
    /// Its value type.
    pub kind: FlagKind,
    /// Why it has no effect here (shown in `--help` and in the startup line).
    pub reason: &'static str,
}

/// One of [`NO_EFFECT_FLAGS`] as given on the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GivenFlag {
    /// The flag.
    pub flag: NoEffectFlag,
    /// Its value (`true` for a bare boolean).
    pub value: String,
}

const fn no_effect(name: &'static str, kind: FlagKind, reason: &'static str) -> NoEffectFlag {
    NoEffectFlag { name, kind, reason }
}

const NO_SERVING: &str = "the secure port only serves /healthz, /readyz and /metrics";
const NO_WEBHOOKS: &str = "this CCM serves no webhooks";
const NO_AUTHN: &str = "the secure port authenticates bearer tokens with TokenReviews only";
const NO_AUTHZ: &str = "the secure port authorises with SubjectAccessReviews through the main \
                        Kubernetes client, without a cache";
const NO_LOGS: &str = "logging is configured with -v, --logging-format and RUST_LOG";
const NO_METRICS: &str = "all metrics are always exposed";

/// Every upstream flag (k8s.io/cloud-provider options, controller-manager options and
/// component-base) this CCM accepts so that existing command lines start, without acting on it.
pub const NO_EFFECT_FLAGS: &[NoEffectFlag] = &[
    // Generic controller-manager options.
    no_effect(
        "controller-start-interval",
        FlagKind::Duration,
        "controllers start together once leading",
    ),
    no_effect(
        "kube-api-content-type",
        FlagKind::Text,
        "this CCM always speaks JSON to the API server",
    ),
    no_effect(
        "profiling",
        FlagKind::Bool,
        "no profiling endpoints are served",
    ),
    no_effect(
        "contention-profiling",
        FlagKind::Bool,
        "no profiling endpoints are served",
    ),
    // Cloud provider and shared options.
    no_effect(
        "cloud-config",
        FlagKind::Text,
        "hcloud is configured through HCLOUD_* environment variables",
    ),
    no_effect(
        "external-cloud-volume-plugin",
        FlagKind::Text,
        "only used by kube-controller-manager",
    ),
    no_effect(
        "use-service-account-credentials",
        FlagKind::Bool,
        "every controller uses the CCM's own credentials",
    ),
    no_effect(
        "cidr-allocator-type",
        FlagKind::Text,
        "this CCM allocates no pod CIDRs",
    ),
    // Webhooks.
    no_effect("webhooks", FlagKind::Text, NO_WEBHOOKS),
    no_effect("webhook-bind-address", FlagKind::Text, NO_WEBHOOKS),
    no_effect("webhook-cert-dir", FlagKind::Text, NO_WEBHOOKS),
    no_effect("webhook-tls-cert-file", FlagKind::Text, NO_WEBHOOKS),
    no_effect("webhook-tls-private-key-file", FlagKind::Text, NO_WEBHOOKS),
    // Secure serving.
    no_effect(
        "cert-dir",
        FlagKind::Text,
        "a generated serving certificate is kept in memory",
    ),
    no_effect(
        "tls-cipher-suites",
        FlagKind::Text,
        "rustls' safe default cipher suites are used",
    ),
    no_effect(
        "tls-min-version",
        FlagKind::Text,
        "TLS 1.2 and 1.3 are served",
    ),
    no_effect(
        "tls-sni-cert-key",
        FlagKind::Text,
        "one certificate serves every name",
    ),
    no_effect(
        "http2-max-streams-per-connection",
        FlagKind::Int,
        "the secure port speaks HTTP/1.1",
    ),
    no_effect(
        "disable-http2-serving",
        FlagKind::Bool,
        "the secure port speaks HTTP/1.1",
    ),
    no_effect("permit-port-sharing", FlagKind::Bool, NO_SERVING),
    no_effect("permit-address-sharing", FlagKind::Bool, NO_SERVING),
    // Authentication of the secure port.
    no_effect("authentication-kubeconfig", FlagKind::Text, NO_AUTHN),
    no_effect("authentication-skip-lookup", FlagKind::Bool, NO_AUTHN),
    no_effect(
        "authentication-token-webhook-cache-ttl",
        FlagKind::Duration,
        NO_AUTHN,
    ),
    no_effect(
        "authentication-tolerate-lookup-failure",
        FlagKind::Bool,
        NO_AUTHN,
    ),
    no_effect("client-ca-file", FlagKind::Text, NO_AUTHN),
    no_effect("requestheader-allowed-names", FlagKind::Text, NO_AUTHN),
    no_effect("requestheader-client-ca-file", FlagKind::Text, NO_AUTHN),
    no_effect(
        "requestheader-extra-headers-prefix",
        FlagKind::Text,
        NO_AUTHN,
    ),
    no_effect("requestheader-group-headers", FlagKind::Text, NO_AUTHN),
    no_effect("requestheader-username-headers", FlagKind::Text, NO_AUTHN),
    no_effect("requestheader-uid-headers", FlagKind::Text, NO_AUTHN),
    // Authorisation of the secure port.
    no_effect("authorization-kubeconfig", FlagKind::Text, NO_AUTHZ),
    no_effect(
        "authorization-webhook-cache-authorized-ttl",
        FlagKind::Duration,
        NO_AUTHZ,
    ),
    no_effect(
        "authorization-webhook-cache-unauthorized-ttl",
        FlagKind::Duration,
        NO_AUTHZ,
    ),
    // Metrics.
    no_effect(
        "show-hidden-metrics-for-version",
        FlagKind::Text,
        NO_METRICS,
    ),
    no_effect("disabled-metrics", FlagKind::Text, NO_METRICS),
    no_effect("allow-metric-labels", FlagKind::Text, NO_METRICS),
    no_effect("allow-metric-labels-manifest", FlagKind::Text, NO_METRICS),
    // Logging.
    no_effect("vmodule", FlagKind::Text, NO_LOGS),
    no_effect(
        "log-flush-frequency",
        FlagKind::Duration,
        "log lines are written at once",
    ),
    no_effect("log-json-split-stream", FlagKind::Bool, NO_LOGS),
    no_effect("log-json-info-buffer-size", FlagKind::Text, NO_LOGS),
    no_effect("log-text-split-stream", FlagKind::Bool, NO_LOGS),
    no_effect("log-text-info-buffer-size", FlagKind::Text, NO_LOGS),
];

/// Why the command line was refused (exit status 2; `--help` and `--version` are "errors" that
/// print to stdout and exit 0, as clap's).
#[derive(Debug, thiserror::Error)]
pub enum CommandLineError {
    /// A clap usage error, `--help` or `--version`.
    #[error(transparent)]
    Clap(#[from] clap::Error),
    /// A secret (`--hcloud-token`, `--robot-user`, `--robot-password`) was given as a flag.
    #[error(
        "error: --{flag} is not a flag: a secret on the command line is visible in `ps` and in \
         Pod specs. Put it in the environment variable {variable}, or in a file named by \
         {variable}_FILE"
    )]
    SecretFlag {
        /// The flag given, without dashes.
        flag: &'static str,
        /// The environment variable to use instead.
        variable: &'static str,
    },
}

/// Secrets read from the environment only: (flag, variable).
const SECRET_FLAGS: [(&str, &str); 3] = [
    ("hcloud-token", "HCLOUD_TOKEN"),
    ("robot-user", "ROBOT_USER"),
    ("robot-password", "ROBOT_PASSWORD"),
];

impl CommandLineError {
    /// Print the message (stdout for help/version) and return the exit status.
    pub fn report(&self) -> u8 {
        match self {
            Self::Clap(e) => {
                let _ = e.print();
                u8::try_from(e.exit_code()).unwrap_or(2)
            }
            Self::SecretFlag { .. } => {
                eprintln!("{self}");
                2
            }
        }
    }
}

/// Rewrite `--some_flag` to `--some-flag` (upstream's `WordSepNormalizeFunc`); values are kept.
fn normalize(arg: OsString) -> OsString {
    let Some(text) = arg.to_str() else {
        return arg;
    };
    let Some(rest) = text.strip_prefix("--") else {
        return arg;
    };
    let (name, value) = match rest.split_once('=') {
        Some((name, value)) => (name, Some(value)),
        None => (rest, None),
    };
    let mut out = format!("--{}", name.replace('_', "-"));
    if let Some(value) = value {
        out.push('=');
        out.push_str(value);
    }
    OsString::from(out)
}

fn no_effect_arg(flag: &NoEffectFlag) -> clap::Arg {
    let arg = clap::Arg::new(flag.name)
        .long(flag.name)
        .help(format!("No effect: {}.", flag.reason))
        .help_heading(NO_EFFECT);
    match flag.kind {
        FlagKind::Bool => arg
            .value_name("BOOL")
            .num_args(0..=1)
            .require_equals(true)
            .default_missing_value("true"),
        FlagKind::Duration => arg.value_name("DURATION"),
        FlagKind::Int => arg.value_name("N"),
        FlagKind::Text => arg.value_name("VALUE"),
    }
}

impl Args {
    /// The clap command: the derived flags plus [`NO_EFFECT_FLAGS`].
    pub fn full_command() -> clap::Command {
        NO_EFFECT_FLAGS
            .iter()
            .fold(<Self as CommandFactory>::command(), |cmd, flag| {
                cmd.arg(no_effect_arg(flag))
            })
            .override_usage(
                "hcloud-ccm [OPTIONS]\n       hcloud-ccm plan [-o text|json] [--detailed-exitcode] [OPTIONS]\n       hcloud-ccm delete-orphans [OPTIONS]",
            )
            .after_long_help(format!(
                "{}\n\n{}\n\n{AFTER_LONG_HELP}",
                crate::plan::HELP,
                crate::orphans::HELP
            ))
    }

    /// Parse a command line (`argv[0]` first) and the environment: flag names are normalised
    /// (`_` to `-`), `--hcloud-token`, `--robot-user` and `--robot-password` are refused, and
    /// `HCLOUD_TOKEN`, `ROBOT_USER` and `ROBOT_PASSWORD` are read from the environment.
    pub fn try_parse_command_line<I, T>(argv: I) -> Result<Self, CommandLineError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        Self::try_parse_with_secrets(argv, |name| {
            std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
        })
    }

    /// [`Args::try_parse_command_line`] with the secrets read through `secret` (the
    /// environment, or a test's map) instead of the process's environment.
    pub fn try_parse_with_secrets<I, T>(
        argv: I,
        secret: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, CommandLineError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString>,
    {
        let mut seen_end = false;
        let mut normalized = Vec::new();
        for (i, arg) in argv.into_iter().map(Into::into).enumerate() {
            if i == 0 || seen_end {
                normalized.push(arg);
                continue;
            }
            if arg == "--" {
                seen_end = true;
                normalized.push(arg);
                continue;
            }
            let arg = normalize(arg);
            if let Some(text) = arg.to_str().and_then(|t| t.strip_prefix("--")) {
                let name = text.split_once('=').map_or(text, |(name, _)| name);
                if let Some((flag, variable)) = SECRET_FLAGS.iter().find(|(f, _)| *f == name) {
                    return Err(CommandLineError::SecretFlag { flag, variable });
                }
            }
            normalized.push(arg);
        }
        let matches = Self::full_command().try_get_matches_from(normalized)?;
        let mut args = <Self as FromArgMatches>::from_arg_matches(&matches)?;
        args.no_effect = NO_EFFECT_FLAGS
            .iter()
            .filter(|flag| matches.value_source(flag.name) == Some(ValueSource::CommandLine))
            .map(|flag| GivenFlag {
                flag: *flag,
                value: matches
                    .get_one::<String>(flag.name)
                    .cloned()
                    .unwrap_or_default(),
            })
            .collect();
        args.hcloud_token = secret("HCLOUD_TOKEN").map(Secret::new);
        args.robot_user = secret("ROBOT_USER").map(Secret::new);
        args.robot_password = secret("ROBOT_PASSWORD").map(Secret::new);
        Ok(args)
    }
}
