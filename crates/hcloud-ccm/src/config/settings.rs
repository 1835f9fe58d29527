//! The validated settings: [`Config`] and the settings of each area the binary itself uses.
//! What the provider uses is the provider's own [`ProviderSettings`], filled by validation.

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use ipnet::IpNet;

use hcloud_provider::{LoadBalancerSettings, ProviderSettings};

use super::{Controller, EnabledControllers, FeatureGates, ListenAddress, LogFormat, Secret};

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

/// The Hetzner Cloud settings the binary uses (the API client, the attached-network check, the
/// lifecycle controller's brake); the provider's are in [`Config::provider`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HcloudSettings {
    /// `HCLOUD_TOKEN` or the content of `HCLOUD_TOKEN_FILE`.
    pub token: Secret,
    /// `HCLOUD_TOKEN_FILE` when the token was read from it (`HCLOUD_TOKEN` unset): watched,
    /// and read again after a change or a refusal (`crate::credentials`).
    pub token_file: Option<PathBuf>,
    /// `HCLOUD_ENDPOINT`; `None` = the public API.
    pub endpoint: Option<String>,
    /// `HCLOUD_DEBUG`.
    pub debug: bool,
    /// `HCLOUD_NETWORK` (name or ID), as written.
    pub network: Option<String>,
    /// Inverse of `HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK`.
    pub network_attached_check: bool,
    /// `HCLOUD_METADATA_ENDPOINT`: the metadata service asked by the attached-network check.
    pub metadata_endpoint: String,
    /// `HCLOUD_RATE_LIMIT_RESERVE`: requests per hour left to other tools.
    pub rate_limit_reserve: u32,
    /// `HCLOUD_NODE_DELETION_MAX_PERCENT` (0 to 100).
    pub node_deletion_max_percent: u8,
}

/// What the Robot webservice client needs: `ROBOT_USER`, `ROBOT_PASSWORD` (or their files) and
/// `ROBOT_ENDPOINT`. The provider's Robot settings are in [`Config::provider`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RobotClientSettings {
    /// `ROBOT_USER` or the content of `ROBOT_USER_FILE`.
    pub user: Option<Secret>,
    /// `ROBOT_PASSWORD` or the content of `ROBOT_PASSWORD_FILE`.
    pub password: Option<Secret>,
    /// `ROBOT_USER_FILE` and `ROBOT_PASSWORD_FILE` when both credentials were read from them:
    /// watched, and read again after a change or a refusal (`crate::credentials`).
    pub files: Option<(PathBuf, PathBuf)>,
    /// `ROBOT_ENDPOINT`; `None` = the real webservice.
    pub endpoint: Option<String>,
}

/// The validated configuration.
#[derive(Debug, Clone)]
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
    /// Hetzner Cloud, as the binary uses it.
    pub hcloud: HcloudSettings,
    /// `HCLOUD_LOAD_BALANCERS_*`, also when `HCLOUD_LOAD_BALANCERS_ENABLED` is false (then
    /// `provider.load_balancers` is `None`).
    pub load_balancers: LoadBalancerSettings,
    /// `--load-balancer-class` / `HCLOUD_LOAD_BALANCER_CLASS`: the `spec.loadBalancerClass`
    /// of the Services handled; `None`: the Services without a class.
    pub load_balancer_class: Option<String>,
    /// Which Nodes back the load balancers (`HCLOUD_LOAD_BALANCERS_EXCLUDE_CORDONED_NODES`),
    /// as the service controller and `plan` take it.
    pub load_balancer_nodes: cloud_provider::service::NodeFilter,
    /// Whether the service controller and `plan` read the TLS Secrets Services name
    /// (`HCLOUD_LOAD_BALANCERS_TLS_SECRETS`).
    pub load_balancer_secrets: bool,
    /// The Robot webservice client's settings.
    pub robot: RobotClientSettings,
    /// What the provider is given: instances, caches, routes, load balancers (when enabled),
    /// Robot.
    pub provider: ProviderSettings,
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
            Controller::ServiceLb if self.provider.load_balancers.is_none() => Some(format!(
                "{controller}: turned off by HCLOUD_LOAD_BALANCERS_ENABLED=false"
            )),
            Controller::NodeRoute if !self.configure_cloud_routes => Some(format!(
                "{controller}: turned off by --configure-cloud-routes=false"
            )),
            Controller::NodeRoute if self.hcloud.network.is_none() => Some(format!(
                "{controller}: no HCLOUD_NETWORK (routes live in a private network)"
            )),
            Controller::NodeRoute if !self.provider.routes_enabled => Some(
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
