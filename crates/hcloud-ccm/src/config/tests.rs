use std::net::IpAddr;
use std::time::Duration;

use clap::CommandFactory;
use hcloud_api::models::AlgorithmType;
use hcloud_provider::{AddressFamily, CacheMode};
use ipnet::IpNet;

use super::*;

const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// Parses like the binary (normalised names, flags without effect), with `HCLOUD_TOKEN` set.
fn parse(argv: &[&str]) -> Args {
    parse_with_secrets(argv, &[])
}

/// Like [`parse`], with these secrets in the environment besides `HCLOUD_TOKEN`.
fn parse_with_secrets(argv: &[&str], secrets: &[(&str, &str)]) -> Args {
    Args::try_parse_with_secrets(argv, |name| {
        secrets
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| (*v).to_owned())
            .or_else(|| (name == "HCLOUD_TOKEN").then(|| TOKEN.to_owned()))
    })
    .unwrap()
}

/// `--cloud-provider=hcloud --allow-untagged-cloud` (as the official manifests) plus `extra`.
fn argv<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut argv = vec![
        "hcloud-ccm",
        "--cloud-provider=hcloud",
        "--allow-untagged-cloud",
    ];
    argv.extend_from_slice(extra);
    argv
}

/// [`args`] with Robot credentials in the environment.
fn args_with_robot(extra: &[&str], user: &str, password: &str) -> Args {
    parse_with_secrets(
        &argv(extra),
        &[("ROBOT_USER", user), ("ROBOT_PASSWORD", password)],
    )
}

/// The command line of [`argv`], parsed.
fn args(extra: &[&str]) -> Args {
    parse(&argv(extra))
}

fn config(extra: &[&str]) -> Config {
    args(extra).validate().unwrap()
}

fn problems(extra: &[&str]) -> ConfigError {
    args(extra).validate().unwrap_err()
}

/// Asserts that some problem of `err` names each of `settings`.
fn assert_mentions(err: &ConfigError, settings: &[&str]) {
    for setting in settings {
        assert!(err.mentions(setting), "{setting} missing from:\n{err}");
    }
}

/// Asserts that [`args`] with `extra` does not validate, with problems naming each of
/// `settings`.
fn assert_refused(extra: &[&str], settings: &[&str]) {
    assert_mentions(&problems(extra), settings);
}

#[test]
fn clap_definition_is_consistent() {
    Args::command().debug_assert();
    Args::full_command().debug_assert();
}

#[test]
fn defaults_match_upstream() {
    let cfg = config(&[]);
    assert_eq!(cfg.cloud_provider, "hcloud");
    assert_eq!(
        cfg.kube,
        KubeSettings {
            // Not upstream's 20/30: a burst of 200 joining Nodes (two writes each) passes at
            // once, and longer ones at one node worker's pace (docs/migration.md).
            rate_limit: Some(KubeRateLimit {
                qps: 200.0,
                burst: 400
            }),
            ..KubeSettings::default()
        }
    );
    assert_eq!(cfg.node_sync_period, Duration::ZERO);
    assert_eq!(cfg.feature_gates, FeatureGates::default());
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
    assert_eq!(
        cfg.hcloud.metadata_endpoint,
        "http://169.254.169.254/hetzner/v1/metadata"
    );
    assert!(!cfg.provider.routes_enabled, "no routes without a network");
    assert_eq!(cfg.provider.address_family, AddressFamily::Ipv4);
    assert!(cfg.provider.zone_label_enabled);
    assert_eq!(cfg.provider.cache.mode, CacheMode::All);
    assert_eq!(cfg.provider.cache.max_age, Duration::from_secs(10));
    assert_eq!(cfg.hcloud.rate_limit_reserve, 600);

    let lb = &cfg.load_balancers;
    assert!(
        cfg.provider.load_balancers.as_ref() == Some(lb)
            && !lb.disable_private_ingress
            && !lb.disable_ipv6
            && !lb.use_private_ip
    );
    assert_eq!(
        (
            lb.location.as_ref(),
            lb.network_zone.as_ref(),
            lb.lb_type.as_ref()
        ),
        (None, None, None)
    );
    assert_eq!(
        (lb.disable_public_network, lb.uses_proxyprotocol),
        (None, None)
    );

    assert!(!cfg.provider.robot.enabled);
    assert_eq!(cfg.provider.cache.robot_max_age, Duration::from_secs(300));
    assert_eq!(cfg.provider.robot.rate_limit_wait_time, Duration::ZERO);
    assert!(
        !cfg.provider.robot.forward_internal_ips,
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
    assert!(
        Args::try_parse_command_line([
            "hcloud-ccm",
            "--cloud-provider=hcloud",
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
    assert_refused(&["--log-format=xml", "--v=loud"], &["--log-format", "-v"]);
}

#[test]
fn the_rate_limit_reserve_is_a_number_of_requests() {
    assert_eq!(
        config(&["--hcloud-rate-limit-reserve=0"])
            .hcloud
            .rate_limit_reserve,
        0
    );
    assert_eq!(
        config(&["--hcloud-rate-limit-reserve=1200"])
            .hcloud
            .rate_limit_reserve,
        1200
    );
    let err = problems(&["--hcloud-rate-limit-reserve=lots"]).to_string();
    assert!(err.contains("HCLOUD_RATE_LIMIT_RESERVE"), "{err}");
    assert!(err.contains("\"lots\""), "{err}");
}

#[test]
fn every_problem_is_reported_at_once() {
    let robot_user_only = |name: &str| (name == "ROBOT_USER").then(|| "someone".to_owned());
    let err = Args::try_parse_with_secrets(
        [
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
        ],
        robot_user_only,
    )
    .unwrap()
    .validate()
    .unwrap_err();
    assert_mentions(
        &err,
        &[
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
            "HCLOUD_TOKEN",
            "HCLOUD_INSTANCES_ADDRESS_FAMILY",
            "HCLOUD_LOAD_BALANCERS_LOCATION",
            "HCLOUD_LOAD_BALANCERS_NETWORK_ZONE",
            "HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE",
            "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE",
            "HCLOUD_METRICS_ADDRESS",
            "ROBOT_USER",
            "ROBOT_PASSWORD",
        ],
    );
    let text = err.to_string();
    assert!(text.starts_with(&format!(
        "invalid configuration ({} problems):",
        err.problems.len()
    )));
    // One line per problem.
    assert_eq!(text.lines().count(), err.problems.len() + 1);
    // Robot beside routes is no problem (the official CCM refuses it).
    assert!(!err.mentions("HCLOUD_NETWORK_ROUTES_ENABLED"), "{text}");
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
    // A network turns routes on by default; they then need a usable --cluster-cidr.
    let cfg = config(&["--hcloud-network=net", "--cluster-cidr=10.244.0.0/16"]);
    assert!(cfg.controller_wanted(Controller::NodeRoute));
    assert!(cfg.provider.routes_enabled);
    assert_eq!(
        cfg.cluster_cidrs,
        vec!["10.244.0.0/16".parse::<IpNet>().unwrap()]
    );
    // Each way of switching routes off is accepted, without a --cluster-cidr warning.
    for off in [
        "--hcloud-network-routes-enabled=false",
        "--configure-cloud-routes=false",
        "--controllers=*,-route",
    ] {
        let cfg = config(&["--hcloud-network=net", off]);
        assert!(!cfg.controller_wanted(Controller::NodeRoute), "{off}");
        assert_eq!(cfg.hcloud.network.as_deref(), Some("net"));
        assert!(cfg.warnings.is_empty(), "{off}: {:?}", cfg.warnings);
    }
    // As the official CCM: a missing or unusable --cluster-cidr turns routes off with a
    // warning instead of stopping the start.
    for cidr in [
        None,
        Some("--cluster-cidr="),
        Some("--cluster-cidr=nonsense"),
        Some("--cluster-cidr=10.0.0.0/8,10.1.0.0/16"),
    ] {
        let mut extra = vec!["--hcloud-network=net"];
        extra.extend(cidr);
        let cfg = config(&extra);
        assert!(!cfg.provider.routes_enabled, "{cidr:?}");
        assert!(!cfg.controller_wanted(Controller::NodeRoute), "{cidr:?}");
        assert!(cfg.cluster_cidrs.is_empty(), "{cidr:?}");
        assert_eq!(cfg.warnings.len(), 1, "{cidr:?}: {:?}", cfg.warnings);
        assert!(
            cfg.warnings[0].contains("--cluster-cidr") && cfg.warnings[0].contains("routes"),
            "{:?}",
            cfg.warnings
        );
    }
    // Without routes, a bad --cluster-cidr is only a warning too.
    let cfg = config(&["--cluster-cidr=nonsense"]);
    assert!(cfg.warnings.iter().any(|w| w.contains("--cluster-cidr")));
}

#[test]
fn robot_rules_with_robot_implemented() {
    let run = |extra: &[&str]| args(extra).validate();
    let cfg = run(&["--robot-enabled=true"]).unwrap();
    assert!(cfg.provider.robot.enabled && cfg.provider.robot.forward_internal_ips);
    assert!(
        !cfg.provider.robot.legacy_provider_id,
        "hrobot:// by default"
    );
    let cfg = run(&[
        "--robot-enabled=true",
        "--robot-use-legacy-provider-id=true",
    ])
    .unwrap();
    assert!(cfg.provider.robot.legacy_provider_id);
    let cfg = args_with_robot(&["--robot-enabled=true"], "u", "p")
        .validate()
        .unwrap();
    assert_eq!(cfg.robot.user.as_ref().map(Secret::expose), Some("u"));
    let err = parse_with_secrets(
        &[
            "hcloud-ccm",
            "--cloud-provider=hcloud",
            "--robot-enabled=true",
        ],
        &[("ROBOT_PASSWORD", "p")],
    )
    .validate()
    .unwrap_err();
    assert!(
        err.mentions("ROBOT_USER") && err.problems.len() == 1,
        "{err}"
    );
    // Robot beside routes starts, routes on (for the cloud Nodes), unlike the official CCM.
    let cfg = run(&[
        "--robot-enabled=true",
        "--hcloud-network=n",
        "--cluster-cidr=10.244.0.0/16",
    ])
    .unwrap();
    assert!(cfg.provider.robot.enabled && cfg.provider.routes_enabled);
    // Upstream reads a zero cache timeout as the default.
    let cfg = run(&["--robot-cache-timeout=0"]).unwrap();
    assert_eq!(cfg.provider.cache.robot_max_age, Duration::from_secs(300));
}

#[test]
fn the_deletion_brake_is_a_percentage() {
    assert_eq!(config(&[]).hcloud.node_deletion_max_percent, 50);
    for (value, percent) in [("30", 30), ("30%", 30), ("0", 0), ("100", 100)] {
        let cfg = config(&[&format!("--hcloud-node-deletion-max-percent={value}")]);
        assert_eq!(cfg.hcloud.node_deletion_max_percent, percent, "{value}");
    }
    for value in ["101", "-1", "half", "0.5"] {
        let err = problems(&[&format!("--hcloud-node-deletion-max-percent={value}")]);
        assert!(
            err.mentions("HCLOUD_NODE_DELETION_MAX_PERCENT"),
            "{value}: {err}"
        );
    }
}

#[test]
fn robot_endpoint_and_cache_timeout() {
    let cfg = args_with_robot(
        &[
            "--robot-enabled=1",
            "--robot-endpoint=http://127.0.0.1:9/robot",
            "--robot-cache-timeout=-1s",
        ],
        "u",
        "p",
    )
    .validate()
    .unwrap();
    assert_eq!(
        cfg.robot.endpoint.as_deref(),
        Some("http://127.0.0.1:9/robot")
    );
    assert_eq!(
        cfg.provider.cache.robot_max_age,
        Duration::ZERO,
        "negative: ask every time"
    );
    for zero in ["0", "-0s"] {
        let cfg = config(&[&format!("--robot-cache-timeout={zero}")]);
        assert_eq!(
            cfg.provider.cache.robot_max_age,
            Duration::from_secs(300),
            "{zero}: the default"
        );
    }
    let cfg = config(&["--robot-cache-timeout=90s"]);
    assert_eq!(cfg.provider.cache.robot_max_age, Duration::from_secs(90));
    assert_refused(
        &["--robot-endpoint=robot.example", "--robot-cache-timeout=-x"],
        &["ROBOT_ENDPOINT", "ROBOT_CACHE_TIMEOUT"],
    );
}

#[test]
fn load_balancer_settings_are_parsed() {
    let cfg = config(&[
        "--hcloud-load-balancers-location=fsn1",
        "--hcloud-load-balancers-use-private-ip=true",
        "--hcloud-load-balancers-health-check-interval=15s",
        "--hcloud-load-balancers-health-check-retries=5",
        "--hcloud-load-balancers-algorithm-type=least_connections",
        "--hcloud-load-balancers-health-check-kube-proxy=true",
        "--hcloud-load-balancers-exclude-cordoned-nodes=true",
        "--hcloud-load-balancers-tls-secrets=false",
    ]);
    assert!(!cfg.load_balancer_secrets);
    assert_eq!(cfg.load_balancers.location.as_deref(), Some("fsn1"));
    assert!(cfg.load_balancers.health_check_kube_proxy);
    assert!(cfg.load_balancer_nodes.exclude_cordoned);
    // Both off unless asked for, as upstream.
    let plain = config(&[]);
    assert!(!plain.load_balancers.health_check_kube_proxy);
    // Secrets are read unless turned off (the watch starts only once a Service names one).
    assert!(plain.load_balancer_secrets);
    assert_eq!(
        plain.load_balancer_nodes,
        cloud_provider::service::NodeFilter::default()
    );
    assert_eq!(
        cfg.load_balancers.health_check_interval,
        Some(Duration::from_secs(15))
    );
    assert_eq!(cfg.load_balancers.health_check_retries, Some(5));
    assert_eq!(
        cfg.load_balancers.algorithm,
        Some(AlgorithmType::LeastConnections)
    );
    assert!(cfg.load_balancers.use_private_ip);
    assert!(cfg.controller_wanted(Controller::ServiceLb));
    // Implemented: no warnings.
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
    // Disabled load balancers: the service controller does not run.
    let cfg = config(&["--hcloud-load-balancers-enabled=false"]);
    assert!(!cfg.controller_wanted(Controller::ServiceLb));
    // Subnets are IPv4: an IPv6 range is refused, naming the variable.
    let err = problems(&["--hcloud-load-balancers-private-subnet-ip-range=fd00::/64"]);
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(
        err.mentions("HCLOUD_LOAD_BALANCERS_PRIVATE_SUBNET_IP_RANGE"),
        "{err}"
    );
    let cfg = config(&["--hcloud-load-balancers-private-subnet-ip-range=10.0.1.0/24"]);
    assert_eq!(
        cfg.load_balancers.private_subnet_ip_range,
        Some("10.0.1.0/24".parse().unwrap())
    );
}

#[test]
fn the_cluster_name_is_optional_and_a_label_value() {
    // Unset, or empty: no cluster name (the official behaviour); --cluster-name does not set it.
    assert_eq!(config(&[]).load_balancers.cluster_name, None);
    assert_eq!(
        config(&["--hcloud-load-balancers-cluster-name="])
            .load_balancers
            .cluster_name,
        None
    );
    assert_eq!(
        config(&["--cluster-name=prod"]).load_balancers.cluster_name,
        None
    );
    let cfg = config(&["--hcloud-load-balancers-cluster-name=prod-eu"]);
    assert_eq!(cfg.load_balancers.cluster_name.as_deref(), Some("prod-eu"));
    assert_eq!(
        cfg.provider
            .load_balancers
            .as_ref()
            .and_then(|lb| lb.cluster_name.as_deref()),
        Some("prod-eu")
    );
    for bad in ["prod/eu", "-prod", &"x".repeat(64)] {
        let err = problems(&[&format!("--hcloud-load-balancers-cluster-name={bad}")]);
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(err.mentions("HCLOUD_LOAD_BALANCERS_CLUSTER_NAME"), "{err}");
    }
}

#[test]
fn token_sources() {
    let mut none = Args::try_parse_command_line(["hcloud-ccm", "--cloud-provider=hcloud"]).unwrap();
    none.hcloud_token = None;
    let err = none.validate().unwrap_err();
    assert!(err.mentions("HCLOUD_TOKEN"), "{err}");

    let mut file = tempfile::NamedTempFile::new().unwrap();
    std::io::Write::write_all(&mut file, format!("  {TOKEN}\n").as_bytes()).unwrap();
    let path = format!("--hcloud-token-file={}", file.path().display());
    let mut from_file =
        Args::try_parse_command_line(["hcloud-ccm", "--cloud-provider=hcloud", &path]).unwrap();
    from_file.hcloud_token = None;
    let cfg = from_file.validate().unwrap();
    assert_eq!(cfg.hcloud.token.expose(), TOKEN);

    let mut missing_file = Args::try_parse_command_line([
        "hcloud-ccm",
        "--cloud-provider=hcloud",
        "--hcloud-token-file=/nonexistent/token",
    ])
    .unwrap();
    missing_file.hcloud_token = None;
    let err = missing_file.validate().unwrap_err();
    assert_eq!(err.problems.len(), 1, "{err}");
    assert!(err.mentions("HCLOUD_TOKEN_FILE"));

    let mut short = args(&[]);
    short.hcloud_token = Some(Secret::new("short"));
    let cfg = short.validate().unwrap();
    assert!(cfg.warnings.iter().any(|w| w.contains("64")));

    // No secret is ever a flag: the error names it and the variables to use instead, and
    // does not echo the value.
    for (argv, flag, variable) in [
        (
            ["hcloud-ccm", "--hcloud-token=sekrit-value"],
            "--hcloud-token",
            "HCLOUD_TOKEN",
        ),
        (
            ["hcloud-ccm", "--hcloud_token=sekrit-value"],
            "--hcloud-token",
            "HCLOUD_TOKEN",
        ),
        (
            ["hcloud-ccm", "--robot-password=sekrit-value"],
            "--robot-password",
            "ROBOT_PASSWORD",
        ),
        (
            ["hcloud-ccm", "--robot_password"],
            "--robot-password",
            "ROBOT_PASSWORD",
        ),
        (
            ["hcloud-ccm", "--robot-user=sekrit-value"],
            "--robot-user",
            "ROBOT_USER",
        ),
    ] {
        let err = Args::try_parse_command_line(argv).unwrap_err();
        let text = err.to_string();
        assert!(matches!(err, CommandLineError::SecretFlag { .. }), "{text}");
        assert!(
            text.contains(flag)
                && text.contains(variable)
                && text.contains(&format!("{variable}_FILE")),
            "{text}"
        );
        assert!(!text.contains("sekrit"), "{text}");
    }
    let help = Args::full_command().render_long_help().to_string();
    for flag in ["--hcloud-token", "--robot-user", "--robot-password"] {
        assert!(
            !help.contains(&format!("{flag} ")) && !help.contains(&format!("{flag}=")),
            "{flag}: {help}"
        );
    }
}

#[test]
fn secrets_never_appear_in_debug_output() {
    let a = args_with_robot(&[], "robot-user-x", "robot-pass-y");
    let dbg = format!("{a:?}");
    assert!(
        !dbg.contains(TOKEN) && !dbg.contains("robot-pass-y"),
        "{dbg}"
    );
    let cfg = a.validate().unwrap();
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
    assert_refused(
        &["--hcloud-metrics-address=:10258"],
        &["HCLOUD_METRICS_ADDRESS", "--secure-port"],
    );

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

/// The `args:` of the official deploy/ccm-networks.yaml (deploy/ccm.yaml is the same without
/// the last three).
const OFFICIAL_NETWORK_ARGS: &[&str] = &[
    "hcloud-ccm",
    "--allow-untagged-cloud",
    "--cloud-provider=hcloud",
    "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    "--route-reconciliation-period=30s",
    "--webhook-secure-port=0",
    "--leader-elect=false",
    "--allocate-node-cidrs=true",
    "--cluster-cidr=10.244.0.0/16",
];

#[test]
fn the_official_manifest_arguments_are_understood() {
    let mut a = parse(OFFICIAL_NETWORK_ARGS);
    a.set(&hcloud::NETWORK, "net");
    let cfg = a.validate().unwrap();
    assert!(cfg.feature_gates.watch_based_routes);
    assert_eq!(cfg.route_reconciliation_period, Duration::from_secs(30));
    assert!(!cfg.leader_election.enabled);
    assert!(cfg.allocate_node_cidrs);
    assert!(cfg.controller_wanted(Controller::NodeRoute));
    // Only --allocate-node-cidrs is worth a line: it is accepted and ignored.
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(cfg.warnings[0].starts_with("--allocate-node-cidrs=true has no effect"));

    let cfg = parse(&OFFICIAL_NETWORK_ARGS[..7]).validate().unwrap();
    assert!(cfg.warnings.is_empty(), "{:?}", cfg.warnings);
}

#[test]
fn every_flag_without_effect_is_accepted_with_one_line_each() {
    let mut argv = vec![
        "hcloud-ccm".to_owned(),
        "--cloud-provider=hcloud".to_owned(),
    ];
    argv.push("--allow-untagged-cloud".to_owned());
    for flag in NO_EFFECT_FLAGS {
        argv.push(match flag.kind {
            FlagKind::Bool => format!("--{}", flag.name),
            FlagKind::Duration => format!("--{}=10s", flag.name),
            FlagKind::Int => format!("--{}=100", flag.name),
            FlagKind::Text => format!("--{}=x", flag.name),
        });
    }
    let argv: Vec<&str> = argv.iter().map(String::as_str).collect();
    let a = parse(&argv);
    assert_eq!(a.no_effect.len(), NO_EFFECT_FLAGS.len());
    let cfg = a.validate().unwrap();
    assert_eq!(
        cfg.warnings.len(),
        NO_EFFECT_FLAGS.len(),
        "{:?}",
        cfg.warnings
    );
    for flag in NO_EFFECT_FLAGS {
        let prefix = format!("--{}=", flag.name);
        assert!(
            cfg.warnings
                .iter()
                .any(|w| w.starts_with(&prefix) && w.contains("has no effect")),
            "no line for --{}",
            flag.name
        );
    }
    // Their values are still checked like upstream's.
    let err = args(&["--profiling=maybe", "--log-flush-frequency=5"])
        .validate()
        .unwrap_err();
    assert_mentions(&err, &["--profiling", "--log-flush-frequency"]);
    // Not given: not mentioned.
    assert!(config(&[]).warnings.is_empty());
}

#[test]
fn flag_names_are_normalised_and_unknown_ones_are_refused_by_name() {
    let cfg = config(&[
        "--route_reconciliation_period=45s",
        "--leader_elect=false",
        "--kube_api_qps=7",
        "--cluster-name=under_score",
    ]);
    assert_eq!(cfg.route_reconciliation_period, Duration::from_secs(45));
    assert!(!cfg.leader_election.enabled);
    assert_eq!(cfg.kube.rate_limit.map(|l| l.qps), Some(7.0));
    assert_eq!(cfg.cluster_name, "under_score", "values are kept");

    let err = Args::try_parse_command_line(["hcloud-ccm", "--no-such-flag=1"]).unwrap_err();
    let CommandLineError::Clap(clap_err) = &err else {
        panic!("{err}");
    };
    assert_eq!(clap_err.exit_code(), 2);
    assert!(err.to_string().contains("--no-such-flag"), "{err}");
    // A flag may be repeated; the last value wins, as with pflag.
    let cfg = config(&["--cluster-name=a", "--cluster-name=b"]);
    assert_eq!(cfg.cluster_name, "b");
}

#[test]
fn feature_gates() {
    /// (watch-based routes on, unknown names) or a syntax error.
    type Parsed = Result<(bool, usize), ()>;
    let cases: &[(&str, Parsed)] = &[
        ("", Ok((false, 0))),
        (
            "CloudControllerManagerWatchBasedRoutesReconciliation=true",
            Ok((true, 0)),
        ),
        (
            "CloudControllerManagerWatchBasedRoutesReconciliation=false",
            Ok((false, 0)),
        ),
        (
            " CloudControllerManagerWatchBasedRoutesReconciliation=1 , Other=false",
            Ok((true, 1)),
        ),
        ("AllAlpha=true,AllBeta=false", Ok((false, 2))),
        (
            "CloudControllerManagerWatchBasedRoutesReconciliation",
            Err(()),
        ),
        (
            "CloudControllerManagerWatchBasedRoutesReconciliation=yes",
            Err(()),
        ),
    ];
    for (value, expected) in cases {
        let got = parse_feature_gates(value)
            .map(|(gates, unknown)| (gates.watch_based_routes, unknown.len()))
            .map_err(|_| ());
        assert_eq!(&got, expected, "{value:?}");
    }
    let cfg = config(&["--feature-gates=Foo=true"]);
    assert!(!cfg.feature_gates.watch_based_routes);
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(cfg.warnings[0].contains("Foo"), "{:?}", cfg.warnings);
    assert!(
        problems(&["--feature-gates=Foo"]).mentions("--feature-gates"),
        "syntax errors stop the start"
    );
}

#[test]
fn compatibility_flags_with_meaning() {
    // --allow-untagged-cloud: the official CCM requires it; this one warns.
    let mut a = Args::try_parse_command_line(["hcloud-ccm", "--cloud-provider=hcloud"]).unwrap();
    a.hcloud_token = Some(Secret::new(TOKEN));
    let cfg = a.validate().unwrap();
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(cfg.warnings[0].contains("--allow-untagged-cloud"));
    assert!(config(&["--allow-untagged-cloud=true"]).warnings.is_empty());

    // --webhook-secure-port: 0 is silent, another port has no effect, garbage is an error.
    assert!(config(&["--webhook-secure-port=0"]).warnings.is_empty());
    let cfg = config(&["--webhook-secure-port=10260"]);
    assert_eq!(cfg.warnings.len(), 1, "{:?}", cfg.warnings);
    assert!(problems(&["--webhook-secure-port=x"]).mentions("--webhook-secure-port"));

    // --node-sync-period drives the periodic backend pass.
    assert_eq!(
        config(&["--node-sync-period=5m"]).node_sync_period,
        Duration::from_secs(300)
    );
    assert!(problems(&["--node-sync-period=5"]).mentions("--node-sync-period"));

    // Accepted and ignored: one line each.
    let cfg = config(&["--min-resync-period=1h", "--allocate-node-cidrs"]);
    assert_eq!(cfg.warnings.len(), 2, "{:?}", cfg.warnings);
    // With the watch-based routes gate it paces the route repair passes: no warning.
    let gated = config(&[
        "--min-resync-period=1h",
        "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
    ]);
    assert!(gated.warnings.is_empty(), "{:?}", gated.warnings);
    assert_eq!(gated.min_resync_period, Duration::from_secs(3600));
    assert!(
        cfg.warnings
            .iter()
            .any(|w| w.starts_with("--min-resync-period"))
    );
    assert!(
        cfg.warnings
            .iter()
            .any(|w| w.starts_with("--allocate-node-cidrs"))
    );
}

#[test]
fn kube_api_rate_limit_follows_client_go() {
    let limit = |extra: &[&str]| config(extra).kube.rate_limit;
    assert_eq!(
        limit(&["--kube-api-qps=50", "--kube-api-burst=100"]),
        Some(KubeRateLimit {
            qps: 50.0,
            burst: 100
        })
    );
    assert_eq!(
        limit(&["--kube-api-qps=0.5", "--kube-api-burst=0"]),
        Some(KubeRateLimit {
            qps: 0.5,
            burst: 10
        })
    );
    assert_eq!(
        limit(&["--kube-api-qps=0"]),
        Some(KubeRateLimit {
            qps: 5.0,
            burst: 400
        })
    );
    assert_eq!(limit(&["--kube-api-qps=-1"]), None, "negative: unlimited");
    assert_refused(
        &["--kube-api-qps=fast", "--kube-api-burst=-3"],
        &["--kube-api-qps", "--kube-api-burst"],
    );
}

#[test]
fn metadata_endpoint() {
    assert_eq!(
        config(&["--hcloud-metadata-endpoint=http://127.0.0.1:8080/hetzner/v1/metadata/"])
            .hcloud
            .metadata_endpoint,
        "http://127.0.0.1:8080/hetzner/v1/metadata"
    );
    assert!(
        problems(&["--hcloud-metadata-endpoint=169.254.169.254"])
            .mentions("HCLOUD_METADATA_ENDPOINT")
    );
    assert!(
        !config(&["--hcloud-network-disable-attached-check=true"])
            .hcloud
            .network_attached_check
    );
    // A set-but-empty boolean variable means its default (the official CCM refuses it).
    assert!(
        config(&["--hcloud-network-disable-attached-check="])
            .hcloud
            .network_attached_check
    );
}

#[test]
fn help_documents_every_flag_and_variable() {
    let help = Args::full_command().render_long_help().to_string();
    for flag in NO_EFFECT_FLAGS {
        assert!(
            help.contains(&format!("--{}", flag.name)),
            "--help lacks --{}",
            flag.name
        );
    }
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
        "--feature-gates",
        "--node-sync-period",
        "--webhook-secure-port",
        "--kube-api-qps",
        "--kube-api-burst",
        "HCLOUD_METADATA_ENDPOINT",
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
        "HCLOUD_RATE_LIMIT_RESERVE",
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
        "HCLOUD_LOAD_BALANCERS_HEALTH_CHECK_KUBE_PROXY",
        "HCLOUD_LOAD_BALANCERS_CLUSTER_NAME",
        "--load-balancer-class",
        "HCLOUD_LOAD_BALANCER_CLASS",
        "HCLOUD_LOAD_BALANCERS_EXCLUDE_CORDONED_NODES",
        "HCLOUD_LOAD_BALANCERS_TLS_SECRETS",
        "ROBOT_ENABLED",
        "ROBOT_USER",
        "ROBOT_USER_FILE",
        "ROBOT_PASSWORD",
        "ROBOT_PASSWORD_FILE",
        "ROBOT_CACHE_TIMEOUT",
        "ROBOT_RATE_LIMIT_WAIT_TIME",
        "ROBOT_FORWARD_INTERNAL_IPS",
        "ROBOT_USE_LEGACY_PROVIDER_ID",
        "[default: 15s]",
        "[default: cloud-controller-manager]",
        "[default: :8233]",
    ] {
        assert!(help.contains(needle), "--help lacks {needle}");
    }
}

#[test]
fn load_balancer_class() {
    assert_eq!(config(&[]).load_balancer_class, None, "unset by default");
    assert_eq!(
        config(&["--load-balancer-class="]).load_balancer_class,
        None,
        "empty means unset"
    );
    for valid in [
        "hcloud",
        "example.com/hcloud",
        "lb.example.com/hetzner_cloud.v1",
    ] {
        let cfg = config(&[&format!("--load-balancer-class={valid}")]);
        assert_eq!(cfg.load_balancer_class.as_deref(), Some(valid));
    }
    // Like every variable, also a flag of its name in lower case.
    let cfg = config(&["--hcloud-load-balancer-class=hcloud"]);
    assert_eq!(cfg.load_balancer_class.as_deref(), Some("hcloud"));
    for invalid in [
        "Example.com/hcloud",
        "example.com/",
        "/hcloud",
        "hcloud-",
        "a/b/c",
        "with space",
        &"x".repeat(64),
    ] {
        let err = problems(&[&format!("--load-balancer-class={invalid}")]);
        assert_eq!(err.problems.len(), 1, "{invalid}: {err}");
        assert_mentions(
            &err,
            &["HCLOUD_LOAD_BALANCER_CLASS", "--load-balancer-class"],
        );
    }
}

#[test]
fn a_controller_turned_off_says_which_setting_did_it() {
    let why = |extra: &[&str], controller| config(extra).why_not_wanted(controller);
    assert_eq!(why(&[], Controller::CloudNode), None);
    assert_eq!(
        why(
            &["--controllers=*,-service-lb-controller"],
            Controller::ServiceLb
        )
        .as_deref(),
        Some("service-lb-controller: turned off by --controllers")
    );
    let no_network = why(&[], Controller::NodeRoute).unwrap();
    assert!(no_network.contains("no HCLOUD_NETWORK"), "{no_network}");
    let no_cidr = why(&["--hcloud-network=net"], Controller::NodeRoute).unwrap();
    assert!(
        no_cidr.starts_with("node-route-controller: ") && no_cidr.contains("--cluster-cidr"),
        "{no_cidr}"
    );
    let off = why(
        &["--hcloud-network=net", "--configure-cloud-routes=false"],
        Controller::NodeRoute,
    )
    .unwrap();
    assert!(off.contains("--configure-cloud-routes=false"), "{off}");
    let off = why(
        &[
            "--hcloud-network=net",
            "--cluster-cidr=10.244.0.0/16",
            "--hcloud-network-routes-enabled=false",
        ],
        Controller::NodeRoute,
    )
    .unwrap();
    assert!(off.contains("HCLOUD_NETWORK_ROUTES_ENABLED=false"), "{off}");
    assert_eq!(
        why(
            &["--hcloud-network=net", "--cluster-cidr=10.244.0.0/16"],
            Controller::NodeRoute
        ),
        None
    );
    for controller in Controller::ALL {
        let cfg = config(&["--hcloud-network=net", "--cluster-cidr=10.244.0.0/16"]);
        assert_eq!(
            cfg.controller_wanted(controller),
            cfg.why_not_wanted(controller).is_none()
        );
    }
}

#[test]
fn zero_health_check_variables_mean_unset() {
    // As the official CCM reads them, 0 means unset: the health check is left as it is.
    let cfg = config(&[
        "--hcloud-load-balancers-health-check-interval=0s",
        "--hcloud-load-balancers-health-check-timeout=0",
        "--hcloud-load-balancers-health-check-retries=0",
    ]);
    let lb = cfg.provider.load_balancers.unwrap();
    assert_eq!(lb.health_check_interval, None);
    assert_eq!(lb.health_check_timeout, None);
    assert_eq!(lb.health_check_retries, None);

    let cfg = config(&[
        "--hcloud-load-balancers-health-check-interval=5s",
        "--hcloud-load-balancers-health-check-timeout=3s",
        "--hcloud-load-balancers-health-check-retries=2",
    ]);
    let lb = cfg.provider.load_balancers.unwrap();
    assert_eq!(lb.health_check_interval, Some(Duration::from_secs(5)));
    assert_eq!(lb.health_check_timeout, Some(Duration::from_secs(3)));
    assert_eq!(lb.health_check_retries, Some(2));
}

#[test]
fn enumerated_values_and_their_messages() {
    // The algorithm is read case-insensitively, the other enumerations exactly, as upstream.
    let algorithm = |value: &str| {
        config(&[&format!("--hcloud-load-balancers-algorithm-type={value}")])
            .load_balancers
            .algorithm
    };
    assert_eq!(
        algorithm(" Least_Connections "),
        Some(AlgorithmType::LeastConnections)
    );
    assert_eq!(algorithm("round_robin"), Some(AlgorithmType::RoundRobin));
    let cfg = config(&[
        "--hcloud-instances-address-family=dualstack",
        "--hcloud-server-cache-mode=off",
    ]);
    assert_eq!(cfg.provider.address_family, AddressFamily::DualStack);
    assert_eq!(cfg.provider.cache.mode, CacheMode::Off);
    let err = problems(&[
        "--hcloud-instances-address-family=IPv4",
        "--hcloud-server-cache-mode=some",
        "--hcloud-load-balancers-algorithm-type=random",
    ]);
    let lines: Vec<String> = err.problems.iter().map(ToString::to_string).collect();
    for expected in [
        "HCLOUD_INSTANCES_ADDRESS_FAMILY: invalid value \"IPv4\", expected one of: ipv4, ipv6, \
         dualstack",
        "HCLOUD_SERVER_CACHE_MODE: invalid value \"some\", expected one of: all, one, off",
        "HCLOUD_LOAD_BALANCERS_ALGORITHM_TYPE: unsupported value \"random\", expected \
         round_robin or least_connections",
    ] {
        assert!(lines.iter().any(|l| l == expected), "{expected}: {lines:?}");
    }
}

#[test]
fn a_set_but_empty_variable_means_its_default() {
    let mut a = args(&[]);
    for spec in all_settings().filter(|s| s.env.is_some()) {
        a.set_text(spec.flag, "");
    }
    let cfg = a.validate().unwrap();
    let defaults = config(&[]);
    assert_eq!(cfg.provider.cache, defaults.provider.cache);
    assert_eq!(cfg.hcloud, defaults.hcloud);
    assert_eq!(cfg.load_balancers, defaults.load_balancers);
    assert_eq!(cfg.metrics_address, defaults.metrics_address);
    assert_eq!(cfg.provider.robot, defaults.provider.robot);
}

/// Where the generated reference table sits in docs/configuration.md.
const TABLE_BEGIN: &str = "<!-- BEGIN settings table -->\n";
const TABLE_END: &str = "<!-- END settings table -->";

/// docs/configuration.md's table of every setting is generated from the declarations (regenerate
/// with `UPDATE_DOCS=1 cargo test -p hcloud-ccm --lib config::tests::docs`), and the document
/// names no flag or variable that is not declared.
#[test]
fn docs_reference_table_is_the_declarations() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/configuration.md");
    let mut doc = std::fs::read_to_string(&path).unwrap();
    let start = doc.find(TABLE_BEGIN).expect("begin marker") + TABLE_BEGIN.len();
    let end = doc.find(TABLE_END).expect("end marker");
    let table = reference_table();
    if std::env::var_os("UPDATE_DOCS").is_some() {
        doc = format!("{}{table}{}", &doc[..start], &doc[end..]);
        std::fs::write(&path, &doc).unwrap();
    } else {
        assert!(
            doc[start..end] == table,
            "docs/configuration.md's settings table is out of date; regenerate with \
             UPDATE_DOCS=1 cargo test -p hcloud-ccm --lib config::tests::docs"
        );
    }
    for spec in all_settings() {
        let help = spec.help_text();
        assert!(!help.is_empty(), "--{} has no help", spec.flag);
        assert!(
            doc.contains(&help.replace('|', "\\|")),
            "--{}: {help}",
            spec.flag
        );
    }

    // Every variable and flag the document mentions is declared.
    let mut variables: Vec<String> = all_settings()
        .filter_map(|s| s.env.map(str::to_owned))
        .collect();
    variables.extend(SECRET_FLAGS.iter().map(|(_, v)| (*v).to_owned()));
    let mut flags: Vec<String> = all_settings()
        .flat_map(|s| std::iter::once(s.flag).chain(s.aliases.iter().copied()))
        .chain(NO_EFFECT_FLAGS.iter().map(|f| f.name))
        .map(str::to_owned)
        .collect();
    // Not settings: the refused secret flags, clap's own, `plan`'s, the kubelet's --node-ip
    // and --provider-id, and the placeholder of "--flag=value has no effect".
    flags.extend(SECRET_FLAGS.iter().map(|(f, _)| (*f).to_owned()));
    flags.extend(
        [
            "help",
            "version",
            "output",
            "detailed-exitcode",
            "node-ip",
            "provider-id",
            "flag",
        ]
        .map(str::to_owned),
    );
    let words = doc.split(|ch: char| !(ch.is_ascii_alphanumeric() || ch == '_' || ch == '-'));
    for word in words {
        if let Some(flag) = word
            .strip_prefix("--")
            .filter(|f| f.starts_with(|ch: char| ch.is_ascii_lowercase()))
        {
            let flag = flag.replace('_', "-");
            assert!(
                flags.contains(&flag),
                "docs/configuration.md names --{flag}"
            );
        } else if word.starts_with("HCLOUD_") || word.starts_with("ROBOT_") {
            // `HCLOUD_LOAD_BALANCERS_*` names a group: some variable must have the prefix.
            let known = if word.ends_with('_') {
                variables.iter().any(|v| v.starts_with(word))
            } else {
                variables.iter().any(|v| v == word)
            };
            assert!(known, "docs/configuration.md names {word}");
        }
    }
}

#[test]
fn only_credentials_read_from_files_are_watched() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, value: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, value).unwrap();
        path.display().to_string()
    };
    let (token, user, password) = (
        file("token", TOKEN),
        file("user", "u"),
        file("password", "p"),
    );
    let token_flag = format!("--hcloud-token-file={token}");
    // From the file (the variable empty): watched.
    let from_file = parse_with_secrets(&argv(&[&token_flag]), &[("HCLOUD_TOKEN", "")])
        .validate()
        .unwrap();
    assert_eq!(from_file.hcloud.token.expose(), TOKEN);
    assert_eq!(
        from_file.hcloud.token_file.as_deref(),
        Some(std::path::Path::new(&token))
    );
    // The variable wins over the file, and is not watched.
    let from_env = config(&[&token_flag]);
    assert_eq!(from_env.hcloud.token_file, None);
    assert_eq!(config(&[]).hcloud.token_file, None);

    // Robot: both credentials from files, with Robot on.
    let robot_flags = [
        "--robot-enabled=true".to_owned(),
        format!("--robot-user-file={user}"),
        format!("--robot-password-file={password}"),
    ];
    let robot_argv: Vec<&str> = robot_flags.iter().map(String::as_str).collect();
    let robot = args(&robot_argv).validate().unwrap().robot;
    assert_eq!(
        robot.files,
        Some((user.clone().into(), password.clone().into()))
    );
    // One of them from the environment: the pair is not watched (a restart changes it).
    let mixed = parse_with_secrets(&argv(&robot_argv), &[("ROBOT_USER", "env-user")])
        .validate()
        .unwrap()
        .robot;
    assert_eq!(mixed.files, None);
    // Robot off: nothing is watched.
    let off = args(&robot_argv[1..]).validate().unwrap().robot;
    assert_eq!(off.files, None);
}
