//! One cache of servers shared by every instance lookup of the process.
//!
//! In [`CacheMode::All`] the cache holds a listing of all servers (50 per page) in a snapshot
//! cache with the freshness policy of [`crate::snapshot_cache`]: one shared listing at a time,
//! with a deadline ([`CacheConfig::refresh_deadline`]), fresh for the max age each lookup
//! accepts (the `*_for_status` lookups accept an older one). While a refresh is under way,
//! [`ServerCache::all_servers`] and its kin answer from the last good listing of that age even
//! when it is marked outdated (a stale answer). A lookup that misses a fresh listing
//! triggers a refresh only when no refresh happened since the miss was last recorded: a server
//! that is not found is remembered for [`CacheConfig::miss_ttl`], so retries for a missing
//! server do not re-list everything.
//!
//! For the lifecycle controller's checks of NotReady Nodes, [`ServerCache::status_check`]
//! watches for changes with two requests every [`CacheConfig::status_period`]: the number of
//! running servers and the newest of them (`GET /servers?status=running&sort=id:desc&per_page=1`)
//! and the servers that are not running, with their status (usually one page). Together they
//! see every change of which servers exist and which run, whatever else happens in the same
//! period, because server IDs only grow: a deletion lowers the running count or changes the
//! set of servers not running, unless a server started or was created at the same time; a
//! start shows in the set of servers not running, a creation in the newest ID (or in that set
//! while the server is still starting). A change marks the full listing outdated (unless the
//! listing, made since the previous check, already shows what the check sees; a listing under
//! way is waited for and compared once it lands), so that the next existence check refreshes
//! it: a deleted server's Node is confirmed gone, and a powered-off server's Node reported
//! shut down, within about a status period plus the lifecycle controller's monitor period. A
//! listing that started before the change does not clear that mark.
//!
//! A lookup the listing cannot answer (too old, outdated, or without the server) refreshes
//! it, unless the listing spans several pages and the lookup comes alone: then the one server
//! is read directly (one request instead of one per 50 servers), at most once per
//! [`CacheConfig::min_refresh_interval`] (2 s). One
//! Node joining a cluster of 1000 thus costs one request, a burst of new Nodes one more than a
//! listing. A server read directly answers later lookups on its own while the read is younger
//! than the max age and no change seen by the status check came after it, however old the
//! listing is meanwhile (the route of a joining Node needs its server a moment after the
//! Node's initialisation read it).
//!
//! A miss here is never used to delete anything: [`ServerCache::confirm_exists`] asks the API
//! directly for the one server before the lifecycle controller may delete a Node.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use hcloud_api::models::{Server, ServerStatus};
use hcloud_api::{Client, ListServersParams};
use parking_lot::{Mutex, MutexGuard};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;
use tokio::time::Instant;

use crate::config::{CacheConfig, CacheMode};
use crate::snapshot_cache::{Answer, Snapshot, SnapshotCache};

/// Servers per page of a listing (the API's maximum, as `list_all` asks).
const SERVERS_PER_PAGE: usize = 50;

/// A failed lookup. Cheap to clone: a failed listing is handed to every lookup that waited
/// for it, instead of each of them repeating the listing.
#[derive(Clone, Debug, thiserror::Error)]
pub enum CacheError {
    /// The API answered with an error, or could not be reached.
    #[error(transparent)]
    Api(Arc<hcloud_api::Error>),
    /// The shared listing did not finish within its deadline.
    #[error("listing servers did not finish within {0:?}")]
    Deadline(Duration),
    /// Robot is asked for while Robot support has no client (`ROBOT_ENABLED` false, or no
    /// `ROBOT_USER`/`ROBOT_PASSWORD`).
    #[error(
        "no Robot client: set ROBOT_ENABLED=true with ROBOT_USER and ROBOT_PASSWORD to look up dedicated servers"
    )]
    RobotNotConfigured,
    /// The Robot rate-limit guard holds calls back (`ROBOT_RATE_LIMIT_WAIT_TIME`).
    #[error("rate limit exceeded, next try at {next_try:?}")]
    RobotRateLimited {
        /// When calls go to Robot again (RFC 3339).
        next_try: String,
        /// How long until then.
        retry_in: Duration,
    },
}

impl CacheError {
    /// The API error behind it, if any.
    pub fn api_error(&self) -> Option<&hcloud_api::Error> {
        match self {
            Self::Api(err) => Some(err),
            Self::Deadline(_) | Self::RobotNotConfigured | Self::RobotRateLimited { .. } => None,
        }
    }
}

impl From<hcloud_api::Error> for CacheError {
    fn from(err: hcloud_api::Error) -> Self {
        Self::Api(Arc::new(err))
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

/// A server as the cache keeps it: without the parts the provider never reads (labels, the
/// server type's and location's descriptions and lists, reverse DNS, firewalls, floating IPs,
/// MAC addresses, load balancer IDs); the server type's `locations` alone repeat every
/// location on every server.
fn cached(mut server: Server) -> Arc<Server> {
    server.labels = Default::default();
    let server_type = &mut server.server_type;
    server_type.description = String::new();
    server_type.cpu_type = None;
    server_type.storage_type = None;
    server_type.category = None;
    server_type.deprecation = None;
    server_type.locations = Vec::new();
    let location = &mut server.location;
    location.description = String::new();
    location.country = String::new();
    location.city = String::new();
    let public = &mut server.public_net;
    public.floating_ips = Vec::new();
    public.firewalls = Vec::new();
    if let Some(ipv4) = public.ipv4.as_mut() {
        ipv4.dns_ptr = None;
    }
    if let Some(ipv6) = public.ipv6.as_mut() {
        ipv6.dns_ptr = Vec::new();
    }
    for private in &mut server.private_net {
        private.mac_address = String::new();
    }
    server.load_balancers = Vec::new();
    Arc::new(server)
}

/// One listing of all servers: immutable once made, shared by every reader.
#[derive(Debug)]
struct Listing {
    by_id: HashMap<i64, Arc<Server>>,
    by_name: HashMap<String, i64>,
}

impl Listing {
    /// The servers of a listing.
    fn new(servers: Vec<Arc<Server>>) -> Self {
        let mut by_id = HashMap::with_capacity(servers.len());
        let mut by_name = HashMap::with_capacity(servers.len());
        for server in servers {
            by_name.insert(server.name.clone(), server.id);
            by_id.insert(server.id, server);
        }
        Self { by_id, by_name }
    }

    fn lookup(&self, key: &ServerKey) -> Option<Arc<Server>> {
        let id = match key {
            ServerKey::Id(id) => *id,
            ServerKey::Name(name) => *self.by_name.get(name)?,
        };
        self.by_id.get(&id).cloned()
    }
}

#[derive(Debug, Default)]
struct State {
    /// Servers read directly (e.g. by `confirm_exists`), with the time each read started.
    /// Those that started after the listing are newer than it, and on their own as good as a
    /// listing of that age; the others are superseded by it.
    extra: HashMap<i64, (Instant, Arc<Server>)>,
    /// Single servers (mode `one`): key → (fetched at, server or confirmed absence).
    singles: HashMap<ServerKey, (Instant, Option<Arc<Server>>)>,
    /// When a key was last found missing from a listing.
    misses: HashMap<ServerKey, Instant>,
    /// Direct reads instead of a refresh: when the current window started and how many.
    direct: Option<(Instant, usize)>,
}

/// Servers by ID, shared.
type ServersById = Arc<HashMap<i64, Arc<Server>>>;

/// Servers that are not running, as last listed by [`ServerCache::status_check`].
#[derive(Clone, Debug, Default)]
pub struct StatusCheck {
    /// Servers whose status is not `running`, by ID.
    pub not_running: ServersById,
    /// Age of that listing.
    pub age: Duration,
}

impl StatusCheck {
    /// Whether the server with `id` was off (`status: off`) in the listing.
    pub fn is_off(&self, id: i64) -> bool {
        self.not_running
            .get(&id)
            .is_some_and(|s| s.status == ServerStatus::Off)
    }
}

#[derive(Debug, Default)]
struct StatusState {
    /// When the servers were last checked.
    checked_at: Option<Instant>,
    /// What that check saw.
    seen: Option<Signature>,
    /// Servers not running, and when they were listed.
    not_running: Option<(Instant, ServersById)>,
}

/// What the status check sees of the servers: the number of running servers, the newest of
/// them, and the status of each server that is not running. Server IDs only grow, so any
/// server created, deleted, started or stopped since the last check changes it (see the
/// module documentation); a rename does not, and needs not.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Signature {
    running: u64,
    newest_running: Option<i64>,
    not_running: BTreeMap<i64, ServerStatus>,
}

impl Signature {
    fn new<'a>(
        running: u64,
        newest_running: Option<i64>,
        not_running: impl IntoIterator<Item = &'a Server>,
    ) -> Self {
        Self {
            running,
            newest_running,
            not_running: not_running
                .into_iter()
                .map(|s| (s.id, s.status.clone()))
                .collect(),
        }
    }
}

impl Signature {
    /// What the status check would see of a listing's servers.
    fn of_listing(listing: &Listing) -> Self {
        let running = listing
            .by_id
            .values()
            .filter(|s| s.status == ServerStatus::Running);
        Self::new(
            running.clone().count() as u64,
            running.map(|s| s.id).max(),
            listing
                .by_id
                .values()
                .filter(|s| s.status != ServerStatus::Running)
                .map(AsRef::as_ref),
        )
    }
}

/// Statuses other than `running`.
const NOT_RUNNING: [ServerStatus; 8] = [
    ServerStatus::Initializing,
    ServerStatus::Starting,
    ServerStatus::Stopping,
    ServerStatus::Off,
    ServerStatus::Deleting,
    ServerStatus::Migrating,
    ServerStatus::Rebuilding,
    ServerStatus::StatusUnknown,
];

/// The shared server cache. Cheap to clone; clones share the cached data and the counters.
#[derive(Clone, Debug)]
pub struct ServerCache {
    client: Client,
    config: CacheConfig,
    /// The listing of all servers (mode `all`); marked outdated by the status check.
    listings: SnapshotCache<Listing, CacheError>,
    state: Arc<Mutex<State>>,
    /// The status check, one at a time (it is one small request).
    status: Arc<tokio::sync::Mutex<StatusState>>,
    metrics: CacheMetrics,
    /// The `subsystem` label of this handle's lookups.
    subsystem: &'static str,
}

impl ServerCache {
    /// A cache over `client`.
    pub fn new(client: Client, config: CacheConfig) -> Self {
        Self {
            listings: SnapshotCache::with_deadline(config.refresh_deadline, CacheError::Deadline),
            client,
            config,
            state: Arc::default(),
            status: Arc::default(),
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

    /// The settings.
    pub fn config(&self) -> &CacheConfig {
        &self.config
    }

    fn count(&self, result: &'static str) {
        self.metrics.count(self.subsystem, self.config.mode, result);
    }

    /// The cache's counters.
    pub fn metrics(&self) -> &CacheMetrics {
        &self.metrics
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock()
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

    /// What this process last saw of the server with `id`, however old, without a request: a
    /// direct read newer than the listing, else the listing, else a single lookup (mode `one`).
    /// Only for facts that seldom change and that a request would otherwise have to ask for
    /// (whether a load balancer target has a public IPv4), never for existence: `None` is "not
    /// seen", not "gone".
    pub fn last_seen(&self, id: i64) -> Option<Arc<Server>> {
        let state = self.state();
        let listing = self.listings.latest();
        let newer_read = state
            .extra
            .get(&id)
            .filter(|(at, _)| listing.as_ref().is_none_or(|l| *at > l.at))
            .map(|(_, server)| server.clone());
        newer_read
            .or_else(|| listing.as_ref().and_then(|l| l.by_id.get(&id).cloned()))
            .or_else(|| {
                state
                    .singles
                    .get(&ServerKey::Id(id))
                    .and_then(|(_, found)| found.clone())
            })
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
        let read_at = Instant::now();
        let found = self.fetch(key).await?;
        let mut state = self.state();
        if let Some(server) = &found {
            state.misses.remove(key);
            state.misses.remove(&ServerKey::Id(server.id));
            // Later lookups (shutdown state, metadata) find it without another request.
            if self.listings.latest().is_some() {
                self.read_directly_at(&mut state, read_at, server);
            }
        }
        if self.config.mode == CacheMode::One {
            self.remember_single(&mut state, key, found.clone());
        }
        Ok(found.is_some())
    }

    /// A server read directly since `listing` (the start of the latest listing, if any):
    /// `(read at, server)`.
    fn direct_read<'a>(
        state: &'a State,
        listing: Option<Instant>,
        key: &ServerKey,
    ) -> Option<&'a (Instant, Arc<Server>)> {
        let newer = |(at, _): &&(Instant, Arc<Server>)| listing.is_none_or(|l| *at > l);
        match key {
            ServerKey::Id(id) => state.extra.get(id).filter(newer),
            ServerKey::Name(name) => state
                .extra
                .values()
                .filter(newer)
                .find(|(_, s)| s.name == *name),
        }
    }

    /// Keep `server`, read directly in a read that started at `at`.
    fn read_directly_at(&self, state: &mut State, at: Instant, server: &Arc<Server>) {
        // Reads the listing supersedes go.
        if let Some(listing) = self.listings.latest() {
            state.extra.retain(|_, (read_at, _)| *read_at > listing.at);
        }
        state.extra.insert(server.id, (at, server.clone()));
    }

    /// A server read directly, if that read is younger than `max_age` and came after the
    /// last change the status check saw: it answers whatever the listing's age (a Node
    /// that joined is read once for its initialisation, and its route's gateway lookup a
    /// moment later needs no listing of every server).
    fn fresh_direct_read(
        &self,
        state: &State,
        listing: Option<Instant>,
        key: &ServerKey,
        max_age: Duration,
    ) -> Option<Arc<Server>> {
        let (at, server) = Self::direct_read(state, listing, key)?;
        let changed = self.listings.outdated_since();
        let current = changed.is_none_or(|changed| *at > changed);
        (current && at.elapsed() < max_age).then(|| server.clone())
    }

    /// A server of `listing`, or read directly since (which is newer).
    fn lookup(state: &State, listing: &Snapshot<Listing>, key: &ServerKey) -> Option<Arc<Server>> {
        Self::direct_read(state, Some(listing.at), key)
            .map(|(_, server)| server.clone())
            .or_else(|| listing.lookup(key))
    }

    /// Whether a lookup the listing cannot answer is cheaper as a direct read of the one
    /// server than as a refresh: only when the listing spans several pages, no refresh is
    /// under way, and either the server was read directly `again` since the listing, or no
    /// other direct read happened in the last [`CacheConfig::min_refresh_interval`] (a burst
    /// of lookups of other servers, such as many new Nodes, lists instead).
    fn read_directly(&self, state: &mut State, again: bool) -> bool {
        let Some(listing) = self.listings.latest() else {
            return false;
        };
        let pages = listing.by_id.len().div_ceil(SERVERS_PER_PAGE);
        if pages < 2 || self.listings.is_refreshing() {
            return false;
        }
        if again {
            return true;
        }
        let now = Instant::now();
        let (since, used) = state.direct.get_or_insert((now, 0));
        if now.saturating_duration_since(*since) >= self.config.min_refresh_interval {
            *since = now;
            *used = 0;
        }
        // One direct read per window: a second lookup this soon is a burst (e.g. the periodic
        // address refresh of every Node), which one listing serves better.
        if *used >= 1 {
            return false;
        }
        *used += 1;
        true
    }

    /// Several lookups follow (e.g. the periodic address refresh of every Node): the next
    /// lookup that the listing cannot answer refreshes it rather than reading its one server
    /// directly, which would only add a request before the listing the second lookup needs.
    pub fn expect_many(&self) {
        self.state().direct = Some((Instant::now(), 1));
    }

    /// Join the listing under way or start one.
    fn refresh(&self) -> Answer<Listing, CacheError> {
        let client = self.client.clone();
        let state = self.state.clone();
        let miss_ttl = self.config.miss_ttl;
        self.listings.refresh(move || async move {
            let servers = client
                .servers()
                .list_all_map(&ListServersParams::default(), cached)
                .await?;
            // Misses past their TTL are looked for again from this listing on.
            let mut state = state.lock();
            state.misses.retain(|_, at| at.elapsed() < miss_ttl);
            Ok(Listing::new(servers))
        })
    }

    async fn get_from_listing(
        &self,
        key: &ServerKey,
        max_age: Duration,
    ) -> Result<Option<Arc<Server>>, CacheError> {
        let requested_at = Instant::now();
        let direct = {
            let mut state = self.state();
            let listed_at = self.listings.latest().map(|l| l.at);
            if let Some(server) = self.fresh_direct_read(&state, listed_at, key, max_age) {
                self.count(RESULT_HIT);
                return Ok(Some(server));
            }
            if let Some(listing) = self.listings.fresh(max_age) {
                if let Some(server) = Self::lookup(&state, &listing, key) {
                    self.count(RESULT_HIT);
                    return Ok(Some(server));
                }
                // Missing from a fresh listing. Re-listing only helps for a server created
                // after it, so skip the refresh when the listing is younger than the minimum
                // refresh interval or the key was missed recently.
                let recently_missed = state
                    .misses
                    .get(key)
                    .is_some_and(|at| at.elapsed() < self.config.miss_ttl);
                if listing.age() < self.config.min_refresh_interval || recently_missed {
                    self.count(RESULT_HIT);
                    state.misses.entry(key.clone()).or_insert(listing.at);
                    return Ok(None);
                }
            }
            // A server read directly since the listing is read again rather than listing all
            // (e.g. the lifecycle check of a joining Node, after its initialisation read it and
            // the status check then saw it start).
            let again = Self::direct_read(&state, listed_at, key).is_some();
            self.read_directly(&mut state, again)
        };
        if direct {
            self.count(RESULT_MISS);
            let found = self.fetch(key).await?;
            let mut state = self.state();
            match &found {
                Some(server) => {
                    state.misses.remove(key);
                    self.read_directly_at(&mut state, requested_at, server);
                }
                None => {
                    state.misses.insert(key.clone(), Instant::now());
                }
            }
            return Ok(found);
        }
        let refresh = self.refresh();
        // The lookup that starts the listing pays for it; those joining it are answered by a
        // listing made while they waited, without a request of their own.
        self.count(if refresh.started() {
            RESULT_MISS
        } else {
            RESULT_HIT
        });
        let listing = match refresh.await {
            Ok(listing) => listing,
            Err(err) => return Err(err),
        };
        let mut state = self.state();
        let found = Self::lookup(&state, &listing, key);
        if found.is_none() {
            state
                .misses
                .insert(key.clone(), listing.at.max(requested_at));
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
            let state = self.state();
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
        let mut state = self.state();
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
                Ok(server) => Ok(Some(cached(server))),
                Err(err) if err.is_not_found() => Ok(None),
                Err(err) => Err(err.into()),
            },
            ServerKey::Name(name) => Ok(self.client.servers().get_by_name(name).await?.map(cached)),
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
    /// mapping route gateways to servers. While a refresh is under way, the last good listing
    /// answers if it is that young.
    pub async fn all_servers_for_status(&self) -> Result<ServerSnapshot, CacheError> {
        self.all_servers_within(self.status_max_age()).await
    }

    /// Every server, from a listing no older than `max_age` (refreshed otherwise).
    pub async fn all_servers_within(
        &self,
        max_age: Duration,
    ) -> Result<ServerSnapshot, CacheError> {
        if self.config.mode != CacheMode::All {
            self.count(RESULT_MISS);
            let servers = self
                .client
                .servers()
                .list_all_map(&ListServersParams::default(), cached)
                .await?;
            return Ok(ServerSnapshot {
                servers,
                age: Duration::ZERO,
            });
        }
        {
            let state = self.state();
            // Outdated or not: a listing this young answers, and so does the last good one
            // while a refresh is under way (the status check only hurries existence checks).
            let usable = self.listings.fresh(max_age).or_else(|| {
                let stale = self.listings.latest().filter(|l| l.age() < max_age)?;
                self.listings.is_refreshing().then_some(stale)
            });
            if let Some(listing) = usable {
                self.count(RESULT_HIT);
                return Ok(ServerSnapshot::of(&state, &listing));
            }
        }
        let refresh = self.refresh();
        self.count(if refresh.started() {
            RESULT_MISS
        } else {
            RESULT_HIT
        });
        let listing = refresh.await?;
        let state = self.state();
        Ok(ServerSnapshot::of(&state, &listing))
    }

    /// Whether the listing already shows the servers as the status check sees them (`seen`):
    /// it started after the previous check (`checked_at`; any, for the first check), is
    /// younger than a status period, and has the same running count, newest running server
    /// and servers not running. The changes the check saw then came before the listing, so it
    /// is not outdated: a burst of joining Nodes, whose servers were created before the
    /// listing made for them, costs one listing, not a second one when the lifecycle
    /// controller's first check of those NotReady Nodes comes. (A listing that changes
    /// happened during may match by chance; what it then answers wrongly is a server that
    /// exists, and a lookup missing from it asks again: it delays the lifecycle controller's
    /// checks, which confirm a deletion with the API directly, by at most the status max age.)
    fn listing_shows(&self, seen: Option<&Signature>, checked_at: Option<Instant>) -> bool {
        let Some(seen) = seen else { return false };
        let Some(listing) = self.listings.latest() else {
            return false;
        };
        checked_at.is_none_or(|at| listing.at > at)
            && listing.age() < self.config.status_period
            && Signature::of_listing(&listing) == *seen
    }

    /// Like [`ServerCache::listing_shows`], once the listing under way (if any) has landed:
    /// it usually started a moment before the check (the first listing of a burst, made for
    /// the first Node's initialisation, while the lifecycle controller's first check of that
    /// Node ran), and a mark as of the check's moment would outlive it and cost a second
    /// listing. Waiting costs no request; a failed listing shows nothing.
    async fn listing_shows_once_landed(
        &self,
        seen: Option<&Signature>,
        checked_at: Option<Instant>,
    ) -> bool {
        if self.listing_shows(seen, checked_at) {
            return true;
        }
        let Some(listing) = seen.and(self.listings.under_way()) else {
            return false;
        };
        listing.await.is_ok() && self.listing_shows(seen, checked_at)
    }

    /// Age of the current listing, if any (for tests and diagnostics).
    pub async fn listing_age(&self) -> Option<Duration> {
        self.listings.latest().map(|l| l.age())
    }

    /// The servers that are not running, checked at most every
    /// [`CacheConfig::status_period`] (see the module documentation) with two requests: the
    /// number of running servers and the newest of them, and the listing of the servers that
    /// are not running (usually one page). When either differs from the last check, the full
    /// listing is marked outdated, so that the next existence check refreshes it.
    pub async fn status_check(&self) -> Result<StatusCheck, CacheError> {
        let mut status = self.status.lock().await;
        let now = Instant::now();
        let due = status
            .checked_at
            .is_none_or(|at| at.elapsed() >= self.config.status_period);
        if !due && let Some((at, servers)) = &status.not_running {
            self.count(RESULT_HIT);
            return Ok(StatusCheck {
                not_running: servers.clone(),
                age: at.elapsed(),
            });
        }
        self.count(RESULT_MISS);
        let since = self.listings.moment();
        let page = self
            .client
            .servers()
            .list(&ListServersParams {
                status: vec![ServerStatus::Running],
                sort: vec!["id:desc".to_owned()],
                per_page: Some(1),
                ..ListServersParams::default()
            })
            .await?;
        // Without the API's total the count is unknown, and so is whether anything changed.
        let running = page.pagination().and_then(|p| p.total_entries);
        let servers = self
            .client
            .servers()
            .list_all_map(
                &ListServersParams {
                    status: NOT_RUNNING.to_vec(),
                    ..ListServersParams::default()
                },
                cached,
            )
            .await?;
        let by_id: HashMap<i64, Arc<Server>> = servers.into_iter().map(|s| (s.id, s)).collect();
        let seen = running.map(|running| {
            Signature::new(
                running,
                page.items.first().map(|s| s.id),
                by_id.values().map(AsRef::as_ref),
            )
        });
        let changed = seen.is_none() || seen != status.seen;
        if changed
            && !self
                .listing_shows_once_landed(seen.as_ref(), status.checked_at)
                .await
        {
            // The first check has nothing to compare with: what changed between the listing
            // and now is unknown, so the listing is outdated as well.
            tracing::debug!(
                "servers were created, deleted, started or stopped (or this is the first check); the server listing is outdated"
            );
            self.listings.mark_outdated(since);
        }
        let not_running = Arc::new(by_id);
        status.not_running = Some((now, not_running.clone()));
        status.seen = seen;
        status.checked_at = Some(now);
        Ok(StatusCheck {
            not_running,
            age: now.elapsed(),
        })
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
    fn of(state: &State, listing: &Snapshot<Listing>) -> Self {
        let mut servers: Vec<Arc<Server>> = listing.by_id.values().cloned().collect();
        servers.extend(
            state
                .extra
                .values()
                .filter(|(at, s)| *at > listing.at && !listing.by_id.contains_key(&s.id))
                .map(|(_, s)| s.clone()),
        );
        Self {
            servers,
            age: listing.age(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A project as the status check sees it: server ID → (name, status).
    type World = BTreeMap<i64, (String, ServerStatus)>;

    fn signature(world: &World) -> Signature {
        let running: Vec<i64> = world
            .iter()
            .filter(|(_, (_, status))| *status == ServerStatus::Running)
            .map(|(id, _)| *id)
            .collect();
        let not_running: Vec<Server> = world
            .iter()
            .filter(|(_, (_, status))| *status != ServerStatus::Running)
            .map(|(id, (name, status))| Server {
                id: *id,
                name: name.clone(),
                status: status.clone(),
                ..Server::default()
            })
            .collect();
        Signature::new(
            running.len() as u64,
            running.iter().max().copied(),
            &not_running,
        )
    }

    /// Which servers exist and which run: what the lifecycle checks must notice.
    fn existence(world: &World) -> BTreeMap<i64, bool> {
        world
            .iter()
            .map(|(id, (_, status))| (*id, *status == ServerStatus::Running))
            .collect()
    }

    #[derive(Clone, Copy, Debug)]
    enum Change {
        Delete(i64),
        Create,
        PowerOff(i64),
        PowerOn(i64),
        Rename(i64),
    }

    fn apply(world: &mut World, next_id: &mut i64, change: Change) {
        match change {
            Change::Delete(id) => {
                world.remove(&id);
            }
            Change::Create => {
                world.insert(*next_id, (format!("new-{next_id}"), ServerStatus::Running));
                *next_id += 1;
            }
            Change::PowerOff(id) => {
                if let Some((_, status)) = world.get_mut(&id) {
                    *status = ServerStatus::Off;
                }
            }
            Change::PowerOn(id) => {
                if let Some((_, status)) = world.get_mut(&id) {
                    *status = ServerStatus::Running;
                }
            }
            Change::Rename(id) => {
                if let Some((name, _)) = world.get_mut(&id) {
                    name.push_str("-renamed");
                }
            }
        }
    }

    fn world() -> (World, i64) {
        let mut world = World::new();
        for id in 1..=6 {
            let status = if id == 5 {
                ServerStatus::Off
            } else {
                ServerStatus::Running
            };
            world.insert(id, (format!("s{id}"), status));
        }
        (world, 7)
    }

    #[test]
    fn changes_within_one_status_period_are_seen_together() {
        use Change::*;
        let cases: [(&str, &[Change]); 8] = [
            ("a deletion and a power-on", &[Delete(2), PowerOn(5)]),
            ("a deletion and a creation", &[Delete(2), Create]),
            (
                "a creation and its deletion, then another deletion",
                &[Create, Delete(7), Delete(3)],
            ),
            ("a power-off and a creation", &[PowerOff(3), Create]),
            ("a power-off and a power-on", &[PowerOff(3), PowerOn(5)]),
            ("a deletion of a server that is off", &[Delete(5)]),
            (
                "a deletion, a power-on and a power-off",
                &[Delete(1), PowerOn(5), PowerOff(2)],
            ),
            ("a rename and a deletion", &[Rename(4), Delete(4)]),
        ];
        for (what, changes) in cases {
            let (mut world, mut next_id) = world();
            let before = signature(&world);
            for change in changes {
                apply(&mut world, &mut next_id, *change);
            }
            assert_ne!(before, signature(&world), "{what} went unnoticed");
        }
        // A rename alone changes neither existence nor power: nothing to notice.
        let (mut world, mut next_id) = world();
        let before = signature(&world);
        apply(&mut world, &mut next_id, Rename(2));
        assert_eq!(before, signature(&world));
    }

    /// Random sequences of changes within one period: whenever the servers that exist or run
    /// differ afterwards, the signature differs too.
    #[test]
    fn no_sequence_of_changes_hides_a_deletion_or_a_power_change() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut random = |below: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % below
        };
        for _ in 0..20_000 {
            let (mut world, mut next_id) = world();
            let before = (signature(&world), existence(&world));
            for _ in 0..=random(4) {
                let bound = u64::try_from(next_id).unwrap_or(1) + 1;
                let id = i64::try_from(random(bound)).unwrap_or(1);
                let change = match random(5) {
                    0 => Change::Delete(id),
                    1 => Change::Create,
                    2 => Change::PowerOff(id),
                    3 => Change::PowerOn(id),
                    _ => Change::Rename(id),
                };
                apply(&mut world, &mut next_id, change);
            }
            if existence(&world) != before.1 {
                assert_ne!(signature(&world), before.0, "{world:?}");
            }
        }
    }

    #[test]
    fn a_cached_server_keeps_what_the_provider_reads() {
        let server: Server = serde_json::from_value(serde_json::json!({
            "id": 42, "name": "worker-1", "status": "off",
            "created": "2026-01-01T00:00:00+00:00",
            "labels": {"team": "a"},
            "server_type": {"id": 1, "name": "cpx22", "description": "CPX 22", "cores": 2,
                            "architecture": "x86", "category": "regular_purpose",
                            "locations": [{"id": 1, "name": "fsn1"}, {"id": 2, "name": "nbg1"}]},
            "location": {"id": 1, "name": "fsn1", "network_zone": "eu-central",
                         "description": "Falkenstein DC Park 1", "country": "DE",
                         "city": "Falkenstein"},
            "public_net": {
                "ipv4": {"id": 1, "ip": "203.0.113.5", "blocked": false, "dns_ptr": "x"},
                "ipv6": {"id": 2, "ip": "2001:db8:0:7::/64", "blocked": false,
                         "dns_ptr": [{"ip": "2001:db8:0:7::1", "dns_ptr": "x"}]},
                "firewalls": [{"id": 3, "status": "applied"}],
            },
            "private_net": [{"network": 7, "ip": "10.0.0.2", "alias_ips": ["10.0.0.9"],
                             "mac_address": "86:00:00:00:00:01"}],
            "load_balancers": [5],
        }))
        .unwrap();
        let kept = cached(server.clone());
        assert_eq!(
            (
                kept.id,
                kept.name.as_str(),
                kept.status.clone(),
                kept.created
            ),
            (42, "worker-1", ServerStatus::Off, server.created)
        );
        assert_eq!(kept.server_type.name, "cpx22");
        assert_eq!(kept.server_type.cores, 2);
        assert_eq!(
            kept.server_type.architecture,
            server.server_type.architecture
        );
        assert_eq!(
            (
                kept.location.name.as_str(),
                kept.location.network_zone.clone()
            ),
            ("fsn1", server.location.network_zone)
        );
        let ipv4 = kept.public_net.ipv4.as_ref().map(|ip| ip.ip.as_str());
        let ipv6 = kept.public_net.ipv6.as_ref().map(|ip| ip.ip.as_str());
        assert_eq!(ipv4, Some("203.0.113.5"));
        assert_eq!(ipv6, Some("2001:db8:0:7::/64"));
        let private = &kept.private_net[0];
        assert_eq!(
            (
                private.network,
                private.ip.as_str(),
                private.alias_ips.clone()
            ),
            (7, "10.0.0.2", vec!["10.0.0.9".to_owned()])
        );
        // What nothing reads is gone.
        assert!(kept.labels.is_empty() && kept.server_type.locations.is_empty());
        assert!(kept.public_net.firewalls.is_empty() && kept.load_balancers.is_empty());
        assert!(kept.location.city.is_empty() && kept.private_net[0].mac_address.is_empty());
    }
}
