//! The Robot webservice client: HTTP Basic auth on every request, one try per call (no
//! retries, no cache: the callers requeue and cache), typed errors, metrics.

use std::fmt;
use std::sync::Arc;

use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;

use super::config::{RobotConfig, RobotMetrics, RobotPassword, robot_endpoint};
use super::models::{RobotApiError, RobotErrorCode, RobotReset, RobotServer};
use crate::credentials::{Reauthorize, Swappable};
use crate::error::{ConfigError, Error, TransportError};
use crate::transport::{decode, dump_request, exchange, http_client, too_long};

/// A client of the Robot webservice. Cloning is cheap; clones share the connection pool and
/// the metrics. Its `Debug` output and its errors never contain the password.
#[derive(Clone)]
pub struct RobotClient {
    inner: Arc<Inner>,
}

struct Inner {
    http: reqwest::Client,
    endpoint: String,
    /// User and password, swapped by [`RobotClient::set_credentials`].
    credentials: Swappable<(String, RobotPassword)>,
    metrics: RobotMetrics,
}

impl fmt::Debug for RobotClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotClient")
            .field("endpoint", &self.inner.endpoint)
            .field("user", &self.inner.credentials.current().1.0)
            .finish_non_exhaustive()
    }
}

#[derive(Deserialize)]
struct ServerEnvelope {
    server: RobotServer,
}

#[derive(Deserialize)]
struct ResetEnvelope {
    reset: RobotReset,
}

impl RobotClient {
    /// Builds a client. Both credentials must be non-empty (the official CCM makes no Robot
    /// client without them). Installs the `ring` rustls crypto provider as process default if
    /// none is installed yet.
    pub fn new(config: RobotConfig) -> Result<Self, Error> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        check_credentials(&config.user, &config.password)?;
        let endpoint = robot_endpoint(&config.endpoint)?;
        let http = http_client(&config.user_agent, config.timeout, config.connect_timeout)?;
        Ok(RobotClient {
            inner: Arc::new(Inner {
                http,
                endpoint,
                credentials: Swappable::new((config.user, config.password)),
                metrics: config.metrics.unwrap_or_default(),
            }),
        })
    }

    /// `GET /server`: every dedicated server of the account. An account without servers
    /// answers `SERVER_NOT_FOUND`; that is an empty list here.
    pub async fn servers(&self) -> Result<Vec<RobotServer>, Error> {
        match self.get::<Vec<ServerEnvelope>>("/server").await {
            Ok(list) => Ok(list.into_iter().map(|e| e.server).collect()),
            Err(Error::Robot(e)) if e.code == RobotErrorCode::ServerNotFound => Ok(Vec::new()),
            Err(e) => Err(e),
        }
    }

    /// `GET /server/{number}` (the official CCM never sends it: it looks servers up in the
    /// list). An unknown number is [`Error::Robot`] with `SERVER_NOT_FOUND`.
    pub async fn server(&self, server_number: u64) -> Result<RobotServer, Error> {
        let path = format!("/server/{server_number}");
        self.get::<ServerEnvelope>(&path).await.map(|e| e.server)
    }

    /// `GET /reset/{number}`: the reset options and the power state
    /// ([`RobotReset::is_shut_off`]).
    pub async fn reset(&self, server_number: u64) -> Result<RobotReset, Error> {
        let path = format!("/reset/{server_number}");
        self.get::<ResetEnvelope>(&path).await.map(|e| e.reset)
    }

    /// Use `user` and `password` for the requests sent from now on (requests under way keep
    /// theirs). Empty credentials are refused and the old ones kept.
    pub fn set_credentials(&self, user: &str, password: RobotPassword) -> Result<(), Error> {
        check_credentials(user, &password)?;
        self.inner.credentials.set((user.to_owned(), password));
        Ok(())
    }

    /// Ask `hook` for new credentials when Robot refuses the current ones (401); the refused
    /// request is then tried once more if they changed. `false` when a hook was set before (it
    /// is kept).
    pub fn set_reauthorize(&self, hook: Arc<dyn Reauthorize>) -> bool {
        self.inner.credentials.set_hook(hook)
    }

    /// The base URL, e.g. `https://robot-ws.your-server.de`.
    pub fn endpoint(&self) -> &str {
        &self.inner.endpoint
    }

    /// The metrics this client records into.
    pub fn metrics(&self) -> &RobotMetrics {
        &self.inner.metrics
    }

    /// Registers this client's metrics in `registry`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.inner.metrics.register(registry);
    }

    /// One GET, one try; a second one when Robot refused credentials that were replaced
    /// since (or are replaced when asked, see [`RobotClient::set_reauthorize`]).
    async fn get<T: DeserializeOwned>(&self, path: &str) -> Result<T, Error> {
        let (generation, credentials) = self.inner.credentials.current();
        match self.get_with(path, &credentials).await {
            Err(Error::Robot(e))
                if e.status == 401 && self.inner.credentials.renewed_since(generation).await =>
            {
                tracing::info!(
                    path,
                    "robot request refused with the previous credentials; trying again with the new ones"
                );
                self.get_with(path, &self.inner.credentials.current().1)
                    .await
            }
            answer => answer,
        }
    }

    async fn get_with<T: DeserializeOwned>(
        &self,
        path: &str,
        (user, password): &(String, RobotPassword),
    ) -> Result<T, Error> {
        let method = Method::GET;
        let url = format!("{}{path}", self.inner.endpoint);
        let request = self
            .inner
            .http
            .get(&url)
            .basic_auth(user, Some(password.expose()));
        let answer = exchange(
            request,
            || dump_request(&method, &url, &Vec::new(), None),
            self.inner.metrics.inner(),
            &method,
            path,
        )
        .await
        .map_err(|source| {
            Error::Transport(TransportError {
                method: method.to_string(),
                path: path.to_owned(),
                source,
            })
        })?;
        tracing::debug!(method = %method, path, status = answer.status, "robot request");
        let Some(body) = answer.body else {
            return Err(too_long(method.as_str(), path, answer.status));
        };
        if !(200..300).contains(&answer.status) {
            return Err(Error::Robot(Box::new(RobotApiError::from_response(
                answer.status,
                &body,
                method.as_str(),
                path,
            ))));
        }
        decode(method.as_str(), path, answer.status, &body)
    }
}

/// Both credentials must be non-empty.
fn check_credentials(user: &str, password: &RobotPassword) -> Result<(), Error> {
    for (setting, empty) in [
        ("ROBOT_USER", user.is_empty()),
        ("ROBOT_PASSWORD", password.is_empty()),
    ] {
        if empty {
            return Err(ConfigError::InvalidSetting {
                setting,
                reason: "is empty".to_owned(),
            }
            .into());
        }
    }
    Ok(())
}
