//! Error mapping and the retry policy against the simulator (and a raw TCP stub for answers
//! the simulator never gives).
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::common;

use std::time::{Duration, Instant};

use hcloud_api::{Client, Error, ErrorCode, RetryConfig, Token};
use hcloud_sim::{Fault, ServerSeed, Simulator};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use common::{config_for, count, setup};

async fn server(sim: &Simulator) -> i64 {
    sim.admin()
        .create_server(ServerSeed::new("node-1"))
        .await
        .expect("server")["id"]
        .as_i64()
        .expect("id")
}

const GET_SERVER: &str = "GET /servers/{id}";

#[tokio::test]
async fn retryable_codes_are_retried_until_success() {
    let (sim, client) = setup().await;
    let id = server(&sim).await;
    for code in ["conflict", "rate_limit_exceeded", "bad_gateway", "timeout"] {
        sim.admin().reset_request_counts().await.expect("reset");
        sim.admin()
            .inject_fault(
                Fault::new("/servers/{id}")
                    .method("GET")
                    .code(code)
                    .count(2),
            )
            .await
            .expect("fault");
        let s = client
            .servers()
            .get(id)
            .await
            .unwrap_or_else(|e| panic!("{code}: {e}"));
        assert_eq!(s.id, id);
        assert_eq!(
            count(&sim, GET_SERVER).await,
            3,
            "{code}: two failures, one success"
        );
    }
}

#[tokio::test]
async fn gives_up_after_five_tries() {
    let (sim, client) = setup().await;
    let id = server(&sim).await;
    sim.admin()
        .inject_fault(Fault::new("/servers/{id}").code("bad_gateway").count(10))
        .await
        .expect("fault");
    let err = client.servers().get(id).await.expect_err("persistent 502");
    assert_eq!(err.code(), Some(&ErrorCode::BadGateway));
    assert_eq!(err.status(), Some(502));
    assert!(!err.is_not_found());
    assert_eq!(count(&sim, GET_SERVER).await, 5);
}

#[tokio::test]
async fn backoff_is_exponential_from_the_configured_base() {
    let sim = common::start_sim().await;
    let id = server(&sim).await;
    let config = config_for(&sim).with_retry(RetryConfig {
        max_tries: 4,
        base: Duration::from_millis(40),
        cap: Duration::from_millis(100),
        jitter: false,
    });
    let client = Client::new(config).expect("client");
    sim.admin()
        .inject_fault(Fault::new("/servers/{id}").code("timeout").count(3))
        .await
        .expect("fault");
    let start = Instant::now();
    client.servers().get(id).await.expect("fourth try succeeds");
    // 40 + 80 + 100 (capped) ms.
    let elapsed = start.elapsed();
    assert!(elapsed >= Duration::from_millis(220), "{elapsed:?}");
    assert!(elapsed < Duration::from_secs(3), "{elapsed:?}");
}

#[tokio::test]
async fn locked_and_other_errors_are_not_retried() {
    let (sim, client) = setup().await;
    let id = server(&sim).await;
    for (code, status) in [
        ("locked", 423),
        ("server_error", 500),
        ("unavailable", 503),
        ("forbidden", 403),
        ("protected", 423),
        ("uniqueness_error", 409),
    ] {
        sim.admin().reset_request_counts().await.expect("reset");
        sim.admin()
            .inject_fault(Fault::new("/servers/{id}").code(code).count(3))
            .await
            .expect("fault");
        let err = client.servers().get(id).await.expect_err(code);
        assert_eq!(err.code().map(|c| c.as_str()), Some(code));
        assert_eq!(err.status(), Some(status), "{code}");
        assert!(!err.is_not_found(), "{code}");
        assert_eq!(
            count(&sim, GET_SERVER).await,
            1,
            "{code} must not be retried"
        );
        sim.admin().clear_faults().await.expect("clear");
    }
    sim.admin()
        .inject_fault(Fault::new("/servers/{id}").code("locked"))
        .await
        .expect("fault");
    let err = client.servers().get(id).await.expect_err("locked");
    assert!(err.is_locked_or_conflict());
    assert_eq!(err.kind(), "api_locked");
}

#[tokio::test]
async fn wrong_token_is_unauthorized_and_never_shown() {
    let sim = common::start_sim().await;
    let secret = "wrong-but-secret-token-value-0123456789";
    let mut config = config_for(&sim);
    config.token = Token::new(secret);
    let client = Client::new(config).expect("client");
    let err = client.locations().list().await.expect_err("unauthorized");
    assert_eq!(err.code(), Some(&ErrorCode::Unauthorized));
    assert_eq!(err.status(), Some(401));
    assert!(!err.is_not_found());
    assert_eq!(err.kind(), "api_auth");
    assert_eq!(count(&sim, "GET /locations").await, 1, "not retried");
    for shown in [format!("{err}"), format!("{err:?}"), format!("{client:?}")] {
        assert!(!shown.contains(secret), "token leaked: {shown}");
    }
}

#[tokio::test]
async fn request_timeouts_are_retried() {
    let sim = common::start_sim().await;
    let id = server(&sim).await;
    let client = Client::new(config_for(&sim).with_request_timeout(Duration::from_millis(400)))
        .expect("client");
    sim.admin()
        .inject_fault(
            Fault::new("/servers/{id}")
                .latency(Duration::from_millis(1500))
                .count(1),
        )
        .await
        .expect("fault");
    let s = client.servers().get(id).await.expect("second try answers");
    assert_eq!(s.id, id);
    assert_eq!(count(&sim, GET_SERVER).await, 2);
}

#[tokio::test]
async fn persistent_timeouts_are_transport_errors() {
    let sim = common::start_sim().await;
    let id = server(&sim).await;
    let mut config = config_for(&sim).with_request_timeout(Duration::from_millis(80));
    config.retry.max_tries = 3;
    let client = Client::new(config).expect("client");
    sim.admin()
        .inject_fault(
            Fault::new("/servers/{id}")
                .latency(Duration::from_millis(500))
                .count(10),
        )
        .await
        .expect("fault");
    let err = client.servers().get(id).await.expect_err("timeout");
    let Error::Transport(t) = &err else {
        panic!("expected a transport error, got {err:?}");
    };
    assert!(t.is_timeout());
    assert!(!err.is_not_found());
    assert_eq!(err.code(), None);
    assert_eq!(err.kind(), "transport");
    assert_eq!(count(&sim, GET_SERVER).await, 3);
}

#[tokio::test]
async fn connection_refused_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    drop(listener);
    let config = hcloud_api::ClientConfig::new(Token::new("t"))
        .with_endpoint(format!("http://{addr}/v1"))
        .with_retry(common::fast_retry());
    let client = Client::new(config).expect("client");
    let err = client.servers().get(1).await.expect_err("refused");
    assert!(matches!(err, Error::Transport(_)), "{err:?}");
    assert!(!err.is_not_found());
}

/// A stub answering each connection with the next canned response.
async fn stub(responses: Vec<String>) -> (String, tokio::task::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let mut served = 0;
        for response in responses {
            let Ok((mut socket, _)) = listener.accept().await else {
                break;
            };
            let mut buf = Vec::new();
            let mut chunk = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match socket.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = socket.write_all(response.as_bytes()).await;
            let _ = socket.shutdown().await;
            served += 1;
        }
        served
    });
    (format!("http://{addr}/v1"), task)
}

fn http(status: &str, content_type: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn bare_gateway_errors_are_retried_other_bare_errors_are_not() {
    let location = r#"{"location":{"id":1,"name":"fsn1","description":"Falkenstein DC Park 1","country":"DE","city":"Falkenstein","latitude":50.47612,"longitude":12.370071,"network_zone":"eu-central"}}"#;
    let (endpoint, task) = stub(vec![
        http("502 Bad Gateway", "text/html", "<html>bad gateway</html>"),
        http("504 Gateway Timeout", "text/plain", "upstream timed out"),
        http("200 OK", "application/json", location),
    ])
    .await;
    let client = Client::new(
        hcloud_api::ClientConfig::new(Token::new("t"))
            .with_endpoint(endpoint)
            .with_retry(common::fast_retry()),
    )
    .expect("client");
    let loc = client.locations().get(1).await.expect("third answer");
    assert_eq!(loc.name, "fsn1");
    assert_eq!(task.await.expect("stub"), 3);

    let (endpoint, task) = stub(vec![
        http("500 Internal Server Error", "text/plain", "oops"),
        http("404 Not Found", "text/plain", "no such route"),
    ])
    .await;
    let client = Client::new(
        hcloud_api::ClientConfig::new(Token::new("t"))
            .with_endpoint(endpoint)
            .with_retry(common::fast_retry()),
    )
    .expect("client");
    let err = client.locations().get(1).await.expect_err("bare 500");
    let Error::Api(api) = &err else {
        panic!("expected an API error, got {err:?}");
    };
    assert!(api.is_bare());
    assert_eq!(api.status, 500);
    assert_eq!(api.message, "oops");
    // A bare 404 (e.g. a wrong endpoint) is not "not found".
    let err = client.locations().get(1).await.expect_err("bare 404");
    assert_eq!(err.status(), Some(404));
    assert!(!err.is_not_found());
    assert_eq!(task.await.expect("stub"), 2);
}

#[tokio::test]
async fn undecodable_success_is_a_decode_error() {
    let (endpoint, _task) = stub(vec![http(
        "200 OK",
        "application/json",
        r#"{"location": 5}"#,
    )])
    .await;
    let client =
        Client::new(hcloud_api::ClientConfig::new(Token::new("t")).with_endpoint(endpoint))
            .expect("client");
    let err = client.locations().get(1).await.expect_err("decode");
    assert!(matches!(err, Error::Decode(_)), "{err:?}");
    assert_eq!(err.kind(), "decode");
    assert!(!err.is_not_found());
}

#[tokio::test]
async fn invalid_configuration_is_rejected() {
    let err = Client::new(hcloud_api::ClientConfig::new(Token::new("   "))).expect_err("empty");
    assert!(matches!(err, Error::Config(_)));
    let err = Client::new(
        hcloud_api::ClientConfig::new(Token::new("t")).with_endpoint("ftp://127.0.0.1/v1"),
    )
    .expect_err("scheme");
    assert!(err.to_string().contains("HCLOUD_ENDPOINT"), "{err}");
    let mut config = hcloud_api::ClientConfig::new(Token::new("t"));
    config.retry.max_tries = 0;
    assert!(matches!(Client::new(config), Err(Error::Config(_))));
}

#[tokio::test]
async fn user_agent_and_auth_header_are_sent() {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let task = tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.expect("accept");
        let mut buf = Vec::new();
        let mut chunk = [0u8; 1024];
        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
            let n = socket.read(&mut chunk).await.expect("read");
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
        }
        let body = r#"{"locations":[],"meta":{"pagination":{"page":1,"per_page":50,"previous_page":null,"next_page":null,"last_page":1,"total_entries":0}}}"#;
        let _ = socket
            .write_all(http("200 OK", "application/json", body).as_bytes())
            .await;
        String::from_utf8_lossy(&buf).to_lowercase()
    });
    let client = Client::new(
        hcloud_api::ClientConfig::new(Token::new("abc123"))
            .with_endpoint(format!("http://{addr}/v1")),
    )
    .expect("client");
    assert!(client.locations().list().await.expect("list").is_empty());
    let request = task.await.expect("request");
    assert!(
        request.starts_with("get /v1/locations?page=1&per_page=50 "),
        "{request}"
    );
    assert!(
        request.contains("authorization: bearer abc123"),
        "{request}"
    );
    assert!(
        request.contains(&format!(
            "user-agent: hcloud-ccm-rs/{}",
            env!("CARGO_PKG_VERSION")
        )),
        "{request}"
    );
}

#[tokio::test]
async fn a_success_after_transient_failures_counts_one_recovery() {
    let (sim, client) = setup().await;
    let id = server(&sim).await;
    let mut recoveries = client.metrics().recoveries();
    client.servers().get(id).await.expect("healthy");
    assert!(!recoveries.has_changed().unwrap(), "no failure before");
    // 503 `unavailable` is not retried: the call fails, and so does a 404 after it (an answer,
    // but no success).
    sim.admin()
        .inject_fault(
            Fault::new("/servers/{id}")
                .method("GET")
                .status(503)
                .count(1),
        )
        .await
        .expect("fault");
    let err = client.servers().get(id).await.expect_err("503");
    assert_eq!(err.status(), Some(503));
    assert!(client.servers().get(id + 1000).await.is_err(), "not found");
    assert!(
        !recoveries.has_changed().unwrap(),
        "not answered with success yet"
    );
    client
        .servers()
        .get(id)
        .await
        .expect("the API answers again");
    assert_eq!(*recoveries.borrow_and_update(), 1);
    // A retried failure that ends in success within one call is a recovery too.
    sim.admin()
        .inject_fault(
            Fault::new("/servers/{id}")
                .method("GET")
                .code("bad_gateway")
                .count(2),
        )
        .await
        .expect("fault");
    client
        .servers()
        .get(id)
        .await
        .expect("retried until success");
    assert_eq!(*recoveries.borrow_and_update(), 2);
}
