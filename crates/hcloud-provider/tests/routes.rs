//! The Hetzner routes implementation against the simulator: gateway mapping, create / replace /
//! delete, rejected inputs, retries of a busy network and the request cost of a listing.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use cloud_provider::{CloudProvider as _, Error, Route, Routes};
use hcloud_api::{Client, ClientConfig, RetryConfig, Token};
use hcloud_provider::{
    CLUSTER_CIDR_MISCONFIGURED, CacheConfig, EVENT_COMPONENT, HcloudProvider, HcloudRoutes,
    NetworkRef, ProviderSettings, RoutesConfig, ServerCache, op,
};
use hcloud_sim::{Fault, NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Event, NodeAddress};
use kube::api::{Api, ListParams};
use kube_harness::{ControlPlane, eventually};
use tokio_util::sync::CancellationToken;

const CLUSTER: &str = "kubernetes";

fn client(sim: &Simulator) -> Client {
    let mut config = ClientConfig::new(Token::new(sim.token()))
        .with_endpoint(sim.base_url())
        .with_poll_interval(Duration::from_millis(10));
    config.retry = RetryConfig {
        max_tries: 2,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(10),
        jitter: false,
    };
    config.request_timeout = Duration::from_secs(2);
    Client::new(config).unwrap()
}

/// Short retries; the network is read for every listing and change, as these tests change it
/// behind the provider's back (the batching tests below use the default ages).
fn fast(network_id: i64) -> RoutesConfig {
    RoutesConfig {
        retry_base: Duration::from_millis(10),
        retry_cap: Duration::from_millis(40),
        action_timeout: Duration::from_secs(5),
        list_max_age: Duration::ZERO,
        plan_max_age: Duration::ZERO,
        ..RoutesConfig::new(network_id)
    }
}

/// A simulator with network `k8s` (10.0.0.0/16) and servers `worker-1`, `worker-2` in it.
struct Env {
    sim: Simulator,
    network: i64,
    /// Private IP of `worker-1`.
    worker_1: String,
}

impl Env {
    async fn start() -> Self {
        let sim = Simulator::start(SimConfig::default().action_delay(Duration::from_millis(20)))
            .await
            .unwrap();
        let network = sim
            .admin()
            .create_network(
                NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"),
            )
            .await
            .unwrap();
        let mut env = Self {
            sim,
            network,
            worker_1: String::new(),
        };
        env.worker_1 = env.server("worker-1", true).await;
        env.server("worker-2", true).await;
        env
    }

    /// Create a server; returns its private IP in `k8s` (empty when not attached).
    async fn server(&self, name: &str, attached: bool) -> String {
        let mut seed = ServerSeed::new(name);
        if attached {
            seed = seed.network(self.network);
        }
        let server = self.sim.admin().create_server(seed).await.unwrap();
        server["private_net"][0]["ip"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    }

    fn routes_with(&self, cache: CacheConfig) -> HcloudRoutes {
        let client = client(&self.sim);
        HcloudRoutes::new(
            client.clone(),
            ServerCache::new(client, cache),
            fast(self.network),
        )
    }

    fn routes(&self) -> HcloudRoutes {
        self.routes_with(CacheConfig::default())
    }

    /// The network's routes as the simulator holds them: (destination, gateway).
    async fn cloud_routes(&self) -> Vec<(String, String)> {
        let state = self.sim.admin().state().await.unwrap();
        let network = state["networks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|n| n["id"].as_i64() == Some(self.network))
            .unwrap()
            .clone();
        let mut routes: Vec<(String, String)> = network["routes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["destination"].as_str().unwrap().to_owned(),
                    r["gateway"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        routes.sort();
        routes
    }

    /// Add a route directly through the API (as another actor would).
    async fn add_cloud_route(&self, destination: &str, gateway: &str) {
        let client = client(&self.sim);
        let action = client
            .networks()
            .add_route(
                self.network,
                &hcloud_api::models::Route::new(destination, gateway),
            )
            .await
            .unwrap();
        client.actions().wait(&action).await.unwrap();
    }

    async fn count(&self, key: &str) -> u64 {
        self.sim
            .admin()
            .request_counts()
            .await
            .unwrap()
            .get(key)
            .copied()
            .unwrap_or(0)
    }
}

fn route(node: &str, cidr: &str) -> Route {
    Route {
        name: String::new(),
        target_node: node.to_owned(),
        destination_cidr: cidr.parse().unwrap(),
        blackhole: false,
        enable_node_addresses: false,
        target_node_addresses: Vec::new(),
    }
}

fn internal_ip(ip: &str) -> NodeAddress {
    NodeAddress {
        type_: "InternalIP".into(),
        address: ip.into(),
    }
}

fn by_cidr(mut routes: Vec<Route>) -> Vec<Route> {
    routes.sort_by_key(|r| r.destination_cidr);
    routes
}

#[tokio::test]
async fn the_provider_offers_routes_only_with_a_network_and_when_enabled() {
    let env = Env::start().await;
    let provider = |network: Option<NetworkRef>, routes_enabled: bool| {
        let client = client(&env.sim);
        async move {
            HcloudProvider::new(
                client,
                ProviderSettings {
                    network,
                    routes_enabled,
                    ..ProviderSettings::default()
                },
            )
            .await
            .unwrap()
        }
    };
    let k8s = || Some(NetworkRef::Name("k8s".into()));
    assert!(provider(k8s(), true).await.routes().is_some());
    assert!(provider(k8s(), true).await.hcloud_routes().is_some());
    assert!(provider(k8s(), false).await.routes().is_none());
    assert!(provider(None, true).await.routes().is_none());
    assert!(!ProviderSettings::default().routes_enabled);

    // The wired routes work and share the instances' cache.
    let p = provider(k8s(), true).await;
    p.routes()
        .unwrap()
        .create_route(CLUSTER, "uid", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    assert_eq!(env.cloud_routes().await.len(), 1);
    assert!(p.hcloud_instances().cache().listing_age().await.is_some());
}

#[tokio::test]
async fn list_maps_gateways_to_node_names_and_unknown_gateways_to_blackholes() {
    let env = Env::start().await;
    let ip1 = env.server("worker-3", true).await;
    env.add_cloud_route("10.244.3.0/24", &ip1).await;
    env.add_cloud_route("10.244.9.0/24", "10.0.0.200").await;

    let listed = by_cidr(env.routes().list_routes(CLUSTER).await.unwrap());
    assert_eq!(
        listed,
        vec![
            Route {
                name: format!("{ip1}-10.244.3.0/24"),
                blackhole: false,
                ..route("worker-3", "10.244.3.0/24")
            },
            Route {
                name: "10.0.0.200-10.244.9.0/24".into(),
                blackhole: true,
                ..route("", "10.244.9.0/24")
            },
        ]
    );
}

#[tokio::test]
async fn a_network_without_routes_lists_nothing_and_skips_the_server_listing() {
    let env = Env::start().await;
    env.sim.admin().reset_request_counts().await.unwrap();
    assert!(env.routes().list_routes(CLUSTER).await.unwrap().is_empty());
    assert_eq!(env.count("GET /networks/{id}").await, 1);
    assert_eq!(env.count("GET /servers").await, 0);
}

#[tokio::test]
async fn create_adds_the_route_via_the_nodes_private_ip_and_is_idempotent() {
    let env = Env::start().await;
    let ip = env.server("worker-3", true).await;
    let routes = env.routes();
    routes
        .create_route(CLUSTER, "uid-3", &route("worker-3", "10.244.3.0/24"))
        .await
        .unwrap();
    assert_eq!(
        env.cloud_routes().await,
        vec![("10.244.3.0/24".to_owned(), ip.clone())]
    );
    let listed = routes.list_routes(CLUSTER).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].target_node, "worker-3");
    assert!(!listed[0].blackhole);

    // Creating it again changes nothing.
    env.sim.admin().reset_request_counts().await.unwrap();
    routes
        .create_route(CLUSTER, "uid-3", &route("worker-3", "10.244.3.0/24"))
        .await
        .unwrap();
    assert_eq!(env.count("POST /networks/{id}/actions/add_route").await, 0);
    assert_eq!(
        env.count("POST /networks/{id}/actions/delete_route").await,
        0
    );
    assert_eq!(env.cloud_routes().await.len(), 1);
}

#[tokio::test]
async fn create_replaces_a_route_for_the_same_cidr_via_another_gateway() {
    let env = Env::start().await;
    let ip1 = env.server("worker-3", true).await;
    let ip2 = env.server("worker-4", true).await;
    env.add_cloud_route("10.244.5.0/24", &ip1).await;

    env.routes()
        .create_route(CLUSTER, "uid-4", &route("worker-4", "10.244.5.0/24"))
        .await
        .unwrap();
    assert_eq!(
        env.cloud_routes().await,
        vec![("10.244.5.0/24".to_owned(), ip2)]
    );
    let listed = env.routes().list_routes(CLUSTER).await.unwrap();
    assert_eq!(listed[0].target_node, "worker-4");
}

#[tokio::test]
async fn create_for_an_ipv6_cidr_is_rejected_without_api_calls() {
    let env = Env::start().await;
    env.sim.admin().reset_request_counts().await.unwrap();
    let err = env
        .routes()
        .create_route(CLUSTER, "uid", &route("worker-1", "fd00:10:244::/64"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("IPv6"), "{err}");
    assert!(env.sim.admin().request_counts().await.unwrap().is_empty());
}

#[tokio::test]
async fn create_for_a_server_outside_the_network_names_node_and_network() {
    let env = Env::start().await;
    env.server("outsider", false).await;
    let err = env
        .routes()
        .create_route(CLUSTER, "uid", &route("outsider", "10.244.7.0/24"))
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"outsider\"") && err.contains("\"k8s\"") && err.contains("not attached"),
        "{err}"
    );
    assert!(env.cloud_routes().await.is_empty());
}

#[tokio::test]
async fn create_for_a_node_without_a_cloud_server_says_robot_is_unsupported() {
    let env = Env::start().await;
    let mut robot = route("dedicated-1", "10.244.8.0/24");
    // An address in the network (e.g. behind a vSwitch) that no cloud server has.
    robot.target_node_addresses = vec![internal_ip("10.0.1.5")];
    let err = env
        .routes()
        .create_route(CLUSTER, "uid", &robot)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"dedicated-1\"") && err.contains("Robot") && err.contains("10.0.1.5"),
        "{err}"
    );
    assert!(env.cloud_routes().await.is_empty());
}

#[tokio::test]
async fn create_falls_back_to_the_nodes_internal_ip_and_lists_the_node_name() {
    let env = Env::start().await;
    let ip = env.server("server-with-other-name", true).await;
    let routes = env.routes();
    let mut renamed = route("node-a", "10.244.10.0/24");
    renamed.target_node_addresses = vec![
        // Outside the network: skipped.
        internal_ip("192.168.1.1"),
        NodeAddress {
            type_: "ExternalIP".into(),
            address: "203.0.113.9".into(),
        },
        internal_ip(&ip),
    ];
    routes
        .create_route(CLUSTER, "uid-a", &renamed)
        .await
        .unwrap();
    assert_eq!(
        env.cloud_routes().await,
        vec![("10.244.10.0/24".to_owned(), ip)]
    );
    let listed = routes.list_routes(CLUSTER).await.unwrap();
    assert_eq!(listed[0].target_node, "node-a");
    assert!(!listed[0].blackhole);
}

#[tokio::test]
async fn delete_removes_the_route_and_an_absent_route_is_success() {
    let env = Env::start().await;
    let routes = env.routes();
    routes
        .create_route(CLUSTER, "uid-1", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    routes
        .create_route(CLUSTER, "uid-2", &route("worker-2", "10.244.2.0/24"))
        .await
        .unwrap();
    let listed = by_cidr(routes.list_routes(CLUSTER).await.unwrap());
    routes.delete_route(CLUSTER, &listed[0]).await.unwrap();
    let left = env.cloud_routes().await;
    assert_eq!(left.len(), 1);
    assert_eq!(left[0].0, "10.244.2.0/24");

    // Again: already gone.
    routes.delete_route(CLUSTER, &listed[0]).await.unwrap();
    // A blackhole is deleted by destination as well.
    env.add_cloud_route("10.244.9.0/24", "10.0.0.200").await;
    let blackhole = by_cidr(routes.list_routes(CLUSTER).await.unwrap())
        .pop()
        .unwrap();
    assert!(blackhole.blackhole);
    routes.delete_route(CLUSTER, &blackhole).await.unwrap();
    assert_eq!(env.cloud_routes().await.len(), 1);
}

#[tokio::test]
async fn a_busy_network_is_retried_until_the_route_is_added() {
    let env = Env::start().await;
    let admin = env.sim.admin();
    // Two conflicts (the second after the client's own retry) and two locks.
    admin
        .inject_fault(
            Fault::new("/networks/{id}/actions/add_route")
                .code("conflict")
                .status(409)
                .count(3),
        )
        .await
        .unwrap();
    admin
        .inject_fault(
            Fault::new("/networks/{id}/actions/add_route")
                .code("locked")
                .status(423)
                .count(2),
        )
        .await
        .unwrap();
    env.sim.admin().reset_request_counts().await.unwrap();
    env.routes()
        .create_route(CLUSTER, "uid", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    assert_eq!(env.count("POST /networks/{id}/actions/add_route").await, 6);
    assert_eq!(env.cloud_routes().await.len(), 1);
}

#[tokio::test]
async fn a_busy_network_is_retried_for_deletes_too_and_gives_up_eventually() {
    let env = Env::start().await;
    let routes = env.routes();
    routes
        .create_route(CLUSTER, "uid", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    let listed = routes.list_routes(CLUSTER).await.unwrap();
    let admin = env.sim.admin();
    admin
        .inject_fault(
            Fault::new("/networks/{id}/actions/delete_route")
                .code("locked")
                .count(2),
        )
        .await
        .unwrap();
    routes.delete_route(CLUSTER, &listed[0]).await.unwrap();
    assert!(env.cloud_routes().await.is_empty());

    // Locked for longer than the retries last: an API error naming the route.
    admin
        .inject_fault(
            Fault::new("/networks/{id}/actions/add_route")
                .code("locked")
                .count(100),
        )
        .await
        .unwrap();
    let err = routes
        .create_route(CLUSTER, "uid", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Api { .. }), "{err:?}");
    assert!(err.to_string().contains("10.244.1.0/24"), "{err}");
    admin.clear_faults().await.unwrap();
}

#[tokio::test]
async fn a_failed_action_is_an_error() {
    let env = Env::start().await;
    env.sim
        .admin()
        .inject_fault(Fault::new("/networks/{id}/actions/add_route").fail_action())
        .await
        .unwrap();
    let err = env
        .routes()
        .create_route(CLUSTER, "uid", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Api { .. }), "{err:?}");
    assert!(env.cloud_routes().await.is_empty());
}

#[tokio::test]
async fn listing_costs_one_network_read_plus_at_most_one_cached_server_listing() {
    let env = Env::start().await;
    for i in 0..60 {
        env.server(&format!("filler-{i}"), false).await;
    }
    let ip = env.server("worker-3", true).await;
    env.add_cloud_route("10.244.3.0/24", &ip).await;
    env.add_cloud_route("10.244.9.0/24", "10.0.0.200").await;
    let routes = env.routes();
    env.sim.admin().reset_request_counts().await.unwrap();

    assert_eq!(routes.list_routes(CLUSTER).await.unwrap().len(), 2);
    assert_eq!(env.count("GET /networks/{id}").await, 1);
    // 63 servers: one paginated listing of two pages.
    assert_eq!(env.count("GET /servers").await, 2);

    // Within the max age the listing is reused; the network is read again.
    assert_eq!(routes.list_routes(CLUSTER).await.unwrap().len(), 2);
    assert_eq!(env.count("GET /networks/{id}").await, 2);
    assert_eq!(env.count("GET /servers").await, 2);
    let counts = env.sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.values().sum::<u64>(), 4, "{counts:?}");
}

#[tokio::test]
async fn a_gateway_unknown_to_an_old_listing_is_checked_against_a_fresher_one() {
    let env = Env::start().await;
    // Listings answer status reads for a minute but normal lookups only briefly.
    let routes = env.routes_with(CacheConfig {
        max_age: Duration::from_millis(50),
        status_max_age: Duration::from_secs(60),
        ..CacheConfig::default()
    });
    env.add_cloud_route("10.244.1.0/24", &env.worker_1).await;
    assert_eq!(routes.list_routes(CLUSTER).await.unwrap().len(), 1);

    // A server created after that listing gets a route.
    let ip = env.server("late", true).await;
    env.add_cloud_route("10.244.4.0/24", &ip).await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    env.sim.admin().reset_request_counts().await.unwrap();
    let listed = by_cidr(routes.list_routes(CLUSTER).await.unwrap());
    assert_eq!(listed[1].target_node, "late");
    assert!(!listed[1].blackhole);
    assert_eq!(env.count("GET /servers").await, 1);

    // Without unknown gateways the old listing is good enough.
    tokio::time::sleep(Duration::from_millis(60)).await;
    env.sim.admin().reset_request_counts().await.unwrap();
    routes.list_routes(CLUSTER).await.unwrap();
    assert_eq!(env.count("GET /servers").await, 0);
}

#[tokio::test]
async fn delete_leaves_a_route_that_was_replaced_since_it_was_listed() {
    let env = Env::start().await;
    let routes = env.routes();
    routes
        .create_route(CLUSTER, "uid-1", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    let stale = routes.list_routes(CLUSTER).await.unwrap().pop().unwrap();
    assert_eq!(stale.target_node, "worker-1");
    // The CIDR moves to worker-2 before the stale listing's delete arrives.
    routes
        .create_route(CLUSTER, "uid-2", &route("worker-2", "10.244.1.0/24"))
        .await
        .unwrap();
    let moved = env.cloud_routes().await;
    assert_eq!(moved.len(), 1);
    assert_ne!(moved[0].1, env.worker_1);

    routes.delete_route(CLUSTER, &stale).await.unwrap();
    assert_eq!(env.cloud_routes().await, moved, "the new route stays");

    // The route as listed now is deleted.
    let current = routes.list_routes(CLUSTER).await.unwrap().pop().unwrap();
    routes.delete_route(CLUSTER, &current).await.unwrap();
    assert!(env.cloud_routes().await.is_empty());
}

#[tokio::test]
async fn delete_of_a_route_not_named_by_a_listing_checks_its_target() {
    let env = Env::start().await;
    let routes = env.routes();
    routes
        .create_route(CLUSTER, "uid-1", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    // A route for another target (as the controller may build it) does not match.
    let other = Route {
        name: "10.244.1.0/24".into(),
        ..route("worker-2", "10.244.1.0/24")
    };
    routes.delete_route(CLUSTER, &other).await.unwrap();
    assert_eq!(env.cloud_routes().await.len(), 1);
    let same = Route {
        name: "10.244.1.0/24".into(),
        ..route("worker-1", "10.244.1.0/24")
    };
    routes.delete_route(CLUSTER, &same).await.unwrap();
    assert!(env.cloud_routes().await.is_empty());
}

#[tokio::test]
async fn an_unknown_gateway_costs_one_fresher_listing_not_one_per_cycle() {
    let env = Env::start().await;
    let routes = env.routes_with(CacheConfig {
        max_age: Duration::from_millis(50),
        status_max_age: Duration::from_secs(60),
        ..CacheConfig::default()
    });
    env.add_cloud_route("10.244.1.0/24", &env.worker_1).await;
    routes.list_routes(CLUSTER).await.unwrap();

    // A gateway no server has (e.g. another actor's) shows up after that listing.
    env.add_cloud_route("10.244.9.0/24", "10.0.0.200").await;
    tokio::time::sleep(Duration::from_millis(60)).await;
    env.sim.admin().reset_request_counts().await.unwrap();
    let listed = by_cidr(routes.list_routes(CLUSTER).await.unwrap());
    assert!(listed[1].blackhole);
    assert_eq!(env.count("GET /servers").await, 1, "checked once");

    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let listed = by_cidr(routes.list_routes(CLUSTER).await.unwrap());
        assert!(listed[1].blackhole);
    }
    assert_eq!(env.count("GET /networks/{id}").await, 4, "every cycle ran");
    assert_eq!(env.count("GET /servers").await, 1, "no listing per cycle");
}

#[tokio::test]
async fn route_calls_are_counted_with_the_official_op_names() {
    let env = Env::start().await;
    let routes = env.routes();
    routes
        .create_route(CLUSTER, "uid-1", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    let listed = routes.list_routes(CLUSTER).await.unwrap();
    routes.list_routes(CLUSTER).await.unwrap();
    routes.delete_route(CLUSTER, &listed[0]).await.unwrap();
    let ops = routes.operations();
    assert_eq!(ops.value(op::routes::CREATE_ROUTE), 1);
    assert_eq!(ops.value(op::routes::LIST_ROUTES), 2);
    assert_eq!(ops.value(op::routes::DELETE_ROUTE), 1);
    assert_eq!(ops.value(op::routes::RELOAD_NETWORK), 4);
}

#[tokio::test]
async fn a_route_outside_the_cluster_cidr_warns_on_the_node_and_is_still_created() {
    let env = Env::start().await;
    let plane = ControlPlane::start().await.unwrap();
    let kube = plane.client().await.unwrap();
    let provider = HcloudProvider::new(
        client(&env.sim),
        ProviderSettings {
            network: Some(NetworkRef::Id(env.network)),
            routes_enabled: true,
            cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
            ..ProviderSettings::default()
        },
    )
    .await
    .unwrap();
    let routes = provider.routes().unwrap();

    // Before initialize the provider writes no events (only logs); inside the CIDR none.
    routes
        .create_route(CLUSTER, "uid-w1", &route("worker-1", "192.168.7.0/24"))
        .await
        .unwrap();
    provider
        .initialize(kube.clone(), CancellationToken::new())
        .await
        .unwrap();
    routes
        .create_route(CLUSTER, "uid-w1", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    routes
        .create_route(CLUSTER, "uid-w2", &route("worker-2", "192.168.8.0/24"))
        .await
        .unwrap();
    assert_eq!(env.cloud_routes().await.len(), 3, "all routes created");

    let api: Api<Event> = Api::namespaced(kube, "default");
    let warned = eventually(
        "ClusterCIDRMisconfigured event",
        Duration::from_secs(10),
        || {
            let api = api.clone();
            async move {
                let events = api.list(&ListParams::default()).await.unwrap().items;
                let warned: Vec<Event> = events
                    .into_iter()
                    .filter(|e| e.reason.as_deref() == Some(CLUSTER_CIDR_MISCONFIGURED))
                    .collect();
                (!warned.is_empty()).then_some(warned)
            }
        },
    )
    .await;
    // Only the route created after initialize and outside the CIDR: worker-2's.
    assert_eq!(warned.len(), 1, "{warned:?}");
    let event = &warned[0];
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    assert_eq!(event.involved_object.kind.as_deref(), Some("Node"));
    assert_eq!(event.involved_object.name.as_deref(), Some("worker-2"));
    assert_eq!(event.involved_object.uid.as_deref(), Some("uid-w2"));
    assert_eq!(
        event.source.as_ref().and_then(|s| s.component.as_deref()),
        Some(EVENT_COMPONENT)
    );
    let message = event.message.as_deref().unwrap_or_default();
    assert!(
        message.contains("192.168.8.0/24") && message.contains("10.244.0.0/16"),
        "{message}"
    );
}

/// Routes with the default network ages (the copy of the network is used for planning).
fn batching(env: &Env) -> HcloudRoutes {
    let client = client(&env.sim);
    HcloudRoutes::new(
        client.clone(),
        ServerCache::new(client, CacheConfig::default()),
        RoutesConfig {
            list_max_age: Duration::from_secs(30),
            plan_max_age: Duration::from_secs(30),
            ..fast(env.network)
        },
    )
}

/// Requests for routes: network reads, route changes and action checks.
fn route_requests(counts: &std::collections::BTreeMap<String, u64>) -> u64 {
    counts
        .iter()
        .filter(|(key, _)| key.contains("/networks") || key.starts_with("GET /actions"))
        .map(|(_, n)| *n)
        .sum()
}

#[tokio::test]
async fn concurrent_route_creations_cost_one_post_and_about_one_check_each() {
    let env = Env::start().await;
    env.sim
        .admin()
        .set_action_delay(Duration::from_millis(200))
        .await
        .unwrap();
    for i in 0..20 {
        env.server(&format!("node-{i}"), true).await;
    }
    let routes = std::sync::Arc::new(batching(&env));
    env.sim.admin().reset_request_counts().await.unwrap();
    // The route controller's pass: one listing, then every creation at once.
    assert!(routes.list_routes(CLUSTER).await.unwrap().is_empty());
    let started = std::time::Instant::now();
    let creations: Vec<_> = (0..20)
        .map(|i| {
            let routes = routes.clone();
            tokio::spawn(async move {
                routes
                    .create_route(
                        CLUSTER,
                        &format!("uid-{i}"),
                        &route(&format!("node-{i}"), &format!("10.244.{i}.0/24")),
                    )
                    .await
            })
        })
        .collect();
    for creation in creations {
        creation.await.unwrap().unwrap();
    }
    let elapsed = started.elapsed();
    assert_eq!(env.cloud_routes().await.len(), 20);
    let counts = env.sim.admin().request_counts().await.unwrap();
    assert_eq!(
        counts.get("POST /networks/{id}/actions/add_route"),
        Some(&20)
    );
    assert_eq!(counts.get("GET /networks/{id}"), Some(&1), "{counts:?}");
    let total = route_requests(&counts);
    assert!(total <= 44, "{total} requests for 20 routes: {counts:?}");
    // One change at a time, 200 ms each.
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");

    // The listing after the batch shows them from the copy, without a read.
    let listed = routes.list_routes(CLUSTER).await.unwrap();
    assert_eq!(listed.len(), 20);
    let counts = env.sim.admin().request_counts().await.unwrap();
    assert_eq!(counts.get("GET /networks/{id}"), Some(&1), "{counts:?}");

    // Deletions are batched the same way.
    env.sim.admin().reset_request_counts().await.unwrap();
    let deletions: Vec<_> = listed
        .into_iter()
        .map(|r| {
            let routes = routes.clone();
            tokio::spawn(async move { routes.delete_route(CLUSTER, &r).await })
        })
        .collect();
    for deletion in deletions {
        deletion.await.unwrap().unwrap();
    }
    assert!(env.cloud_routes().await.is_empty());
    let counts = env.sim.admin().request_counts().await.unwrap();
    let total = route_requests(&counts);
    assert!(total <= 44, "{total} requests for 20 deletions: {counts:?}");
}

#[tokio::test]
async fn an_unexpected_conflict_makes_the_next_change_read_the_network() {
    let env = Env::start().await;
    let routes = batching(&env);
    routes.list_routes(CLUSTER).await.unwrap();
    // Another actor keeps the network busy for the client's own tries.
    env.sim
        .admin()
        .inject_fault(
            Fault::new("/networks/{id}/actions/add_route")
                .method("POST")
                .code("conflict")
                .count(2),
        )
        .await
        .unwrap();
    env.sim.admin().reset_request_counts().await.unwrap();
    routes
        .create_route(CLUSTER, "uid-1", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    routes
        .create_route(CLUSTER, "uid-2", &route("worker-2", "10.244.2.0/24"))
        .await
        .unwrap();
    let counts = env.sim.admin().request_counts().await.unwrap();
    // The first creation used the listing's copy; after the conflict the second read afresh.
    assert_eq!(counts.get("GET /networks/{id}"), Some(&1), "{counts:?}");
    assert_eq!(env.cloud_routes().await.len(), 2);
}

#[tokio::test]
async fn a_route_added_behind_the_copy_is_found_after_one_rejected_post() {
    let env = Env::start().await;
    let routes = batching(&env);
    routes.list_routes(CLUSTER).await.unwrap();
    // Someone else adds the route for the same CIDR after the copy was made.
    env.add_cloud_route("10.244.1.0/24", &env.worker_1).await;
    let err = routes
        .create_route(CLUSTER, "uid-1", &route("worker-1", "10.244.1.0/24"))
        .await
        .expect_err("planned against the stale copy");
    assert!(format!("{err}").contains("10.244.1.0/24"), "{err}");
    // The route controller's retry plans against a fresh read and finds it in place.
    routes
        .create_route(CLUSTER, "uid-1", &route("worker-1", "10.244.1.0/24"))
        .await
        .unwrap();
    assert_eq!(env.cloud_routes().await.len(), 1);
}
