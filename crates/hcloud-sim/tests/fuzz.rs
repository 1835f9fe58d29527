//! Fuzzing of the simulator's request parsing: label selectors, query strings (filters,
//! sorting, pagination), JSON bodies read field by field, and whole requests through the
//! router (method, path, query, headers, body) against a seeded project.
//!
//! Short mode in `cargo test`; the long mode and what it found are in `docs/fuzzing.md`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

mod fuzz_support;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use hcloud_sim::app::{self, App};
use hcloud_sim::input::{parse_body, parse_body_or_empty};
use hcloud_sim::label_selector::{Selector, is_label_key, is_label_value};
use hcloud_sim::pagination::{PageRequest, Query, page_request, paginate, sort_keys};
use hcloud_sim::world::World;
use hcloud_sim::{
    CertificateSeed, LoadBalancerSeed, NetworkSeed, RateLimitConfig, SeedFile, ServerSeed,
    ServiceSeed, TargetSeed,
};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use tower::ServiceExt;

use fuzz_support::{label_word, near_selector, soup, word};

#[global_allocator]
static ALLOCATOR: fuzz_support::CountingAllocator = fuzz_support::CountingAllocator;

const TOKEN: &str = "fuzz-token";

/// Query strings: the keys the API reads with values near what it accepts, percent
/// encoding, repeated keys, and junk.
fn query_string() -> BoxedStrategy<String> {
    let value = |key: &str| -> BoxedStrategy<String> {
        match key {
            "label_selector" => near_selector(),
            "sort" => word(&[
                "id",
                "name",
                "created",
                "id:asc",
                "name:desc",
                "created:desc",
                "id:up",
                "x",
                "",
            ]),
            "page" | "per_page" => prop_oneof![
                (0u64..100).prop_map(|n| n.to_string()),
                any::<u64>().prop_map(|n| n.to_string()),
                Just(usize::MAX.to_string()),
                Just("18446744073709551616".to_owned()),
                "-?[0-9]{0,3}",
            ]
            .boxed(),
            "status" => word(&["running", "off", "error", "success", ""]),
            "id" => prop_oneof![(0i64..5).prop_map(|n| n.to_string()), soup()].boxed(),
            _ => label_word(),
        }
    };
    let pair = word(&[
        "label_selector",
        "sort",
        "page",
        "per_page",
        "name",
        "status",
        "id",
        "type",
    ])
    .prop_flat_map(move |k| value(&k).prop_map(move |v| (k.clone(), v)));
    prop_oneof![
        4 => proptest::collection::vec(pair, 0..5).prop_map(|pairs| {
            let mut ser = url::form_urlencoded::Serializer::new(String::new());
            for (k, v) in &pairs {
                ser.append_pair(k, v);
            }
            ser.finish()
        }),
        1 => "[ -~]{0,30}",
        1 => "([a-z_]{1,10}=%[0-9A-Fa-f]{0,2}&?){0,3}",
    ]
    .boxed()
}

/// Field names the handlers read.
const FIELDS: &[&str] = &[
    "name",
    "labels",
    "server_type",
    "image",
    "location",
    "network_zone",
    "networks",
    "load_balancer_type",
    "algorithm",
    "type",
    "services",
    "targets",
    "network",
    "public_interface",
    "protocol",
    "listen_port",
    "destination_port",
    "proxyprotocol",
    "http",
    "health_check",
    "port",
    "interval",
    "timeout",
    "retries",
    "domain",
    "path",
    "status_codes",
    "tls",
    "server",
    "ip",
    "label_selector",
    "selector",
    "use_private_ip",
    "ip_range",
    "subnets",
    "routes",
    "destination",
    "gateway",
    "delete",
    "dns_ptr",
    "certificates",
    "certificate",
    "private_key",
    "domain_names",
    "cookie_name",
    "cookie_lifetime",
    "redirect_http",
    "sticky_sessions",
    "timeout_idle",
    "id",
    "alias_ips",
    "vswitch_id",
    "assignee_id",
    "assignee_type",
    "auto_delete",
    "public_net",
    "start_after_create",
    "user_data",
    "ssh_keys",
    "expose_routes_to_vswitch",
];

/// JSON leaves near what the handlers accept: IDs of the seeded project, ports, IPs, CIDRs,
/// names of catalog entries, enum values.
fn json_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        prop_oneof![
            (0i64..6),
            (2000i64..2004),
            (3000i64..3004),
            (4000i64..4004),
            (10_000i64..10_004),
            Just(65_535i64),
            Just(65_536i64),
            any::<i64>(),
        ]
        .prop_map(|n| json!(n)),
        any::<f64>().prop_map(|f| json!(f)),
        Just(json!(u64::MAX)),
        word(&[
            "10.0.0.0/16",
            "10.0.1.0/24",
            "10.0.0.5",
            "10.0.0.0/8",
            "0.0.0.0/0",
            "10.0.0.0/32",
            "192.168.0.0/33",
            "2001:db8::1",
            "lb11",
            "lb21",
            "cx22",
            "fsn1",
            "eu-central",
            "cloud",
            "vswitch",
            "tcp",
            "http",
            "https",
            "round_robin",
            "least_connections",
            "server",
            "ip",
            "label_selector",
            "env=prod",
            "2??",
            "/",
            "",
            "primary",
            "ubuntu-24.04",
        ])
        .prop_map(Value::String),
        soup().prop_map(Value::String),
    ]
    .boxed()
}

fn json_value() -> BoxedStrategy<Value> {
    json_leaf()
        .prop_recursive(3, 24, 5, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::vec((proptest::sample::select(FIELDS), inner), 0..5)
                    .prop_map(|pairs| {
                        Value::Object(
                            pairs
                                .into_iter()
                                .map(|(k, v)| (k.to_owned(), v))
                                .collect::<Map<_, _>>(),
                        )
                    }),
                proptest::collection::btree_map(label_word(), label_word(), 0..3).prop_map(
                    |labels| Value::Object(
                        labels
                            .into_iter()
                            .map(|(k, v)| (k, Value::String(v)))
                            .collect()
                    )
                ),
            ]
        })
        .boxed()
}

/// A request body: a JSON object of the handlers' field names, any JSON, or bytes.
fn body() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        6 => proptest::collection::vec((proptest::sample::select(FIELDS), json_value()), 0..7)
            .prop_map(|pairs| {
                let object: Map<String, Value> =
                    pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                serde_json::to_vec(&Value::Object(object)).unwrap()
            }),
        1 => json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
        1 => proptest::collection::vec(any::<u8>(), 0..64),
        1 => Just(Vec::new()),
    ]
    .boxed()
}

/// Path segments for `{id}`: the seeded IDs, missing ones, and things that are no ID.
fn id_segment() -> BoxedStrategy<String> {
    prop_oneof![
        6 => word(&["2002", "3002", "4002", "10002", "10003", "1", "2", "0", "-1"]),
        1 => any::<i64>().prop_map(|n| n.to_string()),
        1 => word(&["99999999999999999999", "abc", "1.5", "%31", "", " 1"]),
    ]
    .boxed()
}

const ACTIONS: &[&str] = &[
    "poweron",
    "poweroff",
    "shutdown",
    "reset",
    "reboot",
    "attach_to_network",
    "detach_from_network",
    "change_protection",
    "change_dns_ptr",
    "add_route",
    "delete_route",
    "add_subnet",
    "delete_subnet",
    "change_ip_range",
    "add_service",
    "update_service",
    "delete_service",
    "add_target",
    "remove_target",
    "change_algorithm",
    "change_type",
    "enable_public_interface",
    "disable_public_interface",
    "retry",
    "explode",
];

const COLLECTIONS: &[&str] = &[
    "servers",
    "networks",
    "load_balancers",
    "certificates",
    "primary_ips",
    "actions",
    "locations",
    "server_types",
    "load_balancer_types",
    "images",
    "datacenters",
];

fn path() -> BoxedStrategy<String> {
    let collection = || proptest::sample::select(COLLECTIONS);
    prop_oneof![
        4 => collection().prop_map(|c| format!("/v1/{c}")),
        4 => (collection(), id_segment()).prop_map(|(c, id)| format!("/v1/{c}/{id}")),
        6 => (collection(), id_segment(), proptest::sample::select(ACTIONS))
            .prop_map(|(c, id, a)| format!("/v1/{c}/{id}/actions/{a}")),
        1 => (collection(), id_segment()).prop_map(|(c, id)| format!("/v1/{c}/{id}/actions")),
        1 => (collection(), id_segment()).prop_map(|(c, id)| format!("/v1/{c}/actions/{id}")),
        1 => "/v1/[a-z_/]{0,20}",
        1 => word(&["/", "/v1", "/v1/", "//v1/servers", "/v1/servers/"]),
    ]
    .boxed()
}

#[derive(Debug, Clone)]
struct FuzzRequest {
    method: Method,
    path: String,
    query: String,
    authorised: bool,
    body: Vec<u8>,
}

fn request() -> BoxedStrategy<FuzzRequest> {
    (
        prop_oneof![
            3 => Just(Method::GET),
            5 => Just(Method::POST),
            2 => Just(Method::PUT),
            2 => Just(Method::DELETE),
            1 => Just(Method::PATCH),
        ],
        path(),
        proptest::option::of(query_string()),
        proptest::bool::weighted(0.95),
        body(),
    )
        .prop_map(|(method, path, query, authorised, body)| FuzzRequest {
            method,
            path,
            query: query.map(|q| format!("?{q}")).unwrap_or_default(),
            authorised,
            body,
        })
        .boxed()
}

/// A project with one of everything (IDs: network 2002, servers 10002 and 10003, load
/// balancer 3002, certificate 4002), actions finishing at once, no rate limit.
fn seeded_app() -> Arc<App> {
    let mut world = World::new(Duration::ZERO);
    let seed = SeedFile {
        networks: vec![
            NetworkSeed::new("net", "10.0.0.0/16")
                .subnet("10.0.1.0/24", "eu-central")
                .route("10.100.0.0/24", "10.0.1.2"),
        ],
        servers: vec![
            ServerSeed::new("node-1")
                .label("env", "prod")
                .network("net"),
            ServerSeed::new("node-2").label("tier", "web"),
        ],
        certificates: vec![CertificateSeed::uploaded("cert")],
        load_balancers: vec![
            LoadBalancerSeed::new("lb")
                .label("hcloud-ccm/service-uid", "abc")
                .service(ServiceSeed::tcp(80, 30080))
                .target(TargetSeed::Server {
                    server: "node-1".into(),
                    use_private_ip: false,
                }),
        ],
        ..SeedFile::default()
    };
    hcloud_sim::seed::apply(&mut world, &seed).expect("seed");
    Arc::new(App::new(world, TOKEN.to_owned(), RateLimitConfig::Off))
}

/// Sends `requests` in order to a fresh seeded simulator; returns each answer's status,
/// body and the most bytes handling it held at once.
fn send_all(requests: &[FuzzRequest]) -> Vec<(FuzzRequest, StatusCode, Vec<u8>, usize)> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap();
    let router = app::router(seeded_app());
    requests
        .iter()
        .map(|r| {
            let mut builder = Request::builder()
                .method(r.method.clone())
                .uri(format!("{}{}", r.path, r.query))
                .header("host", "127.0.0.1:1")
                .header("content-type", "application/json");
            if r.authorised {
                builder = builder.header("authorization", format!("Bearer {TOKEN}"));
            }
            let ((status, body), bytes) = fuzz_support::measure(|| {
                let Ok(request) = builder.body(Body::from(r.body.clone())) else {
                    // Not an HTTP request at all (e.g. a path no URI takes): nothing to send.
                    return (StatusCode::BAD_REQUEST, Vec::new());
                };
                runtime.block_on(async {
                    let response = router.clone().oneshot(request).await.unwrap();
                    let status = response.status();
                    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
                        .await
                        .unwrap();
                    (status, body.to_vec())
                })
            });
            (r.clone(), status, body, bytes)
        })
        .collect()
}

proptest! {
    #![proptest_config(fuzz_support::config(3_000))]

    /// A label selector parses or is refused, never panics or allocates beyond its size, and
    /// a parsed one matches any labels without panicking; label key and value checks agree
    /// with what the parser keeps.
    #[test]
    fn label_selectors(
        text in prop_oneof![4 => near_selector(), 1 => soup()],
        labels in proptest::collection::btree_map(label_word(), label_word(), 0..5),
    ) {
        let (parsed, bytes) = fuzz_support::measure(|| Selector::parse(&text));
        prop_assert!(bytes <= fuzz_support::allowance(text.len(), 16, 4096), "{bytes} bytes");
        let _ = is_label_key(&text);
        let _ = is_label_value(&text);
        if let Ok(selector) = parsed {
            let _ = selector.matches(&labels);
            let _ = selector.matches(&BTreeMap::new());
        }
    }

    /// Query strings: filters, sort keys and pagination parse or are refused with an
    /// `invalid_input` answer, never panic; a page request pages any list without panicking
    /// and its metadata is consistent.
    #[test]
    fn queries(raw in query_string(), total in 0usize..120) {
        let q = Query::parse(Some(&raw));
        let _ = q.all("label_selector");
        if let Err(err) = sort_keys(&q) {
            prop_assert_eq!(err.code.as_str(), "invalid_input");
        }
        match page_request(&q) {
            Ok(req) => {
                prop_assert!(req.page >= 1 && (1..=50).contains(&req.per_page));
                let (items, info) = paginate((0..total).collect::<Vec<_>>(), req);
                prop_assert!(items.len() <= req.per_page);
                prop_assert!(info.last_page >= 1);
                prop_assert_eq!(info.total_entries, total);
                let _ = info.meta();
                let _ = info.link_header("http://127.0.0.1/v1/servers", &q);
                let _ = q.with_page(info.last_page, req.per_page);
            }
            Err(err) => prop_assert_eq!(err.code.as_str(), "invalid_input"),
        }
        let huge = PageRequest { page: usize::MAX, per_page: 50 };
        let (items, _) = paginate((0..total).collect::<Vec<_>>(), huge);
        prop_assert!(items.is_empty() || total > 0);
    }

    /// A body is read field by field with every accessor and refused with `json_error` or
    /// `invalid_input`, never a panic.
    #[test]
    fn bodies(bytes in body(), key in proptest::sample::select(FIELDS)) {
        for parsed in [parse_body(&bytes), parse_body_or_empty(&bytes)] {
            let mut input = match parsed {
                Ok(input) => input,
                Err(err) => {
                    prop_assert_eq!(err.code.as_str(), "json_error");
                    continue;
                }
            };
            let _ = input.has(key);
            let _ = input.req_str(key);
            let _ = input.opt_nullable_str(key);
            let _ = input.req_bool(key);
            let _ = input.req_i64(key);
            let _ = input.opt_int_in(key, 1, 10);
            let _ = input.req_port(key);
            let _ = input.req_id_or_name(key);
            let _ = input.opt_i64_list(key);
            let _ = input.opt_raw_list_len(key);
            let _ = input.opt_str_list(key);
            let _ = input.opt_labels(key);
            if let Some(nested) = input.opt_obj(key) {
                input.absorb(nested);
            }
            for nested in input.opt_obj_list(key).unwrap_or_default() {
                input.absorb(nested);
            }
            if let Err(err) = input.finish() {
                prop_assert_eq!(err.code.as_str(), "invalid_input");
                prop_assert!(err.details["fields"].as_array().is_some_and(|f| !f.is_empty()));
            }
        }
    }
}

proptest! {
    #![proptest_config(fuzz_support::config(600))]

    /// Whole requests against a seeded project: the simulator answers every one (no panic),
    /// without a server error, with JSON (or nothing for 204), every error in the API's
    /// envelope, and without allocating far beyond what it was sent.
    #[test]
    fn requests(requests in proptest::collection::vec(request(), 1..6)) {
        for (request, status, body, bytes) in send_all(&requests) {
            let sent = request.path.len() + request.query.len() + request.body.len();
            prop_assert!(
                bytes <= fuzz_support::allowance(sent, 64, 4 << 20),
                "{bytes} bytes for {request:?}"
            );
            prop_assert!(!status.is_server_error(), "{status} for {request:?}: {}", String::from_utf8_lossy(&body));
            if status == StatusCode::NO_CONTENT || body.is_empty() && status == StatusCode::BAD_REQUEST {
                continue;
            }
            let json: Value = match serde_json::from_slice(&body) {
                Ok(json) => json,
                Err(err) => {
                    prop_assert!(false, "{status} for {request:?} is no JSON ({err}): {}", String::from_utf8_lossy(&body));
                    unreachable!()
                }
            };
            if status.is_client_error() {
                prop_assert!(json["error"]["code"].is_string(), "{status} for {request:?}: {json}");
                prop_assert!(json["error"]["message"].is_string(), "{status} for {request:?}: {json}");
            }
        }
    }
}
