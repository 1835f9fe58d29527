//! The route controller through the real binary: with HCLOUD_NETWORK and --cluster-cidr, a
//! Node's pod CIDR (from a real kube-controller-manager's node IPAM) becomes a route of the
//! network via the private IP of the Node's own server, and the Node's NetworkUnavailable
//! condition turns False. Dual-stack clusters get routes for their IPv4 pod CIDRs only; a route
//! via another server is corrected; a route that cannot be created is retried with a backoff and
//! reported once. The tests of a route's failures set pod CIDRs by hand.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::time::Duration;

use ccm::{TOKEN, free_port, metric, metrics, simulator_with_host_in_network, spawn_ccm};
use hcloud_sim::{ServerSeed, Simulator};
use k8s_openapi::api::core::v1::{Event, Node, NodeCondition};
use kube::api::Api;
use kube_harness::{eventually, kubelet_node};
use serde_json::json;

use crate::support::IPAM_CLUSTER_CIDR;
use crate::support::scope::{Access, Scope};

const WAIT: Duration = Duration::from_secs(30);

/// `hcloud-ccm` in `scope` with network `k8s`, `--cluster-cidr` and 1-s route passes, its
/// metrics on `metrics_port`. Killed when dropped, its access closed with it.
async fn start_ccm(
    scope: &Scope,
    sim: &Simulator,
    cluster_cidr: &str,
    metrics_port: u16,
) -> (Access, tokio::process::Child) {
    let access = scope.admin_access("ccm").await;
    let metadata = sim.metadata_url();
    let metrics = format!("127.0.0.1:{metrics_port}");
    let cluster_cidr = format!("--cluster-cidr={cluster_cidr}");
    let ccm = spawn_ccm(
        &access.kubeconfig,
        sim,
        &[
            ("HCLOUD_NETWORK", "k8s"),
            ("HCLOUD_METADATA_ENDPOINT", &metadata),
            ("HCLOUD_METRICS_ENABLED", "true"),
            ("HCLOUD_METRICS_ADDRESS", &metrics),
            ("HCLOUD_LOAD_BALANCERS_ENABLED", "false"),
        ],
        &[
            "--allocate-node-cidrs=true",
            &cluster_cidr,
            "--route-reconciliation-period=1s",
            &scope.lease_flag(),
        ],
    );
    (access, ccm)
}

/// `route_controller_route_sync_total` of the binary, once its metrics endpoint answers.
async fn route_passes(port: u16) -> Option<u64> {
    let text = metrics(port).await?;
    Some(metric(&text, "route_controller_route_sync_total", "") as u64)
}

/// Wait until the binary has made `more` route passes beyond the current count.
async fn wait_route_passes(port: u16, more: u64) {
    let start = eventually("the metrics endpoint", WAIT, || route_passes(port)).await;
    eventually(
        &format!("{more} more route passes"),
        Duration::from_secs(60),
        || async { route_passes(port).await.filter(|n| *n >= start + more) },
    )
    .await;
}

/// The routes of network `k8s`: (destination, gateway), sorted.
async fn network_routes(sim: &Simulator) -> Vec<(String, String)> {
    let network = api(sim).networks().get_by_name("k8s").await.unwrap();
    let mut routes: Vec<(String, String)> = network
        .map(|n| n.routes)
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.destination, r.gateway))
        .collect();
    routes.sort();
    routes
}

/// A client of the simulator's API, as another actor than the CCM.
fn api(sim: &Simulator) -> hcloud_api::Client {
    hcloud_api::Client::new(
        hcloud_api::ClientConfig::new(hcloud_api::Token::new(TOKEN)).with_endpoint(sim.base_url()),
    )
    .unwrap()
}

/// The Node's NetworkUnavailable condition once it has `status`.
async fn wait_network_unavailable(nodes: &Api<Node>, name: &str, status: &str) -> NodeCondition {
    eventually(
        &format!("{name}: NetworkUnavailable={status}"),
        WAIT,
        || async {
            nodes
                .get(name)
                .await
                .unwrap()
                .status
                .and_then(|s| s.conditions)
                .and_then(|c| c.into_iter().find(|c| c.type_ == "NetworkUnavailable"))
                .filter(|c| c.status == status)
        },
    )
    .await
}

/// A Node in `scope` as a kubelet with `--provider-id` registers it once initialised:
/// providerID, pod CIDR, addresses and Ready, without the uninitialized taint (the apiserver
/// keeps the status a Node is created with).
async fn create_initialized_node(
    scope: &Scope,
    name: &str,
    provider_id: &str,
    pod_cidr: &str,
    addresses: &[(&str, &str)],
) {
    let addresses: Vec<_> = addresses
        .iter()
        .map(|(type_, address)| json!({ "type": type_, "address": address }))
        .collect();
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "providerID": provider_id, "podCIDR": pod_cidr, "podCIDRs": [pod_cidr] },
        "status": {
            "addresses": addresses,
            "conditions": [{ "type": "Ready", "status": "True", "reason": "KubeletReady" }],
        },
    }))
    .unwrap();
    scope.create_node(node).await;
}

/// Node `<scope>-outsider` of server `outsider` (outside the network: its public IP is its
/// ExternalIP) is in place with pod CIDR 10.244.9.0/24, and the CCM starts: the message of the
/// first `FailedToCreateRoute` event on it once its network is unavailable, the CCM's metrics
/// port and the CCM (killed when dropped, with its access).
async fn outsider_reported(
    scope: &Scope,
    sim: &Simulator,
    outsider: &serde_json::Value,
) -> (String, u16, (Access, tokio::process::Child)) {
    let name = scope.name("outsider");
    let public_ip = outsider["public_net"]["ipv4"]["ip"]
        .as_str()
        .unwrap_or("203.0.113.7");
    create_initialized_node(
        scope,
        &name,
        &format!("hcloud://{}", outsider["id"]),
        "10.244.9.0/24",
        &[("ExternalIP", public_ip), ("Hostname", &name)],
    )
    .await;
    let metrics_port = free_port();
    let ccm = start_ccm(scope, sim, "10.244.0.0/16", metrics_port).await;
    let first = eventually("a FailedToCreateRoute event", WAIT, || async {
        failed_route_events(&scope.admin, &name).await.pop()
    })
    .await;
    wait_network_unavailable(&scope.nodes(), &name, "True").await;
    (first.message.unwrap_or_default(), metrics_port, ccm)
}

/// The `FailedToCreateRoute` events on Node `name`.
async fn failed_route_events(client: &kube::Client, name: &str) -> Vec<Event> {
    crate::support::events(client, "default", name, "FailedToCreateRoute").await
}

/// As in a cluster: the kubelet registers the Node without a pod CIDR, and
/// kube-controller-manager's node IPAM gives it an IPv4 and an IPv6 one, racing the CCM's
/// initialisation of the Node (whose addresses the route's target is checked against). Here the
/// race is won by IPAM for certain: the Node's server appears only later.
#[tokio::test]
async fn pod_cidrs_from_node_ipam_become_routes_of_the_network() {
    let scope = Scope::on(crate::support::ipam_plane(), "routed").await;
    let name = scope.name("routed-1");
    // The CCM runs "on" another server of the network (the metadata service lists it).
    let (sim, host) = simulator_with_host_in_network("host-1").await;
    let network = host["private_net"][0]["network"].as_i64().unwrap();
    let metrics_port = free_port();
    let _ccm = start_ccm(&scope, &sim, IPAM_CLUSTER_CIDR, metrics_port).await;

    let nodes = scope.nodes();
    scope.create_node(kubelet_node(&name)).await;
    let pod_cidrs = eventually("pod CIDRs from kube-controller-manager", WAIT, || async {
        let node = nodes.get(&name).await.ok()?;
        let cidrs = node.spec?.pod_cidrs?;
        (cidrs.len() == 2).then_some(cidrs)
    })
    .await;
    assert!(
        pod_cidrs[0].starts_with("10.244.") && pod_cidrs[1].starts_with("fd00:10:244:"),
        "{pod_cidrs:?}"
    );
    // Route passes that saw the pod CIDR of a Node not initialised yet: its route waits, with
    // no Warning (the Node's addresses are not known yet, nor is its server).
    wait_route_passes(metrics_port, 3).await;
    assert!(network_routes(&sim).await.is_empty());
    assert_eq!(
        wait_network_unavailable(&nodes, &name, "True")
            .await
            .reason
            .as_deref(),
        Some("NoRouteCreated")
    );

    // The server appears; the CCM initialises the Node, and its route follows.
    let server = sim
        .admin()
        .create_server(ServerSeed::new(&name).network(network))
        .await
        .unwrap();
    let private_ip = server["private_net"][0]["ip"].as_str().unwrap().to_owned();
    // The IPv6 pod CIDR does not keep the Node's network unavailable: Hetzner networks route
    // IPv4 only.
    let condition = wait_network_unavailable(&nodes, &name, "False").await;
    assert_eq!(condition.reason.as_deref(), Some("RouteCreated"));
    assert_eq!(
        network_routes(&sim).await,
        vec![(pod_cidrs[0].clone(), private_ip)]
    );
    // No Warning on the way: not for the IPv6 pod CIDR (no route was tried), and not for the
    // time the Node had its pod CIDR but was not initialised (its route waited).
    let failures = failed_route_events(&scope.admin, &name).await;
    assert!(failures.is_empty(), "{failures:?}");
}

#[tokio::test]
async fn a_route_via_another_server_named_like_the_node_is_corrected() {
    let scope = Scope::new("misrouted").await;
    let name = scope.name("worker-1");
    // The Node's own server is `host-7`; the Node is named `<scope>-worker-1`, and so is
    // another server in the network, which the pod CIDR is routed to.
    let (sim, own) = simulator_with_host_in_network("host-7").await;
    let own_ip = own["private_net"][0]["ip"].as_str().unwrap().to_owned();
    let network = own["private_net"][0]["network"].as_i64().unwrap();
    let other = sim
        .admin()
        .create_server(ServerSeed::new(&name).network(network))
        .await
        .unwrap();
    let other_ip = other["private_net"][0]["ip"].as_str().unwrap().to_owned();
    let api = api(&sim);
    let action = api
        .networks()
        .add_route(
            network,
            &hcloud_api::models::Route::new("10.244.7.0/24", other_ip.as_str()),
        )
        .await
        .unwrap();
    api.actions().wait(&action).await.unwrap();

    create_initialized_node(
        &scope,
        &name,
        &format!("hcloud://{}", own["id"]),
        "10.244.7.0/24",
        &[("InternalIP", &own_ip), ("Hostname", &name)],
    )
    .await;
    let _ccm = start_ccm(&scope, &sim, "10.244.0.0/16", free_port()).await;

    let want = vec![("10.244.7.0/24".to_owned(), own_ip)];
    eventually("the route via the Node's own server", WAIT, || async {
        (network_routes(&sim).await == want).then_some(())
    })
    .await;
    wait_network_unavailable(&scope.nodes(), &name, "False").await;
}

#[tokio::test]
async fn a_route_that_cannot_be_created_backs_off_and_is_reported_once() {
    let scope = Scope::new("unroutable").await;
    let (sim, _host) = simulator_with_host_in_network("host-1").await;
    // A server outside the network: its Node's pod CIDR cannot be routed to it.
    let outsider = sim
        .admin()
        .create_server(ServerSeed::new("outsider"))
        .await
        .unwrap();
    let (message, metrics_port, _ccm) = outsider_reported(&scope, &sim, &outsider).await;
    assert!(
        message.contains("10.244.9.0/24") && message.contains("not attached"),
        "{message}"
    );

    // Twenty passes later: the creation was retried a few times, not every pass, and each
    // retry cost at most one server request.
    sim.admin().reset_request_counts().await.unwrap();
    wait_route_passes(metrics_port, 20).await;
    let counts = sim.admin().request_counts().await.unwrap();
    let server_reads: u64 = counts
        .iter()
        .filter(|(key, _)| key.starts_with("GET /servers"))
        .map(|(_, n)| *n)
        .sum();
    assert!(server_reads <= 8, "{server_reads} server reads: {counts:?}");
    assert!(network_routes(&sim).await.is_empty());
    // One Warning for one reason: the event was written once, not counted up every retry.
    let events = failed_route_events(&scope.admin, &scope.name("outsider")).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].count.unwrap_or(1), 1, "{events:?}");
}

/// Servers `name-0..count` attached to the network of `host`, each with an initialised Node in
/// `scope` (pod CIDR `10.244.<i>.0/24`, its private IP as InternalIP).
async fn servers_with_nodes(
    sim: &Simulator,
    scope: &Scope,
    network: i64,
    name: &str,
    count: usize,
) {
    for i in 0..count {
        let node = format!("{name}-{i}");
        let server = sim
            .admin()
            .create_server(ServerSeed::new(&node).network(network))
            .await
            .unwrap();
        let ip = server["private_net"][0]["ip"].as_str().unwrap().to_owned();
        create_initialized_node(
            scope,
            &node,
            &format!("hcloud://{}", server["id"]),
            &format!("10.244.{i}.0/24"),
            &[("InternalIP", &ip), ("Hostname", &node)],
        )
        .await;
    }
}

/// The network's route limit (lowered to 3 here, 100 on Hetzner): the fourth Node's route is
/// refused, reported once on its Node naming the limit, tried again with a growing delay (not
/// every pass), and its network stays unavailable; the three routes that fit stay.
#[tokio::test]
async fn the_route_beyond_the_network_limit_is_reported_once_and_backs_off() {
    let scope = Scope::new("route-limit").await;
    let admin = scope.admin.clone();
    let worker = |i: usize| scope.name(&format!("worker-{i}"));
    let (sim, host) = simulator_with_host_in_network("host-1").await;
    let network = host["private_net"][0]["network"].as_i64().unwrap();
    sim.admin()
        .set_limits(&hcloud_sim::LimitsSeed::default().routes_per_network(3))
        .await
        .unwrap();
    let nodes = scope.nodes();
    servers_with_nodes(&sim, &scope, network, &scope.name("worker"), 4).await;
    let metrics_port = free_port();
    let _ccm = start_ccm(&scope, &sim, "10.244.0.0/16", metrics_port).await;

    let refused = eventually("a FailedToCreateRoute event", WAIT, || async {
        let mut all = Vec::new();
        for i in 0..4 {
            all.extend(failed_route_events(&admin, &worker(i)).await);
        }
        all.pop()
    })
    .await;
    let message = refused.message.clone().unwrap_or_default();
    assert!(
        message.contains("network \"k8s\"")
            && message.contains("is at its route limit")
            && message.contains("at most 100 routes"),
        "{message}"
    );
    let full = refused.involved_object.name.clone().unwrap();
    let fitted: Vec<String> = (0..4).map(worker).filter(|n| *n != full).collect();
    for name in &fitted {
        wait_network_unavailable(&nodes, name, "False").await;
    }
    wait_network_unavailable(&nodes, &full, "True").await;
    let before = network_routes(&sim).await;
    assert_eq!(before.len(), 3, "{before:?}");

    // Twenty 1-s passes later: the refused route was asked for a few times with a growing
    // delay (after 1, 2, 4, 8, 16 s), not every pass; the routes that fit stayed.
    sim.admin().reset_request_counts().await.unwrap();
    wait_route_passes(metrics_port, 20).await;
    let counts = sim.admin().request_counts().await.unwrap();
    let posts = counts
        .get("POST /networks/{id}/actions/add_route")
        .copied()
        .unwrap_or(0);
    assert!((1..=5).contains(&posts), "{posts} add_route: {counts:?}");
    let total: u64 = counts.values().sum();
    assert!(total <= 2 * posts + 20, "{total} requests: {counts:?}");
    assert_eq!(network_routes(&sim).await, before);
    wait_network_unavailable(&nodes, &full, "True").await;
    let events = failed_route_events(&admin, &full).await;
    assert_eq!(events.len(), 1, "{events:?}");
    assert_eq!(events[0].count.unwrap_or(1), 1, "{events:?}");
    for name in &fitted {
        assert!(failed_route_events(&admin, name).await.is_empty());
    }
}

/// A server that cannot join the network because the network is full (100 servers): its
/// Node's route is reported once, saying so, and not tried on every pass.
#[tokio::test]
async fn a_server_outside_a_full_network_is_reported_as_unable_to_join() {
    let scope = Scope::new("full-network").await;
    let (sim, host) = simulator_with_host_in_network("host-1").await;
    let network = host["private_net"][0]["network"].as_i64().unwrap();
    // The host and 99 more servers fill the network.
    let seed = hcloud_sim::SeedFile {
        servers: (1..100)
            .map(|i| ServerSeed::new(format!("member-{i}")).network(network))
            .collect(),
        ..hcloud_sim::SeedFile::default()
    };
    sim.admin().seed(&seed).await.unwrap();
    let outsider = sim
        .admin()
        .create_server(ServerSeed::new("outsider"))
        .await
        .unwrap();
    // Attaching it is what the real cloud refuses.
    let refused = reqwest::Client::new()
        .post(format!(
            "{}/servers/{}/actions/attach_to_network",
            sim.base_url(),
            outsider["id"]
        ))
        .bearer_auth(TOKEN)
        .json(&json!({ "network": network }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 403);
    let (message, metrics_port, _ccm) = outsider_reported(&scope, &sim, &outsider).await;
    assert!(
        message.contains("network is full") && message.contains("100 servers"),
        "{message}"
    );
    sim.admin().reset_request_counts().await.unwrap();
    wait_route_passes(metrics_port, 20).await;
    let counts = sim.admin().request_counts().await.unwrap();
    let total: u64 = counts.values().sum();
    assert!(total <= 20, "{total} requests in 20 passes: {counts:?}");
    assert!(network_routes(&sim).await.is_empty());
    let events = failed_route_events(&scope.admin, &scope.name("outsider")).await;
    assert_eq!(events.len(), 1, "{events:?}");
}
