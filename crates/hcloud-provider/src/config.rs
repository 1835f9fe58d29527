//! Settings of the Hetzner instances implementation (filled from `HCLOUD_*` by the binary's
//! configuration, which parses the variables with these types).

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// `HCLOUD_INSTANCES_ADDRESS_FAMILY`: which public addresses become ExternalIPs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AddressFamily {
    /// Public IPv4 only (default).
    #[default]
    Ipv4,
    /// The first address of the public IPv6 /64 only.
    Ipv6,
    /// Both.
    DualStack,
}

impl AddressFamily {
    pub(crate) fn includes_ipv4(self) -> bool {
        matches!(self, Self::Ipv4 | Self::DualStack)
    }

    pub(crate) fn includes_ipv6(self) -> bool {
        matches!(self, Self::Ipv6 | Self::DualStack)
    }
}

impl AddressFamily {
    /// Each value with its name in `HCLOUD_INSTANCES_ADDRESS_FAMILY`.
    const NAMES: [(&'static str, Self); 3] = [
        ("ipv4", Self::Ipv4),
        ("ipv6", Self::Ipv6),
        ("dualstack", Self::DualStack),
    ];
}

impl FromStr for AddressFamily {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        one_of(s, &Self::NAMES)
    }
}

impl fmt::Display for AddressFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = Self::NAMES
            .iter()
            .find(|(_, family)| family == self)
            .map_or("", |(name, _)| name);
        f.write_str(name)
    }
}

/// The value named `value` (case-sensitive, as upstream) among `names`, or an error listing
/// the names.
fn one_of<T: Copy>(value: &str, names: &[(&str, T)]) -> Result<T, String> {
    names
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let expected: Vec<&str> = names.iter().map(|(name, _)| *name).collect();
            format!(
                "invalid value {value:?}, expected one of: {}",
                expected.join(", ")
            )
        })
}

/// `HCLOUD_SERVER_CACHE_MODE`: how server lookups are cached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CacheMode {
    /// One paginated listing of all servers answers every lookup within the max age (default).
    #[default]
    All,
    /// Each server is fetched on its own (by ID or name) and kept for the max age.
    One,
    /// Every lookup asks the API.
    Off,
}

impl FromStr for CacheMode {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        one_of(
            s,
            &[("all", Self::All), ("one", Self::One), ("off", Self::Off)],
        )
    }
}

/// Every age and threshold of the provider's caches: the server cache, the snapshot of all
/// load balancers, the load balancer types and the routes' copy of the network. Each of them
/// is a snapshot cache with one freshness policy (see the provider's `snapshot_cache`
/// module); the defaults are the production values, and tests shorten them instead of
/// waiting.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CacheConfig {
    /// Caching strategy of the server cache (`HCLOUD_SERVER_CACHE_MODE`).
    pub mode: CacheMode,
    /// How long a listing of all servers (or a single server) answers lookups
    /// (`HCLOUD_SERVER_CACHE_MAX_AGE`, default 10 s as upstream).
    pub max_age: Duration,
    /// How old a listing may be when the lifecycle controller asks whether a server still
    /// exists or is shut down (never less than `max_age`; default 5 min). NotReady Nodes are
    /// checked every monitor period; with the plain max age they would cost a full listing
    /// every 10 s for as long as any Node is NotReady. Changes are noticed sooner through the
    /// status check (see `status_period`), which marks the listing outdated; this age is a
    /// safety net only.
    pub status_max_age: Duration,
    /// How often the lifecycle checks look for changes (two requests: the running servers'
    /// count and newest ID, and the servers not running; default 15 s, so 200 NotReady Nodes
    /// cost 8 requests a minute). A change makes the next existence answer refresh the
    /// listing, so a powered-off server is reported shut down, and a deleted one confirmed
    /// gone, within about this period plus the lifecycle controller's monitor period. A
    /// listing made since the previous check and younger than this period (or under way
    /// during the check, once it lands) that shows what the check sees stays current: a burst
    /// of joining Nodes costs one listing.
    pub status_period: Duration,
    /// Longest time one shared listing of all servers may take before the lookups waiting
    /// for it give up (default 60 s).
    pub refresh_deadline: Duration,
    /// How long a server that was not found stays "not found" before the next refresh may look
    /// for it again (default 10 s). Keeps retries of a missing server from re-listing
    /// everything.
    pub miss_ttl: Duration,
    /// A listing of all servers younger than this answers a lookup that misses it without
    /// another refresh; and a lookup the listing cannot answer reads its one server directly
    /// at most once in this window, later ones list (default 2 s).
    pub min_refresh_interval: Duration,
    /// How long one listing of all load balancers answers the lookups of every Service, and
    /// the window in which a second lookup counts as a burst (default 10 s; zero: every lookup
    /// asks the API).
    pub load_balancer_max_age: Duration,
    /// How long the list of load balancer types answers lookups (default 1 h, as upstream).
    pub lb_type_max_age: Duration,
    /// A load balancer type missing from a list at least this old reads the list again
    /// (default 60 s).
    pub unknown_lb_type_refresh: Duration,
    /// How old the routes' copy of the network may be for listing routes (default 30 s; zero:
    /// read every time). The copy includes this process's own changes; routes changed by
    /// others are seen this much later.
    pub network_max_age: Duration,
    /// How old the copy of the network may be to plan route changes against (default 30 s,
    /// never less than `network_max_age`). A stale plan costs one extra read: the API rejects
    /// the change and the network is read again.
    pub network_plan_max_age: Duration,
    /// How long the list of all Robot dedicated servers answers lookups
    /// (`ROBOT_CACHE_TIMEOUT`, default 5 min; zero: every lookup lists).
    pub robot_max_age: Duration,
}

impl CacheConfig {
    /// The age a planned route change accepts ([`CacheConfig::network_plan_max_age`], at least
    /// [`CacheConfig::network_max_age`]).
    pub(crate) fn network_plan_age(&self) -> Duration {
        self.network_plan_max_age.max(self.network_max_age)
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        Self {
            mode: CacheMode::All,
            max_age: Duration::from_secs(10),
            status_max_age: Duration::from_secs(300),
            status_period: Duration::from_secs(15),
            refresh_deadline: Duration::from_secs(60),
            miss_ttl: Duration::from_secs(10),
            min_refresh_interval: Duration::from_secs(2),
            load_balancer_max_age: Duration::from_secs(10),
            lb_type_max_age: Duration::from_secs(3600),
            unknown_lb_type_refresh: Duration::from_secs(60),
            network_max_age: Duration::from_secs(30),
            network_plan_max_age: Duration::from_secs(30),
            robot_max_age: Duration::from_secs(300),
        }
    }
}

/// A network given by name or ID (`HCLOUD_NETWORK`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetworkRef {
    /// Numeric ID.
    Id(i64),
    /// Network name.
    Name(String),
}

impl NetworkRef {
    /// A value that parses as a positive integer is an ID, anything else a name.
    pub fn parse(value: &str) -> NetworkRef {
        match value.parse::<i64>() {
            Ok(id) if id > 0 => NetworkRef::Id(id),
            _ => NetworkRef::Name(value.to_owned()),
        }
    }
}

/// Settings of the instances capability, after the network was resolved to its ID.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InstancesConfig {
    /// Which public addresses are reported.
    pub address_family: AddressFamily,
    /// The network whose private IP becomes the InternalIP.
    pub network_id: Option<i64>,
    /// Whether the zone label is set (`HCLOUD_INSTANCES_ZONE_LABEL_ENABLED`).
    pub zone_label_enabled: bool,
    /// Ages and thresholds of the caches.
    pub cache: CacheConfig,
}

impl Default for InstancesConfig {
    fn default() -> Self {
        Self {
            address_family: AddressFamily::Ipv4,
            network_id: None,
            zone_label_enabled: true,
            cache: CacheConfig::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_families_modes_and_network_references() {
        assert_eq!("dualstack".parse(), Ok(AddressFamily::DualStack));
        assert!(
            "IPv4"
                .parse::<AddressFamily>()
                .unwrap_err()
                .contains("\"IPv4\"")
        );
        assert_eq!(
            "ipv5".parse::<AddressFamily>(),
            Err("invalid value \"ipv5\", expected one of: ipv4, ipv6, dualstack".to_owned())
        );
        assert_eq!(AddressFamily::DualStack.to_string(), "dualstack");
        assert_eq!("one".parse(), Ok(CacheMode::One));
        assert_eq!(
            "some".parse::<CacheMode>(),
            Err("invalid value \"some\", expected one of: all, one, off".to_owned())
        );
        assert_eq!(NetworkRef::parse("123"), NetworkRef::Id(123));
        assert_eq!(NetworkRef::parse("k8s"), NetworkRef::Name("k8s".into()));
        assert_eq!(NetworkRef::parse("0"), NetworkRef::Name("0".into()));
    }
}
