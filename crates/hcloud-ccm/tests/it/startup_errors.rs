//! The start against a cloud that refuses the configuration, and against one that does not
//! answer yet. An answer waiting will not change (no API at `HCLOUD_ENDPOINT`, a metadata
//! service that refuses, a network that does not exist) ends the process at once with exit
//! status 2 and a log line naming the setting; what may pass by itself (a 503, nothing
//! listening) is tried again while the process stays alive: `/healthz` green (a liveness probe
//! must not restart a waiting process), `/readyz` red until the API answers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ccm::{BIN, TOKEN, free_port, terminate};
use hcloud_sim::{Fault, NetworkSeed, SimConfig, Simulator};

use crate::support::scope::Scope;

/// The exit status of a configuration the cloud refuses (as for invalid configuration).
const CONFIGURATION_REFUSED: i32 = 2;

/// What the log says on each attempt that may pass by itself.
const RETRIED: &str = "not usable yet; trying again";

/// Runs the binary with `env` (`HCLOUD_ENDPOINT` among them) until it exits, which it must
/// within 30 s; returns its exit code and its log.
async fn run_to_exit(env: &[(&str, String)]) -> (Option<i32>, String) {
    let scope = Scope::new("startup-errors").await;
    let access = scope.admin_access("ccm").await;
    let mut command = tokio::process::Command::new(BIN);
    command
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_METRICS_ENABLED", "false")
        .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
        .env("HCLOUD_NETWORK_ROUTES_ENABLED", "false")
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            "--secure-port=0",
        ]);
    let output = tokio::time::timeout(Duration::from_secs(30), command.output())
        .await
        .expect("the binary exits on its own")
        .unwrap();
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

/// Asserts a refused start: exit status 2, at the first answer (no retry), before any
/// controller, every one of `needles` in the log, the token never.
fn assert_refused(case: &str, (code, log): &(Option<i32>, String), needles: &[&str]) {
    assert_eq!(*code, Some(CONFIGURATION_REFUSED), "{case}:\n{log}");
    for needle in needles {
        assert!(log.contains(needle), "{case}: {needle:?} missing:\n{log}");
    }
    assert!(!log.contains(RETRIED), "{case}: not retried:\n{log}");
    assert!(!log.contains("controller started"), "{case}:\n{log}");
    assert!(!log.contains(TOKEN), "{case}: the token is never logged");
}

#[tokio::test]
async fn an_endpoint_without_v1_exits_2_naming_hcloud_endpoint() {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    // The simulator's root answers 404 on every path outside /v1, as the API does.
    let endpoint = format!("http://{}", sim.addr());
    let outcome = run_to_exit(&[("HCLOUD_ENDPOINT", endpoint.clone())]).await;
    assert_refused(
        "no /v1",
        &outcome,
        &[
            "HCLOUD_ENDPOINT",
            &endpoint,
            "404",
            "must end in /v1",
            "https://api.hetzner.cloud/v1",
        ],
    );
    // An endpoint with another path fails the same way.
    let outcome = run_to_exit(&[("HCLOUD_ENDPOINT", format!("{endpoint}/v2/"))]).await;
    assert_refused(
        "/v2",
        &outcome,
        &["HCLOUD_ENDPOINT", "404", "must end in /v1"],
    );
}

/// A metadata service of another kind: it answers every request with 403.
async fn forbidding_metadata_service() -> (SocketAddr, tokio::task::JoinHandle<()>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = axum::Router::new().fallback(|| async {
        (
            axum::http::StatusCode::FORBIDDEN,
            "access to the metadata service denied\n",
        )
    });
    let task = tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    (addr, task)
}

#[tokio::test]
async fn a_refusing_metadata_service_exits_2_naming_hcloud_network() {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    sim.admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .unwrap();
    let (forbidding, service) = forbidding_metadata_service().await;
    let cases = [
        // Another provider's (or a proxy's) metadata service refusing.
        (
            "403",
            format!("http://{forbidding}/hetzner/v1/metadata"),
            "access to the metadata service denied",
        ),
        // The simulator's, answering for no server: not a Hetzner Cloud server.
        (
            "404",
            sim.metadata_url(),
            "no server is set for the metadata service",
        ),
    ];
    for (status, metadata, body) in cases {
        let outcome = run_to_exit(&[
            ("HCLOUD_ENDPOINT", sim.base_url()),
            ("HCLOUD_NETWORK", "k8s".to_owned()),
            ("HCLOUD_METADATA_ENDPOINT", metadata.clone()),
        ])
        .await;
        assert_refused(
            status,
            &outcome,
            &[
                "HCLOUD_NETWORK:",
                "HCLOUD_METADATA_ENDPOINT",
                "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK=true",
                &metadata,
                &format!("HTTP {status}"),
                body,
            ],
        );
    }
    service.abort();
}

#[tokio::test]
async fn an_unknown_network_exits_2_naming_hcloud_network() {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    // By name (the list is empty) and by ID (404, then no network of that name either).
    for network in ["missing-net", "4711"] {
        let outcome = run_to_exit(&[
            ("HCLOUD_ENDPOINT", sim.base_url()),
            ("HCLOUD_NETWORK", network.to_owned()),
            ("HCLOUD_METADATA_ENDPOINT", sim.metadata_url()),
        ])
        .await;
        assert_refused(network, &outcome, &["HCLOUD_NETWORK", network, "not found"]);
    }
}

/// The status of `path` on the binary's plain-HTTP port, and its body.
async fn probe(http: &reqwest::Client, port: u16, path: &str) -> Option<(u16, String)> {
    let response = http
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .ok()?;
    let status = response.status().as_u16();
    Some((status, response.text().await.ok()?))
}

/// The binary against `endpoint`, its log in `log` and its endpoints on `metrics_port`.
fn spawn(
    scope: &Scope,
    kubeconfig: &std::path::Path,
    endpoint: &str,
    metrics_port: u16,
    log: &std::path::Path,
) -> Child {
    Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", endpoint)
        .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
        .env("HCLOUD_NETWORK_ROUTES_ENABLED", "false")
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{metrics_port}"),
        )
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", kubeconfig.display()),
            &scope.lease_flag(),
            "--leader-elect-retry-period=500ms",
            "--secure-port=0",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(log).unwrap())
        .spawn()
        .unwrap()
}

/// Waits until the log shows `attempts` failed attempts; meanwhile the process must run.
async fn wait_for_retries(child: &mut Child, log: &std::path::Path, attempts: usize) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = std::fs::read_to_string(log).unwrap();
        if text.lines().filter(|l| l.contains(RETRIED)).count() >= attempts {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "exited:\n{text}");
        assert!(Instant::now() < deadline, "not retried:\n{text}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// While the API is not usable the process is alive: `/healthz` 200, `/readyz` red naming
/// `hcloudApi`.
async fn assert_alive_but_not_ready(http: &reqwest::Client, child: &mut Child, port: u16) {
    assert!(child.try_wait().unwrap().is_none(), "the binary exited");
    let (status, body) = probe(http, port, "/healthz?verbose").await.unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(!body.contains("hcloudApi"), "{body}");
    let (status, body) = probe(http, port, "/readyz?verbose").await.unwrap();
    assert_ne!(status, 200, "{body}");
    assert!(body.contains("[-]hcloudApi failed"), "{body}");
}

/// Waits until `/readyz` answers 200, then stops the binary and returns its log.
async fn ready_then_stop(http: &reqwest::Client, child: &mut Child, port: u16) -> String {
    let deadline = Instant::now() + Duration::from_secs(60);
    while probe(http, port, "/readyz").await.map(|(s, _)| s) != Some(200) {
        assert!(child.try_wait().unwrap().is_none(), "the binary exited");
        assert!(Instant::now() < deadline, "not ready within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(probe(http, port, "/healthz").await.unwrap().0, 200);
    let (status, log) = terminate(child, Duration::from_secs(30)).await;
    assert!(status.success(), "{status:?}");
    log
}

#[tokio::test]
async fn an_unavailable_api_is_retried_with_healthz_green_and_readyz_red_until_it_answers() {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    sim.admin()
        .inject_fault(
            Fault::new("/locations")
                .method("GET")
                .status(503)
                .count(1000),
        )
        .await
        .unwrap();
    let scope = Scope::new("startup-errors").await;
    let access = scope.admin_access("ccm").await;
    let port = free_port();
    let log = scope.dir.path().join("stderr.log");
    let mut child = spawn(&scope, &access.kubeconfig, &sim.base_url(), port, &log);
    let http = reqwest::Client::new();
    wait_for_retries(&mut child, &log, 2).await;
    assert_alive_but_not_ready(&http, &mut child, port).await;
    // The API comes back: the next attempt passes.
    sim.admin().clear_faults().await.unwrap();
    ready_then_stop(&http, &mut child, port).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("503"), "the cause is logged:\n{text}");
    assert!(text.contains("the Hetzner Cloud API is usable"), "{text}");
}

#[tokio::test]
async fn an_endpoint_where_nothing_listens_is_retried_until_the_api_starts_there() {
    let scope = Scope::new("startup-errors").await;
    let access = scope.admin_access("ccm").await;
    let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let port = free_port();
    let log = scope.dir.path().join("stderr.log");
    let endpoint = format!("http://{api}/v1");
    let mut child = spawn(&scope, &access.kubeconfig, &endpoint, port, &log);
    let http = reqwest::Client::new();
    wait_for_retries(&mut child, &log, 2).await;
    assert_alive_but_not_ready(&http, &mut child, port).await;
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("HCLOUD_ENDPOINT") && text.contains(&api.to_string()),
        "each attempt names the endpoint:\n{text}"
    );
    // The API starts on that address.
    let _sim = Simulator::start_on(SimConfig::default().token(TOKEN), api)
        .await
        .unwrap();
    ready_then_stop(&http, &mut child, port).await;
}
