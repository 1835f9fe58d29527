//! A local Hetzner Cloud API server with real semantics: in-memory servers, networks, load
//! balancers, certificates and actions; rate limiting; fault injection; an admin API. The
//! same process serves the Robot webservice for dedicated servers under `/robot` (see
//! [`robot`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), hcloud_sim::Error> {
//! use hcloud_sim::{ServerSeed, SimConfig, Simulator};
//! let sim = Simulator::start(SimConfig::default()).await?;
//! sim.admin().create_server(ServerSeed::new("node-1").label("role", "worker")).await?;
//! println!("HCLOUD_ENDPOINT={} HCLOUD_TOKEN={}", sim.base_url(), sim.token());
//! # Ok(()) }
//! ```

/// Builder setters that each set one field, for use inside an `impl`: `name(T);` becomes
/// `pub fn name(mut self, name: T) -> Self` with the doc written above it. `name(into T)` takes
/// any `impl Into<T>`, `name(Some T)` and `name(Some into T)` fill an `Option` field, and
/// `name(T) => field;` sets a field of another name.
macro_rules! setters {
    ($($(#[$attr:meta])* $name:ident($($arg:tt)+) $(=> $field:ident)?;)*) => {
        $(setters!(@one [$(#[$attr])*] $name [$($field)? $name] $($arg)+);)*
    };
    (@one [$($attr:tt)*] $name:ident [$field:ident $($_:ident)?] Some into $t:ty) => {
        $($attr)*
        pub fn $name(mut self, $name: impl Into<$t>) -> Self {
            self.$field = Some($name.into());
            self
        }
    };
    (@one [$($attr:tt)*] $name:ident [$field:ident $($_:ident)?] Some $t:ty) => {
        $($attr)*
        pub fn $name(mut self, $name: $t) -> Self {
            self.$field = Some($name);
            self
        }
    };
    (@one [$($attr:tt)*] $name:ident [$field:ident $($_:ident)?] into $t:ty) => {
        $($attr)*
        pub fn $name(mut self, $name: impl Into<$t>) -> Self {
            self.$field = $name.into();
            self
        }
    };
    (@one [$($attr:tt)*] $name:ident [$field:ident $($_:ident)?] $t:ty) => {
        $($attr)*
        pub fn $name(mut self, $name: $t) -> Self {
            self.$field = $name;
            self
        }
    };
}

pub mod admin;
pub mod admin_client;
pub mod app;
pub mod catalog;
pub mod error;
pub mod faults;
pub mod input;
pub mod ipalloc;
pub mod label_selector;
pub mod limits;
pub mod metadata;
pub mod model;
pub mod pagination;
pub mod ratelimit;
pub mod render;
pub mod robot;
pub mod routes;
pub mod seed;
pub mod world;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

pub use admin_client::{AdminClient, CertificateIssuance, TargetRef, install_crypto_provider};
pub use error::{ApiError, Error};
pub use faults::Fault;
pub use limits::{LbTypeLimitsSeed, LimitsSeed};
pub use ratelimit::RateLimitConfig;
pub use robot::{RobotRateLimit, RobotServerSeed};
pub use seed::{
    CertificateSeed, HealthCheckHttpSeed, HealthCheckSeed, HttpSeed, LbDnsPtrSeed, LbNetworkSeed,
    LoadBalancerSeed, NetworkRef, NetworkSeed, PrimaryIpSeed, ProtectionSeed, ResourceRef,
    RouteSeed, SeedFile, ServerSeed, ServiceSeed, SubnetSeed, TargetSeed,
};

/// Configuration of a simulator.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The bearer token the API accepts.
    pub token: String,
    /// How long actions run before they finish.
    pub action_delay: Duration,
    /// Rate limit of the public API.
    pub rate_limit: RateLimitConfig,
    /// Resources to create at start.
    pub seed: Option<SeedFile>,
    /// The Robot webservice user.
    pub robot_user: String,
    /// The Robot webservice password.
    pub robot_password: String,
    /// The Robot request limit per endpoint (`None`: unlimited).
    pub robot_rate_limit: Option<RobotRateLimit>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            token: "test-token".to_string(),
            action_delay: Duration::from_millis(50),
            rate_limit: RateLimitConfig::default(),
            seed: None,
            robot_user: "robot-user".to_string(),
            robot_password: "robot-password".to_string(),
            robot_rate_limit: Some(RobotRateLimit::default()),
        }
    }
}

impl SimConfig {
    setters! {
        /// Sets the token.
        token(into String);
        /// Sets the action delay.
        action_delay(Duration);
        /// Sets the rate limit.
        rate_limit(RateLimitConfig);
    }
    /// A token bucket of `capacity`, refilled `refill_per_second` per second.
    pub fn rate_limit_bucket(self, capacity: u32, refill_per_second: f64) -> Self {
        self.rate_limit(RateLimitConfig::Bucket {
            capacity,
            refill_per_second,
        })
    }
    /// Turns the rate limit off.
    pub fn rate_limit_off(self) -> Self {
        self.rate_limit(RateLimitConfig::Off)
    }
    /// Sets the seed.
    pub fn seed(mut self, seed: SeedFile) -> Self {
        self.seed = Some(seed);
        self
    }
    /// Sets the Robot webservice credentials (default `robot-user` / `robot-password`).
    pub fn robot_credentials(
        mut self,
        user: impl Into<String>,
        password: impl Into<String>,
    ) -> Self {
        self.robot_user = user.into();
        self.robot_password = password.into();
        self
    }
    /// Sets the Robot request limit per endpoint (`None`: unlimited; default 200 per hour).
    pub fn robot_rate_limit(mut self, limit: Option<RobotRateLimit>) -> Self {
        self.robot_rate_limit = limit;
        self
    }
}

/// A running simulator. Dropping it stops the server.
#[derive(Debug)]
pub struct Simulator {
    addr: SocketAddr,
    token: String,
    robot_user: String,
    robot_password: String,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<()>,
    admin: AdminClient,
}

impl Simulator {
    /// Starts on a free loopback port (127.0.0.1:0).
    pub async fn start(config: SimConfig) -> Result<Simulator, Error> {
        Simulator::start_on(config, SocketAddr::from(([127, 0, 0, 1], 0))).await
    }

    /// Starts on the given address.
    pub async fn start_on(config: SimConfig, addr: SocketAddr) -> Result<Simulator, Error> {
        install_crypto_provider();
        let mut world = world::World::new(config.action_delay);
        if let Some(seed) = &config.seed {
            seed::apply(&mut world, seed).map_err(|e| Error::Seed(e.message))?;
        }
        let mut app = app::App::new(world, config.token.clone(), config.rate_limit);
        app.robot = robot::RobotSide::new(
            config.robot_user.clone(),
            config.robot_password.clone(),
            config.robot_rate_limit,
        );
        let app = Arc::new(app);
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let router = app::router(app);
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(async move {
            let serve = axum::serve(listener, router).with_graceful_shutdown(async move {
                let _ = rx.await;
            });
            if let Err(e) = serve.await {
                tracing::error!(error = %e, "simulator server failed");
            }
        });
        let admin = AdminClient::new(format!("http://{addr}/_admin"))?;
        Ok(Simulator {
            addr,
            token: config.token,
            robot_user: config.robot_user,
            robot_password: config.robot_password,
            shutdown: Some(tx),
            task,
            admin,
        })
    }

    /// The socket address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Base URL of the public API, e.g. `http://127.0.0.1:PORT/v1` (what `HCLOUD_ENDPOINT`
    /// is set to).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Base URL of the admin API, e.g. `http://127.0.0.1:PORT/_admin`.
    pub fn admin_url(&self) -> String {
        format!("http://{}/_admin", self.addr)
    }

    /// Base URL of the metadata service, `http://127.0.0.1:PORT/hetzner/v1/metadata`. It
    /// answers for the server set with [`AdminClient::set_metadata_server`].
    pub fn metadata_url(&self) -> String {
        format!("http://{}{}", self.addr, metadata::METADATA_PREFIX)
    }

    /// The token the API accepts.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Base URL of the Robot webservice, `http://127.0.0.1:PORT/robot` (what `ROBOT_ENDPOINT`
    /// is set to).
    pub fn robot_url(&self) -> String {
        format!("http://{}{}", self.addr, robot::ROBOT_PREFIX)
    }

    /// The Robot webservice user.
    pub fn robot_user(&self) -> &str {
        &self.robot_user
    }

    /// The Robot webservice password.
    pub fn robot_password(&self) -> &str {
        &self.robot_password
    }

    /// A client of the admin API.
    pub fn admin(&self) -> AdminClient {
        self.admin.clone()
    }

    /// Stops the server and waits for it to finish.
    pub async fn shutdown(mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        let task = std::mem::replace(&mut self.task, tokio::spawn(async {}));
        let _ = task.await;
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.abort();
    }
}
