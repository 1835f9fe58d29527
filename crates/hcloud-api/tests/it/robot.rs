//! The Robot webservice client against the simulator's Robot side.

use std::time::Duration;

use hcloud_api::Error;
use hcloud_api::robot::{RobotClient, RobotConfig, RobotErrorCode, RobotMetrics, RobotServer};
use hcloud_sim::{Fault, RobotRateLimit, RobotServerSeed, SimConfig, Simulator};
use prometheus_client::encoding::text::encode;
use prometheus_client::registry::Registry;

const PASSWORD: &str = "robot-pw-7f3a9c-never-shown";

async fn sim_with(config: SimConfig) -> Simulator {
    Simulator::start(config.robot_credentials("#ws+test", PASSWORD))
        .await
        .expect("simulator")
}

fn client_for(sim: &Simulator, password: &str) -> RobotClient {
    let config = RobotConfig::new("#ws+test", password)
        .endpoint(&sim.robot_url())
        .expect("endpoint");
    RobotClient::new(config).expect("client")
}

async fn robot_count(sim: &Simulator, key: &str) -> u64 {
    let counts = sim.admin().robot_request_counts().await.expect("counts");
    counts.get(key).copied().unwrap_or(0)
}

fn robot_error(
    result: Result<impl std::fmt::Debug, Error>,
) -> Box<hcloud_api::robot::RobotApiError> {
    match result {
        Err(Error::Robot(e)) => e,
        other => panic!("expected a Robot error, got {other:?}"),
    }
}

#[tokio::test]
async fn lists_servers_and_reads_one_and_its_power_state() {
    let sim = sim_with(SimConfig::default()).await;
    let admin = sim.admin();
    let a = admin
        .add_robot_server(
            RobotServerSeed::new("worker-1")
                .product("Server Auction")
                .dc("HEL1-DC5"),
        )
        .await
        .unwrap();
    let b = admin
        .add_robot_server(RobotServerSeed::new("worker-2").number(77).server_ip(""))
        .await
        .unwrap();
    let metrics = RobotMetrics::new();
    let client = RobotClient::new(
        RobotConfig::new("#ws+test", PASSWORD)
            .endpoint(&sim.robot_url())
            .unwrap()
            .with_metrics(metrics.clone()),
    )
    .unwrap();

    let servers = client.servers().await.unwrap();
    assert_eq!(
        servers,
        vec![
            RobotServer {
                server_number: 77,
                server_name: "worker-2".into(),
                server_ip: String::new(),
                server_ipv6_net: "2001:db8:ffee:2::".into(),
                product: "EX44".into(),
                dc: "FSN1-DC14".into(),
            },
            RobotServer {
                server_number: a,
                server_name: "worker-1".into(),
                server_ip: "203.0.113.101".into(),
                server_ipv6_net: "2001:db8:ffee:1::".into(),
                product: "Server Auction".into(),
                dc: "HEL1-DC5".into(),
            },
        ]
    );
    assert_eq!(client.server(a).await.unwrap(), servers[1]);
    assert_eq!(client.server(b).await.unwrap(), servers[0]);

    let reset = client.reset(a).await.unwrap();
    assert_eq!(reset.operating_status, "running");
    assert!(!reset.is_shut_off());
    admin.robot_power_off(a).await.unwrap();
    assert!(client.reset(a).await.unwrap().is_shut_off());
    admin.robot_power_on(a).await.unwrap();
    assert!(!client.reset(a).await.unwrap().is_shut_off());

    let missing = robot_error(client.server(5).await);
    assert_eq!(missing.status, 404);
    assert_eq!(missing.code, RobotErrorCode::ServerNotFound);
    assert!(missing.is_not_found());
    assert!(robot_error(client.reset(5).await).is_not_found());

    // The metrics have their own names and count by route template.
    assert_eq!(metrics.requests_total("200", "get", "/server"), 1);
    assert_eq!(metrics.requests_total("200", "get", "/server/-"), 2);
    assert_eq!(metrics.requests_total("200", "get", "/reset/-"), 3);
    assert_eq!(metrics.requests_total("404", "get", "/reset/-"), 1);
    assert_eq!(metrics.in_flight(), 0);
    let mut registry = Registry::default();
    client.register_metrics(&mut registry);
    let mut text = String::new();
    encode(&mut text, &registry).unwrap();
    assert!(
        text.contains(
            r#"robot_api_requests_total{code="200",method="get",api_endpoint="/server"} 1"#
        ),
        "{text}"
    );
    assert!(text.contains("robot_api_in_flight_requests 0"), "{text}");
    assert!(
        text.contains(r#"robot_api_request_duration_seconds_count{method="get"} 8"#),
        "{text}"
    );
    assert!(!text.contains("hcloud_api"), "{text}");
}

#[tokio::test]
async fn an_account_without_servers_is_an_empty_list() {
    let sim = sim_with(SimConfig::default()).await;
    let client = client_for(&sim, PASSWORD);
    assert_eq!(client.servers().await.unwrap(), Vec::new());
    assert_eq!(robot_count(&sim, "GET /server").await, 1);
    // …while a 404 without Robot's envelope is no empty account.
    sim.admin()
        .inject_robot_fault(Fault::new("/server").proxy_status(404))
        .await
        .unwrap();
    let bare = robot_error(client.servers().await);
    assert_eq!((bare.status, bare.code.as_str()), (404, ""));
}

#[tokio::test]
async fn wrong_credentials_are_a_typed_error_without_the_password() {
    let sim = sim_with(SimConfig::default()).await;
    let wrong_password = "wrong-pw-51d0e2-never-shown";
    let client = client_for(&sim, wrong_password);
    let result = client.servers().await;
    let shown = format!("{result:?} {}", result.as_ref().map(|_| ()).unwrap_err());
    let e = robot_error(result);
    assert_eq!(e.status, 401);
    assert_eq!(e.code, RobotErrorCode::Unauthorized);
    assert_eq!(Error::Robot(e).kind(), "robot_auth");
    for secret in [wrong_password, PASSWORD] {
        assert!(!shown.contains(secret), "{shown}");
    }
    let debug = format!("{client:?}");
    assert!(!debug.contains(wrong_password), "{debug}");
    assert!(debug.contains(&sim.robot_url()), "{debug}");
    let config = format!("{:?}", RobotConfig::new("#ws+test", PASSWORD));
    assert!(!config.contains(PASSWORD), "{config}");

    // Empty credentials make no client, naming the setting.
    let empty = RobotClient::new(RobotConfig::new("#ws+test", "")).unwrap_err();
    assert!(empty.to_string().contains("ROBOT_PASSWORD"), "{empty}");
    let empty = RobotClient::new(RobotConfig::new("", "x")).unwrap_err();
    assert!(empty.to_string().contains("ROBOT_USER"), "{empty}");
}

#[tokio::test]
async fn the_rate_limit_is_a_typed_error_and_not_retried() {
    let sim = sim_with(SimConfig::default().robot_rate_limit(Some(RobotRateLimit {
        max_request: 2,
        interval: 3600,
    })))
    .await;
    sim.admin()
        .add_robot_server(RobotServerSeed::new("d"))
        .await
        .unwrap();
    let client = client_for(&sim, PASSWORD);
    client.servers().await.unwrap();
    client.servers().await.unwrap();
    let result = client.servers().await;
    let text = result.as_ref().map(|_| ()).unwrap_err().to_string();
    let e = robot_error(result);
    assert_eq!(e.status, 403);
    assert_eq!(e.code, RobotErrorCode::RateLimitExceeded);
    assert!(e.is_rate_limited());
    assert_eq!(
        text,
        "Robot GET /server: 403 RATE_LIMIT_EXCEEDED: rate limit exceeded"
    );
    assert_eq!(Error::Robot(e).kind(), "robot_rate_limited");
    assert_eq!(robot_count(&sim, "GET /server").await, 3, "no retry");
}

#[tokio::test]
async fn error_answers_without_envelope_and_server_errors_keep_their_status() {
    let sim = sim_with(SimConfig::default()).await;
    let n = sim
        .admin()
        .add_robot_server(RobotServerSeed::new("d"))
        .await
        .unwrap();
    let client = client_for(&sim, PASSWORD);
    sim.admin()
        .inject_robot_fault(Fault::new("/reset/{id}").proxy_status(502))
        .await
        .unwrap();
    let bare = robot_error(client.reset(n).await);
    assert_eq!(bare.status, 502);
    assert_eq!(bare.code, RobotErrorCode::Unknown(String::new()));
    assert!(bare.message.contains("502"), "{bare:?}");

    sim.admin()
        .inject_robot_fault(Fault::new("/server").status(500))
        .await
        .unwrap();
    let server_error = robot_error(client.servers().await);
    assert_eq!(server_error.code, RobotErrorCode::InternalError);
    assert_eq!(robot_count(&sim, "GET /server").await, 1, "no retry");
    assert_eq!(client.servers().await.unwrap().len(), 1);
}

#[tokio::test]
async fn a_slow_answer_times_out_as_a_transport_error() {
    let sim = sim_with(SimConfig::default()).await;
    sim.admin()
        .inject_robot_fault(Fault::new("/server").latency(Duration::from_secs(5)))
        .await
        .unwrap();
    let client = RobotClient::new(
        RobotConfig::new("#ws+test", PASSWORD)
            .endpoint(&sim.robot_url())
            .unwrap()
            .with_timeout(Duration::from_millis(300)),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let result = client.servers().await;
    assert!(
        started.elapsed() < Duration::from_secs(4),
        "{:?}",
        started.elapsed()
    );
    match &result {
        Err(Error::Transport(e)) => assert!(e.is_timeout(), "{e}"),
        other => panic!("expected a timeout, got {other:?}"),
    }
    let text = result.unwrap_err().to_string();
    assert!(!text.contains(PASSWORD), "{text}");
    assert!(text.starts_with("GET /server"), "{text}");
}

#[tokio::test]
async fn an_undecodable_answer_is_a_decode_error() {
    // A raw stub: the simulator always answers well-formed JSON.
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut socket, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4096];
        let _ = socket.read(&mut buf).await;
        let body = r#"[{"server": {"server_name": "no number"}}]"#;
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
        socket.write_all(answer.as_bytes()).await.unwrap();
    });
    let client = RobotClient::new(
        RobotConfig::new("#ws+test", PASSWORD)
            .endpoint(&format!("http://{addr}"))
            .unwrap(),
    )
    .unwrap();
    match client.servers().await {
        Err(Error::Decode(e)) => {
            assert_eq!(e.status, 200);
            assert_eq!(e.path, "/server");
        }
        other => panic!("expected a decode error, got {other:?}"),
    }
}
