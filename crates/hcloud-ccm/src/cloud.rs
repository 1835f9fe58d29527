//! The Hetzner side of the process: the API client (with its metrics) and the provider, built
//! before leader election so a rejected token or an unknown network fails the start at once.
//!
//! What may pass by itself is retried instead ([`connect_with_retries`]): a reset connection, a
//! timeout, a 5xx, a 429 or a proxy's answer on the token check, the network read or the
//! metadata service are logged and tried again with growing delays (1 s doubling to 1 min)
//! while `/readyz` reports the API as not usable yet (`/healthz` stays green: the process is
//! alive, and a liveness probe restarting it would only start the wait again). Answers that
//! waiting will not change end the start ([`CloudError::is_definite`]), and the binary exits
//! with [`CONFIGURATION_REFUSED_EXIT_STATUS`]: the token refused (401), a 404 on the token check
//! (`HCLOUD_ENDPOINT` is not the API), a network that does not exist, a metadata service that
//! refuses (not a Hetzner Cloud server), this server not attached to the network.

use std::sync::Arc;
use std::time::Duration;

use hcloud_api::robot::{RobotClient, RobotConfig};
use hcloud_api::{Client, ClientConfig, Token};
use hcloud_provider::{HcloudProvider, RobotApi};

use crate::config::{Config, HcloudSettings, RobotClientSettings};
use crate::http::MetricsRegistry;
use crate::metadata::{self, MetadataError};

/// The exit status when the cloud refuses the configuration (a [`CloudError`] for which
/// [`CloudError::is_definite`] holds): the same as for invalid configuration found before
/// anything runs, since the fix is the same, a setting the message names.
pub const CONFIGURATION_REFUSED_EXIT_STATUS: u8 = 2;

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
    /// The token check found no API at the endpoint (404): `HCLOUD_ENDPOINT` is wrong.
    #[error("HCLOUD_ENDPOINT: there is no Hetzner Cloud API at {endpoint}: {answer}; {advice}")]
    EndpointNotFound {
        /// The endpoint asked.
        endpoint: String,
        /// The answer (the request, its status and message).
        answer: String,
        /// What to change.
        advice: String,
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
    /// Whether trying again cannot help: the API's own refusal of the token, no API at the
    /// endpoint (404 on the token check), a network it says does not exist, a metadata service
    /// that refuses, this server not attached to the network, a client that cannot be built.
    /// Everything else (no answer, a 5xx, a 429, a proxy's page) may pass by itself.
    pub fn is_definite(&self) -> bool {
        match self {
            Self::Client(_)
            | Self::RobotClient(_)
            | Self::TokenRejected { .. }
            | Self::EndpointNotFound { .. } => true,
            Self::Unreachable { .. } => false,
            Self::Provider(hcloud_provider::Error::NetworkNotFound(_)) => true,
            Self::Provider(hcloud_provider::Error::Api { .. }) => false,
            Self::Metadata(err) => err.is_definite(),
        }
    }

    /// The error of a failed token check (`GET /locations` on `endpoint`).
    ///
    /// Only the API's own refusal (401/403 with an error code) is about the token; a proxy's
    /// 401/403 page has no code. A 404 means there is no API there, as `/locations` always
    /// exists: with the API's error envelope (the Hetzner API answering a path without `/v1`),
    /// or on an endpoint that does not end in `/v1`. A bare 404 page on an endpoint that does
    /// may be a proxy's passing answer and is tried again, like a proxy's other pages.
    fn from_token_check(endpoint: String, err: hcloud_api::Error) -> Self {
        let code = err.code().map(ToString::to_string).unwrap_or_default();
        let versioned = endpoint.trim_end_matches('/').ends_with("/v1");
        match err.status() {
            Some(401 | 403) if !code.is_empty() => CloudError::TokenRejected { endpoint, code },
            Some(404) if !code.is_empty() || !versioned => {
                let advice = if versioned {
                    "check HCLOUD_ENDPOINT (unset, the CCM uses https://api.hetzner.cloud/v1)"
                } else {
                    "the endpoint must end in /v1 (e.g. https://api.hetzner.cloud/v1; unset, \
                     the CCM uses that one)"
                };
                CloudError::EndpointNotFound {
                    endpoint,
                    // One line, even when a web server answered with a page.
                    answer: err
                        .to_string()
                        .split_whitespace()
                        .collect::<Vec<_>>()
                        .join(" "),
                    advice: advice.to_owned(),
                }
            }
            _ => CloudError::Unreachable {
                endpoint,
                source: err,
            },
        }
    }
}

/// First and longest delay between two start-up attempts.
const STARTUP_BACKOFF: cloud_provider::runtime::workqueue::Backoff =
    cloud_provider::runtime::workqueue::Backoff {
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
    /// The Robot webservice client the provider uses, when Robot is on with credentials.
    pub robot: Option<RobotClient>,
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
    config: &Config,
    metrics: &MetricsRegistry,
) -> Result<Option<RobotClient>, CloudError> {
    let enabled = config.provider.robot.enabled;
    let RobotClientSettings {
        user,
        password,
        endpoint,
        files: _,
    } = &config.robot;
    let (true, Some(user), Some(password)) = (enabled, user, password) else {
        if enabled {
            tracing::info!(
                "Robot support enabled without credentials: Robot Nodes are not looked up; load \
                 balancers target their InternalIPs with use-private-ip"
            );
        }
        return Ok(None);
    };
    let mut client_config = RobotConfig::new(user.expose(), password.expose());
    if let Some(endpoint) = endpoint {
        client_config = client_config
            .endpoint(endpoint)
            .map_err(CloudError::RobotClient)?;
    }
    let client = RobotClient::new(client_config).map_err(CloudError::RobotClient)?;
    metrics.with(|registry| client.register_metrics(registry));
    Ok(Some(client))
}

/// The Robot client as the provider takes it.
fn robot_api(client: Option<&RobotClient>) -> Option<Arc<dyn RobotApi>> {
    client.map(|client| Arc::new(client.clone()) as Arc<dyn RobotApi>)
}

/// Check the token with one cheap call (`GET /locations`, as the official CCM does) and build
/// the provider (resolving `HCLOUD_NETWORK`), with Robot when `config` enables it.
pub async fn connect(
    client: &Client,
    config: &Config,
    robot: Option<Arc<dyn RobotApi>>,
) -> Result<Arc<HcloudProvider>, CloudError> {
    if let Err(err) = client.locations().list().await {
        return Err(CloudError::from_token_check(
            client.endpoint().to_owned(),
            err,
        ));
    }
    let provider =
        HcloudProvider::with_robot(client.clone(), config.provider.clone(), robot).await?;
    Ok(Arc::new(provider))
}

/// [`connect`] for a one-shot command (`plan`, `delete-orphans`): its own API clients (Cloud and,
/// when enabled, Robot) whose metrics go to a registry nobody serves, one attempt, no
/// attached-network check.
pub async fn connect_once(config: &Config) -> Result<Arc<HcloudProvider>, CloudError> {
    let metrics = MetricsRegistry::new();
    let api = client(&config.hcloud, &metrics)?;
    let robot = robot_client(config, &metrics)?;
    connect(&api, config, robot_api(robot.as_ref())).await
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

/// [`connect`] and the attached-network check until they pass, retrying what may pass by itself
/// with growing delays (a log line per attempt). `Ok(None)` when `shutdown` fires first; `Err`
/// on a definite answer ([`CloudError::is_definite`]), on which the binary exits with
/// [`CONFIGURATION_REFUSED_EXIT_STATUS`].
pub async fn connect_with_retries(
    config: &Config,
    metrics: &MetricsRegistry,
    shutdown: &tokio_util::sync::CancellationToken,
) -> Result<Option<Cloud>, CloudError> {
    let client = client(&config.hcloud, metrics)?;
    let robot = robot_client(config, metrics)?;
    let mut failures = 0;
    loop {
        let attempt = tokio::select! {
            () = shutdown.cancelled() => return Ok(None),
            attempt = connect_and_check(&client, config, robot_api(robot.as_ref())) => attempt,
        };
        match attempt {
            Ok(provider) => {
                metrics.with(|registry| provider.register_metrics(registry));
                if failures > 0 {
                    tracing::info!(attempts = failures + 1, "the Hetzner Cloud API is usable");
                }
                return Ok(Some(Cloud {
                    client,
                    provider,
                    robot,
                }));
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An answer of the API (or of whatever answers at the endpoint) to the token check.
    fn answer(status: u16, code: &str, message: &str) -> hcloud_api::Error {
        hcloud_api::error::ApiError {
            status,
            code: code.into(),
            message: message.to_owned(),
            details: hcloud_api::error::ErrorDetails::default(),
            method: "GET".to_owned(),
            path: "/locations".to_owned(),
        }
        .into()
    }

    #[test]
    fn a_404_on_the_token_check_names_hcloud_endpoint_and_is_definite() {
        let check = |endpoint: &str, err| CloudError::from_token_check(endpoint.to_owned(), err);
        // The API answering a path without /v1.
        let err = check(
            "https://api.hetzner.cloud",
            answer(404, "not_found", "not found"),
        );
        let text = err.to_string();
        assert!(matches!(err, CloudError::EndpointNotFound { .. }), "{text}");
        assert!(err.is_definite());
        assert!(
            text.starts_with("HCLOUD_ENDPOINT: ")
                && text.contains("https://api.hetzner.cloud:")
                && text.contains("404")
                && text.contains("must end in /v1"),
            "{text}"
        );
        // Some web server's page, on an endpoint without /v1.
        let err = check(
            "http://10.0.0.1/",
            answer(404, "", "<html>Not Found</html>"),
        );
        assert!(err.is_definite(), "{err}");
        // The API's own 404 on an endpoint with /v1 (another path in front of it, say).
        let err = check("https://proxy.example/v1", answer(404, "not_found", "gone"));
        let text = err.to_string();
        assert!(err.is_definite(), "{text}");
        assert!(!text.contains("must end in /v1"), "{text}");
        // A proxy's bare 404 page in front of a /v1 endpoint may pass.
        let err = check("https://api.hetzner.cloud/v1/", answer(404, "", "<html>"));
        assert!(matches!(err, CloudError::Unreachable { .. }), "{err}");
        assert!(!err.is_definite());
    }

    #[test]
    fn only_the_apis_own_refusal_rejects_the_token_and_server_trouble_may_pass() {
        let check =
            |err| CloudError::from_token_check("https://api.hetzner.cloud/v1".to_owned(), err);
        let err = check(answer(401, "unauthorized", "unable to authenticate"));
        assert!(matches!(err, CloudError::TokenRejected { .. }), "{err}");
        assert!(err.is_definite() && err.to_string().starts_with("HCLOUD_TOKEN: "));
        for (status, code) in [
            (401, ""),
            (403, ""),
            (429, "rate_limit_exceeded"),
            (500, "server_error"),
            (502, ""),
            (503, "unavailable"),
            (504, "timeout"),
        ] {
            let err = check(answer(status, code, "try later"));
            assert!(
                matches!(err, CloudError::Unreachable { .. }) && !err.is_definite(),
                "{status} {code:?}: {err}"
            );
        }
    }
}
