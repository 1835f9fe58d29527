//! [`Args::validate`]: every area checked in one pass, all problems returned at once. The
//! areas with settings of their own are checked in their own files (kube, leader, serving,
//! hcloud, load_balancers, robot); the controllers', logging and compatibility settings are
//! declared and checked here.

use std::time::Duration;

use hcloud_provider::ProviderSettings;

use super::args::{COMPAT, CONTROLLERS, LOGGING};
use super::checker::{Checker, at_least, boolean, duration, parsed, positive_duration, text};
use super::setting::{Form, Spec, settings};
use super::{
    Args, Config, ConfigError, Controller, EnabledControllers, FeatureGates, LogFormat,
    LoggingSettings, WATCH_BASED_ROUTES_GATE, hcloud, kube, leader, load_balancers,
    parse_cluster_cidrs, parse_feature_gates, robot, serving,
};

settings! {
    CONTROLLER_SETTINGS, CONTROLLERS;
    /// Controllers to run: `*` for all, `name` to enable, `-name` to disable. Names:
    /// cloud-node-controller (cloud-node), cloud-node-lifecycle-controller
    /// (cloud-node-lifecycle), service-lb-controller (service), node-route-controller (route).
    pub(super) CONTROLLERS_FLAG: Vec<String> =
        Spec::flag("controllers", "LIST").default("*").form(Form::List).parse(list);
    /// CIDR range(s) of pods (comma-separated; at most one IPv4 and one IPv6). Routes need it:
    /// with HCLOUD_NETWORK set but this missing or unusable, routes are off (a warning says so).
    pub(super) CLUSTER_CIDR: String = Spec::flag("cluster-cidr", "CIDRS").parse(text);
    /// Whether pod CIDRs are allocated to nodes. Accepted; no effect here (true logs so once):
    /// kube-controller-manager allocates them, and routes do not need it.
    pub(super) ALLOCATE_NODE_CIDRS: bool = Spec::flag("allocate-node-cidrs", "BOOL")
        .default("false")
        .form(Form::Switch)
        .parse(boolean);
    /// Whether routes for pod CIDRs are programmed in the cloud.
    pub(super) CONFIGURE_CLOUD_ROUTES: bool = Spec::flag("configure-cloud-routes", "BOOL")
        .default("true")
        .form(Form::Switch)
        .parse(boolean);
    /// Number of Services synchronised in parallel.
    pub(super) CONCURRENT_SERVICE_SYNCS: usize = Spec::flag("concurrent-service-syncs", "N")
        .default("1")
        .parse(|v| at_least(v, 1usize));
    /// Number of Nodes initialised in parallel by the cloud node controller.
    pub(super) CONCURRENT_NODE_SYNCS: usize = Spec::flag("concurrent-node-syncs", "N")
        .default("1")
        .parse(|v| at_least(v, 1usize));
    /// Number of workers updating Node status (0 = one pass at a time).
    pub(super) CONCURRENT_NODE_STATUS_UPDATES: usize =
        Spec::flag("concurrent-node-status-updates", "N")
            .default("0")
            .parse(|v| at_least(v, 0usize));
    /// Period of the node lifecycle check.
    pub(super) NODE_MONITOR_PERIOD: Duration = Spec::flag("node-monitor-period", "DURATION")
        .default("5s")
        .parse(positive_duration);
    /// Period of the node address and label refresh.
    pub(super) NODE_STATUS_UPDATE_FREQUENCY: Duration =
        Spec::flag("node-status-update-frequency", "DURATION")
            .default("5m")
            .parse(positive_duration);
    /// Period of the route reconciliation.
    pub(super) ROUTE_RECONCILIATION_PERIOD: Duration =
        Spec::flag("route-reconciliation-period", "DURATION")
            .default("10s")
            .parse(positive_duration);
    /// Minimum resync period of informers. Accepted; no effect here (another value logs so
    /// once): the caches are watches without periodic resyncs.
    pub(super) MIN_RESYNC_PERIOD: Duration = Spec::flag("min-resync-period", "DURATION")
        .default("12h")
        .parse(positive_duration);
}

settings! {
    LOGGING_SETTINGS, LOGGING;
    /// Log format: text or json.
    pub(super) LOG_FORMAT: LogFormat = Spec::flag("log-format", "FORMAT")
        .aliases(&["logging-format"])
        .default("text")
        .parse(parsed);
    /// Log verbosity: 0-2 info, 3-4 debug, 5 and more trace (RUST_LOG overrides).
    pub(super) VERBOSITY: u8 = Spec::flag("v", "LEVEL")
        .short('v')
        .default("0")
        .parse(|v| at_least(v, 0u8));
}

settings! {
    COMPAT_SETTINGS, COMPAT;
    /// Required by the official CCM, which stops without it (Hetzner Cloud has no cluster ID);
    /// here `false` only logs a warning.
    pub(super) ALLOW_UNTAGGED_CLOUD: bool = Spec::flag("allow-untagged-cloud", "BOOL")
        .default("false")
        .form(Form::Switch)
        .parse(boolean);
    /// Feature gates, `Name=BOOL,...`. Implemented:
    /// CloudControllerManagerWatchBasedRoutesReconciliation (routes also reconcile on Node
    /// changes). Other names are warned about and ignored.
    pub(super) FEATURE_GATES: String = Spec::flag("feature-gates", "GATES").parse(text);
    /// Period of a full load balancer backend pass (every Service's targets re-sent even when
    /// no Node changed); 0 = only on Node changes, as upstream.
    pub(super) NODE_SYNC_PERIOD: Duration =
        Spec::flag("node-sync-period", "DURATION").default("0s").parse(duration);
    /// Secure port of cloud provider webhooks [default: 10260]. This CCM has none: 0 (off, as
    /// the official manifests pass) is silent, another port has no effect.
    pub(super) WEBHOOK_SECURE_PORT: u16 =
        Spec::flag("webhook-secure-port", "PORT").parse(serving::port);
}

fn list(value: &str) -> Result<Vec<String>, String> {
    Ok(value.split(',').map(str::to_owned).collect())
}

impl Args {
    /// Validates everything and returns every problem at once. Reads the `*_FILE` secrets and
    /// checks that TLS files exist.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let mut c = Checker::new(self);

        // ---- Cloud provider and client ----
        let cloud_provider = c.value(&kube::CLOUD_PROVIDER);
        let cluster_name = c.value(&kube::CLUSTER_NAME);
        let kube = kube::check_kube(&mut c);

        // ---- Controllers ----
        let entries = c.value(&CONTROLLERS_FLAG);
        let controllers = EnabledControllers::parse(&entries).unwrap_or_else(|errors| {
            for e in errors {
                c.problem(&CONTROLLERS_FLAG.spec.name(), e);
            }
            // Keep checking the rest as if the unknown entries were absent.
            let known: Vec<&String> = entries
                .iter()
                .filter(|e| {
                    let e = e.trim();
                    e == "*" || Controller::from_name(e.strip_prefix('-').unwrap_or(e)).is_some()
                })
                .collect();
            EnabledControllers::parse(&known).unwrap_or_default()
        });
        let allocate_node_cidrs = c.value(&ALLOCATE_NODE_CIDRS);
        let configure_cloud_routes = c.value(&CONFIGURE_CLOUD_ROUTES);
        let concurrent_service_syncs = c.value(&CONCURRENT_SERVICE_SYNCS);
        let concurrent_node_syncs = c.value(&CONCURRENT_NODE_SYNCS);
        let concurrent_node_status_updates = c.value(&CONCURRENT_NODE_STATUS_UPDATES);
        let node_monitor_period = c.value(&NODE_MONITOR_PERIOD);
        let node_status_update_frequency = c.value(&NODE_STATUS_UPDATE_FREQUENCY);
        let route_reconciliation_period = c.value(&ROUTE_RECONCILIATION_PERIOD);
        let min_resync_period = c.value(&MIN_RESYNC_PERIOD);
        if allocate_node_cidrs {
            c.warn(
                "--allocate-node-cidrs=true has no effect: this CCM allocates no pod CIDRs \
                 (kube-controller-manager's node IPAM does); routes need only --cluster-cidr",
            );
        }
        let node_sync_period = c.value(&NODE_SYNC_PERIOD);

        // ---- Leader election ----
        let leader_election = leader::check_leader_election(&mut c);

        // ---- Secure serving ----
        let secure_serving = serving::check_secure_serving(&mut c);

        // ---- Logging ----
        let log_format = c.value(&LOG_FORMAT);
        let verbosity = c.value(&VERBOSITY);

        // ---- Compatibility flags ----
        if !c.value(&ALLOW_UNTAGGED_CLOUD) {
            c.warn(
                "--allow-untagged-cloud is not set: the official CCM refuses to start without it \
                 (Hetzner Cloud has no cluster ID); this one starts anyway",
            );
        }
        let mut feature_gates = FeatureGates::default();
        if let Some(value) = c.optional(&FEATURE_GATES) {
            match parse_feature_gates(&value) {
                Ok((gates, unknown)) => {
                    feature_gates = gates;
                    for name in unknown {
                        c.warn(format!(
                            "--feature-gates: {name} is not a feature gate of this CCM; ignored \
                             (implemented: {WATCH_BASED_ROUTES_GATE})"
                        ));
                    }
                }
                Err(e) => c.problem(&FEATURE_GATES.spec.name(), e),
            }
        }
        let min_resync_text = c.raw(&MIN_RESYNC_PERIOD).unwrap_or_default();
        if MIN_RESYNC_PERIOD.spec.default != Some(min_resync_text)
            && !feature_gates.watch_based_routes
        {
            c.warn(format!(
                "--min-resync-period={min_resync_text} has no effect without the \
                 {WATCH_BASED_ROUTES_GATE} feature gate (it then paces the route controller's \
                 repair passes); the caches here are watches, kept current without periodic \
                 resyncs"
            ));
        }
        if let Some(port) = c.optional(&WEBHOOK_SECURE_PORT)
            && port != 0
        {
            c.warn(format!(
                "--webhook-secure-port={port} has no effect: this CCM serves no webhooks"
            ));
        }
        for given in &self.no_effect {
            let flag = format!("--{}", given.flag.name);
            if c.check_kind(&flag, given.flag.kind, &given.value) {
                c.warn(format!(
                    "{flag}={} has no effect: {}",
                    given.value, given.flag.reason
                ));
            }
        }

        // ---- Hetzner Cloud ----
        let mut provider = ProviderSettings::default();
        let hcloud = hcloud::check_hcloud(&mut c, self.hcloud_token.as_ref(), &mut provider);
        let metrics_enabled = c.value(&hcloud::METRICS_ENABLED);
        let metrics_address = c.value(&hcloud::METRICS_ADDRESS);
        if let Some(secure) = &secure_serving
            && metrics_enabled
            && metrics_address.port == secure.port
            && secure.port != 0
        {
            c.problem(
                &format!(
                    "{}/{}",
                    hcloud::METRICS_ADDRESS.spec.name(),
                    serving::SECURE_PORT.spec.name()
                ),
                format!("both use port {}; choose different ports", secure.port),
            );
        }

        // ---- Load balancers ----
        let load_balancers_enabled = c.value(&load_balancers::ENABLED);
        let load_balancers = load_balancers::check_load_balancers(&mut c);
        let load_balancer_class = c.optional(&load_balancers::CLASS);
        let load_balancer_nodes = load_balancers::check_load_balancer_nodes(&mut c);
        let load_balancer_secrets = load_balancers::check_load_balancer_secrets(&mut c);
        provider.load_balancers = load_balancers_enabled.then(|| load_balancers.clone());

        // ---- Robot ----
        let (robot_settings, robot) = robot::check_robot(
            &mut c,
            (self.robot_user.as_ref(), self.robot_password.as_ref()),
            &mut provider.cache.robot_max_age,
        );
        provider.robot = robot_settings;

        // ---- Routes and --cluster-cidr ----
        let routes_would_run = controllers.is_enabled(Controller::NodeRoute)
            && configure_cloud_routes
            && provider.routes_enabled;
        let mut cluster_cidrs = Vec::new();
        match c.raw(&CLUSTER_CIDR) {
            None if routes_would_run => {
                c.warn(
                    "HCLOUD_NETWORK is set but --cluster-cidr is not: routes are turned off (set \
                     --cluster-cidr to the pod CIDR range to program routes, or \
                     HCLOUD_NETWORK_ROUTES_ENABLED=false to silence this warning)",
                );
                provider.routes_enabled = false;
            }
            None => {}
            Some(value) => match parse_cluster_cidrs(value) {
                Ok(cidrs) => cluster_cidrs = cidrs,
                Err(e) if routes_would_run => {
                    c.warn(format!(
                        "--cluster-cidr is invalid ({e}): routes are turned off although \
                         HCLOUD_NETWORK is set"
                    ));
                    provider.routes_enabled = false;
                }
                Err(e) => c.warn(format!(
                    "--cluster-cidr is invalid ({e}); ignored because routes are not configured"
                )),
            },
        }
        provider.cluster_cidrs = cluster_cidrs.clone();

        if !c.problems.is_empty() {
            return Err(ConfigError {
                problems: c.problems,
            });
        }
        Ok(Config {
            cloud_provider,
            kube,
            controllers,
            leader_election,
            cluster_name,
            cluster_cidrs,
            allocate_node_cidrs,
            configure_cloud_routes,
            concurrent_service_syncs,
            concurrent_node_syncs,
            concurrent_node_status_updates,
            node_monitor_period,
            node_status_update_frequency,
            route_reconciliation_period,
            min_resync_period,
            node_sync_period,
            feature_gates,
            secure_serving,
            metrics_address: metrics_enabled.then_some(metrics_address),
            logging: LoggingSettings {
                format: log_format,
                verbosity,
                hcloud_debug: hcloud.debug,
            },
            hcloud,
            load_balancers,
            load_balancer_class,
            load_balancer_nodes,
            load_balancer_secrets,
            robot,
            provider,
            warnings: c.warnings,
        })
    }
}
