//! The Hetzner routes implementation against the simulator: gateway mapping, the gateway of
//! the Node's own server, create / replace / delete, rejected inputs, retries of a busy
//! network, the request cost of a listing, and the cost of a route that cannot be created
//! under the route controller.
//!
//! The tests that need a control plane share one for the whole binary; the route controller
//! watches only the Nodes of its own test (a label valued with the test's own name).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::time::Duration;

use cloud_provider::{
    CloudProvider as _, Metrics, NodeCache, Route, RouteController, RouteControllerConfig,
    RouteMetrics, Routes, WatchScope,
};
use hcloud_provider::{
    CLUSTER_CIDR_MISCONFIGURED, CacheConfig, EVENT_COMPONENT, HcloudProvider, HcloudRoutes,
    NetworkRef, ProviderSettings, RoutesConfig, ServerCache, op,
};
use hcloud_sim::{Fault, NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Event, Node, NodeAddress};
use kube::api::{Api, ListParams, PostParams};
use kube::core::Selector;
use kube_harness::{ControlPlane, eventually, unique_name};
use tokio_util::sync::CancellationToken;

const CLUSTER: &str = "kubernetes";
/// The label on the Nodes of a test that runs a controller, valued with the test's own name.
const SCOPE_LABEL: &str = "routes.test/scope";

/// A client of the control plane the whole test binary shares.
async fn kube_client() -> kube::Client {
    ControlPlane::shared().unwrap().client().await.unwrap()
}

use crate::support::sim_client as client;

/// Short retries.
fn fast(network_id: i64) -> RoutesConfig {
    RoutesConfig {
        retry_base: Duration::from_millis(10),
        retry_cap: Duration::from_millis(40),
        action_timeout: Duration::from_secs(5),
        ..RoutesConfig::new(network_id)
    }
}

/// Cache settings under which the network is read for every listing and change, as most tests
/// change it behind the provider's back (the batching tests below use the default ages).
fn reading_the_network() -> CacheConfig {
    CacheConfig {
        network_max_age: Duration::ZERO,
        network_plan_max_age: Duration::ZERO,
        ..CacheConfig::default()
    }
}

/// A simulator with network `k8s` (10.0.0.0/16) and servers `worker-1`, `worker-2` in it.
struct Env {
    sim: Simulator,
    network: i64,
    /// Private IP of `worker-1`.
    worker_1: String,
    /// Private IP of `worker-2`.
    worker_2: String,
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
            worker_2: String::new(),
        };
        env.worker_1 = env.server("worker-1", true).await;
        env.worker_2 = env.server("worker-2", true).await;
        env
    }

    /// Create a server; returns its private IP in `k8s` (empty when not attached).
    async fn server(&self, name: &str, attached: bool) -> String {
        self.server_with_id(name, attached).await.1
    }

    /// Create a server; returns its providerID and its private IP in `k8s` (empty when not
    /// attached).
    async fn server_with_id(&self, name: &str, attached: bool) -> (String, String) {
        let mut seed = ServerSeed::new(name);
        if attached {
            seed = seed.network(self.network);
        }
        let server = self.sim.admin().create_server(seed).await.unwrap();
        let ip = server["private_net"][0]["ip"].as_str().unwrap_or_default();
        (format!("hcloud://{}", server["id"]), ip.to_owned())
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
        self.routes_with(reading_the_network())
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

    /// Create `route` and check that the network routes it via `gateway` alone and that
    /// listing names its Node and `provider_id`.
    async fn create_and_list(
        &self,
        routes: &HcloudRoutes,
        route: &Route,
        gateway: &str,
        provider_id: &str,
    ) {
        routes.create_route(CLUSTER, "uid", route).await.unwrap();
        let cidr = route.destination_cidr.to_string();
        assert_eq!(self.cloud_routes().await, vec![(cidr, gateway.to_owned())]);
        let listed = routes.list_routes(CLUSTER).await.unwrap();
        assert_eq!(listed[0].target_node, route.target_node);
        assert_eq!(listed[0].target_provider_id, provider_id);
        assert!(!listed[0].blackhole);
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
        target_provider_id: String::new(),
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

/// The route the controller asks for Node `node` without providerID (looked up by name),
/// whose InternalIP is `ip`.
fn to(node: &str, ip: &str, cidr: &str) -> Route {
    Route {
        target_node_addresses: vec![internal_ip(ip)],
        ..route(node, cidr)
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
        .create_route(
            CLUSTER,
            "uid",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
        .await
        .unwrap();
    assert_eq!(env.cloud_routes().await.len(), 1);
    assert!(p.hcloud_instances().cache().listing_age().await.is_some());
}

#[tokio::test]
async fn list_maps_gateways_to_node_names_and_unknown_gateways_to_blackholes() {
    let env = Env::start().await;
    let (provider_id, ip1) = env.server_with_id("worker-3", true).await;
    env.add_cloud_route("10.244.3.0/24", &ip1).await;
    env.add_cloud_route("10.244.9.0/24", "10.0.0.200").await;

    let listed = by_cidr(env.routes().list_routes(CLUSTER).await.unwrap());
    assert_eq!(
        listed,
        vec![
            Route {
                name: format!("{ip1}-10.244.3.0/24"),
                blackhole: false,
                target_provider_id: provider_id,
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
        .create_route(CLUSTER, "uid-3", &to("worker-3", &ip, "10.244.3.0/24"))
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
        .create_route(CLUSTER, "uid-3", &to("worker-3", &ip, "10.244.3.0/24"))
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
        .create_route(CLUSTER, "uid-4", &to("worker-4", &ip2, "10.244.5.0/24"))
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
    let routes = env.routes();
    // The route controller is told up front not to ask.
    assert!(routes.can_route(&"10.244.1.0/24".parse().unwrap()));
    assert!(!routes.can_route(&"fd00:10:244::/64".parse().unwrap()));
    env.sim.admin().reset_request_counts().await.unwrap();
    let err = routes
        .create_route(CLUSTER, "uid", &route("worker-1", "fd00:10:244::/64"))
        .await
        .unwrap_err();
    assert!(err.user_reason() == Some("InvalidConfiguration"), "{err:?}");
    assert!(err.to_string().contains("IPv6"), "{err}");
    assert!(env.sim.admin().request_counts().await.unwrap().is_empty());
}

#[tokio::test]
async fn create_for_a_server_outside_the_network_names_node_and_network_and_costs_little() {
    let env = Env::start().await;
    let (provider_id, _) = env.server_with_id("outsider", false).await;
    let routes = env.routes();
    // The controller lists first: the network is known by name from then on.
    routes.list_routes(CLUSTER).await.unwrap();
    let stuck = Route {
        target_provider_id: provider_id,
        target_node_addresses: vec![NodeAddress {
            type_: "ExternalIP".into(),
            address: "203.0.113.9".into(),
        }],
        ..route("outsider", "10.244.7.0/24")
    };
    let err = routes
        .create_route(CLUSTER, "uid", &stuck)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"outsider\"") && err.contains("\"k8s\"") && err.contains("not attached"),
        "{err}"
    );
    assert!(env.cloud_routes().await.is_empty());

    // Tried again (as the route controller does after its backoff): at most one server
    // request, answered through the cache, and no network read.
    for _ in 0..3 {
        env.sim.admin().reset_request_counts().await.unwrap();
        routes
            .create_route(CLUSTER, "uid", &stuck)
            .await
            .unwrap_err();
        let counts = env.sim.admin().request_counts().await.unwrap();
        assert!(counts.values().sum::<u64>() <= 1, "{counts:?}");
        assert_eq!(env.count("GET /networks/{id}").await, 0, "{counts:?}");
    }
}

#[tokio::test]
async fn create_for_a_node_without_a_cloud_server_is_refused_and_robot_nodes_cost_nothing() {
    let env = Env::start().await;
    let routes = env.routes();
    // No providerID and no server of that name (e.g. a dedicated server behind a vSwitch,
    // with an address in the network).
    let mut unknown = to("dedicated-1", "10.0.1.5", "10.244.8.0/24");
    let err = routes
        .create_route(CLUSTER, "uid", &unknown)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("\"dedicated-1\"") && err.contains("no Hetzner Cloud server is named"),
        "{err}"
    );

    // A Robot providerID, in either form, is refused without asking the API.
    env.sim.admin().reset_request_counts().await.unwrap();
    for provider_id in ["hrobot://321", "hcloud://bm-321"] {
        unknown.target_provider_id = provider_id.to_owned();
        let err = routes
            .create_route(CLUSTER, "uid", &unknown)
            .await
            .unwrap_err();
        assert!(err.user_reason() == Some("InvalidConfiguration"), "{err:?}");
        assert!(
            err.to_string().contains(
                "node dedicated-1 is not a cloud server, routes are only supported for cloud servers"
            ),
            "the official message: {err}"
        );
    }
    // A malformed one names the field.
    unknown.target_provider_id = "hcloud://x".to_owned();
    let err = routes
        .create_route(CLUSTER, "uid", &unknown)
        .await
        .unwrap_err();
    assert!(err.to_string().contains("providerID"), "{err}");
    assert!(env.sim.admin().request_counts().await.unwrap().is_empty());
    assert!(env.cloud_routes().await.is_empty());
}

#[tokio::test]
async fn create_finds_the_server_by_provider_id_and_lists_the_node_name() {
    let env = Env::start().await;
    let (provider_id, ip) = env.server_with_id("server-with-other-name", true).await;
    let routes = env.routes();
    let renamed = Route {
        target_provider_id: provider_id.clone(),
        target_node_addresses: vec![
            NodeAddress {
                type_: "ExternalIP".into(),
                address: "203.0.113.9".into(),
            },
            internal_ip(&ip),
        ],
        ..route("node-a", "10.244.10.0/24")
    };
    env.create_and_list(&routes, &renamed, &ip, &provider_id)
        .await;
}

/// F6: a server that merely has the Node's name is never the gateway, and a route via it is
/// replaced by one via the Node's own server.
#[tokio::test]
async fn a_server_merely_named_like_the_node_is_never_its_gateway() {
    let env = Env::start().await;
    // `worker-1` (IP a) is another server; the Node `worker-1` runs on `w1-real` (IP b).
    let (own, b) = env.server_with_id("w1-real", true).await;
    let a = env.worker_1.clone();
    let routes = env.routes();

    // Found by its name only, `worker-1` is refused: a is not the Node's InternalIP.
    let by_name = to("worker-1", &b, "10.244.1.0/24");
    let err = routes
        .create_route(CLUSTER, "uid-1", &by_name)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        err.contains(&format!("private IP {a} ")) && err.contains(&b) && err.contains("InternalIP"),
        "{err}"
    );
    assert!(env.cloud_routes().await.is_empty());

    // A route via a, listed as `worker-1`'s but leading to the other server, is replaced by
    // the one via the Node's own server, found by providerID.
    env.add_cloud_route("10.244.1.0/24", &a).await;
    let listed = routes.list_routes(CLUSTER).await.unwrap();
    assert_eq!(listed[0].target_node, "worker-1");
    assert_ne!(listed[0].target_provider_id, own);
    let by_provider_id = Route {
        target_provider_id: own.clone(),
        ..by_name
    };
    env.create_and_list(&routes, &by_provider_id, &b, &own)
        .await;
}

#[tokio::test]
async fn delete_removes_the_route_and_an_absent_route_is_success() {
    let env = Env::start().await;
    let routes = env.routes();
    routes
        .create_route(
            CLUSTER,
            "uid-1",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
        .await
        .unwrap();
    routes
        .create_route(
            CLUSTER,
            "uid-2",
            &to("worker-2", &env.worker_2, "10.244.2.0/24"),
        )
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
        .create_route(
            CLUSTER,
            "uid",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
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
        .create_route(
            CLUSTER,
            "uid",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
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
        .create_route(
            CLUSTER,
            "uid",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
        .await
        .unwrap_err();
    assert!(
        err.category() == cloud_provider::Category::Transient,
        "{err:?}"
    );
    assert!(err.to_string().contains("10.244.1.0/24"), "{err}");
    admin.clear_faults().await.unwrap();
}

/// A route action that fails is an error, and the route controller's next listing shows
/// what the network holds, not the change that did not happen, so the next pass tries again.
#[tokio::test]
async fn a_failed_action_is_an_error_and_the_next_listing_does_not_show_it() {
    let env = Env::start().await;
    env.sim
        .admin()
        .inject_fault(Fault::new("/networks/{id}/actions/add_route").fail_action())
        .await
        .unwrap();
    // The network copy is kept as in production (30 s), with this process's changes in it.
    let client = client(&env.sim);
    let routes = HcloudRoutes::new(
        client.clone(),
        ServerCache::new(client, CacheConfig::default()),
        fast(env.network),
    );
    let route = to("worker-1", &env.worker_1, "10.244.1.0/24");
    let err = routes
        .create_route(CLUSTER, "uid", &route)
        .await
        .unwrap_err();
    assert!(
        err.category() == cloud_provider::Category::Transient,
        "{err:?}"
    );
    assert!(env.cloud_routes().await.is_empty());
    assert!(routes.list_routes(CLUSTER).await.unwrap().is_empty());
    routes.create_route(CLUSTER, "uid", &route).await.unwrap();
    assert_eq!(env.cloud_routes().await.len(), 1);
    // Deletions likewise: a failed delete leaves the route listed, and the next one goes.
    env.sim
        .admin()
        .inject_fault(Fault::new("/networks/{id}/actions/delete_route").fail_action())
        .await
        .unwrap();
    let listed = routes.list_routes(CLUSTER).await.unwrap();
    assert!(routes.delete_route(CLUSTER, &listed[0]).await.is_err());
    assert_eq!(routes.list_routes(CLUSTER).await.unwrap().len(), 1);
    routes.delete_route(CLUSTER, &listed[0]).await.unwrap();
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
        ..reading_the_network()
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
        .create_route(
            CLUSTER,
            "uid-1",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
        .await
        .unwrap();
    let stale = routes.list_routes(CLUSTER).await.unwrap().pop().unwrap();
    assert_eq!(stale.target_node, "worker-1");
    // The CIDR moves to worker-2 before the stale listing's delete arrives.
    routes
        .create_route(
            CLUSTER,
            "uid-2",
            &to("worker-2", &env.worker_2, "10.244.1.0/24"),
        )
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
        .create_route(
            CLUSTER,
            "uid-1",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
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
        ..reading_the_network()
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
        .create_route(
            CLUSTER,
            "uid-1",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
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
    let kube = kube_client().await;
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
        .create_route(
            CLUSTER,
            "uid-w1",
            &to("worker-1", &env.worker_1, "192.168.7.0/24"),
        )
        .await
        .unwrap();
    provider
        .initialize(kube.clone(), CancellationToken::new())
        .await
        .unwrap();
    routes
        .create_route(
            CLUSTER,
            "uid-w1",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
        .await
        .unwrap();
    routes
        .create_route(
            CLUSTER,
            "uid-w2",
            &to("worker-2", &env.worker_2, "192.168.8.0/24"),
        )
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
            // The network takes one change at a time: the last of a burst of 20 waits for the
            // 19 before it (about 4 s with 200 ms actions, far longer on a loaded machine).
            // How long that takes is the benchmark's to measure.
            action_timeout: Duration::from_secs(60),
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
    let mut ips = Vec::new();
    for i in 0..20 {
        ips.push(env.server(&format!("node-{i}"), true).await);
    }
    let routes = std::sync::Arc::new(batching(&env));
    env.sim.admin().reset_request_counts().await.unwrap();
    // The route controller's pass: one listing, then every creation at once.
    assert!(routes.list_routes(CLUSTER).await.unwrap().is_empty());
    let creations: Vec<_> = (0..20)
        .map(|i| {
            let routes = routes.clone();
            let ip = ips[i].clone();
            tokio::spawn(async move {
                routes
                    .create_route(
                        CLUSTER,
                        &format!("uid-{i}"),
                        &to(&format!("node-{i}"), &ip, &format!("10.244.{i}.0/24")),
                    )
                    .await
            })
        })
        .collect();
    for creation in creations {
        creation.await.unwrap().unwrap();
    }
    // How long the burst takes is the benchmark's to measure, not a timed assertion's (it
    // failed here on a loaded machine).
    assert_eq!(env.cloud_routes().await.len(), 20);
    let counts = env.sim.admin().request_counts().await.unwrap();
    assert_eq!(
        counts.get("POST /networks/{id}/actions/add_route"),
        Some(&20)
    );
    assert_eq!(counts.get("GET /networks/{id}"), Some(&1), "{counts:?}");
    let total = route_requests(&counts);
    assert!(total <= 44, "{total} requests for 20 routes: {counts:?}");

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
        .create_route(
            CLUSTER,
            "uid-1",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
        .await
        .unwrap();
    routes
        .create_route(
            CLUSTER,
            "uid-2",
            &to("worker-2", &env.worker_2, "10.244.2.0/24"),
        )
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
        .create_route(
            CLUSTER,
            "uid-1",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
        .await
        .expect_err("planned against the stale copy");
    assert!(format!("{err}").contains("10.244.1.0/24"), "{err}");
    // The route controller's retry plans against a fresh read and finds it in place.
    routes
        .create_route(
            CLUSTER,
            "uid-1",
            &to("worker-1", &env.worker_1, "10.244.1.0/24"),
        )
        .await
        .unwrap();
    assert_eq!(env.cloud_routes().await.len(), 1);
}

/// F2: the route controller over these routes, for one hour of a Node whose server is not in
/// the network, with every duration scaled down 200 times (10-s passes take 50 ms, the hour
/// 18 s): the stuck Node costs at most 60 API requests and one Warning event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_route_that_cannot_be_created_costs_at_most_sixty_requests_an_hour() {
    const SCALE: u32 = 200;
    let hour = Duration::from_secs(3600) / SCALE;
    let env = Env::start().await;
    let outsider = unique_name("outsider");
    let (provider_id, _) = env.server_with_id(&outsider, false).await;
    let kube = kube_client().await;
    let nodes: Api<Node> = Api::all(kube.clone());
    let node: Node = serde_json::from_value(serde_json::json!({
        "metadata": { "name": outsider, "labels": { SCOPE_LABEL: outsider } },
        "spec": { "providerID": provider_id, "podCIDR": "10.244.9.0/24", "podCIDRs": ["10.244.9.0/24"] },
        "status": { "addresses": [{ "type": "ExternalIP", "address": "203.0.113.9" }] },
    }))
    .unwrap();
    nodes.create(&PostParams::default(), &node).await.unwrap();

    // The defaults, scaled: server cache 10 s / status 5 min, network copy 30 s, passes
    // every 10 s, creations backed off up to 5 min.
    let client = client(&env.sim);
    let cache = CacheConfig {
        max_age: Duration::from_secs(10) / SCALE,
        status_max_age: Duration::from_secs(300) / SCALE,
        status_period: Duration::from_secs(10) / SCALE,
        miss_ttl: Duration::from_secs(10) / SCALE,
        network_max_age: Duration::from_secs(30) / SCALE,
        network_plan_max_age: Duration::from_secs(30) / SCALE,
        ..CacheConfig::default()
    };
    let routes = HcloudRoutes::new(
        client.clone(),
        ServerCache::new(client, cache),
        fast(env.network),
    );
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let route_metrics = RouteMetrics::new();
    let controller = RouteController::new(
        kube.clone(),
        NodeCache::spawn_scoped(
            kube.clone(),
            shutdown.clone(),
            &WatchScope::all().with_labels(Selector::from_iter([(
                SCOPE_LABEL.to_owned(),
                outsider.clone(),
            )])),
        ),
        std::sync::Arc::new(routes),
        Metrics::new(),
        RouteControllerConfig {
            cluster_name: CLUSTER.into(),
            cluster_cidrs: vec!["10.244.0.0/16".parse().unwrap()],
            reconciliation_period: Duration::from_secs(10) / SCALE,
            create_backoff_max: Duration::from_secs(300) / SCALE,
            ..RouteControllerConfig::default()
        },
    )
    .with_route_metrics(route_metrics.clone());
    tokio::spawn(controller.run(shutdown.clone()));

    let events: Api<Event> = Api::namespaced(kube, "default");
    let about_outsider = ListParams::default().fields(&format!("involvedObject.name={outsider}"));
    let failed = || async {
        let list = events.list(&about_outsider).await.unwrap().items;
        list.into_iter()
            .filter(|e| e.reason.as_deref() == Some("FailedToCreateRoute"))
            .collect::<Vec<Event>>()
    };
    eventually(
        "the first failure reported",
        Duration::from_secs(20),
        || async { (!failed().await.is_empty()).then_some(()) },
    )
    .await;
    env.sim.admin().reset_request_counts().await.unwrap();
    let started = std::time::Instant::now();
    let passes = route_metrics.route_sync_count();
    // An hour's passes (a pass every period, after the previous one ended).
    eventually("an hour of passes", Duration::from_secs(120), || async {
        (route_metrics.route_sync_count() >= passes + 360).then_some(())
    })
    .await;
    let elapsed = started.elapsed();
    let counts = env.sim.admin().request_counts().await.unwrap();

    // The network is read once per copy age, whatever the Nodes: not the stuck Node's cost.
    let network_reads = counts.get("GET /networks/{id}").copied().unwrap_or(0);
    let copies = elapsed.as_millis() / (Duration::from_secs(30) / SCALE).as_millis() + 1;
    assert!(u128::from(network_reads) <= copies, "{counts:?}");
    let stuck: u64 = counts
        .iter()
        .filter(|(key, _)| key.as_str() != "GET /networks/{id}")
        .map(|(_, n)| *n)
        .sum();
    // 60 an hour; the passes may have taken longer than the scaled hour.
    let hours = elapsed.as_secs_f64() / hour.as_secs_f64();
    assert!(
        (stuck as f64) <= 60.0 * hours.max(1.0),
        "{stuck} requests in {hours:.2} hours: {counts:?}"
    );
    assert!(stuck >= 1, "the creation was tried again: {counts:?}");
    assert!(env.cloud_routes().await.is_empty());
    let reported = failed().await;
    assert_eq!(reported.len(), 1, "{reported:?}");
    assert_eq!(reported[0].count.unwrap_or(1), 1, "{reported:?}");
    let message = reported[0].message.as_deref().unwrap_or_default();
    assert!(message.contains("not attached"), "{message}");
}
