//! A thin client for the Hetzner Cloud API, covering what a cloud controller manager needs:
//! servers, networks and routes, load balancers and their types, certificates, locations and
//! actions.
//!
//! - Lenient models: unknown fields are ignored, unknown enum values kept as `Unknown(String)`.
//! - Typed errors: [`Error::Api`] carries status, [`ErrorCode`], message and details;
//!   [`Error::is_not_found`] is true only for a 404 `not_found`.
//! - Retries with the official client's policy (see [`RetryConfig`]), waiting for the API's
//!   bucket after `RateLimit-Remaining: 0`; a POST that timed out is never repeated.
//! - Deleting a load balancer answers an action (since October 2026):
//!   [`LoadBalancersApi::delete`] returns it, [`LoadBalancersApi::delete_and_wait`] waits.
//! - Pacing by the API's own `RateLimit-*` headers: requests go freely while the API reports
//!   plenty left and are paced once its remaining budget reaches a reserve kept for other
//!   tools (default 600 of 3600 per hour; see [`ClientConfig::rate_limit_reserve`]).
//! - Action waiting shared across callers: all concurrent [`ActionsApi::wait_all`] calls of
//!   a client and its clones share one poll per round, 50 action IDs per request.
//! - Metrics with the official CCM's names (see [`Metrics`]).
//! - Bounded answers: a body longer than [`MAX_BODY_BYTES`] (32 MiB) is refused as a
//!   [`DecodeError`] without being read into memory.
//! - The Robot webservice (dedicated servers) beside it: [`robot::RobotClient`] lists the
//!   servers and reads their power state, with HTTP Basic auth, one try per call, Robot's
//!   error envelope as [`Error::Robot`] and its own `robot_api_*` metrics.
//! - Credentials swapped at runtime ([`Client::set_token`],
//!   [`robot::RobotClient::set_credentials`]); a request refused with 401 asks the
//!   [`credentials::Reauthorize`] hook for a new credential and is tried once more with it.
//!
//! ```no_run
//! # async fn demo() -> Result<(), hcloud_api::Error> {
//! use hcloud_api::{Client, ClientConfig, ListServersParams, Token};
//! let client = Client::new(ClientConfig::new(Token::new("<API token>")))?;
//! let servers = client.servers().list_all(&ListServersParams::default()).await?;
//! # let _ = servers; Ok(()) }
//! ```

mod macros;

pub mod api;
pub mod config;
pub mod credentials;
pub mod error;
pub mod metrics;
pub mod models;
pub mod pagination;
pub mod ratelimit;
pub mod retry;
pub mod robot;
mod transport;

use std::sync::Arc;
use std::time::Duration;

pub use api::{
    ActionRef, ActionsApi, CertificatesApi, ListCertificatesParams, ListParams, ListServersParams,
    LoadBalancerTypesApi, LoadBalancersApi, LocationsApi, NetworksApi, ServersApi,
};
pub use config::{
    ClientConfig, DEFAULT_ENDPOINT, DEFAULT_RATE_LIMIT_RESERVE, RetryConfig, Token, USER_AGENT,
};
pub use error::{
    ActionError, ApiError, ConfigError, DecodeError, Error, ErrorCode, ErrorDetails, FieldError,
    TransportError,
};
pub use metrics::Metrics;
pub use models::*;
pub use pagination::{ListMeta, Page, Pagination};
pub use transport::MAX_BODY_BYTES;

use api::action_batch::ActionBatch;
use transport::Transport;

/// The API client. Cloning is cheap; clones share the connection pool, the request budget,
/// the view of the API's rate-limit bucket, the metrics and the action polls.
#[derive(Debug, Clone)]
pub struct Client {
    transport: Arc<Transport>,
    /// Waiters for actions, sharing their polls (see [`ActionsApi::wait_all`]).
    action_batch: Arc<ActionBatch>,
    poll_interval: Duration,
}

impl Client {
    /// Builds a client. Installs the `ring` rustls crypto provider as process default if
    /// none is installed yet.
    pub fn new(config: ClientConfig) -> Result<Client, Error> {
        let transport = Transport::new(&config)?;
        Ok(Client {
            transport: Arc::new(transport),
            action_batch: Arc::new(ActionBatch::new(config.poll_interval)),
            poll_interval: config.poll_interval,
        })
    }

    /// Servers.
    pub fn servers(&self) -> ServersApi<'_> {
        ServersApi { client: self }
    }

    /// Private networks and routes.
    pub fn networks(&self) -> NetworksApi<'_> {
        NetworksApi { client: self }
    }

    /// Load balancers.
    pub fn load_balancers(&self) -> LoadBalancersApi<'_> {
        LoadBalancersApi { client: self }
    }

    /// Load balancer types.
    pub fn load_balancer_types(&self) -> LoadBalancerTypesApi<'_> {
        LoadBalancerTypesApi { client: self }
    }

    /// Certificates.
    pub fn certificates(&self) -> CertificatesApi<'_> {
        CertificatesApi { client: self }
    }

    /// Locations.
    pub fn locations(&self) -> LocationsApi<'_> {
        LocationsApi { client: self }
    }

    /// Actions and the action waiter.
    pub fn actions(&self) -> ActionsApi<'_> {
        ActionsApi { client: self }
    }

    /// How many action waits of this client (and its clones) are under way. The polls are
    /// made by the waits themselves, so with none left nothing polls.
    pub fn action_waits(&self) -> usize {
        self.action_batch.waiters()
    }

    /// The metrics this client records into.
    pub fn metrics(&self) -> &Metrics {
        self.transport.metrics()
    }

    /// Registers this client's metrics in `registry`.
    pub fn register_metrics(&self, registry: &mut prometheus_client::registry::Registry) {
        self.transport.metrics().register(registry);
    }

    /// Remaining budget of the API's bucket as last reported.
    pub fn rate_limit_remaining(&self) -> Option<u64> {
        self.transport.bucket().remaining()
    }

    /// Whether requests are being paced to keep the reserve of the API's budget.
    pub fn rate_limit_reserving(&self) -> bool {
        self.transport.bucket().reserving()
    }

    /// The endpoint, e.g. `https://api.hetzner.cloud/v1`.
    pub fn endpoint(&self) -> &str {
        self.transport.endpoint()
    }

    /// Use `token` for the requests sent from now on (requests under way keep theirs). An
    /// empty token or one that cannot be a header is refused and the old one kept.
    pub fn set_token(&self, token: &Token) -> Result<(), Error> {
        self.transport.set_token(token)
    }

    /// Ask `hook` for a new token when the API refuses the current one (401); the refused
    /// request is then tried once more if the token changed. `false` when a hook was set
    /// before (it is kept).
    pub fn set_reauthorize(&self, hook: Arc<dyn credentials::Reauthorize>) -> bool {
        self.transport.set_reauthorize(hook)
    }

    /// Poll interval of the action waiter.
    pub fn poll_interval(&self) -> Duration {
        self.poll_interval
    }

    pub(crate) fn transport(&self) -> &Transport {
        &self.transport
    }

    pub(crate) fn action_batch(&self) -> &ActionBatch {
        &self.action_batch
    }
}
