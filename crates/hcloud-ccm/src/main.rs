//! hcloud-ccm: the Kubernetes cloud-controller-manager for Hetzner Cloud.
//!
//! Wiring only: parse and validate the configuration (exit 2 listing every problem), set up
//! logging, the crypto provider, the Kubernetes client, the endpoints and leader election; start
//! the controllers once leading; exit 1 when leadership is lost, 0 after a graceful shutdown
//! (controllers stopped first, then the lease released). A configuration the cloud refuses at
//! start (a rejected token, no API at `HCLOUD_ENDPOINT`, an unknown network, a metadata service
//! that refuses) exits 2 too ([`cloud::CONFIGURATION_REFUSED_EXIT_STATUS`]), naming the setting.
//! `hcloud-ccm plan` runs the plan of [`hcloud_ccm::plan`] with the same configuration instead.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use cloud_provider::{EventRecorder, NodeCache};
use hcloud_ccm::config::Args;
use hcloud_ccm::controllers::{ControllerContext, start_controllers};
use hcloud_ccm::http::{self, Endpoints, MetricsRegistry};
use hcloud_ccm::leader::{self, LeaderElectionConfig, LeaderElector, LeaderHandle, LeaderState};
use hcloud_ccm::{cloud, kube_client, logging, orphans, plan, signals};
use tokio_util::sync::CancellationToken;

/// How long stopping controllers may take before the lease is released anyway.
const CONTROLLER_STOP_GRACE: Duration = Duration::from_secs(20);

fn main() -> ExitCode {
    let mut argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    // `hcloud-ccm plan [-o json] [--detailed-exitcode] <the usual flags>`: what the controllers would change, nothing written.
    let plan_options = if plan::requested(&argv) {
        argv.remove(1);
        match plan::PlanOptions::extract(argv) {
            Ok((options, rest)) => {
                argv = rest;
                Some(options)
            }
            Err(e) => {
                eprintln!("{e}");
                return ExitCode::from(plan::exit_status::INVALID_CONFIGURATION);
            }
        }
    } else {
        None
    };
    // `hcloud-ccm delete-orphans <the usual flags>`: deletes the named cluster's orphaned load balancers.
    let delete_orphans = plan_options.is_none() && orphans::requested(&argv);
    if delete_orphans {
        argv.remove(1);
    }
    // Invalid configuration exits 2, or plan's own status for it (its 2 means "changes").
    let refused = |code: u8| {
        ExitCode::from(if plan_options.is_some() {
            plan::refused_status(code)
        } else {
            code
        })
    };
    let args = match Args::try_parse_command_line(argv) {
        Ok(args) => args,
        Err(e) => return refused(e.report()),
    };
    let config = match args.validate() {
        Ok(config) => config,
        Err(e) => {
            eprintln!("{e}");
            return refused(2);
        }
    };
    if let Err(e) = logging::init(&config.logging) {
        eprintln!("{e}");
        return refused(2);
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the async runtime");
            return ExitCode::FAILURE;
        }
    };
    let outcome = match plan_options {
        Some(options) => runtime.block_on(plan::run(&config, options)),
        None if delete_orphans => runtime.block_on(orphans::run(&config)),
        None => runtime.block_on(run(config)),
    };
    match outcome {
        Ok(code) => code,
        Err(e) => {
            tracing::error!(error = format!("{e:#}"), "fatal");
            ExitCode::FAILURE
        }
    }
}

async fn run(config: hcloud_ccm::config::Config) -> anyhow::Result<ExitCode> {
    // kube's TLS and the secure port both use ring; install it once for anything that asks for
    // the process default (an error only means it was installed already).
    let _ = rustls::crypto::ring::default_provider().install_default();
    for warning in &config.warnings {
        tracing::warn!("{warning}");
    }
    let shutdown = signals::shutdown_on_signals().context("installing signal handlers")?;
    hcloud_ccm::memory::spawn_trim(shutdown.clone());
    let endpoints = Endpoints::new(MetricsRegistry::new());
    // One client per user of the API, each with its own `--kube-api-qps` bucket (client-go's
    // `ClientOrDie(name)`), all counted in the rest_client_* series.
    let clients = kube_client::KubeClients::new(&config.kube)
        .await?
        .with_metrics(&endpoints.metrics);
    endpoints
        .metrics
        .with(hcloud_ccm::process_metrics::register);
    // Before leader election, on every replica: what the cloud refuses for good (a rejected
    // token, no API at the endpoint, an unknown network, a refusing metadata service) ends the
    // start here with its exit status; what may pass by itself (no answer, a 5xx, a 429) is
    // retried meanwhile, with /readyz red and /healthz green: the process is alive and waiting,
    // and a liveness probe restarting it would only start the wait again. Red before it is
    // served: a probe must never see a start as ready before the API was checked.
    let api_readiness = endpoints.readiness.add_flag(
        "hcloudApi",
        false,
        "the Hetzner Cloud API is not usable yet (see the log)",
    );
    // Served from the start, so that probes see why a start takes long.
    let mut servers = Vec::new();
    if let Some(address) = &config.metrics_address {
        servers.push(http::serve_plain(address, &endpoints, shutdown.clone()).await?);
    }
    if let Some(secure) = &config.secure_serving {
        let client = clients.client("auth-delegator")?;
        servers.push(http::serve_secure(secure, &endpoints, client, shutdown.clone()).await?);
    }
    let cloud = match cloud::connect_with_retries(&config, &endpoints.metrics, &shutdown).await {
        Ok(Some(cloud)) => cloud,
        Ok(None) => return Ok(ExitCode::SUCCESS),
        Err(err) => {
            let status = cloud::CONFIGURATION_REFUSED_EXIT_STATUS;
            tracing::error!(
                exit_status = status,
                "{}; exiting: waiting will not change this answer",
                cloud_provider::events::error_chain(&err)
            );
            return Ok(ExitCode::from(status));
        }
    };
    // Credentials from files are read again when they change or the API refuses them, on
    // every replica (a standby's clients are in use too: its caches read the API).
    let reloads = hcloud_ccm::credentials::ReloadMetrics::default();
    endpoints
        .metrics
        .with(|registry| reloads.register(registry));
    hcloud_ccm::credentials::watch(
        &config,
        &cloud,
        clients.client("credentials")?,
        &reloads,
        &shutdown,
    );
    // The shared Node cache warms up on every replica, so a standby can take over at once.
    let nodes = NodeCache::spawn(clients.client("shared-informers")?, shutdown.clone());
    let controller_metrics = cloud_provider::Metrics::new();
    let route_metrics = cloud_provider::RouteMetrics::new();
    let service_metrics = cloud_provider::ServiceMetrics::default();
    endpoints.metrics.with(|registry| {
        controller_metrics.register(registry);
        route_metrics.register(registry);
        service_metrics.register(registry);
    });
    let cache = nodes.clone();
    endpoints.readiness.add("nodeCache", move || {
        if cache.is_ready() {
            Ok(())
        } else {
            Err("Node cache not synced yet".into())
        }
    });
    // The elector gets its own stop token: on shutdown the controllers stop first, then the
    // lease is released.
    let leader = if config.leader_election.enabled {
        let le = LeaderElectionConfig::from_settings(
            &config.leader_election,
            leader::default_identity(),
        );
        // As upstream, the election's Events come from the manager's own recorder (and client).
        let recorder = EventRecorder::new(
            clients.client(leader::EVENT_COMPONENT)?,
            leader::EVENT_COMPONENT,
        );
        LeaderElector::new(clients.client("leader-election")?, le)
            .with_metrics(&endpoints.metrics)
            .with_recorder(recorder)
            .spawn(&CancellationToken::new())
    } else {
        LeaderHandle::always_leading()
    };
    endpoints
        .health
        .add("leaderElection", leader.health_check());
    endpoints
        .readiness
        .add_watch("leaderElection", leader.subscribe(), |state| {
            if state.is_known() {
                Ok(())
            } else {
                Err("leader election state not known yet".into())
            }
        });
    // Green only now that the checks of what comes next are in place.
    api_readiness.send_replace(true);

    let ctx = ControllerContext {
        clients,
        config: config.clone(),
        endpoints: endpoints.clone(),
        stop: shutdown.child_token(),
        provider: cloud.provider.clone(),
        nodes,
        metrics: controller_metrics,
        route_metrics,
        service_metrics,
    };
    // Whether the lease is still ours to release when leaving: every path after winning it
    // releases it, except a lost leadership (then it is not ours any more).
    let (code, release) = tokio::select! {
        () = shutdown.cancelled() => (ExitCode::SUCCESS, true),
        acquired = leader.acquired() => match acquired {
            Ok(()) => lead(ctx, &leader, &shutdown).await,
            Err(state) => {
                tracing::error!(?state, "leader election ended before leadership was won");
                (ExitCode::FAILURE, false)
            }
        },
    };
    if release {
        leader.stop().await;
    } else {
        leader.abort();
    }
    shutdown.cancel();
    for server in servers {
        let _ = tokio::time::timeout(Duration::from_secs(5), server.task).await;
    }
    Ok(code)
}

/// Runs the controllers while this replica leads. Returns the exit code and whether the lease
/// must be released (every path but a lost leadership).
async fn lead(
    ctx: ControllerContext,
    leader: &LeaderHandle,
    shutdown: &CancellationToken,
) -> (ExitCode, bool) {
    let stop = ctx.stop.clone();
    let mut controllers = match start_controllers(ctx).await {
        Ok(controllers) => controllers,
        Err(e) => {
            tracing::error!(error = %e, "cannot start the controllers; releasing the lease and exiting");
            stop.cancel();
            return (ExitCode::FAILURE, true);
        }
    };
    let (code, release) = tokio::select! {
        () = shutdown.cancelled() => (ExitCode::SUCCESS, true),
        state = leader.lost() => {
            tracing::error!(?state, "leadership lost; exiting");
            if state == LeaderState::Stopped { (ExitCode::SUCCESS, true) } else { (ExitCode::FAILURE, false) }
        }
        (controller, result) = controllers.first_exit() => {
            if shutdown.is_cancelled() {
                // Controllers end when the shutdown cancels their (child) stop token.
                (ExitCode::SUCCESS, true)
            } else {
                tracing::error!(%controller, ?result, "a controller stopped unexpectedly; releasing the lease and exiting");
                (ExitCode::FAILURE, true)
            }
        }
    };
    stop.cancel();
    controllers.shutdown(CONTROLLER_STOP_GRACE).await;
    (code, release)
}
