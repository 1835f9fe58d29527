//! Robot dedicated servers through the provider and the real Robot client, against the
//! simulator's Robot webservice (its servers, power states, faults and rate limit set through
//! its admin API, its requests counted there): hybrid initialisation, the power state, deletion
//! only on Robot's own word, outages and the rate limit, the request cost of a burst, load
//! balancers with server and IP targets, and the controllers on the control plane.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::CloudProvider as _;
use hcloud_api::models::TargetType;
use hcloud_api::robot::{RobotClient, RobotConfig};
use hcloud_provider::{
    CacheConfig, HcloudProvider, LoadBalancerSettings, PROVIDED_BY_LABEL, ProviderSettings,
    RobotApi, RobotSettings,
};
use hcloud_sim::{
    AdminClient, Fault, RobotRateLimit, RobotServerSeed, ServerSeed, SimConfig, Simulator,
};
use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::json;

use crate::support::{
    self, Env as ControllerEnv, KubeletNode, SHUTDOWN, Setup, WAIT, addresses, eventually,
    has_taint, label, pairs, sim_client,
};

/// The simulator's Robot account, changed through its admin API, and the Robot requests it
/// counted.
struct SimRobot {
    admin: AdminClient,
}

impl SimRobot {
    /// `servers` put into `sim`'s Robot account.
    async fn with(sim: &Simulator, servers: Vec<RobotServerSeed>) -> SimRobot {
        let robot = SimRobot { admin: sim.admin() };
        for server in servers {
            robot.add(server).await;
        }
        robot
    }

    async fn add(&self, server: RobotServerSeed) {
        self.admin.add_robot_server(server).await.unwrap();
    }

    async fn remove(&self, number: u64) {
        self.admin.remove_robot_server(number).await.unwrap();
    }

    async fn rename(&self, number: u64, name: &str) {
        self.admin.rename_robot_server(number, name).await.unwrap();
    }

    async fn power(&self, number: u64, status: &str) {
        self.admin
            .set_robot_operating_status(number, status)
            .await
            .unwrap();
    }

    /// Every listing and power-state read fails with `status` and Robot's error `code` (a
    /// bare status when empty) until `fail(None)`.
    async fn fail(&self, failure: Option<(u16, &str)>) {
        let Some((status, code)) = failure else {
            self.admin.clear_robot_faults().await.unwrap();
            return;
        };
        let faults = ["/server", "/reset/{number}"].map(|path| Fault {
            status: Some(status),
            code: (!code.is_empty()).then(|| code.to_owned()),
            count: u32::MAX,
            ..Fault::new(path)
        });
        self.admin.replace_robot_faults(&faults).await.unwrap();
    }

    async fn requests(&self, endpoint: &str) -> u64 {
        let counts = self.admin.robot_request_counts().await.unwrap();
        counts.get(endpoint).copied().unwrap_or(0)
    }

    /// `GET /server` requests so far.
    async fn lists(&self) -> u64 {
        self.requests("GET /server").await
    }

    /// `GET /reset/N` requests so far.
    async fn resets(&self) -> u64 {
        self.requests("GET /reset/{id}").await
    }
}

/// The real Robot client against `sim`'s Robot webservice.
fn robot_client(sim: &Simulator) -> Arc<dyn RobotApi> {
    let config = RobotConfig::new(sim.robot_user(), sim.robot_password())
        .endpoint(&sim.robot_url())
        .unwrap();
    Arc::new(RobotClient::new(config).unwrap())
}

/// Dedicated server `number` named `name`, a `Server Auction` in FSN1-DC14 at
/// `203.0.113.<number % 250>`.
fn dedicated(number: u64, name: &str) -> RobotServerSeed {
    RobotServerSeed::new(name)
        .number(number)
        .product("Server Auction")
        .server_ip(format!("203.0.113.{}", number % 250))
        .server_ipv6_net("2a01:4f8:111:4221::")
}

fn node(name: &str, provider_id: Option<&str>) -> Node {
    serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"providerID": provider_id},
    }))
    .unwrap()
}

fn robot_settings(max_age: Duration, rate_limit_wait: Duration) -> ProviderSettings {
    ProviderSettings {
        robot: RobotSettings {
            enabled: true,
            forward_internal_ips: true,
            rate_limit_wait_time: rate_limit_wait,
            // Every shutdown check reads the power state, unless a test says otherwise.
            power_state_max_age: Duration::ZERO,
            // The simulator's Robot here has no limit; the budget has unit tests of its own.
            power_state_reads_per_hour: 0,
            legacy_provider_id: false,
        },
        cache: CacheConfig {
            robot_max_age: max_age,
            ..CacheConfig::default()
        },
        ..ProviderSettings::default()
    }
}

async fn provider(sim: &Simulator, settings: ProviderSettings) -> HcloudProvider {
    HcloudProvider::with_robot(sim_client(sim), settings, Some(robot_client(sim)))
        .await
        .unwrap()
}

/// A simulator with `servers` in its Robot account and the provider over both.
async fn started(
    servers: Vec<RobotServerSeed>,
    max_age: Duration,
    rate_limit_wait: Duration,
) -> (Simulator, SimRobot, HcloudProvider) {
    let sim = sim().await;
    let robot = SimRobot::with(&sim, servers).await;
    let p = provider(&sim, robot_settings(max_age, rate_limit_wait)).await;
    (sim, robot, p)
}

async fn sim() -> Simulator {
    Simulator::start(SimConfig::default().action_delay(Duration::from_millis(20)))
        .await
        .unwrap()
}

#[tokio::test]
async fn hybrid_nodes_are_told_apart_by_providerid_and_name() {
    let sim = sim().await;
    let cloud = sim
        .admin()
        .create_server(ServerSeed::new("cloud-1"))
        .await
        .unwrap();
    sim.admin()
        .create_server(ServerSeed::new("both"))
        .await
        .unwrap();
    let robot = SimRobot::with(
        &sim,
        vec![
            dedicated(101, "dedi-1"),
            dedicated(102, "dedi-2"),
            dedicated(103, "both"),
        ],
    )
    .await;
    let p = provider(
        &sim,
        robot_settings(Duration::from_secs(300), Duration::ZERO),
    )
    .await;
    let instances = p.instances().unwrap();

    // A cloud Node without a providerID stays a cloud server.
    let m = instances
        .instance_metadata(&node("cloud-1", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.provider_id, format!("hcloud://{}", cloud["id"]));
    assert_eq!(m.additional_labels[PROVIDED_BY_LABEL], "cloud");

    // Named like a Robot server only: a Robot Node, with the official metadata.
    let m = instances
        .instance_metadata(&node("dedi-1", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.provider_id, "hrobot://101");
    assert_eq!(m.instance_type, "Server-Auction");
    assert_eq!((m.zone.as_str(), m.region.as_str()), ("fsn1-dc14", "fsn1"));
    assert_eq!(m.additional_labels[PROVIDED_BY_LABEL], "robot");
    let addresses: Vec<_> = m
        .node_addresses
        .iter()
        .map(|a| (a.type_.clone(), a.address.clone()))
        .collect();
    assert_eq!(
        addresses,
        pairs(&[("Hostname", "dedi-1"), ("ExternalIP", "203.0.113.101")])
    );

    // The legacy providerID is read (the canonical one is what metadata reports).
    let m = instances
        .instance_metadata(&node("dedi-2", Some("hcloud://bm-102")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.provider_id, "hrobot://102");

    // A name both APIs have cannot be told apart.
    let err = instances
        .instance_metadata(&node("both", None))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("both the cloud server"), "{err}");
    assert!(
        instances
            .instance_exists(&node("both", None))
            .await
            .is_err()
    );

    // The server of a providerID the kubelet set is the Node's under another name too: a
    // Warning naming both names, not a failure, and the server exists for the Node.
    let renamed = node("renamed", Some("hrobot://102"));
    let m = instances
        .instance_metadata(&renamed)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.provider_id, "hrobot://102");
    assert_eq!(m.warnings.len(), 1, "{:?}", m.warnings);
    assert_eq!(m.warnings[0].reason, "NodeNameMismatch");
    assert!(
        m.warnings[0].message.contains(r#""renamed""#)
            && m.warnings[0].message.contains(r#""dedi-2""#),
        "{:?}",
        m.warnings
    );
    assert!(instances.instance_exists(&renamed).await.unwrap());
    // Named like its server: no Warning.
    let m = instances
        .instance_metadata(&node("dedi-1", Some("hrobot://101")))
        .await
        .unwrap()
        .unwrap();
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);

    // Without a providerID and named unlike any server: the Robot server whose server IP is
    // the Node's InternalIP.
    let mut by_ip = node("worker-7", None);
    by_ip.status = Some(k8s_openapi::api::core::v1::NodeStatus {
        addresses: Some(vec![k8s_openapi::api::core::v1::NodeAddress {
            type_: "InternalIP".into(),
            address: "203.0.113.101".into(),
        }]),
        ..Default::default()
    });
    let m = instances.instance_metadata(&by_ip).await.unwrap().unwrap();
    assert_eq!(m.provider_id, "hrobot://101");
    assert!(m.warnings.is_empty(), "{:?}", m.warnings);
    assert_eq!(robot.lists().await, 1, "one listing answered every lookup");
}

#[tokio::test]
async fn the_legacy_providerid_is_written_when_asked_for() {
    let sim = sim().await;
    let _robot = SimRobot::with(&sim, vec![dedicated(101, "dedi-1")]).await;
    let mut settings = robot_settings(Duration::from_secs(300), Duration::ZERO);
    settings.robot.legacy_provider_id = true;
    let p = provider(&sim, settings).await;
    let instances = p.instances().unwrap();
    let m = instances
        .instance_metadata(&node("dedi-1", None))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.provider_id, "hcloud://bm-101");
    // A Node that has a providerID keeps it whatever the setting (only a Node without one is
    // given one), and both forms are the same server.
    let m = instances
        .instance_metadata(&node("dedi-1", Some("hrobot://101")))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(m.additional_labels[PROVIDED_BY_LABEL], "robot");
    assert!(
        instances
            .instance_exists(&node("dedi-1", Some("hcloud://bm-101")))
            .await
            .unwrap()
    );
}

#[tokio::test]
async fn a_burst_of_fifty_dedicated_nodes_costs_one_listing() {
    let sim = sim().await;
    let servers: Vec<_> = (1..=50)
        .map(|n| dedicated(n, &format!("dedi-{n}")))
        .collect();
    let robot = SimRobot::with(&sim, servers).await;
    let p = provider(
        &sim,
        robot_settings(Duration::from_secs(300), Duration::ZERO),
    )
    .await;
    let instances = p.instances().unwrap();
    instances.expect_lookups(50);
    let nodes: Vec<_> = (1..=50)
        .map(|n| node(&format!("dedi-{n}"), Some(&format!("hrobot://{n}"))))
        .collect();
    let answers =
        futures::future::join_all(nodes.iter().map(|n| instances.instance_metadata(n))).await;
    for (n, answer) in answers.into_iter().enumerate() {
        let m = answer.unwrap().unwrap();
        assert_eq!(m.provider_id, format!("hrobot://{}", n + 1));
    }
    assert_eq!(robot.lists().await, 1);
    assert_eq!(robot.resets().await, 0);
    assert!(
        sim.admin().request_counts().await.unwrap().is_empty(),
        "Robot Nodes with a providerID cost no cloud request"
    );
    // Their existence and power state: still one listing, one power-state read per Node.
    for n in &nodes[..5] {
        assert!(instances.instance_exists(n).await.unwrap());
        assert!(!instances.instance_shutdown(n).await.unwrap());
    }
    assert_eq!((robot.lists().await, robot.resets().await), (1, 5));
}

#[tokio::test]
async fn the_shutdown_answer_is_the_power_state_read_every_time() {
    let (_sim, robot, p) = started(
        vec![dedicated(7, "dedi-7")],
        Duration::from_secs(300),
        Duration::ZERO,
    )
    .await;
    let instances = p.instances().unwrap();
    let n = node("dedi-7", Some("hrobot://7"));
    for (status, off) in [
        ("running", false),
        ("shut off", true),
        ("shut down", false),
        ("not supported", false),
        ("shut off", true),
    ] {
        robot.power(7, status).await;
        assert_eq!(
            instances.instance_shutdown(&n).await.unwrap(),
            off,
            "{status}"
        );
    }
    assert_eq!(robot.resets().await, 5);
    // A power state Robot does not give is an error, never an answer.
    robot.fail(Some((404, "RESET_NOT_AVAILABLE"))).await;
    assert!(instances.instance_shutdown(&n).await.is_err());
}

#[tokio::test]
async fn a_power_state_is_read_once_per_interval_and_never_for_a_server_robot_no_longer_lists() {
    let sim = sim().await;
    let robot = SimRobot::with(&sim, vec![dedicated(7, "dedi-7"), dedicated(8, "dedi-8")]).await;
    let with_interval = |interval: Duration| {
        let mut settings = robot_settings(Duration::from_millis(300), Duration::ZERO);
        settings.robot.power_state_max_age = interval;
        settings
    };
    let p = provider(&sim, with_interval(Duration::from_secs(3600))).await;
    let instances = p.instances().unwrap();
    let (n7, n8) = (
        node("dedi-7", Some("hrobot://7")),
        node("dedi-8", Some("hrobot://8")),
    );
    // The shutdown checks of two NotReady Nodes, pass after pass: one read each.
    for _ in 0..20 {
        assert!(!instances.instance_shutdown(&n7).await.unwrap());
        assert!(!instances.instance_shutdown(&n8).await.unwrap());
    }
    assert_eq!(robot.resets().await, 2);
    // Between reads the last answer stands.
    robot.power(7, "shut off").await;
    assert!(!instances.instance_shutdown(&n7).await.unwrap());
    assert_eq!(robot.resets().await, 2);
    // A server the list no longer has: no power-state read, and no "shut down" either.
    robot.remove(8).await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    let err = instances.instance_shutdown(&n8).await.unwrap_err();
    assert!(err.is_instance_not_found(), "{err}");
    assert_eq!(robot.resets().await, 2);

    // Once the interval is over, the power state is read again.
    let short = provider(&sim, with_interval(Duration::from_millis(200))).await;
    let instances = short.instances().unwrap();
    robot.power(7, "running").await;
    assert!(!instances.instance_shutdown(&n7).await.unwrap());
    robot.power(7, "shut off").await;
    tokio::time::sleep(Duration::from_millis(250)).await;
    assert!(instances.instance_shutdown(&n7).await.unwrap());
    assert_eq!(robot.resets().await, 4);
}

#[tokio::test]
async fn only_robot_itself_says_a_server_is_gone() {
    let (_sim, robot, p) = started(
        vec![dedicated(1, "dedi-1")],
        Duration::from_millis(300),
        Duration::ZERO,
    )
    .await;
    let instances = p.instances().unwrap();
    let first = node("dedi-1", Some("hrobot://1"));
    assert!(instances.instance_exists(&first).await.unwrap());

    // A server added after the list was read: the cached list misses it, Robot is asked
    // again before anything is answered, and it exists.
    robot.add(dedicated(2, "dedi-2")).await;
    let second = node("dedi-2", Some("hrobot://2"));
    assert!(instances.instance_exists(&second).await.unwrap());
    assert_eq!(robot.lists().await, 2);

    // An outage, a rate limit: errors, never "gone".
    robot.remove(1).await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    for failure in [
        (500, "INTERNAL_ERROR"),
        (403, "RATE_LIMIT_EXCEEDED"),
        (401, "UNAUTHORIZED"),
    ] {
        robot.fail(Some(failure)).await;
        let answer = instances.instance_exists(&first).await;
        assert!(answer.is_err(), "{failure:?}: {answer:?}");
    }

    // Robot answers without the server: gone.
    robot.fail(None).await;
    assert!(!instances.instance_exists(&first).await.unwrap());
    assert!(instances.instance_exists(&second).await.unwrap());

    // Listed under another name: the providerID is trusted, the server is the Node's still.
    robot.rename(2, "someone-else").await;
    tokio::time::sleep(Duration::from_millis(350)).await;
    assert!(instances.instance_exists(&second).await.unwrap());
}

#[tokio::test]
async fn the_rate_limit_holds_robot_calls_back_for_the_wait_time() {
    let (sim, robot, p) = started(
        vec![dedicated(1, "dedi-1")],
        Duration::from_secs(300),
        Duration::from_secs(600),
    )
    .await;
    let instances = p.instances().unwrap();
    let n = node("dedi-1", Some("hrobot://1"));
    // The simulator's own limit: every request over it, then none.
    let over_it = RobotRateLimit {
        max_request: 0,
        interval: 3600,
    };
    sim.admin()
        .set_robot_rate_limit(Some(over_it))
        .await
        .unwrap();
    assert!(instances.instance_shutdown(&n).await.is_err());
    sim.admin().set_robot_rate_limit(None).await.unwrap();
    let calls = (robot.lists().await, robot.resets().await);
    for _ in 0..3 {
        let err = instances.instance_exists(&n).await.unwrap_err();
        let chain = cloud_provider::events::error_chain(&err);
        assert!(
            chain.contains("rate limit exceeded, next try at"),
            "{chain}"
        );
        assert!(instances.instance_shutdown(&n).await.is_err());
    }
    assert_eq!(
        (robot.lists().await, robot.resets().await),
        calls,
        "held back: nothing asked"
    );
}

// ---- Load balancers -------------------------------------------------------------------------

fn lb_node(
    name: &str,
    provider_id: &str,
    labels: &[(&str, &str)],
    internal: Option<&str>,
) -> Arc<Node> {
    let labels: BTreeMap<_, _> = labels.iter().copied().collect();
    let addresses: Vec<_> = internal
        .iter()
        .map(|ip| json!({"type": "InternalIP", "address": ip}))
        .collect();
    Arc::new(
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": {"providerID": provider_id},
            "status": {"addresses": addresses},
        }))
        .unwrap(),
    )
}

fn lb_service(annotations: &[(&str, &str)]) -> Service {
    let annotations: BTreeMap<_, _> = annotations
        .iter()
        .map(|(k, v)| (format!("load-balancer.hetzner.cloud/{k}"), *v))
        .collect();
    serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "7c0a2f5e-0000-4000-8000-000000000001", "annotations": annotations},
        "spec": {"type": "LoadBalancer", "ports": [{"port": 80, "protocol": "TCP", "nodePort": 30080}]},
    }))
    .unwrap()
}

/// The targets of the only load balancer, as `server N` / `ip A`.
async fn targets(sim: &Simulator) -> Vec<String> {
    let lbs = sim_client(sim)
        .load_balancers()
        .list_all(&hcloud_api::api::params::ListParams::default())
        .await
        .unwrap();
    assert_eq!(lbs.len(), 1);
    let mut out: Vec<_> = lbs[0]
        .targets
        .iter()
        .map(|t| match t.kind {
            TargetType::Server => format!("server {}", t.server.as_ref().unwrap().id),
            TargetType::Ip => format!("ip {}", t.ip.as_ref().unwrap().ip),
            _ => "other".into(),
        })
        .collect();
    out.sort();
    out
}

fn lb_settings(max_age: Duration) -> ProviderSettings {
    ProviderSettings {
        load_balancers: Some(LoadBalancerSettings {
            location: Some("fsn1".into()),
            action_timeout: Duration::from_secs(5),
            retry_after: Duration::from_millis(50),
            ..LoadBalancerSettings::default()
        }),
        ..robot_settings(max_age, Duration::ZERO)
    }
}

#[tokio::test]
async fn load_balancers_carry_server_and_ip_targets() {
    let sim = sim().await;
    let cloud = sim
        .admin()
        .create_server(ServerSeed::new("cloud-1"))
        .await
        .unwrap();
    let cloud_id = cloud["id"].as_i64().unwrap();
    let robot = SimRobot::with(
        &sim,
        vec![dedicated(11, "dedi-11"), dedicated(12, "dedi-12")],
    )
    .await;
    let p = provider(&sim, lb_settings(Duration::ZERO)).await;
    let lbs = p.load_balancer().unwrap();
    let svc = lb_service(&[]);
    let all = vec![
        lb_node("cloud-1", &format!("hcloud://{cloud_id}"), &[], None),
        lb_node("dedi-11", "hrobot://11", &[("kind", "robot")], None),
        lb_node("dedi-12", "hcloud://bm-12", &[("kind", "robot")], None),
    ];

    // plan names the IP targets, then ensure adds exactly them.
    let plan = lbs.plan_load_balancer("k", &svc, &all).await.unwrap();
    let text = format!("{plan:?}");
    assert!(text.contains("3 targets"), "{text}");
    lbs.ensure_load_balancer("k", &svc, &all).await.unwrap();
    assert_eq!(
        targets(&sim).await,
        vec![
            "ip 203.0.113.11".to_owned(),
            "ip 203.0.113.12".to_owned(),
            format!("server {cloud_id}")
        ]
    );

    // The Node goes: so does its IP target (and a Robot outage changes nothing first).
    robot.fail(Some((500, "INTERNAL_ERROR"))).await;
    let err = lbs
        .update_load_balancer("k", &svc, &all[..2])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Robot"), "{err}");
    assert_eq!(
        targets(&sim).await.len(),
        3,
        "nothing changed on a Robot error"
    );
    robot.fail(None).await;
    lbs.update_load_balancer("k", &svc, &all[..2])
        .await
        .unwrap();
    assert_eq!(
        targets(&sim).await,
        vec!["ip 203.0.113.11".to_owned(), format!("server {cloud_id}")]
    );

    // A node selector that picks only Robot Nodes: the server target goes.
    let robot_only = lb_service(&[("node-selector", "kind=robot")]);
    lbs.ensure_load_balancer("k", &robot_only, &all)
        .await
        .unwrap();
    assert_eq!(
        targets(&sim).await,
        vec!["ip 203.0.113.11".to_owned(), "ip 203.0.113.12".to_owned()]
    );
    // Nothing left to do: the plan is empty.
    let plan = lbs
        .plan_load_balancer("k", &robot_only, &all)
        .await
        .unwrap();
    assert!(plan.changes.is_empty(), "{plan:?}");

    // A Robot Node joins: plan names its IP target, and ensure makes exactly that request.
    robot.add(dedicated(13, "dedi-13")).await;
    let mut more = all.clone();
    more.push(lb_node(
        "dedi-13",
        "hrobot://13",
        &[("kind", "robot")],
        None,
    ));
    let planned = lbs
        .plan_load_balancer("k", &robot_only, &more)
        .await
        .unwrap();
    let named: Vec<String> = planned.writes.iter().map(ToString::to_string).collect();
    assert!(
        planned
            .changes
            .iter()
            .any(|c| format!("{c:?}").contains("add target ip 203.0.113.13")),
        "{planned:?}"
    );
    sim.admin().reset_request_counts().await.unwrap();
    lbs.ensure_load_balancer("k", &robot_only, &more)
        .await
        .unwrap();
    let made: Vec<String> = sim
        .admin()
        .request_counts()
        .await
        .unwrap()
        .into_iter()
        .filter(|(request, _)| !request.starts_with("GET "))
        .flat_map(|(request, n)| std::iter::repeat_n(request, n as usize))
        .collect();
    assert_eq!(named, made);
    assert_eq!(made, ["POST /load_balancers/{id}/actions/add_target"]);
}

#[tokio::test]
async fn robot_support_off_removes_ip_targets_and_without_credentials_uses_internal_ips() {
    let sim = sim().await;
    let robot = SimRobot::with(&sim, vec![dedicated(11, "dedi-11")]).await;
    let p = provider(&sim, lb_settings(Duration::ZERO)).await;
    let svc = lb_service(&[]);
    let nodes = vec![lb_node("dedi-11", "hrobot://11", &[], Some("10.1.0.11"))];
    p.load_balancer()
        .unwrap()
        .ensure_load_balancer("k", &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(targets(&sim).await, vec!["ip 203.0.113.11".to_owned()]);

    // Without credentials (no client) and use-private-ip: the InternalIP; no Robot call.
    let network = sim
        .admin()
        .create_network(
            hcloud_sim::NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
    let lists = robot.lists().await;
    let mut settings = lb_settings(Duration::ZERO);
    settings.network = Some(hcloud_provider::NetworkRef::Id(network));
    let without = HcloudProvider::with_robot(sim_client(&sim), settings.clone(), None)
        .await
        .unwrap();
    let private = lb_service(&[("use-private-ip", "true")]);
    without
        .load_balancer()
        .unwrap()
        .ensure_load_balancer("k", &private, &nodes)
        .await
        .unwrap();
    assert_eq!(targets(&sim).await, vec!["ip 10.1.0.11".to_owned()]);
    assert_eq!(robot.lists().await, lists);

    // Robot support off: every IP target goes.
    settings.robot.enabled = false;
    let off = HcloudProvider::new(sim_client(&sim), settings)
        .await
        .unwrap();
    off.load_balancer()
        .unwrap()
        .ensure_load_balancer("k", &private, &nodes)
        .await
        .unwrap();
    assert!(targets(&sim).await.is_empty());
}

// ---- Controllers on the control plane -------------------------------------------------------

#[tokio::test]
async fn a_hybrid_cluster_is_initialised_and_robot_nodes_follow_robot() {
    let mut env = ControllerEnv::start().await;
    let cloud_name = env.name("cloud");
    let dedi_name = env.name("dedi");
    env.server(ServerSeed::new(cloud_name.clone())).await;
    let reused_name = env.name("reused");
    let robot = SimRobot::with(
        &env.sim,
        vec![dedicated(42, &dedi_name), dedicated(43, &reused_name)],
    )
    .await;
    let mut setup = Setup::default();
    setup.settings.robot = RobotSettings {
        enabled: true,
        forward_internal_ips: true,
        rate_limit_wait_time: Duration::ZERO,
        power_state_max_age: Duration::from_millis(300),
        power_state_reads_per_hour: 0,
        legacy_provider_id: false,
    };
    setup.settings.cache.robot_max_age = Duration::from_millis(300);
    let api = robot_client(&env.sim);
    let running = env.start_controllers_with_robot(setup, Some(api)).await;
    // The provider's own events (MisconfiguredInternalIP) are written once it is initialised.
    running
        .provider
        .initialize(
            env.client.clone(),
            tokio_util::sync::CancellationToken::new(),
        )
        .await
        .unwrap();
    KubeletNode::new(&cloud_name).create(&env).await;
    KubeletNode::new(&dedi_name).create(&env).await;
    KubeletNode::new(&reused_name)
        .provider_id("hcloud://bm-43")
        .create(&env)
        .await;

    let cloud = env.initialized(&cloud_name).await;
    assert_eq!(label(&cloud, PROVIDED_BY_LABEL), Some("cloud"));
    let dedi = env.initialized(&dedi_name).await;
    assert_eq!(support::provider_id(&dedi), Some("hrobot://42"));
    assert_eq!(label(&dedi, PROVIDED_BY_LABEL), Some("robot"));
    assert_eq!(
        label(&dedi, "node.kubernetes.io/instance-type"),
        Some("Server-Auction")
    );
    assert_eq!(label(&dedi, "topology.kubernetes.io/region"), Some("fsn1"));
    assert_eq!(
        label(&dedi, "topology.kubernetes.io/zone"),
        Some("fsn1-dc14")
    );
    // The addresses come with a status patch of their own.
    let external = ("ExternalIP".to_owned(), "203.0.113.42".to_owned());
    eventually("the Robot Node's ExternalIP", WAIT, || async {
        env.node(&dedi_name)
            .await
            .filter(|n| addresses(n).contains(&external))
    })
    .await;

    // NotReady and powered off: the shutdown taint; powered on again: it goes.
    env.set_ready(&dedi_name, "False").await;
    robot.power(42, "shut off").await;
    eventually("shutdown taint", WAIT, || async {
        env.node(&dedi_name)
            .await
            .filter(|n| has_taint(n, SHUTDOWN))
    })
    .await;
    // Powered on, the kubelet reports Ready again: the taint goes (as upstream).
    robot.power(42, "running").await;
    env.set_ready(&dedi_name, "True").await;
    eventually("shutdown taint removed", WAIT, || async {
        env.node(&dedi_name)
            .await
            .filter(|n| !has_taint(n, SHUTDOWN))
    })
    .await;

    // NotReady again: a Robot outage deletes nothing; Robot saying the server is gone does.
    env.set_ready(&dedi_name, "False").await;
    robot.fail(Some((503, ""))).await;
    let before = robot.lists().await;
    eventually("the outage seen", WAIT, || async {
        (robot.lists().await > before + 1).then_some(())
    })
    .await;
    assert!(env.node(&dedi_name).await.is_some());
    robot.fail(None).await;
    robot.remove(42).await;
    env.deleted(&dedi_name).await;
    assert!(env.node(&cloud_name).await.is_some());

    // A server renamed in Robot: its NotReady Node is its server's still (the providerID is
    // trusted), and is deleted once Robot no longer lists the server; its legacy providerID
    // was never rewritten.
    let reused = env.initialized(&reused_name).await;
    assert_eq!(support::provider_id(&reused), Some("hcloud://bm-43"));
    assert_eq!(label(&reused, PROVIDED_BY_LABEL), Some("robot"));
    robot.rename(43, "another-name").await;
    env.set_ready(&reused_name, "False").await;
    let before = robot.lists().await;
    eventually("listings after the rename", WAIT, || async {
        (robot.lists().await > before + 2).then_some(())
    })
    .await;
    assert!(
        env.node(&reused_name).await.is_some(),
        "deleted for its name"
    );
    robot.remove(43).await;
    env.deleted(&reused_name).await;
}
