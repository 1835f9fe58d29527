use parking_lot::Mutex;
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cloud_provider::provider::{self, LoadBalancer, Outcome};
use cloud_provider::runtime::workqueue::Backoff;
use cloud_provider::service::decisions::{
    LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS, LOAD_BALANCER_CLEANUP_FINALIZER,
};
use cloud_provider::service::{ServiceController, ServiceControllerConfig};
use k8s_openapi::api::core::v1::{
    Event, LoadBalancerIngress, LoadBalancerStatus, Node, Service, ServicePort, ServiceSpec,
};
use kube::api::{DeleteParams, Patch, PatchParams, PostParams};
use kube::{Api, Client};
use serde_json::json;

use crate::support::*;
use crate::{Env, SCOPE_LABEL};

const WAIT: Duration = Duration::from_secs(30);
const CLUSTER: &str = "test-cluster";

/// One call of the fake provider: method, `namespace/name`, node names handed over.
#[derive(Clone, Debug, PartialEq, Eq)]
enum LbCall {
    Get(String),
    Ensure(String, Vec<String>),
    Update(String, Vec<String>),
    Delete(String),
}

#[derive(Debug, Default)]
struct LbState {
    /// Existing load balancers by `namespace/name`.
    existing: HashMap<String, LoadBalancerStatus>,
    /// Errors returned by the next `ensure_load_balancer` calls, in order.
    ensure_errors: VecDeque<provider::Error>,
    /// Errors returned by the next `update_load_balancer` calls, in order.
    update_errors: VecDeque<provider::Error>,
    /// Every Ensure/Update answers `ImplementedElsewhere`.
    elsewhere: bool,
    calls: Vec<LbCall>,
    /// Whether the Service (read from the apiserver) had the finalizer at each Ensure call.
    finalizer_at_ensure: Vec<bool>,
    /// Every `expect_lookups` hint: the number of Services, and how many calls came before.
    expected: Vec<(usize, usize)>,
    /// Whether the provider selects targets by Node labels.
    by_label: bool,
    /// The `ipMode` of the ingress of new load balancers.
    ip_mode: Option<String>,
}

/// An in-memory load balancer provider. Every LB gets ingress IP 203.0.113.<n>.
struct FakeLb {
    client: Client,
    /// The test's namespace: the queries below name a Service of it.
    namespace: String,
    state: Mutex<LbState>,
}

impl FakeLb {
    fn new(env: &Env) -> Arc<Self> {
        Arc::new(Self {
            client: env.client.clone(),
            namespace: env.namespace().to_owned(),
            state: Mutex::default(),
        })
    }

    /// The key of the test's Service `name`: `namespace/name`.
    fn key(&self, name: &str) -> String {
        format!("{}/{name}", self.namespace)
    }

    fn state(&self) -> parking_lot::MutexGuard<'_, LbState> {
        self.state.lock()
    }

    fn calls(&self) -> Vec<LbCall> {
        self.state().calls.clone()
    }

    fn ensures(&self, name: &str) -> Vec<Vec<String>> {
        let key = self.key(name);
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                LbCall::Ensure(k, nodes) if k == key => Some(nodes),
                _ => None,
            })
            .collect()
    }

    fn updates(&self, name: &str) -> Vec<Vec<String>> {
        let key = self.key(name);
        self.calls()
            .into_iter()
            .filter_map(|c| match c {
                LbCall::Update(k, nodes) if k == key => Some(nodes),
                _ => None,
            })
            .collect()
    }

    fn deletes(&self, name: &str) -> usize {
        let delete = LbCall::Delete(self.key(name));
        self.calls().iter().filter(|c| **c == delete).count()
    }

    fn calls_for(&self, name: &str) -> usize {
        let key = self.key(name);
        self.calls()
            .iter()
            .filter(|c| match c {
                LbCall::Get(k)
                | LbCall::Ensure(k, _)
                | LbCall::Update(k, _)
                | LbCall::Delete(k) => *k == key,
            })
            .count()
    }
}

fn key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.clone().unwrap_or_default(),
        service.metadata.name.clone().unwrap_or_default()
    )
}

fn names(nodes: &[Arc<Node>]) -> Vec<String> {
    nodes
        .iter()
        .map(|n| n.metadata.name.clone().unwrap_or_default())
        .collect()
}

#[async_trait]
impl LoadBalancer for FakeLb {
    fn selects_nodes_by_label(&self) -> bool {
        self.state().by_label
    }

    fn expect_lookups(&self, services: usize) {
        let mut state = self.state();
        let before = state.calls.len();
        state.expected.push((services, before));
    }

    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> provider::Result<Option<LoadBalancerStatus>> {
        assert_eq!(cluster_name, CLUSTER);
        let mut state = self.state();
        state.calls.push(LbCall::Get(key(service)));
        Ok(state.existing.get(&key(service)).cloned())
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> provider::Result<Outcome<LoadBalancerStatus>> {
        assert_eq!(cluster_name, CLUSTER);
        let api: Api<Service> = Api::namespaced(
            self.client.clone(),
            service.metadata.namespace.as_deref().unwrap(),
        );
        let live = api
            .get(service.metadata.name.as_deref().unwrap())
            .await
            .unwrap();
        let has_finalizer = live
            .metadata
            .finalizers
            .unwrap_or_default()
            .iter()
            .any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER);
        let mut state = self.state();
        state.finalizer_at_ensure.push(has_finalizer);
        state.calls.push(LbCall::Ensure(key(service), names(nodes)));
        if state.elsewhere {
            return Ok(Outcome::ImplementedElsewhere);
        }
        if let Some(err) = state.ensure_errors.pop_front() {
            return Err(err);
        }
        let n = state.existing.len() + 1;
        let ip_mode = state.ip_mode.clone();
        let status = state
            .existing
            .entry(key(service))
            .or_insert_with(|| LoadBalancerStatus {
                ingress: Some(vec![LoadBalancerIngress {
                    ip: Some(format!("203.0.113.{n}")),
                    ip_mode,
                    ..LoadBalancerIngress::default()
                }]),
            });
        Ok(Outcome::Done(status.clone()))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> provider::Result<Outcome<()>> {
        assert_eq!(cluster_name, CLUSTER);
        let mut state = self.state();
        state.calls.push(LbCall::Update(key(service), names(nodes)));
        if state.elsewhere {
            return Ok(Outcome::ImplementedElsewhere);
        }
        match state.update_errors.pop_front() {
            Some(err) => Err(err),
            None => Ok(Outcome::Done(())),
        }
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> provider::Result<Outcome<()>> {
        assert_eq!(cluster_name, CLUSTER);
        let mut state = self.state();
        state.calls.push(LbCall::Delete(key(service)));
        state.existing.remove(&key(service));
        Ok(Outcome::Done(()))
    }
}

/// Owned copies of Node names, as the fake records them.
fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| (*n).to_owned()).collect()
}

/// A Service in `env`'s scope: its namespace and its [`SCOPE_LABEL`].
fn service(env: &Env, name: &str, type_: &str) -> Service {
    let mut svc = Service::default();
    svc.metadata.name = Some(name.into());
    svc.metadata.namespace = Some(env.namespace().into());
    svc.metadata.labels = Some([(SCOPE_LABEL.to_owned(), env.id.clone())].into());
    svc.spec = Some(ServiceSpec {
        type_: Some(type_.into()),
        ports: Some(vec![ServicePort {
            port: 80,
            protocol: Some("TCP".into()),
            ..ServicePort::default()
        }]),
        ..ServiceSpec::default()
    });
    svc
}

/// The Services of `env`'s namespace.
fn services(env: &Env) -> Api<Service> {
    Api::namespaced(env.client.clone(), env.namespace())
}

async fn create_service(env: &Env, name: &str, type_: &str) -> Service {
    services(env)
        .create(&PostParams::default(), &service(env, name, type_))
        .await
        .unwrap()
}

async fn get_service(env: &Env, name: &str) -> Option<Service> {
    services(env).get_opt(name).await.unwrap()
}

async fn patch_service(env: &Env, name: &str, patch: serde_json::Value) {
    services(env)
        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
}

/// Make the Service `name` of type ClusterIP (no load balancer fields left).
async fn to_cluster_ip(env: &Env, name: &str) {
    patch_service(
        env,
        name,
        json!({"spec": {
            "type": "ClusterIP",
            "externalTrafficPolicy": null,
            "ports": [{"port": 80, "protocol": "TCP", "targetPort": 80}],
        }}),
    )
    .await;
}

/// The ingress entries of the Service's status, as stored.
fn ingresses(svc: &Service) -> Vec<LoadBalancerIngress> {
    svc.status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|lb| lb.ingress.clone())
        .unwrap_or_default()
}

fn ingress_ips(svc: &Service) -> Vec<String> {
    ingresses(svc).into_iter().filter_map(|i| i.ip).collect()
}

fn has_finalizer(svc: &Service) -> bool {
    svc.metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER))
}

async fn node(env: &Env, name: &str) -> Node {
    NodeBuilder::kubelet(name)
        .untainted()
        .provider_id(&format!("fake://{name}"))
        .ready("True")
        .create(env)
        .await
}

async fn label_node(client: &Client, name: &str, key: &str, value: &str) {
    Api::<Node>::all(client.clone())
        .patch(
            name,
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"labels": {key: value}}})),
        )
        .await
        .unwrap();
}

fn test_config() -> ServiceControllerConfig {
    ServiceControllerConfig {
        cluster_name: CLUSTER.into(),
        workers: 2,
        backoff: Backoff {
            base: Duration::from_millis(200),
            max: Duration::from_secs(2),
        },
        ..ServiceControllerConfig::default()
    }
}

fn start(env: &Env, lb: &Arc<FakeLb>) {
    start_with(env, lb, test_config());
}

/// Run the controller on the test's Services (its namespace) and Nodes (its Node cache).
fn start_with(env: &Env, lb: &Arc<FakeLb>, config: ServiceControllerConfig) {
    let controller = ServiceController::new(
        env.client.clone(),
        env.cache.clone(),
        lb.clone(),
        env.metrics.clone(),
        ServiceControllerConfig {
            scope: env.scope.clone(),
            ..config
        },
    );
    tokio::spawn(controller.run(env.shutdown.clone()));
}

async fn wait_reason(env: &Env, name: &str, reason: &str) {
    eventually(&format!("event {reason} on {name}"), WAIT, || async {
        service_event_reasons(&env.client, env.namespace(), name)
            .await
            .iter()
            .any(|r| r == reason)
            .then_some(())
    })
    .await;
}

async fn wait_ingress(env: &Env, name: &str) -> Vec<String> {
    eventually(&format!("ingress of {name}"), WAIT, || async {
        let svc = get_service(env, name).await?;
        let ips = ingress_ips(&svc);
        (!ips.is_empty()).then_some(ips)
    })
    .await
}

/// Waits until the Service `name` has neither the cleanup finalizer nor a status; returns it.
async fn wait_cleaned_up(env: &Env, name: &str) -> Service {
    eventually("finalizer removed and status cleared", WAIT, || async {
        let svc = get_service(env, name).await?;
        (!has_finalizer(&svc) && ingress_ips(&svc).is_empty()).then_some(svc)
    })
    .await
}

#[tokio::test]
async fn load_balancer_service_is_ensured_updated_on_spec_changes_and_deleted() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let client = &env.client;
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    create_service(&env, "web", "LoadBalancer").await;
    create_service(&env, "internal", "ClusterIP").await;
    let lb = FakeLb::new(&env);
    start(&env, &lb);

    // Ensured with the one node; finalizer before the first cloud call; status from the cloud.
    let ips = wait_ingress(&env, "web").await;
    assert_eq!(ips, ["203.0.113.1"]);
    let web = get_service(&env, "web").await.unwrap();
    assert!(has_finalizer(&web));
    assert_eq!(lb.ensures("web"), [vec![n1.to_owned()]]);
    assert_eq!(lb.state().finalizer_at_ensure, [true]);
    wait_reason(&env, "web", "EnsuredLoadBalancer").await;
    let reasons = service_event_reasons(client, env.namespace(), "web").await;
    assert!(
        reasons.contains(&"EnsuringLoadBalancer".to_owned()),
        "{reasons:?}"
    );
    assert!(
        !reasons.contains(&"UnAvailableLoadBalancer".to_owned()),
        "{reasons:?}"
    );

    // The ClusterIP Service is never touched.
    assert_eq!(lb.calls_for("internal"), 0);
    let internal = get_service(&env, "internal").await.unwrap();
    assert!(!has_finalizer(&internal));
    assert!(
        service_event_reasons(client, env.namespace(), "internal")
            .await
            .is_empty()
    );

    // A label change does not re-ensure (nor does the status write of the controller itself).
    patch_service(&env, "web", json!({"metadata": {"labels": {"team": "a"}}})).await;
    // Progress before the check: a Service created after the patch is ensured and its
    // reconcile finished. The Service watch delivers changes in order, so the label change was
    // handled first (and, with the queue in order, any sync it caused was taken up first).
    let reconciled = env.metrics.reconcile_count("service");
    create_service(&env, "probe", "LoadBalancer").await;
    wait_ingress(&env, "probe").await;
    wait_reason(&env, "probe", "EnsuredLoadBalancer").await;
    eventually("the probe's reconcile finished", WAIT, || async {
        (env.metrics.reconcile_count("service") > reconciled).then_some(())
    })
    .await;
    assert_eq!(lb.ensures("probe").len(), 1, "{:?}", lb.calls());
    assert_eq!(lb.ensures("web").len(), 1, "{:?}", lb.calls());
    // The probe goes again, so that `web` is the only load balancer in the cloud.
    Api::<Service>::namespaced(client.clone(), env.namespace())
        .delete("probe", &DeleteParams::default())
        .await
        .unwrap();
    eventually("probe gone", WAIT, || async {
        get_service(&env, "probe").await.is_none().then_some(())
    })
    .await;
    assert_eq!(lb.deletes("probe"), 1);

    // An annotation change does.
    patch_service(
        &env,
        "web",
        json!({"metadata": {"annotations": {"example.com/size": "lb21"}}}),
    )
    .await;
    eventually("re-ensure after annotation change", WAIT, || async {
        (lb.ensures("web").len() == 2).then_some(())
    })
    .await;
    assert_eq!(ips, ingress_ips(&get_service(&env, "web").await.unwrap()));

    // Deletion: the cloud LB is deleted, then the finalizer removed, then the Service is gone.
    Api::<Service>::namespaced(client.clone(), env.namespace())
        .delete("web", &DeleteParams::default())
        .await
        .unwrap();
    eventually("service gone", WAIT, || async {
        get_service(&env, "web").await.is_none().then_some(())
    })
    .await;
    assert_eq!(lb.deletes("web"), 1);
    assert!(lb.state().existing.is_empty());
    wait_reason(&env, "web", "DeletedLoadBalancer").await;
    let reasons = service_event_reasons(client, env.namespace(), "web").await;
    assert!(
        reasons.contains(&"DeletingLoadBalancer".to_owned()),
        "{reasons:?}"
    );
    assert!(env.metrics.reconcile_count("service") >= 3);
}

#[tokio::test]
async fn switching_to_cluster_ip_cleans_up_and_a_vanished_service_uses_the_legacy_path() {
    let env = Env::start().await;
    let client = &env.client;
    create_service(&env, "web", "LoadBalancer").await;
    create_service(&env, "legacy", "LoadBalancer").await;
    let lb = FakeLb::new(&env);
    start(&env, &lb);
    wait_ingress(&env, "web").await;
    wait_ingress(&env, "legacy").await;
    // No nodes at all: warned, but the cloud was still called.
    wait_reason(&env, "web", "UnAvailableLoadBalancer").await;
    assert_eq!(lb.ensures("web"), [Vec::<String>::new()]);

    // A finalizer of someone else survives the cleanup.
    Api::<Service>::namespaced(client.clone(), env.namespace())
        .patch(
            "web",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": [
                LOAD_BALANCER_CLEANUP_FINALIZER, "example.com/keep"
            ]}})),
        )
        .await
        .unwrap();
    to_cluster_ip(&env, "web").await;
    let cleaned = wait_cleaned_up(&env, "web").await;
    assert_eq!(
        cleaned.metadata.finalizers.clone().unwrap_or_default(),
        ["example.com/keep"]
    );
    assert_eq!(
        cleaned.spec.unwrap().type_.as_deref(),
        Some("ClusterIP"),
        "the controller never writes spec"
    );
    assert_eq!(lb.deletes("web"), 1);
    assert!(lb.calls().contains(&LbCall::Get(lb.key("web"))));
    wait_reason(&env, "web", "DeletedLoadBalancer").await;

    // Someone strips the finalizer, then deletes the Service: the remembered version drives the
    // cleanup.
    Api::<Service>::namespaced(client.clone(), env.namespace())
        .patch_status(
            "legacy",
            &PatchParams::default(),
            &Patch::Merge(json!({"metadata": {"finalizers": null}})),
        )
        .await
        .unwrap();
    Api::<Service>::namespaced(client.clone(), env.namespace())
        .delete("legacy", &DeleteParams::default())
        .await
        .unwrap();
    eventually("legacy delete", WAIT, || async {
        (lb.deletes("legacy") == 1).then_some(())
    })
    .await;
    wait_reason(&env, "legacy", "DeletedLoadBalancer").await;
    assert!(lb.state().existing.is_empty());
}

#[tokio::test]
async fn provider_errors_are_reported_and_retried_until_success() {
    let env = Env::start().await;
    let client = &env.client;
    let lb = FakeLb::new(&env);
    {
        let mut state = lb.state();
        state
            .ensure_errors
            .push_back(provider::Error::api_msg("quota exceeded"));
        // A retry hint lengthens the backoff.
        state.ensure_errors.push_back(provider::Error::retry(
            "action locked",
            Duration::from_millis(300),
        ));
    }
    start(&env, &lb);
    create_service(&env, "web", "LoadBalancer").await;

    let ips = wait_ingress(&env, "web").await;
    assert_eq!(ips, ["203.0.113.1"]);
    assert_eq!(lb.ensures("web").len(), 3);
    let events = object_events(client, env.namespace(), "Service", "web").await;
    let messages: Vec<String> = events
        .iter()
        .filter(|e| e.reason.as_deref() == Some("SyncLoadBalancerFailed"))
        .map(|e| {
            assert_eq!(e.type_.as_deref(), Some("Warning"));
            e.message.clone().unwrap_or_default()
        })
        .collect();
    assert!(
        messages.contains(
            &"Error syncing load balancer: failed to ensure load balancer: cloud API call failed: quota exceeded"
                .to_owned()
        ),
        "{messages:?}"
    );
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(env.metrics.error_count("service", "transient") >= 1);
    wait_reason(&env, "web", "EnsuredLoadBalancer").await;
}

#[tokio::test]
async fn node_changes_update_the_backend_set() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n2 = &*env.name("n2");
    let n3 = &*env.name("n3");
    let probe = &*env.name("probe");
    let client = &env.client;
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    create_service(&env, "web", "LoadBalancer").await;
    let lb = FakeLb::new(&env);
    start(&env, &lb);
    wait_ingress(&env, "web").await;
    assert_eq!(lb.ensures("web"), [vec![n1.to_owned()]]);

    let wait_update = |expected: Vec<String>| {
        let lb = lb.clone();
        async move {
            eventually(&format!("update with {expected:?}"), WAIT, || async {
                lb.updates("web")
                    .last()
                    .is_some_and(|last| *last == expected)
                    .then_some(())
            })
            .await;
        }
    };

    // A new node joins the backends.
    node(&env, n2).await;
    wait_update(strings(&[n1, n2])).await;
    wait_reason(&env, "web", "UpdatedLoadBalancer").await;

    // Readiness and unrelated labels are ignored; "false" does not exclude.
    set_ready(client, n1, "False").await;
    label_node(
        client,
        n1,
        LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS,
        "false",
    )
    .await;
    label_node(client, n1, "role", "worker").await;
    // Progress before the check: a Node added after these changes (excluded from load
    // balancers, so the eligible set stays n1, n2) makes the controller look at `web` again.
    // The Node watch delivers changes in order, so the ignored changes were handled first.
    let reconciled = env.metrics.reconcile_count("service");
    NodeBuilder::kubelet(probe)
        .untainted()
        .provider_id("fake://probe")
        .label(LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS, "true")
        .ready("True")
        .create(&env)
        .await;
    eventually("a reconcile of web after the probe node", WAIT, || async {
        (env.metrics.reconcile_count("service") > reconciled).then_some(())
    })
    .await;
    assert_eq!(lb.updates("web").len(), 1, "{:?}", lb.calls());

    // The exclusion label removes a node.
    label_node(
        client,
        n2,
        LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS,
        "true",
    )
    .await;
    wait_update(strings(&[n1])).await;

    // A failed update of an existing LB: warning, and a full ensure with the current set.
    lb.state()
        .update_errors
        .push_back(provider::Error::api_msg("backend limit"));
    let n3_node = node(&env, n3).await;
    wait_update(strings(&[n1, n3])).await;
    wait_reason(&env, "web", "UpdateLoadBalancerFailed").await;
    eventually("full ensure after failed update", WAIT, || async {
        lb.ensures("web")
            .last()
            .is_some_and(|last| *last == [n1, n3])
            .then_some(())
    })
    .await;
    let events = object_events(client, env.namespace(), "Service", "web").await;
    let failed = events
        .iter()
        .find(|e| e.reason.as_deref() == Some("UpdateLoadBalancerFailed"))
        .unwrap();
    assert_eq!(
        failed.message.as_deref(),
        Some(
            format!("Error updating load balancer with new hosts [{n1} {n3}] [node names limited, total number of nodes: 2], error: cloud API call failed: backend limit").as_str()
        )
    );

    // Deleting nodes shrinks the set down to nothing.
    let nodes: Api<Node> = Api::all(client.clone());
    nodes.delete(n1, &DeleteParams::default()).await.unwrap();
    wait_update(strings(&[n3])).await;
    nodes
        .delete(
            n3_node.metadata.name.as_deref().unwrap(),
            &DeleteParams::default(),
        )
        .await
        .unwrap();
    wait_update(strings(&[])).await;
    wait_reason(&env, "web", "UnAvailableLoadBalancer").await;
}

/// A provider that picks targets by Node labels (a node selector) gets a target update when a
/// Node's labels alone change, although the set of eligible Nodes stays the same.
#[tokio::test]
async fn a_label_change_updates_the_targets_of_a_provider_that_selects_by_label() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let client = &env.client;
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    let lb = FakeLb::new(&env);
    lb.state().by_label = true;
    start(&env, &lb);
    create_service(&env, "web", "LoadBalancer").await;
    wait_ingress(&env, "web").await;
    assert!(lb.updates("web").is_empty(), "{:?}", lb.calls());
    label_node(client, n1, "role", "edge").await;
    eventually("a target update after the label change", WAIT, || async {
        (lb.updates("web") == [vec![n1.to_owned()]]).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_joining_node_announces_the_target_updates_of_every_load_balancer() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n2 = &*env.name("n2");
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    create_service(&env, "web", "LoadBalancer").await;
    create_service(&env, "api", "LoadBalancer").await;
    let lb = FakeLb::new(&env);
    start(&env, &lb);
    wait_ingress(&env, "web").await;
    wait_ingress(&env, "api").await;

    node(&env, n2).await;
    eventually("both load balancers updated", WAIT, || async {
        let both = ["web", "api"]
            .iter()
            .all(|key| lb.updates(key).last().is_some_and(|n| *n == [n1, n2]));
        both.then_some(())
    })
    .await;
    let calls = lb.calls();
    let first_update = calls
        .iter()
        .position(|c| matches!(c, LbCall::Update(..)))
        .unwrap();
    let expected = lb.state().expected.clone();
    assert!(
        expected
            .iter()
            .any(|&(services, before)| services == 2 && before <= first_update),
        "the two updates were announced before the first one: {expected:?}, calls {calls:?}"
    );
}

#[tokio::test]
async fn implemented_elsewhere_keeps_the_finalizer_and_writes_no_status() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n2 = &*env.name("n2");
    let client = &env.client;
    let lb = FakeLb::new(&env);
    lb.state().elsewhere = true;
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    start(&env, &lb);
    let reconciled = env.metrics.reconcile_count("service");
    create_service(&env, "web", "LoadBalancer").await;

    eventually("ensure called", WAIT, || async {
        (lb.ensures("web").len() == 1).then_some(())
    })
    .await;
    wait_reason(&env, "web", "EnsuringLoadBalancer").await;
    // Another node: UpdateLoadBalancer answers ImplementedElsewhere, which is success.
    node(&env, n2).await;
    eventually("update called", WAIT, || async {
        (lb.updates("web").len() == 1).then_some(())
    })
    .await;
    // Progress before the checks: both reconciles (the ensure and the update) have finished,
    // so whatever status, event or retry they would cause has been written or scheduled.
    eventually("the ensure and the update reconciled", WAIT, || async {
        (env.metrics.reconcile_count("service") >= reconciled + 2).then_some(())
    })
    .await;
    let retries: u64 = [
        cloud_provider::Category::Transient,
        cloud_provider::Category::User,
        cloud_provider::Category::NotFound,
        cloud_provider::Category::Conflict,
    ]
    .into_iter()
    .map(|c| env.metrics.retry_count("service", c))
    .sum();
    assert_eq!(retries, 0, "no retry scheduled");
    let svc = get_service(&env, "web").await.unwrap();
    assert!(has_finalizer(&svc));
    assert!(ingress_ips(&svc).is_empty());
    let reasons = service_event_reasons(client, env.namespace(), "web").await;
    for absent in [
        "EnsuredLoadBalancer",
        "SyncLoadBalancerFailed",
        "UpdatedLoadBalancer",
        "UpdateLoadBalancerFailed",
    ] {
        assert!(!reasons.contains(&absent.to_owned()), "{reasons:?}");
    }
    assert_eq!(lb.ensures("web").len(), 1, "no retry after success");
}

#[tokio::test]
async fn node_sync_period_updates_every_load_balancer_without_node_changes() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    create_service(&env, "web", "LoadBalancer").await;
    let lb = FakeLb::new(&env);
    start_with(
        &env,
        &lb,
        ServiceControllerConfig {
            node_sync_period: Duration::from_millis(300),
            ..test_config()
        },
    );
    wait_ingress(&env, "web").await;
    assert_eq!(lb.ensures("web"), [vec![n1.to_owned()]]);

    // No Node changes: only the periodic pass can update the load balancer, each time with
    // the same Node.
    eventually("periodic backend updates", WAIT, || async {
        (lb.updates("web").len() >= 2).then_some(())
    })
    .await;
    for nodes in lb.updates("web") {
        assert_eq!(nodes, [n1]);
    }
    assert_eq!(lb.ensures("web").len(), 1, "{:?}", lb.calls());
}

#[tokio::test]
async fn a_user_error_warns_once_and_waits_for_the_service_to_change() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n2 = &*env.name("n2");
    let client = &env.client;
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    let lb = FakeLb::new(&env);
    lb.state().ensure_errors.push_back(provider::Error::user(
        "InvalidConfiguration",
        "annotation load-balancer.hetzner.cloud/location: \"mars1\" is not a location",
    ));
    start(&env, &lb);
    create_service(&env, "bad", "LoadBalancer").await;
    wait_reason(&env, "bad", "InvalidConfiguration").await;

    // Progress elsewhere first: a second Service is ensured, and Node changes go by.
    create_service(&env, "good", "LoadBalancer").await;
    wait_ingress(&env, "good").await;
    node(&env, n2).await;
    eventually("target update of the good service", WAIT, || async {
        (!lb.updates("good").is_empty()).then_some(())
    })
    .await;
    assert_eq!(lb.ensures("bad").len(), 1, "{:?}", lb.calls());
    assert!(lb.updates("bad").is_empty(), "{:?}", lb.calls());
    let reasons = service_event_reasons(client, env.namespace(), "bad").await;
    assert_eq!(
        reasons
            .iter()
            .filter(|r| *r == "InvalidConfiguration")
            .count(),
        1,
        "{reasons:?}"
    );
    assert!(
        !reasons.contains(&"SyncLoadBalancerFailed".to_owned()),
        "{reasons:?}"
    );

    // Fixing the Service is the change it waited for.
    patch_service(
        &env,
        "bad",
        json!({"metadata": {"annotations": {"load-balancer.hetzner.cloud/location": "fsn1"}}}),
    )
    .await;
    wait_ingress(&env, "bad").await;
    assert_eq!(lb.ensures("bad").len(), 2);
}

/// A refusal the world outside the Service can lift (a certificate uploaded later, say) is
/// retried until it passes, with upstream's `SyncLoadBalancerFailed` Warning once per distinct
/// message, not once per retry.
#[tokio::test]
async fn a_rejected_sync_is_retried_and_warns_once_per_distinct_message() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let client = &env.client;
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    let lb = FakeLb::new(&env);
    {
        let mut state = lb.state();
        for _ in 0..3 {
            state.ensure_errors.push_back(provider::Error::rejected(
                "load-balancer.hetzner.cloud/http-certificates: certificate \"web\" does not exist",
            ));
        }
        state.ensure_errors.push_back(provider::Error::rejected(
            "load-balancer.hetzner.cloud/http-certificates: certificate \"web\" is not issued",
        ));
    }
    start(&env, &lb);
    create_service(&env, "web", "LoadBalancer").await;
    wait_ingress(&env, "web").await;
    assert_eq!(lb.ensures("web").len(), 5, "{:?}", lb.calls());
    let failed: Vec<Event> = object_events(client, env.namespace(), "Service", "web")
        .await
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("SyncLoadBalancerFailed"))
        .collect();
    let mut messages: Vec<(String, i32)> = failed
        .iter()
        .map(|e| (e.message.clone().unwrap_or_default(), e.count.unwrap_or(1)))
        .collect();
    messages.sort();
    assert_eq!(messages.len(), 2, "{messages:?}");
    assert!(messages[0].0.contains("does not exist"), "{messages:?}");
    assert!(messages[1].0.contains("is not issued"), "{messages:?}");
    assert!(
        messages.iter().all(|(_, count)| *count == 1),
        "{messages:?}"
    );
    let reasons = service_event_reasons(client, env.namespace(), "web").await;
    assert!(
        !reasons.contains(&"InvalidConfiguration".to_owned()),
        "{reasons:?}"
    );
}

#[tokio::test]
async fn a_busy_load_balancer_is_retried_with_growing_delays() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    let lb = FakeLb::new(&env);
    {
        let mut state = lb.state();
        for _ in 0..5 {
            // The hint is shorter than the backoff (200 ms doubling): the backoff wins.
            state.ensure_errors.push_back(provider::Error::retry(
                "load balancer locked",
                Duration::from_millis(100),
            ));
        }
    }
    let started = std::time::Instant::now();
    start(&env, &lb);
    create_service(&env, "web", "LoadBalancer").await;
    let ips = wait_ingress(&env, "web").await;
    assert!(!ips.is_empty());
    assert_eq!(lb.ensures("web").len(), 6);
    // 200 + 400 + 800 + 1600 + 2000 (capped) ms of backoff at least.
    assert!(
        started.elapsed() >= Duration::from_millis(5000),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        env.metrics
            .retry_count("service", cloud_provider::Category::Transient),
        5
    );
}

#[tokio::test]
async fn the_autoscaler_taint_removes_a_node_from_the_targets() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n2 = &*env.name("n2");
    let client = &env.client;
    let n1_node = node(&env, n1).await;
    let n2_node = node(&env, n2).await;
    env.wait_cached(&n1_node).await;
    env.wait_cached(&n2_node).await;
    create_service(&env, "web", "LoadBalancer").await;
    let lb = FakeLb::new(&env);
    start(&env, &lb);
    wait_ingress(&env, "web").await;
    assert_eq!(lb.ensures("web"), [vec![n1.to_owned(), n2.to_owned()]]);

    let nodes: Api<Node> = Api::all(client.clone());
    nodes
        .patch(
            n2,
            &PatchParams::default(),
            &Patch::Merge(json!({"spec": {"taints": [
                {"key": "ToBeDeletedByClusterAutoscaler", "value": "1", "effect": "NoSchedule"}
            ]}})),
        )
        .await
        .unwrap();
    eventually("n2 left out", WAIT, || async {
        (lb.updates("web").last() == Some(&vec![n1.to_owned()])).then_some(())
    })
    .await;
}

#[tokio::test]
async fn a_load_balancer_not_found_on_a_target_update_is_ensured_again_without_an_error() {
    let env = Env::start().await;
    let n1 = &*env.name("n1");
    let n2 = &*env.name("n2");
    let client = &env.client;
    let n1_node = node(&env, n1).await;
    env.wait_cached(&n1_node).await;
    create_service(&env, "web", "LoadBalancer").await;
    let lb = FakeLb::new(&env);
    start(&env, &lb);
    wait_ingress(&env, "web").await;
    assert_eq!(lb.ensures("web"), [vec![n1.to_owned()]]);

    // Deleted behind the controller's back: the next target update finds nothing.
    {
        let mut state = lb.state();
        state.existing.remove(&lb.key("web"));
        state
            .update_errors
            .push_back(provider::Error::not_found_msg(
                "service default/web: load balancer \"web\"",
            ));
    }
    node(&env, n2).await;
    eventually("ensured again with both nodes", WAIT, || async {
        (lb.ensures("web").len() == 2).then_some(())
    })
    .await;
    assert_eq!(lb.updates("web"), [vec![n1.to_owned(), n2.to_owned()]]);
    assert_eq!(lb.ensures("web")[1], [n1.to_owned(), n2.to_owned()]);
    let reasons = service_event_reasons(client, env.namespace(), "web").await;
    for absent in ["UpdateLoadBalancerFailed", "SyncLoadBalancerFailed"] {
        assert!(!reasons.contains(&absent.to_owned()), "{reasons:?}");
    }
    assert_eq!(
        env.metrics
            .retry_count("service", cloud_provider::Category::NotFound),
        0
    );
}

/// `spec.loadBalancerClass` (owned classes, the apiserver's immutability) and the ingress
/// `ipMode` as the apiserver stores them.
mod class_and_ip_mode;
mod recovery;
