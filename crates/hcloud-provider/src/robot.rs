//! Hetzner Robot dedicated servers (`ROBOT_*`): the Robot webservice as the provider reads it,
//! and the pure mapping from a dedicated server to the Node metadata the official CCM sets.
//!
//! - [`RobotApi`] is the whole of the webservice the provider needs: the server list and one
//!   server's power state. The binary passes its Robot client; tests pass a fake.
//! - [`Robot`] wraps it with the project's one cache type (see `snapshot_cache`): the whole
//!   `GET /server` list is kept for [`CacheConfig::robot_max_age`] (`ROBOT_CACHE_TIMEOUT`,
//!   default 5 min) and answers every lookup by number and by name, so a burst of dedicated
//!   Nodes costs one listing. A lookup that misses does not refresh the list (as upstream: a
//!   new server is seen once the list is older than its age). A failed refresh is every
//!   waiter's error and serves no stale list. The power state (`GET /reset/N`) of a server
//!   is read at most once per [`RobotSettings::power_state_max_age`]
//!   (`ROBOT_POWER_STATE_CACHE_TIMEOUT`, default 1 min; the official CCM reads it on every
//!   shutdown check, every 5 s per NotReady dedicated Node): between reads the last answer
//!   is reused, concurrent questions share one read, and a failed read is not kept. Robot
//!   allows few requests an hour per endpoint (200 to `GET /reset/N`, all servers together),
//!   so the reads of all servers share [`POWER_STATE_READS_PER_HOUR`]: with more servers
//!   asked about than that budget allows at the set age, each one's answer is reused longer
//!   (10 NotReady dedicated Nodes: one read each per 6 min, 100 an hour).
//! - The rate-limit guard sits outside the cache: once Robot answered "rate limit exceeded"
//!   (or a bare 403), every call fails at once for [`RobotSettings::rate_limit_wait_time`]
//!   (`ROBOT_RATE_LIMIT_WAIT_TIME`; zero, the default, never holds anything back), even
//!   while the cached list is fresh.
//! - Only Robot itself says a server is gone: an error, the rate limit or a list older than
//!   the question never do (`Robot::servers_after` reads a list made after the question
//!   before a Node may be deleted).

use std::collections::{BTreeMap, HashMap};
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cloud_provider::InstanceMetadata;
use cloud_provider::well_known::address_type::{EXTERNAL_IP, HOSTNAME, INTERNAL_IP};
use hcloud_api::robot::{RobotReset, RobotServer};
use k8s_openapi::api::core::v1::{Node, NodeAddress};
use parking_lot::Mutex;
use tokio::time::Instant;

use crate::config::{AddressFamily, CacheConfig};
use crate::metadata::PROVIDED_BY_LABEL;
use crate::provider_id::ProviderId;
use crate::server_cache::CacheError;
use crate::snapshot_cache::{Moment, Snapshot, SnapshotCache};

/// The Robot webservice calls the provider makes. An account without servers lists as
/// `Ok(vec![])`.
#[async_trait]
pub trait RobotApi: Send + Sync {
    /// `GET /server`: every dedicated server of the account.
    async fn servers(&self) -> Result<Vec<RobotServer>, hcloud_api::Error>;
    /// `GET /reset/{server_number}`: the server's power state.
    async fn reset(&self, server_number: u64) -> Result<RobotReset, hcloud_api::Error>;
}

/// The webservice client itself, as the binary uses it.
#[async_trait]
impl RobotApi for hcloud_api::robot::RobotClient {
    async fn servers(&self) -> Result<Vec<RobotServer>, hcloud_api::Error> {
        hcloud_api::robot::RobotClient::servers(self).await
    }

    async fn reset(&self, server_number: u64) -> Result<RobotReset, hcloud_api::Error> {
        hcloud_api::robot::RobotClient::reset(self, server_number).await
    }
}

/// `ROBOT_*` settings besides the credentials (which belong to the client) and the cache age
/// (in [`CacheConfig::robot_max_age`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RobotSettings {
    /// `ROBOT_ENABLED`. Enabled without a client (no credentials): Robot Nodes cannot be
    /// looked up, and load balancers use their InternalIPs with `use-private-ip`.
    pub enabled: bool,
    /// `ROBOT_FORWARD_INTERNAL_IPS`: keep the InternalIPs the kubelet reported.
    pub forward_internal_ips: bool,
    /// `ROBOT_RATE_LIMIT_WAIT_TIME`: how long every Robot call fails at once after Robot
    /// answered "rate limit exceeded" (zero: never).
    pub rate_limit_wait_time: Duration,
    /// `ROBOT_POWER_STATE_CACHE_TIMEOUT`: how long a server's power state is reused before
    /// it is read again (zero: read on every shutdown check).
    pub power_state_max_age: Duration,
    /// `ROBOT_POWER_STATE_READS_PER_HOUR`: the power-state reads of all servers together in
    /// an hour, at most, whenever `power_state_max_age` is not zero (zero: no budget). The
    /// binary's default is [`POWER_STATE_READS_PER_HOUR`].
    pub power_state_reads_per_hour: u32,
    /// `ROBOT_USE_LEGACY_PROVIDER_ID`: write `hcloud://bm-N` instead of `hrobot://N` to a
    /// dedicated Node that has no providerID (see [`ProviderId::written`]).
    pub legacy_provider_id: bool,
}

/// Event reason: a Node's name is a cloud server's and a Robot server's.
pub const INSTANCE_LOOKUP_FAILED: &str = "InstanceLookupFailed";
/// Event reason: an InternalIP the kubelet reported is not forwarded.
pub const MISCONFIGURED_INTERNAL_IP: &str = "MisconfiguredInternalIP";

/// The list of all dedicated servers, as one snapshot.
type Servers = Vec<RobotServer>;

/// The binary's default of [`RobotSettings::power_state_reads_per_hour`]: half of what Robot
/// allows `GET /reset/N` (200 an hour, all servers together), the rest left to other tools of
/// the account.
pub const POWER_STATE_READS_PER_HOUR: u32 = 100;

/// A server whose power state nobody asked for this long is no longer counted against
/// [`POWER_STATE_READS_PER_HOUR`] (its Node Ready again, or gone); the lifecycle controller
/// asks about a NotReady Node every monitor period (5 s by default).
const ASKED_LATELY: Duration = Duration::from_secs(60);

/// The last power state of each server asked about, and when it was last asked for, by
/// server number.
type PowerStates = HashMap<u64, (SnapshotCache<RobotReset, CacheError>, Instant)>;

/// How long a power state is reused when `asked` servers share the budget: the set age, or
/// longer so that `asked` servers stay within `per_hour` reads an hour. Zero stays zero (read
/// on every question, as the official CCM); a zero budget is none.
fn power_state_age(max_age: Duration, asked: usize, per_hour: u32) -> Duration {
    if max_age.is_zero() || per_hour == 0 {
        return max_age;
    }
    let asked = u32::try_from(asked).unwrap_or(u32::MAX);
    let share = (Duration::from_secs(3600) / per_hour).saturating_mul(asked);
    max_age.max(share)
}

/// Dedicated servers through the Robot webservice: cached list, rate-limit guard, uncached
/// power state (see the module docs). Cheap to clone; clones share the cache and the guard.
#[derive(Clone, Default)]
pub struct Robot {
    settings: RobotSettings,
    client: Option<Arc<dyn RobotApi>>,
    servers: SnapshotCache<Servers, CacheError>,
    max_age: Duration,
    /// Until when every call fails at once (set by a rate-limit answer).
    held_until: Arc<Mutex<Option<Instant>>>,
    /// The power states read lately (see [`RobotSettings::power_state_max_age`]).
    power_states: Arc<Mutex<PowerStates>>,
    refresh_deadline: Duration,
}

impl std::fmt::Debug for Robot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Robot")
            .field("settings", &self.settings)
            .field("client", &self.client.is_some())
            .field("servers", &self.servers)
            .field("max_age", &self.max_age)
            .finish()
    }
}

impl Robot {
    /// Robot support as `settings` say, through `client` when there is one (none: enabled
    /// without credentials, or disabled), the list kept as `cache` says.
    pub fn new(
        settings: RobotSettings,
        client: Option<Arc<dyn RobotApi>>,
        cache: &CacheConfig,
    ) -> Self {
        Self {
            settings,
            client,
            servers: SnapshotCache::with_deadline(cache.refresh_deadline, CacheError::Deadline),
            max_age: cache.robot_max_age,
            held_until: Arc::default(),
            power_states: Arc::default(),
            refresh_deadline: cache.refresh_deadline,
        }
    }

    /// `ROBOT_ENABLED`.
    pub fn enabled(&self) -> bool {
        self.settings.enabled
    }

    /// Enabled and with a client: Robot can be asked.
    pub fn has_client(&self) -> bool {
        self.settings.enabled && self.client.is_some()
    }

    /// The settings.
    pub fn settings(&self) -> &RobotSettings {
        &self.settings
    }

    fn client(&self) -> Result<&Arc<dyn RobotApi>, CacheError> {
        match &self.client {
            Some(client) if self.settings.enabled => Ok(client),
            _ => Err(CacheError::RobotNotConfigured),
        }
    }

    /// Fails at once while the rate-limit guard holds calls back.
    fn guard(&self) -> Result<(), CacheError> {
        let held = *self.held_until.lock();
        match held {
            Some(until) if Instant::now() < until => {
                let left = until.saturating_duration_since(Instant::now());
                let at = chrono::Utc::now()
                    + chrono::Duration::from_std(left).unwrap_or(chrono::Duration::zero());
                Err(CacheError::RobotRateLimited {
                    next_try: at.to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
                    retry_in: left,
                })
            }
            _ => Ok(()),
        }
    }

    /// Note a failed call: a rate-limit answer holds every call back for the wait time.
    fn note<T>(&self, result: Result<T, CacheError>) -> Result<T, CacheError> {
        if let Err(CacheError::Api(err)) = &result
            && err.robot().is_some_and(|e| e.is_rate_limited())
            && !self.settings.rate_limit_wait_time.is_zero()
        {
            let until = Instant::now() + self.settings.rate_limit_wait_time;
            *self.held_until.lock() = Some(until);
            tracing::warn!(
                wait = ?self.settings.rate_limit_wait_time,
                "the Robot webservice's rate limit is exceeded; no Robot call until the wait time (ROBOT_RATE_LIMIT_WAIT_TIME) is over"
            );
        }
        result
    }

    /// Now, in the list cache's history (see [`Robot::servers_after`]).
    pub(crate) fn moment(&self) -> Moment {
        self.servers.moment()
    }

    /// Every dedicated server, from a list younger than the cache age (one shared `GET
    /// /server` when there is none).
    pub(crate) async fn servers(&self) -> Result<Snapshot<Servers>, CacheError> {
        self.guard()?;
        let client = self.client()?.clone();
        let listed = self
            .servers
            .get(self.max_age, move || async move {
                client.servers().await.map_err(CacheError::from)
            })
            .await;
        self.note(listed)
    }

    /// Every dedicated server, from a list whose request went out after `since`: what Robot
    /// says now, for answers that delete a Node.
    pub(crate) async fn servers_after(
        &self,
        since: Moment,
    ) -> Result<Snapshot<Servers>, CacheError> {
        // The cached list, then a refresh under way (it may have started before `since`),
        // then one that surely started after it.
        for _ in 0..3 {
            let listed = self.servers().await?;
            if listed.is_after(since) {
                return Ok(listed);
            }
            self.servers.mark_outdated(since);
        }
        Err(CacheError::Deadline(self.max_age))
    }

    /// The server numbered `number`, from the cached list (a miss does not refresh it).
    pub(crate) async fn by_number(&self, number: u64) -> Result<Option<RobotServer>, CacheError> {
        Ok(find_number(&self.servers().await?, number).cloned())
    }

    /// The server named `name` (the last of several, as upstream), from the cached list.
    pub(crate) async fn by_name(&self, name: &str) -> Result<Option<RobotServer>, CacheError> {
        Ok(find_name(&self.servers().await?, name).cloned())
    }

    /// The power state of server `number`: the last one read when it is younger than
    /// [`RobotSettings::power_state_max_age`], else read from Robot (one read for concurrent
    /// questions).
    pub(crate) async fn reset(&self, number: u64) -> Result<RobotReset, CacheError> {
        self.guard()?;
        let client = self.client()?.clone();
        let (state, max_age) = {
            let mut states = self.power_states.lock();
            let now = Instant::now();
            let max_age = self.settings.power_state_max_age;
            // Only the servers still asked about are kept and share the budget: one no longer
            // asked about (its Node Ready again, or gone) is forgotten.
            let lately = ASKED_LATELY.max(max_age);
            states.retain(|_, (state, asked)| {
                state.is_refreshing() || now.saturating_duration_since(*asked) <= lately
            });
            let (state, asked) = states.entry(number).or_insert_with(|| {
                (
                    SnapshotCache::with_deadline(self.refresh_deadline, CacheError::Deadline),
                    now,
                )
            });
            *asked = now;
            let state = state.clone();
            let per_hour = self.settings.power_state_reads_per_hour;
            (state, power_state_age(max_age, states.len(), per_hour))
        };
        let read = state
            .get(max_age, move || async move {
                client.reset(number).await.map_err(CacheError::from)
            })
            .await
            .map(|snapshot| (*snapshot).clone());
        self.note(read)
    }
}

/// The server numbered `number` in `servers`.
pub(crate) fn find_number(servers: &[RobotServer], number: u64) -> Option<&RobotServer> {
    servers.iter().find(|s| s.server_number == number)
}

/// The last server named `name` in `servers`.
pub(crate) fn find_name<'a>(servers: &'a [RobotServer], name: &str) -> Option<&'a RobotServer> {
    servers.iter().rev().find(|s| s.server_name == name)
}

/// The server number of a Robot providerID (`hrobot://N`, legacy `hcloud://bm-N`).
pub(crate) fn robot_number(node: &Node) -> Option<u64> {
    let provider_id = node.spec.as_ref()?.provider_id.as_deref()?;
    match ProviderId::parse(provider_id) {
        Ok(ProviderId::Robot(number)) => u64::try_from(number).ok(),
        _ => None,
    }
}

/// The instance type label of a dedicated server: its product with spaces as `-`, every
/// character outside `[A-Za-z0-9_.-]` left out (`Server Auction` -> `Server-Auction`).
pub fn robot_instance_type(product: &str) -> String {
    product
        .chars()
        .map(|c| if c == ' ' { '-' } else { c })
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        .collect()
}

/// Zone and region of a dedicated server: the data centre in lower case (`fsn1-dc14`) and
/// its part before the first `-` (`fsn1`).
pub fn robot_zone_and_region(dc: &str) -> (String, String) {
    let zone = dc.to_lowercase();
    let region = zone.split('-').next().unwrap_or_default().to_owned();
    (zone, region)
}

/// A Warning the addresses of a Robot Node give (reason [`MISCONFIGURED_INTERNAL_IP`]).
pub type AddressWarning = String;

/// The addresses of a Robot Node in the official order: Hostname (the Robot name), the
/// ExternalIPs of `family` (IPv6 `<net>1` before IPv4, unlike cloud servers), then, when
/// `forward_internal_ips`, the InternalIPs the kubelet reported that fit the family and are
/// no address already listed. Each InternalIP left out gives a Warning.
pub fn robot_node_addresses(
    server: &RobotServer,
    family: AddressFamily,
    forward_internal_ips: bool,
    node: &Node,
) -> (Vec<NodeAddress>, Vec<AddressWarning>) {
    let address = |type_: &str, address: String| NodeAddress {
        type_: type_.to_owned(),
        address,
    };
    let mut out = vec![address(HOSTNAME, server.server_name.clone())];
    if family.includes_ipv6() {
        // Robot gives the network (`2a01:4f8:1:2::`); its first host is the text plus "1".
        out.push(address(EXTERNAL_IP, format!("{}1", server.server_ipv6_net)));
    }
    if family.includes_ipv4() {
        out.push(address(EXTERNAL_IP, server.server_ip.clone()));
    }
    let mut warnings = Vec::new();
    if !forward_internal_ips {
        return (out, warnings);
    }
    let reported = node
        .status
        .iter()
        .flat_map(|s| s.addresses.iter().flatten())
        .filter(|a| a.type_ == INTERNAL_IP);
    for internal in reported {
        let ip = &internal.address;
        // Anything that is not IPv4 counts as IPv6, as upstream.
        let is_v4 = matches!(ip.parse::<IpAddr>(), Ok(IpAddr::V4(_)));
        let wrong_family = match family {
            AddressFamily::Ipv6 if is_v4 => Some(("IPv4", "IPv6")),
            AddressFamily::Ipv4 if !is_v4 => Some(("IPv6", "IPv4")),
            _ => None,
        };
        if let Some((is, only)) = wrong_family {
            warnings.push(format!(
                "The InternalIP {ip} is an {is} address but only {only} is configured (HCLOUD_INSTANCES_ADDRESS_FAMILY): it is not kept as an InternalIP"
            ));
        } else if out.iter().any(|a| a.address == *ip) {
            warnings.push(format!(
                "The InternalIP {ip} is already an address of the Node (an ExternalIP): it is not kept as an InternalIP"
            ));
        } else {
            out.push(internal.clone());
        }
    }
    (out, warnings)
}

/// Everything the node controller sets for a Robot Node (the providerID in the form
/// `settings` ask for), and the Warnings its addresses give.
pub fn robot_instance_metadata(
    server: &RobotServer,
    family: AddressFamily,
    settings: &RobotSettings,
    node: &Node,
) -> (InstanceMetadata, Vec<AddressWarning>) {
    let (node_addresses, warnings) =
        robot_node_addresses(server, family, settings.forward_internal_ips, node);
    let (zone, region) = robot_zone_and_region(&server.dc);
    let number = i64::try_from(server.server_number).unwrap_or(i64::MAX);
    let metadata = InstanceMetadata {
        provider_id: ProviderId::Robot(number).written(settings.legacy_provider_id),
        instance_type: robot_instance_type(&server.product),
        node_addresses,
        zone,
        region,
        additional_labels: BTreeMap::from([(PROVIDED_BY_LABEL.to_owned(), "robot".to_owned())]),
        warnings: Vec::new(),
    };
    (metadata, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::address_pairs;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use hcloud_api::robot::{RobotApiError, RobotErrorCode};
    use serde_json::json;

    fn server() -> RobotServer {
        RobotServer {
            server_number: 321,
            server_name: "dedi-1".into(),
            server_ip: "198.51.100.7".into(),
            server_ipv6_net: "2a01:4f8:111:4221::".into(),
            product: "Server Auction".into(),
            dc: "FSN1-DC14".into(),
        }
    }

    fn node(internal: &[&str]) -> Node {
        let addresses: Vec<_> = internal
            .iter()
            .map(|ip| json!({"type": "InternalIP", "address": ip}))
            .chain([json!({"type": "Hostname", "address": "dedi-1"})])
            .collect();
        serde_json::from_value(json!({
            "metadata": {"name": "dedi-1"},
            "status": {"addresses": addresses},
        }))
        .unwrap()
    }

    #[test]
    fn instance_types_zones_and_regions() {
        for (product, want) in [
            ("EX44", "EX44"),
            ("Server Auction", "Server-Auction"),
            ("Robot Server™ 1", "Robot-Server-1"),
            (" AX 41-NVMe ", "-AX-41-NVMe-"),
            ("", ""),
        ] {
            assert_eq!(robot_instance_type(product), want, "{product:?}");
        }
        for (dc, zone, region) in [
            ("FSN1-DC14", "fsn1-dc14", "fsn1"),
            ("NBG1-DC1", "nbg1-dc1", "nbg1"),
            ("HEL1", "hel1", "hel1"),
            ("", "", ""),
        ] {
            assert_eq!(
                robot_zone_and_region(dc),
                (zone.to_owned(), region.to_owned())
            );
        }
    }

    #[test]
    fn addresses_in_the_official_order_with_forwarded_internal_ips() {
        type Case = (
            AddressFamily,
            bool,
            &'static [&'static str],
            Vec<(&'static str, &'static str)>,
            usize,
        );
        let cases: Vec<Case> = vec![
            (
                AddressFamily::Ipv4,
                true,
                &["10.1.0.5"],
                vec![
                    ("Hostname", "dedi-1"),
                    ("ExternalIP", "198.51.100.7"),
                    ("InternalIP", "10.1.0.5"),
                ],
                0,
            ),
            (
                AddressFamily::DualStack,
                true,
                &["10.1.0.5", "fd00::5"],
                vec![
                    ("Hostname", "dedi-1"),
                    ("ExternalIP", "2a01:4f8:111:4221::1"),
                    ("ExternalIP", "198.51.100.7"),
                    ("InternalIP", "10.1.0.5"),
                    ("InternalIP", "fd00::5"),
                ],
                0,
            ),
            // Wrong family, an ExternalIP again, a duplicate: each left out with a Warning.
            (
                AddressFamily::Ipv4,
                true,
                &["fd00::5", "198.51.100.7", "10.1.0.5", "10.1.0.5", "garbage"],
                vec![
                    ("Hostname", "dedi-1"),
                    ("ExternalIP", "198.51.100.7"),
                    ("InternalIP", "10.1.0.5"),
                ],
                4,
            ),
            (
                AddressFamily::Ipv6,
                true,
                &["10.1.0.5", "fd00::5"],
                vec![
                    ("Hostname", "dedi-1"),
                    ("ExternalIP", "2a01:4f8:111:4221::1"),
                    ("InternalIP", "fd00::5"),
                ],
                1,
            ),
            // Forwarding off: the kubelet's InternalIPs are dropped silently.
            (
                AddressFamily::Ipv4,
                false,
                &["10.1.0.5", "fd00::5"],
                vec![("Hostname", "dedi-1"), ("ExternalIP", "198.51.100.7")],
                0,
            ),
        ];
        for (family, forward, internal, want, warnings) in cases {
            let (got, warned) = robot_node_addresses(&server(), family, forward, &node(internal));
            assert_eq!(address_pairs(&got), want, "{family:?} {internal:?}");
            assert_eq!(
                warned.len(),
                warnings,
                "{family:?} {internal:?}: {warned:?}"
            );
        }
        // No emptiness check, as upstream: missing fields give "" and "1".
        let bare = RobotServer {
            server_number: 1,
            ..RobotServer::default()
        };
        let (got, _) = robot_node_addresses(&bare, AddressFamily::DualStack, false, &node(&[]));
        assert_eq!(
            address_pairs(&got),
            vec![("Hostname", ""), ("ExternalIP", "1"), ("ExternalIP", "")]
        );
    }

    #[test]
    fn warnings_name_the_address_and_the_reason() {
        let (_, warned) =
            robot_node_addresses(&server(), AddressFamily::Ipv6, true, &node(&["10.1.0.5"]));
        assert!(
            warned[0].contains("10.1.0.5") && warned[0].contains("IPv4"),
            "{warned:?}"
        );
        let (_, warned) = robot_node_addresses(
            &server(),
            AddressFamily::Ipv4,
            true,
            &node(&["198.51.100.7"]),
        );
        assert!(warned[0].contains("ExternalIP"), "{warned:?}");
    }

    #[test]
    fn metadata_of_a_dedicated_server() {
        let settings = RobotSettings::default();
        let (m, _) = robot_instance_metadata(&server(), AddressFamily::Ipv4, &settings, &node(&[]));
        assert_eq!(m.provider_id, "hrobot://321");
        assert_eq!(m.instance_type, "Server-Auction");
        assert_eq!((m.zone.as_str(), m.region.as_str()), ("fsn1-dc14", "fsn1"));
        assert_eq!(m.additional_labels[PROVIDED_BY_LABEL], "robot");
        // ROBOT_USE_LEGACY_PROVIDER_ID: the form Cluster API's Hetzner provider expects.
        let legacy = RobotSettings {
            legacy_provider_id: true,
            ..settings
        };
        let (m, _) = robot_instance_metadata(&server(), AddressFamily::Ipv4, &legacy, &node(&[]));
        assert_eq!(m.provider_id, "hcloud://bm-321");
    }

    #[test]
    fn robot_numbers_come_from_both_providerid_forms() {
        let with = |id: &str| -> Node {
            serde_json::from_value(json!({"metadata": {"name": "n"}, "spec": {"providerID": id}}))
                .unwrap()
        };
        assert_eq!(robot_number(&with("hrobot://7")), Some(7));
        assert_eq!(robot_number(&with("hcloud://bm-8")), Some(8));
        assert_eq!(robot_number(&with("hcloud://9")), None);
        assert_eq!(robot_number(&with("hrobot://x")), None);
        assert_eq!(robot_number(&Node::default()), None);
    }

    /// A fake Robot counting its calls; `fail` makes the next listings fail with that code.
    #[derive(Default)]
    struct Fake {
        servers: Mutex<Vec<RobotServer>>,
        lists: AtomicUsize,
        resets: AtomicUsize,
        fail: Mutex<Option<(u16, &'static str)>>,
    }

    fn robot_error(status: u16, code: &str) -> hcloud_api::Error {
        hcloud_api::Error::Robot(Box::new(RobotApiError {
            status,
            code: RobotErrorCode::from(code),
            message: String::new(),
            method: "GET".into(),
            path: "/server".into(),
        }))
    }

    #[async_trait]
    impl RobotApi for Fake {
        async fn servers(&self) -> Result<Vec<RobotServer>, hcloud_api::Error> {
            self.lists.fetch_add(1, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
            match *self.fail.lock() {
                Some((status, code)) => Err(robot_error(status, code)),
                None => Ok(self.servers.lock().clone()),
            }
        }

        async fn reset(&self, _: u64) -> Result<RobotReset, hcloud_api::Error> {
            self.resets.fetch_add(1, Ordering::SeqCst);
            Ok(RobotReset {
                operating_status: "running".into(),
            })
        }
    }

    fn robot(fake: &Arc<Fake>, wait: Duration) -> Robot {
        let settings = RobotSettings {
            enabled: true,
            forward_internal_ips: true,
            rate_limit_wait_time: wait,
            power_state_max_age: Duration::from_secs(60),
            power_state_reads_per_hour: POWER_STATE_READS_PER_HOUR,
            legacy_provider_id: false,
        };
        let cache = CacheConfig {
            robot_max_age: Duration::from_secs(60),
            ..CacheConfig::default()
        };
        Robot::new(settings, Some(fake.clone()), &cache)
    }

    /// A Robot (rate-limit wait `wait`) whose fake account has [`server`].
    fn with_one_server(wait: Duration) -> (Arc<Fake>, Robot) {
        let fake = Arc::new(Fake::default());
        fake.servers.lock().push(server());
        let robot = robot(&fake, wait);
        (fake, robot)
    }

    #[tokio::test(start_paused = true)]
    async fn a_burst_costs_one_listing_and_a_miss_does_not_refresh() {
        let (fake, robot) = with_one_server(Duration::ZERO);
        let lookups = (0..50).map(|i| {
            let robot = robot.clone();
            async move { robot.by_number(if i == 0 { 999 } else { 321 }).await }
        });
        let found = futures::future::join_all(lookups).await;
        assert_eq!(fake.lists.load(Ordering::SeqCst), 1);
        assert!(found[0].as_ref().unwrap().is_none());
        assert!(found[1..].iter().all(|f| f.as_ref().unwrap().is_some()));
        assert!(robot.by_name("nobody").await.unwrap().is_none());
        assert_eq!(fake.lists.load(Ordering::SeqCst), 1, "a miss does not list");
        // Once older than the age, the next lookup lists again.
        tokio::time::advance(Duration::from_secs(60)).await;
        robot.by_number(321).await.unwrap();
        assert_eq!(fake.lists.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_failed_refresh_serves_no_stale_list() {
        let (fake, robot) = with_one_server(Duration::ZERO);
        assert!(robot.by_number(321).await.unwrap().is_some());
        tokio::time::advance(Duration::from_secs(60)).await;
        *fake.fail.lock() = Some((500, "INTERNAL_ERROR"));
        assert!(robot.by_number(321).await.is_err());
        // The next call tries again (no hold without a rate limit).
        *fake.fail.lock() = None;
        assert!(robot.by_number(321).await.unwrap().is_some());
        assert_eq!(fake.lists.load(Ordering::SeqCst), 3);
    }

    #[tokio::test(start_paused = true)]
    async fn the_rate_limit_holds_every_call_back_for_the_wait_time() {
        let (fake, robot) = with_one_server(Duration::from_secs(300));
        tokio::time::advance(Duration::from_secs(1)).await;
        *fake.fail.lock() = Some((403, "RATE_LIMIT_EXCEEDED"));
        assert!(robot.servers().await.is_err());
        *fake.fail.lock() = None;
        // Held back without asking Robot: lists and resets alike.
        let held = robot.by_number(321).await.unwrap_err();
        assert!(
            held.to_string()
                .starts_with("rate limit exceeded, next try at"),
            "{held}"
        );
        assert!(robot.reset(321).await.is_err());
        assert_eq!(fake.lists.load(Ordering::SeqCst), 1);
        assert_eq!(fake.resets.load(Ordering::SeqCst), 0);
        tokio::time::advance(Duration::from_secs(300)).await;
        assert!(robot.by_number(321).await.unwrap().is_some());
        assert!(robot.reset(321).await.is_ok());
        // A bare 403 counts as the rate limit too; with wait time 0 nothing is held back.
        let unguarded = self::robot(&fake, Duration::ZERO);
        *fake.fail.lock() = Some((403, ""));
        assert!(unguarded.servers().await.is_err());
        *fake.fail.lock() = None;
        assert!(unguarded.servers().await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn a_confirmation_reads_a_list_made_after_the_question() {
        let (fake, robot) = with_one_server(Duration::ZERO);
        assert!(robot.by_number(321).await.unwrap().is_some());
        fake.servers.lock().clear();
        let since = robot.moment();
        let listed = robot.servers_after(since).await.unwrap();
        assert!(listed.is_empty());
        assert_eq!(fake.lists.load(Ordering::SeqCst), 2);
        // The new list answers the next lookups.
        assert!(robot.by_number(321).await.unwrap().is_none());
        assert_eq!(fake.lists.load(Ordering::SeqCst), 2);
    }

    #[tokio::test(start_paused = true)]
    async fn a_power_state_is_read_once_per_max_age_and_shared() {
        let (fake, robot) = with_one_server(Duration::ZERO);
        // Concurrent questions share one read; within the age the answer is reused.
        let answers = futures::future::join_all((0..5).map(|_| robot.reset(321))).await;
        assert!(
            answers
                .iter()
                .all(|a| a.as_ref().unwrap().operating_status == "running")
        );
        for _ in 0..10 {
            tokio::time::advance(Duration::from_secs(5)).await;
            robot.reset(321).await.unwrap();
        }
        assert_eq!(fake.resets.load(Ordering::SeqCst), 1, "50 s: one read");
        tokio::time::advance(Duration::from_secs(10)).await;
        robot.reset(321).await.unwrap();
        assert_eq!(
            fake.resets.load(Ordering::SeqCst),
            2,
            "a minute on: read again"
        );
        // Each server has its own.
        robot.reset(322).await.unwrap();
        assert_eq!(fake.resets.load(Ordering::SeqCst), 3);
        // Zero: read on every question.
        let every = Robot::new(
            RobotSettings {
                power_state_max_age: Duration::ZERO,
                ..robot.settings().clone()
            },
            Some(fake.clone()),
            &CacheConfig::default(),
        );
        every.reset(321).await.unwrap();
        every.reset(321).await.unwrap();
        assert_eq!(fake.resets.load(Ordering::SeqCst), 5);
    }

    #[test]
    fn the_power_state_age_grows_with_the_servers_asked_about() {
        let minute = Duration::from_secs(60);
        let age = |max_age, asked| power_state_age(max_age, asked, 100);
        assert_eq!(age(minute, 1), minute);
        assert_eq!(age(minute, 2), Duration::from_secs(72));
        assert_eq!(age(minute, 10), Duration::from_secs(360));
        assert_eq!(age(Duration::from_secs(600), 10), Duration::from_secs(600));
        assert_eq!(age(Duration::ZERO, 10), Duration::ZERO);
        // No budget: the set age.
        assert_eq!(power_state_age(minute, 10, 0), minute);
    }

    #[tokio::test(start_paused = true)]
    async fn ten_servers_asked_about_every_5_s_for_an_hour_share_the_budget() {
        let (fake, robot) = with_one_server(Duration::ZERO);
        // The lifecycle controller's checks of 10 NotReady dedicated Nodes, every 5 s.
        for _ in 0..720 {
            for number in 1..=10 {
                robot.reset(number).await.unwrap();
            }
            tokio::time::advance(Duration::from_secs(5)).await;
        }
        let reads = fake.resets.load(Ordering::SeqCst) as u64;
        // The first round reads all ten at once; from then on the budget holds.
        assert!(
            reads <= u64::from(POWER_STATE_READS_PER_HOUR) + 10,
            "{reads} reads in an hour"
        );
        assert!(
            reads >= 90,
            "each server is still read every few minutes: {reads}"
        );
        // One server alone is read at its set age again once the others are no longer asked
        // about.
        tokio::time::advance(ASKED_LATELY + Duration::from_secs(360)).await;
        let before = fake.resets.load(Ordering::SeqCst);
        // 2 min, one read a minute (the first at once: the old state was forgotten).
        for _ in 0..24 {
            robot.reset(1).await.unwrap();
            tokio::time::advance(Duration::from_secs(5)).await;
        }
        assert_eq!(fake.resets.load(Ordering::SeqCst) - before, 2);
    }

    #[tokio::test]
    async fn without_a_client_nothing_is_asked() {
        let off = Robot::default();
        assert!(!off.enabled() && !off.has_client());
        assert!(matches!(
            off.servers().await,
            Err(CacheError::RobotNotConfigured)
        ));
    }
}
