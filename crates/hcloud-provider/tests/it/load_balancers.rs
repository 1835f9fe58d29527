//! The Hetzner load balancer implementation against the simulator: creation, naming and
//! adoption, services per port, targets, networks, status, deletion, errors and the request
//! cost of a no-op ensure.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::change::Write;
use cloud_provider::{Category, CloudProvider as _, EventRecorder, LoadBalancer as _};
use hcloud_api::Client;
use hcloud_api::api::params::ListParams;
use hcloud_api::models::{self, TargetSpec, TargetType};
use hcloud_provider::load_balancers::SERVICE_UID_LABEL;
use hcloud_provider::{
    CacheConfig, EVENT_COMPONENT, Events, HcloudLoadBalancers, HcloudProvider,
    LoadBalancerSettings, NetworkRef, ProviderSettings,
};
use hcloud_sim::{NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{
    LoadBalancerStatus, Node, NodeSpec, Service, ServicePort, ServiceSpec,
};

pub(crate) const CLUSTER: &str = "kubernetes";
const UID: &str = "0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab";
const DEFAULT_NAME: &str = "a0f2f6c0e1b2a4c3d9e8f0123456789a";
const A: &str = "load-balancer.hetzner.cloud/";

use crate::support::sim_client as client;

fn fast(settings: LoadBalancerSettings) -> LoadBalancerSettings {
    LoadBalancerSettings {
        action_timeout: Duration::from_secs(5),
        retry_after: Duration::from_millis(50),
        ..settings
    }
}

pub(crate) fn located() -> LoadBalancerSettings {
    fast(LoadBalancerSettings {
        location: Some("fsn1".into()),
        ..LoadBalancerSettings::default()
    })
}

/// A simulator with network `k8s` and servers `worker-1..3` attached to it.
pub(crate) struct Env {
    pub(crate) sim: Simulator,
    pub(crate) client: Client,
    /// Server IDs of worker-1..3.
    servers: Vec<i64>,
}

impl Env {
    pub(crate) async fn start() -> Self {
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

    /// The load balancers through the provider, as the binary would wire them. These tests
    /// change load balancers behind the provider's back (as the console would) and expect the
    /// next call to see it: every lookup reads.
    pub(crate) async fn lbs_with(
        &self,
        settings: LoadBalancerSettings,
        network: bool,
    ) -> HcloudLoadBalancers {
        self.lbs_keeping(settings, network, Duration::ZERO).await
    }

    /// Like [`Env::lbs_with`], with the snapshot of all load balancers answering lookups for
    /// `max_age`.
    async fn lbs_keeping(
        &self,
        settings: LoadBalancerSettings,
        network: bool,
        max_age: Duration,
    ) -> HcloudLoadBalancers {
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
            .with_cache_config(&CacheConfig {
                load_balancer_max_age: max_age,
                ..CacheConfig::default()
            })
    }

    async fn lbs(&self) -> HcloudLoadBalancers {
        self.lbs_with(located(), false).await
    }

    /// The load balancers ([`located`]; `network`: attached to network `k8s`), writing their
    /// events to the apiserver of `kube`, as once the provider is initialized.
    async fn lbs_recording(&self, kube: &kube::Client, network: bool) -> HcloudLoadBalancers {
        self.lbs_with(located(), network)
            .await
            .with_events(Events::with_recorder(EventRecorder::new(
                kube.clone(),
                EVENT_COMPONENT,
            )))
    }

    pub(crate) async fn all(&self) -> Vec<models::LoadBalancer> {
        self.client
            .load_balancers()
            .list_all(&ListParams::default())
            .await
            .unwrap()
    }

    /// The load balancers labelled with the UID of `svc`.
    async fn labelled(&self, svc: &Service) -> Vec<models::LoadBalancer> {
        let uid = svc.metadata.uid.as_deref().unwrap();
        self.all()
            .await
            .into_iter()
            .filter(|lb| lb.labels.get(SERVICE_UID_LABEL).map(String::as_str) == Some(uid))
            .collect()
    }

    pub(crate) async fn only(&self) -> models::LoadBalancer {
        let all = self.all().await;
        assert_eq!(all.len(), 1, "{all:#?}");
        all.into_iter().next().unwrap()
    }

    pub(crate) fn node(&self, i: usize) -> Arc<Node> {
        node(
            &format!("worker-{}", i + 1),
            &format!("hcloud://{}", self.servers[i]),
            &[],
        )
    }

    /// Managed certificates are issued (or fail) as `issuance` says.
    pub(crate) async fn issue_certificates(&self, issuance: hcloud_sim::CertificateIssuance) {
        self.sim
            .admin()
            .set_certificate_issuance(&issuance)
            .await
            .unwrap();
    }

    /// The ID of a new uploaded certificate named `name`.
    pub(crate) async fn uploaded_certificate(&self, name: &str) -> i64 {
        let seed = hcloud_sim::CertificateSeed::uploaded(name);
        let cert = self.sim.admin().create_certificate(seed).await.unwrap();
        cert["id"].as_i64().unwrap()
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
pub(crate) fn service(ports: &[(i32, &str, i32)], annotations: &[(&str, &str)]) -> Service {
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
        .unwrap()
        .done()
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
        .unwrap()
        .done()
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
    assert!(err.user_reason() == Some("InvalidConfiguration"), "{err:?}");
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
        .unwrap()
        .done()
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
        .unwrap()
        .done()
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
        .unwrap()
        .done()
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
        .unwrap()
        .done()
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
        .unwrap()
        .done()
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
        .unwrap()
        .done()
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
    let before = env.counts().await;
    let err = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap_err();
    assert!(err.user_reason() == Some("InvalidConfiguration"), "{err:?}");
    // Invalid on its face: a user error, found before any cloud request.
    assert_eq!(err.category(), Category::User);
    assert_eq!(err.user_reason(), Some("InvalidConfiguration"));
    assert_eq!(
        env.counts().await,
        before,
        "no cloud request for a bad annotation"
    );
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
    assert_eq!(err.category(), Category::Transient, "{err}");
    assert!(err.to_string().contains("busy"), "{err}");
}

#[tokio::test]
async fn a_node_whose_server_is_missing_never_blocks_the_load_balancer() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    let ghost = node("ghost", "hcloud://987654321", &[]);
    let nodes = [env.node(0), ghost.clone(), env.node(1)];

    // Created with the other targets although the create request with all of them is
    // answered 404.
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap()
        .done()
        .unwrap();
    assert!(!ingress(&status).is_empty());
    let lb = env.only().await;
    let mut servers: Vec<i64> = targets(&lb).into_iter().map(|(id, _)| id).collect();
    servers.sort_unstable();
    assert_eq!(servers, [env.servers[0], env.servers[1]]);

    // A target update with the ghost adds the new Node and still leaves the ghost out.
    let nodes = [env.node(0), ghost, env.node(1), env.node(2)];
    lbs.update_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
    let mut servers: Vec<i64> = targets(&env.only().await)
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    servers.sort_unstable();
    assert_eq!(servers, env.servers);

    // A second ensure finds nothing to change but the ghost again: still no error.
    lbs.ensure_load_balancer(CLUSTER, &svc, &nodes)
        .await
        .unwrap();
}

/// The API refuses a target with `resource_limit_exceeded` (a limit the type's count did not
/// show): as officially, the targets that fit stay, the others are left out with
/// `MaxTargetsReached`, and the sync goes on without asking again for each of them.
#[tokio::test]
async fn a_target_limit_of_the_api_leaves_out_the_rest_and_goes_on() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    env.sim.admin().reset_request_counts().await.unwrap();
    env.sim
        .admin()
        .inject_fault(
            hcloud_sim::Fault::new("/load_balancers/{id}/actions/add_target")
                .method("POST")
                .code("resource_limit_exceeded"),
        )
        .await
        .unwrap();
    lbs.update_load_balancer(CLUSTER, &svc, &[env.node(0), env.node(1), env.node(2)])
        .await
        .unwrap();
    let counts = env.counts().await;
    assert_eq!(
        counts.get("POST /load_balancers/{id}/actions/add_target"),
        Some(&1),
        "not asked again for the other Node: {counts:?}"
    );
    assert_eq!(targets(&env.only().await), vec![(env.servers[0], false)]);
    // A full ensure goes on as well.
    env.sim
        .admin()
        .inject_fault(
            hcloud_sim::Fault::new("/load_balancers/{id}/actions/add_target")
                .method("POST")
                .code("resource_limit_exceeded"),
        )
        .await
        .unwrap();
    let status = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0), env.node(1)])
        .await
        .unwrap()
        .done()
        .unwrap();
    assert!(!ingress(&status).is_empty());
}

#[tokio::test]
async fn an_unknown_location_is_rejected_and_retried() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[("location", "mars1")]);
    let err = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap_err();
    // The API's refusal: the location may become orderable, so it is retried.
    assert_eq!(err.category(), Category::Rejected, "{err:?}");
    assert!(err.to_string().contains("mars1"), "{err}");
    assert!(env.all().await.is_empty());
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
    // The owner may let go of it: retried (the LoadBalancerOwnedByOtherService Warning says
    // why).
    assert_eq!(err.category(), Category::Rejected, "{err:?}");
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
async fn ip_targets_are_removed_while_robot_support_is_off() {
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
    // As the official CCM without Robot: no IP target belongs to a node it manages.
    assert!(
        !after.targets.iter().any(|t| t.kind == TargetType::Ip),
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
    assert!(err.user_reason() == Some("InvalidConfiguration"), "{err:?}");
    assert!(err.to_string().contains("spec.ports[].nodePort"), "{err}");
    assert_eq!(
        ports(&env.only().await).len(),
        1,
        "the load balancer keeps its service"
    );
}

/// Change a service of the load balancer behind the CCM's back, as a person would.
async fn tune_by_hand(env: &Env, lb: &models::LoadBalancer) {
    let lbs = env.client.load_balancers();
    let update = models::ServiceUpdate {
        listen_port: 80,
        proxyprotocol: Some(true),
        health_check: Some(models::HealthCheck {
            protocol: models::HealthCheckProtocol::Tcp,
            port: 30080,
            interval: 5,
            timeout: 3,
            retries: 1,
            http: None,
        }),
        ..models::ServiceUpdate::default()
    };
    let a = lbs.update_service(lb.id, &update).await.unwrap();
    env.client.actions().wait(&a).await.unwrap();
    let a = lbs
        .change_algorithm(lb.id, models::AlgorithmType::LeastConnections)
        .await
        .unwrap();
    env.client.actions().wait(&a).await.unwrap();
    let a = lbs.change_type(lb.id, "lb21").await.unwrap();
    env.client.actions().wait(&a).await.unwrap();
    lbs.update(
        lb.id,
        &models::UpdateRequest {
            name: Some("renamed-by-hand".into()),
            labels: None,
        },
    )
    .await
    .unwrap();
}

#[tokio::test]
async fn takeover_leaves_settings_nobody_asked_for_alone() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let lb = env.only().await;
    tune_by_hand(&env, &lb).await;

    env.sim.admin().reset_request_counts().await.unwrap();
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let counts = env.counts().await;
    assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");
    let after = env.only().await;
    assert_eq!(after.name, "renamed-by-hand");
    assert_eq!(
        after.algorithm.kind,
        models::AlgorithmType::LeastConnections
    );
    assert_eq!(after.load_balancer_type.name, "lb21");
    let first = &after.services[0];
    assert!(first.proxyprotocol);
    let hc = first.health_check.as_ref().unwrap();
    assert_eq!((hc.interval, hc.timeout, hc.retries), (5, 3, 1));

    // What is asked for (annotation or variable) is enforced.
    let settings = LoadBalancerSettings {
        uses_proxyprotocol: Some(false),
        health_check_interval: Some(Duration::from_secs(20)),
        lb_type: Some("lb11".into()),
        ..located()
    };
    let lbs = env.lbs_with(settings, false).await;
    let asked = service(
        &[(80, "TCP", 30080)],
        &[("algorithm-type", "Round_Robin"), ("name", "web")],
    );
    lbs.ensure_load_balancer(CLUSTER, &asked, &[env.node(0)])
        .await
        .unwrap();
    let after = env.only().await;
    assert_eq!(after.name, "web");
    assert_eq!(after.algorithm.kind, models::AlgorithmType::RoundRobin);
    assert_eq!(after.load_balancer_type.name, "lb11");
    let first = &after.services[0];
    assert!(!first.proxyprotocol);
    let hc = first.health_check.as_ref().unwrap();
    // The interval variable makes the check follow the (tcp) protocol; timeout and retries
    // nobody set stay as they were.
    assert_eq!((hc.interval, hc.timeout, hc.retries), (20, 3, 1));
}

#[tokio::test]
async fn http_status_codes_and_lazy_validation() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    // A bad HTTP health-check field and a bad http-* value are unused while all is TCP.
    let tcp = service(
        &[(80, "TCP", 30080)],
        &[
            ("health-check-http-validate-certificate", "maybe"),
            ("http-sticky-sessions", "perhaps"),
            ("http-status-codes", "200,204"),
        ],
    );
    lbs.ensure_load_balancer(CLUSTER, &tcp, &[env.node(0)])
        .await
        .unwrap();
    let hc = env.only().await.services[0].health_check.clone().unwrap();
    assert_eq!(hc.protocol, models::HealthCheckProtocol::Tcp);

    // Once the check is HTTP the bad value is used: a clear error.
    let http_check = service(
        &[(80, "TCP", 30080)],
        &[
            ("health-check-protocol", "HTTP"),
            ("health-check-http-validate-certificate", "maybe"),
            ("http-status-codes", "200,204"),
        ],
    );
    let err = lbs
        .ensure_load_balancer(CLUSTER, &http_check, &[env.node(0)])
        .await
        .unwrap_err();
    assert!(err.user_reason() == Some("InvalidConfiguration"), "{err:?}");
    assert!(
        err.to_string().contains(
            "load-balancer.hetzner.cloud/health-check-http-validate-certificate: \"maybe\""
        ),
        "{err}"
    );
    let fixed = service(
        &[(80, "TCP", 30080)],
        &[
            ("health-check-protocol", "HTTP"),
            ("http-status-codes", "200,204"),
        ],
    );
    lbs.ensure_load_balancer(CLUSTER, &fixed, &[env.node(0)])
        .await
        .unwrap();
    let hc = env.only().await.services[0].health_check.clone().unwrap();
    assert_eq!(hc.protocol, models::HealthCheckProtocol::Http);
    assert_eq!(hc.http.unwrap().status_codes, vec!["200", "204"]);
}

#[tokio::test]
async fn location_beats_network_zone() {
    let env = Env::start().await;
    let lbs = env
        .lbs_with(fast(LoadBalancerSettings::default()), false)
        .await;
    let both = service(
        &[(80, "TCP", 30080)],
        &[("location", "nbg1"), ("network-zone", "eu-central")],
    );
    lbs.ensure_load_balancer(CLUSTER, &both, &[env.node(0)])
        .await
        .unwrap();
    let lb = env.only().await;
    assert_eq!(lb.location.name, "nbg1");
}

#[tokio::test]
async fn a_new_private_ipv4_reattaches_and_other_networks_are_left() {
    let env = Env::start().await;
    let other = env
        .sim
        .admin()
        .create_network(
            NetworkSeed::new("other", "10.9.0.0/16").subnet("10.9.0.0/24", "eu-central"),
        )
        .await
        .unwrap();
    let no_network = env.lbs_with(located(), false).await;
    let plain = service(&[(80, "TCP", 30080)], &[]);
    no_network
        .ensure_load_balancer(CLUSTER, &plain, &[env.node(0)])
        .await
        .unwrap();
    let lb = env.only().await;
    // Someone attaches it to another network.
    let a = env
        .client
        .load_balancers()
        .attach_to_network(
            lb.id,
            &models::AttachToNetworkRequest {
                network: other,
                ..models::AttachToNetworkRequest::default()
            },
        )
        .await
        .unwrap();
    env.client.actions().wait(&a).await.unwrap();

    let lbs = env.lbs_with(located(), true).await;
    let ours = lbs.network_id().unwrap();
    let nets = |lb: &models::LoadBalancer| -> Vec<(i64, String)> {
        lb.private_net
            .iter()
            .map(|p| (p.network, p.ip.clone()))
            .collect()
    };
    let svc = service(&[(80, "TCP", 30080)], &[("private-ipv4", "10.0.0.50")]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    assert_eq!(
        nets(&env.only().await),
        vec![(ours, "10.0.0.50".to_owned())]
    );

    let moved = service(&[(80, "TCP", 30080)], &[("private-ipv4", "10.0.0.60")]);
    lbs.ensure_load_balancer(CLUSTER, &moved, &[env.node(0)])
        .await
        .unwrap();
    assert_eq!(
        nets(&env.only().await),
        vec![(ours, "10.0.0.60".to_owned())]
    );

    // Without HCLOUD_NETWORK the load balancer is detached from every network.
    no_network
        .ensure_load_balancer(CLUSTER, &plain, &[env.node(0)])
        .await
        .unwrap();
    assert!(env.only().await.private_net.is_empty());
}

#[tokio::test]
async fn duplicates_use_the_lowest_id_and_are_all_deleted() {
    let env = Env::start().await;
    let lbs = env.lbs().await;
    let svc = service(&[(80, "TCP", 30080)], &[]);
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let first = env.only().await;
    // A second load balancer with the same UID label (e.g. a half-finished migration).
    let mut labels = models::Labels::new();
    labels.insert(SERVICE_UID_LABEL.into(), UID.into());
    let second = env
        .client
        .load_balancers()
        .create(&models::CreateLoadBalancerRequest {
            name: "duplicate".into(),
            load_balancer_type: "lb11".into(),
            location: Some("fsn1".into()),
            labels: Some(labels),
            ..models::CreateLoadBalancerRequest::default()
        })
        .await
        .unwrap();
    env.client.actions().wait(&second.action).await.unwrap();

    let planned = lbs
        .plan_load_balancer(CLUSTER, &svc, &[env.node(1)])
        .await
        .unwrap();
    let warning = planned
        .warnings
        .iter()
        .find(|w| w.reason == "DuplicateLoadBalancers")
        .expect("a duplicate warning");
    assert!(warning.message.contains("\"duplicate\""), "{warning:?}");
    assert!(
        warning.message.contains(&format!("(ID {})", first.id)),
        "the lowest ID is used: {warning:?}"
    );

    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(1)])
        .await
        .unwrap();
    let dup = env
        .client
        .load_balancers()
        .get(second.load_balancer.id)
        .await
        .unwrap();
    assert!(dup.targets.is_empty() && dup.services.is_empty(), "{dup:?}");

    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    assert!(env.all().await.is_empty());
}

#[tokio::test]
async fn managed_certificates_are_created_issued_attached_and_deleted() {
    let env = Env::start().await;
    env.issue_certificates(
        hcloud_sim::CertificateIssuance::default()
            .delay(Duration::from_millis(100))
            .fail_domain("broken.example.com"),
    )
    .await;
    let lbs = env.lbs().await;
    let svc = service(
        &[(443, "TCP", 30443)],
        &[
            ("protocol", "https"),
            ("certificate-type", "managed"),
            ("http-managed-certificate-domains", "shop.example.com"),
        ],
    );
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let certs = env
        .client
        .certificates()
        .list_all(&Default::default())
        .await
        .unwrap();
    assert_eq!(certs.len(), 1, "{certs:?}");
    let cert = &certs[0];
    assert_eq!(cert.name, format!("ccm-managed-certificate-{UID}"));
    assert_eq!(
        cert.labels.get(SERVICE_UID_LABEL).map(String::as_str),
        Some(UID)
    );
    assert_eq!(
        cert.status.as_ref().and_then(|s| s.issuance.clone()),
        Some(models::IssuanceStatus::Completed)
    );
    let lb = env.only().await;
    assert_eq!(
        lb.services[0].http.as_ref().unwrap().certificates,
        vec![cert.id]
    );

    // A no-op ensure reads no certificates.
    env.sim.admin().reset_request_counts().await.unwrap();
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let counts = env.counts().await;
    assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");

    lbs.ensure_load_balancer_deleted(CLUSTER, &svc)
        .await
        .unwrap();
    assert!(env.all().await.is_empty());
    let left = env
        .client
        .certificates()
        .list_all(&Default::default())
        .await
        .unwrap();
    assert!(left.is_empty(), "{left:?}");

    // A failed issuance is an error naming the certificate.
    let broken = service(
        &[(443, "TCP", 30443)],
        &[
            ("protocol", "https"),
            ("certificate-type", "managed"),
            ("http-managed-certificate-name", "shop-cert"),
            ("http-managed-certificate-domains", "broken.example.com"),
        ],
    );
    let err = lbs
        .ensure_load_balancer(CLUSTER, &broken, &[env.node(0)])
        .await
        .unwrap_err();
    assert!(err.to_string().contains("\"shop-cert\""), "{err}");
    assert!(err.to_string().contains("issuance failed"), "{err}");
    assert!(env.all().await.is_empty());
}

#[tokio::test]
async fn switching_to_a_managed_certificate_replaces_the_uploaded_one() {
    let env = Env::start().await;
    let uploaded_id = env.uploaded_certificate("shop-upload").await;
    let lbs = env.lbs().await;
    let https = |annotations: &[(&str, &str)]| service(&[(443, "TCP", 30443)], annotations);
    let with_upload = https(&[("protocol", "https"), ("http-certificates", "shop-upload")]);
    lbs.ensure_load_balancer(CLUSTER, &with_upload, &[env.node(0)])
        .await
        .unwrap();
    let certs_of =
        |lb: &models::LoadBalancer| lb.services[0].http.as_ref().unwrap().certificates.clone();
    assert_eq!(certs_of(&env.only().await), vec![uploaded_id]);

    let managed = https(&[
        ("protocol", "https"),
        ("certificate-type", "managed"),
        ("http-managed-certificate-domains", "shop.example.com"),
    ]);
    lbs.ensure_load_balancer(CLUSTER, &managed, &[env.node(0)])
        .await
        .unwrap();
    let labelled = env
        .client
        .certificates()
        .list_all(
            &hcloud_api::api::params::ListCertificatesParams::label_selector(format!(
                "{SERVICE_UID_LABEL}={UID}"
            )),
        )
        .await
        .unwrap();
    assert_eq!(labelled.len(), 1, "{labelled:?}");
    assert_eq!(certs_of(&env.only().await), vec![labelled[0].id]);

    // Settled: a no-op ensure is one listing again (the certificate ID is remembered).
    env.sim.admin().reset_request_counts().await.unwrap();
    lbs.ensure_load_balancer(CLUSTER, &managed, &[env.node(0)])
        .await
        .unwrap();
    let counts = env.counts().await;
    assert_eq!(counts.values().sum::<u64>(), 1, "{counts:?}");
}

#[tokio::test]
async fn a_plan_reports_without_writing_and_operations_are_counted() {
    let env = Env::start().await;
    let operations = hcloud_provider::Operations::new();
    let lbs = env.lbs().await.with_operations(operations.clone());
    let svc = service(&[(80, "TCP", 30080), (53, "UDP", 30053)], &[]);

    env.sim.admin().reset_request_counts().await.unwrap();
    let planned = lbs
        .plan_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let created: Vec<&str> = planned.changes.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(
        created,
        vec![format!(
            "load balancer {DEFAULT_NAME:?} (lb11 in fsn1, 1 services, 1 targets)"
        )],
        "{planned:?}"
    );
    assert_eq!(
        planned.writes,
        vec![Write::cloud("POST /load_balancers")],
        "{planned:?}"
    );
    let reasons: Vec<&str> = planned.warnings.iter().map(|w| w.reason.as_str()).collect();
    assert!(
        reasons.contains(&"LoadBalancerTypeUnconfigured"),
        "{reasons:?}"
    );
    assert!(
        reasons.contains(&"UnsupportedProtocolConfigured"),
        "{reasons:?}"
    );
    let counts = env.counts().await;
    assert!(
        counts.keys().all(|k| k.starts_with("GET ")),
        "a plan only reads: {counts:?}"
    );
    assert!(env.all().await.is_empty());

    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let planned = lbs
        .plan_load_balancer(CLUSTER, &svc, &[env.node(0), env.node(1)])
        .await
        .unwrap();
    let steps: Vec<&str> = planned.changes.iter().map(|c| c.target.as_str()).collect();
    assert_eq!(steps, vec![format!("add target server {}", env.servers[1])]);
    assert_eq!(
        planned.writes,
        vec![Write::cloud("POST /load_balancers/{id}/actions/add_target")]
    );
    assert_eq!(env.only().await.targets.len(), 1);

    use hcloud_provider::op::load_balancer_ops as ops;
    use hcloud_provider::op::load_balancers as calls;
    assert_eq!(operations.value(calls::ENSURE_LOAD_BALANCER), 1);
    assert_eq!(operations.value(ops::CREATE), 1);
    assert!(operations.value(ops::GET_BY_K8S_SERVICE_UID) >= 3);
}

/// `service` with its own name and UID.
fn named_service(i: usize) -> Service {
    let mut svc = service(&[(80, "TCP", 30080), (443, "TCP", 30443)], &[]);
    svc.metadata.name = Some(format!("web-{i}"));
    svc.metadata.uid = Some(format!("{i:08}-1b2a-4c3d-9e8f-0123456789ab"));
    svc
}

#[tokio::test]
async fn one_listing_answers_a_burst_and_target_changes_need_no_reads() {
    let env = Env::start().await;
    // The default snapshot age: lookups within 10 s share one listing.
    let default_age = CacheConfig::default().load_balancer_max_age;
    let lbs = env.lbs_keeping(located(), false, default_age).await;
    let services: Vec<Service> = (0..4).map(named_service).collect();
    let first = [env.node(0), env.node(1)];
    env.sim.admin().reset_request_counts().await.unwrap();
    let created = futures::future::join_all(
        services
            .iter()
            .map(|svc| lbs.ensure_load_balancer(CLUSTER, svc, &first)),
    )
    .await;
    let statuses: Vec<LoadBalancerStatus> = created
        .into_iter()
        .map(|r| r.unwrap().done().unwrap())
        .collect();
    let counts = env.counts().await;
    // One listing for all four lookups; per load balancer one POST and, as the simulator
    // gives addresses only with the finished action, one read; action polls are shared.
    assert_eq!(counts.get("GET /load_balancers"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("POST /load_balancers"), Some(&4), "{counts:?}");
    assert!(
        counts.get("GET /load_balancers/{id}").copied().unwrap_or(0) <= 4,
        "{counts:?}"
    );
    let total: u64 = counts.values().sum();
    assert!(
        total <= 4 * 4,
        "more than 4 requests per load balancer: {counts:?}"
    );
    assert_eq!(env.all().await.len(), 4);

    // Nothing changed: the snapshot answers, no request at all.
    env.sim.admin().reset_request_counts().await.unwrap();
    for (svc, status) in services.iter().zip(&statuses) {
        let again = lbs
            .ensure_load_balancer(CLUSTER, svc, &first)
            .await
            .unwrap()
            .done()
            .unwrap();
        assert_eq!(&again, status);
    }
    let counts = env.counts().await;
    assert!(
        counts.is_empty(),
        "a no-op ensure made requests: {counts:?}"
    );

    // A Node joins: one add_target per load balancer and action polls, no reads of the load
    // balancers; the snapshot then shows the new target.
    let joined = [env.node(0), env.node(1), env.node(2)];
    for svc in &services {
        lbs.update_load_balancer(CLUSTER, svc, &joined)
            .await
            .unwrap();
    }
    let counts = env.counts().await;
    assert_eq!(
        counts.get("POST /load_balancers/{id}/actions/add_target"),
        Some(&4),
        "{counts:?}"
    );
    let reads: Vec<_> = counts
        .keys()
        .filter(|k| k.starts_with("GET /load_balancers"))
        .collect();
    assert!(reads.is_empty(), "load balancers read again: {counts:?}");
    for lb in env.all().await {
        assert_eq!(
            targets(&lb),
            vec![
                (env.servers[0], false),
                (env.servers[1], false),
                (env.servers[2], false)
            ]
        );
    }
    env.sim.admin().reset_request_counts().await.unwrap();
    for svc in &services {
        lbs.update_load_balancer(CLUSTER, svc, &joined)
            .await
            .unwrap();
    }
    assert!(env.counts().await.is_empty());

    // Deleting asks the API by label once per Service (the answer that releases a Service is
    // never the snapshot's); each load balancer is gone.
    for svc in &services {
        lbs.ensure_load_balancer_deleted(CLUSTER, svc)
            .await
            .unwrap();
    }
    let counts = env.counts().await;
    assert_eq!(
        counts.get("DELETE /load_balancers/{id}"),
        Some(&4),
        "{counts:?}"
    );
    assert_eq!(counts.get("GET /load_balancers"), Some(&4), "{counts:?}");
    assert!(env.all().await.is_empty());
    for svc in &services {
        assert_eq!(lbs.get_load_balancer(CLUSTER, svc).await.unwrap(), None);
    }
}

#[tokio::test]
async fn a_name_taken_behind_the_snapshot_is_found_on_the_retry() {
    let env = Env::start().await;
    let lbs = env.lbs_keeping(located(), false, LONG_SNAPSHOT).await;
    let svc = named_service(1);
    // The snapshot is taken (by another Service's ensure) while this one has none.
    let neighbour = named_service(2);
    lbs.ensure_load_balancer(CLUSTER, &neighbour, &[env.node(0)])
        .await
        .unwrap();
    // Someone creates one with the Service's name (no label) behind the snapshot.
    let other = lbs.get_load_balancer_name(CLUSTER, &svc);
    let created = env
        .client
        .load_balancers()
        .create(&models::CreateLoadBalancerRequest {
            name: other.clone(),
            load_balancer_type: "lb11".into(),
            location: Some("fsn1".into()),
            ..models::CreateLoadBalancerRequest::default()
        })
        .await
        .unwrap();
    env.client.actions().wait(&created.action).await.unwrap();
    let err = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap_err();
    assert_eq!(err.category(), cloud_provider::Category::Conflict, "{err}");
    // The retry lists again, finds it by name and adopts it: still one load balancer.
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .unwrap();
    let all = env.all().await;
    assert_eq!(all.len(), 2, "the neighbour's and the adopted one");
    let lb = all
        .into_iter()
        .find(|lb| lb.id == created.load_balancer.id)
        .unwrap();
    assert_eq!(lb.name, other);
    assert_eq!(
        lb.labels.get(SERVICE_UID_LABEL).map(String::as_str),
        svc.metadata.uid.as_deref()
    );
    assert_eq!(targets(&lb), vec![(env.servers[0], false)]);
}

/// A snapshot age at which one listing would answer every lookup for an hour: what the
/// snapshot does not know must still be found.
const LONG_SNAPSHOT: Duration = Duration::from_secs(3600);

/// A create that fails after the API made the load balancer (its answer lost, the read after
/// it failed) leaves a labelled load balancer. The Service's cleanup finds it by label,
/// whatever the snapshot says, and deletes it. A create whose action the API failed leaves a
/// load balancer without an address that never gets one: the create deletes it at once, and
/// the next ensure makes one that works.
#[tokio::test]
async fn a_create_that_failed_after_the_api_acted_is_cleaned_up_by_its_label() {
    let env = Env::start().await;
    let lbs = env.lbs_keeping(located(), false, LONG_SNAPSHOT).await;
    // The snapshot is taken before any of these load balancers exists.
    lbs.ensure_load_balancer(CLUSTER, &named_service(9), &[env.node(0)])
        .await
        .unwrap();
    let faults = [
        hcloud_sim::Fault::new("/load_balancers")
            .method("POST")
            .lose_reply(),
        hcloud_sim::Fault::new("/load_balancers")
            .method("POST")
            .fail_action(),
        hcloud_sim::Fault::new("/load_balancers/{id}")
            .method("GET")
            .status(503)
            .count(2),
    ];
    for (i, fault) in faults.into_iter().enumerate() {
        let svc = named_service(i + 1);
        env.sim.admin().inject_fault(fault.clone()).await.unwrap();
        let err = lbs
            .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
            .await
            .expect_err("the create fails");
        assert_ne!(err.category(), Category::User, "{fault:?}: {err}");
        env.sim.admin().clear_faults().await.unwrap();
        let uid = svc.metadata.uid.clone().unwrap();
        let labelled = |lbs: &[models::LoadBalancer]| {
            lbs.iter()
                .filter(|lb| lb.labels.get(SERVICE_UID_LABEL) == Some(&uid))
                .count()
        };
        if i == 1 {
            // The failed creation cleaned up after itself (its delete action may still run).
            let deadline = std::time::Instant::now() + Duration::from_secs(10);
            while labelled(&env.all().await) != 0 {
                assert!(
                    std::time::Instant::now() < deadline,
                    "the failed creation's load balancer is still there"
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            let status = lbs
                .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
                .await
                .unwrap()
                .done()
                .unwrap();
            assert!(
                status.ingress.is_some_and(|i| !i.is_empty()),
                "the next ensure creates one with an address"
            );
        }
        assert_eq!(labelled(&env.all().await), 1, "{fault:?}: the API made it");
        // The Service is deleted: its cleanup sees the load balancer and removes it.
        assert!(
            lbs.get_load_balancer(CLUSTER, &svc)
                .await
                .unwrap()
                .is_some(),
            "{fault:?}"
        );
        // As the controller would: retried while the create action still holds the lock.
        let mut attempts = 0;
        while let Err(err) = lbs.ensure_load_balancer_deleted(CLUSTER, &svc).await {
            attempts += 1;
            assert!(
                err.category() == Category::Transient && attempts < 50,
                "{fault:?}: {err}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(labelled(&env.all().await), 0, "{fault:?}: leaked");
        assert_eq!(lbs.get_load_balancer(CLUSTER, &svc).await.unwrap(), None);
    }
}

/// The answer to a create is lost, then the `name` annotation changes: the next ensure finds
/// the load balancer by its label and renames it, instead of creating a second one.
#[tokio::test]
async fn a_lost_create_answer_never_leads_to_a_second_load_balancer() {
    let env = Env::start().await;
    let lbs = env.lbs_keeping(located(), false, LONG_SNAPSHOT).await;
    lbs.ensure_load_balancer(CLUSTER, &named_service(9), &[env.node(0)])
        .await
        .unwrap();
    let mut svc = named_service(1);
    env.sim
        .admin()
        .inject_fault(
            hcloud_sim::Fault::new("/load_balancers")
                .method("POST")
                .lose_reply(),
        )
        .await
        .unwrap();
    lbs.ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
        .expect_err("the answer is lost");
    svc.metadata
        .annotations
        .get_or_insert_default()
        .insert(format!("{A}name"), "renamed".into());
    // As the controller would: retried while the lost create's action still runs.
    let mut attempts = 0;
    while let Err(err) = lbs
        .ensure_load_balancer(CLUSTER, &svc, &[env.node(0)])
        .await
    {
        attempts += 1;
        assert!(
            err.category() == Category::Transient && attempts < 50,
            "{err}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let counts = env.counts().await;
    assert_eq!(counts.get("POST /load_balancers"), Some(&2), "{counts:?}");
    let uid = svc.metadata.uid.clone().unwrap();
    let mine: Vec<_> = env
        .all()
        .await
        .into_iter()
        .filter(|lb| lb.labels.get(SERVICE_UID_LABEL) == Some(&uid))
        .collect();
    assert_eq!(mine.len(), 1, "{mine:#?}");
    assert_eq!(mine[0].name, "renamed");
}

/// The non-GET requests the simulator counted, one entry per request, sorted.
pub(crate) async fn writes_counted(env: &Env) -> Vec<String> {
    let mut writes = Vec::new();
    for (request, n) in env.counts().await {
        if !request.starts_with("GET ") {
            writes.extend(std::iter::repeat_n(request, n as usize));
        }
    }
    writes.sort();
    writes
}

/// What `plan` names, sorted, then what one ensure does: the same requests.
pub(crate) async fn plan_then_ensure(
    env: &Env,
    lbs: &HcloudLoadBalancers,
    svc: &Service,
    nodes: &[Arc<Node>],
) -> Vec<String> {
    let planned = lbs.plan_load_balancer(CLUSTER, svc, nodes).await.unwrap();
    let mut named: Vec<String> = planned.writes.iter().map(ToString::to_string).collect();
    named.sort();
    env.sim.admin().reset_request_counts().await.unwrap();
    lbs.ensure_load_balancer(CLUSTER, svc, nodes).await.unwrap();
    let made = writes_counted(env).await;
    assert_eq!(named, made, "plan: {planned:#?}");
    // Converged: a second plan names nothing (the status aside).
    let again = lbs.plan_load_balancer(CLUSTER, svc, nodes).await.unwrap();
    assert!(
        again.writes.is_empty() && again.changes.is_empty(),
        "{again:#?}"
    );
    made
}

#[tokio::test]
async fn a_plan_names_exactly_the_requests_ensure_makes() {
    let env = Env::start().await;
    env.issue_certificates(
        hcloud_sim::CertificateIssuance::default().delay(Duration::from_millis(50)),
    )
    .await;
    let lbs = env.lbs_with(located(), true).await;
    let all = [env.node(0), env.node(1), env.node(2)];

    // Created, with its network, services and targets in the one request.
    let svc = service(&[(80, "TCP", 30080)], &[]);
    let made = plan_then_ensure(&env, &lbs, &svc, &all[..1]).await;
    assert_eq!(made, vec!["POST /load_balancers".to_owned()]);

    // Several steps on the existing load balancer: targets, a service, the algorithm,
    // the type (a round of its own), the name.
    let svc = service(
        &[(80, "TCP", 30080), (8080, "TCP", 30088)],
        &[
            ("algorithm-type", "least_connections"),
            ("type", "lb21"),
            ("name", "renamed"),
        ],
    );
    let made = plan_then_ensure(&env, &lbs, &svc, &all).await;
    assert!(made.len() >= 5, "{made:?}");

    // Private targets: the public ones go, private ones come, the public interface goes.
    let svc = service(
        &[(80, "TCP", 30080), (8080, "TCP", 30088)],
        &[
            ("algorithm-type", "least_connections"),
            ("type", "lb21"),
            ("name", "renamed"),
            ("use-private-ip", "true"),
            ("disable-public-network", "true"),
        ],
    );
    let made = plan_then_ensure(&env, &lbs, &svc, &all).await;
    assert!(
        made.contains(&"POST /load_balancers/{id}/actions/disable_public_interface".to_owned()),
        "{made:?}"
    );

    // HTTPS with a managed certificate that does not exist yet: created, waited for, then
    // carried by the service.
    let svc = service(
        &[(443, "TCP", 30443)],
        &[
            ("type", "lb21"),
            ("name", "renamed"),
            ("use-private-ip", "true"),
            ("disable-public-network", "true"),
            ("protocol", "https"),
            ("certificate-type", "managed"),
            ("http-managed-certificate-domains", "shop.example.com"),
        ],
    );
    let made = plan_then_ensure(&env, &lbs, &svc, &all[1..]).await;
    assert!(made.contains(&"POST /certificates".to_owned()), "{made:?}");
}

/// The reverse DNS of a load balancer being created names addresses only the creation gives:
/// the plan names the steps on them, and the first ensure sets them on the created ones.
#[tokio::test]
async fn the_reverse_dns_of_a_new_load_balancer_is_planned_and_set_by_the_first_ensure() {
    let env = Env::start().await;
    let lbs = env.lbs_with(located(), false).await;
    let svc = service(
        &[(80, "TCP", 30080)],
        &[
            ("ipv4-rdns", "web.example.com"),
            ("ipv6-rdns", "web6.example.com"),
        ],
    );
    let made = plan_then_ensure(&env, &lbs, &svc, &[env.node(0)]).await;
    assert_eq!(
        made,
        [
            "POST /load_balancers",
            "POST /load_balancers/{id}/actions/change_dns_ptr",
            "POST /load_balancers/{id}/actions/change_dns_ptr",
        ]
    );
    let lb = env.all().await.into_iter().next().unwrap();
    assert_eq!(
        lb.public_net.ipv4.dns_ptr.as_deref(),
        Some("web.example.com")
    );
    assert_eq!(
        lb.public_net.ipv6.dns_ptr.as_deref(),
        Some("web6.example.com")
    );
}

/// Beyond the official CCM: `externalTrafficPolicy: Local`, user labels, delete protection.
mod beyond_official;
mod cluster;
/// Service fields newer than Kubernetes 1.20 (`allocateLoadBalancerNodePorts`, `ipFamilies`)
/// through the real apiserver.
mod newer_fields;
/// Beyond the official CCM: a Service without a TCP port gets no load balancer, through the
/// service controller and the real apiserver.
mod udp_only;
