use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cloud_provider::provider::{self, Route, Routes};
use cloud_provider::route::{CONTROLLER, RouteController, RouteControllerConfig, RouteMetrics};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition};

use crate::Env;
use crate::support::*;

const WAIT: Duration = Duration::from_secs(30);
const PERIOD: Duration = Duration::from_millis(300);
const CLUSTER: &str = "test-cluster";

/// How `create_route` fails for one Node.
#[derive(Clone, Debug)]
enum CreateFailure {
    /// A plain cloud API error, every time.
    Api(String),
    /// `Error::Retry` this many times, then success.
    RetryTimes(usize),
    /// `Error::Retry` every time.
    RetryAlways,
}

#[derive(Debug, Default)]
struct RouteState {
    routes: Vec<Route>,
    fail_list: bool,
    /// Stored routes report `enable_node_addresses` (the provider keys routes by addresses).
    keys_addresses: bool,
    failures: HashMap<String, CreateFailure>,
    /// The next this many deletions fail (a 503 of the cloud).
    failing_deletes: usize,
    lists: usize,
    creates: Vec<(String, Route)>,
    deletes: Vec<Route>,
}

/// An in-memory cloud route table.
#[derive(Debug, Default)]
struct FakeRoutes {
    state: Mutex<RouteState>,
}

impl FakeRoutes {
    fn with_routes(routes: Vec<Route>) -> Arc<Self> {
        let fake = Self::default();
        fake.state.lock().routes = routes;
        Arc::new(fake)
    }

    /// An empty table whose creations for `node` fail with `message`.
    fn failing(node: &str, message: &str) -> Arc<Self> {
        let fake = Self::with_routes(vec![]);
        fake.fail(node, message);
        fake
    }

    /// From now on creations for `node` fail with `message`.
    fn fail(&self, node: &str, message: &str) {
        self.state()
            .failures
            .insert(node.into(), CreateFailure::Api(message.into()));
    }

    fn state(&self) -> parking_lot::MutexGuard<'_, RouteState> {
        self.state.lock()
    }

    /// (target, CIDR) of every stored route, sorted.
    fn table(&self) -> Vec<(String, String)> {
        let mut table: Vec<_> = self
            .state()
            .routes
            .iter()
            .map(|r| (r.target_node.clone(), r.destination_cidr.to_string()))
            .collect();
        table.sort();
        table
    }

    fn creates_for(&self, node: &str) -> Vec<(String, Route)> {
        self.state()
            .creates
            .iter()
            .filter(|(_, r)| r.target_node == node)
            .cloned()
            .collect()
    }
}

#[async_trait]
impl Routes for FakeRoutes {
    async fn list_routes(&self, cluster_name: &str) -> provider::Result<Vec<Route>> {
        assert_eq!(cluster_name, CLUSTER);
        let mut state = self.state();
        state.lists += 1;
        if state.fail_list {
            return Err(provider::Error::api_msg("list routes: 503"));
        }
        Ok(state.routes.clone())
    }

    async fn create_route(
        &self,
        cluster_name: &str,
        name_hint: &str,
        route: &Route,
    ) -> provider::Result<()> {
        assert_eq!(cluster_name, CLUSTER);
        let mut state = self.state();
        state.creates.push((name_hint.to_owned(), route.clone()));
        match state.failures.get_mut(&route.target_node) {
            // As the real provider answers a route the world outside must fix (a server not
            // attached, a full network): refused for now, backed off.
            Some(CreateFailure::Api(message)) => {
                return Err(provider::Error::rejected(message.clone()));
            }
            Some(CreateFailure::RetryAlways) => {
                return Err(provider::Error::retry(
                    "route table locked",
                    Duration::from_millis(20),
                ));
            }
            Some(CreateFailure::RetryTimes(left)) if *left > 0 => {
                *left -= 1;
                return Err(provider::Error::retry(
                    "route table locked",
                    Duration::from_millis(20),
                ));
            }
            _ => {}
        }
        // Like a real route table: one route per destination.
        if state
            .routes
            .iter()
            .any(|r| r.destination_cidr == route.destination_cidr)
        {
            return Err(provider::Error::api_msg("route already exists"));
        }
        let stored = Route {
            name: format!("route-{name_hint}-{}", route.destination_cidr),
            enable_node_addresses: state.keys_addresses,
            ..route.clone()
        };
        state.routes.push(stored);
        Ok(())
    }

    async fn delete_route(&self, cluster_name: &str, route: &Route) -> provider::Result<()> {
        assert_eq!(cluster_name, CLUSTER);
        // A cloud call takes a while: creations running alongside would see the route.
        tokio::time::sleep(Duration::from_millis(50)).await;
        let mut state = self.state();
        state.deletes.push(route.clone());
        if state.failing_deletes > 0 {
            state.failing_deletes -= 1;
            return Err(provider::Error::api_msg("delete route: 503"));
        }
        let before = state.routes.len();
        state.routes.retain(|r| r != route);
        if state.routes.len() == before {
            return Err(provider::Error::api_msg("route not found"));
        }
        Ok(())
    }
}

fn net(s: &str) -> IpNet {
    s.parse().unwrap()
}

fn route(target: &str, cidr: &str) -> Route {
    Route {
        name: format!("seeded-{target}-{cidr}"),
        target_node: target.into(),
        target_provider_id: String::new(),
        destination_cidr: net(cidr),
        blackhole: false,
        enable_node_addresses: false,
        target_node_addresses: vec![],
    }
}

fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut v: Vec<_> = list
        .iter()
        .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
        .collect();
    v.sort();
    v
}

fn start_controller(env: &Env, routes: Arc<FakeRoutes>, period: Duration) -> RouteMetrics {
    start_controller_with(
        env,
        routes,
        RouteControllerConfig {
            reconciliation_period: period,
            ..config()
        },
    )
}

fn config() -> RouteControllerConfig {
    RouteControllerConfig {
        cluster_name: CLUSTER.into(),
        cluster_cidrs: vec![net("10.244.0.0/16")],
        ..RouteControllerConfig::default()
    }
}

/// Passes every `period`; a failed creation tried again after at most `max`.
fn backing_off(period: Duration, max: Duration) -> RouteControllerConfig {
    RouteControllerConfig {
        reconciliation_period: period,
        create_backoff_max: max,
        ..config()
    }
}

fn start_controller_with(
    env: &Env,
    routes: Arc<FakeRoutes>,
    config: RouteControllerConfig,
) -> RouteMetrics {
    let route_metrics = RouteMetrics::new();
    let controller = RouteController::new(
        env.client.clone(),
        env.cache.clone(),
        routes,
        env.metrics.clone(),
        config,
    )
    .with_route_metrics(route_metrics.clone());
    tokio::spawn(controller.run(env.shutdown.clone()));
    route_metrics
}

fn condition(node: &Node, type_: &str) -> Option<NodeCondition> {
    node.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == type_)
        .cloned()
}

/// Wait until Node `name` has `NetworkUnavailable` with this status and reason.
async fn wait_network(env: &Env, name: &str, status: &str, reason: &str) -> NodeCondition {
    eventually(
        &format!("{name}: NetworkUnavailable={status}/{reason}"),
        WAIT,
        || async {
            let node = get_node(&env.client, name).await?;
            let c = condition(&node, "NetworkUnavailable")?;
            (c.status == status && c.reason.as_deref() == Some(reason)).then_some(c)
        },
    )
    .await
}

/// Wait until the fake's table is `want`: deletions of a pass may still run when a Node's
/// condition is written.
async fn wait_table(fake: &FakeRoutes, want: Vec<(String, String)>) {
    eventually("route table", WAIT, || async {
        (fake.table() == want).then_some(())
    })
    .await;
}

/// Wait for `count` more reconcile passes than now.
async fn wait_passes(metrics: &RouteMetrics, count: u64) {
    let target = metrics.route_sync_count() + count;
    eventually("more reconcile passes", WAIT, || async {
        (metrics.route_sync_count() >= target).then_some(())
    })
    .await;
}

async fn create_nodes(env: &Env, builders: Vec<NodeBuilder>) -> Vec<Node> {
    let mut nodes = Vec::new();
    for b in builders {
        nodes.push(b.create(env).await);
    }
    for node in &nodes {
        env.wait_cached(node).await;
    }
    nodes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn creates_routes_and_marks_the_network_available_keeping_other_conditions() {
    let env = Env::start().await;
    let a = &*env.name("a");
    let b = &*env.name("b");
    let no_cidr = &*env.name("no-cidr");
    let a_addresses: Vec<NodeAddress> = vec![addr("InternalIP", "10.0.0.1"), addr("Hostname", a)];
    let nodes = create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(a)
                .untainted()
                .pod_cidrs(&["10.244.1.0/24"])
                .addresses(a_addresses.clone())
                .ready("True"),
            NodeBuilder::kubelet(b)
                .untainted()
                .pod_cidrs(&["10.244.2.0/24"])
                .ready("True"),
            NodeBuilder::kubelet(no_cidr).untainted().ready("True"),
        ],
    )
    .await;
    let fake = FakeRoutes::with_routes(vec![]);
    let metrics = start_controller(&env, fake.clone(), PERIOD);

    let c = wait_network(&env, a, "False", "RouteCreated").await;
    assert_eq!(
        c.message.as_deref(),
        Some("RouteController created a route")
    );
    assert!(c.last_transition_time.is_some() && c.last_heartbeat_time.is_some());
    wait_network(&env, b, "False", "RouteCreated").await;
    assert_eq!(
        fake.table(),
        pairs(&[(a, "10.244.1.0/24"), (b, "10.244.2.0/24")])
    );

    let creates = fake.creates_for(a);
    assert_eq!(creates.len(), 1, "{creates:?}");
    let (hint, created) = &creates[0];
    assert_eq!(
        Some(hint),
        nodes[0].metadata.uid.as_ref(),
        "name hint = node UID"
    );
    assert_eq!(created.destination_cidr, net("10.244.1.0/24"));
    assert_eq!(created.target_node_addresses, a_addresses);
    assert!(!created.blackhole);

    // The strategic merge patch keyed by type leaves the kubelet's Ready condition alone.
    for name in [a, b] {
        let node = get_node(&env.client, name).await.unwrap();
        let ready = condition(&node, "Ready").expect("Ready survives");
        assert_eq!(ready.status, "True");
        assert_eq!(ready.reason.as_deref(), Some("KubeletStatus"));
        assert_eq!(node.status.unwrap().conditions.unwrap().len(), 2);
    }

    // Steady state: nothing is created or deleted again, and a Node with neither pod CIDRs nor
    // routes never gets the condition.
    wait_passes(&metrics, 3).await;
    assert_eq!(fake.state().creates.len(), 2);
    assert!(fake.state().deletes.is_empty());
    let no_cidr = get_node(&env.client, no_cidr).await.unwrap();
    assert!(condition(&no_cidr, "NetworkUnavailable").is_none());
    assert!(condition(&no_cidr, "Ready").is_some());
    assert!(env.metrics.reconcile_count(CONTROLLER) >= 3);
    // The condition is not rewritten while status and reason match.
    let again = wait_network(&env, a, "False", "RouteCreated").await;
    assert_eq!(again.last_heartbeat_time, c.last_heartbeat_time);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_stale_owned_routes_and_never_touches_foreign_ones() {
    let env = Env::start().await;
    let a = &*env.name("a");
    let bare = &*env.name("bare");
    create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(a)
                .untainted()
                .pod_cidrs(&["10.244.1.0/24"]),
            NodeBuilder::kubelet(bare).untainted(),
        ],
    )
    .await;
    let blackhole = Route {
        blackhole: true,
        ..route("", "10.244.8.0/24")
    };
    let fake = FakeRoutes::with_routes(vec![
        route(a, "10.244.1.0/24"),
        route("vanished", "10.244.9.0/24"),
        route("vanished", "192.168.0.0/24"),
        route(a, "10.244.7.0/24"),
        route(bare, "10.244.3.0/24"),
        route(a, "10.0.0.0/8"),
        blackhole,
    ]);
    let metrics = start_controller(&env, fake.clone(), PERIOD);

    let foreign = pairs(&[
        (a, "10.0.0.0/8"),
        (a, "10.244.1.0/24"),
        ("vanished", "192.168.0.0/24"),
    ]);
    eventually("stale routes deleted", WAIT, || async {
        (fake.table() == foreign).then_some(())
    })
    .await;
    wait_network(&env, a, "False", "RouteCreated").await;
    // A Node that only has routes (no pod CIDRs) is told its network is unavailable.
    let bare_condition = wait_network(&env, bare, "True", "NoRouteCreated").await;
    assert_eq!(
        bare_condition.message.as_deref(),
        Some("RouteController failed to create a route")
    );

    wait_passes(&metrics, 3).await;
    assert_eq!(fake.table(), foreign);
    let mut deleted: Vec<(String, String)> = fake
        .state()
        .deletes
        .iter()
        .map(|r| (r.target_node.clone(), r.destination_cidr.to_string()))
        .collect();
    deleted.sort();
    assert_eq!(
        deleted,
        pairs(&[
            ("", "10.244.8.0/24"),
            (a, "10.244.7.0/24"),
            (bare, "10.244.3.0/24"),
            ("vanished", "10.244.9.0/24"),
        ]),
        "each stale route deleted once, foreign ones never"
    );
    assert!(
        fake.state().creates.is_empty(),
        "the kept route is not re-created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_node_addresses_replace_the_route_after_deleting_it() {
    let env = Env::start().await;
    let moved = &*env.name("moved");
    let current = vec![addr("InternalIP", "10.0.0.5")];
    create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(moved)
                .untainted()
                .pod_cidrs(&["10.244.4.0/24"])
                .addresses(current.clone()),
        ],
    )
    .await;
    let fake = FakeRoutes::with_routes(vec![Route {
        enable_node_addresses: true,
        target_node_addresses: vec![addr("InternalIP", "10.0.0.99")],
        ..route(moved, "10.244.4.0/24")
    }]);
    fake.state().keys_addresses = true;
    let metrics = start_controller(&env, fake.clone(), PERIOD);

    wait_network(&env, moved, "False", "RouteCreated").await;
    wait_passes(&metrics, 2).await;
    let state = fake.state();
    assert_eq!(state.routes.len(), 1);
    assert_eq!(state.routes[0].target_node_addresses, current);
    // The fake refuses a second route to one destination: the create worked only because the
    // deletion was awaited first. Once replaced, the route is kept.
    assert_eq!(state.deletes.len(), 1);
    assert_eq!(state.creates.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failed_creation_warns_and_marks_the_network_unavailable() {
    let env = Env::start().await;
    let good = &*env.name("good");
    let bad = &*env.name("bad");
    let nodes = create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(good)
                .untainted()
                .pod_cidrs(&["10.244.1.0/24"]),
            NodeBuilder::kubelet(bad)
                .untainted()
                .pod_cidrs(&["10.244.2.0/24"]),
        ],
    )
    .await;
    let fake = FakeRoutes::failing(bad, "quota exceeded");
    let metrics = start_controller_with(&env, fake.clone(), backing_off(PERIOD, 2 * PERIOD));

    wait_network(&env, good, "False", "RouteCreated").await;
    wait_network(&env, bad, "True", "NoRouteCreated").await;
    let warnings = eventually("FailedToCreateRoute event", WAIT, || async {
        let events = events_with_reason(&env.client, bad, "FailedToCreateRoute").await;
        (!events.is_empty()).then_some(events)
    })
    .await;
    let event = &warnings[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(
        event.source.as_ref().and_then(|s| s.component.as_deref()),
        Some("route_controller")
    );
    assert_eq!(event.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(event.involved_object.uid, nodes[1].metadata.uid);
    let message = event.message.as_deref().unwrap_or_default();
    assert!(message.contains("quota exceeded"), "{message}");
    assert!(message.contains("10.244.2.0/24"), "{message}");
    assert!(
        events_with_reason(&env.client, good, "FailedToCreateRoute")
            .await
            .is_empty()
    );
    // A plain error is not retried within the cycle: one call per pass at most, not five;
    // and one event for one reason, however often it is tried.
    wait_passes(&metrics, 5).await;
    let calls = fake.creates_for(bad).len() as u64;
    let passes = fake.state().lists as u64;
    assert!(
        calls > 1 && calls <= passes,
        "{calls} creates in {passes} passes"
    );
    let warnings = events_with_reason(&env.client, bad, "FailedToCreateRoute").await;
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    assert_eq!(warnings[0].count.unwrap_or(1), 1, "{warnings:?}");

    // Recovery: the next pass creates the route and flips the condition.
    fake.state().failures.clear();
    wait_network(&env, bad, "False", "RouteCreated").await;
    assert_eq!(
        fake.table(),
        pairs(&[(bad, "10.244.2.0/24"), (good, "10.244.1.0/24")])
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_route_listing_changes_nothing() {
    let env = Env::start().await;
    let a = &*env.name("a");
    create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(a)
                .untainted()
                .pod_cidrs(&["10.244.1.0/24"]),
        ],
    )
    .await;
    let fake = FakeRoutes::with_routes(vec![route("vanished", "10.244.9.0/24")]);
    fake.state().fail_list = true;
    let metrics = start_controller(&env, fake.clone(), PERIOD);

    wait_passes(&metrics, 4).await;
    assert!(fake.state().lists >= 4);
    assert!(fake.state().deletes.is_empty());
    assert!(fake.state().creates.is_empty());
    assert_eq!(fake.table(), pairs(&[("vanished", "10.244.9.0/24")]));
    let a_node = get_node(&env.client, a).await.unwrap();
    assert!(condition(&a_node, "NetworkUnavailable").is_none());
    assert!(env.metrics.error_count(CONTROLLER, "transient") >= 4);
    // Each failed pass is a retry of the runtime, counted by category.
    assert!(
        env.metrics
            .retry_count(CONTROLLER, cloud_provider::Category::Transient)
            >= 3
    );

    // The same setup acts as soon as listing works.
    fake.state().fail_list = false;
    wait_network(&env, a, "False", "RouteCreated").await;
    wait_table(&fake, pairs(&[(a, "10.244.1.0/24")])).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_conflict_like_create_errors_are_retried_within_one_pass() {
    let env = Env::start().await;
    let flaky = &*env.name("flaky");
    let locked = &*env.name("locked");
    let broken = &*env.name("broken");
    create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(flaky)
                .untainted()
                .pod_cidrs(&["10.244.1.0/24"]),
            NodeBuilder::kubelet(locked)
                .untainted()
                .pod_cidrs(&["10.244.2.0/24"]),
            NodeBuilder::kubelet(broken)
                .untainted()
                .pod_cidrs(&["10.244.3.0/24"]),
        ],
    )
    .await;
    let fake = FakeRoutes::with_routes(vec![]);
    {
        let mut state = fake.state();
        state
            .failures
            .insert(flaky.into(), CreateFailure::RetryTimes(2));
        state
            .failures
            .insert(locked.into(), CreateFailure::RetryAlways);
        state
            .failures
            .insert(broken.into(), CreateFailure::Api("boom".into()));
    }
    // One pass only: the next is an hour away.
    let metrics = start_controller(&env, fake.clone(), Duration::from_secs(3600));

    wait_network(&env, flaky, "False", "RouteCreated").await;
    wait_network(&env, locked, "True", "NoRouteCreated").await;
    wait_network(&env, broken, "True", "NoRouteCreated").await;
    assert_eq!(metrics.route_sync_count(), 1);
    assert_eq!(fake.state().lists, 1);
    assert_eq!(fake.creates_for(flaky).len(), 3);
    assert_eq!(fake.creates_for(locked).len(), 5);
    assert_eq!(fake.creates_for(broken).len(), 1);
    wait_table(&fake, pairs(&[(flaky, "10.244.1.0/24")])).await;
    // The pass's failure is reported once, after its last attempt.
    let locked = wait_events(&env.client, locked, "FailedToCreateRoute").await;
    assert_eq!(locked.len(), 1, "{locked:?}");
    assert_eq!(locked[0].count.unwrap_or(1), 1, "{locked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_creation_backs_off_and_each_reason_is_reported_once() {
    let env = Env::start().await;
    let stuck = &*env.name("stuck");
    create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(stuck)
                .untainted()
                .pod_cidrs(&["10.244.1.0/24"]),
        ],
    )
    .await;
    let fake = FakeRoutes::failing(stuck, "server not attached");
    let period = Duration::from_millis(100);
    let metrics = start_controller_with(&env, fake.clone(), backing_off(period, 4 * period));
    wait_events(&env.client, stuck, "FailedToCreateRoute").await;
    wait_passes(&metrics, 30).await;
    // Tried after 1, 2 and 4 periods, then every 4: about 9 times in 30 passes, not 30.
    let calls = fake.creates_for(stuck).len() as u64;
    let passes = fake.state().lists as u64;
    assert!(
        calls >= 3 && calls * 2 <= passes,
        "{calls} creates in {passes} passes"
    );
    let events = events_with_reason(&env.client, stuck, "FailedToCreateRoute").await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].count.unwrap_or(1), 1, "one report: {events:?}");
    let message = events[0].message.as_deref().unwrap_or_default();
    assert!(message.contains("server not attached"), "{message}");

    // Another reason is reported, once.
    fake.fail(stuck, "quota exceeded");
    let events = eventually("a second reason reported", WAIT, || async {
        let events = events_with_reason(&env.client, stuck, "FailedToCreateRoute").await;
        (events.len() == 2).then_some(events)
    })
    .await;
    assert!(
        events.iter().any(|e| e
            .message
            .as_deref()
            .unwrap_or_default()
            .contains("quota exceeded")),
        "{events:?}"
    );
    wait_passes(&metrics, 10).await;
    let again = events_with_reason(&env.client, stuck, "FailedToCreateRoute").await;
    assert_eq!(again.len(), 2, "{again:?}");
    assert!(again.iter().all(|e| e.count.unwrap_or(1) == 1), "{again:?}");

    // Once the cause is gone, the next attempt creates the route.
    fake.state().failures.clear();
    wait_network(&env, stuck, "False", "RouteCreated").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_based_reconciliation_a_failed_creation_is_retried_without_a_node_change() {
    let env = Env::start().await;
    let retried = &*env.name("retried");
    create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(retried)
                .untainted()
                .pod_cidrs(&["10.244.5.0/24"]),
        ],
    )
    .await;
    let fake = FakeRoutes::failing(retried, "not yet");
    let metrics = start_controller_with(
        &env,
        fake.clone(),
        RouteControllerConfig {
            watch_nodes: true,
            watch_debounce: Duration::from_millis(100),
            ..backing_off(Duration::from_millis(200), Duration::from_millis(400))
        },
    );
    wait_network(&env, retried, "True", "NoRouteCreated").await;
    // No Node changes from here on: only the backoff brings the next passes.
    wait_passes(&metrics, 2).await;
    assert!(fake.creates_for(retried).len() >= 2);
    fake.state().failures.clear();
    wait_network(&env, retried, "False", "RouteCreated").await;
    assert_eq!(fake.table(), pairs(&[(retried, "10.244.5.0/24")]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_based_reconciliation_a_failed_deletion_is_retried_without_a_node_change() {
    let env = Env::start().await;
    let gone = env.name("gone");
    let fake = FakeRoutes::with_routes(vec![route(&gone, "10.244.9.0/24")]);
    fake.state().failing_deletes = 1;
    let metrics = start_controller_with(
        &env,
        fake.clone(),
        RouteControllerConfig {
            reconciliation_period: Duration::from_millis(200),
            watch_nodes: true,
            watch_debounce: Duration::from_millis(100),
            ..config()
        },
    );
    // No Node of this test ever changes: only the failed deletion may bring the next pass
    // (the resync is hours away).
    wait_passes(&metrics, 1).await;
    eventually("the stale route deleted on a later pass", WAIT, || async {
        fake.table().is_empty().then_some(())
    })
    .await;
    assert_eq!(fake.state().deletes.len(), 2);
    assert!(metrics.route_sync_count() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_watch_based_reconciliation_a_new_node_gets_its_route_without_waiting_a_period() {
    let env = Env::start().await;
    let late = &*env.name("late");
    let fake = FakeRoutes::with_routes(vec![]);
    let metrics = start_controller_with(
        &env,
        fake.clone(),
        RouteControllerConfig {
            // Far longer than the test may take: only a Node change can trigger a second pass.
            reconciliation_period: Duration::from_secs(600),
            watch_nodes: true,
            watch_debounce: Duration::from_millis(100),
            ..config()
        },
    );
    wait_passes(&metrics, 1).await;
    assert!(fake.table().is_empty());

    create_nodes(
        &env,
        vec![
            NodeBuilder::kubelet(late)
                .untainted()
                .pod_cidrs(&["10.244.7.0/24"])
                .ready("True"),
        ],
    )
    .await;
    wait_network(&env, late, "False", "RouteCreated").await;
    assert_eq!(fake.table(), pairs(&[(late, "10.244.7.0/24")]));
    let passes = metrics.route_sync_count();
    assert!(passes >= 2, "an event-driven pass ran: {passes}");

    // Deleting the Node removes its route just as promptly.
    kube::Api::<Node>::all(env.client.clone())
        .delete(late, &Default::default())
        .await
        .unwrap();
    eventually("route of the deleted node removed", WAIT, || async {
        fake.table().is_empty().then_some(())
    })
    .await;
}
