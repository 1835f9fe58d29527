//! Benchmark: a burst of kubelet-registered Nodes initialized by the cloud node controller
//! through the Hetzner provider, against the simulator with added latency on every API request
//! and a private kube-apiserver.
//!
//! Run with `cargo bench -p hcloud-provider --bench node_burst`. Settings can be changed with
//! `NODE_BURST_NODES` (default 200) and `NODE_BURST_LATENCY_MS` (default 20).
//!
//! Measures, per Node, the time from just before its create request to the first watch event
//! showing it initialized (uninitialized taint gone and providerID set), and reports the
//! distribution, the wall time of the whole burst, the cloud requests by endpoint (as the
//! simulator counted them), the provider's cache outcomes and the peak RSS of this process.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cloud_provider::{
    CloudProvider as _, Metrics, NodeCache, NodeController, NodeControllerConfig,
    NodeLifecycleController, NodeLifecycleControllerConfig,
};
use futures::{StreamExt as _, TryStreamExt as _};
use hcloud_api::{Client, ClientConfig, Token};
use hcloud_provider::{HcloudProvider, ProviderSettings};
use hcloud_sim::{Fault, SeedFile, ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, PostParams};
use kube::runtime::watcher;
use kube_harness::ControlPlane;
use serde_json::json;
use tokio::sync::{Mutex, mpsc};
use tokio_util::sync::CancellationToken;

const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const LOCATIONS: [&str; 3] = ["fsn1", "nbg1", "hel1"];
/// How many Node creations are in flight at once (kubelets registering together).
const CREATE_CONCURRENCY: usize = 20;

fn env_number(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn node_name(i: u64) -> String {
    format!("burst-{i:03}")
}

/// A Node as a kubelet with `--cloud-provider=external` registers it: tainted, Hostname
/// address, Ready=False (container runtime network not ready yet).
fn kubelet_node(name: &str) -> Node {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    serde_json::from_value(json!({
        "metadata": { "name": name },
        "spec": { "taints": [{ "key": UNINITIALIZED, "value": "true", "effect": "NoSchedule" }] },
        "status": {
            "addresses": [{ "type": "Hostname", "address": name }],
            "conditions": [{
                "type": "Ready", "status": "False", "reason": "KubeletNotReady",
                "lastHeartbeatTime": now, "lastTransitionTime": now,
            }],
        },
    }))
    .unwrap()
}

fn is_initialized(node: &Node) -> bool {
    let spec = node.spec.as_ref();
    let tainted = spec
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == UNINITIALIZED));
    let provider_id = spec
        .and_then(|s| s.provider_id.as_deref())
        .is_some_and(|id| !id.is_empty());
    !tainted && provider_id
}

/// Peak resident set size of this process (`VmHWM`), in KiB.
fn peak_rss_kib() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    // Nearest-rank percentile.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

fn ms(d: Duration) -> String {
    format!("{:.0} ms", d.as_secs_f64() * 1000.0)
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(run());
}

async fn run() {
    let nodes = env_number("NODE_BURST_NODES", 200);
    let latency = Duration::from_millis(env_number("NODE_BURST_LATENCY_MS", 20));

    // The cloud: one server per Node, every API request delayed.
    let sim = Simulator::start(SimConfig::default()).await.unwrap();
    let admin = sim.admin();
    let seed = SeedFile {
        servers: (0..nodes)
            .map(|i| {
                ServerSeed::new(node_name(i))
                    .location(LOCATIONS[i as usize % LOCATIONS.len()])
                    .server_type("cpx22")
            })
            .collect(),
        ..SeedFile::default()
    };
    admin.seed(&seed).await.unwrap();
    admin
        .inject_fault(Fault::new("*").latency(latency).count(u32::MAX))
        .await
        .unwrap();

    let plane = ControlPlane::start().await.unwrap();
    let client = plane.client().await.unwrap();

    // The provider and controllers as the binary runs them: default client (retries, request
    // budget, timeouts), default provider settings, default controller settings.
    let hcloud =
        Client::new(ClientConfig::new(Token::new(sim.token())).with_endpoint(sim.base_url()))
            .unwrap();
    let settings = ProviderSettings {
        zone_label_enabled: true,
        ..ProviderSettings::default()
    };
    let provider = HcloudProvider::new(hcloud, settings).await.unwrap();
    let instances = provider.instances().unwrap();
    let node_config = NodeControllerConfig::default();
    let lifecycle_config = NodeLifecycleControllerConfig::default();
    let shutdown = CancellationToken::new();
    let cache = NodeCache::spawn(client.clone(), shutdown.clone());
    let metrics = Metrics::new();
    tokio::spawn(
        NodeController::new(
            client.clone(),
            cache.clone(),
            instances.clone(),
            metrics.clone(),
            node_config.clone(),
        )
        .run(shutdown.clone()),
    );
    tokio::spawn(
        NodeLifecycleController::new(
            client.clone(),
            cache.clone(),
            instances,
            metrics,
            lifecycle_config.clone(),
        )
        .run(shutdown.clone()),
    );
    while !cache.is_ready() {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Observer: the first moment each Node is seen initialized.
    let api: Api<Node> = Api::all(client.clone());
    let (seen_tx, mut seen_rx) = mpsc::unbounded_channel::<(String, Instant)>();
    let (watch_ready_tx, watch_ready_rx) = tokio::sync::oneshot::channel::<()>();
    let observer_api = api.clone();
    let observer = tokio::spawn(async move {
        let mut stream = watcher(observer_api, watcher::Config::default()).boxed();
        let mut watch_ready = Some(watch_ready_tx);
        let mut done = std::collections::HashSet::new();
        while let Ok(Some(event)) = stream.try_next().await {
            let objects: Vec<Node> = match event {
                watcher::Event::Apply(node) | watcher::Event::InitApply(node) => vec![node],
                watcher::Event::InitDone => {
                    if let Some(tx) = watch_ready.take() {
                        let _ = tx.send(());
                    }
                    vec![]
                }
                watcher::Event::Init | watcher::Event::Delete(_) => vec![],
            };
            for node in objects {
                let name = node.metadata.name.clone().unwrap_or_default();
                if is_initialized(&node) && done.insert(name.clone()) {
                    let _ = seen_tx.send((name, Instant::now()));
                }
            }
        }
    });
    watch_ready_rx.await.unwrap();
    admin.reset_request_counts().await.unwrap();

    // The burst.
    let created_at: Arc<Mutex<HashMap<String, Instant>>> = Arc::default();
    let started = Instant::now();
    futures::stream::iter(0..nodes)
        .map(|i| {
            let api = api.clone();
            let created_at = created_at.clone();
            async move {
                let name = node_name(i);
                created_at.lock().await.insert(name.clone(), Instant::now());
                api.create(&PostParams::default(), &kubelet_node(&name))
                    .await
                    .unwrap();
            }
        })
        .buffer_unordered(CREATE_CONCURRENCY)
        .collect::<()>()
        .await;
    let all_created = started.elapsed();

    let mut initialized: HashMap<String, Instant> = HashMap::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while (initialized.len() as u64) < nodes {
        let (name, at) = tokio::time::timeout_at(deadline, seen_rx.recv())
            .await
            .expect("every Node initialized within 10 minutes")
            .unwrap();
        initialized.insert(name, at);
    }
    let wall = initialized.values().max().unwrap().duration_since(started);
    let counts = admin.request_counts().await.unwrap();
    let cache_metrics = provider.hcloud_instances().cache().metrics();
    let outcomes = || -> BTreeMap<&str, u64> {
        ["hit", "miss", "refresh", "confirm", "uncached"]
            .into_iter()
            .map(|r| (r, cache_metrics.value(r)))
            .filter(|(_, v)| *v > 0)
            .collect()
    };
    let cache_outcomes = outcomes();

    // Afterwards: the Nodes stay NotReady (worst case: every Node is existence-checked each
    // monitor period); four monitor periods plus a second of steady state, longer than the
    // cache's max age.
    admin.reset_request_counts().await.unwrap();
    let steady = lifecycle_config.node_monitor_period * 4 + Duration::from_secs(1);
    tokio::time::sleep(steady).await;
    let steady_counts = admin.request_counts().await.unwrap();
    let steady_outcomes: BTreeMap<&str, u64> = outcomes()
        .into_iter()
        .map(|(r, v)| (r, v - cache_outcomes.get(r).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect();
    shutdown.cancel();
    observer.abort();

    let created_at = created_at.lock().await;
    let mut latencies: Vec<Duration> = initialized
        .iter()
        .map(|(name, at)| at.duration_since(created_at[name]))
        .collect();
    latencies.sort();
    let total_requests: u64 = counts.values().sum();

    println!();
    println!("node_burst: {nodes} tainted Nodes, {nodes} matching servers");
    println!(
        "  cloud latency: +{} on every API request; servers in {}",
        ms(latency),
        LOCATIONS.join("/")
    );
    println!(
        "  node controller: {} worker(s), status update every {:?}; lifecycle: monitor every {:?}",
        node_config.workers,
        node_config.node_status_update_frequency,
        lifecycle_config.node_monitor_period
    );
    println!("  Nodes register Ready=False, {CREATE_CONCURRENCY} creates in flight");
    println!();
    println!("creation -> initialized (per Node, first watch event)");
    println!("  p50  {}", ms(percentile(&latencies, 50.0)));
    println!("  p90  {}", ms(percentile(&latencies, 90.0)));
    println!("  p99  {}", ms(percentile(&latencies, 99.0)));
    println!("  max  {}", ms(*latencies.last().unwrap()));
    println!("  min  {}", ms(latencies[0]));
    println!("all {nodes} created after   {}", ms(all_created));
    println!("all {nodes} initialized after {}", ms(wall));
    println!();
    println!("cloud API requests during the burst: {total_requests}");
    for (endpoint, count) in &counts {
        println!("  {count:>6}  {endpoint}");
    }
    println!("provider cache outcomes: {cache_outcomes:?}");
    println!();
    println!(
        "steady state, {:?} with all {nodes} Nodes NotReady: {} cloud API requests {:?}",
        steady,
        steady_counts.values().sum::<u64>(),
        steady_counts
    );
    println!("provider cache outcomes: {steady_outcomes:?}");
    println!();
    match peak_rss_kib() {
        Some(kib) => println!(
            "peak RSS of the bench process (controllers + simulator + observer): {:.1} MiB",
            kib as f64 / 1024.0
        ),
        None => println!("peak RSS: not available"),
    }
    drop(plane);
}
