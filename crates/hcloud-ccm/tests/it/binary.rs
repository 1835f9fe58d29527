//! The binary as users run it: configuration errors, --help, and a full start/elect/stop cycle
//! against a real kube-apiserver.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::panic)] // test code

use crate::support::ccm;

use std::net::TcpListener;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ccm::{BIN, TOKEN, free_port, simulator_with_host_in_network, terminate};
use hcloud_sim::{NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::Api;

use crate::support::scope::Scope;
use crate::support::{RETRIED, run_to_exit, wait_for_retries};

#[test]
fn invalid_environment_is_reported_all_at_once_with_exit_status_2() {
    let output = Command::new(BIN)
        .env_clear()
        .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
        .env("HCLOUD_LOAD_BALANCERS_NETWORK_ZONE", "eu-central")
        .env("HCLOUD_INSTANCES_ADDRESS_FAMILY", "ipv5")
        .env("HCLOUD_METRICS_ENABLED", "yes")
        .env("ROBOT_ENABLED", "true")
        .env("ROBOT_USER", "someone")
        .env("ROBOT_CACHE_TIMEOUT", "10")
        .args([
            "--cloud-provider=hcloud",
            "--leader-elect-retry-period=soon",
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    for setting in [
        "HCLOUD_TOKEN:",
        "HCLOUD_LOAD_BALANCERS_LOCATION/HCLOUD_LOAD_BALANCERS_NETWORK_ZONE:",
        "HCLOUD_INSTANCES_ADDRESS_FAMILY:",
        "HCLOUD_METRICS_ENABLED:",
        "ROBOT_USER/ROBOT_PASSWORD:",
        "ROBOT_CACHE_TIMEOUT:",
        "--leader-elect-retry-period:",
    ] {
        assert!(stderr.contains(setting), "{setting} missing:\n{stderr}");
    }
    assert!(
        stderr.starts_with("invalid configuration (7 problems):"),
        "{stderr}"
    );
}

#[test]
fn unknown_flags_are_usage_errors_naming_the_flag() {
    let output = Command::new(BIN)
        .env_clear()
        .args(["--cloud-provider=hcloud", "--no-such-flag=1"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(stderr.contains("--no-such-flag"), "{stderr}");
}

#[test]
fn the_token_is_never_a_flag() {
    let output = Command::new(BIN)
        .env_clear()
        .args([
            "--cloud-provider=hcloud",
            &format!("--hcloud-token={TOKEN}"),
        ])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert!(
        stderr.contains("--hcloud-token")
            && stderr.contains("HCLOUD_TOKEN")
            && stderr.contains("HCLOUD_TOKEN_FILE"),
        "{stderr}"
    );
    assert!(!stderr.contains(TOKEN), "the token is not echoed: {stderr}");
}

#[test]
fn help_lists_variables_but_never_secret_values() {
    let output = Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", "super-secret-token-value")
        .env("ROBOT_PASSWORD", "super-secret-password")
        .env("HCLOUD_NETWORK", "visible-network")
        .arg("--help")
        .output()
        .unwrap();
    assert!(output.status.success());
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(stdout.contains("HCLOUD_TOKEN") && stdout.contains("ROBOT_PASSWORD"));
    assert!(!stdout.contains("super-secret"), "{stdout}");
    // Non-secret values are shown, as clap does.
    assert!(stdout.contains("visible-network"));
}

#[tokio::test]
async fn starts_leads_serves_and_releases_the_lease_on_sigterm() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("binary").await;
    let admin = scope.admin.clone();
    let access = scope.admin_access("ccm").await;
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let lease_name = scope.lease();
    let metrics_port = free_port();
    let secure_port = free_port();

    let mut child = Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{metrics_port}"),
        )
        .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
        .env("RUST_LOG", "info")
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            "--leader-elect-retry-period=500ms",
            "--bind-address=127.0.0.1",
            &format!("--secure-port={secure_port}"),
            "--log-format=json",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    let http = reqwest::Client::builder()
        .tls_danger_accept_invalid_certs(true)
        .build()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = http
            .get(format!("http://127.0.0.1:{metrics_port}/readyz"))
            .send()
            .await
            .map(|r| r.status().is_success())
            .unwrap_or(false);
        let leases = Api::<Lease>::namespaced(admin.clone(), "kube-system");
        let held = leases
            .get_opt(lease_name)
            .await
            .unwrap()
            .and_then(|l| l.spec)
            .and_then(|s| s.holder_identity)
            .is_some_and(|h| h.contains('_'));
        if ready && held {
            break;
        }
        assert!(
            child.try_wait().unwrap().is_none(),
            "the binary exited early"
        );
        assert!(
            Instant::now() < deadline,
            "not ready and leading within 30 s"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = metrics_text(&http, metrics_port).await;
    assert!(
        metrics.contains(&format!(
            "leader_election_master_status{{name=\"{lease_name}\"}} 1"
        )),
        "{metrics}"
    );
    let healthz = http
        .get(format!("https://127.0.0.1:{secure_port}/healthz?verbose"))
        .send()
        .await
        .unwrap();
    assert!(healthz.status().is_success());
    assert!(
        healthz
            .text()
            .await
            .unwrap()
            .contains("[+]leaderElection ok")
    );
    let unauthorised = http
        .get(format!("https://127.0.0.1:{secure_port}/metrics"))
        .send()
        .await;
    assert_eq!(
        unauthorised.unwrap().status(),
        reqwest::StatusCode::UNAUTHORIZED
    );

    let (status, stderr) = terminate(&mut child, Duration::from_secs(30)).await;
    assert!(status.success(), "exit status {status:?}; log:\n{stderr}");
    assert!(stderr.contains("released the leader lease"), "{stderr}");
    // JSON log lines.
    assert!(stderr.lines().all(|l| l.starts_with('{')), "{stderr}");
    let lease = Api::<Lease>::namespaced(admin, "kube-system")
        .get(lease_name)
        .await
        .unwrap();
    assert_eq!(lease.spec.unwrap().holder_identity, None);
}

/// The exposition at `/metrics` of the plain-HTTP metrics port.
async fn metrics_text(http: &reqwest::Client, metrics_port: u16) -> String {
    http.get(format!("http://127.0.0.1:{metrics_port}/metrics"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// A flaky API at start (a proxy's HTML 404, a 503, a 429, then a 503 on the network read) is
/// retried with growing delays, each attempt logged, while /readyz is red and /healthz green
/// (the process is alive); once the API answers, the binary starts and leads. It never exits on
/// its own meanwhile.
#[tokio::test]
async fn transient_failures_at_start_are_retried_until_they_pass() {
    let (sim, _host) = simulator_with_host_in_network("ccm-host").await;
    sim.admin()
        .replace_faults(&[
            hcloud_sim::Fault::new("/locations")
                .method("GET")
                .proxy_status(404),
            hcloud_sim::Fault::new("/locations")
                .method("GET")
                .status(503),
            hcloud_sim::Fault::new("/locations")
                .method("GET")
                .code("rate_limit_exceeded")
                .count(5),
            hcloud_sim::Fault::new("/networks*")
                .method("GET")
                .status(503),
        ])
        .await
        .unwrap();
    let scope = Scope::new("binary").await;
    let access = scope.admin_access("ccm").await;
    let metrics_port = free_port();
    let mut child = Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_METADATA_ENDPOINT", sim.metadata_url())
        .env("HCLOUD_NETWORK", "k8s")
        .env("HCLOUD_NETWORK_ROUTES_ENABLED", "false")
        .env("HCLOUD_LOAD_BALANCERS_ENABLED", "false")
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{metrics_port}"),
        )
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            "--leader-elect-retry-period=500ms",
            "--secure-port=0",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let status = |path: &'static str| {
        let http = http.clone();
        async move {
            http.get(format!("http://127.0.0.1:{metrics_port}{path}"))
                .send()
                .await
                .map(|r| r.status().as_u16())
                .ok()
        }
    };
    // While the faults last: served, alive, but not ready.
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut red = 0;
    loop {
        let counts = sim.admin().request_counts().await.unwrap();
        let locations = counts.get("GET /locations").copied().unwrap_or(0);
        if locations >= 2 && sim.admin().faults().await.unwrap().len() >= 2 {
            let healthz = status("/healthz").await;
            let readyz = status("/readyz").await;
            assert_eq!(healthz, Some(200));
            assert!(readyz.is_some_and(|s| s != 200), "{readyz:?}");
            red += 1;
        }
        if status("/readyz").await == Some(200) {
            break;
        }
        assert!(child.try_wait().unwrap().is_none(), "the binary exited");
        assert!(Instant::now() < deadline, "not ready within 60 s");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(red > 0, "never seen red while the faults lasted");
    assert!(sim.admin().faults().await.unwrap().is_empty());
    assert_eq!(status("/healthz").await, Some(200));
    // The provider that started counts its start and its attached-network check once each.
    let metrics = metrics_text(&http, metrics_port).await;
    for op in ["hcloud/newCloud", "serverIsAttachedToNetwork"] {
        let series = format!("cloud_controller_manager_operations_total{{op=\"{op}\"}} 1");
        assert!(
            metrics.lines().any(|l| l == series),
            "{series} in:\n{metrics}"
        );
    }
    let (exit, log) = terminate(&mut child, Duration::from_secs(30)).await;
    assert!(exit.success(), "{exit:?}: {log}");
    let attempts = log.lines().filter(|l| l.contains(RETRIED)).count();
    assert!(attempts >= 3, "one log line per failed attempt:\n{log}");
    assert!(!log.contains(TOKEN), "the token is never logged");
}

#[tokio::test]
async fn a_rejected_token_stops_the_start_naming_hcloud_token() {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let other = "f".repeat(64);
    let (code, log) = run_to_exit("binary", &sim.base_url(), &[("HCLOUD_TOKEN", &other)]).await;
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("HCLOUD_TOKEN") && log.contains("unauthorized"),
        "{log}"
    );
    assert!(!log.contains(&other), "the token is never logged: {log}");
    assert!(!log.contains("controller started"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "no colour codes when stderr is not a terminal: {log:?}"
    );
    let counts = sim.admin().request_counts().await.unwrap();
    assert_eq!(
        counts.values().sum::<u64>(),
        1,
        "one API call checks the token: {counts:?}"
    );
}

#[tokio::test]
async fn an_unknown_network_stops_the_start_naming_hcloud_network() {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let (code, log) = run_to_exit(
        "binary",
        &sim.base_url(),
        &[
            ("HCLOUD_NETWORK", "missing-net"),
            ("HCLOUD_NETWORK_ROUTES_ENABLED", "false"),
        ],
    )
    .await;
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("HCLOUD_NETWORK") && log.contains("missing-net"),
        "{log}"
    );
}

/// The `args:` of the official deploy/ccm.yaml.
const OFFICIAL_CCM_ARGS: &[&str] = &[
    "--allow-untagged-cloud",
    "--cloud-provider=hcloud",
    "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    "--route-reconciliation-period=30s",
    "--webhook-secure-port=0",
    "--leader-elect=false",
];

/// The `args:` of the official deploy/ccm-networks.yaml.
const OFFICIAL_NETWORKS_ARGS: &[&str] = &[
    "--allow-untagged-cloud",
    "--cloud-provider=hcloud",
    "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    "--route-reconciliation-period=30s",
    "--webhook-secure-port=0",
    "--allocate-node-cidrs=true",
    "--cluster-cidr=10.244.0.0/16",
    "--leader-elect=false",
];

/// What the official chart renders with its default values (its `args` map in key order, then
/// `--leader-elect=false` for one replica), and with `networking.enabled=true`.
const CHART_DEFAULT_ARGS: &[&str] = &[
    "--allow-untagged-cloud",
    "--cloud-provider=hcloud",
    "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    "--route-reconciliation-period=30s",
    "--webhook-secure-port=0",
    "--leader-elect=false",
];
const CHART_NETWORKING_ARGS: &[&str] = &[
    "--allow-untagged-cloud",
    "--cloud-provider=hcloud",
    "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    "--route-reconciliation-period=30s",
    "--webhook-secure-port=0",
    "--allocate-node-cidrs=true",
    "--cluster-cidr=10.244.0.0/16",
    "--leader-elect=false",
];

/// Starts the binary with exactly `args` and the manifests' environment (plus what points it at
/// the test control plane and simulator: KUBECONFIG, HCLOUD_ENDPOINT, the metrics address and
/// the metadata endpoint); waits until /readyz answers 200, then stops it with SIGTERM. Returns
/// its log.
async fn start_like_a_manifest(
    sim: &Simulator,
    kubeconfig: &std::path::Path,
    args: &[&str],
    env: &[(&str, String)],
) -> String {
    let metrics_port = free_port();
    let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    // The manifests leave the secure port at its default, 10258; another process on this
    // machine may hold it.
    if TcpListener::bind("0.0.0.0:10258").is_err() {
        args.push("--secure-port=0".to_owned());
    }
    let mut child = Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("KUBECONFIG", kubeconfig)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env(
            "HCLOUD_METRICS_ADDRESS",
            format!("127.0.0.1:{metrics_port}"),
        )
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .args(&args)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let ready = http
            .get(format!("http://127.0.0.1:{metrics_port}/readyz"))
            .send()
            .await
            .map(|r| r.status().is_success())
            .unwrap_or(false);
        if ready {
            break;
        }
        if let Some(status) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("{args:?} exited with {status:?}:\n{stderr}");
        }
        assert!(Instant::now() < deadline, "{args:?}: not ready within 30 s");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let (status, stderr) = terminate(&mut child, Duration::from_secs(30)).await;
    assert!(status.success(), "{args:?}: exit {status:?}:\n{stderr}");
    stderr
}

#[tokio::test]
async fn the_official_manifests_and_chart_command_lines_start_the_binary() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let scope = Scope::new("manifests").await;
    let access = scope.admin_access("ccm").await;
    // The CCM's own server, attached to the network the networks variants name.
    let (sim, _) = simulator_with_host_in_network("control-plane-1").await;
    let network_env = [
        ("HCLOUD_NETWORK", "k8s".to_owned()),
        ("HCLOUD_METADATA_ENDPOINT", sim.metadata_url()),
    ];
    let chart_env = [("HCLOUD_METRICS_ENABLED", "true".to_owned())];
    let chart_network_env = [
        network_env[0].clone(),
        network_env[1].clone(),
        chart_env[0].clone(),
    ];

    for (name, args, env) in [
        ("deploy/ccm.yaml", OFFICIAL_CCM_ARGS, &[][..]),
        (
            "deploy/ccm-networks.yaml",
            OFFICIAL_NETWORKS_ARGS,
            &network_env[..],
        ),
        ("chart defaults", CHART_DEFAULT_ARGS, &chart_env[..]),
        (
            "chart networking",
            CHART_NETWORKING_ARGS,
            &chart_network_env[..],
        ),
    ] {
        let log = start_like_a_manifest(&sim, &access.kubeconfig, args, env).await;
        let networks = env.iter().any(|(k, _)| *k == "HCLOUD_NETWORK");
        // No flag is refused or ignored, except --allocate-node-cidrs (accepted, no effect).
        let ignored: Vec<&str> = log
            .lines()
            .filter(|l| l.contains("has no effect"))
            .collect();
        if networks {
            assert_eq!(ignored.len(), 1, "{name}: {ignored:?}");
            assert!(ignored[0].contains("--allocate-node-cidrs"), "{name}");
            assert!(
                log.contains("attached to the network"),
                "{name}: the attached check ran:\n{log}"
            );
            assert!(
                log.lines().any(
                    |l| l.contains("controller started") && l.contains("node-route-controller")
                ),
                "{name}: routes run:\n{log}"
            );
        } else {
            assert!(ignored.is_empty(), "{name}: {ignored:?}");
        }
        assert!(!log.contains("ERROR"), "{name}:\n{log}");
    }
}

#[tokio::test]
async fn a_server_outside_the_network_stops_the_start() {
    let sim = Simulator::start(SimConfig::default().token(TOKEN))
        .await
        .unwrap();
    let network = sim
        .admin()
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/16").subnet("10.0.1.0/24", "eu-central"))
        .await
        .unwrap();
    let elsewhere = sim
        .admin()
        .create_server(ServerSeed::new("not-in-network"))
        .await
        .unwrap();
    sim.admin()
        .set_metadata_server(elsewhere["id"].as_i64())
        .await
        .unwrap();
    let metadata = sim.metadata_url();
    let base = [
        ("HCLOUD_NETWORK", "k8s"),
        ("HCLOUD_NETWORK_ROUTES_ENABLED", "false"),
        ("HCLOUD_METADATA_ENDPOINT", metadata.as_str()),
    ];
    let (code, log) = run_to_exit("binary", &sim.base_url(), &base).await;
    assert_eq!(code, Some(2), "{log}");
    assert!(
        log.contains("HCLOUD_NETWORK")
            && log.contains("not attached")
            && log.contains(&network.to_string())
            && log.contains("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"),
        "{log}"
    );
    assert!(!log.contains("controller started"), "{log}");

    // An unreachable metadata service may come back (it is the host's own): tried again and
    // again, each attempt logged with what to check, until SIGTERM.
    let scope = Scope::new("binary").await;
    let access = scope.admin_access("ccm").await;
    let log_path = scope.dir.path().join("stderr.log");
    let mut child = Command::new(BIN)
        .env_clear()
        .env("HCLOUD_TOKEN", TOKEN)
        .env("HCLOUD_ENDPOINT", sim.base_url())
        .env("HCLOUD_METRICS_ENABLED", "false")
        .env("HCLOUD_NETWORK", "k8s")
        .env("HCLOUD_NETWORK_ROUTES_ENABLED", "false")
        .env(
            "HCLOUD_METADATA_ENDPOINT",
            "http://127.0.0.1:9/hetzner/v1/metadata",
        )
        .args([
            "--cloud-provider=hcloud",
            &format!("--kubeconfig={}", access.kubeconfig.display()),
            &scope.lease_flag(),
            "--secure-port=0",
        ])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log_path).unwrap())
        .spawn()
        .unwrap();
    let log = wait_for_retries(&mut child, &log_path, 2).await;
    assert!(
        log.contains("metadata service")
            && log.contains("127.0.0.1:9")
            && log.contains("HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK"),
        "{log}"
    );
    let (status, _) = terminate(&mut child, Duration::from_secs(10)).await;
    assert!(status.success(), "{status:?}");
}
