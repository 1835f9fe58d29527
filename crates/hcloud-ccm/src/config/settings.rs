//! The validated settings: [`Config`] and the settings of each area.
//!
//! Deliberate repetition: every struct here is a plain record of validated values, one field per
//! flag or variable with a doc line naming it. They look alike because they are data, not
//! logic; each area's struct changes with its own flags.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use super::{
    AddressFamily, Controller, EnabledControllers, FeatureGates, ListenAddress,
    LoadBalancerAlgorithm, LogFormat, Secret, ServerCacheMode,
};

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
    /// `HCLOUD_RATE_LIMIT_RESERVE`: requests per hour left to other tools.
    pub rate_limit_reserve: u32,
    /// `HCLOUD_SERVER_CACHE_MAX_AGE`.
    pub server_cache_max_age: Duration,
    /// `HCLOUD_NODE_DELETION_MAX_PERCENT` (0 to 100).
    pub node_deletion_max_percent: u8,
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
    /// `HCLOUD_LOAD_BALANCERS_CLUSTER_NAME` (beyond the official CCM; `None` = unset).
    pub cluster_name: Option<String>,
    /// `--load-balancer-class` / `HCLOUD_LOAD_BALANCER_CLASS`: the `spec.loadBalancerClass`
    /// of the Services handled; `None`: the Services without a class.
    pub class: Option<String>,
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
    /// `ROBOT_ENDPOINT`; `None` = the real webservice.
    pub endpoint: Option<String>,
    /// `ROBOT_CACHE_TIMEOUT` (0 means the default, 5 minutes, as upstream; a negative value
    /// reads as zero: the list is asked for on every lookup).
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
    /// `--min-resync-period`: with the watch-based routes gate, the route controller's repair
    /// passes come this long × [1, 2) apart (the caches here are watches without resync).
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
        self.why_not_wanted(controller).is_none()
    }

    /// Why the settings turn `controller` off (`None`: they do not), naming the setting, as the
    /// start-up log says it: what `plan` prints for the controllers it skips.
    pub fn why_not_wanted(&self, controller: Controller) -> Option<String> {
        if !self.controllers.is_enabled(controller) {
            return Some(format!("{controller}: turned off by --controllers"));
        }
        match controller {
            Controller::ServiceLb if !self.load_balancers.enabled => Some(format!(
                "{controller}: turned off by HCLOUD_LOAD_BALANCERS_ENABLED=false"
            )),
            Controller::NodeRoute if !self.configure_cloud_routes => Some(format!(
                "{controller}: turned off by --configure-cloud-routes=false"
            )),
            Controller::NodeRoute if self.hcloud.network.is_none() => Some(format!(
                "{controller}: no HCLOUD_NETWORK (routes live in a private network)"
            )),
            Controller::NodeRoute if !self.hcloud.routes_enabled => Some(
                // The start-up warning of an unusable --cluster-cidr, else the switch.
                self.warnings
                    .iter()
                    .find(|w| w.contains("--cluster-cidr"))
                    .map_or_else(
                        || {
                            format!(
                                "{controller}: turned off by HCLOUD_NETWORK_ROUTES_ENABLED=false"
                            )
                        },
                        |w| format!("{controller}: {w}"),
                    ),
            ),
            _ => None,
        }
    }
}
