//! The Hetzner side of the process: the API client (with its metrics) and the provider, built
//! before leader election so a rejected token or an unknown network fails the start at once.
//!
//! What may pass by itself is retried instead ([`connect_with_retries`]): a reset connection, a
//! timeout, a 5xx, a 429 or a proxy's answer on the token check, the network read or the
//! metadata service are logged and tried again with growing delays (1 s doubling to 1 min)
//! while `/healthz` and `/readyz` report the API as not usable yet. Only the API's own answers
//! end the start: the token refused (401), a network that does not exist, this server not
//! attached to it.

use std::sync::Arc;
use std::time::Duration;

use hcloud_api::robot::{RobotClient, RobotConfig};
use hcloud_api::{Client, ClientConfig, Token};
use hcloud_provider::{
    CacheConfig, CacheMode, HcloudProvider, NetworkRef, ProviderSettings, RobotApi,
};

use crate::config::{
    AddressFamily, Config, HcloudSettings, LoadBalancerAlgorithm, LoadBalancerSettings,
    RobotSettings, ServerCacheMode,
};
use crate::http::MetricsRegistry;
use crate::metadata::{self, MetadataError};

// Deliberate repetition: an error enum has the same form as the other crates' (thiserror
// variants with a message each); what is particular to this one is its messages, which name the
// variable to fix, and `is_definite`.
/// Why the Hetzner side could not be set up (fatal; each message names the variable to fix).
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The API client could not be built.
    #[error("HCLOUD_ENDPOINT / HCLOUD_TOKEN: cannot build the Hetzner Cloud API client: {0}")]
    Client(#[source] hcloud_api::Error),
    /// The Robot webservice client could not be built (its error names the variable).
    #[error("cannot build the Robot webservice client: {0}")]
    RobotClient(#[source] hcloud_api::Error),
    /// The API refused the token.
    #[error(
        "HCLOUD_TOKEN: the Hetzner Cloud API at {endpoint} rejected the token ({code}); create an API token with read & write permission in the project and pass it through HCLOUD_TOKEN or HCLOUD_TOKEN_FILE"
    )]
    TokenRejected {
        /// The endpoint asked.
        endpoint: String,
        /// The API's error code.
        code: String,
    },
    /// The API could not be asked.
    #[error("cannot reach the Hetzner Cloud API at {endpoint} (HCLOUD_ENDPOINT): {source}")]
    Unreachable {
        /// The endpoint asked.
        endpoint: String,
        /// The cause.
        #[source]
        source: hcloud_api::Error,
    },
    /// The provider could not be set up (e.g. `HCLOUD_NETWORK` not found).
    #[error(transparent)]
    Provider(#[from] hcloud_provider::Error),
    /// The attached-network check failed.
    #[error(transparent)]
    Metadata(#[from] MetadataError),
}

impl CloudError {
    /// Whether trying again cannot help: the API's own refusal of the token, a network it
    /// says does not exist, this server not attached to the network, a client that cannot be
    /// built. Everything else (no answer, a 5xx, a 429, an answer that is not the API's) may
    /// pass by itself.
    pub fn is_definite(&self) -> bool {
        match self {
            Self::Client(_) | Self::RobotClient(_) | Self::TokenRejected { .. } => true,
            Self::Unreachable { .. } => false,
            Self::Provider(hcloud_provider::Error::NetworkNotFound(_)) => true,
            Self::Provider(hcloud_provider::Error::Api { .. }) => false,
            Self::Metadata(MetadataError::NotAttached { .. }) => true,
            Self::Metadata(MetadataError::Unreachable { .. }) => false,
        }
    }
}

/// First and longest delay between two start-up attempts.
const STARTUP_BACKOFF: cloud_provider::workqueue::Backoff = cloud_provider::workqueue::Backoff {
    base: Duration::from_secs(1),
    max: Duration::from_secs(60),
};

/// The API client and the provider over it.
#[derive(Clone, Debug)]
pub struct Cloud {
    /// The shared API client (one request budget for the whole process).
    pub client: Client,
    /// The Hetzner provider.
    pub provider: Arc<HcloudProvider>,
}

/// Build the API client and register its metrics.
pub fn client(settings: &HcloudSettings, metrics: &MetricsRegistry) -> Result<Client, CloudError> {
    let mut config = ClientConfig::new(Token::new(settings.token.expose()));
    config.rate_limit_reserve = settings.rate_limit_reserve;
    if let Some(endpoint) = &settings.endpoint {
        config = config.with_endpoint(endpoint.clone());
    }
    let client = Client::new(config).map_err(CloudError::Client)?;
    metrics.with(|registry| client.register_metrics(registry));
    Ok(client)
}

/// The Robot webservice client, when Robot is enabled with both credentials (as the official
/// CCM: enabled without credentials, Robot Nodes keep their providerIDs and load balancers use
/// their InternalIPs). Its metrics go to `metrics`. Nothing is asked of Robot here: bad
/// credentials show as errors of the first lookup, as upstream.
pub fn robot_client(
    robot: &RobotSettings,
    metrics: &MetricsRegistry,
) -> Result<Option<Arc<dyn RobotApi>>, CloudError> {
    let (true, Some(user), Some(password)) = (robot.enabled, &robot.user, &robot.password) else {
        if robot.enabled {
            tracing::info!(
                "Robot support enabled without credentials: Robot Nodes are not looked up; load \
                 balancers target their InternalIPs with use-private-ip"
            );
        }
        return Ok(None);
    };
    let mut config = RobotConfig::new(user.expose(), password.expose());
    if let Some(endpoint) = &robot.endpoint {
        config = config.endpoint(endpoint).map_err(CloudError::RobotClient)?;
    }
    let client = RobotClient::new(config).map_err(CloudError::RobotClient)?;
    metrics.with(|registry| client.register_metrics(registry));
    Ok(Some(Arc::new(client)))
}

/// Check the token with one cheap call (`GET /locations`, as the official CCM does) and build
/// the provider (resolving `HCLOUD_NETWORK`), with Robot when `config` enables it.
pub async fn connect(
    client: &Client,
    config: &Config,
    robot: Option<Arc<dyn RobotApi>>,
) -> Result<Arc<HcloudProvider>, CloudError> {
    if let Err(err) = client.locations().list().await {
        let endpoint = client.endpoint().to_owned();
        // Only the API's own refusal is about the token; a proxy's 401/403 page has no code.
        return Err(match err.code().map(ToString::to_string) {
            Some(code) if !code.is_empty() && matches!(err.status(), Some(401 | 403)) => {
                CloudError::TokenRejected { endpoint, code }
            }
            _ => CloudError::Unreachable {
                endpoint,
                source: err,
            },
        });
    }
    let settings = provider_settings(&config.hcloud, &config.load_balancers, &config.robot);
    let provider = HcloudProvider::with_robot(client.clone(), settings, robot).await?;
    Ok(Arc::new(provider))
}

/// [`connect`] for a one-shot command (`plan`, `delete-orphans`): its own API clients (Cloud and,
/// when enabled, Robot) whose metrics go to a registry nobody serves, one attempt, no
/// attached-network check.
pub async fn connect_once(config: &Config) -> Result<Arc<HcloudProvider>, CloudError> {
    let metrics = MetricsRegistry::new();
    let api = client(&config.hcloud, &metrics)?;
    let robot = robot_client(&config.robot, &metrics)?;
    connect(&api, config, robot).await
}

/// [`connect`], then with a network the attached-network check (the controller manager's
/// start; `plan` skips the check).
async fn connect_and_check(
    client: &Client,
    config: &Config,
    robot: Option<Arc<dyn RobotApi>>,
) -> Result<Arc<HcloudProvider>, CloudError> {
    let settings = &config.hcloud;
    let provider = connect(client, config, robot).await?;
    if let (Some(network), Some(network_id)) = (&settings.network, provider.network_id()) {
        if settings.network_attached_check {
            // Counted per check, as upstream counts each call of its check.
            provider
                .operations()
                .count(hcloud_provider::metrics::op::cloud::SERVER_IS_ATTACHED_TO_NETWORK);
            metadata::check_attached(&settings.metadata_endpoint, network, network_id).await?;
        } else {
            tracing::info!(
                network,
                "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true: not checking that this server is \
                 attached to the network"
            );
        }
    }
    Ok(provider)
}

/// [`connect`] and the attached-network check until they pass, retrying what may pass by itself with growing delays (a log
/// line per attempt). `Ok(None)` when `shutdown` fires first; `Err` on a definite answer.
pub async fn connect_with_retries(
    config: &Config,
    metrics: &MetricsRegistry,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<Option<Cloud>, CloudError> {
    let client = client(&config.hcloud, metrics)?;
    let robot = robot_client(&config.robot, metrics)?;
    let mut failures = 0;
    loop {
        let attempt = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            attempt = connect_and_check(&client, config, robot.clone()) => attempt,
        };
        match attempt {
            Ok(provider) => {
                metrics.with(|registry| provider.register_metrics(registry));
                if failures > 0 {
                    tracing::info!(attempts = failures + 1, "the Hetzner Cloud API is usable");
                }
                return Ok(Some(Cloud { client, provider }));
            }
            Err(err) if err.is_definite() => return Err(err),
            Err(err) => {
                let delay = STARTUP_BACKOFF.delay(failures);
                failures += 1;
                tracing::warn!(
                    attempt = failures,
                    retry_in = ?delay,
                    error = %cloud_provider::events::error_chain(&err),
                    "the Hetzner Cloud API is not usable yet; trying again"
                );
                tokio::select! {
                    () = shutdown.cancelled() => return Ok(None),
                    () = tokio::time::sleep(delay) => {}
                }
            }
        }
    }
}

/// Map the validated `HCLOUD_*` and `ROBOT_*` settings onto the provider's.
pub fn provider_settings(
    settings: &HcloudSettings,
    load_balancers: &LoadBalancerSettings,
    robot: &RobotSettings,
) -> ProviderSettings {
    ProviderSettings {
        load_balancers: load_balancers
            .enabled
            .then(|| load_balancer_settings(load_balancers)),
        address_family: match settings.address_family {
            AddressFamily::Ipv4 => hcloud_provider::AddressFamily::Ipv4,
            AddressFamily::Ipv6 => hcloud_provider::AddressFamily::Ipv6,
            AddressFamily::DualStack => hcloud_provider::AddressFamily::DualStack,
        },
        network: settings.network.as_deref().map(NetworkRef::parse),
        zone_label_enabled: settings.zone_label_enabled,
        // Effective only with a network; whether the route controller runs at all is decided
        // by the flags (--configure-cloud-routes, --controllers).
        routes_enabled: settings.routes_enabled,
        cluster_cidrs: settings.cluster_cidrs.clone(),
        robot: hcloud_provider::RobotSettings {
            enabled: robot.enabled,
            forward_internal_ips: robot.forward_internal_ips,
            rate_limit_wait_time: robot.rate_limit_wait_time,
        },
        cache: CacheConfig {
            mode: match settings.server_cache_mode {
                ServerCacheMode::All => CacheMode::All,
                ServerCacheMode::One => CacheMode::One,
                ServerCacheMode::Off => CacheMode::Off,
            },
            max_age: settings.server_cache_max_age,
            robot_max_age: robot.cache_timeout,
            ..CacheConfig::default()
        },
    }
}

/// Map `HCLOUD_LOAD_BALANCERS_*` onto the provider's defaults for every load balancer.
pub fn load_balancer_settings(lb: &LoadBalancerSettings) -> hcloud_provider::LoadBalancerSettings {
    // Unset variables stay `None`: the provider then leaves that setting of a load balancer
    // as it is, as the official CCM does.
    hcloud_provider::LoadBalancerSettings {
        location: lb.location.clone(),
        network_zone: lb.network_zone.clone(),
        lb_type: lb.lb_type.clone(),
        algorithm: lb.algorithm.map(|algorithm| match algorithm {
            LoadBalancerAlgorithm::RoundRobin => hcloud_api::models::AlgorithmType::RoundRobin,
            LoadBalancerAlgorithm::LeastConnections => {
                hcloud_api::models::AlgorithmType::LeastConnections
            }
        }),
        disable_private_ingress: !lb.private_ingress_enabled,
        use_private_ip: lb.use_private_ip,
        disable_ipv6: !lb.ipv6_enabled,
        disable_public_network: lb.disable_public_network,
        // Validation accepts only an IPv4 range here.
        private_subnet_ip_range: match lb.private_subnet_ip_range {
            Some(ipnet::IpNet::V4(range)) => Some(range),
            _ => None,
        },
        uses_proxyprotocol: lb.uses_proxy_protocol,
        // As the official CCM reads them, 0 means unset: the health check is left as it is.
        health_check_interval: lb.health_check_interval.filter(|d| !d.is_zero()),
        health_check_timeout: lb.health_check_timeout.filter(|d| !d.is_zero()),
        health_check_retries: lb.health_check_retries.filter(|n| *n != 0),
        cluster_name: lb.cluster_name.clone(),
        ..hcloud_provider::LoadBalancerSettings::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn zero_health_check_variables_mean_unset() {
        let zero = LoadBalancerSettings {
            health_check_interval: Some(Duration::ZERO),
            health_check_timeout: Some(Duration::ZERO),
            health_check_retries: Some(0),
            ..LoadBalancerSettings::default()
        };
        let mapped = load_balancer_settings(&zero);
        assert_eq!(mapped.health_check_interval, None);
        assert_eq!(mapped.health_check_timeout, None);
        assert_eq!(mapped.health_check_retries, None);

        let set = LoadBalancerSettings {
            health_check_interval: Some(Duration::from_secs(5)),
            health_check_timeout: Some(Duration::from_secs(3)),
            health_check_retries: Some(2),
            ..LoadBalancerSettings::default()
        };
        let mapped = load_balancer_settings(&set);
        assert_eq!(mapped.health_check_interval, Some(Duration::from_secs(5)));
        assert_eq!(mapped.health_check_timeout, Some(Duration::from_secs(3)));
        assert_eq!(mapped.health_check_retries, Some(2));
    }
}
