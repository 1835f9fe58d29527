use std::time::Duration;

use clap::{CommandFactory, Parser};

use super::*;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn args(extra: &[&str]) -> Args {
    let token = format!("--hcloud-token={TOKEN}");
    let mut argv = vec!["hcloud-ccm", "--cloud-provider=hcloud", token.as_str()];
    argv.extend_from_slice(extra);
    Args::try_parse_from(argv).unwrap()
}

fn config(extra: &[&str]) -> Config {
    args(extra).validate().unwrap()
}

fn problems(extra: &[&str]) -> ConfigError {
    args(extra).validate().unwrap_err()
}

#[test]
fn clap_definition_is_consistent() {
    Args::command().debug_assert();
}

#[test]
fn defaults_match_upstream() {
    let cfg = config(&[]);
    assert_eq!(cfg.cloud_provider, "hcloud");
    assert_eq!(cfg.kube, KubeSettings::default());
    assert_eq!(cfg.controllers, EnabledControllers::all());
    assert_eq!(
        cfg.leader_election,
        LeaderElectionSettings {
            enabled: true,
            lease_duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
            lease_name: "cloud-controller-manager".into(),
            lease_namespace: "kube-system".into(),
        }
    );
    assert_eq!(cfg.cluster_name, "kubernetes");
    assert!(cfg.cluster_cidrs.is_empty());
    assert!(!cfg.allocate_node_cidrs);
    assert!(cfg.configure_cloud_routes);
    assert_eq!(cfg.concurrent_service_syncs, 1);
    assert_eq!(cfg.concurrent_node_syncs, 1);
    assert_eq!(cfg.concurrent_node_status_updates, 0);
    assert_eq!(cfg.node_monitor_period, Duration::from_secs(5));
    assert_eq!(cfg.node_status_update_frequency, Duration::from_secs(300));
    assert_eq!(cfg.route_reconciliation_period, Duration::from_secs(10));
    assert_eq!(cfg.min_resync_period, Duration::from_secs(12 * 3600));
    let secure = cfg.secure_serving.clone().unwrap();
    assert_eq!(secure.port, 10258);
    assert_eq!(secure.bind_address, "0.0.0.0".parse::<IpAddr>().unwrap());
    assert_eq!(secure.tls_files, None);
    assert_eq!(
        secure.always_allow_paths,
        vec!["/healthz", "/readyz", "/livez"]
    );
    assert_eq!(cfg.metrics_address, Some(ListenAddress::any(8233)));
    assert_eq!(cfg.logging.format, LogFormat::Text);
    assert_eq!(cfg.logging.verbosity, 0);
    assert!(!cfg.logging.hcloud_debug);

    assert_eq!(cfg.hcloud.token.expose(), TOKEN);
    assert_eq!(cfg.hcloud.endpoint, None);
    assert_eq!(cfg.hcloud.network, None);
    assert!(cfg.hcloud.network_attached_check);
    assert!(!cfg.hcloud.routes_enabled, "no routes without a network");
    assert_eq!(cfg.hcloud.address_family, AddressFamily::Ipv4);
    assert!(cfg.hcloud.zone_label_enabled);
    assert_eq!(cfg.hcloud.server_cache_mode, ServerCacheMode::All);
    assert_eq!(cfg.hcloud.server_cache_max_age, Duration::from_secs(10));

    let lb = &cfg.load_balancers;
    assert!(lb.enabled && lb.private_ingress_enabled && lb.ipv6_enabled && !lb.use_private_ip);
    assert_eq!(
        (
            lb.location.as_ref(),
            lb.network_zone.as_ref(),
            lb.lb_type.as_ref()
        ),
        (None, None, None)
    );
    assert_eq!(
        (lb.disable_public_network, lb.uses_proxy_protocol),
        (None, None)
    );

    assert!(!cfg.robot.enabled);
    assert_eq!(cfg.robot.cache_timeout, Duration::from_secs(300));
    assert_eq!(cfg.robot.rate_limit_wait_time, Duration::ZERO);
    assert!(
        !cfg.robot.forward_internal_ips,
        "only effective with Robot enabled"
    );

    // Defaults earn no warning.
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    assert!(cfg.controller_wanted(Controller::CloudNode));
    assert!(cfg.controller_wanted(Controller::ServiceLb));
    assert!(!cfg.controller_wanted(Controller::NodeRoute));
}

#[test]
fn go_boolean_flag_forms() {
    assert!(!config(&["--leader-elect=false"]).leader_election.enabled);
    assert!(!config(&["--leader-elect=0"]).leader_election.enabled);
    assert!(!config(&["--leader-elect=F"]).leader_election.enabled);
    assert!(config(&["--leader-elect"]).leader_election.enabled);
    assert!(config(&["--leader-elect=True"]).leader_election.enabled);
    assert!(!config(&["--configure-cloud-routes=false"]).configure_cloud_routes);
    assert!(config(&["--allocate-node-cidrs"]).allocate_node_cidrs);
    // Like pflag, a boolean flag does not take the next word as its value.
    let token = format!("--hcloud-token={TOKEN}");
    assert!(
        Args::try_parse_from([
            "hcloud-ccm",
            "--cloud-provider=hcloud",
            &token,
            "--leader-elect",
            "false"
        ])
        .is_err()
    );
    let err = problems(&["--leader-elect=nope"]);
    assert!(err.mentions("--leader-elect"), "{err}");
}

#[test]
fn go_durations_in_flags() {
    let cfg = config(&[
        "--leader-elect-lease-duration=1m30s",
        "--leader-elect-renew-deadline=1m",
        "--leader-elect-retry-period=200ms",
        "--route-reconciliation-period=30s",
        "--node-status-update-frequency",
        "2m",
    ]);
    assert_eq!(cfg.leader_election.lease_duration, Duration::from_secs(90));
    assert_eq!(cfg.leader_election.renew_deadline, Duration::from_secs(60));
    assert_eq!(cfg.leader_election.retry_period, Duration::from_millis(200));
    assert_eq!(cfg.route_reconciliation_period, Duration::from_secs(30));
    assert_eq!(cfg.node_status_update_frequency, Duration::from_secs(120));
}

#[test]
fn controllers_aliases_and_unknown_names() {
    let cfg = config(&["--controllers=*,-service,-node-route-controller"]);
    assert_eq!(
        cfg.controllers.iter().collect::<Vec<_>>(),
        vec![Controller::CloudNode, Controller::CloudNodeLifecycle]
    );
    assert!(
        cfg.warnings.is_empty(),
        "service controller disabled: no LB warning"
    );
    let cfg = config(&[
        "--controllers",
        "cloud-node",
        "--controllers",
        "cloud-node-lifecycle",
    ]);
    assert_eq!(
        cfg.controllers.iter().collect::<Vec<_>>(),
        vec![Controller::CloudNode, Controller::CloudNodeLifecycle]
    );
    let err = problems(&["--controllers=*,nodeipam,-ttl"]);
    assert_eq!(err.problems.len(), 2, "{err}");
    assert!(err.problems.iter().all(|p| p.setting == "--controllers"));
}

#[test]
fn verbosity_and_log_format() {
    assert_eq!(config(&["-v", "3"]).logging.verbosity, 3);
    assert_eq!(config(&["-v2"]).logging.verbosity, 2);
    assert_eq!(config(&["--v=4"]).logging.verbosity, 4);
    assert_eq!(
        config(&["--log-format=json"]).logging.format,
        LogFormat::Json
    );
    assert_eq!(
        config(&["--logging-format=json"]).logging.format,
        LogFormat::Json
    );
    let err = problems(&["--log-format=xml", "--v=loud"]);
    assert!(err.mentions("--log-format") && err.mentions("-v"), "{err}");
}

#[test]
fn every_problem_is_reported_at_once() {
    let err = Args::try_parse_from([
        "hcloud-ccm",
        "--cloud-provider=aws",
        "--controllers=*,bogus",
        "--leader-elect-lease-duration=15",
        "--leader-elect-retry-period=-2s",
        "--leader-elect-resource-lock=endpoints",
        "--node-monitor-period=0s",
        "--concurrent-service-syncs=0",
        "--secure-port=99999",
        "--bind-address=everywhere",
        "--tls-cert-file=/nonexistent/cert.pem",
        "--cluster-cidr=10.244.0.0/16, fd00::/64",
        "--hcloud-network=my-net",
        "--hcloud-instances-address-family=ipv5",
        "--hcloud-load-balancers-location=fsn1",
        "--hcloud-load-balancers-network-zone=eu-central",
        "--hcloud-load-balancers-private-subnet-ip-range=10.0.0.0/33",
        "--hcloud-load-balancers-algorithm-type=random",
        "--hcloud-metrics-address=8233",
        "--robot-enabled=true",
        "--robot-user=someone",
    ])
    .unwrap()
    .validate()
    .unwrap_err();
    let text = err.to_string();
    for setting in [
        "--cloud-provider",
        "--controllers",
        "--leader-elect-lease-duration",
        "--leader-elect-retry-period",
        "--leader-elect-resource-lock",
        "--node-monitor-period",
        "--concurrent-service-syncs",
        "--secure-port",
        "--bind-address",
        "--tls-private-key-file",
        "--cluster-cidr",
        "HCLOUD_TOKEN",
        "HCLOUD_INSTANCES_ADDRESS_FAMILY",
        "HCLOUD_LOAD_BALANCERS_LOCATION",
        "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
        "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
        "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE",
        "HCLOUD_METRICS_ADDRESS",
        "HCLOUD_NETWORK_ROUTES_ENABLED",
        "ROBOT_ENABLED",
        "ROBOT_USER",
        "ROBOT_PASSWORD",
    ] {
        assert!(err.mentions(setting), "{setting} missing from:\n{text}");
    }
    assert!(text.starts_with(&format!(
        "invalid configuration ({} problems):",
        err.problems.len()
    )));
    // One line per problem.
    assert_eq!(text.lines().count(), err.problems.len() + 1);
    // Robot + routes is reported in addition to "Robot not implemented".
    assert!(
        text.contains("routes are not supported together with Robot"),
        "{text}"
    );
}

#[test]
fn cluster_cidr_rules() {
    assert_eq!(parse_cluster_cidrs("10.244.0.0/16").unwrap().len(), 1);
    assert_eq!(
        parse_cluster_cidrs("10.244.0.0/16,fd00:10::/56")
            .unwrap()
            .len(),
        2
    );
    // Host bits are accepted, as by Go's net.ParseCIDR.
    assert!(parse_cluster_cidrs("10.244.1.7/16").is_ok());
    assert!(parse_cluster_cidrs("").is_err());
    assert!(
        parse_cluster_cidrs("10.244.0.0/16, fd00::/64").is_err(),
        "space after comma"
    );
    assert!(parse_cluster_cidrs("10.244.0.0/16,").is_err());
    assert!(parse_cluster_cidrs("10.244.0.0").is_err());
    assert!(parse_cluster_cidrs("10.244.0.0/16,10.245.0.0/16").is_err());
    assert!(parse_cluster_cidrs("fd00::/64,fd01::/64").is_err());
    assert!(parse_cluster_cidrs("10.0.0.0/16,fd00::/64,10.1.0.0/16").is_err());
}

#[test]
fn routes_would_run_rules() {
    // A network turns routes on by default; they then need a valid --cluster-cidr.
    let cfg = config(&["--hcloud-network=net", "--cluster-cidr=10.244.0.0/16"]);
    assert!(cfg.controller_wanted(Controller::NodeRoute));
    let err = problems(&["--hcloud-network=net"]);
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(err.mentions("--cluster-cidr"));
    // Each way of switching routes off is accepted.
    for off in [
        "--hcloud-network-routes-enabled=false",
        "--configure-cloud-routes=false",
        "--controllers=*,-route",
    ] {
        let cfg = config(&["--hcloud-network=net", off]);
        assert!(!cfg.controller_wanted(Controller::NodeRoute), "{off}");
        assert_eq!(cfg.hcloud.network.as_deref(), Some("net"));
    }
    // Once routes exist, the --cluster-cidr rules apply when routes would run.
    let run = |extra: &[&str]| {
        let mut all = vec!["--hcloud-network=net"];
        all.extend_from_slice(extra);
        args(&all).validate_with(Capabilities::ALL)
    };
    let cfg = run(&["--cluster-cidr=10.244.0.0/16"]).unwrap();
    assert_eq!(
        cfg.cluster_cidrs,
        vec!["10.244.0.0/16".parse::<IpNet>().unwrap()]
    );
    assert!(cfg.controller_wanted(Controller::NodeRoute));
    assert!(run(&[]).unwrap_err().mentions("--cluster-cidr"));
    assert!(
        run(&["--cluster-cidr="])
            .unwrap_err()
            .mentions("--cluster-cidr")
    );
    assert!(
        run(&["--cluster-cidr=10.0.0.0/8,10.1.0.0/16"])
            .unwrap_err()
            .mentions("--cluster-cidr")
    );
    // Without routes, a bad --cluster-cidr is only a warning.
    let cfg = config(&["--cluster-cidr=nonsense"]);
    assert!(cfg.warnings.iter().any(|w| w.contains("--cluster-cidr")));
}

#[test]
fn robot_rules_with_robot_implemented() {
    let run = |extra: &[&str]| args(extra).validate_with(Capabilities::ALL);
    let cfg = run(&["--robot-enabled=true"]).unwrap();
    assert!(cfg.robot.enabled && cfg.robot.forward_internal_ips);
    let cfg = run(&[
        "--robot-enabled=true",
        "--robot-user=u",
        "--robot-password=p",
    ])
    .unwrap();
    assert_eq!(cfg.robot.user.as_ref().map(Secret::expose), Some("u"));
    let err = run(&["--robot-enabled=true", "--robot-password=p"]).unwrap_err();
    assert!(
        err.mentions("ROBOT_USER") && err.problems.len() == 1,
        "{err}"
    );
    let err = run(&[
        "--robot-enabled=true",
        "--hcloud-network=n",
        "--cluster-cidr=10.244.0.0/16",
    ])
    .unwrap_err();
    assert!(
        err.mentions("HCLOUD_NETWORK_ROUTES_ENABLED") && err.mentions("ROBOT_ENABLED"),
        "{err}"
    );
    // Upstream reads a zero cache timeout as the default.
    let cfg = run(&["--robot-cache-timeout=0"]).unwrap();
    assert_eq!(cfg.robot.cache_timeout, Duration::from_secs(300));
}

#[test]
fn robot_is_an_error_until_implemented() {
    let err = problems(&["--robot-enabled=1", "--robot-user=u", "--robot-password=p"]);
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(err.mentions("ROBOT_ENABLED"));
}

#[test]
fn load_balancer_settings_are_parsed() {
    let cfg = config(&[
        "--hcloud-load-balancers-location=fsn1",
        "--hcloud-load-balancers-use-private-ip=true",
        "--hcloud-load-balancers-health-check-interval=15s",
        "--hcloud-load-balancers-health-check-retries=5",
        "--hcloud-load-balancers-algorithm-type=least_connections",
    ]);
    assert_eq!(cfg.load_balancers.location.as_deref(), Some("fsn1"));
    assert_eq!(
        cfg.load_balancers.health_check_interval,
        Some(Duration::from_secs(15))
    );
    assert_eq!(cfg.load_balancers.health_check_retries, Some(5));
    assert_eq!(
        cfg.load_balancers.algorithm,
        Some(LoadBalancerAlgorithm::LeastConnections)
    );
    assert!(cfg.load_balancers.use_private_ip);
    assert!(cfg.controller_wanted(Controller::ServiceLb));
    // Implemented: no warnings.
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    // Disabled load balancers: the service controller does not run.
    let cfg = config(&["--hcloud-load-balancers-enabled=false"]);
    assert!(!cfg.controller_wanted(Controller::ServiceLb));
    // Without the capability, every non-default setting is reported as not supported.
    let cfg = args(&["--hcloud-load-balancers-location=fsn1"])
        .validate_with(Capabilities {
            load_balancers: false,
            ..Capabilities::ALL
        })
        .unwrap();
    assert!(
        cfg.warnings
            .iter()
            .any(|w| w.starts_with("HCLOUD_LOAD_BALANCERS_LOCATION")),
        "{:?}",
        cfg.warnings
    );
}

#[test]
fn token_sources() {
    let none = Args::try_parse_from(["hcloud-ccm", "--cloud-provider=hcloud"]).unwrap();
    let err = none.validate().unwrap_err();
    assert!(err.mentions("HCLOUD_TOKEN"), "{err}");

    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, format!("  {TOKEN}\n").as_bytes()).unwrap();
    let path = format!("--hcloud-token-file={}", file.path().display());
    let cfg = Args::try_parse_from(["hcloud-ccm", "--cloud-provider=hcloud", &path])
        .unwrap()
        .validate()
        .unwrap();
    assert_eq!(cfg.hcloud.token.expose(), TOKEN);

    let err = Args::try_parse_from([
        "hcloud-ccm",
        "--cloud-provider=hcloud",
        "--hcloud-token-file=/nonexistent/token",
    ])
    .unwrap()
    .validate()
    .unwrap_err();
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(err.mentions("HCLOUD_TOKEN_FILE"));

    let cfg = Args::try_parse_from([
        "hcloud-ccm",
        "--cloud-provider=hcloud",
        "--hcloud-token=short",
    ])
    .unwrap()
    .validate()
    .unwrap();
    assert!(cfg.warnings.iter().any(|w| w.contains("64")));
}

#[test]
fn secrets_never_appear_in_debug_output() {
    let a = args(&["--robot-user=robot-user-x", "--robot-password=robot-pass-y"]);
    let dbg = format!("{a:?}");
    assert!(
        !dbg.contains(TOKEN) && !dbg.contains("robot-pass-y"),
        "{dbg}"
    );
    let cfg = a.validate_with(Capabilities::ALL).unwrap();
    let dbg = format!("{cfg:?}");
    assert!(
        !dbg.contains(TOKEN) && !dbg.contains("robot-pass-y"),
        "{dbg}"
    );
    let help = Args::command().render_long_help().to_string();
    assert!(!help.contains(TOKEN));
}

#[test]
fn leader_election_relations() {
    let err = problems(&[
        "--leader-elect-lease-duration=10s",
        "--leader-elect-renew-deadline=10s",
    ]);
    assert!(err.mentions("--leader-elect-lease-duration"), "{err}");
    let err = problems(&["--leader-elect-renew-deadline=2s"]);
    assert!(err.mentions("--leader-elect-retry-period"), "{err}");
    // Irrelevant when leader election is off.
    assert!(
        args(&["--leader-elect=false", "--leader-elect-renew-deadline=2s"])
            .validate()
            .is_ok()
    );
    assert!(problems(&["--enable-leader-migration"]).mentions("--enable-leader-migration"));
}

#[test]
fn serving_settings() {
    assert_eq!(config(&["--secure-port=0"]).secure_serving, None);
    let cfg = config(&["--bind-address=::", "--secure-port=10443"]);
    let secure = cfg.secure_serving.unwrap();
    assert_eq!(
        (secure.bind_address.to_string(), secure.port),
        ("::".into(), 10443)
    );
    assert_eq!(
        config(&["--hcloud-metrics-enabled=false"]).metrics_address,
        None
    );
    assert_eq!(
        config(&["--hcloud-metrics-address=127.0.0.1:9100"]).metrics_address,
        Some("127.0.0.1:9100".parse().unwrap())
    );
    let err = problems(&["--hcloud-metrics-address=:10258"]);
    assert!(err.mentions("HCLOUD_METRICS_ADDRESS") && err.mentions("--secure-port"));

    let dir = tempfile::tempdir().unwrap();
    let cert = dir.path().join("c.pem");
    let key = dir.path().join("k.pem");
    std::fs::write(&cert, "x").unwrap();
    std::fs::write(&key, "x").unwrap();
    let cfg = config(&[
        &format!("--tls-cert-file={}", cert.display()),
        &format!("--tls-private-key-file={}", key.display()),
    ]);
    assert_eq!(
        cfg.secure_serving.unwrap().tls_files,
        Some(TlsFiles { cert, key })
    );
    assert!(
        problems(&["--authorization-always-allow-paths=healthz"])
            .mentions("--authorization-always-allow-paths")
    );
}

#[test]
fn compatibility_flags_are_accepted_with_warnings() {
    let cfg = config(&[
        "--allow-untagged-cloud",
        "--cloud-config=/etc/cloud.conf",
        "--use-service-account-credentials=true",
        "--feature-gates=Foo=true",
        "--profiling",
        "--node-sync-period=1m",
        "--hcloud-load-balancers-enabled=false",
    ]);
    assert_eq!(cfg.warnings.len(), 4, "{:?}", cfg.warnings);
}

#[test]
fn help_documents_every_flag_and_variable() {
    let help = Args::command().render_long_help().to_string();
    for needle in [
        "--cloud-provider",
        "--kubeconfig",
        "--master",
        "--controllers",
        "--leader-elect[",
        "--leader-elect-lease-duration",
        "--leader-elect-renew-deadline",
        "--leader-elect-retry-period",
        "--leader-elect-resource-lock",
        "--leader-elect-resource-name",
        "--leader-elect-resource-namespace",
        "--cluster-name",
        "--cluster-cidr",
        "--allocate-node-cidrs",
        "--configure-cloud-routes",
        "--concurrent-service-syncs",
        "--concurrent-node-syncs",
        "--node-monitor-period",
        "--node-status-update-frequency",
        "--route-reconciliation-period",
        "--secure-port",
        "--bind-address",
        "--tls-cert-file",
        "--tls-private-key-file",
        "--allow-untagged-cloud",
        "--log-format",
        "--v",
        "RUST_LOG",
        "HCLOUD_TOKEN",
        "HCLOUD_TOKEN_FILE",
        "HCLOUD_ENDPOINT",
        "HCLOUD_DEBUG",
        "HCLOUD_NETWORK",
        "HCLOUD_NETWORK_DISABLE_ATTACHED_CHECK",
        "HCLOUD_NETWORK_ROUTES_ENABLED",
        "HCLOUD_INSTANCES_ADDRESS_FAMILY",
        "HCLOUD_INSTANCES_ZONE_LABEL_ENABLED",
        "HCLOUD_SERVER_CACHE_MODE",
        "HCLOUD_SERVER_CACHE_MAX_AGE",
        "HCLOUD_METRICS_ENABLED",
        "HCLOUD_METRICS_ADDRESS",
        "HCLOUD_LOAD_BALANCERS_ENABLED",
        "HCLOUD_LOAD_BALANCERS_LOCATION",
        "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
        "HCLOUD_LOAD_BALANCERS_TYPE",
        "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE",
        "HCLOUD_LOAD_BALANCERS_DISABLE_PRIVATE_INGRESS",
        "HCLOUD_LOAD_BALANCERS_USE_PRIVATE_IP",
        "HCLOUD_LOAD_BALANCERS_DISABLE_IPV6",
        "HCLOUD_LOAD_BALANCERS_DISABLE_PUBLIC_NETWORK",
        "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
        "HCLOUD_LOAD_BALANCERS_USES_PROXYPROTOCOL",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_INTERVAL",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_TIMEOUT",
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_RETRIES",
        "ROBOT_ENABLED",
        "ROBOT_USER",
        "ROBOT_USER_FILE",
        "ROBOT_PASSWORD",
        "ROBOT_PASSWORD_FILE",
        "ROBOT_CACHE_TIMEOUT",
        "ROBOT_RATE_LIMIT_WAIT_TIME",
        "ROBOT_FORWARD_INTERNAL_IPS",
        "[default: 15s]",
        "[default: cloud-controller-manager]",
        "[default: :8233]",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
}
