//! Test doubles and helpers shared by the integration tests.

pub use kube_harness::{eventually, has_taint, taints};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cloud_provider::provider::{self, InstanceMetadata, Instances};
use cloud_provider::well_known::TAINT_UNINITIALIZED;
use k8s_openapi::api::core::v1::{Event, Node, NodeAddress, NodeSpec, Taint};
use kube::api::{ListParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};

use crate::{Env, SCOPE_LABEL};

/// A scripted answer of the fake provider.
#[derive(Clone, Debug)]
pub enum Answer<T> {
    Ok(T),
    /// A cloud API failure with this message.
    Err(String),
    /// `Err(InstanceNotFound)`.
    NotFound,
}

impl<T: Clone> Answer<T> {
    fn get(&self) -> provider::Result<T> {
        match self {
            Answer::Ok(v) => Ok(v.clone()),
            Answer::Err(msg) => Err(provider::Error::api_msg(msg.clone())),
            Answer::NotFound => Err(provider::Error::instance_not_found()),
        }
    }
}

/// Which trait method was called.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Call {
    Metadata,
    Exists,
    Shutdown,
}

/// One recorded call: method, node name, the node's providerID at call time.
#[derive(Clone, Debug)]
pub struct Recorded {
    pub call: Call,
    pub node: String,
    pub provider_id: Option<String>,
}

#[derive(Debug, Default)]
struct State {
    metadata: HashMap<String, Answer<Option<InstanceMetadata>>>,
    exists: HashMap<String, Answer<bool>>,
    shutdown: HashMap<String, Answer<bool>>,
    calls: Vec<Recorded>,
}

/// An in-memory provider with answers scripted per node name. Unknown nodes: no metadata,
/// existing, running.
#[derive(Debug, Default)]
pub struct FakeInstances {
    state: Mutex<State>,
}

impl FakeInstances {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    pub fn set_metadata(&self, node: &str, answer: Answer<Option<InstanceMetadata>>) {
        self.state.lock().metadata.insert(node.into(), answer);
    }

    pub fn set_exists(&self, node: &str, answer: Answer<bool>) {
        self.state.lock().exists.insert(node.into(), answer);
    }

    pub fn set_shutdown(&self, node: &str, answer: Answer<bool>) {
        self.state.lock().shutdown.insert(node.into(), answer);
    }

    pub fn calls(&self, call: Call, node: &str) -> Vec<Recorded> {
        self.state
            .lock()
            .calls
            .iter()
            .filter(|r| r.call == call && r.node == node)
            .cloned()
            .collect()
    }

    fn record(&self, call: Call, node: &Node) -> String {
        let name = node.metadata.name.clone().unwrap_or_default();
        self.state.lock().calls.push(Recorded {
            call,
            node: name.clone(),
            provider_id: node.spec.as_ref().and_then(|s| s.provider_id.clone()),
        });
        name
    }
}

#[async_trait]
impl Instances for FakeInstances {
    async fn instance_exists(&self, node: &Node) -> provider::Result<bool> {
        let name = self.record(Call::Exists, node);
        let answer = self.state.lock().exists.get(&name).cloned();
        answer.map_or(Ok(true), |a| a.get())
    }

    async fn instance_shutdown(&self, node: &Node) -> provider::Result<bool> {
        let name = self.record(Call::Shutdown, node);
        let answer = self.state.lock().shutdown.get(&name).cloned();
        answer.map_or(Ok(false), |a| a.get())
    }

    async fn instance_metadata(&self, node: &Node) -> provider::Result<Option<InstanceMetadata>> {
        let name = self.record(Call::Metadata, node);
        let answer = self.state.lock().metadata.get(&name).cloned();
        answer.map_or(Ok(None), |a| a.get())
    }
}

pub fn addr(type_: &str, address: &str) -> NodeAddress {
    NodeAddress {
        type_: type_.into(),
        address: address.into(),
    }
}

pub fn uninitialized_taint() -> Taint {
    Taint {
        key: TAINT_UNINITIALIZED.into(),
        value: Some("true".into()),
        effect: "NoSchedule".into(),
        ..Taint::default()
    }
}

/// A Node as a kubelet with `--cloud-provider=external` registers it.
pub struct NodeBuilder {
    node: Node,
    addresses: Vec<NodeAddress>,
    ready: Option<&'static str>,
}

impl NodeBuilder {
    /// Tainted, with a Hostname address equal to the name.
    pub fn kubelet(name: &str) -> Self {
        let mut node = Node::default();
        node.metadata.name = Some(name.into());
        node.spec = Some(NodeSpec {
            taints: Some(vec![uninitialized_taint()]),
            ..NodeSpec::default()
        });
        Self {
            node,
            addresses: vec![addr("Hostname", name)],
            ready: None,
        }
    }

    pub fn untainted(mut self) -> Self {
        self.node.spec.get_or_insert_default().taints = None;
        self
    }

    pub fn taints(mut self, taints: Vec<Taint>) -> Self {
        self.node.spec.get_or_insert_default().taints = Some(taints);
        self
    }

    pub fn provider_id(mut self, id: &str) -> Self {
        self.node.spec.get_or_insert_default().provider_id = Some(id.into());
        self
    }

    pub fn annotation(mut self, key: &str, value: &str) -> Self {
        self.node
            .metadata
            .annotations
            .get_or_insert_default()
            .insert(key.into(), value.into());
        self
    }

    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.node
            .metadata
            .labels
            .get_or_insert_default()
            .insert(key.into(), value.into());
        self
    }

    /// `spec.podCIDRs` (and `spec.podCIDR` = the first), as the node IPAM allocator sets them.
    pub fn pod_cidrs(mut self, cidrs: &[&str]) -> Self {
        let spec = self.node.spec.get_or_insert_default();
        spec.pod_cidr = cidrs.first().map(|c| (*c).to_owned());
        spec.pod_cidrs = Some(cidrs.iter().map(|c| (*c).to_owned()).collect());
        self
    }

    pub fn addresses(mut self, addresses: Vec<NodeAddress>) -> Self {
        self.addresses = addresses;
        self
    }

    /// Ready condition `True`, `False` or `Unknown`.
    pub fn ready(mut self, status: &'static str) -> Self {
        self.ready = Some(status);
        self
    }

    /// Create the Node in `env`'s scope (with its [`SCOPE_LABEL`]) and with its status, in one
    /// request as a kubelet registers (a controller never sees it without its addresses).
    pub async fn create(self, env: &Env) -> Node {
        let Self {
            mut node,
            addresses,
            ready,
        } = self.label(SCOPE_LABEL, &env.id);
        let mut status = serde_json::json!({ "addresses": addresses });
        if let Some(ready) = ready {
            status["conditions"] = ready_conditions(ready);
        }
        node.status = Some(serde_json::from_value(status).unwrap());
        let created = Api::<Node>::all(env.client.clone())
            .create(&PostParams::default(), &node)
            .await
            .unwrap();
        assert_eq!(
            self::addresses(&created),
            self::addresses(&node),
            "the apiserver keeps a Node's status on create"
        );
        created
    }
}

pub fn ready_conditions(status: &str) -> serde_json::Value {
    let now = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    serde_json::json!([{
        "type": "Ready",
        "status": status,
        "reason": "KubeletStatus",
        "lastHeartbeatTime": now,
        "lastTransitionTime": now,
    }])
}

/// Set the Ready condition like the kubelet does.
pub async fn set_ready(client: &Client, name: &str, status: &str) {
    let api: Api<Node> = Api::all(client.clone());
    api.patch_status(
        name,
        &PatchParams::default(),
        &Patch::Merge(serde_json::json!({ "status": { "conditions": ready_conditions(status) } })),
    )
    .await
    .unwrap();
}

pub async fn get_node(client: &Client, name: &str) -> Option<Node> {
    Api::<Node>::all(client.clone())
        .get_opt(name)
        .await
        .unwrap()
}

/// Events about Node `name` (they live in `default`).
pub async fn node_events(client: &Client, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), "default");
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    api.list(&params).await.unwrap().items
}

pub async fn events_with_reason(client: &Client, name: &str, reason: &str) -> Vec<Event> {
    node_events(client, name)
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some(reason))
        .collect()
}

/// Events are written by a background task, after the change they announce may already be
/// visible: wait until at least one with `reason` is there.
pub async fn wait_events(client: &Client, name: &str, reason: &str) -> Vec<Event> {
    eventually(
        &format!("{reason} event on {name}"),
        Duration::from_secs(20),
        || async {
            let events = events_with_reason(client, name, reason).await;
            (!events.is_empty()).then_some(events)
        },
    )
    .await
}

pub fn addresses(node: &Node) -> Vec<NodeAddress> {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.clone())
        .unwrap_or_default()
}

pub fn label<'a>(node: &'a Node, key: &str) -> Option<&'a str> {
    node.metadata.labels.as_ref()?.get(key).map(String::as_str)
}

/// Events about the namespaced object `name` of `kind` (they live in its namespace).
pub async fn object_events(client: &Client, namespace: &str, kind: &str, name: &str) -> Vec<Event> {
    let api: Api<Event> = Api::namespaced(client.clone(), namespace);
    let params = ListParams::default().fields(&format!("involvedObject.name={name}"));
    api.list(&params)
        .await
        .unwrap()
        .items
        .into_iter()
        .filter(|e| e.involved_object.kind.as_deref() == Some(kind))
        .collect()
}

/// Reasons of the events about Service `namespace/name`, oldest first (aggregated events once).
pub async fn service_event_reasons(client: &Client, namespace: &str, name: &str) -> Vec<String> {
    let mut events = object_events(client, namespace, "Service", name).await;
    events.sort_by(|a, b| a.first_timestamp.cmp(&b.first_timestamp));
    events.into_iter().filter_map(|e| e.reason).collect()
}
