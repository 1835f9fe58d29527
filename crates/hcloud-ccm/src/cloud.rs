//! The Hetzner side of the process: the API client (with its metrics) and the provider, built
//! before leader election so a rejected token or an unknown network fails the start at once.

use std::sync::Arc;

use hcloud_api::{Client, ClientConfig, Token};
use hcloud_provider::{CacheConfig, CacheMode, HcloudProvider, NetworkRef, ProviderSettings};

use crate::config::{
    AddressFamily, HcloudSettings, LoadBalancerAlgorithm, LoadBalancerSettings, ServerCacheMode,
};
use crate::http::MetricsRegistry;

/// Why the Hetzner side could not be set up (fatal; each message names the variable to fix).
#[derive(Debug, thiserror::Error)]
pub enum CloudError {
    /// The API client could not be built.
    #[error("HCLOUD_ENDPOINT / HCLOUD_TOKEN: cannot build the Hetzner Cloud API client: {0}")]
    Client(#[source] hcloud_api::Error),
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
}

/// The API client and the provider over it.
#[derive(Clone, Debug)]
pub struct Cloud {
    /// The shared API client (one request budget for the whole process).
    pub client: Client,
    /// The Hetzner provider.
    pub provider: Arc<HcloudProvider>,
}

/// Build the client, check the token with one cheap call (`GET /locations`, as the official
/// CCM does), build the provider, and register both's metrics.
pub async fn connect(
    settings: &HcloudSettings,
    load_balancers: &LoadBalancerSettings,
    metrics: &MetricsRegistry,
) -> Result<Cloud, CloudError> {
    let mut config = ClientConfig::new(Token::new(settings.token.expose()));
    config.rate_limit_reserve = settings.rate_limit_reserve;
    if let Some(endpoint) = &settings.endpoint {
        config = config.with_endpoint(endpoint.clone());
    }
    let client = Client::new(config).map_err(CloudError::Client)?;
    metrics.with(|registry| client.register_metrics(registry));

    if let Err(err) = client.locations().list().await {
        let endpoint = client.endpoint().to_owned();
        return Err(match err.code().map(ToString::to_string) {
            Some(code) if matches!(err.status(), Some(401 | 403)) => {
                CloudError::TokenRejected { endpoint, code }
            }
            _ => CloudError::Unreachable {
                endpoint,
                source: err,
            },
        });
    }

    let provider =
        HcloudProvider::new(client.clone(), provider_settings(settings, load_balancers)).await?;
    metrics.with(|registry| provider.register_metrics(registry));
    Ok(Cloud {
        client,
        provider: Arc::new(provider),
    })
}

/// Map the validated `HCLOUD_*` settings onto the provider's.
pub fn provider_settings(
    settings: &HcloudSettings,
    load_balancers: &LoadBalancerSettings,
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
        cache: CacheConfig {
            mode: match settings.server_cache_mode {
                ServerCacheMode::All => CacheMode::All,
                ServerCacheMode::One => CacheMode::One,
                ServerCacheMode::Off => CacheMode::Off,
            },
            max_age: settings.server_cache_max_age,
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
