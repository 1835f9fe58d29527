//! `hcloud-ccm-bench`: runs the `hcloud-ccm` binary against the test control plane
//! (kube-apiserver and etcd from `kube-harness`) and the Hetzner simulator, drives the API
//! budget scenarios one after another, and prints one table: scenario, cloud requests (by
//! endpoint, as the simulator counted them), writes, latencies and the CCM's peak RSS.
//!
//! `--scale` shrinks the scenarios (Nodes, Services, observation windows) for slow machines
//! and CI; `--only-bursts`, `--only-routes` and `--only-leader-start` run one part alone;
//! `--check` makes the exit status non-zero when a request count is over its bar;
//! `--write-results docs/benchmarks.md` writes the table and the figures derived from it into
//! the document's generated block and rewrites the marked figures of the README and the other
//! documents from it (see the library, [`hcloud_ccm_bench`]).

#![allow(clippy::print_stdout)] // the report is the output

mod shapes;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use clap::Parser;
use hcloud_ccm_bench::Row;
use hcloud_sim::{
    AdminClient, Fault, NetworkSeed, RateLimitConfig, RobotServerSeed, ServerSeed, SimConfig,
    Simulator,
};
use k8s_openapi::api::core::v1::{Node, Service};
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use kube_harness::ControlPlane;
use serde_json::json;

/// How long the cluster is left alone before a Node joins: longer than the load balancer
/// snapshot's 10 s and the route planner's 30 s, so the join pays for fresh reads.
const JOIN_AFTER_QUIET: Duration = Duration::from_secs(31);

/// A token of the real length that the simulator accepts.
const TOKEN: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
const SHUTDOWN_TAINT: &str = "node.cloudprovider.kubernetes.io/shutdown";
/// Nodes labelled `lb=yes` (the first ones and every joining one); the Services' node
/// selector picks them, so that every load balancer's targets fit an `lb11` (25) at any scale.
const LB_NODES: usize = 10;
/// Extra requests one joining Node may cost besides one `add_target` per load balancer
/// (initialisation, its route, the batched action polls).
const JOIN_OVERHEAD: u64 = 10;
/// The node controller's address refresh (`--node-status-update-frequency`, default 5 min,
/// which the bench runs): a pass over every Node (one listing of all servers) when the CCM
/// starts, then each pass this long after the previous one ended.
const ADDRESS_REFRESH: Duration = Duration::from_secs(300);
/// Dedicated servers whose Nodes are NotReady in the Robot scenario.
const DEDICATED: usize = 10;
/// The simulator's Robot account (its default credentials).
const ROBOT_USER: &str = "robot-user";
const ROBOT_PASSWORD: &str = "robot-password";
/// The Robot scenario's window at full scale: two of the periods in which 10 servers share the
/// CCM's budget of power-state reads (100 an hour: each server once per 6 min), so that the
/// hourly figure neither catches an extra round nor misses one.
const ROBOT_WINDOW: Duration = Duration::from_secs(720);

/// Which of the simulator's counted requests a scenario's window counts (see
/// [`Bench::fresh_start`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Counted {
    /// Network and action requests: the routes of Nodes that are in place when the CCM starts.
    Routes,
    /// Every request but the reads of servers (`GET /servers`, `GET /servers/{id}`): the
    /// scenario changes only Services, and the load balancer code never reads servers (a
    /// target is the server of a Node's providerID).
    Services,
    /// Every request: the scenario adds or changes Nodes or servers, or starts the CCM.
    /// `not_ready`: the Nodes the scenario itself made NotReady before its window opened.
    All { not_ready: usize },
    /// Robot requests (the scenario's counts are the Robot webservice's, each endpoint
    /// under the simulator's `/robot` prefix); no periodic work of the CCM reads Robot but the
    /// scenario's own.
    Robot,
}

impl Counted {
    /// Whether the window counts requests to `endpoint` (`GET /servers`).
    fn counts(self, endpoint: &str) -> bool {
        match self {
            Self::Routes => endpoint.contains("/networks") || endpoint.starts_with("GET /actions"),
            Self::Services => endpoint != "GET /servers" && !endpoint.starts_with("GET /servers/"),
            Self::All { .. } => true,
            Self::Robot => endpoint.contains(" /robot/"),
        }
    }
}

#[derive(Debug, Parser)]
#[command(
    name = "hcloud-ccm-bench",
    about = "Measure hcloud-ccm's Hetzner API budget on the test control plane and the simulator"
)]
struct Args {
    /// Multiply the scenario sizes (1000 Nodes, 100 Services, 20-Service burst, 200 new
    /// routes) and observation windows by this (at least 10 Nodes, 2 Services).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// The hcloud-ccm binary (default: next to this one).
    #[arg(long)]
    ccm: Option<PathBuf>,
    /// Latency the simulator adds to every request, in ms.
    #[arg(long, default_value_t = 20)]
    latency_ms: u64,
    /// How long the simulator's actions run, in ms.
    #[arg(long, default_value_t = 200)]
    action_ms: u64,
    /// Exit with status 1 when a request count is over its bar.
    #[arg(long)]
    check: bool,
    /// Append the CCM's log to this file (default: discarded).
    #[arg(long)]
    ccm_log: Option<PathBuf>,
    /// Run only the Node bursts without a network (200 × scale tainted Nodes, then
    /// 1000 × scale), e.g. to try Kubernetes client settings.
    #[arg(long, conflicts_with = "write_results")]
    only_bursts: bool,
    /// Run only the routes for new Nodes in a network (100 × scale), e.g. to time route
    /// changes.
    #[arg(long, conflicts_with_all = ["write_results", "only_bursts"])]
    only_routes: bool,
    /// Run only the leader start without a network (1000 × scale Nodes and 100 × scale
    /// Services put in place first, as the full run has them), e.g. to measure its peak RSS.
    #[arg(long, conflicts_with_all = ["write_results", "only_bursts", "only_routes"])]
    only_leader_start: bool,
    /// Run only the dedicated servers' scenario (10 NotReady dedicated Nodes, the Robot
    /// requests in a window of 720 s × scale), e.g. to check the power-state budget.
    #[arg(long, conflicts_with_all = ["write_results", "only_bursts", "only_routes", "only_leader_start"])]
    only_robot: bool,
    /// An extra argument for hcloud-ccm (repeatable), e.g. `--ccm-arg=--kube-api-qps=50`.
    #[arg(long)]
    ccm_arg: Vec<String>,
    /// After the run, write the table and the figures derived from it into this document's
    /// generated block (docs/benchmarks.md), and the figures into every marked figure of the
    /// documents beside it and of the README one directory up.
    #[arg(long, value_name = "DOC")]
    write_results: Option<PathBuf>,
    /// Run nothing: derive the figures again from the table already in this document's block
    /// and rewrite the block (after a change of the figures or the block's format).
    #[arg(long, value_name = "DOC")]
    refresh_results: Option<PathBuf>,
}

struct Bench {
    args: Args,
    plane: ControlPlane,
    sim: Simulator,
    admin: AdminClient,
    kube: kube::Client,
    network: i64,
    dir: tempfile::TempDir,
    ccm: Option<tokio::process::Child>,
    rows: Vec<Row>,
    servers: Vec<(String, i64)>,
    /// Private IP of each server in the network (the InternalIP of its Node).
    private_ips: Vec<String>,
    /// Audit events of the apiserver before the current scenario.
    audit_mark: std::cell::Cell<usize>,
    /// Whether the cluster runs in the network `k8s` (servers attached, `HCLOUD_NETWORK` and
    /// routes on); without, as large clusters on Hetzner run.
    in_network: bool,
    /// Checks of `--check` that failed besides the request bars, each saying what.
    failed_checks: Vec<String>,
    /// What the current scenario's window counts.
    counted: std::cell::Cell<Counted>,
    /// When the running CCM was started: its address refresh's first pass; the next comes no
    /// sooner than [`ADDRESS_REFRESH`] later.
    ccm_started: Option<Instant>,
    /// Whether the CCM is started with Robot on (the simulator's Robot account).
    robot: bool,
}

fn scaled(base: f64, scale: f64, min: usize) -> usize {
    ((base * scale).round() as usize).max(min)
}

fn ms(d: Duration) -> String {
    format!("{:.1} s", d.as_secs_f64())
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// The labels of a Node the Services select (`lb`) or not.
fn lb_labels(lb: bool) -> serde_json::Value {
    if lb {
        json!({ "lb": "yes" })
    } else {
        json!({})
    }
}

/// A Node as the CCM leaves it once initialised (providerID, the address `ip` of its type,
/// no taint).
fn node_json(
    name: &str,
    id: i64,
    (ip_type, ip): (&str, &str),
    pod_cidr: &str,
    lb: bool,
) -> Result<Node> {
    Ok(serde_json::from_value(json!({
        "metadata": { "name": name, "labels": lb_labels(lb) },
        "spec": { "providerID": format!("hcloud://{id}"), "podCIDR": pod_cidr, "podCIDRs": [pod_cidr] },
        "status": {
            "addresses": [
                { "type": ip_type, "address": ip },
                { "type": "Hostname", "address": name },
            ],
            "conditions": [ready_condition(false)],
        },
    }))?)
}

/// The Ready condition of a kubelet that reports (`true`) or stopped reporting.
fn ready_condition(ready: bool) -> serde_json::Value {
    if ready {
        kube_harness::ready_condition("True", "KubeletReady")
    } else {
        kube_harness::ready_condition("False", "KubeletNotReady")
    }
}

/// Whether a Node's kubelet reports it Ready.
fn is_ready(node: &Node) -> bool {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

fn service_json(name: &str, port_base: i32) -> Result<Service> {
    Ok(serde_json::from_value(json!({
        "metadata": {
            "name": name,
            "annotations": { "load-balancer.hetzner.cloud/node-selector": "lb=yes" },
        },
        "spec": {
            "type": "LoadBalancer",
            "ports": [
                { "name": "http", "port": 80, "nodePort": port_base, "protocol": "TCP" },
                { "name": "https", "port": 443, "nodePort": port_base + 1, "protocol": "TCP" },
            ],
        },
    }))?)
}

fn pod_cidr(i: usize) -> String {
    format!("10.{}.{}.0/24", 100 + i / 256, i % 256)
}

impl Bench {
    async fn start(args: Args) -> Result<Self> {
        let plane = ControlPlane::start()
            .await
            .context("starting the control plane")?;
        let kube = plane.client().await?;
        let sim = Simulator::start(
            SimConfig::default()
                .token(TOKEN)
                .action_delay(Duration::from_millis(args.action_ms)),
        )
        .await?;
        let admin = sim.admin();
        let network = admin
            .create_network(
                NetworkSeed::new("k8s", "10.0.0.0/8").subnet("10.0.0.0/16", "eu-central"),
            )
            .await?;
        if args.latency_ms > 0 {
            admin
                .inject_fault(
                    Fault::new("*")
                        .latency(Duration::from_millis(args.latency_ms))
                        .count(u32::MAX),
                )
                .await?;
        }
        Ok(Self {
            args,
            plane,
            sim,
            admin,
            kube,
            network,
            dir: tempfile::tempdir()?,
            ccm: None,
            rows: Vec::new(),
            servers: Vec::new(),
            private_ips: Vec::new(),
            audit_mark: std::cell::Cell::new(0),
            in_network: true,
            failed_checks: Vec::new(),
            counted: std::cell::Cell::new(Counted::All { not_ready: 0 }),
            ccm_started: None,
            robot: false,
        })
    }

    fn ccm_path(&self) -> Result<PathBuf> {
        if let Some(path) = &self.args.ccm {
            return Ok(path.clone());
        }
        let me = std::env::current_exe()?;
        Ok(me.with_file_name("hcloud-ccm"))
    }

    async fn start_ccm(&mut self) -> Result<()> {
        let kubeconfig = self.dir.path().join("kubeconfig");
        self.plane.write_kubeconfig(&kubeconfig)?;
        let mut command = tokio::process::Command::new(self.ccm_path()?);
        command.env_clear();
        if self.in_network {
            command.env("HCLOUD_NETWORK", "k8s");
        }
        if self.robot {
            command
                .env("ROBOT_ENABLED", "true")
                .env("ROBOT_USER", ROBOT_USER)
                .env("ROBOT_PASSWORD", ROBOT_PASSWORD)
                .env("ROBOT_ENDPOINT", self.sim.robot_url());
        }
        let child = command
            .env("HCLOUD_TOKEN", TOKEN)
            .env("HCLOUD_ENDPOINT", self.sim.base_url())
            .env("HCLOUD_METADATA_ENDPOINT", self.sim.metadata_url())
            .env("HCLOUD_METRICS_ENABLED", "false")
            .env("HCLOUD_LOAD_BALANCERS_LOCATION", "fsn1")
            .env("HCLOUD_LOAD_BALANCERS_TYPE", "lb11")
            .args([
                "--cloud-provider=hcloud",
                &format!("--kubeconfig={}", kubeconfig.display()),
                "--secure-port=0",
                "--leader-elect=false",
                "--cluster-cidr=10.0.0.0/8",
                // As the official manifests (and deploy/ccm.yaml) run it.
                "--feature-gates=CloudControllerManagerWatchBasedRoutesReconciliation=true",
            ])
            .args(&self.args.ccm_arg)
            .stdout(Stdio::null())
            .stderr(match &self.args.ccm_log {
                Some(path) => Stdio::from(
                    std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)?,
                ),
                None => Stdio::null(),
            })
            .kill_on_drop(true)
            .spawn()
            .context("starting hcloud-ccm (build it first: cargo build --release -p hcloud-ccm)")?;
        self.ccm = Some(child);
        self.ccm_started = Some(Instant::now());
        Ok(())
    }

    async fn stop_ccm(&mut self) -> Result<Option<u64>> {
        let rss = self.ccm_rss();
        if let Some(mut child) = self.ccm.take() {
            child.kill().await?;
        }
        Ok(rss)
    }

    /// Peak RSS (`VmHWM`) of the CCM process, in KiB.
    fn ccm_rss(&self) -> Option<u64> {
        self.ccm_status("VmHWM:")
    }

    /// A KiB figure of the CCM's `/proc/<pid>/status` (`VmRSS:`, `VmHWM:`).
    fn ccm_status(&self, field: &str) -> Option<u64> {
        let pid = self.ccm.as_ref()?.id()?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
        let line = status.lines().find(|l| l.starts_with(field))?;
        line.split_whitespace().nth(1)?.parse().ok()
    }

    /// A new scenario's window opens: counters at zero and, so that each scenario measures the
    /// CCM and not what the ones before spent, the simulator's API budget full again. The
    /// window closes when its row is pushed ([`Bench::push_bar`]).
    ///
    /// A bar counts only what its scenario causes. The simulator counts every request by
    /// endpoint, the CCM's periodic work too, which no scenario causes and which falls into a
    /// window wherever its timer says. In a cluster without a network that work is two kinds
    /// of server reads, nothing else:
    ///
    /// - the lifecycle controller's status check, two `GET /servers` every 15 s while any
    ///   Node is NotReady (a change it sees makes the next lookup list the servers again);
    /// - the address refresh, a listing of every server (`GET /servers`, one per 50 servers)
    ///   when the CCM starts and then no sooner than [`ADDRESS_REFRESH`] after the last pass.
    ///
    /// So `counted` says what the window counts, and the window excludes the rest exactly:
    ///
    /// - [`Counted::Routes`] and [`Counted::Services`] count only the kinds their scenario can
    ///   cause, and no periodic request is of those kinds: Services' reconciles never read
    ///   servers, the routes are network and action requests. The reads of servers left out
    ///   are still reported with the row.
    /// - [`Counted::All`] counts every request, for scenarios that may read servers
    ///   themselves; its window therefore holds none of that periodic work. It opens only
    ///   when no Node is NotReady but the `not_ready` the scenario made so itself (checked
    ///   here: a status check in the window is then the scenario's), and a bar on it holds
    ///   only when it closed sooner than [`ADDRESS_REFRESH`] after the CCM's start, before
    ///   the refresh's next pass could begin (checked when its row is pushed).
    ///
    /// Not done: subtracting an estimate of the periodic requests, or measuring again when a
    /// listing seemed to fall in (neither is exact), or only letting the Nodes before one
    /// scenario report Ready (it held until the scenarios moved: the Services then came
    /// after the NotReady Nodes of a burst, and two status-check requests made the small
    /// burst of Services 9 requests, bar 8).
    async fn fresh_start(&self, counted: Counted) -> Result<()> {
        if let Counted::All { not_ready } = counted {
            let nodes: Api<Node> = Api::all(self.kube.clone());
            let waiting: Vec<String> = nodes
                .list(&ListParams::default())
                .await?
                .items
                .into_iter()
                .filter(|n| !is_ready(n))
                .filter_map(|n| n.metadata.name)
                .collect();
            if waiting.len() > not_ready {
                bail!(
                    "{} Nodes NotReady when a window that counts every request opened (the scenario made {not_ready} so): the lifecycle controller's status checks of them (two GET /servers per 15 s) would count towards the scenario; their kubelets must report Ready first: {}",
                    waiting.len(),
                    waiting.join(", ")
                );
            }
        }
        self.counted.set(counted);
        self.audit_mark.set(self.plane.audit_events().len());
        self.admin
            .set_rate_limit(RateLimitConfig::default())
            .await?;
        self.admin.reset_request_counts().await?;
        Ok(())
    }

    async fn counts(&self) -> Result<BTreeMap<String, u64>> {
        Ok(self.admin.request_counts().await?)
    }

    /// Wait until no cloud request came for `quiet`, at most `limit`; the counts since `reset`.
    async fn until_idle(&self, quiet: Duration, limit: Duration) -> Result<BTreeMap<String, u64>> {
        let started = Instant::now();
        let mut last = self.counts().await?;
        let mut since = Instant::now();
        while started.elapsed() < limit {
            tokio::time::sleep(Duration::from_millis(250)).await;
            let now = self.counts().await?;
            if now != last {
                last = now;
                since = Instant::now();
            } else if since.elapsed() >= quiet {
                break;
            }
        }
        Ok(last)
    }

    async fn network_routes(&self) -> Result<Vec<String>> {
        let state = self.admin.state().await?;
        Ok(state["networks"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|n| n["name"] == "k8s")
            .flat_map(|n| n["routes"].as_array().cloned().unwrap_or_default())
            .filter_map(|r| r["destination"].as_str().map(str::to_owned))
            .collect())
    }

    async fn add_servers(&mut self, from: usize, count: usize) -> Result<()> {
        for i in from..from + count {
            let name = format!("node-{i}");
            let mut seed = ServerSeed::new(&name);
            if self.in_network {
                seed = seed.network(self.network);
            }
            let server = self.admin.create_server(seed).await?;
            let id = server["id"].as_i64().context("server id")?;
            if self.servers.is_empty() {
                // The CCM runs "on" the first server: the metadata service names its network.
                self.admin.set_metadata_server(Some(id)).await?;
            }
            let ip = match self.in_network {
                true => server["private_net"][0]["ip"].as_str(),
                false => server["public_net"]["ipv4"]["ip"].as_str(),
            };
            self.private_ips.push(ip.context("server IP")?.to_owned());
            self.servers.push((name, id));
        }
        Ok(())
    }

    /// Nodes for servers `from..from + count`; the first [`LB_NODES`] and a single joining
    /// Node (`count == 1`) carry the label the Services select.
    async fn add_nodes(&self, from: usize, count: usize) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.kube.clone());
        let from_join = if count == 1 { from } else { usize::MAX };
        // In the network a Node's address is its private IP; without, its public one.
        let ip_type = if self.in_network {
            "InternalIP"
        } else {
            "ExternalIP"
        };
        let jobs = (from..from + count).map(|i| {
            let nodes = nodes.clone();
            let (name, id) = self.servers[i].clone();
            let ip = self.private_ips[i].clone();
            let lb = i < LB_NODES || i == from_join;
            async move {
                nodes
                    .create(
                        &PostParams::default(),
                        &node_json(&name, id, (ip_type, &ip), &pod_cidr(i), lb)?,
                    )
                    .await?;
                anyhow::Ok(())
            }
        });
        for result in futures::future::join_all(jobs).await {
            result?;
        }
        Ok(())
    }

    /// Report the Nodes of servers `indices` Ready (kubelets running) or NotReady.
    async fn set_ready(&self, indices: impl IntoIterator<Item = usize>, ready: bool) -> Result<()> {
        let nodes: Api<Node> = Api::all(self.kube.clone());
        let patch = json!({ "status": { "conditions": [ready_condition(ready)] } });
        let names: Vec<String> = indices
            .into_iter()
            .filter_map(|i| self.servers.get(i).map(|(name, _)| name.clone()))
            .collect();
        let params = kube::api::PatchParams::default();
        // Strategic merge, as a kubelet's status update: conditions merge by type, so the
        // CCM's `NetworkUnavailable` stays.
        let patch = kube::api::Patch::Strategic(&patch);
        for chunk in names.chunks(50) {
            let jobs = chunk
                .iter()
                .map(|name| nodes.patch_status(name, &params, &patch));
            for result in futures::future::join_all(jobs).await {
                result?;
            }
        }
        Ok(())
    }

    /// One Service changes in a way that needs no cloud change (an annotation of its own):
    /// the requests of its reconcile.
    async fn noop_scenario(&mut self, namespace: &str) -> Result<()> {
        let services: Api<Service> = Api::namespaced(self.kube.clone(), namespace);
        // A lone reconcile: no cloud request for longer than the load balancer snapshot's
        // max age (10 s), so the previous scenario's lookups do not make this one a burst.
        self.until_idle(Duration::from_secs(11), Duration::from_secs(120))
            .await?;
        // A Service's reconcile reads no servers: the periodic address refresh (a listing of
        // every server) may come at the same time and is not counted (see `fresh_start`).
        self.fresh_start(Counted::Services).await?;
        let patch = json!({ "metadata": { "annotations": { "bench/touched": "1" } } });
        services
            .patch(
                "svc-0",
                &kube::api::PatchParams::default(),
                &kube::api::Patch::Merge(&patch),
            )
            .await?;
        let counts = self
            .until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        self.push(
            "no-op reconcile of one Service (an unrelated annotation changed)".to_owned(),
            counts,
            "requests until idle (3 s without one)".to_owned(),
            Some(1),
        );
        Ok(())
    }

    /// For a window that counts every request, closing now: fails the check when the address
    /// refresh's next pass may have come in it (the CCM started [`ADDRESS_REFRESH`] ago or
    /// longer), which only a scenario moved away from the CCM's start makes possible.
    fn refresh_excluded(&mut self, scenario: &str) {
        if let Some(started) = self.ccm_started
            && started.elapsed() >= ADDRESS_REFRESH
        {
            self.failed_checks.push(format!(
                "{scenario}: its window closed {} after the CCM started, when the periodic address refresh may have listed the servers in it; measure it sooner after a start",
                ms(started.elapsed())
            ));
        }
    }

    async fn wait_routes(&self, want: usize, limit: Duration) -> Result<Duration> {
        let took = poll(Instant::now(), limit, async || {
            Ok(self.network_routes().await?.len() >= want)
        })
        .await?;
        took.with_context(|| format!("{want} routes not in place within {limit:?}"))
    }

    fn push(
        &mut self,
        scenario: String,
        counts: BTreeMap<String, u64>,
        latency: String,
        bar: Option<u64>,
    ) {
        self.push_bar(scenario, counts, latency, bar, true);
    }

    /// The row of the scenario whose window is open (see [`Bench::fresh_start`]): of `counts`
    /// (the simulator's since the window opened), what the window counts; the reads of
    /// servers it leaves out are named after `latency`. A bar on a window that counts every
    /// request holds only if the address refresh could not come in it.
    fn push_bar(
        &mut self,
        scenario: String,
        counts: BTreeMap<String, u64>,
        mut latency: String,
        bar: Option<u64>,
        enforced: bool,
    ) {
        let counted = self.counted.get();
        let (counts, left_out): (BTreeMap<String, u64>, BTreeMap<String, u64>) = counts
            .into_iter()
            .filter(|(_, n)| *n > 0)
            .partition(|(k, _)| counted.counts(k));
        if counted == Counted::Services && !left_out.is_empty() {
            let reads: Vec<String> = left_out.iter().map(|(k, n)| format!("`{k}` {n}")).collect();
            let _ = write!(
                latency,
                "; not counted: {} (the CCM's periodic server reads)",
                reads.join(", ")
            );
        }
        if matches!(counted, Counted::All { .. }) && bar.is_some() {
            self.refresh_excluded(&scenario);
        }
        let rss = self.ccm_status("VmRSS:").zip(self.ccm_status("VmHWM:"));
        let kube_writes = self.ccm_kube_writes();
        let mut row = Row {
            kube_writes,
            scenario,
            counts,
            latency,
            bar: None,
            enforced,
            rss,
        };
        row.bar = bar.map(|b| (b, row.total() <= b));
        self.rows.push(row);
    }

    /// The CCM's writes to the Kubernetes API since the scenario started, from the apiserver's
    /// audit log: `client verb resource[/subresource]` (the client is the last word of the
    /// user agent, one per controller).
    fn ccm_kube_writes(&self) -> BTreeMap<String, u64> {
        let mut writes = BTreeMap::new();
        for event in self.plane.audit_events().iter().skip(self.audit_mark.get()) {
            let agent = event["userAgent"].as_str().unwrap_or_default();
            if !agent.starts_with("hcloud-ccm/") {
                continue;
            }
            let client = agent.rsplit(' ').next().unwrap_or_default();
            let object = &event["objectRef"];
            let mut resource = object["resource"].as_str().unwrap_or("?").to_owned();
            if let Some(sub) = object["subresource"].as_str() {
                resource = format!("{resource}/{sub}");
            }
            let verb = event["verb"].as_str().unwrap_or("?");
            *writes
                .entry(format!("{client} {verb} {resource}"))
                .or_default() += 1;
        }
        writes
    }

    /// Routes for N new Nodes (the CCM starts with the Nodes in place, no routes yet).
    async fn routes_scenario(&mut self, nodes: usize) -> Result<()> {
        self.add_servers(0, nodes).await?;
        self.add_nodes(0, nodes).await?;
        self.fresh_start(Counted::Routes).await?;
        self.start_ccm().await?;
        // One change of the network at a time: about 0.35 s per route at 200 ms actions.
        let limit = Duration::from_secs(300).max(Duration::from_millis(600) * nodes as u32);
        let started = Instant::now();
        let mut marks = Vec::new();
        for want in [20, 200].into_iter().filter(|w| *w < nodes) {
            self.wait_routes(want, limit.saturating_sub(started.elapsed()))
                .await?;
            marks.push(format!("{want} after {}", ms(started.elapsed())));
        }
        self.wait_routes(nodes, limit.saturating_sub(started.elapsed()))
            .await?;
        let took = started.elapsed();
        let counts = self.counts().await?;
        let route_requests: u64 = counts
            .iter()
            .filter(|(k, _)| Counted::Routes.counts(k))
            .map(|(_, n)| *n)
            .sum();
        let bar = (nodes as f64 * 2.2).ceil() as u64 + 2;
        self.push(
            format!("routes for {nodes} new Nodes (network + action requests)"),
            counts,
            format!(
                "{}all in place after {} ({route_requests} requests)",
                marks.iter().map(|m| format!("{m}, ")).collect::<String>(),
                ms(took)
            ),
            Some(bar),
        );
        // The kubelets report Ready once their Nodes can take pods, as in a cluster: while a
        // Node is NotReady, the lifecycle controller checks the servers (two requests per
        // status period), which would count towards whichever scenario comes next.
        self.set_ready(0..nodes, true).await?;
        // Let the start settle (initial listings, node sync) before the next scenario.
        self.until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        Ok(())
    }

    /// A burst of `count` LoadBalancer Services with two ports: time to ingress.
    async fn services_scenario(
        &mut self,
        namespace: &str,
        count: usize,
        first_port: usize,
        bar_per_lb: Option<u64>,
    ) -> Result<()> {
        kube_harness::ensure_namespace(&self.kube, namespace).await?;
        let services: Api<Service> = Api::namespaced(self.kube.clone(), namespace);
        self.fresh_start(Counted::Services).await?;
        let started = Instant::now();
        let mut created_at = BTreeMap::new();
        for i in 0..count {
            let name = format!("svc-{i}");
            let port = 30000 + i32::try_from(first_port + i * 2).unwrap_or(0);
            services
                .create(&PostParams::default(), &service_json(&name, port)?)
                .await?;
            created_at.insert(name, started.elapsed());
        }
        let mut ingress: BTreeMap<String, Duration> = BTreeMap::new();
        let limit = Duration::from_secs(300);
        while ingress.len() < count && started.elapsed() < limit {
            for svc in services.list(&ListParams::default()).await? {
                let name = svc.metadata.name.clone().unwrap_or_default();
                let has = svc
                    .status
                    .and_then(|s| s.load_balancer)
                    .and_then(|l| l.ingress)
                    .is_some_and(|i| !i.is_empty());
                if has && !ingress.contains_key(&name) {
                    let at = started.elapsed() - created_at.get(&name).copied().unwrap_or_default();
                    ingress.insert(name, at);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let counts = self
            .until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        let mut times: Vec<Duration> = ingress.values().copied().collect();
        times.sort();
        let p99 = percentile(&times, 99.0);
        self.push(
            format!("{count} new LoadBalancer Services at once (2 ports)"),
            counts,
            format!(
                "ingress {}/{count}: p50 {}, p99 {}{}",
                times.len(),
                ms(percentile(&times, 50.0)),
                ms(p99),
                if bar_per_lb.is_some() {
                    // The time bar of the burst; reported (times depend on the machine).
                    if p99 <= Duration::from_secs(5) {
                        " (<= 5 s ok)"
                    } else {
                        " (<= 5 s over)"
                    }
                } else {
                    ""
                }
            ),
            bar_per_lb.map(|b| b * count as u64),
        );
        Ok(())
    }

    async fn delete_services_scenario(&mut self, namespace: &str, count: usize) -> Result<()> {
        let services: Api<Service> = Api::namespaced(self.kube.clone(), namespace);
        self.fresh_start(Counted::Services).await?;
        let before = self.admin.state().await?["load_balancers"]
            .as_array()
            .map_or(0, Vec::len);
        let started = Instant::now();
        for i in 0..count {
            services
                .delete(&format!("svc-{i}"), &DeleteParams::default())
                .await?;
        }
        let took = poll(started, Duration::from_secs(300), async || {
            let left = self.admin.state().await?["load_balancers"]
                .as_array()
                .map_or(0, Vec::len);
            Ok(left + count <= before)
        })
        .await?;
        let counts = self
            .until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        self.push(
            format!("deleting {count} LoadBalancer Services"),
            counts,
            took.map_or_else(
                || "not all gone within 300 s".to_owned(),
                |t| format!("all load balancers gone after {}", ms(t)),
            ),
            None,
        );
        Ok(())
    }

    /// Nothing changes: requests over `window`, extrapolated to an hour.
    async fn steady_scenario(&mut self, window: Duration) -> Result<()> {
        // A healthy cluster: every kubelet reports Ready.
        self.set_ready(0..self.servers.len(), true).await?;
        self.until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        self.fresh_start(Counted::All { not_ready: 0 }).await?;
        tokio::time::sleep(window).await;
        let counts = self.counts().await?;
        let total: u64 = counts.values().sum();
        let per_hour = total as f64 * 3600.0 / window.as_secs_f64();
        self.push(
            format!("steady state, {} observed, all Nodes Ready", ms(window)),
            counts,
            format!(
                "{per_hour:.0} requests/h extrapolated (bar 250/h: {})",
                if per_hour <= 250.0 { "ok" } else { "over" }
            ),
            None,
        );
        Ok(())
    }

    /// Restart the CCM with everything in place; requests until idle.
    async fn leader_start_scenario(&mut self, nodes: usize, services: usize) -> Result<()> {
        let rss = self.stop_ccm().await?;
        if let Some(rss) = rss {
            self.push(
                format!(
                    "peak RSS of hcloud-ccm before the restart ({nodes} Nodes, {services} Services)"
                ),
                BTreeMap::new(),
                format!("{:.1} MiB", rss as f64 / 1024.0),
                None,
            );
        }
        self.fresh_start(Counted::All { not_ready: 0 }).await?;
        self.start_ccm().await?;
        let counts = self
            .until_idle(Duration::from_secs(5), Duration::from_secs(120))
            .await?;
        self.push(
            format!("leader start, {nodes} Nodes and {services} unchanged Services in place"),
            counts,
            "requests until idle (5 s without one)".to_owned(),
            Some(30),
        );
        Ok(())
    }

    /// One more Node joins (a server, and its Node as the CCM leaves it initialised), in a
    /// quiet cluster: after [`JOIN_AFTER_QUIET`], so the CCM's snapshots are stale, as they
    /// usually are when a Node comes. Until its route is in place (in the network) or every
    /// load balancer targets its server (without).
    async fn node_join_scenario(&mut self, index: usize, services: usize) -> Result<()> {
        tokio::time::sleep(JOIN_AFTER_QUIET).await;
        self.add_servers(index, 1).await?;
        self.fresh_start(Counted::All { not_ready: 0 }).await?;
        self.add_nodes(index, 1).await?;
        let took = if self.in_network {
            let took = self
                .wait_routes(index + 1, Duration::from_secs(120))
                .await?;
            format!("route in place after {}", ms(took))
        } else {
            let took = self.wait_targets(index, Duration::from_secs(120)).await?;
            format!("a target of every load balancer after {}", ms(took))
        };
        let counts = self
            .until_idle(Duration::from_secs(5), Duration::from_secs(120))
            .await?;
        self.push(
            format!("one Node joins, selected by {services} load balancers"),
            counts,
            took,
            Some(services as u64 + JOIN_OVERHEAD),
        );
        // Its kubelet reports Ready, as every other's: a NotReady Node left behind would make
        // the lifecycle controller's status checks part of every later scenario.
        self.set_ready([index], true).await?;
        Ok(())
    }

    async fn node(&self, name: &str) -> Result<Option<Node>> {
        let nodes: Api<Node> = Api::all(self.kube.clone());
        Ok(nodes.get_opt(name).await?)
    }

    /// Power off one server (shutdown taint), delete another (Node gone, route gone).
    async fn lifecycle_scenario(&mut self) -> Result<()> {
        let (off_name, off_id) = self.servers[0].clone();
        let (gone_name, gone_id) = self.servers[1].clone();
        // Their kubelets stop reporting first (the lifecycle controller checks NotReady Nodes).
        self.set_ready([0, 1], false).await?;
        self.until_idle(Duration::from_secs(3), Duration::from_secs(60))
            .await?;
        self.fresh_start(Counted::All { not_ready: 2 }).await?;
        let started = Instant::now();
        self.admin.set_server_status(off_id, "off").await?;
        let tainted = poll(started, Duration::from_secs(120), async || {
            let node = self.node(&off_name).await?;
            Ok(node
                .and_then(|n| n.spec)
                .and_then(|s| s.taints)
                .is_some_and(|t| t.iter().any(|t| t.key == SHUTDOWN_TAINT)))
        })
        .await?;
        let counts = self.counts().await?;
        self.push(
            "a server powers off".to_owned(),
            counts,
            tainted.map_or_else(
                || "no shutdown taint within 120 s".to_owned(),
                |t| format!("shutdown taint after {}", ms(t)),
            ),
            None,
        );

        let routes_before = self.network_routes().await?.len();
        self.fresh_start(Counted::All { not_ready: 2 }).await?;
        let started = Instant::now();
        self.admin.delete_server(gone_id).await?;
        let limit = Duration::from_secs(120);
        let gone = poll(started, limit, async || {
            Ok(self.node(&gone_name).await?.is_none())
        })
        .await?;
        let node_gone = started.elapsed();
        let route_gone = if self.in_network && gone.is_some() {
            poll(started, limit, async || {
                Ok(self.network_routes().await?.len() < routes_before)
            })
            .await?
            .map(|t| t - node_gone)
        } else {
            None
        };
        let counts = self.counts().await?;
        self.push(
            "a server is deleted".to_owned(),
            counts,
            format!(
                "Node gone after {}{}",
                gone.map_or_else(|| "never (120 s)".to_owned(), ms),
                match (self.in_network, route_gone) {
                    (false, _) => String::new(),
                    (true, Some(t)) => format!("; its route gone {} after the Node", ms(t)),
                    (true, None) => "; its route never gone".to_owned(),
                }
            ),
            None,
        );
        Ok(())
    }

    /// Dedicated servers whose Nodes are NotReady: the CCM restarted with Robot on, then
    /// [`DEDICATED`] initialised dedicated Nodes (`hrobot://N`) whose kubelets stopped
    /// reporting, and a window of `window` counting the Robot requests (the lifecycle
    /// controller's shutdown checks: the power state `GET /reset/{id}` and the server list).
    /// The bar: one round of power-state reads, the CCM's budget of 100 reads an hour over the
    /// window, and one server list per its 5-minute cache and one more.
    async fn robot_scenario(&mut self, window: Duration) -> Result<()> {
        self.stop_ccm().await?;
        self.robot = true;
        self.start_ccm().await?;
        let nodes: Api<Node> = Api::all(self.kube.clone());
        let mut names = Vec::new();
        for i in 0..DEDICATED {
            let name = format!("dedicated-{i}");
            let number = self
                .admin
                .add_robot_server(RobotServerSeed::new(&name))
                .await?;
            let node: Node = serde_json::from_value(json!({
                "metadata": {
                    "name": name,
                    "labels": { "instance.hetzner.cloud/provided-by": "robot" },
                },
                "spec": { "providerID": format!("hrobot://{number}") },
                "status": { "conditions": [ready_condition(false)] },
            }))?;
            nodes.create(&PostParams::default(), &node).await?;
            names.push(name);
        }
        self.fresh_start(Counted::Robot).await?;
        let before = self.admin.robot_request_counts().await?;
        let started = Instant::now();
        tokio::time::sleep(window).await;
        let after = self.admin.robot_request_counts().await?;
        let observed = started.elapsed();
        let counts: BTreeMap<String, u64> = after
            .into_iter()
            .map(|(endpoint, n)| {
                let n = n - before.get(&endpoint).copied().unwrap_or(0);
                let (method, path) = endpoint.split_once(' ').unwrap_or(("", &endpoint));
                (format!("{method} /robot{path}"), n)
            })
            .collect();
        let total: u64 = counts.values().sum();
        let resets = counts.get("GET /robot/reset/{id}").copied().unwrap_or(0);
        let budget = (100.0 * observed.as_secs_f64() / 3600.0).floor() as u64;
        let lists = observed.as_secs() / 300 + 1;
        let bar = DEDICATED as u64 + budget + lists;
        let latency = if window >= ROBOT_WINDOW {
            format!(
                "{:.0} Robot requests/h extrapolated, {:.0} of them power-state reads (Robot allows 200/h to that endpoint)",
                total as f64 * 3600.0 / observed.as_secs_f64(),
                resets as f64 * 3600.0 / observed.as_secs_f64(),
            )
        } else {
            format!(
                "{resets} power-state reads in {} (shorter than the budget's period: no hourly figure)",
                ms(observed)
            )
        };
        self.push_bar(
            format!(
                "{DEDICATED} dedicated Nodes NotReady, {} observed (Robot requests)",
                ms(observed)
            ),
            counts,
            latency,
            Some(bar),
            true,
        );
        for name in names {
            nodes.delete(&name, &DeleteParams::default()).await?;
        }
        Ok(())
    }

    /// Stop the CCM, print the table, write it with the `run` line into the results block of
    /// `doc` when given, and, with `check`, fail when a bar or check failed.
    async fn finish(&mut self, check: bool, results: Option<(&Path, &str)>) -> Result<()> {
        self.stop_ccm().await?;
        self.print();
        if let Some((doc, run)) = results {
            write_results(doc, run, &hcloud_ccm_bench::table(&self.rows))?;
        }
        let over: Vec<&str> = self
            .rows
            .iter()
            .filter(|r| r.enforced && r.bar.is_some_and(|(_, ok)| !ok))
            .map(|r| r.scenario.as_str())
            .chain(self.failed_checks.iter().map(String::as_str))
            .collect();
        if check && !over.is_empty() {
            bail!("over the bar: {}", over.join("; "));
        }
        Ok(())
    }

    fn print(&self) {
        print!("{}", hcloud_ccm_bench::table(&self.rows));
    }
}

/// Rewrite the generated block of `doc` with `run` and `table`, then every marked figure of
/// the documents beside it and of the README.
fn write_results(doc: &Path, run: &str, table: &str) -> Result<()> {
    let text =
        std::fs::read_to_string(doc).with_context(|| format!("reading {}", doc.display()))?;
    let updated = hcloud_ccm_bench::replace_block(&text, &hcloud_ccm_bench::block(run, table))
        .with_context(|| doc.display().to_string())?;
    std::fs::write(doc, updated).with_context(|| format!("writing {}", doc.display()))?;
    println!("results written to {}", doc.display());
    for changed in hcloud_ccm_bench::prose::write_figures(doc)? {
        println!("marked figures rewritten in {}", changed.display());
    }
    Ok(())
}

/// Asks `done` every 200 ms until it says yes or `limit` has passed since `started`: when
/// (after `started`) it said yes, `None` when it never did.
async fn poll(
    started: Instant,
    limit: Duration,
    mut done: impl AsyncFnMut() -> Result<bool>,
) -> Result<Option<Duration>> {
    while started.elapsed() < limit {
        if done().await? {
            return Ok(Some(started.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    Ok(None)
}

#[tokio::main]
async fn main() -> Result<()> {
    let args = Args::parse();
    if let Some(doc) = &args.refresh_results {
        let text =
            std::fs::read_to_string(doc).with_context(|| format!("reading {}", doc.display()))?;
        let (run, table) = hcloud_ccm_bench::find_block(&text)
            .and_then(hcloud_ccm_bench::read_block)
            .with_context(|| doc.display().to_string())?;
        return write_results(doc, &run, &table);
    }
    let scale = args.scale;
    let nodes = scaled(1000.0, scale, 10);
    // A network takes 100 servers and 100 routes: the cluster with routes is that large.
    let cap = scaled(100.0, scale, 3);
    let burst_nodes = scaled(200.0, scale, 10);
    let stuck_window = Duration::from_secs_f64((600.0 * scale).max(40.0));
    let services = scaled(100.0, scale, 2);
    let burst = scaled(20.0, scale, 2);
    // At full scale exactly one period of the address refresh of all Nodes (5 min): a window
    // of one period holds one refresh wherever it starts, so the hourly figure is not skewed
    // by catching two (or none).
    let steady = Duration::from_secs_f64((300.0 * scale).max(20.0));
    let robot_window = ROBOT_WINDOW.mul_f64(scale).max(Duration::from_secs(30));
    let check = args.check;
    let only_bursts = args.only_bursts;
    let only_routes = args.only_routes;
    let only_leader_start = args.only_leader_start;
    let only_robot = args.only_robot;
    let results_doc = args.write_results.clone();
    let run = format!(
        "Run: `hcloud-ccm-bench --scale {scale}` ({} build): {cap} Nodes in a network, then {nodes} Nodes without, {services} Services (a burst of {burst}), {} ms added to every API request, {} ms actions.",
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        },
        args.latency_ms,
        args.action_ms
    );
    println!(
        "hcloud-ccm-bench: scale {scale}, {cap} Nodes in a network, then {nodes} Nodes without, {services} Services (burst {burst}), {} ms per request, {} ms actions\n",
        args.latency_ms, args.action_ms
    );
    let mut bench = Bench::start(args).await?;
    if only_routes {
        bench.cap_network(cap).await?;
        bench.routes_scenario(cap).await?;
        return bench.finish(check, None).await;
    }
    if only_robot {
        bench.leave_network().await?;
        bench.robot_scenario(robot_window).await?;
        return bench.finish(check, None).await;
    }
    if only_leader_start {
        bench.cluster_without_network(nodes, services).await?;
        bench.leader_start_scenario(nodes, services).await?;
        return bench.finish(check, None).await;
    }
    if !only_bursts {
        // In a network, filled to its caps (Hetzner's at full scale), and the Node beyond.
        bench.cap_network(cap).await?;
        bench.routes_scenario(cap).await?;
        bench.beyond_cap_scenario(cap, stuck_window).await?;
    }
    // Without a network, as larger clusters run: Nodes join in bursts.
    bench.leave_network().await?;
    bench.burst_scenario("burst", burst_nodes, true).await?;
    bench.forget_burst(burst_nodes).await?;
    bench.burst_scenario("node", nodes, false).await?;
    if only_bursts {
        return bench.finish(check, None).await;
    }
    bench.services_scenario("burst", burst, 0, Some(4)).await?;
    if services > burst {
        bench
            .services_scenario("bulk", services - burst, 2 * burst, None)
            .await?;
    }
    bench.steady_scenario(steady).await?;
    // After the steady state (every Node Ready), so that no Node's lifecycle check, which
    // its window does not count anyway (see `Bench::fresh_start`), makes the 11 s of quiet
    // before it longer.
    bench.noop_scenario("burst").await?;
    bench.leader_start_scenario(nodes, services).await?;
    bench.node_join_scenario(nodes, services).await?;
    bench.lifecycle_scenario().await?;
    bench.delete_services_scenario("burst", burst).await?;
    bench.robot_scenario(robot_window).await?;
    bench
        .finish(check, results_doc.as_deref().map(|doc| (doc, run.as_str())))
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_window_counts_the_kinds_its_scenario_can_cause() {
        // The CCM's periodic work without a network: reads of servers only.
        let periodic = ["GET /servers", "GET /servers/{id}"];
        for endpoint in periodic {
            assert!(!Counted::Services.counts(endpoint), "{endpoint}");
            assert!(!Counted::Routes.counts(endpoint), "{endpoint}");
            assert!(Counted::All { not_ready: 0 }.counts(endpoint), "{endpoint}");
        }
        for endpoint in [
            "GET /load_balancers",
            "POST /load_balancers",
            "POST /load_balancers/{id}/actions/add_target",
            "GET /actions",
            "GET /certificates",
            "POST /servers/{id}/actions/poweroff",
        ] {
            assert!(Counted::Services.counts(endpoint), "{endpoint}");
        }
        for endpoint in [
            "GET /networks/{id}",
            "POST /networks/{id}/actions/add_route",
        ] {
            assert!(Counted::Routes.counts(endpoint), "{endpoint}");
        }
        assert!(!Counted::Routes.counts("GET /load_balancers"));
    }
}
