//! One schedule, start to end: a fresh simulator and fault proxy, the set-up, the CCM
//! replicas, the timed steps under the continuous checks, then the faults stop and the
//! convergence checks run until they all hold (or the limit passes); then the evidence (events,
//! `/metrics`, logs) is collected and searched for secrets, and the cluster is cleaned for the
//! next schedule.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hcloud_sim::{NetworkSeed, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Event, Node, Service};
use kube::api::{Api, ListParams};
use kube_harness::ControlPlane;

use crate::ccm::{CcmConfig, Ccms};
use crate::cluster::{self, CCM_ACCOUNT, Cluster, NAMESPACE};
use crate::eventlog::EventLog;
use crate::invariants::{CONVERGENCE, NO_SECRETS, convergence_problems};
use crate::proxy::FaultProxy;
use crate::schedule::{Action, Schedule};
use crate::secrets;
use crate::watch::{Violation, Watchers};

/// How the schedules run.
#[derive(Debug, Clone)]
pub struct Options {
    /// The `hcloud-ccm` binary.
    pub ccm: PathBuf,
    /// Where each schedule's directory goes.
    pub out: PathBuf,
    /// Keep the directories of passing schedules too.
    pub keep: bool,
    /// How long convergence may take after the faults stop.
    pub converge_within: Duration,
}

/// What one schedule did and found.
#[derive(Debug, Default)]
pub struct Outcome {
    /// The seed.
    pub seed: u64,
    /// Actions of the schedule (changes, faults, kills).
    pub actions: usize,
    /// Proxy faults applied to requests, by kind.
    pub faults: BTreeMap<&'static str, u64>,
    /// Requests whose actions the simulator made fail.
    pub cloud_faults: u64,
    /// Requests through the proxy.
    pub requests: u64,
    /// SIGKILLs by the schedule.
    pub kills: u64,
    /// CCM exits nobody asked for, by reason.
    pub exits: BTreeMap<String, u64>,
    /// Continuous checks made.
    pub continuous_checks: u64,
    /// Convergence snapshots checked.
    pub convergence_checks: u64,
    /// Bytes searched for secrets.
    pub scanned_bytes: u64,
    /// When everything held, after the faults stopped.
    pub converged_after: Option<Duration>,
    /// Broken invariants.
    pub violations: Vec<Violation>,
    /// Actions the runner could not carry out (or skipped), with why.
    pub runner_errors: Vec<String>,
    /// The event log.
    pub log: Vec<String>,
    /// The schedule's directory, when kept.
    pub dir: Option<PathBuf>,
    /// Wall time of the whole schedule.
    pub took: Duration,
}

impl Outcome {
    /// Whether every invariant held.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Runs `schedule` on the shared control plane.
pub async fn run(
    plane: &ControlPlane,
    kube: &kube::Client,
    schedule: &Schedule,
    options: &Options,
) -> Outcome {
    let started = Instant::now();
    let dir = options.out.join(format!("seed-{}", schedule.seed));
    let log = EventLog::new(&format!("seed {}", schedule.seed));
    for line in schedule.to_string().lines() {
        log.log(line);
    }
    let mut outcome = Outcome {
        seed: schedule.seed,
        actions: schedule.action_count(),
        ..Outcome::default()
    };
    let mut ccms = None;
    let result = async {
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        body(
            plane,
            kube,
            schedule,
            options,
            &dir,
            &log,
            &mut outcome,
            &mut ccms,
        )
        .await
    }
    .await;
    if let Err(e) = result {
        let detail = format!("the runner failed: {e:#}");
        log.log(&detail);
        outcome.violations.push(Violation {
            invariant: "the schedule runs to its end",
            detail,
        });
    }
    if let Some(ccms) = ccms.as_mut()
        && let Err(e) = ccms.kill_all().await
    {
        log.log(format_args!("stopping the CCMs: {e:#}"));
    }
    // Searched last, so that it covers everything, the runner's own errors included.
    search_secrets(&dir, &log, &mut outcome);
    if let Err(e) = cluster::clean(kube).await {
        let detail = format!("cleaning the cluster failed: {e:#}");
        log.log(&detail);
        outcome.violations.push(Violation {
            invariant: "the schedule runs to its end",
            detail,
        });
    }
    outcome.took = started.elapsed();
    log.log(format_args!(
        "end: {} violation(s), {:.1} s",
        outcome.violations.len(),
        outcome.took.as_secs_f64()
    ));
    let _ = log.write_to(&dir.join("events.log"));
    outcome.log = log.lines();
    if outcome.passed() && !options.keep {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        outcome.dir = Some(dir);
    }
    outcome
}

#[allow(clippy::too_many_arguments)]
async fn body(
    plane: &ControlPlane,
    kube: &kube::Client,
    schedule: &Schedule,
    options: &Options,
    dir: &Path,
    log: &EventLog,
    outcome: &mut Outcome,
    ccms_slot: &mut Option<Ccms>,
) -> anyhow::Result<()> {
    let sim = Simulator::start(
        SimConfig::default()
            .token(secrets::API_TOKEN)
            .action_delay(Duration::from_millis(100)),
    )
    .await?;
    let admin = sim.admin();
    let network = admin
        .create_network(NetworkSeed::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central"))
        .await?;
    // The server the CCM runs on: the metadata service answers for it (attached-network check).
    let host = admin
        .create_server(ServerSeed::new("ccm-host").network(network))
        .await?;
    admin.set_metadata_server(host["id"].as_i64()).await?;
    let proxy = FaultProxy::start(&format!("http://{}", sim.addr()), log.clone()).await?;

    let mut cluster = Cluster::new(kube.clone(), admin.clone(), network, log.clone());
    for (name, labels) in &schedule.initial_nodes {
        cluster.add_node(name, labels).await?;
    }
    for (name, annotations) in &schedule.initial_services {
        cluster.add_service(name, annotations).await?;
    }
    if let Some(rule) = &schedule.startup_fault {
        proxy.add(rule.clone());
    }

    let token = plane
        .service_account_token("kube-system", CCM_ACCOUNT)
        .await?;
    let kubeconfig = dir.join("ccm.kubeconfig");
    std::fs::write(&kubeconfig, plane.service_account_kubeconfig_yaml(&token))?;
    let config = CcmConfig {
        binary: options.ccm.clone(),
        kubeconfig,
        endpoint: proxy.base_url(),
        metadata_endpoint: sim.metadata_url(),
        verbosity: schedule.verbosity,
        hcloud_debug: schedule.hcloud_debug,
        dir: dir.to_path_buf(),
    };
    let mut watchers = Watchers::start(
        kube.clone(),
        admin.clone(),
        cluster.runner_deleted(),
        log.clone(),
    );
    let ccms = ccms_slot.insert(Ccms::new(config, schedule.replicas, log.clone()));
    ccms.start_all()?;

    log.log("chaos begins");
    for (number, step) in schedule.steps.iter().enumerate() {
        wait(ccms, step.delay).await?;
        for action in &step.actions {
            log.log(format_args!("step {}: {action}", number + 1));
            if let Err(e) = apply(action, &mut cluster, ccms, &proxy, &admin).await {
                let why = format!("step {}: {action}: not done: {e:#}", number + 1);
                log.log(&why);
                outcome.runner_errors.push(why);
            }
        }
    }

    let cloud_faults_left = remaining_cloud_faults(&sim).await;
    proxy.clear();
    admin.clear_faults().await?;
    outcome.cloud_faults = installed_cloud_faults(schedule).saturating_sub(cloud_faults_left);
    log.log("faults stop; waiting for convergence");
    let stopped = Instant::now();
    let mut last_problems = Vec::new();
    loop {
        ccms.supervise()?;
        if ccms.all_running() {
            let snapshot = cluster.snapshot().await?;
            outcome.convergence_checks += 1;
            let problems = convergence_problems(&snapshot);
            if problems.is_empty() {
                outcome.converged_after = Some(stopped.elapsed());
                log.log(format_args!(
                    "converged {:.1} s after the faults stopped",
                    stopped.elapsed().as_secs_f64()
                ));
                break;
            }
            if problems != last_problems {
                log.log(format_args!("not converged yet: {}", problems.join("; ")));
            }
            last_problems = problems;
        }
        if stopped.elapsed() > options.converge_within {
            let detail = if last_problems.is_empty() {
                "a CCM replica was not running".to_owned()
            } else {
                last_problems.join("; ")
            };
            log.log(format_args!("VIOLATION of \"{CONVERGENCE}\": {detail}"));
            outcome.violations.push(Violation {
                invariant: CONVERGENCE,
                detail,
            });
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    watchers.stop();
    outcome.violations.splice(0..0, watchers.violations());
    outcome.continuous_checks = watchers.checks();
    outcome.faults = proxy.applied();
    outcome.requests = proxy.requests();
    outcome.kills = ccms.kills;
    outcome.exits = ccms.exits.clone();
    collect_evidence(kube, ccms, dir, log).await;
    Ok(())
}

/// Sleeps `delay`, looking after the CCM replicas every 100 ms.
async fn wait(ccms: &mut Ccms, delay: Duration) -> anyhow::Result<()> {
    let until = Instant::now() + delay;
    loop {
        ccms.supervise()?;
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(());
        }
        tokio::time::sleep(left.min(Duration::from_millis(100))).await;
    }
}

async fn apply(
    action: &Action,
    cluster: &mut Cluster,
    ccms: &mut Ccms,
    proxy: &FaultProxy,
    admin: &hcloud_sim::AdminClient,
) -> anyhow::Result<()> {
    match action {
        Action::AddNode { name, labels } => cluster.add_node(name, labels).await,
        Action::DeleteServer { name } => cluster.delete_server(name).await,
        Action::PowerOff { name } => cluster.power(name, false).await,
        Action::PowerOn { name } => cluster.power(name, true).await,
        Action::KubeletStops { name } => cluster.kubelet(name, false).await,
        Action::KubeletStarts { name } => cluster.kubelet(name, true).await,
        Action::DeleteNode { name } => cluster.delete_node(name).await,
        Action::Reregister { name } => cluster.register(name).await,
        Action::LabelNode { name, key, value } => {
            cluster.label_node(name, key, value.as_deref()).await
        }
        Action::AddService { name, annotations } => cluster.add_service(name, annotations).await,
        Action::DeleteService { name } => cluster.delete_service(name).await,
        Action::Annotate { name, key, value } => {
            cluster.annotate(name, key, value.as_deref()).await
        }
        Action::KillCcm { replica } => ccms.kill(*replica).await,
        Action::StartCcm { replica } => ccms.start(*replica),
        Action::ProxyFault(rule) => {
            proxy.add(rule.clone());
            Ok(())
        }
        Action::CloudFault(fault) => Ok(admin.inject_fault(fault.clone()).await?),
        Action::ClearProxyFaults => {
            proxy.clear();
            Ok(())
        }
    }
}

fn installed_cloud_faults(schedule: &Schedule) -> u64 {
    schedule
        .steps
        .iter()
        .flat_map(|s| &s.actions)
        .filter_map(|a| match a {
            Action::CloudFault(f) => Some(u64::from(f.count)),
            _ => None,
        })
        .sum()
}

/// The uses left of the simulator's fault rules.
async fn remaining_cloud_faults(sim: &Simulator) -> u64 {
    let Ok(answer) = reqwest::get(format!("{}/faults", sim.admin_url())).await else {
        return 0;
    };
    let Ok(rules) = answer.json::<serde_json::Value>().await else {
        return 0;
    };
    rules
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| r["count"].as_u64())
        .sum()
}

/// Saves the cluster's events, Nodes and Services and each running replica's `/metrics` in
/// the schedule's directory (next to the CCM logs), for the secret search and for reading.
async fn collect_evidence(kube: &kube::Client, ccms: &Ccms, dir: &Path, log: &EventLog) {
    let events: Api<Event> = Api::all(kube.clone());
    let nodes: Api<Node> = Api::all(kube.clone());
    let services: Api<Service> = Api::namespaced(kube.clone(), NAMESPACE);
    let lp = ListParams::default();
    let dumps = [
        (
            "events.json",
            events
                .list(&lp)
                .await
                .map(|l| serde_json::to_string_pretty(&l.items)),
        ),
        (
            "nodes.json",
            nodes
                .list(&lp)
                .await
                .map(|l| serde_json::to_string_pretty(&l.items)),
        ),
        (
            "services.json",
            services
                .list(&lp)
                .await
                .map(|l| serde_json::to_string_pretty(&l.items)),
        ),
    ];
    for (file, dump) in dumps {
        match dump {
            Ok(Ok(text)) => {
                if let Err(e) = std::fs::write(dir.join(file), text) {
                    log.log(format_args!("writing {file}: {e}"));
                }
            }
            Ok(Err(e)) => log.log(format_args!("encoding {file}: {e}")),
            Err(e) => log.log(format_args!("reading {file}: {e}")),
        }
    }
    for (replica, port) in ccms.metrics_ports() {
        let url = format!("http://127.0.0.1:{port}/metrics");
        let text = async {
            reqwest::Client::builder()
                .timeout(Duration::from_secs(3))
                .build()?
                .get(&url)
                .send()
                .await?
                .error_for_status()?
                .text()
                .await
        }
        .await;
        match text {
            Ok(text) => {
                let file = format!("metrics-{replica}.txt");
                if let Err(e) = std::fs::write(dir.join(&file), text) {
                    log.log(format_args!("writing {file}: {e}"));
                }
            }
            Err(e) => log.log(format_args!("reading /metrics of replica {replica}: {e}")),
        }
    }
}

/// Searches the schedule's directory (CCM logs, events, Nodes, Services, metrics) and the
/// event log (the runner's own errors included) for the secrets.
fn search_secrets(dir: &Path, log: &EventLog, outcome: &mut Outcome) {
    let mut hits = secrets::scan_text(&log.lines().join("\n"), "the event log");
    match secrets::scan_dir(dir) {
        Ok((found, bytes)) => {
            hits.extend(found);
            outcome.scanned_bytes = bytes;
        }
        Err(e) => {
            let detail = format!("cannot search {}: {e}", dir.display());
            log.log(&detail);
            outcome.violations.push(Violation {
                invariant: NO_SECRETS,
                detail,
            });
        }
    }
    log.log(format_args!(
        "searched {} bytes of logs, events, metrics and errors for the API token and the Robot password: {} hit(s)",
        outcome.scanned_bytes,
        hits.len()
    ));
    for hit in hits {
        let detail = format!("{} in {} line {}", hit.secret, hit.source, hit.line);
        log.log(format_args!("VIOLATION of \"{NO_SECRETS}\": {detail}"));
        outcome.violations.push(Violation {
            invariant: NO_SECRETS,
            detail,
        });
    }
}
