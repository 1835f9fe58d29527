//! Shared pieces of the end-to-end controller tests: a scope of the test binary's shared
//! control plane plus a simulator of its own, the real Hetzner provider, the node and
//! node-lifecycle controllers wired as the binary wires them (but watching only the test's
//! Nodes), kubelet-like Nodes and bounded waits.

#![allow(dead_code)]

pub use kube_harness::{eventually, has_taint, taints};
use std::collections::BTreeMap;
use std::net::Ipv6Addr;
use std::sync::Arc;
use std::time::Duration;

use cloud_provider::provider::Result as ProviderResult;
use cloud_provider::runtime::workqueue::Backoff;
use cloud_provider::{
    CloudProvider as _, InstanceMetadata, Instances, Metrics, NodeCache, NodeController,
    NodeControllerConfig, NodeLifecycleController, NodeLifecycleControllerConfig, WatchScope,
};
use hcloud_api::{Client, ClientConfig, RetryConfig, Token};
use hcloud_provider::{CacheConfig, HcloudProvider, ProviderSettings};
use hcloud_sim::{ServerSeed, SimConfig, Simulator};
use k8s_openapi::api::core::v1::{Event, Node, NodeAddress, Taint};
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use kube::core::Selector;
use kube_harness::{ControlPlane, unique_name};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

pub const UNINITIALIZED: &str = "node.cloudprovider.kubernetes.io/uninitialized";
pub const SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";
pub const PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";
/// The label on every Node a test creates, valued with the test's id.
pub const SCOPE_LABEL: &str = "controllers.test/scope";

/// Upper bound of every wait for the controllers to act.
pub const WAIT: Duration = Duration::from_secs(20);
/// `--node-monitor-period` of the tests.
pub const MONITOR_PERIOD: Duration = Duration::from_millis(200);
/// `--node-status-update-frequency` of the tests.
pub const STATUS_UPDATE_FREQUENCY: Duration = Duration::from_secs(1);

/// How the controllers and the provider are set up for one test.
#[derive(Clone, Debug)]
pub struct Setup {
    pub settings: ProviderSettings,
    pub node: NodeControllerConfig,
    pub lifecycle: NodeLifecycleControllerConfig,
    /// Timeout of one cloud API request.
    pub request_timeout: Duration,
}

impl Default for Setup {
    fn default() -> Self {
        Self {
            settings: ProviderSettings {
                zone_label_enabled: true,
                cache: CacheConfig {
                    miss_ttl: Duration::from_secs(1),
                    ..CacheConfig::default()
                },
                ..ProviderSettings::default()
            },
            node: NodeControllerConfig {
                node_status_update_frequency: STATUS_UPDATE_FREQUENCY,
                // client-go's limiter, capped so that retries stay within the test's waits.
                backoff: Backoff {
                    base: Duration::from_millis(5),
                    max: Duration::from_secs(1),
                },
                ..NodeControllerConfig::default()
            },
            lifecycle: NodeLifecycleControllerConfig {
                node_monitor_period: MONITOR_PERIOD,
                ..NodeLifecycleControllerConfig::default()
            },
            request_timeout: Duration::from_secs(2),
        }
    }
}

impl Setup {
    /// Set the server cache's max age.
    pub fn max_age(mut self, max_age: Duration) -> Self {
        self.settings.cache.max_age = max_age;
        self.settings.cache.status_max_age = max_age;
        self
    }
}

/// Which provider call was made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Exists,
    Shutdown,
    Metadata,
}

/// One observed provider call and the gist of its answer.
#[derive(Clone, Debug)]
pub struct Observed {
    pub call: Call,
    pub node: String,
    /// `Ok(true)`/`Ok(false)` for exists and shutdown, `Ok(true)` for metadata.
    pub answer: Result<bool, String>,
}

/// The real provider's instances, with every call recorded: lets a test prove that the
/// controllers really asked the cloud (and what they heard) without reading provider internals.
pub struct ObservedInstances {
    inner: Arc<dyn Instances>,
    calls: Mutex<Vec<Observed>>,
}

impl std::fmt::Debug for ObservedInstances {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ObservedInstances")
            .field("calls", &self.calls)
            .finish_non_exhaustive()
    }
}

impl ObservedInstances {
    fn record<T>(
        &self,
        call: Call,
        node: &Node,
        answer: &ProviderResult<T>,
        ok: impl Fn(&T) -> bool,
    ) {
        let answer = match answer {
            Ok(value) => Ok(ok(value)),
            Err(err) => Err(err.to_string()),
        };
        self.calls.lock().push(Observed {
            call,
            node: node.metadata.name.clone().unwrap_or_default(),
            answer,
        });
    }

    /// Calls of `call` about Node `node`, oldest first.
    pub fn calls(&self, call: Call, node: &str) -> Vec<Observed> {
        self.calls
            .lock()
            .iter()
            .filter(|o| o.call == call && o.node == node)
            .cloned()
            .collect()
    }
}

#[async_trait::async_trait]
impl Instances for ObservedInstances {
    async fn instance_exists(&self, node: &Node) -> ProviderResult<bool> {
        let answer = self.inner.instance_exists(node).await;
        self.record(Call::Exists, node, &answer, |v| *v);
        answer
    }

    async fn instance_shutdown(&self, node: &Node) -> ProviderResult<bool> {
        let answer = self.inner.instance_shutdown(node).await;
        self.record(Call::Shutdown, node, &answer, |v| *v);
        answer
    }

    async fn instance_metadata(&self, node: &Node) -> ProviderResult<Option<InstanceMetadata>> {
        let answer = self.inner.instance_metadata(node).await;
        self.record(Call::Metadata, node, &answer, Option::is_some);
        answer
    }

    fn expect_lookups(&self, nodes: usize) {
        self.inner.expect_lookups(nodes);
    }
}

/// What [`Env::start_controllers`] returns.
pub struct Running {
    pub provider: HcloudProvider,
    pub observed: Arc<ObservedInstances>,
    /// The controllers' metrics (reconcile counts show that a controller went on working).
    pub metrics: Metrics,
}

/// One test's scope of the shared control plane, a simulator and (once started) the
/// controllers, which see only the test's Nodes.
pub struct Env {
    pub sim: Simulator,
    pub client: kube::Client,
    /// The test's id: the value of its Nodes' [`SCOPE_LABEL`] and the suffix of their names
    /// (and of its servers' names, which the Nodes are named after).
    pub id: String,
    scope: WatchScope,
    shutdown: CancellationToken,
    tasks: JoinSet<()>,
}

impl Env {
    pub async fn start() -> Env {
        init_logging();
        let sim = Simulator::start(SimConfig::default()).await.unwrap();
        let plane = ControlPlane::shared().unwrap();
        let client = plane.client().await.unwrap();
        let id = unique_name("ctl");
        let scope = WatchScope::all()
            .with_labels(Selector::from_iter([(SCOPE_LABEL.to_owned(), id.clone())]));
        Env {
            sim,
            client,
            id,
            scope,
            shutdown: CancellationToken::new(),
            tasks: JoinSet::new(),
        }
    }

    /// `prefix` made unique to this test: the name of one of its servers and Nodes.
    pub fn name(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.id)
    }

    /// An API client for the simulator.
    pub fn hcloud_client(&self, setup: &Setup) -> Client {
        let mut config =
            ClientConfig::new(Token::new(self.sim.token())).with_endpoint(self.sim.base_url());
        config.retry = RetryConfig {
            max_tries: 2,
            base: Duration::from_millis(10),
            cap: Duration::from_millis(20),
            jitter: false,
        };
        config.request_timeout = setup.request_timeout;
        config.connect_timeout = Duration::from_secs(2);
        Client::new(config).unwrap()
    }

    /// Build the Hetzner provider and run the node cache and both controllers, as the binary
    /// does once it holds the lease (but on the test's Nodes only).
    pub async fn start_controllers(&mut self, setup: Setup) -> Running {
        self.start_controllers_with_robot(setup, None).await
    }

    /// [`Env::start_controllers`] with Robot dedicated servers asked through `robot`.
    pub async fn start_controllers_with_robot(
        &mut self,
        setup: Setup,
        robot: Option<Arc<dyn hcloud_provider::RobotApi>>,
    ) -> Running {
        let provider =
            HcloudProvider::with_robot(self.hcloud_client(&setup), setup.settings.clone(), robot)
                .await
                .unwrap();
        let observed = Arc::new(ObservedInstances {
            inner: provider.instances().unwrap(),
            calls: Mutex::default(),
        });
        let instances: Arc<dyn Instances> = observed.clone();
        let token = self.shutdown.child_token();
        let cache = NodeCache::spawn_scoped(self.client.clone(), token.clone(), &self.scope);
        let metrics = Metrics::new();
        let node = NodeController::new(
            self.client.clone(),
            cache.clone(),
            instances.clone(),
            metrics.clone(),
            setup.node.clone(),
        );
        let lifecycle = NodeLifecycleController::new(
            self.client.clone(),
            cache,
            instances,
            metrics.clone(),
            setup.lifecycle.clone(),
        );
        self.tasks.spawn(node.run(token.clone()));
        self.tasks.spawn(lifecycle.run(token));
        Running {
            provider,
            observed,
            metrics,
        }
    }

    /// Stop the controllers and wait until they have.
    pub async fn stop_controllers(&mut self) {
        self.shutdown.cancel();
        while self.tasks.join_next().await.is_some() {}
        self.shutdown = CancellationToken::new();
    }

    pub fn nodes(&self) -> Api<Node> {
        Api::all(self.client.clone())
    }

    pub async fn node(&self, name: &str) -> Option<Node> {
        self.nodes().get_opt(name).await.unwrap()
    }

    /// Create a server in the simulator; returns it as `GET /servers/{id}` shows it.
    pub async fn server(&self, seed: ServerSeed) -> Server {
        Server(self.sim.admin().create_server(seed).await.unwrap())
    }

    /// Set the Node's Ready condition through the status subresource, as the kubelet does.
    pub async fn set_ready(&self, name: &str, status: &str) {
        self.nodes()
            .patch_status(
                name,
                &PatchParams::default(),
                &Patch::Merge(json!({ "status": { "conditions": ready_conditions(status) } })),
            )
            .await
            .unwrap();
    }

    /// Events about Node `name` (core/v1, namespace `default`).
    pub async fn events(&self, name: &str) -> Vec<Event> {
        events_about(&self.client, "default", name).await
    }

    pub async fn events_with_reason(&self, name: &str, reason: &str) -> Vec<Event> {
        events_with_reason(&self.client, "default", name, reason).await
    }

    /// Events are written by a background task, after the change they announce may already
    /// be visible: wait until at least one with `reason` is there.
    pub async fn wait_events(&self, name: &str, reason: &str) -> Vec<Event> {
        eventually(&format!("{reason} event on {name}"), WAIT, || async {
            let events = self.events_with_reason(name, reason).await;
            (!events.is_empty()).then_some(events)
        })
        .await
    }

    /// Wait until Node `name` has lost the uninitialized taint and has a providerID.
    pub async fn initialized(&self, name: &str) -> Node {
        eventually(&format!("node {name} initialized"), WAIT, || async {
            self.node(name).await.filter(is_initialized)
        })
        .await
    }

    /// Wait until Node `name` is gone.
    pub async fn deleted(&self, name: &str) {
        eventually(&format!("node {name} deleted"), WAIT, || async {
            self.node(name).await.is_none().then_some(())
        })
        .await;
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        self.shutdown.cancel();
        self.tasks.abort_all();
    }
}

/// Events (core/v1) in `namespace` about the object `name`.
pub async fn events_about(client: &kube::Client, namespace: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    api.list(&params).await.unwrap().items
}

/// [`events_about`] with `reason`.
pub async fn events_with_reason(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    reason: &str,
) -> Vec<Event> {
    events_about(client, namespace, name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// A simulator server as the API renders it.
#[derive(Clone, Debug)]
pub struct Server(pub Value);

impl Server {
    pub fn id(&self) -> i64 {
        self.0["id"].as_i64().unwrap()
    }

    pub fn provider_id(&self) -> String {
        format!("hcloud://{}", self.id())
    }

    pub fn name(&self) -> &str {
        self.0["name"].as_str().unwrap()
    }

    pub fn ipv4(&self) -> String {
        self.0["public_net"]["ipv4"]["ip"]
            .as_str()
            .unwrap()
            .to_owned()
    }

    /// The first address of the server's public /64 (`<net>::1`).
    pub fn ipv6(&self) -> String {
        let net = self.0["public_net"]["ipv6"]["ip"].as_str().unwrap();
        let (prefix, len) = net.split_once('/').unwrap();
        assert_eq!(len, "64", "{net}");
        let base: Ipv6Addr = prefix.parse().unwrap();
        Ipv6Addr::from(u128::from(base) | 1).to_string()
    }

    /// The server's IP in network `network`.
    pub fn private_ip(&self, network: i64) -> String {
        let private = self.0["private_net"].as_array().unwrap();
        let entry = private
            .iter()
            .find(|p| p["network"].as_i64() == Some(network))
            .unwrap_or_else(|| panic!("server not in network {network}: {}", self.0));
        entry["ip"].as_str().unwrap().to_owned()
    }
}

/// A Node as a kubelet started with `--cloud-provider=external` registers it: the
/// uninitialized taint and a Hostname address (status is part of the kubelet's create).
#[derive(Clone, Debug)]
pub struct KubeletNode {
    name: String,
    provider_id: Option<String>,
    annotations: BTreeMap<String, String>,
    taints: Vec<Taint>,
    ready: Option<&'static str>,
}

impl KubeletNode {
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            provider_id: None,
            annotations: BTreeMap::new(),
            taints: vec![Taint {
                key: UNINITIALIZED.to_owned(),
                value: Some("true".to_owned()),
                effect: "NoSchedule".to_owned(),
                time_added: None,
            }],
            ready: None,
        }
    }

    /// `--provider-id`.
    pub fn provider_id(mut self, id: &str) -> Self {
        self.provider_id = Some(id.to_owned());
        self
    }

    /// `--node-ip`.
    pub fn node_ip(mut self, ip: &str) -> Self {
        self.annotations
            .insert(PROVIDED_NODE_IP.to_owned(), ip.to_owned());
        self
    }

    /// `--register-with-taints`.
    pub fn taint(mut self, key: &str, value: &str, effect: &str) -> Self {
        self.taints.push(Taint {
            key: key.to_owned(),
            value: Some(value.to_owned()),
            effect: effect.to_owned(),
            time_added: None,
        });
        self
    }

    /// Registered already initialized (an existing Node).
    pub fn untainted(mut self) -> Self {
        self.taints.clear();
        self
    }

    /// The Ready condition at registration (`True`, `False`, `Unknown`); none by default.
    pub fn ready(mut self, status: &'static str) -> Self {
        self.ready = Some(status);
        self
    }

    pub fn to_node(&self) -> Node {
        let mut status = json!({ "addresses": [{ "type": "Hostname", "address": self.name }] });
        if let Some(ready) = self.ready {
            status["conditions"] = ready_conditions(ready);
        }
        serde_json::from_value(json!({
            "metadata": { "name": self.name, "annotations": self.annotations },
            "spec": { "providerID": self.provider_id, "taints": self.taints },
            "status": status,
        }))
        .unwrap()
    }

    /// Register the Node in `env`'s scope (with its [`SCOPE_LABEL`]).
    pub async fn create(&self, env: &Env) -> Node {
        let mut node = self.to_node();
        node.metadata
            .labels
            .get_or_insert_default()
            .insert(SCOPE_LABEL.to_owned(), env.id.clone());
        let created = env
            .nodes()
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
        let kept = created
            .status
            .as_ref()
            .and_then(|s| s.addresses.as_ref())
            .is_some_and(|a| !a.is_empty());
        assert!(kept, "the apiserver keeps a Node's status on create");
        created
    }
}

/// Logs of the controllers, provider and client when `RUST_LOG` is set (shown for failing
/// tests only).
pub fn init_logging() {
    if std::env::var_os("RUST_LOG").is_some() {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
            .with_test_writer()
            .try_init();
    }
}

pub fn ready_conditions(status: &str) -> Value {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    json!([{
        "type": "Ready",
        "status": status,
        "reason": "KubeletStatus",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }])
}

pub fn provider_id(node: &Node) -> Option<&str> {
    node.spec.as_ref()?.provider_id.as_deref()
}

pub fn is_initialized(node: &Node) -> bool {
    !has_taint(node, UNINITIALIZED) && provider_id(node).is_some_and(|id| !id.is_empty())
}

pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

pub fn addresses(node: &Node) -> Vec<(String, String)> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|NodeAddress { type_, address }| (type_, address))
        .collect()
}

/// `[(type, address)]` from string pairs.
pub fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
    list.iter()
        .map(|(t, a)| ((*t).to_owned(), (*a).to_owned()))
        .collect()
}

/// A client of `sim` with short retries and timeouts and a 10-ms action poll: what the
/// load balancer and route tests drive the provider with.
pub fn sim_client(sim: &Simulator) -> Client {
    let mut config = ClientConfig::new(Token::new(sim.token()))
        .with_endpoint(sim.base_url())
        .with_poll_interval(Duration::from_millis(10));
    config.retry = RetryConfig {
        max_tries: 2,
        base: Duration::from_millis(5),
        cap: Duration::from_millis(10),
        jitter: false,
    };
    config.request_timeout = Duration::from_secs(2);
    Client::new(config).unwrap()
}
