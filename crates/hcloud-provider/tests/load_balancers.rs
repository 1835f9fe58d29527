//! The Hetzner load balancer implementation against the simulator: creation, naming and
//! adoption, services per port, targets, networks, status, deletion, errors and the request
//! cost of a no-op ensure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::{CloudProvider as _, Error, LoadBalancer as _};
use hcloud_api::api::params::ListParams;
use hcloud_api::models::{self, TargetSpec, TargetType};
use hcloud_api::{Client, ClientConfig, RetryConfig, Token};
use hcloud_provider::load_balancers::SERVICE_UID_LABEL;
use hcloud_provider::{
    HcloudLoadBalancers, HcloudProvider, LoadBalancerSettings, NetworkRef, ProviderSettings,
};
use hcloud_sim::{NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{
    LoadBalancerStatus, Node, NodeSpec, Service, ServicePort, ServiceSpec,
};

const CLUSTER: &str = "kubernetes";
const UID: &str = "0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab";
const DEFAULT_NAME: &str = "a0f2f6c0e1b2a4c3d9e8f0123456789a";
const A: &str = "load-balancer.hetzner.cloud/";

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

fn fast(settings: LoadBalancerSettings) -> LoadBalancerSettings {
    LoadBalancerSettings {
        action_timeout: Duration::from_secs(5),
        retry_after: Duration::from_millis(50),
        ..settings
    }
}

fn located() -> LoadBalancerSettings {
    fast(LoadBalancerSettings {
        location: Some("fsn1".into()),
        ..LoadBalancerSettings::default()
    })
}

/// A simulator with network `k8s` and servers `worker-1..3` attached to it.
struct Env {
    sim: Simulator,
    client: Client,
    /// Server IDs of worker-1..3.
    servers: Vec<i64>,
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
        let mut servers = Vec::new();
        for i in 1..=3 {
            let server = sim
                .admin()
                .create_server(ServerSeed::new(format!("worker-{i}")).network(network))
                .await
                .unwrap();
            servers.push(server["id"].as_i64().unwrap());
        }
        let client = client(&sim);
        Self {
            sim,
            client,
            servers,
        }
    }

    /// The load balancers through the provider, as the binary would wire them.
    async fn lbs_with(&self, settings: LoadBalancerSettings, network: bool) -> HcloudLoadBalancers {
        let provider = HcloudProvider::new(
            self.client.clone(),
            ProviderSettings {
                network: network.then(|| NetworkRef::Name("k8s".into())),
                load_balancers: Some(settings.clone()),
                ..ProviderSettings::default()
            },
        )
        .await
        .unwrap();
        assert!(provider.load_balancer().is_some());
        let wired = provider.hcloud_load_balancers().unwrap();
        HcloudLoadBalancers::new(self.client.clone(), settings, wired.network_id())
    }

    async fn lbs(&self) -> HcloudLoadBalancers {
        self.lbs_with(located(), false).await
    }

    async fn all(&self) -> Vec<models::LoadBalancer> {
        self.client
            .load_balancers()
            .list_all(&ListParams::default())
            .await
            .unwrap()
    }

    async fn only(&self) -> models::LoadBalancer {
        let all = self.all().await;
        assert_eq!(all.len(), 1, "{all:#?}");
        all.into_iter().next().unwrap()
    }

    fn node(&self, i: usize) -> Arc<Node> {
        node(
            &format!("worker-{}", i + 1),
            &format!("hcloud://{}", self.servers[i]),
            &[],
        )
    }

    async fn counts(&self) -> BTreeMap<String, u64> {
        self.sim.admin().request_counts().await.unwrap()
    }
}

fn node(name: &str, provider_id: &str, labels: &[(&str, &str)]) -> Arc<Node> {
    let mut node = Node::default();
    node.metadata.name = Some(name.into());
    node.metadata.labels = Some(
        labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
    );
    node.spec = Some(NodeSpec {
        provider_id: Some(provider_id.into()),
        ..NodeSpec::default()
    });
    Arc::new(node)
}

/// A Service with `(port, protocol, nodePort)` ports and `load-balancer.hetzner.cloud/`
/// annotations (keys without the prefix).
fn service(ports: &[(i32, &str, i32)], annotations: &[(&str, &str)]) -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some("web".into());
    svc.metadata.namespace = Some("default".into());
    svc.metadata.uid = Some(UID.into());
    svc.metadata.annotations = Some(
        annotations
            .iter()
            .map(|(k, v)| (format!("{A}{k}"), (*v).to_owned()))
            .collect(),
    );
    svc.spec = Some(ServiceSpec {
        type_: Some("LoadBalancer".into()),
        ports: Some(
            ports
                .iter()
                .map(|(port, protocol, node_port)| ServicePort {
                    port: *port,
                    protocol: Some((*protocol).into()),
                    node_port: Some(*node_port),
                    ..ServicePort::default()
                })
                .collect(),
        ),
        ..ServiceSpec::default()
    });
    svc
}

fn ingress(status: &LoadBalancerStatus) -> Vec<String> {
    status
        .ingress
        .clone()
        .unwrap_or_default()
        .into_iter()
        .map(|i| i.ip.or(i.hostname).unwrap_or_default())
        .collect()
}

/// (listen, destination, health check port) of every service.
fn ports(lb: &models::LoadBalancer) -> Vec<(u16, u16, u16)> {
    let mut ports: Vec<_> = lb
        .services
        .iter()
        .map(|s| {
            (
                s.listen_port,
                s.destination_port,
                s.health_check.as_ref().map(|h| h.port).unwrap_or_default(),
            )
        })
        .collect();
    ports.sort_unstable();
    ports
}

/// (server ID, use_private_ip) of every target.
fn targets(lb: &models::LoadBalancer) -> Vec<(i64, bool)> {
    let mut targets: Vec<_> = lb
        .targets
        .iter()
        .map(|t| {
            assert_eq!(t.kind, TargetType::Server);
            (t.server.as_ref().unwrap().id, t.use_private_ip)
        })
        .collect();
    targets.sort_unstable();
    targets
}

#[tokio::test]
async fn creates_from_scratch_and_a_second_ensure_costs_one_listing() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(
        &[(80, "TCP", 30080), (53, "UDP", 30053), (443, "TCP", 30443)],
        &[],
    );
    let nodes = [env.node(0), env.node(1)];
    assert_eq!(lbs.get_load_balancer(CLUSTER, &svc).await.unwrap(), None);
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();

    let lb = env.only().await;
    assert_eq!(lb.name, DEFAULT_NAME);
    assert_eq!(lbs.get_load_balancer_name(CLUSTER, &svc), DEFAULT_NAME);
    assert_eq!(
        lb.labels.get(SERVICE_UID_LABEL).map(String::as_str),
        Some(UID)
    );
    assert_eq!(lb.location.name, "fsn1");
    assert_eq!(lb.load_balancer_type.name, "lb11");
    assert_eq!(lb.algorithm.kind, models::AlgorithmType::RoundRobin);
    assert_eq!(ports(&lb), vec![(80, 30080, 30080), (443, 30443, 30443)]);
    for s in &lb.services {
        assert_eq!(s.protocol, models::ServiceProtocol::Tcp);
        let hc = s.health_check.as_ref().unwrap();
        assert_eq!(hc.protocol, models::HealthCheckProtocol::Tcp);
        assert_eq!((hc.interval, hc.timeout, hc.retries), (15, 10, 3));
    }
    assert_eq!(
        targets(&lb),
        vec![(env.servers[0], false), (env.servers[1], false)]
    );
    let ipv4 = lb.public_net.ipv4.ip.clone().unwrap();
    let ipv6 = lb.public_net.ipv6.ip.clone().unwrap();
    assert_eq!(ingress(&status), vec![ipv4, ipv6]);
    let modes: Vec<_> = status
        .ingress
        .clone()
        .unwrap()
        .into_iter()
        .map(|i| i.ip_mode.unwrap_or_default())
        .collect();
    assert_eq!(modes, vec!["VIP", "VIP"]);
    assert_eq!(
        lbs.get_load_balancer(CLUSTER, &svc).await.unwrap(),
        Some(status.clone())
    );

    // Nothing changed: one listing, no action.
    env.sim.admin().reset_request_counts().await.unwrap();
    let again = lbs
        .ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(again, status);
    let counts = env.counts().await;
    assert_eq!(
        counts,
        BTreeMap::from([("GET /load_balancers".to_owned(), 1)]),
        "{counts:?}"
    );
    assert_eq!(env.only().await.id, lb.id);
}

#[tokio::test]
async fn creation_needs_a_location_or_network_zone() {
    let env = Env::start().await;
    let lbs = env
        .lbs_with(fast(LoadBalancerSettings::default()), false)
        .await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    let err = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    for part in [
        "default/web",
        "no location or network zone",
        "load-balancer.hetzner.cloud/location",
        "load-balancer.hetzner.cloud/network-zone",
        "HCLOUD_LOAD_BALANCERS_LOCATION",
    ] {
        assert!(text.contains(part), "{text}");
    }
    assert!(env.all().await.is_empty());

    // The annotation is enough; and a network zone works as well.
    let svc = service(&[(80, "TCP", 30080)], &[("location", "nbg1")]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    assert_eq!(env.only().await.location.name, "nbg1");

    let env = Env::start().await;
    let lbs = env
        .lbs_with(
            fast(LoadBalancerSettings {
                network_zone: Some("us-east".into()),
                ..LoadBalancerSettings::default()
            }),
            false,
        )
        .await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    assert_eq!(env.only().await.location.name, "ash");
}

#[tokio::test]
async fn ports_added_changed_and_removed() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let nodes = [env.node(0)];
    let svc = service(&[(80, "TCP", 30080), (443, "TCP", 30443)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();

    let svc = service(
        &[(80, "TCP", 30081), (8080, "TCP", 30808)],
        &[
            ("health-check-interval", "5s"),
            ("uses-proxyprotocol", "true"),
        ],
    );
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
    let lb = env.only().await;
    assert_eq!(ports(&lb), vec![(80, 30081, 30081), (8080, 30808, 30808)]);
    assert!(lb.services.iter().all(|s| s.proxyprotocol));
    assert!(
        lb.services
            .iter()
            .all(|s| s.health_check.as_ref().unwrap().interval == 5)
    );
    assert!(
        status
            .ingress
            .unwrap()
            .iter()
            .all(|i| i.ip_mode.as_deref() == Some("Proxy"))
    );

    // And converged: the next ensure changes nothing.
    env.sim.admin().reset_request_counts().await.unwrap();
    lbs.ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(env.counts().await.len(), 1);
}

#[tokio::test]
async fn update_load_balancer_changes_targets_only() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0), env.node(1)])
        .await
        .unwrap();

    // Node 0 removed, node 2 added; the port change is not applied by an update.
    let changed_ports = service(&[(80, "TCP", 30099)], &[]);
    lbs.update_load_balancer(CLUSTER, &changed_ports, &[env.node(1), env.node(2)])
        .await
        .unwrap();
    let lb = env.only().await;
    assert_eq!(
        targets(&lb),
        vec![(env.servers[1], false), (env.servers[2], false)]
    );
    assert_eq!(ports(&lb), vec![(80, 30080, 30080)]);

    // Unknown providerIDs and Robot nodes are skipped, not errors.
    lbs.update_load_balancer(
        CLUSTER,
        &svc,
        &[
            env.node(1),
            node("robot", "hrobot://42", &[]),
            node("other", "aws:///eu-west-1a/i-1", &[]),
        ],
    )
    .await
    .unwrap();
    assert_eq!(targets(&env.only().await), vec![(env.servers[1], false)]);
}

#[tokio::test]
async fn node_selector_filters_targets() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let nodes = [
        node(
            "worker-1",
            &format!("hcloud://{}", env.servers[0]),
            &[("pool", "edge")],
        ),
        node(
            "worker-2",
            &format!("hcloud://{}", env.servers[1]),
            &[("pool", "batch")],
        ),
        node(
            "worker-3",
            &format!("hcloud://{}", env.servers[2]),
            &[("pool", "edge")],
        ),
    ];
    let svc = service(&[(80, "TCP", 30080)], &[("node-selector", "pool=edge")]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(
        targets(&env.only().await),
        vec![(env.servers[0], false), (env.servers[2], false)]
    );

    let svc = service(
        &[(80, "TCP", 30080)],
        &[("node-selector", "pool notin (edge)")],
    );
    lbs.update_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
    assert_eq!(targets(&env.only().await), vec![(env.servers[1], false)]);
}

#[tokio::test]
async fn an_existing_lb_is_adopted_by_name_and_renamed_with_the_annotation() {
    let env = Env::start().await;
    let created = env
        .client
        .load_balancers()
        .create(&models::CreateLoadBalancerRequest {
            name: "web".into(),
            load_balancer_type: "lb21".into(),
            location: Some("hel1".into()),
            labels: Some(BTreeMap::from([("team".to_owned(), "a".to_owned())])),
            ..models::CreateLoadBalancerRequest::default()
        })
        .await
        .unwrap();
    env.client.actions().wait(&created.action).await.unwrap();
    let id = created.load_balancer.id;

    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[("name", "web")]);
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let lb = env.only().await;
    assert_eq!(lb.id, id);
    assert_eq!(
        lb.labels.get(SERVICE_UID_LABEL).map(String::as_str),
        Some(UID)
    );
    assert_eq!(lb.labels.get("team").map(String::as_str), Some("a"));
    // No type annotation: the adopted lb21 is not downgraded to the default lb11.
    assert_eq!(lb.load_balancer_type.name, "lb21");
    assert_eq!(lb.location.name, "hel1");
    assert_eq!(ports(&lb), vec![(80, 30080, 30080)]);
    assert_eq!(ingress(&status)[0], lb.public_net.ipv4.ip.clone().unwrap());

    // Changing the annotation renames; found by the label now.
    let svc = service(
        &[(80, "TCP", 30080)],
        &[("name", "web-2"), ("type", "lb31")],
    );
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let lb = env.only().await;
    assert_eq!((lb.id, lb.name.as_str()), (id, "web-2"));
    assert_eq!(lb.load_balancer_type.name, "lb31");

    // Removing the type annotation keeps the current type.
    let svc = service(&[(80, "TCP", 30080)], &[("name", "web-2")]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    assert_eq!(env.only().await.load_balancer_type.name, "lb31");
}

#[tokio::test]
async fn hostname_annotation_is_the_only_ingress() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[("hostname", "lb.example.com")]);
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let ingress = status.ingress.unwrap();
    assert_eq!(ingress.len(), 1);
    assert_eq!(ingress[0].hostname.as_deref(), Some("lb.example.com"));
    assert_eq!(ingress[0].ip, None);
}

#[tokio::test]
async fn network_attach_and_private_targets() {
    let env = Env::start().await;
    let lbs = env.lbs_with(located(), true).await;
    let network = lbs.network_id().unwrap();
    let svc = service(
        &[(80, "TCP", 30080)],
        &[("use-private-ip", "true"), ("ipv6-disabled", "true")],
    );
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0), env.node(1)])
        .await
        .unwrap();
    let lb = env.only().await;
    assert_eq!(lb.private_net.len(), 1);
    assert_eq!(lb.private_net[0].network, network);
    let private_ip = lb.private_net[0].ip.clone();
    assert!(private_ip.starts_with("10.0.0."), "{private_ip}");
    assert_eq!(
        targets(&lb),
        vec![(env.servers[0], true), (env.servers[1], true)]
    );
    assert_eq!(
        ingress(&status),
        vec![lb.public_net.ipv4.ip.clone().unwrap(), private_ip.clone()]
    );

    // Public network off: only the private IP is left.
    let svc = service(
        &[(80, "TCP", 30080)],
        &[
            ("use-private-ip", "true"),
            ("disable-public-network", "true"),
        ],
    );
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0), env.node(1)])
        .await
        .unwrap();
    assert!(!env.only().await.public_net.enabled);
    assert_eq!(ingress(&status), vec![private_ip]);

    // A fixed private IP on creation (attached by an action after creation).
    let mut other = service(
        &[(80, "TCP", 30080)],
        &[
            ("private-ipv4", "10.0.0.200"),
            ("use-private-ip", "true"),
            ("disable-private-ingress", "true"),
        ],
    );
    other.metadata.uid = Some("11111111-2222-3333-4444-555555555555".into());
    let status = lbs
        .ensure_load_balancer(CLUSTER, &other, &[env.node(2)])
        .await
        .unwrap();
    let lb = env
        .all()
        .await
        .into_iter()
        .find(|l| l.name == "a11111111222233334444555555555555"[..32])
        .unwrap();
    assert_eq!(lb.private_net[0].ip, "10.0.0.200");
    assert_eq!(targets(&lb), vec![(env.servers[2], true)]);
    assert_eq!(ingress(&status).len(), 2, "public v4 + v6, no private");
}

#[tokio::test]
async fn delete_removes_the_lb_unless_protected() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    assert!(env.all().await.is_empty());
    assert_eq!(lbs.get_load_balancer(CLUSTER, &svc).await.unwrap(), None);
    // Already absent: success.
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();

    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let id = env.only().await.id;
    let action = env
        .client
        .load_balancers()
        .change_protection(id, true)
        .await
        .unwrap();
    env.client.actions().wait(&action).await.unwrap();
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    let kept = env.only().await;
    assert_eq!(kept.id, id);
    assert!(kept.protection.delete);
}

#[tokio::test]
async fn a_load_balancer_of_another_service_is_not_deleted_by_name() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[("name", "shared")]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let mut other = service(&[(80, "TCP", 30080)], &[("name", "shared")]);
    other.metadata.uid = Some("99999999-2222-3333-4444-555555555555".into());
    lbs.ensure_load_balancer_deleted(CLUSTER, &other)
        .await
        .unwrap();
    assert_eq!(env.all().await.len(), 1);
}

#[tokio::test]
async fn bad_annotations_are_clear_errors() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(
        &[(80, "TCP", 30080)],
        &[
            ("health-check-interval", "abc"),
            ("use-private-ip", "maybe"),
        ],
    );
    let err = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    let text = err.to_string();
    assert!(
        text.contains(
            "load-balancer.hetzner.cloud/health-check-interval: \"abc\" is not a duration"
        ),
        "{text}"
    );
    assert!(
        text.contains("load-balancer.hetzner.cloud/use-private-ip: \"maybe\""),
        "{text}"
    );
    let both = service(
        &[(80, "TCP", 30080)],
        &[("location", "fsn1"), ("network-zone", "eu-central")],
    );
    let err = lbs
        .ensure_load_balancer(CLUSTER, &both, &[env.node(0)])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("network-zone"), "{err}");
    assert!(env.all().await.is_empty());
    // Deleting still works with broken annotations.
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
}

#[tokio::test]
async fn a_busy_load_balancer_asks_for_a_retry() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let id = env.only().await.id;

    // Another actor starts a long action on the load balancer.
    env.sim
        .admin()
        .set_action_delay(Duration::from_secs(3))
        .await
        .unwrap();
    env.client
        .load_balancers()
        .change_algorithm(id, models::AlgorithmType::LeastConnections)
        .await
        .unwrap();
    let err = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0), env.node(1)])
        .await
        .unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_millis(50)), "{err}");
    assert!(err.to_string().contains("busy"), "{err}");
}

#[tokio::test]
async fn a_load_balancer_of_another_service_is_never_taken_over_by_name() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let owner = service(&[(80, "TCP", 30080)], &[("name", "shared")]);
    lbs.ensure_load_balancer(CLUSTER, &owner, &[env.node(0)])
        .await
        .unwrap();
    let before = env.only().await;

    let mut intruder = service(&[(443, "TCP", 30443)], &[("name", "shared")]);
    intruder.metadata.uid = Some("99999999-2222-3333-4444-555555555555".into());
    let err = lbs
        .ensure_load_balancer(CLUSTER, &intruder, &[env.node(1)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("load-balancer.hetzner.cloud/name"), "{text}");
    assert!(
        text.contains(before.labels[SERVICE_UID_LABEL].as_str()),
        "{text}"
    );

    // The owner's load balancer is untouched, and the intruder neither sees nor deletes it.
    let after = env.only().await;
    assert_eq!(after.labels, before.labels);
    assert_eq!(ports(&after), ports(&before));
    assert_eq!(targets(&after), targets(&before));
    assert!(
        lbs.get_load_balancer(CLUSTER, &intruder)
            .await
            .unwrap()
            .is_none()
    );
    lbs.ensure_load_balancer_deleted(CLUSTER, &intruder)
        .await
        .unwrap();
    assert_eq!(env.all().await.len(), 1);
}

#[tokio::test]
async fn an_unlabelled_load_balancer_is_only_touched_by_an_ensure() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    // Someone else's load balancer that happens to have the name a Service asks for.
    let svc = service(&[(80, "TCP", 30080)], &[("name", "theirs")]);
    let request = serde_json::json!({
        "name": "theirs", "load_balancer_type": "lb11", "location": "fsn1",
    });
    let created = reqwest::Client::new()
        .post(format!("{}/load_balancers", env.sim.base_url()))
        .bearer_auth(env.sim.token())
        .json(&request)
        .send()
        .await
        .unwrap();
    assert!(
        created.status().is_success(),
        "{}",
        created.text().await.unwrap()
    );

    // Without an ensure (e.g. every ensure failed), get, update and delete leave it alone.
    assert!(
        lbs.get_load_balancer(CLUSTER, &svc)
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        lbs.update_load_balancer(CLUSTER, &svc, &[env.node(0)])
            .await
            .is_err()
    );
    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    let theirs = env.only().await;
    assert!(theirs.targets.is_empty());
    assert!(!theirs.labels.contains_key(SERVICE_UID_LABEL));
}

#[tokio::test]
async fn ip_targets_the_ccm_did_not_create_are_kept() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let lb = env.only().await;
    // An IP target, as a CCM managing Robot servers would add.
    let action = env
        .client
        .load_balancers()
        .add_target(lb.id, &TargetSpec::ip("203.0.113.50"))
        .await
        .unwrap();
    env.client.actions().wait(&action).await.unwrap();

    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(1)])
        .await
        .unwrap();
    let after = env.only().await;
    assert!(
        after
            .targets
            .iter()
            .any(|t| t.ip.as_ref().is_some_and(|ip| ip.ip == "203.0.113.50")),
        "{:?}",
        after.targets
    );
    let servers: Vec<i64> = after
        .targets
        .iter()
        .filter(|t| t.kind == TargetType::Server)
        .filter_map(|t| t.server.as_ref().map(|s| s.id))
        .collect();
    assert_eq!(servers, vec![env.servers[1]]);
}

#[tokio::test]
async fn ports_without_node_ports_are_an_error_not_an_empty_load_balancer() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    // The Service loses its NodePort (allocateLoadBalancerNodePorts: false).
    let mut without = svc.clone();
    for port in without.spec.as_mut().unwrap().ports.as_mut().unwrap() {
        port.node_port = None;
    }
    let err = lbs
        .ensure_load_balancer(CLUSTER, &without, &[env.node(0)])
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidInput(_)), "{err:?}");
    assert!(err.to_string().contains("spec.ports[].nodePort"), "{err}");
    assert_eq!(
        ports(&env.only().await).len(),
        1,
        "the load balancer keeps its service"
    );
}
