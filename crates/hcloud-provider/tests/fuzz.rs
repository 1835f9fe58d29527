//! Fuzzing of what the provider reads from Kubernetes objects: providerIDs, the load balancer
//! annotations (and their Go durations), the `node-selector` label selector, and the load
//! balancer plan (`Desired::new`, `Desired::diff`, `status`) over Services, Nodes and load balancers
//! as the API could report them.
//!
//! Short mode in `cargo test`; the long mode and what it found are in `docs/fuzzing.md`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

#[path = "../../hcloud-sim/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use hcloud_api::models::{
    Algorithm, AlgorithmType, HealthCheck, HealthCheckHttp, HealthCheckProtocol, LabelSelector,
    LoadBalancer, LoadBalancerIp, LoadBalancerPrivateNet, LoadBalancerPublicNet,
    LoadBalancerService, LoadBalancerTarget, LoadBalancerType, ResourceId, ServiceHttp,
    ServiceProtocol, TargetIp, TargetType,
};
use hcloud_provider::ProviderId;
use hcloud_provider::load_balancers::annotations::{self, keys};
use hcloud_provider::load_balancers::desired::{self, Desired, Placement, Step};
use hcloud_provider::load_balancers::{
    Annotations, LoadBalancerSettings, NodeSelector, SERVICE_UID_LABEL, load_balancer_name,
};
use k8s_openapi::api::core::v1::{Node, NodeSpec, Service, ServicePort, ServiceSpec};
use proptest::prelude::*;
use proptest::strategy::BoxedStrategy;

use fuzz_support::{label_word, near_selector, soup, word};

#[global_allocator]
static ALLOCATOR: fuzz_support::CountingAllocator = fuzz_support::CountingAllocator;

/// Surrounding whitespace (the parsers trim).
fn padded(inner: BoxedStrategy<String>) -> BoxedStrategy<String> {
    (inner, "[ \t]{0,2}", "[ \t\n]{0,2}")
        .prop_map(|(v, l, r)| format!("{l}{v}{r}"))
        .boxed()
}

/// Go durations, near the grammar: numbers with fractions, signs, known and unknown units,
/// huge values.
fn near_duration() -> BoxedStrategy<String> {
    let part = (
        "[0-9]{0,22}",
        proptest::option::of("\\.[0-9]{0,14}"),
        word(&[
            "ns", "us", "µs", "μs", "ms", "s", "m", "h", "", "d", "S", " s",
        ]),
    )
        .prop_map(|(int, frac, unit)| format!("{int}{}{unit}", frac.unwrap_or_default()));
    (
        word(&["", "", "+", "-"]),
        proptest::collection::vec(part, 1..4),
    )
        .prop_map(|(sign, parts)| format!("{sign}{}", parts.concat()))
        .boxed()
}

fn near_bool() -> BoxedStrategy<String> {
    word(&[
        "true", "false", "1", "0", "t", "f", "T", "F", "TRUE", "FALSE", "True", "False", "yes",
        "tRuE", "",
    ])
}

fn near_number() -> BoxedStrategy<String> {
    prop_oneof![
        any::<u32>().prop_map(|n| n.to_string()),
        (0u32..70_000).prop_map(|n| n.to_string()),
        "-?[0-9]{0,21}",
    ]
    .boxed()
}

fn near_ipv4() -> BoxedStrategy<String> {
    prop_oneof![
        any::<[u8; 4]>().prop_map(|o| format!("{}.{}.{}.{}", o[0], o[1], o[2], o[3])),
        "[0-9]{1,4}(\\.[0-9]{1,4}){0,4}",
    ]
    .boxed()
}

fn near_cidr() -> BoxedStrategy<String> {
    (near_ipv4(), "(/[0-9]{0,3})?")
        .prop_map(|(ip, len)| format!("{ip}{len}"))
        .boxed()
}

fn near_list() -> BoxedStrategy<String> {
    proptest::collection::vec(
        prop_oneof![
            label_word(),
            "[0-9]{1,4}",
            "[2-5][0-9?]{2}",
            Just(String::new())
        ],
        0..4,
    )
    .prop_map(|v| v.join(","))
    .boxed()
}

/// Values shaped for `key`, sometimes anything at all.
fn annotation_value(key: &'static str) -> BoxedStrategy<String> {
    let suffix = key.trim_start_matches(annotations::PREFIX);
    // A per-port key (`port-<port>.<setting>`) takes the values of its setting.
    let suffix = match suffix.strip_prefix("port-").and_then(|s| s.split_once('.')) {
        Some((_, setting)) => setting,
        None => suffix,
    };
    let shaped = match suffix {
        "disable-public-network"
        | "disable-private-ingress"
        | "use-private-ip"
        | "ipv6-disabled"
        | "uses-proxyprotocol"
        | "http-sticky-sessions"
        | "http-redirect-http"
        | "http-managed-certificate-acme-staging"
        | "health-check-http-validate-certificate"
        | "health-check-local-traffic"
        | "health-check-kube-proxy"
        | "protection-delete" => near_bool(),
        "http-cookie-lifetime"
        | "http-timeout-idle"
        | "health-check-interval"
        | "health-check-timeout" => near_duration(),
        "health-check-retries" | "health-check-port" => near_number(),
        "protocol" | "health-check-protocol" => {
            word(&["tcp", "http", "https", "HTTPS", "Http", "udp", ""])
        }
        "algorithm-type" => word(&[
            "round_robin",
            "least_connections",
            "LEAST_CONNECTIONS",
            "random",
        ]),
        "certificate-type" => word(&["uploaded", "managed", "Managed", "self-signed"]),
        "private-ipv4" => near_ipv4(),
        "private-subnet-ip-range" => near_cidr(),
        "node-selector" | "labels" => near_selector(),
        "http-certificates" | "http-managed-certificate-domains" | "http-status-codes" => {
            near_list()
        }
        _ => label_word(),
    };
    prop_oneof![4 => padded(shaped), 1 => soup()].boxed()
}

/// Per-port keys: for ports and port names of the pool, a setting that is not per port, a port
/// no Service has, a key without a setting.
const PER_PORT_KEYS: &[&str] = &[
    "load-balancer.hetzner.cloud/port-443.protocol",
    "load-balancer.hetzner.cloud/port-443.http-certificates",
    "load-balancer.hetzner.cloud/port-443.http-redirect-http",
    "load-balancer.hetzner.cloud/port-80.uses-proxyprotocol",
    "load-balancer.hetzner.cloud/port-80.protocol",
    "load-balancer.hetzner.cloud/port-8080.health-check-interval",
    "load-balancer.hetzner.cloud/port-8080.health-check-protocol",
    "load-balancer.hetzner.cloud/port-web.certificate-type",
    "load-balancer.hetzner.cloud/port-web.http-sticky-sessions",
    "load-balancer.hetzner.cloud/port-443.name",
    "load-balancer.hetzner.cloud/port-9.protocol",
    "load-balancer.hetzner.cloud/port-443",
];

/// A Service's annotations: some of the real keys (Service-wide and per port) with shaped
/// values, and foreign keys.
fn annotation_map() -> BoxedStrategy<BTreeMap<String, String>> {
    let all: Vec<&'static str> = keys::ALL.iter().chain(PER_PORT_KEYS).copied().collect();
    let chosen = proptest::sample::subsequence(all, 0..=14);
    (
        chosen.prop_flat_map(|keys| {
            keys.into_iter()
                .map(|k| annotation_value(k).prop_map(move |v| (k.to_owned(), v)))
                .collect::<Vec<_>>()
        }),
        proptest::collection::vec((soup(), soup()), 0..2),
    )
        .prop_map(|(ours, foreign)| ours.into_iter().chain(foreign).collect())
        .boxed()
}

/// Ports of a small pool (so that they meet the load balancer's services), or anything.
fn port_number() -> BoxedStrategy<i32> {
    prop_oneof![
        4 => proptest::sample::select(&[80, 443, 8080, 1, 65535][..]),
        1 => any::<i32>(),
    ]
    .boxed()
}

fn service_port() -> BoxedStrategy<ServicePort> {
    (
        port_number(),
        prop_oneof![
            6 => Just(None),
            6 => Just(Some("TCP".to_owned())),
            1 => Just(Some("UDP".to_owned())),
            1 => soup().prop_map(Some),
        ],
        prop_oneof![
            4 => (30_000..30_010i32).prop_map(Some),
            1 => Just(None),
            1 => Just(Some(0)),
            1 => any::<i32>().prop_map(Some),
        ],
        proptest::option::of(label_word()),
    )
        .prop_map(|(port, protocol, node_port, name)| ServicePort {
            port,
            protocol,
            node_port,
            name,
            ..ServicePort::default()
        })
        .boxed()
}

fn service() -> BoxedStrategy<Service> {
    (
        proptest::option::of(label_word()),
        prop_oneof![
            4 => Just(Some("0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab".to_owned())),
            1 => proptest::option::of(soup()),
        ],
        proptest::option::of(proptest::collection::vec(service_port(), 0..5)),
        annotation_map(),
        // externalTrafficPolicy and healthCheckNodePort (the local health check).
        (
            proptest::option::of(word(&["Local", "Cluster", "local", ""])),
            proptest::option::of(prop_oneof![30000i32..32768, any::<i32>()]),
        ),
    )
        .prop_map(|(name, uid, ports, annotations, (policy, hc_port))| {
            let mut svc = Service::default();
            svc.metadata.name = name;
            svc.metadata.uid = uid;
            svc.metadata.annotations = Some(annotations);
            svc.spec = Some(ServiceSpec {
                ports,
                external_traffic_policy: policy,
                health_check_node_port: hc_port,
                ..ServiceSpec::default()
            });
            svc
        })
        .boxed()
}

/// providerIDs near the Hetzner forms (IDs 1..=12 meet the load balancer's targets).
fn near_provider_id() -> BoxedStrategy<String> {
    let scheme = word(&[
        "hcloud://",
        "hrobot://",
        "hcloud://bm-",
        "hcloud:/",
        "HCLOUD://",
        "aws:///",
        "",
    ]);
    let id = prop_oneof![
        4 => (1i64..=12).prop_map(|n| n.to_string()),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => "[0-9]{0,25}",
        1 => "[+-]?[0-9a-z ]{0,6}",
        1 => Just(i64::MAX.to_string()),
        1 => Just("9223372036854775808".to_owned()),
    ];
    prop_oneof![8 => (scheme, id).prop_map(|(s, i)| format!("{s}{i}")), 1 => soup()].boxed()
}

fn node() -> BoxedStrategy<Arc<Node>> {
    (
        label_word(),
        proptest::option::of(near_provider_id()),
        proptest::collection::btree_map(label_word(), label_word(), 0..4),
    )
        .prop_map(|(name, provider_id, labels)| {
            let mut node = Node::default();
            node.metadata.name = Some(name);
            node.metadata.labels = Some(labels);
            node.spec = Some(NodeSpec {
                provider_id,
                ..NodeSpec::default()
            });
            Arc::new(node)
        })
        .boxed()
}

fn algorithm() -> BoxedStrategy<AlgorithmType> {
    prop_oneof![
        Just(AlgorithmType::RoundRobin),
        Just(AlgorithmType::LeastConnections),
        Just(AlgorithmType::from("weighted")),
    ]
    .boxed()
}

fn settings() -> BoxedStrategy<LoadBalancerSettings> {
    let place = || proptest::option::of(word(&["fsn1", "nbg1", "eu-central", ""]));
    let seconds = || proptest::option::of(any::<u64>().prop_map(Duration::from_secs));
    (
        (
            place(),
            place(),
            proptest::option::of(word(&["lb11", "lb21", "7", ""])),
            proptest::option::of(algorithm()),
            any::<(bool, bool, bool)>(),
            proptest::option::of(any::<bool>()),
        ),
        (
            proptest::option::of((any::<[u8; 4]>(), 0u8..=32).prop_filter_map(
                "a CIDR",
                |(o, len)| {
                    format!("{}.{}.{}.{}/{len}", o[0], o[1], o[2], o[3])
                        .parse()
                        .ok()
                },
            )),
            proptest::option::of(any::<bool>()),
            seconds(),
            seconds(),
            proptest::option::of(any::<u32>()),
        ),
    )
        .prop_map(
            |(
                (location, network_zone, lb_type, algorithm, bools, disable_public_network),
                (range, uses_proxyprotocol, interval, timeout, retries),
            )| LoadBalancerSettings {
                location,
                network_zone,
                lb_type,
                algorithm,
                disable_private_ingress: bools.0,
                use_private_ip: bools.1,
                disable_ipv6: bools.2,
                disable_public_network,
                private_subnet_ip_range: range,
                uses_proxyprotocol,
                health_check_interval: interval,
                health_check_timeout: timeout,
                health_check_retries: retries,
                ..LoadBalancerSettings::default()
            },
        )
        .boxed()
}

fn protocol() -> BoxedStrategy<ServiceProtocol> {
    prop_oneof![
        Just(ServiceProtocol::Tcp),
        Just(ServiceProtocol::Http),
        Just(ServiceProtocol::Https),
        Just(ServiceProtocol::from("quic")),
    ]
    .boxed()
}

fn health_check() -> BoxedStrategy<HealthCheck> {
    let http = (
        proptest::option::of(label_word()),
        proptest::option::of(word(&["/", "/healthz", ""])),
        proptest::collection::vec(word(&["2??", "3??", "200", "204"]), 0..3),
        any::<bool>(),
    )
        .prop_map(|(domain, path, status_codes, tls)| HealthCheckHttp {
            domain,
            path,
            response: None,
            status_codes,
            tls,
        });
    (
        prop_oneof![
            Just(HealthCheckProtocol::Tcp),
            Just(HealthCheckProtocol::Http),
            Just(HealthCheckProtocol::Https),
        ],
        prop_oneof![30_000..30_010u16, any::<u16>()],
        (0u32..70, 0u32..70, 0u32..6),
        proptest::option::of(http),
    )
        .prop_map(
            |(protocol, port, (interval, timeout, retries), http)| HealthCheck {
                protocol,
                port,
                interval,
                timeout,
                retries,
                http,
            },
        )
        .boxed()
}

fn lb_service(listen_port: u16) -> BoxedStrategy<LoadBalancerService> {
    let http = (
        proptest::option::of(label_word()),
        proptest::option::of(any::<u32>()),
        proptest::collection::vec(1i64..5, 0..3),
        any::<(bool, bool)>(),
        proptest::option::of(30u32..=300),
    )
        .prop_map(
            |(
                cookie_name,
                cookie_lifetime,
                certificates,
                (redirect_http, sticky_sessions),
                timeout_idle,
            )| {
                ServiceHttp {
                    cookie_name,
                    cookie_lifetime,
                    certificates,
                    redirect_http,
                    sticky_sessions,
                    timeout_idle,
                }
            },
        );
    (
        protocol(),
        prop_oneof![30_000..30_010u16, any::<u16>()],
        any::<bool>(),
        proptest::option::of(http),
        proptest::option::of(health_check()),
    )
        .prop_map(
            move |(protocol, destination_port, proxyprotocol, http, health_check)| {
                LoadBalancerService {
                    protocol,
                    listen_port,
                    destination_port,
                    proxyprotocol,
                    http,
                    health_check,
                }
            },
        )
        .boxed()
}

/// A target as the API lists it (one per server, IP or selector).
fn lb_target() -> BoxedStrategy<LoadBalancerTarget> {
    prop_oneof![
        6 => (1i64..=12, any::<bool>()).prop_map(|(id, use_private_ip)| LoadBalancerTarget {
            kind: TargetType::Server,
            server: Some(ResourceId { id }),
            use_private_ip,
            ..LoadBalancerTarget::default()
        }),
        1 => near_ipv4().prop_map(|ip| LoadBalancerTarget {
            kind: TargetType::Ip,
            ip: Some(TargetIp { ip }),
            ..LoadBalancerTarget::default()
        }),
        1 => near_selector().prop_map(|selector| LoadBalancerTarget {
            kind: TargetType::LabelSelector,
            label_selector: Some(LabelSelector { selector }),
            ..LoadBalancerTarget::default()
        }),
        1 => Just(LoadBalancerTarget {
            kind: TargetType::Server,
            ..LoadBalancerTarget::default()
        }),
    ]
    .boxed()
}

fn lb_ip() -> BoxedStrategy<LoadBalancerIp> {
    (
        proptest::option::of(near_ipv4()),
        proptest::option::of(label_word()),
    )
        .prop_map(|(ip, dns_ptr)| LoadBalancerIp {
            ip,
            dns_ptr,
            ..LoadBalancerIp::default()
        })
        .boxed()
}

/// A load balancer as the API could report it: unique listen ports, one target per server,
/// IP or selector, one private net per network.
fn load_balancer() -> BoxedStrategy<LoadBalancer> {
    let ports = proptest::sample::subsequence(vec![80u16, 443, 8080, 1, 65535, 22], 0..=4);
    let services =
        ports.prop_flat_map(|ports| ports.into_iter().map(lb_service).collect::<Vec<_>>());
    let targets = proptest::collection::vec(lb_target(), 0..8).prop_map(|targets| {
        let mut seen = std::collections::BTreeSet::new();
        targets
            .into_iter()
            .filter(|t| {
                seen.insert((
                    t.kind.to_string(),
                    t.server.map(|s| s.id),
                    t.ip.as_ref().map(|i| i.ip.clone()),
                    t.label_selector.as_ref().map(|l| l.selector.clone()),
                ))
            })
            .collect::<Vec<_>>()
    });
    let private_net = proptest::collection::btree_map(1i64..5, near_ipv4(), 0..3).prop_map(|m| {
        m.into_iter()
            .map(|(network, ip)| LoadBalancerPrivateNet { network, ip })
            .collect::<Vec<_>>()
    });
    let uid_label = prop_oneof![
        Just(Some("0f2f6c0e-1b2a-4c3d-9e8f-0123456789ab".to_owned())),
        Just(None),
        label_word().prop_map(Some),
    ];
    (
        (label_word(), uid_label, any::<bool>()),
        (
            word(&["lb11", "lb21", "7"]),
            0i64..10,
            prop_oneof![0u32..12, Just(25u32)],
        ),
        algorithm(),
        (any::<bool>(), lb_ip(), lb_ip()),
        (private_net, services, targets),
    )
        .prop_map(
            |(
                (name, uid, protected),
                (type_name, type_id, max_targets),
                algorithm,
                (enabled, ipv4, ipv6),
                (private_net, services, targets),
            )| {
                let mut lb = LoadBalancer {
                    id: 1,
                    name,
                    load_balancer_type: LoadBalancerType {
                        id: type_id,
                        name: type_name,
                        max_targets,
                        ..LoadBalancerType::default()
                    },
                    algorithm: Algorithm::new(algorithm),
                    public_net: LoadBalancerPublicNet {
                        enabled,
                        ipv4,
                        ipv6,
                    },
                    private_net,
                    services,
                    targets,
                    ..LoadBalancer::default()
                };
                lb.protection.delete = protected;
                if let Some(uid) = uid {
                    lb.labels.insert(SERVICE_UID_LABEL.to_owned(), uid);
                }
                lb
            },
        )
        .boxed()
}

/// What the API makes of `step` (as far as the next diff looks).
fn apply(step: &Step, lb: &mut LoadBalancer) {
    match step {
        Step::Update { name, labels } => {
            if let Some(name) = name {
                lb.name = name.clone();
            }
            if let Some(labels) = labels {
                lb.labels = labels.clone();
            }
        }
        Step::ChangeLabels { labels, .. } => lb.labels = labels.clone(),
        Step::ChangeProtection(delete) => lb.protection.delete = *delete,
        Step::DetachNetwork(network) => lb.private_net.retain(|p| p.network != *network),
        Step::AttachNetwork(request) => lb.private_net.push(LoadBalancerPrivateNet {
            network: request.network,
            ip: request
                .ip
                .clone()
                .unwrap_or_else(|| "10.0.0.254".to_owned()),
        }),
        Step::RemoveTarget(_) | Step::AddTarget(_) => assert!(step.apply_to(lb)),
        Step::DeleteService(port) => lb.services.retain(|s| s.listen_port != *port),
        Step::ChangeType { to, .. } => {
            lb.load_balancer_type.name = to.clone();
            if let Ok(id) = to.parse() {
                lb.load_balancer_type.id = id;
            }
        }
        Step::ChangeAlgorithm { to, .. } => lb.algorithm.kind = to.clone(),
        Step::UpdateService { update, .. } => {
            let service = lb
                .services
                .iter_mut()
                .find(|s| s.listen_port == update.listen_port)
                .expect("an update names an existing service");
            if let Some(protocol) = &update.protocol {
                service.protocol = protocol.clone();
            }
            if let Some(port) = update.destination_port {
                service.destination_port = port;
            }
            if let Some(proxyprotocol) = update.proxyprotocol {
                service.proxyprotocol = proxyprotocol;
            }
            if let Some(http) = &update.http {
                service.http = Some(http.clone());
            }
            if let Some(health_check) = &update.health_check {
                service.health_check = Some(health_check.clone());
            }
        }
        Step::AddService(spec) => lb.services.push(LoadBalancerService {
            protocol: spec.protocol.clone(),
            listen_port: spec.listen_port,
            destination_port: spec.destination_port,
            proxyprotocol: spec.proxyprotocol,
            http: spec.http.clone(),
            health_check: spec.health_check.clone(),
        }),
        Step::EnablePublicInterface => lb.public_net.enabled = true,
        Step::DisablePublicInterface => lb.public_net.enabled = false,
        Step::ChangeDnsPtr(request) => {
            for ip in [&mut lb.public_net.ipv4, &mut lb.public_net.ipv6] {
                if ip.ip.as_deref() == Some(request.ip.as_str()) {
                    ip.dns_ptr = request.dns_ptr.clone();
                }
            }
        }
    }
}

/// Whether an error message of `Desired::new` names the field it is about.
fn names_a_field(message: &str) -> bool {
    message.contains(annotations::PREFIX) || message.contains("spec.ports[].nodePort")
}

proptest! {
    #![proptest_config(fuzz_support::config(3_000))]

    /// A providerID parses or is refused, never panics; what parses prints back to a form
    /// that parses to the same ID, and the canonical forms print as themselves.
    #[test]
    fn provider_ids(text in prop_oneof![near_provider_id(), soup()]) {
        let (parsed, bytes) = fuzz_support::measure(|| ProviderId::parse(&text));
        prop_assert!(bytes <= fuzz_support::allowance(text.len(), 4, 1024), "{bytes} bytes");
        match parsed {
            Ok(id) => {
                let (ProviderId::Cloud(n) | ProviderId::Robot(n)) = id;
                prop_assert!(n > 0, "{text:?} -> {id:?}");
                let printed = id.to_string();
                prop_assert_eq!(ProviderId::parse(&printed), Ok(id));
                // Leading zeros and the legacy Robot form are not canonical.
                if !text.starts_with("hcloud://bm-") && !text.contains("://0") {
                    prop_assert_eq!(printed, text);
                }
            }
            Err(err) => {
                prop_assert_eq!(&err.value, &text);
                prop_assert!(err.to_string().contains("providerID"));
            }
        }
    }

}

proptest! {
    #![proptest_config(fuzz_support::config(1_000))]

    /// Every accessor of every annotation answers without panicking, and an error names its
    /// annotation and carries the raw value.
    #[test]
    fn annotation_accessors(map in annotation_map()) {
        let a = Annotations::new(&map);
        let mut errors = Vec::new();
        for key in keys::ALL {
            let _ = a.raw(key);
            let _ = a.list(key);
            let _ = a.string_or_empty(key);
            errors.extend(a.string(key).err());
            errors.extend(a.bool(key).err());
            errors.extend(a.seconds(key, 1, u32::MAX).err());
            errors.extend(a.seconds(key, 3, 60).err());
            errors.extend(a.number(key, 0, 5).err());
        }
        errors.extend(a.protocol().err());
        errors.extend(a.health_check_protocol().err());
        errors.extend(a.algorithm().err());
        errors.extend(a.certificate_type().err());
        errors.extend(a.node_selector().err());
        errors.extend(a.private_ipv4().err());
        errors.extend(a.private_subnet_ip_range().err());
        errors.extend(a.health_check_port().err());
        let _ = a.name_lenient();
        for err in errors {
            prop_assert_eq!(map.get(&err.annotation), Some(&err.value), "{}", err);
            prop_assert!(err.to_string().starts_with(&err.annotation));
        }
    }

}

proptest! {
    #![proptest_config(fuzz_support::config(3_000))]

    /// The annotations' duration parser never panics or overflows; what it accepts with a
    /// unit is a sum of non-negative parts, and a bare number is seconds.
    #[test]
    fn annotation_durations(text in prop_oneof![padded(near_duration()), soup()]) {
        let (parsed, bytes) = fuzz_support::measure(|| annotations::parse_duration(&text));
        prop_assert!(bytes <= fuzz_support::allowance(text.len(), 4, 1024), "{bytes} bytes");
        let trimmed = text.trim();
        if let Ok(secs) = trimmed.parse::<u64>() {
            prop_assert_eq!(parsed, Some(Duration::from_secs(secs)));
        }
        if parsed.is_some() {
            prop_assert!(!trimmed.starts_with('-'), "{text:?} -> {parsed:?}");
        }
        let _ = annotations::parse_bool(&text);
    }

    /// The `node-selector` parser never panics; a parsed selector prints as its trimmed
    /// source, parses again to the same selector and matches any labels without panicking.
    /// Where the simulator's parser of the same grammar also accepts it, both agree on
    /// which labels match.
    #[test]
    fn node_selectors(
        text in prop_oneof![4 => near_selector(), 1 => soup()],
        labels in proptest::collection::btree_map(label_word(), label_word(), 0..5),
    ) {
        let (parsed, bytes) = fuzz_support::measure(|| NodeSelector::parse(&text));
        prop_assert!(bytes <= fuzz_support::allowance(text.len(), 16, 4096), "{bytes} bytes");
        let Ok(selector) = parsed else {
            return Ok(());
        };
        prop_assert_eq!(selector.to_string(), text.trim());
        prop_assert_eq!(NodeSelector::parse(&selector.to_string()), Ok(selector.clone()));
        let matches = selector.matches(&labels);
        if let Ok(sim) = hcloud_sim::label_selector::Selector::parse(&text) {
            prop_assert_eq!(sim.matches(&labels), matches, "{:?} on {:?}", text, labels);
        }
    }

}

proptest! {
    #![proptest_config(fuzz_support::config(800))]

    /// `Desired::new` over any Service, annotations, settings and Nodes never panics; its errors
    /// name the field. A plan's targets and services are sorted and unique, its create
    /// request respects the type's target limit, and its status never panics. Applying the
    /// steps of `Desired::diff` to any load balancer the API could report converges: the next
    /// diff is empty.
    #[test]
    fn load_balancer_plans(
        svc in service(),
        settings in settings(),
        network in prop_oneof![Just(None), (1i64..5).prop_map(Some), any::<i64>().prop_map(Some)],
        nodes in proptest::collection::vec(node(), 0..6),
        current in load_balancer(),
        max_targets in 0usize..8,
    ) {
        let a = Annotations::of(&svc);
        let _ = load_balancer_name(&svc, &a);
        let status_options = desired::StatusOptions::new(&a, &settings);
        if let Ok(status) = desired::status(&current, &status_options) {
            let ingress = status.ingress.unwrap_or_default();
            if status_options.hostname.is_some() {
                prop_assert_eq!(ingress.len(), 1);
            }
        } else {
            prop_assert!(status_options.hostname.is_none() && current.public_net.enabled);
        }
        let p = match Desired::new(&svc, &a, &settings, network, &nodes) {
            Ok(p) => p,
            Err(message) => {
                prop_assert!(names_a_field(&message), "{message}");
                return Ok(());
            }
        };
        prop_assert!(p.services.windows(2).all(|w| w[0].listen_port < w[1].listen_port));
        prop_assert!(p.targets.windows(2).all(|w| w[0].server < w[1].server));
        for placement in [Placement::Location("fsn1".into()), Placement::NetworkZone("eu-central".into())] {
            let request = p.create_request(&placement, max_targets);
            prop_assert!(request.targets.len() <= max_targets);
            prop_assert_eq!(request.services.len(), p.services.len());
        }
        for notice in p.left_out(&current) {
            prop_assert!(notice.reason.is_some());
        }

        let mut lb = current;
        let steps = p.diff(&lb);
        for step in &steps {
            let _ = step.to_string();
            apply(step, &mut lb);
        }
        let again = p.diff(&lb);
        prop_assert!(
            again.is_empty(),
            "after {:?} the diff is {:?}",
            steps.iter().map(ToString::to_string).collect::<Vec<_>>(),
            again.iter().map(ToString::to_string).collect::<Vec<_>>()
        );
        let _ = desired::status(&lb, &p.status);
    }
}
