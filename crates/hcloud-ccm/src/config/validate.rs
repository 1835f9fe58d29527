//! [`Args::validate`]: every area checked in one pass, all problems returned at once. The
//! areas with settings of their own are checked in their own files (kube, leader, serving,
//! hcloud, load_balancers, robot).

use super::checker::{Checker, check_url, non_empty};
use super::routes::parse_cluster_cidrs;
use super::{
    Args, Config, ConfigError, Controller, EnabledControllers, FeatureGates, FlagKind,
    KubeSettings, ListenAddress, LogFormat, LoggingSettings, WATCH_BASED_ROUTES_GATE, defaults,
    parse_feature_gates, parse_go_duration,
};

impl Args {
    /// Validates everything and returns every problem at once. Reads the `*_FILE` secrets and
    /// checks that TLS files exist.
    pub fn validate(&self) -> Result<Config, ConfigError> {
        let mut c = Checker::default();

        // ---- Cloud provider and client ----
        let cloud_provider = self.cloud_provider.clone().unwrap_or_default();
        match cloud_provider.as_str() {
            "" => c.problem("--cloud-provider", "required; set --cloud-provider=hcloud"),
            "hcloud" => {}
            other => c.problem(
                "--cloud-provider",
                format!("unknown cloud provider {other:?}; this binary implements only \"hcloud\""),
            ),
        }
        if let Some(master) = non_empty(self.master.as_deref()) {
            check_url(&mut c, "--master", master);
        }
        if self.cluster_name.is_empty() {
            c.problem("--cluster-name", "must not be empty");
        }

        // ---- Controllers ----
        let controllers = EnabledControllers::parse(&self.controllers).unwrap_or_else(|errors| {
            for e in errors {
                c.problem("--controllers", e);
            }
            // Keep checking the rest as if the unknown entries were absent.
            let known: Vec<&String> = self
                .controllers
                .iter()
                .filter(|e| {
                    let e = e.trim();
                    e == "*" || Controller::from_name(e.strip_prefix('-').unwrap_or(e)).is_some()
                })
                .collect();
            EnabledControllers::parse(&known).unwrap_or_default()
        });
        let allocate_node_cidrs = c.bool("--allocate-node-cidrs", &self.allocate_node_cidrs);
        let configure_cloud_routes =
            c.bool("--configure-cloud-routes", &self.configure_cloud_routes);
        let concurrent_service_syncs = c.number(
            "--concurrent-service-syncs",
            &self.concurrent_service_syncs,
            1usize,
        );
        let concurrent_node_syncs = c.number(
            "--concurrent-node-syncs",
            &self.concurrent_node_syncs,
            1usize,
        );
        let concurrent_node_status_updates = c.number(
            "--concurrent-node-status-updates",
            &self.concurrent_node_status_updates,
            0usize,
        );
        let node_monitor_period =
            c.positive_duration("--node-monitor-period", &self.node_monitor_period);
        let node_status_update_frequency = c.positive_duration(
            "--node-status-update-frequency",
            &self.node_status_update_frequency,
        );
        let route_reconciliation_period = c.positive_duration(
            "--route-reconciliation-period",
            &self.route_reconciliation_period,
        );
        let min_resync_period = c.positive_duration("--min-resync-period", &self.min_resync_period);
        if allocate_node_cidrs {
            c.warn(
                "--allocate-node-cidrs=true has no effect: this CCM allocates no pod CIDRs \
                 (kube-controller-manager's node IPAM does); routes need only --cluster-cidr",
            );
        }
        let node_sync_period = c.duration("--node-sync-period", &self.node_sync_period);
        let rate_limit = self.check_kube_rate_limit(&mut c);

        // ---- Leader election ----
        let leader_election = self.check_leader_election(&mut c);

        // ---- Secure serving ----
        let secure_serving = self.check_secure_serving(&mut c);

        // ---- Logging ----
        let log_format: LogFormat = c.parsed("--log-format", &self.log_format);
        let verbosity: u8 = c.number("-v", &self.verbosity, 0u8);

        // ---- Compatibility flags ----
        if !c.bool("--allow-untagged-cloud", &self.allow_untagged_cloud) {
            c.warn(
                "--allow-untagged-cloud is not set: the official CCM refuses to start without it \
                 (Hetzner Cloud has no cluster ID); this one starts anyway",
            );
        }
        let mut feature_gates = FeatureGates::default();
        if let Some(value) = non_empty(self.feature_gates.as_deref()) {
            match parse_feature_gates(value) {
                Ok((gates, unknown)) => {
                    feature_gates = gates;
                    for name in unknown {
                        c.warn(format!(
                            "--feature-gates: {name} is not a feature gate of this CCM; ignored \
                             (implemented: {WATCH_BASED_ROUTES_GATE})"
                        ));
                    }
                }
                Err(e) => c.problem("--feature-gates", e),
            }
        }
        if self.min_resync_period != "12h" && !feature_gates.watch_based_routes {
            c.warn(format!(
                "--min-resync-period={} has no effect without the {WATCH_BASED_ROUTES_GATE} \
                 feature gate (it then paces the route controller's repair passes); the caches \
                 here are watches, kept current without periodic resyncs",
                self.min_resync_period
            ));
        }
        if let Some(value) = non_empty(self.webhook_secure_port.as_deref()) {
            match value.parse::<u16>() {
                Ok(0) => {}
                Ok(_) => c.warn(format!(
                    "--webhook-secure-port={value} has no effect: this CCM serves no webhooks"
                )),
                Err(_) => c.problem(
                    "--webhook-secure-port",
                    format!("{value:?} is not a port number (0-65535)"),
                ),
            }
        }
        for given in &self.no_effect {
            let flag = format!("--{}", given.flag.name);
            let valid = match given.flag.kind {
                FlagKind::Bool => {
                    c.bool(&flag, &given.value);
                    true
                }
                FlagKind::Duration => parse_go_duration(&given.value)
                    .map_err(|e| c.problem(&flag, e.to_string()))
                    .is_ok(),
                FlagKind::Int => {
                    c.number(&flag, &given.value, i64::MIN);
                    true
                }
                FlagKind::Text => true,
            };
            if valid {
                c.warn(format!(
                    "{flag}={} has no effect: {}",
                    given.value, given.flag.reason
                ));
            }
        }

        // ---- Hetzner Cloud ----
        let hcloud = self.check_hcloud(&mut c);
        let metrics_enabled = c.env_bool(
            "HCLOUD_METRICS_ENABLED",
            &self.hcloud_metrics_enabled,
            defaults::HCLOUD_METRICS_ENABLED,
        );
        let metrics_address: ListenAddress = c.env_parsed(
            "HCLOUD_METRICS_ADDRESS",
            &self.hcloud_metrics_address,
            defaults::HCLOUD_METRICS_ADDRESS,
        );
        if let Some(secure) = &secure_serving
            && metrics_enabled
            && metrics_address.port == secure.port
            && secure.port != 0
        {
            c.problem(
                "HCLOUD_METRICS_ADDRESS/--secure-port",
                format!("both use port {}; choose different ports", secure.port),
            );
        }

        // ---- Load balancers ----
        let load_balancers = self.check_load_balancers(&mut c);

        // ---- Robot ----
        let robot = self.check_robot(&mut c, hcloud.routes_enabled);

        // ---- Routes and --cluster-cidr ----
        let mut hcloud = hcloud;
        let routes_would_run = controllers.is_enabled(Controller::NodeRoute)
            && configure_cloud_routes
            && hcloud.routes_enabled;
        let mut cluster_cidrs = Vec::new();
        match self.cluster_cidr.as_deref() {
            None if routes_would_run => {
                c.warn(
                    "HCLOUD_NETWORK is set but --cluster-cidr is not: routes are turned off (set \
                     --cluster-cidr to the pod CIDR range to program routes, or \
                     HCLOUD_NETWORK_ROUTES_ENABLED=false to silence this warning)",
                );
                hcloud.routes_enabled = false;
            }
            None => {}
            Some(value) => match parse_cluster_cidrs(value) {
                Ok(cidrs) => cluster_cidrs = cidrs,
                Err(e) if routes_would_run => {
                    c.warn(format!(
                        "--cluster-cidr is invalid ({e}): routes are turned off although \
                         HCLOUD_NETWORK is set"
                    ));
                    hcloud.routes_enabled = false;
                }
                Err(e) => c.warn(format!(
                    "--cluster-cidr is invalid ({e}); ignored because routes are not configured"
                )),
            },
        }

        hcloud.cluster_cidrs = cluster_cidrs.clone();

        if !c.problems.is_empty() {
            return Err(ConfigError {
                problems: c.problems,
            });
        }
        Ok(Config {
            cloud_provider,
            kube: KubeSettings {
                kubeconfig: self
                    .kubeconfig
                    .clone()
                    .filter(|p| !p.as_os_str().is_empty()),
                master: non_empty(self.master.as_deref()).map(str::to_owned),
                rate_limit,
            },
            controllers,
            leader_election,
            cluster_name: self.cluster_name.clone(),
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
            robot,
            warnings: c.warnings,
        })
    }
}
