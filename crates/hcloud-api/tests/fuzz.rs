//! Fuzzing of what the client reads from the API: the `RateLimit-*` headers and the pacing
//! computed from them, and whole answers (status, headers, body) served by a tiny local HTTP
//! server to the real client: error envelopes, list pages with arbitrary pagination, resources
//! mutated from the golden answers, non-JSON bodies and broken framing.
//!
//! Short mode in `cargo test`; the long mode and what it found are in `docs/fuzzing.md`.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

#[path = "../../hcloud-sim/tests/fuzz_support/mod.rs"]
mod fuzz_support;

use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};

use hcloud_api::ratelimit::{RateLimitHeaders, Reserve, refill_interval};
use hcloud_api::{
    Client, ClientConfig, Error, ListParams, ListServersParams, RetryConfig, TargetSpec, Token,
};
use parking_lot::Mutex;
use proptest::prelude::*;

use fuzz_support::soup;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[global_allocator]
static ALLOCATOR: fuzz_support::CountingAllocator = fuzz_support::CountingAllocator;

const TOKEN: &str = "fuzz-token-7f3a";

const RATE_LIMIT_HEADERS: [&str; 3] = ["RateLimit-Limit", "RateLimit-Remaining", "RateLimit-Reset"];

/// Header values: numbers near the API's (small, huge, negative, padded) and bytes an HTTP
/// header may carry (visible ASCII, tabs, obs-text).
fn header_value() -> BoxedStrategy<Vec<u8>> {
    prop_oneof![
        4 => prop_oneof![
            0u64..5,
            3590u64..3610,
            1_700_000_000u64..1_800_000_000,
            any::<u64>(),
            Just(u64::MAX),
        ]
        .prop_map(|n| n.to_string().into_bytes()),
        1 => proptest::sample::select(
            &[" 7 ", "-1", "18446744073709551616", "0x10", "", "1e3", "3600, 3600", "+5"][..]
        )
        .prop_map(|s| s.as_bytes().to_vec()),
        1 => proptest::collection::vec(
            prop_oneof![Just(b'\t'), 0x20u8..0x7f, 0x80u8..=0xff],
            0..20
        ),
    ]
    .boxed()
}

fn rate_limit_headers() -> BoxedStrategy<Vec<(&'static str, Vec<u8>)>> {
    proptest::collection::vec(
        (
            proptest::sample::select(&RATE_LIMIT_HEADERS[..]),
            header_value(),
        ),
        0..4,
    )
    .boxed()
}

fn header_map(headers: &[(&'static str, Vec<u8>)]) -> http::HeaderMap {
    let mut map = http::HeaderMap::new();
    for (name, value) in headers {
        if let Ok(value) = http::HeaderValue::from_bytes(value) {
            map.append(*name, value);
        }
    }
    map
}

/// The golden answers of the real API (`tests/golden`), by file name.
fn goldens() -> &'static [(String, Value)] {
    static GOLDENS: std::sync::OnceLock<Vec<(String, Value)>> = std::sync::OnceLock::new();
    GOLDENS.get_or_init(|| {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/golden");
        let mut all: Vec<(String, Value)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|entry| {
                let path = entry.unwrap().path();
                let name = path.file_name().unwrap().to_string_lossy().into_owned();
                let value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
                (name, value)
            })
            .collect();
        all.sort_by(|a, b| a.0.cmp(&b.0));
        all
    })
}

fn json_leaf() -> BoxedStrategy<Value> {
    prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        (-3i64..70_000).prop_map(|n| json!(n)),
        Just(json!(u64::MAX)),
        any::<f64>().prop_map(|f| json!(f)),
        soup().prop_map(Value::String),
        proptest::sample::select(
            &[
                "running",
                "success",
                "error",
                "server",
                "ip",
                "tcp",
                "https",
                "not_found",
                ""
            ][..]
        )
        .prop_map(|s| Value::String(s.to_owned())),
        Just(json!([])),
        Just(json!({})),
    ]
    .boxed()
}

fn json_value() -> BoxedStrategy<Value> {
    json_leaf()
        .prop_recursive(2, 12, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[a-z_]{1,10}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
        .boxed()
}

/// Replaces (or, for `None`, removes) the node numbered `pick` of a depth-first walk.
fn mutate(value: &mut Value, pick: &mut usize, with: &Option<Value>) -> bool {
    if *pick == 0 {
        match with {
            Some(new) => *value = new.clone(),
            None => *value = Value::Null,
        }
        return true;
    }
    *pick -= 1;
    match value {
        Value::Array(items) => items.iter_mut().any(|v| mutate(v, pick, with)),
        Value::Object(map) => {
            let keys: Vec<String> = map.keys().cloned().collect();
            for key in keys {
                if *pick == 0 && with.is_none() {
                    map.remove(&key);
                    return true;
                }
                if let Some(v) = map.get_mut(&key)
                    && mutate(v, pick, with)
                {
                    return true;
                }
            }
            false
        }
        _ => false,
    }
}

/// A golden answer with a few nodes replaced or removed.
fn mutated_golden(prefix: &'static str) -> BoxedStrategy<Vec<u8>> {
    let candidates: Vec<usize> = goldens()
        .iter()
        .enumerate()
        .filter(|(_, (name, _))| name.starts_with(prefix))
        .map(|(i, _)| i)
        .collect();
    let candidates = if candidates.is_empty() {
        (0..goldens().len()).collect()
    } else {
        candidates
    };
    (
        proptest::sample::select(candidates),
        proptest::collection::vec(
            (
                any::<usize>(),
                proptest::option::weighted(0.8, json_value()),
            ),
            0..4,
        ),
    )
        .prop_map(|(index, mutations)| {
            let mut value = goldens()[index].1.clone();
            for (pick, with) in mutations {
                let mut pick = pick % 400;
                mutate(&mut value, &mut pick, &with);
            }
            serde_json::to_vec(&value).unwrap()
        })
        .boxed()
}

fn error_envelope() -> BoxedStrategy<Vec<u8>> {
    let code = prop_oneof![
        proptest::sample::select(
            &[
                "not_found",
                "rate_limit_exceeded",
                "locked",
                "conflict",
                "invalid_input",
                "uniqueness_error",
                "protected",
                "timeout",
                "unauthorized",
                "",
            ][..]
        )
        .prop_map(|c| json!(c)),
        json_leaf(),
    ];
    let fields = proptest::collection::vec(
        (
            soup(),
            proptest::option::of(proptest::collection::vec(soup(), 0..3)),
        ),
        0..3,
    )
    .prop_map(|fields| {
        json!({"fields": fields
            .into_iter()
            .map(|(name, messages)| json!({"name": name, "messages": messages}))
            .collect::<Vec<_>>()})
    });
    (
        code,
        prop_oneof![soup().prop_map(Value::String), json_leaf()],
        prop_oneof![fields, json_value()],
        proptest::option::of(soup()),
    )
        .prop_map(|(code, message, details, correlation_id)| {
            serde_json::to_vec(&json!({"error": {
                "code": code,
                "message": message,
                "details": details,
                "correlation_id": correlation_id,
            }}))
            .unwrap()
        })
        .boxed()
}

/// A list page with arbitrary pagination metadata (next pages forwards, backwards, huge,
/// negative, of the wrong type).
fn list_page(key: &'static str) -> BoxedStrategy<Vec<u8>> {
    let number = || {
        prop_oneof![
            (0i64..4).prop_map(|n| json!(n)),
            Just(json!(u32::MAX)),
            Just(json!(i64::MAX)),
            Just(json!(-1)),
            Just(Value::Null),
            json_leaf(),
        ]
    };
    (
        proptest::collection::vec(json_value(), 0..3),
        (number(), number(), number(), number(), number()),
        proptest::bool::weighted(0.9),
    )
        .prop_map(
            move |(items, (page, next, previous, last, total), with_meta)| {
                let mut body = json!({ key: items });
                if with_meta {
                    body["meta"] = json!({"pagination": {
                        "page": page,
                        "per_page": 50,
                        "next_page": next,
                        "previous_page": previous,
                        "last_page": last,
                        "total_entries": total,
                    }});
                }
                serde_json::to_vec(&body).unwrap()
            },
        )
        .boxed()
}

/// One client call; each names the golden answers and list key that fit it.
#[derive(Debug, Clone, Copy)]
enum Call {
    GetServer,
    ListServers,
    ListAllServers,
    GetServerByName,
    GetLoadBalancer,
    ListAllLoadBalancers,
    DeleteLoadBalancer,
    AddTarget,
    GetNetworkByName,
    GetAction,
    ListActions,
    ListAllCertificates,
    ListLoadBalancerTypes,
    ListLocations,
}

impl Call {
    const ALL: [Call; 14] = [
        Call::GetServer,
        Call::ListServers,
        Call::ListAllServers,
        Call::GetServerByName,
        Call::GetLoadBalancer,
        Call::ListAllLoadBalancers,
        Call::DeleteLoadBalancer,
        Call::AddTarget,
        Call::GetNetworkByName,
        Call::GetAction,
        Call::ListActions,
        Call::ListAllCertificates,
        Call::ListLoadBalancerTypes,
        Call::ListLocations,
    ];

    /// Prefix of the golden files of this call, and the key of its list.
    fn shape(self) -> (&'static str, &'static str) {
        match self {
            Call::GetServer => ("get_server", "servers"),
            Call::ListServers | Call::ListAllServers | Call::GetServerByName => {
                ("list_servers", "servers")
            }
            Call::GetLoadBalancer => ("get_load_balancer.", "load_balancers"),
            Call::ListAllLoadBalancers => ("list_load_balancers", "load_balancers"),
            Call::DeleteLoadBalancer | Call::AddTarget => ("action_load_balancer", "actions"),
            Call::GetNetworkByName => ("list_networks", "networks"),
            Call::GetAction => ("get_action", "actions"),
            Call::ListActions => ("list_actions", "actions"),
            Call::ListAllCertificates => ("list_certificates", "certificates"),
            Call::ListLoadBalancerTypes => ("list_load_balancer_types", "load_balancer_types"),
            Call::ListLocations => ("list_locations", "locations"),
        }
    }

    /// Runs the call; only whether it failed, and how, matters here.
    async fn run(self, client: &Client) -> Result<(), Error> {
        match self {
            Call::GetServer => client.servers().get(1).await.map(drop),
            Call::ListServers => client
                .servers()
                .list(&ListServersParams::default())
                .await
                .map(drop),
            Call::ListAllServers => client
                .servers()
                .list_all(&ListServersParams::default())
                .await
                .map(drop),
            Call::GetServerByName => client.servers().get_by_name("node-1").await.map(drop),
            Call::GetLoadBalancer => client.load_balancers().get(1).await.map(drop),
            Call::ListAllLoadBalancers => client
                .load_balancers()
                .list_all(&ListParams::default())
                .await
                .map(drop),
            Call::DeleteLoadBalancer => client.load_balancers().delete(1).await.map(drop),
            Call::AddTarget => client
                .load_balancers()
                .add_target(1, &TargetSpec::server(1, false))
                .await
                .map(drop),
            Call::GetNetworkByName => client.networks().get_by_name("net").await.map(drop),
            Call::GetAction => client.actions().get(1).await.map(drop),
            Call::ListActions => client.actions().list(&[1, 2]).await.map(drop),
            Call::ListAllCertificates => client
                .certificates()
                .list_all(&Default::default())
                .await
                .map(drop),
            Call::ListLoadBalancerTypes => client.load_balancer_types().list().await.map(drop),
            Call::ListLocations => client.locations().list().await.map(drop),
        }
    }
}

/// How the answer's body is framed.
#[derive(Debug, Clone, Copy)]
enum Framing {
    /// `Content-Length` of the body.
    Length,
    /// No length: the body ends when the connection closes.
    UntilClose,
    /// A `Content-Length` larger than the body sent.
    Truncated,
}

#[derive(Debug, Clone)]
struct Answer {
    status: u16,
    headers: Vec<(&'static str, Vec<u8>)>,
    framing: Framing,
    body: Vec<u8>,
}

impl Answer {
    fn bytes(&self) -> Vec<u8> {
        let mut out =
            format!("HTTP/1.1 {} Fuzz\r\nConnection: close\r\n", self.status).into_bytes();
        for (name, value) in &self.headers {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        match self.framing {
            Framing::Length => {
                out.extend(format!("Content-Length: {}\r\n", self.body.len()).bytes());
            }
            Framing::Truncated => {
                out.extend(format!("Content-Length: {}\r\n", self.body.len() + 7).bytes());
            }
            Framing::UntilClose => {}
        }
        out.extend_from_slice(b"Content-Type: application/json\r\n\r\n");
        out.extend_from_slice(&self.body);
        out
    }

    /// The `RateLimit-Remaining` the client must have taken from this answer, if readable.
    fn remaining(&self) -> Option<u64> {
        RateLimitHeaders::from_headers(&header_map(&self.headers)).remaining
    }
}

fn answer() -> BoxedStrategy<(Call, Answer)> {
    proptest::sample::select(&Call::ALL[..])
        .prop_flat_map(|call| {
            let (golden, key) = call.shape();
            let body = prop_oneof![
                4 => mutated_golden(golden),
                2 => error_envelope(),
                2 => list_page(key),
                1 => json_value().prop_map(|v| serde_json::to_vec(&v).unwrap()),
                1 => proptest::collection::vec(any::<u8>(), 0..200),
                1 => Just(Vec::new()),
            ];
            let status = prop_oneof![
                6 => Just(200u16),
                1 => Just(201u16),
                1 => Just(204u16),
                4 => proptest::sample::select(
                    &[400u16, 401, 403, 404, 409, 410, 412, 422, 423, 429, 500, 502, 503, 504][..]
                ),
                1 => 200u16..600,
            ];
            let framing = prop_oneof![
                8 => Just(Framing::Length),
                1 => Just(Framing::UntilClose),
                1 => Just(Framing::Truncated),
            ];
            (Just(call), status, rate_limit_headers(), framing, body).prop_map(
                |(call, status, headers, framing, body)| {
                    (
                        call,
                        Answer {
                            status,
                            headers,
                            framing,
                            body,
                        },
                    )
                },
            )
        })
        .boxed()
}

/// A local server answering every request with the current answer, and a client of it.
struct Rig {
    runtime: tokio::runtime::Runtime,
    client: Client,
    /// Shared, so that serving it allocates nothing in proportion to its size.
    answer: Arc<Mutex<Arc<Vec<u8>>>>,
}

impl Rig {
    fn new() -> Rig {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let answer = Arc::new(Mutex::new(Arc::new(Vec::new())));
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        let served = answer.clone();
        runtime.spawn(async move {
            loop {
                let Ok((mut stream, _)) = listener.accept().await else {
                    continue;
                };
                let reply = served.lock().clone();
                tokio::spawn(async move {
                    // Read the request head (and whatever body came with it), then answer.
                    let mut request = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = stream.write_all(reply.as_slice()).await;
                    let _ = stream.shutdown().await;
                });
            }
        });
        let config = ClientConfig::new(Token::new(TOKEN))
            .with_endpoint(format!("http://{addr}/v1"))
            .with_retry(RetryConfig {
                max_tries: 2,
                base: Duration::from_millis(1),
                cap: Duration::from_millis(2),
                jitter: false,
            })
            .with_max_rate_limit_wait(Duration::from_millis(1))
            .with_request_timeout(Duration::from_secs(5));
        let client = Client::new(config).unwrap();
        Rig {
            runtime,
            client,
            answer,
        }
    }

    /// Serves `raw` (a whole HTTP answer) from now on.
    fn serve(&self, raw: Vec<u8>) {
        *self.answer.lock() = Arc::new(raw);
    }

    /// Makes `call` and measures what the client (and the server, which copies nothing)
    /// allocates for it.
    fn measure(&self, call: Call) -> (Result<(), Error>, usize) {
        fuzz_support::measure(|| self.runtime.block_on(call.run(&self.client)))
    }
}

thread_local! {
    static RIG: Rig = Rig::new();
}

proptest! {
    #![proptest_config(fuzz_support::config(5_000))]

    /// The `RateLimit-*` headers of any answer are read without panicking, and the waits and
    /// paces the client derives from them (as `ServerBucket::observe` chains them) neither
    /// panic nor overflow.
    #[test]
    fn rate_limit_headers_and_pacing(
        headers in rate_limit_headers(),
        now_secs in prop_oneof![1_700_000_000u64..1_800_000_000, any::<u64>().prop_map(|s| s % (1 << 40))],
        refill_ms in prop_oneof![Just(1_000u64), 0u64..5_000, any::<u64>()],
        reserve in prop_oneof![Just(600u32), any::<u32>()],
        pacing in any::<bool>(),
    ) {
        let parsed = RateLimitHeaders::from_headers(&header_map(&headers));
        let now = UNIX_EPOCH + Duration::from_secs(now_secs);
        let refill = Duration::from_millis(refill_ms);
        let wait = parsed.wait_for_token(now, refill);
        if parsed.remaining != Some(0) {
            prop_assert_eq!(wait, Duration::ZERO);
        }
        let interval = refill_interval(&parsed, now, refill);
        let reserve = Reserve { per_hour: reserve };
        if let Some(limit) = parsed.limit {
            prop_assert!(reserve.threshold(limit) <= limit / 2);
        }
        let _ = reserve.pace(&parsed, interval, pacing);
        let _ = reserve.pace(&parsed, refill, pacing);
    }
}

proptest! {
    #![proptest_config(fuzz_support::config(1_500))]

    /// Any answer to any call: the client never panics, allocates in proportion to what it
    /// was sent, answers an error status with that status as an API error (or a transport
    /// error for a broken body), keeps the token out of every error, and remembers a readable
    /// `RateLimit-Remaining`.
    #[test]
    fn answers((call, answer) in answer()) {
        let sent = answer.bytes().len();
        let (result, bytes) = RIG.with(|rig| {
            rig.serve(answer.bytes());
            rig.measure(call)
        });
        prop_assert!(
            bytes <= fuzz_support::allowance(sent, 64, 4 << 20),
            "{bytes} bytes for {sent} bytes sent"
        );
        match &result {
            Ok(()) => prop_assert!((200..300).contains(&answer.status), "{call:?} took {answer:?}"),
            Err(Error::Api(e)) => prop_assert_eq!(e.status, answer.status),
            Err(Error::Transport(_) | Error::Decode(_)) => {}
            Err(other) => prop_assert!(false, "{call:?}: unexpected {other:?}"),
        }
        if let Err(err) = &result {
            let shown = format!("{err} {err:?}");
            prop_assert!(!shown.contains(TOKEN), "{}", shown);
        }
        if !matches!(result, Err(Error::Transport(_)))
            && !matches!(answer.framing, Framing::Truncated)
            && let Some(remaining) = answer.remaining()
        {
            let seen = RIG.with(|rig| rig.client.rate_limit_remaining());
            prop_assert_eq!(seen, Some(remaining));
        }
    }
}

/// An answer announcing more than `MAX_BODY_BYTES` is refused before its body is read.
#[test]
fn an_answer_announcing_a_huge_body_is_refused_unread() {
    let head = format!(
        "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: {}\r\n\r\n{{\"servers\":[",
        1u64 << 40
    );
    let (result, bytes) = RIG.with(|rig| {
        rig.serve(head.into_bytes());
        rig.measure(Call::ListServers)
    });
    match result {
        Err(Error::Decode(e)) => assert!(e.to_string().contains("longer than"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(bytes < 4 << 20, "{bytes} bytes");
}

/// A valid answer longer than `MAX_BODY_BYTES` without an announced length is refused once
/// it grows past the limit, and never held whole.
#[test]
fn an_answer_growing_past_the_limit_is_refused() {
    let padding = "x".repeat(hcloud_api::MAX_BODY_BYTES + (8 << 20));
    let body = format!("{{\"servers\":[],\"padding\":\"{padding}\"}}");
    drop(padding);
    let mut raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
    raw.extend_from_slice(body.as_bytes());
    drop(body);
    let (result, bytes) = RIG.with(|rig| {
        rig.serve(raw);
        rig.measure(Call::ListServers)
    });
    match result {
        Err(Error::Decode(e)) => assert!(e.to_string().contains("longer than"), "{e}"),
        other => panic!("{other:?}"),
    }
    assert!(
        bytes < hcloud_api::MAX_BODY_BYTES + (4 << 20),
        "{bytes} bytes"
    );
}
