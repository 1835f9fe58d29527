//! One cache of servers shared by every instance lookup of the process.
//!
//! In [`CacheMode::All`] the cache is filled by listing all servers (50 per page). Lookups wait
//! on one lock, so a burst of lookups within the max age costs at most one refresh, and a
//! lookup that misses a fresh listing triggers a refresh only when no refresh happened since
//! the miss was last recorded: a server that is not found is remembered for
//! [`CacheConfig::miss_ttl`], so retries for a missing server do not re-list everything.
//!
//! A miss here is never used to delete anything: [`ServerCache::confirm_exists`] asks the API
//! directly for the one server before the lifecycle controller may delete a Node.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use hcloud_api::models::Server;
use hcloud_api::{Client, ListServersParams};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::sync::Mutex;

use crate::config::{CacheConfig, CacheMode};

/// A listing younger than this answers misses without another refresh.
const MIN_REFRESH_INTERVAL: Duration = Duration::from_secs(2);

/// A failed lookup. Cheap to clone: a failed listing is handed to every lookup that waited
/// for it, instead of each of them repeating the listing.
#[derive(Clone, Debug, thiserror::Error)]
#[error(transparent)]
pub struct CacheError(Arc<hcloud_api::Error>);

impl CacheError {
    /// The API error behind it.
    pub fn api_error(&self) -> &hcloud_api::Error {
        &self.0
    }
}

impl From<hcloud_api::Error> for CacheError {
    fn from(err: hcloud_api::Error) -> Self {
        Self(Arc::new(err))
    }
}

/// How a server is looked up.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum ServerKey {
    /// By server ID (from the providerID).
    Id(i64),
    /// By server name (== Node name).
    Name(String),
}

impl std::fmt::Display for ServerKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Id(id) => write!(f, "server {id}"),
            Self::Name(name) => write!(f, "server named {name:?}"),
        }
    }
}

/// `subsystem` label of lookups made by the instances capability (official value).
pub const SUBSYSTEM_INSTANCES: &str = "instances_v2";
/// `subsystem` label of lookups made by the routes capability (official value).
pub const SUBSYSTEM_ROUTES: &str = "routes";
/// `subsystem` label of lookups made by the load balancer capability (official value).
pub const SUBSYSTEM_LOAD_BALANCER: &str = "load_balancer";
/// `subsystem` label of lookups made without naming a subsystem (official value).
pub const SUBSYSTEM_NONE: &str = "none";
/// `result` label: answered from cached data, without a request to the API.
pub const RESULT_HIT: &str = "hit";
/// `result` label: the API was asked (or the answer is the error of a request made for it).
pub const RESULT_MISS: &str = "miss";

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct CacheLabels {
    subsystem: &'static str,
    mode: &'static str,
    result: &'static str,
}

/// The official `mode` label value of `mode`.
pub(crate) fn mode_label(mode: CacheMode) -> &'static str {
    match mode {
        CacheMode::All => "all",
        CacheMode::One => "one",
        CacheMode::Off => "off",
    }
}

/// Counters of cache outcomes, with the official CCM's name and labels:
/// `cloud_controller_manager_server_cache_requests_total{subsystem,mode,result}` where
/// `subsystem` is `instances_v2`, `routes`, `load_balancer` or `none`, `mode` the cache mode
/// (`all`, `one`, `off`) and `result` `hit` (answered without an API request) or `miss`.
#[derive(Clone, Debug, Default)]
pub struct CacheMetrics {
    requests: Family<CacheLabels, Counter>,
}

impl CacheMetrics {
    /// Register into `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "cloud_controller_manager_server_cache_requests",
            "Server lookups through the server cache by subsystem, cache mode and result (hit: no API request)",
            self.requests.clone(),
        );
    }

    fn count(&self, subsystem: &'static str, mode: CacheMode, result: &'static str) {
        self.requests
            .get_or_create(&CacheLabels {
                subsystem,
                mode: mode_label(mode),
                result,
            })
            .inc();
    }

    /// Current value of one counter (for tests and benchmarks); 0 when never counted.
    pub fn value_of(&self, subsystem: &'static str, mode: CacheMode, result: &'static str) -> u64 {
        self.requests
            .get(&CacheLabels {
                subsystem,
                mode: mode_label(mode),
                result,
            })
            .map_or(0, |counter| counter.get())
    }

    /// Sum of one `result` (`hit` or `miss`) over every subsystem and mode (for tests and
    /// benchmarks).
    pub fn value(&self, result: &'static str) -> u64 {
        let subsystems = [
            SUBSYSTEM_INSTANCES,
            SUBSYSTEM_ROUTES,
            SUBSYSTEM_LOAD_BALANCER,
            SUBSYSTEM_NONE,
        ];
        let modes = [CacheMode::All, CacheMode::One, CacheMode::Off];
        subsystems
            .iter()
            .flat_map(|s| modes.iter().map(move |m| (*s, *m)))
            .map(|(s, m)| self.value_of(s, m, result))
            .sum()
    }
}

#[derive(Debug, Default)]
struct Listing {
    by_id: HashMap<i64, Arc<Server>>,
    by_name: HashMap<String, i64>,
}

#[derive(Debug, Default)]
struct State {
    listing: Option<(Instant, Listing)>,
    /// Single servers (mode `one`): key → (fetched at, server or confirmed absence).
    singles: HashMap<ServerKey, (Instant, Option<Arc<Server>>)>,
    /// When a key was last found missing from a listing.
    misses: HashMap<ServerKey, Instant>,
    /// The last listing that failed, and when it failed.
    failed_refresh: Option<(Instant, CacheError)>,
}

/// The shared server cache. Cheap to clone; clones share the cached data and the counters.
#[derive(Clone, Debug)]
pub struct ServerCache {
    client: Client,
    config: CacheConfig,
    state: Arc<Mutex<State>>,
    metrics: CacheMetrics,
    /// The `subsystem` label of this handle's lookups.
    subsystem: &'static str,
}

impl ServerCache {
    /// A cache over `client`.
    pub fn new(client: Client, config: CacheConfig) -> Self {
        Self {
            client,
            config,
            state: Arc::default(),
            metrics: CacheMetrics::default(),
            subsystem: SUBSYSTEM_NONE,
        }
    }

    /// A handle on the same cache whose lookups are counted under `subsystem` (one of the
    /// `SUBSYSTEM_*` constants).
    #[must_use]
    pub fn with_subsystem(&self, subsystem: &'static str) -> Self {
        Self {
            subsystem,
            ..self.clone()
        }
    }

    /// The `subsystem` label of this handle.
    pub fn subsystem(&self) -> &'static str {
        self.subsystem
    }

    fn count(&self, result: &'static str) {
        self.metrics.count(self.subsystem, self.config.mode, result);
    }

    /// The cache's counters.
    pub fn metrics(&self) -> &CacheMetrics {
        &self.metrics
    }

    /// Find a server. `Ok(None)` means "not found by this lookup", which may be stale by up to
    /// the cache's max age: never treat it as proof that the server is gone.
    pub async fn get(&self, key: &ServerKey) -> Result<Option<Arc<Server>>, CacheError> {
        self.get_within(key, self.config.max_age).await
    }

    /// Like [`ServerCache::get`], accepting data as old as [`CacheConfig::status_max_age`]:
    /// for the lifecycle controller's periodic existence and shutdown checks.
    pub async fn get_for_status(&self, key: &ServerKey) -> Result<Option<Arc<Server>>, CacheError> {
        self.get_within(key, self.status_max_age()).await
    }

    fn status_max_age(&self) -> Duration {
        self.config.status_max_age.max(self.config.max_age)
    }

    async fn get_within(
        &self,
        key: &ServerKey,
        max_age: Duration,
    ) -> Result<Option<Arc<Server>>, CacheError> {
        match self.config.mode {
            CacheMode::All => self.get_from_listing(key, max_age).await,
            CacheMode::One => self.get_single(key, max_age).await,
            CacheMode::Off => {
                self.count(RESULT_MISS);
                self.fetch(key).await
            }
        }
    }

    /// Whether the server exists, confirmed freshly. A server in the cache (refreshed when
    /// older than the max age, like every lookup) exists; a server the cache does not know is
    /// asked for directly (by ID, or a name-filtered list), so one created after the last
    /// listing is never reported gone, and `Ok(false)` is always the API's own answer.
    pub async fn confirm_exists(&self, key: &ServerKey) -> Result<bool, CacheError> {
        if self.config.mode != CacheMode::Off && self.get_for_status(key).await?.is_some() {
            return Ok(true);
        }
        self.count(RESULT_MISS);
        let found = self.fetch(key).await?;
        let mut state = self.state.lock().await;
        if let Some(server) = &found {
            state.misses.remove(key);
            state.misses.remove(&ServerKey::Id(server.id));
            // Later lookups (shutdown state, metadata) find it without another request.
            if let Some((_, listing)) = &mut state.listing {
                listing.by_name.insert(server.name.clone(), server.id);
                listing.by_id.insert(server.id, server.clone());
            }
        }
        if self.config.mode == CacheMode::One {
            self.remember_single(&mut state, key, found.clone());
        }
        Ok(found.is_some())
    }

    async fn get_from_listing(
        &self,
        key: &ServerKey,
        max_age: Duration,
    ) -> Result<Option<Arc<Server>>, CacheError> {
        let requested_at = Instant::now();
        // Holding the lock across the refresh makes concurrent lookups wait for one listing.
        let mut state = self.state.lock().await;
        let fresh = state
            .listing
            .as_ref()
            .filter(|(at, _)| at.elapsed() < max_age)
            .map(|(at, listing)| (*at, lookup(listing, key)));
        if let Some((listed_at, found)) = fresh {
            if let Some(server) = found {
                self.count(RESULT_HIT);
                return Ok(Some(server));
            }
            // Missing from a fresh listing. Re-listing only helps for a server created after
            // it, so skip the refresh when the listing was made while this lookup waited (a
            // burst), is younger than the minimum refresh interval, or the key was missed
            // recently.
            let recently_missed = state
                .misses
                .get(key)
                .is_some_and(|at| at.elapsed() < self.config.miss_ttl);
            if listed_at >= requested_at
                || listed_at.elapsed() < MIN_REFRESH_INTERVAL
                || recently_missed
            {
                // Answered from the listing (and the remembered miss), no request.
                self.count(RESULT_HIT);
                state.misses.entry(key.clone()).or_insert(listed_at);
                return Ok(None);
            }
        }
        // A listing that failed while this lookup waited for the lock answers it too: during an
        // outage or a rate limit, the lookups queued behind one failed listing do not each
        // repeat it (with its retries).
        if let Some((failed_at, err)) = &state.failed_refresh
            && *failed_at >= requested_at
        {
            self.count(RESULT_MISS);
            return Err(err.clone());
        }
        self.count(RESULT_MISS);
        let servers = match self
            .client
            .servers()
            .list_all(&ListServersParams::default())
            .await
        {
            Ok(servers) => servers,
            Err(err) => {
                let err = CacheError::from(err);
                state.failed_refresh = Some((Instant::now(), err.clone()));
                return Err(err);
            }
        };
        state.failed_refresh = None;
        let mut listing = Listing::default();
        for server in servers {
            listing.by_name.insert(server.name.clone(), server.id);
            listing.by_id.insert(server.id, Arc::new(server));
        }
        let found = lookup(&listing, key);
        let now = Instant::now();
        state.listing = Some((now, listing));
        state
            .misses
            .retain(|_, at| at.elapsed() < self.config.miss_ttl);
        if found.is_none() {
            state.misses.insert(key.clone(), now);
        } else {
            state.misses.remove(key);
        }
        Ok(found)
    }

    async fn get_single(
        &self,
        key: &ServerKey,
        max_age: Duration,
    ) -> Result<Option<Arc<Server>>, CacheError> {
        {
            let state = self.state.lock().await;
            if let Some((at, server)) = state.singles.get(key) {
                let ttl = if server.is_some() {
                    max_age
                } else {
                    self.config.miss_ttl
                };
                if at.elapsed() < ttl {
                    self.count(RESULT_HIT);
                    return Ok(server.clone());
                }
            }
        }
        self.count(RESULT_MISS);
        let found = self.fetch(key).await?;
        let mut state = self.state.lock().await;
        self.remember_single(&mut state, key, found.clone());
        Ok(found)
    }

    /// Store one server (mode `one`), dropping expired entries so the map stays as large as
    /// the set of servers looked up within the max age.
    fn remember_single(&self, state: &mut State, key: &ServerKey, found: Option<Arc<Server>>) {
        let keep = self.status_max_age().max(self.config.miss_ttl);
        state.singles.retain(|_, (at, _)| at.elapsed() < keep);
        state.singles.insert(key.clone(), (Instant::now(), found));
    }

    /// Ask the API for one server, bypassing every cache.
    async fn fetch(&self, key: &ServerKey) -> Result<Option<Arc<Server>>, CacheError> {
        match key {
            ServerKey::Id(id) => match self.client.servers().get(*id).await {
                Ok(server) => Ok(Some(Arc::new(server))),
                Err(err) if err.is_not_found() => Ok(None),
                Err(err) => Err(err.into()),
            },
            ServerKey::Name(name) => {
                Ok(self.client.servers().get_by_name(name).await?.map(Arc::new))
            }
        }
    }

    /// Every server, from a listing no older than the max age (refreshed otherwise).
    ///
    /// In modes `one` and `off` there is no shared listing: each call lists all servers
    /// (the snapshot's age is then zero).
    pub async fn all_servers(&self) -> Result<ServerSnapshot, CacheError> {
        self.all_servers_within(self.config.max_age).await
    }

    /// Like [`ServerCache::all_servers`], accepting a listing as old as
    /// [`CacheConfig::status_max_age`]: for periodic reads that tolerate some staleness, such as
    /// mapping route gateways to servers.
    pub async fn all_servers_for_status(&self) -> Result<ServerSnapshot, CacheError> {
        self.all_servers_within(self.status_max_age()).await
    }

    async fn all_servers_within(&self, max_age: Duration) -> Result<ServerSnapshot, CacheError> {
        if self.config.mode != CacheMode::All {
            self.count(RESULT_MISS);
            let servers = self
                .client
                .servers()
                .list_all(&ListServersParams::default())
                .await?;
            return Ok(ServerSnapshot {
                servers: servers.into_iter().map(Arc::new).collect(),
                age: Duration::ZERO,
            });
        }
        let requested_at = Instant::now();
        let mut state = self.state.lock().await;
        if let Some((at, listing)) = &state.listing
            && at.elapsed() < max_age
        {
            self.count(RESULT_HIT);
            return Ok(ServerSnapshot::of(listing, at.elapsed()));
        }
        // As for single lookups: a listing that failed while this call waited answers it too.
        if let Some((failed_at, err)) = &state.failed_refresh
            && *failed_at >= requested_at
        {
            self.count(RESULT_MISS);
            return Err(err.clone());
        }
        self.count(RESULT_MISS);
        let servers = match self
            .client
            .servers()
            .list_all(&ListServersParams::default())
            .await
        {
            Ok(servers) => servers,
            Err(err) => {
                let err = CacheError::from(err);
                state.failed_refresh = Some((Instant::now(), err.clone()));
                return Err(err);
            }
        };
        state.failed_refresh = None;
        let mut listing = Listing::default();
        for server in servers {
            listing.by_name.insert(server.name.clone(), server.id);
            listing.by_id.insert(server.id, Arc::new(server));
        }
        let snapshot = ServerSnapshot::of(&listing, Duration::ZERO);
        state.listing = Some((Instant::now(), listing));
        state
            .misses
            .retain(|_, at| at.elapsed() < self.config.miss_ttl);
        Ok(snapshot)
    }

    /// Age of the current listing, if any (for tests and diagnostics).
    pub async fn listing_age(&self) -> Option<Duration> {
        self.state
            .lock()
            .await
            .listing
            .as_ref()
            .map(|(at, _)| at.elapsed())
    }
}

/// All servers of one listing (see [`ServerCache::all_servers`]).
#[derive(Clone, Debug, Default)]
pub struct ServerSnapshot {
    /// The servers, in no particular order.
    pub servers: Vec<Arc<Server>>,
    /// Age of the listing they come from (zero for a listing made for this call).
    pub age: Duration,
}

impl ServerSnapshot {
    fn of(listing: &Listing, age: Duration) -> Self {
        Self {
            servers: listing.by_id.values().cloned().collect(),
            age,
        }
    }
}

fn lookup(listing: &Listing, key: &ServerKey) -> Option<Arc<Server>> {
    let id = match key {
        ServerKey::Id(id) => *id,
        ServerKey::Name(name) => *listing.by_name.get(name)?,
    };
    listing.by_id.get(&id).cloned()
}
