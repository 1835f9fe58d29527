//! Robot dedicated servers through the binary, against the control plane and the simulator's
//! Robot webservice: the scenarios of the official CCM's Robot end-to-end tests (a hybrid
//! cluster initialised with labels and ExternalIP, a load balancer that picks only Robot Nodes)
//! and the lifecycle (shutdown taint from the power state, deletion of a Node whose server left
//! Robot, no deletion while Robot fails or rate-limits), and Robot beside routes (routes for
//! the cloud Nodes only). The Robot list cache, the power-state cache and the lifecycle period
//! are shortened to a second, so that each change is seen within a few seconds.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::collections::BTreeMap;
use std::time::Duration;

use ccm::{TOKEN, lb_service, spawn_ccm};
use hcloud_sim::{Fault, RobotRateLimit, RobotServerSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Event, Node, NodeSpec};
use kube::api::{Api, ObjectMeta};
use kube_harness::{UNINITIALIZED_TAINT, eventually, has_taint};
use serde_json::{Value, json};

use crate::lifecycle::{seed, set_ready};
use crate::support::scope::{Access, Scope};

const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
const PROVIDED_BY: &str = "instance.hetzner.cloud/provided-by";
pub(crate) const ROBOT_USER: &str = "robot-e2e-user";
pub(crate) const ROBOT_PASSWORD: &str = "robot-e2e-password";

/// A simulator with a Robot account (no Robot rate limit unless a test sets one).
pub(crate) async fn simulator() -> Simulator {
    Simulator::start(
        SimConfig::default()
            .token(TOKEN)
            .robot_credentials(ROBOT_USER, ROBOT_PASSWORD)
            .robot_rate_limit(None),
    )
    .await
    .unwrap()
}

/// The binary in `scope` against `sim` with Robot on: the Robot list and power states cached
/// for 1 s (no budget of power-state reads), the lifecycle check every second, load balancers
/// in fsn1.
async fn start_ccm(scope: &Scope, sim: &Simulator) -> (Access, tokio::process::Child) {
    start_ccm_with(scope, sim, &[]).await
}

/// [`start_ccm`] with the further variables `env`.
pub(crate) async fn start_ccm_with(
    scope: &Scope,
    sim: &Simulator,
    env: &[(&str, &str)],
) -> (Access, tokio::process::Child) {
    let access = scope.admin_access("ccm").await;
    let robot_url = sim.robot_url();
    let mut all = vec![
        ("ROBOT_ENABLED", "true"),
        ("ROBOT_USER", ROBOT_USER),
        ("ROBOT_PASSWORD", ROBOT_PASSWORD),
        ("ROBOT_ENDPOINT", &robot_url),
        ("ROBOT_CACHE_TIMEOUT", "1s"),
        ("ROBOT_POWER_STATE_CACHE_TIMEOUT", "1s"),
        // Every second, for every server: no budget (the simulator's Robot has no limit here).
        ("ROBOT_POWER_STATE_READS_PER_HOUR", "0"),
        ("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1"),
    ];
    all.extend_from_slice(env);
    let ccm = spawn_ccm(
        &access.kubeconfig,
        sim,
        &all,
        &[&scope.lease_flag(), "--node-monitor-period=1s"],
    );
    (access, ccm)
}

/// A dedicated server `name` in `sim`'s Robot account: its number and main IPv4.
pub(crate) async fn dedicated(sim: &Simulator, name: &str) -> (u64, String) {
    let number = sim
        .admin()
        .add_robot_server(RobotServerSeed::new(name))
        .await
        .unwrap();
    let servers = sim.admin().robot_servers().await.unwrap();
    let server = servers
        .iter()
        .find(|s| s["server_number"].as_u64() == Some(number))
        .unwrap();
    (number, server["server_ip"].as_str().unwrap().to_owned())
}

/// A Node `name` with `provider_id` and `labels` in `scope`, already initialised (as after a
/// first run of the CCM).
async fn initialised_node(scope: &Scope, name: &str, provider_id: &str, labels: &[(&str, &str)]) {
    scope
        .create_node(Node {
            metadata: ObjectMeta {
                name: Some(name.into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(NodeSpec {
                provider_id: Some(provider_id.to_owned()),
                ..NodeSpec::default()
            }),
            status: None,
        })
        .await;
}

/// Robot requests to `endpoint` (e.g. `GET /server`) counted at the simulator so far.
async fn robot_requests(sim: &Simulator, endpoint: &str) -> u64 {
    let counts: BTreeMap<String, u64> = sim.admin().robot_request_counts().await.unwrap();
    counts.get(endpoint).copied().unwrap_or(0)
}

/// Wait until at least `more` further `GET /server` requests reached the simulator.
async fn await_listings(sim: &Simulator, more: u64, what: &str) {
    let start = robot_requests(sim, "GET /server").await;
    eventually(what, Duration::from_secs(30), || async {
        (robot_requests(sim, "GET /server").await >= start + more).then_some(())
    })
    .await;
}

/// Wait until Node `name` is deleted.
async fn deleted(nodes: &Api<Node>, name: &str) {
    eventually(
        &format!("Node {name} deleted"),
        Duration::from_secs(30),
        || async { nodes.get_opt(name).await.unwrap().is_none().then_some(()) },
    )
    .await;
}

fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(key))
        .map(String::as_str)
}

fn addresses(node: &Node, kind: &str) -> Vec<String> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_ref())
        .into_iter()
        .flatten()
        .filter(|a| a.type_ == kind)
        .map(|a| a.address.clone())
        .collect()
}

/// A hybrid cluster: a cloud and two dedicated Nodes register as kubelets do and are
/// initialised (providerIDs, `provided-by` labels, the dedicated server's IP as ExternalIP).
/// Then one dedicated server is powered off while its Node is NotReady (shutdown taint), which
/// goes once the Node is Ready again; the other leaves Robot while its Node is NotReady, and
/// its Node is deleted.
#[tokio::test]
async fn a_hybrid_cluster_is_initialised_and_follows_robot_power_and_removal() {
    let scope = Scope::new("robot-hybrid").await;
    let sim = simulator().await;
    let (cloud, dozing, leaving) = (
        scope.name("cloud"),
        scope.name("dozing"),
        scope.name("leaving"),
    );
    let cloud_id = seed(&sim, &cloud).await;
    let (dozing_number, dozing_ip) = dedicated(&sim, &dozing).await;
    let (leaving_number, _) = dedicated(&sim, &leaving).await;
    let _ccm = start_ccm(&scope, &sim).await;
    for name in [&cloud, &dozing, &leaving] {
        scope.register_node(name, None).await;
    }
    let nodes = scope.nodes();
    let mut initialised = BTreeMap::new();
    for name in [&cloud, &dozing, &leaving] {
        // Initialised: the taint is gone, and the addresses, written after it as upstream
        // writes them, are in.
        let node = eventually(
            &format!("Node {name} initialised"),
            Duration::from_secs(30),
            || async {
                let node = nodes.get(name).await.unwrap();
                (!has_taint(&node, UNINITIALIZED_TAINT)
                    && !addresses(&node, "ExternalIP").is_empty())
                .then_some(node)
            },
        )
        .await;
        initialised.insert(name.clone(), node);
    }
    let provider_id = |name: &String| {
        initialised[name]
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.clone())
    };
    assert_eq!(provider_id(&cloud), Some(format!("hcloud://{cloud_id}")));
    assert_eq!(
        provider_id(&dozing),
        Some(format!("hrobot://{dozing_number}"))
    );
    assert_eq!(
        provider_id(&leaving),
        Some(format!("hrobot://{leaving_number}"))
    );
    assert_eq!(label(&initialised[&cloud], PROVIDED_BY), Some("cloud"));
    let robot_node = &initialised[&dozing];
    assert_eq!(label(robot_node, PROVIDED_BY), Some("robot"));
    assert_eq!(
        label(robot_node, "node.kubernetes.io/instance-type"),
        Some("EX44")
    );
    assert_eq!(
        label(robot_node, "topology.kubernetes.io/region"),
        Some("fsn1")
    );
    assert_eq!(
        label(robot_node, "topology.kubernetes.io/zone"),
        Some("fsn1-dc14")
    );
    assert!(
        addresses(robot_node, "ExternalIP").contains(&dozing_ip),
        "{:?}",
        robot_node.status
    );

    // Powered off while NotReady: the shutdown taint; Ready again: the taint goes.
    sim.admin().robot_power_off(dozing_number).await.unwrap();
    set_ready(&scope, &dozing, false).await;
    eventually("the shutdown taint", Duration::from_secs(30), || async {
        has_taint(&nodes.get(&dozing).await.unwrap(), SHUTDOWN_TAINT).then_some(())
    })
    .await;
    sim.admin().robot_power_on(dozing_number).await.unwrap();
    set_ready(&scope, &dozing, true).await;
    eventually(
        "the shutdown taint removed",
        Duration::from_secs(30),
        || async { (!has_taint(&nodes.get(&dozing).await.unwrap(), SHUTDOWN_TAINT)).then_some(()) },
    )
    .await;

    // Gone from Robot while NotReady: the Node is deleted.
    sim.admin()
        .remove_robot_server(leaving_number)
        .await
        .unwrap();
    set_ready(&scope, &leaving, false).await;
    deleted(&nodes, &leaving).await;
    assert!(nodes.get_opt(&dozing).await.unwrap().is_some());
    assert!(nodes.get_opt(&cloud).await.unwrap().is_some());
}

/// A NotReady dedicated Node whose server has left Robot survives while Robot rate-limits
/// every request and while Robot fails (each asserted after further failed listings were
/// counted at the simulator), and is deleted once Robot answers again.
#[tokio::test]
async fn a_robot_outage_or_the_rate_limit_deletes_no_node() {
    let scope = Scope::new("robot-outage").await;
    let sim = simulator().await;
    let name = scope.name("dedicated");
    let (number, _) = dedicated(&sim, &name).await;
    initialised_node(&scope, &name, &format!("hrobot://{number}"), &[]).await;
    set_ready(&scope, &name, false).await;
    // Every Robot request is over the limit from the start, then the server leaves Robot.
    sim.admin()
        .set_robot_rate_limit(Some(RobotRateLimit {
            max_request: 0,
            interval: 3600,
        }))
        .await
        .unwrap();
    sim.admin().remove_robot_server(number).await.unwrap();
    let _ccm = start_ccm(&scope, &sim).await;
    let nodes = scope.nodes();

    await_listings(&sim, 3, "rate-limited listings").await;
    assert!(
        nodes.get_opt(&name).await.unwrap().is_some(),
        "deleted while Robot rate-limits"
    );

    // An outage: every listing fails with 503 (the fault is in place before the limit goes).
    let mut outage = Fault::new("/server");
    outage.status = Some(503);
    outage.count = u32::MAX;
    sim.admin().inject_robot_fault(outage).await.unwrap();
    sim.admin().set_robot_rate_limit(None).await.unwrap();
    await_listings(&sim, 3, "failed listings").await;
    assert!(
        nodes.get_opt(&name).await.unwrap().is_some(),
        "deleted while Robot fails"
    );

    // Robot answers again: the Node goes (the situation above could delete it).
    sim.admin().clear_robot_faults().await.unwrap();
    deleted(&nodes, &name).await;
}

/// The targets of the load balancer labelled with Service `uid`, once it has `count` of them.
async fn targets(sim: &Simulator, uid: &str, count: usize) -> Vec<Value> {
    eventually(
        &format!("{count} targets on the load balancer of {uid}"),
        Duration::from_secs(40),
        || async {
            let state = sim.admin().state().await.unwrap();
            state["load_balancers"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|lb| lb["labels"]["hcloud-ccm/service-uid"] == uid)
                .and_then(|lb| lb["targets"].as_array().cloned())
                .filter(|t| t.len() == count)
        },
    )
    .await
}

/// A load balancer whose node selector picks only Robot Nodes has only the dedicated server's
/// IP as target; one without a selector has the cloud server and that IP.
#[tokio::test]
async fn load_balancers_target_dedicated_servers_by_ip() {
    let scope = Scope::new("robot-lb").await;
    let sim = simulator().await;
    let (cloud, dedicated_name) = (scope.name("cloud"), scope.name("dedicated"));
    let cloud_id = seed(&sim, &cloud).await;
    let (number, ip) = dedicated(&sim, &dedicated_name).await;
    for (name, provider_id, provided_by) in [
        (&cloud, format!("hcloud://{cloud_id}"), "cloud"),
        (&dedicated_name, format!("hrobot://{number}"), "robot"),
    ] {
        initialised_node(&scope, name, &provider_id, &[(PROVIDED_BY, provided_by)]).await;
    }
    let _ccm = start_ccm(&scope, &sim).await;

    let robot_only = scope
        .create_service(lb_service(
            "robot-only",
            &[("node-selector", &format!("{PROVIDED_BY}=robot"))],
        ))
        .await;
    let every_node = scope.create_service(lb_service("every-node", &[])).await;

    let only = targets(&sim, robot_only.metadata.uid.as_deref().unwrap(), 1).await;
    assert_eq!(only[0]["type"], "ip", "{only:?}");
    assert_eq!(only[0]["ip"]["ip"], ip.as_str(), "{only:?}");

    let both = targets(&sim, every_node.metadata.uid.as_deref().unwrap(), 2).await;
    let servers: Vec<_> = both
        .iter()
        .filter(|t| t["type"] == "server")
        .map(|t| t["server"]["id"].clone())
        .collect();
    let ips: Vec<_> = both
        .iter()
        .filter(|t| t["type"] == "ip")
        .map(|t| t["ip"]["ip"].clone())
        .collect();
    assert_eq!(servers, vec![json!(cloud_id)], "{both:?}");
    assert_eq!(ips, vec![json!(ip)], "{both:?}");
}

/// A Node `name` with `provider_id`, `pod_cidr`, `addresses` and `conditions` besides Ready,
/// as a kubelet with `--provider-id` registers it once initialised (the apiserver keeps the
/// status a Node is created with).
async fn node_with_pod_cidr(
    scope: &Scope,
    name: &str,
    provider_id: &str,
    pod_cidr: &str,
    addresses: &[(&str, &str)],
    conditions: &[Value],
) {
    let addresses: Vec<_> = addresses
        .iter()
        .map(|(type_, address)| json!({ "type": type_, "address": address }))
        .collect();
    let mut all = vec![json!({ "type": "Ready", "status": "True", "reason": "KubeletReady" })];
    all.extend(conditions.iter().cloned());
    let node: Node = serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "providerID": provider_id, "podCIDR": pod_cidr, "podCIDRs": [pod_cidr] },
        "status": { "addresses": addresses, "conditions": all },
    }))
    .unwrap();
    scope.create_node(node).await;
}

/// Node `name`'s NetworkUnavailable condition: (status, reason).
async fn network_unavailable(nodes: &Api<Node>, name: &str) -> Option<(String, String)> {
    let node = nodes.get(name).await.unwrap();
    node.status?
        .conditions?
        .into_iter()
        .find(|c| c.type_ == "NetworkUnavailable")
        .map(|c| (c.status, c.reason.unwrap_or_default()))
}

/// The `RouteNotSupported` events on Node `name`.
async fn route_not_supported(scope: &Scope, name: &str) -> Vec<Event> {
    crate::support::events(&scope.admin, "default", name, "RouteNotSupported").await
}

/// Robot beside routes (the official CCM refuses to start): `plan` first names the cloud
/// Node's route and a `RouteNotSupported` Warning for each dedicated Node; then the binary
/// starts; the cloud Node gets its route and `NetworkUnavailable=False`; the dedicated Nodes (`hrobot://N` and the
/// legacy `hcloud://bm-N`) get no route and one `RouteNotSupported` Warning each, however many
/// passes follow; the `NetworkUnavailable=True` the route controller wrote on one of them
/// before it was known as dedicated is undone, and the other's condition is left to the CNI
/// (it has none).
#[tokio::test]
async fn beside_routes_only_the_cloud_nodes_get_routes() {
    let scope = Scope::new("robot-routes").await;
    let (sim, host) = ccm::simulator_with_host_in_network("host-1").await;
    let network = host["private_net"][0]["network"].as_i64().unwrap();
    let (cloud, dedi, legacy) = (
        scope.name("cloud"),
        scope.name("dedi"),
        scope.name("legacy"),
    );
    let server = sim
        .admin()
        .create_server(ServerSeed::new(&cloud).network(network))
        .await
        .unwrap();
    let cloud_ip = server["private_net"][0]["ip"].as_str().unwrap().to_owned();
    let (dedi_number, dedi_ip) = dedicated(&sim, &dedi).await;
    let (legacy_number, legacy_ip) = dedicated(&sim, &legacy).await;
    node_with_pod_cidr(
        &scope,
        &cloud,
        &format!("hcloud://{}", server["id"]),
        "10.244.1.0/24",
        &[("InternalIP", &cloud_ip), ("Hostname", &cloud)],
        &[],
    )
    .await;
    let stuck = json!({
        "type": "NetworkUnavailable", "status": "True", "reason": "NoRouteCreated",
        "message": "RouteController failed to create a route",
    });
    node_with_pod_cidr(
        &scope,
        &dedi,
        &format!("hrobot://{dedi_number}"),
        "10.244.2.0/24",
        &[("ExternalIP", &dedi_ip), ("Hostname", &dedi)],
        &[stuck],
    )
    .await;
    node_with_pod_cidr(
        &scope,
        &legacy,
        &format!("hcloud://bm-{legacy_number}"),
        "10.244.3.0/24",
        &[("ExternalIP", &legacy_ip), ("Hostname", &legacy)],
        &[],
    )
    .await;

    let (robot_url, metadata) = (sim.robot_url(), sim.metadata_url());
    let robot_env = [
        ("ROBOT_ENABLED", "true"),
        ("ROBOT_USER", sim.robot_user()),
        ("ROBOT_PASSWORD", sim.robot_password()),
        ("ROBOT_ENDPOINT", &robot_url),
        ("HCLOUD_NETWORK", "k8s"),
        ("HCLOUD_METADATA_ENDPOINT", &metadata),
        ("HCLOUD_LOAD_BALANCERS_ENABLED", "false"),
    ];

    // plan names the route and the Warnings the route controller will write, from its decision.
    let plan_access = scope.admin_access("plan").await;
    let planned = ccm::plan_json(
        &plan_access.kubeconfig,
        &sim,
        &robot_env,
        &["--cluster-cidr=10.244.0.0/16"],
    )
    .await;
    let routes = planned["objects"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|o| o["kind"] == "Routes")
        .unwrap_or_else(|| panic!("no Routes object: {planned:#}"));
    let targets: Vec<&str> = routes["changes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["target"].as_str())
        .collect();
    assert!(
        targets.contains(&format!("route 10.244.1.0/24 via node {cloud}").as_str()),
        "{routes:#}"
    );
    assert!(
        !targets
            .iter()
            .any(|t| t.contains(&dedi) && t.starts_with("route")),
        "{routes:#}"
    );
    for name in [&dedi, &legacy] {
        let warned = routes["warnings"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|w| {
                w["reason"] == "RouteNotSupported"
                    && w["message"]
                        .as_str()
                        .is_some_and(|m| m.contains(name.as_str()))
            })
            .count();
        assert_eq!(warned, 1, "{name}: {routes:#}");
    }

    let access = scope.admin_access("ccm").await;
    let metrics_port = ccm::free_port();
    let metrics_address = format!("127.0.0.1:{metrics_port}");
    let mut env = robot_env.to_vec();
    env.extend([
        ("HCLOUD_METRICS_ENABLED", "true"),
        ("HCLOUD_METRICS_ADDRESS", &metrics_address),
    ]);
    let _ccm = spawn_ccm(
        &access.kubeconfig,
        &sim,
        &env,
        &[
            "--cluster-cidr=10.244.0.0/16",
            "--route-reconciliation-period=1s",
            &scope.lease_flag(),
        ],
    );
    let nodes = scope.nodes();
    let wait = Duration::from_secs(30);
    eventually("the cloud Node's route", wait, || async {
        (network_unavailable(&nodes, &cloud).await
            == Some(("False".to_owned(), "RouteCreated".to_owned())))
        .then_some(())
    })
    .await;
    eventually("the stuck condition undone", wait, || async {
        (network_unavailable(&nodes, &dedi).await
            == Some(("False".to_owned(), "RouteNotSupported".to_owned())))
        .then_some(())
    })
    .await;
    // More passes: the Warnings stay one per Node.
    let passes = || async {
        let text = ccm::metrics(metrics_port).await?;
        Some(ccm::metric(&text, "route_controller_route_sync_total", "") as u64)
    };
    let start = eventually("route passes", wait, passes).await;
    eventually("three more route passes", wait, || async {
        passes().await.filter(|n| *n >= start + 3)
    })
    .await;
    for name in [&dedi, &legacy] {
        let events = route_not_supported(&scope, name).await;
        assert_eq!(events.len(), 1, "{name}: {events:?}");
        assert_eq!(events[0].count.unwrap_or(1), 1, "{name}: {events:?}");
        assert_eq!(events[0].type_.as_deref(), Some("Warning"));
        let message = events[0].message.as_deref().unwrap_or_default();
        assert!(message.contains("CNI"), "{message}");
    }
    assert_eq!(network_unavailable(&nodes, &legacy).await, None);
    let routes: Vec<(String, String)> = sim.admin().state().await.unwrap()["networks"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|n| n["routes"].as_array().cloned().unwrap_or_default())
        .map(|r| {
            (
                r["destination"].as_str().unwrap_or_default().to_owned(),
                r["gateway"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(routes, vec![("10.244.1.0/24".to_owned(), cloud_ip)]);
}
