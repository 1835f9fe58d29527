//! The start against a cloud that refuses the configuration, and against one that does not
//! answer yet. An answer waiting will not change (no API at `HCLOUD_ENDPOINT`, a metadata
//! service that refuses, a network that does not exist) ends the process at once with exit
//! status 2 and a log line naming the setting; what may pass by itself (a 503, nothing
//! listening) is tried again while the process stays alive: `/healthz` green (a liveness probe
//! must not restart a waiting process), `/readyz` red until the API answers.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::support::ccm;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ccm::{BIN, TOKEN, free_port, terminate};
use hcloud_sim::{Fault, NetworkSeed, SimConfig, Simulator};

use crate::support::scope::{Access, Scope};
use crate::support::{RETRIED, run_to_exit, wait_for_retries};

/// The exit status of a configuration the cloud refuses (as for invalid configuration).
const CONFIGURATION_REFUSED: i32 = 2;

/// [`run_to_exit`] against `endpoint` with `env`, load balancers and routes off.
async fn start_to_exit(endpoint: &str, env: &[(&str, &str)]) -> (Option<i32>, String) {
    let off = [
        ("HCLOUD_LOAD_BALANCERS_ENABLED", "false"),
        ("HCLOUD_NETWORK_ROUTES_ENABLED", "false"),
    ];
    run_to_exit("startup-errors", endpoint, &[&off[..], env].concat()).await
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
    let outcome = start_to_exit(&endpoint, &[]).await;
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
    let outcome = start_to_exit(&format!("{endpoint}/v2/"), &[]).await;
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
        let outcome = start_to_exit(
            &sim.base_url(),
            &[
                ("HCLOUD_NETWORK", "k8s"),
                ("HCLOUD_METADATA_ENDPOINT", &metadata),
            ],
        )
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
        let outcome = start_to_exit(
            &sim.base_url(),
            &[
                ("HCLOUD_NETWORK", network),
                ("HCLOUD_METADATA_ENDPOINT", &sim.metadata_url()),
            ],
        )
        .await;
        assert_refused(network, &outcome, &["HCLOUD_NETWORK", network, "not found"]);
    }
}

/// The binary against an API that is not usable yet, in a scope of its own: its log in the
/// scope's directory, its endpoints on a plain-HTTP port.
struct Retrying {
    child: Child,
    port: u16,
    log: PathBuf,
    http: reqwest::Client,
    _access: Access,
    _scope: Scope,
}

impl Retrying {
    /// The binary against `endpoint`, once its log shows two failed attempts (meanwhile it must
    /// run), alive but not ready.
    async fn start(endpoint: &str) -> Self {
        let scope = Scope::new("startup-errors").await;
        let access = scope.admin_access("ccm").await;
        let port = free_port();
        let log = scope.dir.path().join("stderr.log");
        let child = Command::new(BIN)
            .env_clear()
            .env("HCLOUD_TOKEN", TOKEN)
            .env("HCLOUD_ENDPOINT", endpoint)
            .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
            .env("HCLOUD_NETWORK_ROUTES_ENABLED", "false")
            .env("HCLOUD_METRICS_ADDRESS", format!("127.0.0.1:{port}"))
            .args([
                "--cloud-provider=hcloud",
                &format!("--kubeconfig={}", access.kubeconfig.display()),
                &scope.lease_flag(),
                "--leader-elect-retry-period=500ms",
                "--secure-port=0",
            ])
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut run = Self {
            child,
            port,
            log,
            http: reqwest::Client::new(),
            _access: access,
            _scope: scope,
        };
        wait_for_retries(&mut run.child, &run.log, 2).await;
        run.assert_alive_but_not_ready().await;
        run
    }

    /// The log so far.
    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap()
    }

    /// The status of `path` on the binary's plain-HTTP port, and its body.
    async fn probe(&self, path: &str) -> Option<(u16, String)> {
        let response = self
            .http
            .get(format!("http://127.0.0.1:{}{path}", self.port))
            .send()
            .await
            .ok()?;
        let status = response.status().as_u16();
        Some((status, response.text().await.ok()?))
    }

    /// While the API is not usable the process is alive: `/healthz` 200, `/readyz` red naming
    /// `hcloudApi`.
    async fn assert_alive_but_not_ready(&mut self) {
        assert!(
            self.child.try_wait().unwrap().is_none(),
            "the binary exited"
        );
        let (status, body) = self.probe("/healthz?verbose").await.unwrap();
        assert_eq!(status, 200, "{body}");
        assert!(!body.contains("hcloudApi"), "{body}");
        let (status, body) = self.probe("/readyz?verbose").await.unwrap();
        assert_ne!(status, 200, "{body}");
        assert!(body.contains("[-]hcloudApi failed"), "{body}");
    }

    /// Waits until `/readyz` answers 200, then stops the binary.
    async fn ready_then_stop(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while self.probe("/readyz").await.map(|(s, _)| s) != Some(200) {
            assert!(
                self.child.try_wait().unwrap().is_none(),
                "the binary exited"
            );
            assert!(Instant::now() < deadline, "not ready within 60 s");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(self.probe("/healthz").await.unwrap().0, 200);
        let (status, _) = terminate(&mut self.child, Duration::from_secs(30)).await;
        assert!(status.success(), "{status:?}");
    }
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
    let mut run = Retrying::start(&sim.base_url()).await;
    // The API comes back: the next attempt passes.
    sim.admin().clear_faults().await.unwrap();
    run.ready_then_stop().await;
    let text = run.log();
    assert!(text.contains("503"), "the cause is logged:\n{text}");
    assert!(text.contains("the Hetzner Cloud API is usable"), "{text}");
}

#[tokio::test]
async fn an_endpoint_where_nothing_listens_is_retried_until_the_api_starts_there() {
    let api = SocketAddr::from(([127, 0, 0, 1], free_port()));
    let mut run = Retrying::start(&format!("http://{api}/v1")).await;
    let text = run.log();
    assert!(
        text.contains("HCLOUD_ENDPOINT") && text.contains(&api.to_string()),
        "each attempt names the endpoint:\n{text}"
    );
    // The API starts on that address.
    let _sim = Simulator::start_on(SimConfig::default().token(TOKEN), api)
        .await
        .unwrap();
    run.ready_then_stop().await;
}
