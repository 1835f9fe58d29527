//! The pass of `hcloud-ccm plan`: what the controllers would change right now, without changing
//! anything.
//!
//! [`run`] takes one snapshot of the cluster (Nodes, Services) and runs each controller's read
//! step (the provider's read-only questions: instance metadata, existence, shutdown state, the
//! routes list, [`LoadBalancer::plan_load_balancer`]) and the same decision functions the
//! controllers run ([`crate::node::decisions`], [`crate::nodelifecycle::decide`] with the
//! deletion brake's memory after one pass, [`ServiceDecision::steps`],
//! [`crate::route::decisions::decide`]). Each decision renders itself ([`Planned`]); this module
//! only collects them into a [`ClusterPlan`]. Nothing here writes to Kubernetes or to the cloud,
//! and no event is recorded.

use std::fmt::Write as _;
use std::sync::Arc;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, Service};
use serde::Serialize;

pub use crate::change::{Change, Planned, Verb, Warning, Write};
use crate::events::error_chain;
use crate::node::NodeSyncError;
use crate::node::decisions::{decide as node_decide, is_uninitialized};
use crate::nodelifecycle::{
    LifecycleDecision, LifecycleError, NodeLifecycleControllerConfig, Reading, brake, decide, read,
};
use crate::provider::{CloudProvider, InstanceMetadata, Instances, LoadBalancer, Routes};
use crate::route::decisions as route_decisions;
use crate::service::decisions::{
    ServiceDecision, ServiceStep, current_status, finalizer_change, ingress_text, service_key,
    should_enqueue_added, status_change, status_write,
};
use crate::service::{NodeFilter, OwnedClass};

/// The plan for one object (a Node, a Service) or for the routes of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ObjectPlan {
    /// `Node`, `Service` or `Routes`.
    pub kind: String,
    /// Node name, `namespace/name` of a Service, or the cluster name for routes.
    pub name: String,
    /// What would change, in order.
    pub changes: Vec<Change>,
    /// The writes that carry the changes out (one Kubernetes patch may carry several).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub writes: Vec<Write>,
    /// Warnings the controllers would record.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<Warning>,
    /// Questions that could not be answered; the controller would fail (and retry) here.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<String>,
}

impl ObjectPlan {
    fn new(kind: &str, name: impl Into<String>) -> Self {
        Self {
            kind: kind.to_owned(),
            name: name.into(),
            ..Self::default()
        }
    }

    fn is_empty(&self) -> bool {
        self.changes.is_empty() && self.warnings.is_empty() && self.errors.is_empty()
    }

    fn extend(&mut self, changes: Vec<Change>, writes: Vec<Write>, warnings: Vec<Warning>) {
        self.changes.extend(changes);
        self.writes.extend(writes);
        self.warnings.extend(warnings);
    }

    fn add(&mut self, planned: Planned) {
        self.extend(planned.changes, planned.writes, planned.warnings);
    }

    /// One change and the write that carries it out.
    fn extend_one(&mut self, change: Option<(Change, Write)>) {
        if let Some((change, write)) = change {
            self.changes.push(change);
            self.writes.push(write);
        }
    }
}

/// Everything the controllers would do now.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ClusterPlan {
    /// Objects with changes, warnings or errors (objects already as wanted are left out).
    pub objects: Vec<ObjectPlan>,
    /// Controllers that were not planned and why (e.g. the provider has no routes).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub skipped: Vec<String>,
}

impl ClusterPlan {
    /// Number of changes over all objects.
    pub fn change_count(&self) -> usize {
        self.objects.iter().map(|o| o.changes.len()).sum()
    }

    /// Number of errors over all objects.
    pub fn error_count(&self) -> usize {
        self.objects.iter().map(|o| o.errors.len()).sum()
    }

    fn push(&mut self, object: ObjectPlan) {
        if !object.is_empty() {
            self.objects.push(object);
        }
    }

    /// The plan for people: one block per object, then a summary line.
    pub fn render_text(&self) -> String {
        let mut out = String::new();
        for object in &self.objects {
            let _ = writeln!(out, "{} {}", object.kind, object.name);
            for change in &object.changes {
                let verb = match change.verb {
                    Verb::Create => "create ",
                    Verb::Delete => "delete ",
                    Verb::Add | Verb::Change | Verb::Remove => "",
                };
                let _ = write!(out, "  {} {verb}{}", change.verb.symbol(), change.target);
                match (&change.from, &change.to) {
                    (Some(from), Some(to)) => {
                        let _ = write!(out, ": {from} -> {to}");
                    }
                    (None, Some(to)) => {
                        let _ = write!(out, ": {to}");
                    }
                    (Some(from), None) => {
                        let _ = write!(out, " (was {from})");
                    }
                    (None, None) => {}
                }
                out.push('\n');
            }
            for warning in &object.warnings {
                let _ = writeln!(out, "  ! {}: {}", warning.reason, warning.message);
            }
            for error in &object.errors {
                let _ = writeln!(out, "  ✗ error: {error}");
            }
            out.push('\n');
        }
        for skipped in &self.skipped {
            let _ = writeln!(out, "not planned: {skipped}");
        }
        let changes = self.change_count();
        let errors = self.error_count();
        if changes == 0 && errors == 0 {
            out.push_str(
                "No changes: Nodes, Services and routes are as the controllers want them.\n",
            );
        } else {
            let with_changes = self
                .objects
                .iter()
                .filter(|o| !o.changes.is_empty())
                .count();
            let _ = writeln!(
                out,
                "Plan: {changes} change(s) on {with_changes} object(s), {errors} error(s)."
            );
        }
        out
    }
}

/// Which controllers to plan, and their settings.
#[derive(Clone, Debug)]
pub struct PlannedControllers {
    /// `--cluster-name`.
    pub cluster_name: String,
    /// The cloud node controller runs (initialization, labels, addresses).
    pub node: bool,
    /// The cloud node lifecycle controller runs (Node deletion, shutdown taint).
    pub node_lifecycle: bool,
    /// Its settings (the deletion brake).
    pub node_lifecycle_config: NodeLifecycleControllerConfig,
    /// The service controller runs.
    pub service: bool,
    /// The `spec.loadBalancerClass` the service controller owns (default: none).
    pub load_balancer_class: OwnedClass,
    /// Which Nodes back the load balancers (the service controller's setting).
    pub load_balancer_nodes: NodeFilter,
    /// The reader of the TLS Secrets load balancers are made from, when the service
    /// controller reads them ([`crate::ServiceControllerConfig::secrets`]).
    pub secrets: Option<Arc<dyn crate::secrets::TlsSecrets>>,
    /// The route controller runs, with these cluster CIDRs.
    pub routes: Option<Vec<IpNet>>,
}

impl Default for PlannedControllers {
    fn default() -> Self {
        Self {
            cluster_name: "kubernetes".to_owned(),
            node: true,
            node_lifecycle: true,
            node_lifecycle_config: NodeLifecycleControllerConfig::default(),
            service: true,
            load_balancer_class: OwnedClass::default(),
            load_balancer_nodes: NodeFilter::default(),
            secrets: None,
            routes: None,
        }
    }
}

/// What the controllers would change for `nodes` and `services`, asking `provider` reads only.
pub async fn run(
    provider: &dyn CloudProvider,
    nodes: &[Arc<Node>],
    services: &[Arc<Service>],
    options: &PlannedControllers,
) -> ClusterPlan {
    let mut out = ClusterPlan::default();
    let mut nodes: Vec<Arc<Node>> = nodes.to_vec();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    match provider.instances() {
        Some(instances) if options.node || options.node_lifecycle => {
            let lifecycle = if options.node_lifecycle {
                plan_lifecycle(instances.as_ref(), &nodes, &options.node_lifecycle_config).await
            } else {
                nodes
                    .iter()
                    .map(|_| Ok(LifecycleDecision::Nothing))
                    .collect()
            };
            for (node, decision) in nodes.iter().zip(lifecycle) {
                let name = name_of(node);
                let mut object = ObjectPlan::new("Node", name.clone());
                let deletes = match decision {
                    Ok(decision) => {
                        object.add(decision.planned(&name));
                        decision.deletes()
                    }
                    Err(err) => {
                        object.errors.push(error_chain(&err));
                        false
                    }
                };
                // A Node that goes away needs no labels or addresses (and its metadata
                // lookup fails: its server is gone).
                if options.node && !deletes {
                    plan_node(instances.as_ref(), node, &mut object).await;
                }
                out.push(object);
            }
        }
        Some(_) => {}
        None => out
            .skipped
            .push("Nodes: the provider offers no instances".to_owned()),
    }

    if options.service {
        match provider.load_balancer() {
            Some(lb) => {
                let targets = options.load_balancer_nodes.select(&nodes);
                // Whether a Service still exists is answered from the listing, as the
                // controller answers it from its informer.
                lb.use_services(Arc::new(crate::provider::ListedServices::of(
                    services.iter().map(AsRef::as_ref),
                )));
                if let Some(secrets) = &options.secrets {
                    lb.use_secrets(secrets.clone());
                }
                let mut services: Vec<&Arc<Service>> = services.iter().collect();
                services.sort_by_key(|s| service_key(s));
                for service in services {
                    let class = &options.load_balancer_class;
                    if !should_enqueue_added(service, class) {
                        continue;
                    }
                    let Some(decision) = ServiceDecision::of(service, class) else {
                        continue;
                    };
                    let object =
                        plan_service(lb.as_ref(), options, service, decision, &targets).await;
                    out.push(object);
                }
            }
            None => out
                .skipped
                .push("Services: the provider offers no load balancers".to_owned()),
        }
    }

    if let Some(cluster_cidrs) = &options.routes {
        match provider.routes() {
            Some(routes) => {
                let object = plan_routes(
                    routes.as_ref(),
                    &options.cluster_name,
                    &nodes,
                    cluster_cidrs,
                )
                .await;
                out.push(object);
            }
            None => out
                .skipped
                .push("routes: the provider offers no routes".to_owned()),
        }
    }
    out
}

fn name_of(node: &Node) -> String {
    node.metadata.name.clone().unwrap_or_default()
}

async fn metadata(
    instances: &dyn Instances,
    node: &Node,
    object: &mut ObjectPlan,
) -> Option<InstanceMetadata> {
    match instances.instance_metadata(node).await {
        Ok(Some(metadata)) => Some(metadata),
        Ok(None) => None,
        Err(err) => {
            // The Warning the controller records for this failure, when the provider gave one.
            object.warnings.extend(err.warning().cloned());
            object
                .errors
                .push(error_chain(&NodeSyncError::Metadata(err)));
            None
        }
    }
}

/// The cloud node controller: the initialization of a tainted Node, else the GA labels and
/// the periodic address refresh; the controller's own [`node::decisions::decide`].
async fn plan_node(instances: &dyn Instances, node: &Node, object: &mut ObjectPlan) {
    let metadata = metadata(instances, node, object).await;
    if metadata.is_none() && is_uninitialized(node) && object.errors.is_empty() {
        object.warnings.push(Warning::new(
            "NoMetadata",
            "the cloud has no metadata for this Node yet; it stays uninitialized",
        ));
        return;
    }
    match node_decide(node, metadata.as_ref()) {
        Ok(decision) => {
            if let Some(err) = &decision.address_error {
                let err = NodeSyncError::Addresses(err.clone());
                object.errors.push(error_chain(&err));
            }
            object.changes.extend(decision.changes(node));
            object.writes.extend(decision.writes(&name_of(node)));
            object.warnings.extend(decision.warnings);
        }
        Err(err) => object.errors.push(error_chain(&NodeSyncError::Init(err))),
    }
}

/// The lifecycle controller over one pass: every Node read as the controller reads it, then
/// decided with the brake's verdict as the controller's memory holds it after that pass (every
/// Node the cloud reports gone recorded once, so the brake counts them all).
async fn plan_lifecycle(
    instances: &dyn Instances,
    nodes: &[Arc<Node>],
    config: &NodeLifecycleControllerConfig,
) -> Vec<Result<LifecycleDecision, LifecycleError>> {
    let mut readings = Vec::with_capacity(nodes.len());
    for node in nodes {
        readings.push(read(node, instances).await);
    }
    let cloud_nodes = brake::cloud_nodes(
        nodes.iter().map(AsRef::as_ref),
        config.cloud_provider_id_prefix.as_deref(),
    );
    let period = crate::period(config.node_monitor_period);
    let mut memory = brake::DeletionBrake::new(config.deletion_max_share, period);
    let now = tokio::time::Instant::now();
    for (node, reading) in nodes.iter().zip(&readings) {
        if matches!(reading, Ok(Reading::Gone)) {
            memory.gone(&name_of(node), now, cloud_nodes);
        }
    }
    nodes
        .iter()
        .zip(readings)
        .map(|(node, reading)| {
            let reading = reading?;
            let verdict =
                (reading == Reading::Gone).then(|| memory.gone(&name_of(node), now, cloud_nodes));
            Ok(decide(node, reading, verdict, config.deletion_max_share))
        })
        .collect()
}

/// The service controller, for one Service it would act on: the steps the controller takes
/// ([`ServiceDecision::steps`]), each printed, the load balancer's by the provider's plan.
async fn plan_service(
    lb: &dyn LoadBalancer,
    options: &PlannedControllers,
    service: &Service,
    decision: ServiceDecision,
    nodes: &[Arc<Node>],
) -> ObjectPlan {
    let mut object = ObjectPlan::new("Service", service_key(service));
    let cluster_name = options.cluster_name.as_str();
    // The status the load balancer step gives; `None`: known only once the cloud made it.
    let mut new_status = Some(LoadBalancerStatus::default());
    for step in decision.steps(nodes.is_empty()) {
        match step {
            ServiceStep::Event(event) if event.warning => {
                object.warnings.push(event.as_warning());
            }
            ServiceStep::Event(_) => {}
            ServiceStep::Finalizer(verb) => {
                object.extend_one(Some(finalizer_change(service, verb)))
            }
            ServiceStep::DeleteLoadBalancer => {
                match lb.plan_load_balancer_deleted(cluster_name, service).await {
                    Ok(planned) => {
                        object.extend(planned.changes, planned.writes, planned.warnings);
                    }
                    Err(err) => {
                        object.errors.push(format!(
                            "deleting the load balancer would fail: {}",
                            error_chain(&err)
                        ));
                        return object;
                    }
                }
            }
            ServiceStep::EnsureLoadBalancer => {
                match lb.plan_load_balancer(cluster_name, service, nodes).await {
                    Ok(planned) => {
                        object.extend(planned.changes, planned.writes, planned.warnings);
                        new_status = planned.status;
                    }
                    Err(err) => {
                        object.errors.push(if err.is_not_implemented() {
                            "the provider cannot plan load balancers".to_owned()
                        } else {
                            format!(
                                "ensuring the load balancer would fail: {}",
                                error_chain(&err)
                            )
                        });
                        return object;
                    }
                }
            }
            ServiceStep::WriteStatus => match &new_status {
                Some(status) => object.extend_one(status_change(service, status)),
                None => {
                    object.changes.push(
                        Change::new(Verb::Change, "status.loadBalancer.ingress").values(
                            Some(ingress_text(current_status(service))),
                            Some("the load balancer's addresses, once it has them".to_owned()),
                        ),
                    );
                    object.writes.push(status_write(service));
                }
            },
        }
    }
    object
}

/// The route controller: one reconcile pass against the listed routes.
async fn plan_routes(
    routes: &dyn Routes,
    cluster_name: &str,
    nodes: &[Arc<Node>],
    cluster_cidrs: &[IpNet],
) -> ObjectPlan {
    let mut object = ObjectPlan::new("Routes", cluster_name);
    let listed = match routes.list_routes(cluster_name).await {
        Ok(listed) => listed,
        Err(err) => {
            object
                .errors
                .push(format!("failed to list routes: {}", error_chain(&err)));
            return object;
        }
    };
    let decision = route_decisions::decide(
        nodes,
        &listed,
        cluster_cidrs,
        &|cidr| routes.can_route(cidr),
        &|node| routes.routes_node(node),
    );
    object.add(decision.planned(nodes, &routes.route_writes()));
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Error, LoadBalancerPlan, Outcome, Result, Route};
    use crate::service::decisions::LOAD_BALANCER_CLEANUP_FINALIZER;
    use crate::well_known::{TAINT_SHUTDOWN, TAINT_UNINITIALIZED};
    use async_trait::async_trait;
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, NodeAddress, NodeCondition, NodeSpec, NodeStatus, ServiceSpec,
        ServiceStatus, Taint,
    };
    use parking_lot::Mutex;
    use std::collections::BTreeMap;

    #[derive(Default)]
    struct Fake {
        /// Servers by node name: (exists, shut down).
        servers: BTreeMap<String, (bool, bool)>,
        routes: Vec<Route>,
        lb_plan: Option<LoadBalancerPlan>,
        calls: Mutex<Vec<String>>,
    }

    impl Fake {
        fn call(&self, what: &str) {
            self.calls.lock().push(what.to_owned());
        }
    }

    #[async_trait]
    impl Instances for Fake {
        async fn instance_exists(&self, node: &Node) -> Result<bool> {
            self.call("exists");
            Ok(self.servers.get(&name_of(node)).is_some_and(|s| s.0))
        }
        async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
            self.call("shutdown");
            Ok(self.servers.get(&name_of(node)).is_some_and(|s| s.1))
        }
        async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
            self.call("metadata");
            let name = name_of(node);
            if !self.servers.contains_key(&name) {
                return Err(Error::instance_not_found().with_warning(Warning::new(
                    "NoMatchingServer",
                    format!("no server is {name}'s"),
                )));
            }
            Ok(Some(InstanceMetadata {
                provider_id: format!("fake://{name}"),
                instance_type: "small".to_owned(),
                node_addresses: vec![NodeAddress {
                    type_: "InternalIP".to_owned(),
                    address: "10.0.0.2".to_owned(),
                }],
                zone: "zone-a".to_owned(),
                region: "region".to_owned(),
                additional_labels: BTreeMap::new(),
                warnings: vec![Warning::new(
                    "NodeNameMismatch",
                    format!("{name}'s server has another name"),
                )],
            }))
        }
    }

    #[async_trait]
    impl LoadBalancer for Fake {
        async fn get_load_balancer(
            &self,
            _cluster_name: &str,
            _service: &Service,
        ) -> Result<Option<LoadBalancerStatus>> {
            self.call("get_lb");
            Ok(self.lb_plan.as_ref().and_then(|p| p.status.clone()))
        }
        async fn ensure_load_balancer(
            &self,
            _cluster_name: &str,
            _service: &Service,
            _nodes: &[Arc<Node>],
        ) -> Result<Outcome<LoadBalancerStatus>> {
            self.call("WRITE ensure");
            Ok(Outcome::Done(LoadBalancerStatus::default()))
        }
        async fn update_load_balancer(
            &self,
            _cluster_name: &str,
            _service: &Service,
            _nodes: &[Arc<Node>],
        ) -> Result<Outcome<()>> {
            self.call("WRITE update");
            Ok(Outcome::Done(()))
        }
        async fn ensure_load_balancer_deleted(
            &self,
            _cluster_name: &str,
            _service: &Service,
        ) -> Result<Outcome<()>> {
            self.call("WRITE delete");
            Ok(Outcome::Done(()))
        }
        async fn plan_load_balancer(
            &self,
            _cluster_name: &str,
            _service: &Service,
            _nodes: &[Arc<Node>],
        ) -> Result<LoadBalancerPlan> {
            self.call("plan_lb");
            self.lb_plan.clone().ok_or(Error::not_implemented())
        }
    }

    #[async_trait]
    impl Routes for Fake {
        async fn list_routes(&self, _cluster_name: &str) -> Result<Vec<Route>> {
            self.call("list_routes");
            Ok(self.routes.clone())
        }
        async fn create_route(&self, _: &str, _: &str, _: &Route) -> Result<()> {
            self.call("WRITE create_route");
            Ok(())
        }
        async fn delete_route(&self, _: &str, _: &Route) -> Result<()> {
            self.call("WRITE delete_route");
            Ok(())
        }
    }

    struct FakeProvider(Arc<Fake>);

    #[async_trait]
    impl CloudProvider for FakeProvider {
        fn provider_name(&self) -> &str {
            "fake"
        }
        fn instances(&self) -> Option<Arc<dyn Instances>> {
            Some(self.0.clone())
        }
        fn load_balancer(&self) -> Option<Arc<dyn LoadBalancer>> {
            Some(self.0.clone())
        }
        fn routes(&self) -> Option<Arc<dyn Routes>> {
            Some(self.0.clone())
        }
    }

    fn node(name: &str, ready: &str, taints: Vec<Taint>, provider_id: Option<&str>) -> Arc<Node> {
        // A pod CIDR of its own per Node: 10.244.<len of name>.0/24.
        let pod_cidr = format!("10.244.{}.0/24", name.len());
        let mut node = Node::default();
        node.metadata.name = Some(name.to_owned());
        node.metadata.uid = Some(format!("uid-{name}"));
        node.spec = Some(NodeSpec {
            taints: Some(taints),
            provider_id: provider_id.map(str::to_owned),
            pod_cidr: Some(pod_cidr.clone()),
            pod_cidrs: Some(vec![pod_cidr]),
            ..NodeSpec::default()
        });
        node.status = Some(NodeStatus {
            conditions: Some(vec![NodeCondition {
                type_: "Ready".to_owned(),
                status: ready.to_owned(),
                ..NodeCondition::default()
            }]),
            addresses: Some(vec![NodeAddress {
                type_: "InternalIP".to_owned(),
                address: "10.0.0.2".to_owned(),
            }]),
            ..NodeStatus::default()
        });
        Arc::new(node)
    }

    fn uninitialized() -> Taint {
        Taint {
            key: TAINT_UNINITIALIZED.to_owned(),
            value: Some("true".to_owned()),
            effect: "NoSchedule".to_owned(),
            ..Taint::default()
        }
    }

    fn lb_service(ingress: Option<&str>, finalizer: bool) -> Arc<Service> {
        let mut service = Service::default();
        service.metadata.name = Some("web".to_owned());
        service.metadata.namespace = Some("default".to_owned());
        service.metadata.uid = Some("svc-uid".to_owned());
        if finalizer {
            service.metadata.finalizers = Some(vec![LOAD_BALANCER_CLEANUP_FINALIZER.to_owned()]);
        }
        service.spec = Some(ServiceSpec {
            type_: Some("LoadBalancer".to_owned()),
            ..ServiceSpec::default()
        });
        service.status = Some(ServiceStatus {
            load_balancer: Some(LoadBalancerStatus {
                ingress: ingress.map(|ip| {
                    vec![LoadBalancerIngress {
                        ip: Some(ip.to_owned()),
                        ..LoadBalancerIngress::default()
                    }]
                }),
            }),
            ..ServiceStatus::default()
        });
        Arc::new(service)
    }

    fn status(ip: &str) -> LoadBalancerStatus {
        LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some(ip.to_owned()),
                ..LoadBalancerIngress::default()
            }]),
        }
    }

    fn route(cidr: &str, node: &str) -> Route {
        Route {
            name: String::new(),
            target_node: node.to_owned(),
            target_provider_id: String::new(),
            destination_cidr: cidr.parse().unwrap_or_else(|_| IpNet::default()),
            blackhole: node.is_empty(),
            enable_node_addresses: false,
            target_node_addresses: Vec::new(),
        }
    }

    /// A fake whose load balancer plan changes nothing and reports ingress 192.0.2.1.
    fn answering_load_balancer() -> Arc<Fake> {
        Arc::new(Fake {
            lb_plan: Some(LoadBalancerPlan {
                status: Some(status("192.0.2.1")),
                ..LoadBalancerPlan::default()
            }),
            ..Fake::default()
        })
    }

    fn options() -> PlannedControllers {
        PlannedControllers {
            routes: Some(vec!["10.244.0.0/16".parse().unwrap_or_default()]),
            ..PlannedControllers::default()
        }
    }

    fn writes(fake: &Fake) -> Vec<String> {
        fake.calls
            .lock()
            .iter()
            .filter(|c| c.starts_with("WRITE"))
            .cloned()
            .collect()
    }

    #[tokio::test]
    async fn a_settled_cluster_plans_nothing() {
        let fake = Arc::new(Fake {
            servers: [("n1".to_owned(), (true, false))].into(),
            routes: vec![route("10.244.2.0/24", "n1")],
            lb_plan: Some(LoadBalancerPlan {
                status: Some(status("192.0.2.1")),
                ..LoadBalancerPlan::default()
            }),
            ..Fake::default()
        });
        let mut n1 = node("n1", "True", Vec::new(), Some("fake://n1"));
        if let Some(status) = Arc::make_mut(&mut n1).status.as_mut() {
            status
                .conditions
                .get_or_insert_default()
                .push(NodeCondition {
                    type_: "NetworkUnavailable".to_owned(),
                    status: "False".to_owned(),
                    reason: Some("RouteCreated".to_owned()),
                    ..NodeCondition::default()
                });
        }
        let provider = FakeProvider(fake.clone());
        let plan = run(
            &provider,
            &[n1],
            &[lb_service(Some("192.0.2.1"), true)],
            &options(),
        )
        .await;
        assert_eq!(plan, ClusterPlan::default(), "{}", plan.render_text());
        assert!(plan.render_text().starts_with("No changes"));
        assert!(writes(&fake).is_empty());
        // It did ask: the LB plan and the routes list.
        let calls = fake.calls.lock().clone();
        assert!(calls.contains(&"plan_lb".to_owned()) && calls.contains(&"list_routes".to_owned()));
    }

    #[tokio::test]
    async fn every_controller_reports_its_changes_without_writing() {
        let fake = Arc::new(Fake {
            servers: [
                ("new".to_owned(), (true, false)),
                ("off".to_owned(), (true, true)),
            ]
            .into(),
            routes: vec![route("10.244.9.0/24", "")],
            lb_plan: Some(LoadBalancerPlan {
                changes: vec![
                    Change::new(
                        Verb::Change,
                        "change algorithm round_robin -> least_connections",
                    ),
                    Change::new(Verb::Add, "add target server 7"),
                ],
                writes: Vec::new(),
                warnings: vec![Warning::new("MaxTargetsReached", "too many")],
                status: Some(status("192.0.2.1")),
            }),
            ..Fake::default()
        });
        let nodes = vec![
            node("new", "Unknown", vec![uninitialized()], None),
            node("off", "False", Vec::new(), Some("fake://off")),
            node("gone", "Unknown", Vec::new(), Some("fake://gone")),
        ];
        let provider = FakeProvider(fake.clone());
        let plan = run(&provider, &nodes, &[lb_service(None, false)], &options()).await;
        let text = plan.render_text();
        let find = |kind: &str, name: &str| {
            plan.objects
                .iter()
                .find(|o| o.kind == kind && o.name == name)
                .cloned()
                .unwrap_or_default()
        };
        let new = find("Node", "new");
        assert!(
            new.changes.contains(
                &Change::new(Verb::Add, "spec.providerID").values(None, Some("fake://new".into()))
            ),
            "{text}"
        );
        assert!(
            new.changes
                .iter()
                .any(|c| c.verb == Verb::Remove && c.target.contains(TAINT_UNINITIALIZED))
        );
        assert!(
            new.changes
                .iter()
                .any(|c| c.target == "label topology.kubernetes.io/zone"
                    && c.to.as_deref() == Some("zone-a"))
        );
        // The initialization's Warning, from the decision the controller applies.
        assert_eq!(
            new.warnings,
            [Warning::new(
                "NodeNameMismatch",
                "new's server has another name"
            )],
            "{text}"
        );
        assert!(
            text.contains("! NodeNameMismatch: new's server has another name"),
            "{text}"
        );
        let off = find("Node", "off");
        assert!(off.warnings.is_empty(), "initialized: {text}");
        assert_eq!(off.changes[0].verb, Verb::Add, "{text}");
        assert!(off.changes[0].target.contains(TAINT_SHUTDOWN));
        let gone = find("Node", "gone");
        assert!(
            gone.changes
                .iter()
                .any(|c| c.verb == Verb::Delete && c.target == "node"),
            "{text}"
        );

        let web = find("Service", "default/web");
        assert_eq!(web.changes.len(), 4, "{text}");
        assert_eq!(web.changes[0].verb, Verb::Add);
        assert!(
            web.changes[0]
                .target
                .contains(LOAD_BALANCER_CLEANUP_FINALIZER)
        );
        assert_eq!(web.changes[3].to.as_deref(), Some("192.0.2.1"));
        assert_eq!(web.warnings[0].reason, "MaxTargetsReached");

        let routes = find("Routes", "kubernetes");
        assert!(
            routes
                .changes
                .iter()
                .any(|c| c.verb == Verb::Delete && c.target.contains("10.244.9.0/24")),
            "{text}"
        );
        assert!(
            routes
                .changes
                .iter()
                .any(|c| c.verb == Verb::Create && c.target.contains("10.244.4.0/24 via node gone")),
            "{text}"
        );
        // The Node not initialised yet: its route waits for it, as in the controller.
        assert!(
            !routes
                .changes
                .iter()
                .any(|c| c.target.contains("via node new")),
            "{text}"
        );
        assert!(plan.change_count() > 8);
        assert!(text.contains("Plan: "), "{text}");
        assert!(writes(&fake).is_empty(), "{:?}", writes(&fake));
    }

    #[tokio::test]
    async fn failures_are_errors_and_a_removed_load_balancer_is_a_delete() {
        let fake = answering_load_balancer();
        // Tainted Node whose server the fake does not know: metadata fails.
        let nodes = vec![node("lost", "True", vec![uninitialized()], None)];
        let mut cluster_ip = (*lb_service(Some("192.0.2.1"), true)).clone();
        if let Some(spec) = cluster_ip.spec.as_mut() {
            spec.type_ = Some("ClusterIP".to_owned());
        }
        let provider = FakeProvider(fake.clone());
        let plan = run(&provider, &nodes, &[Arc::new(cluster_ip)], &options()).await;
        assert_eq!(plan.error_count(), 1, "{}", plan.render_text());
        // The provider's Warning for the lookup is the one the controller records.
        assert_eq!(
            plan.objects[0].warnings,
            [Warning::new("NoMatchingServer", "no server is lost's")]
        );
        let web = &plan
            .objects
            .iter()
            .find(|o| o.kind == "Service")
            .cloned()
            .unwrap_or_default();
        let actions: Vec<Verb> = web.changes.iter().map(|c| c.verb).collect();
        assert_eq!(actions, [Verb::Delete, Verb::Remove, Verb::Change]);
        assert!(writes(&fake).is_empty());
        let json = serde_json::to_value(&plan).unwrap_or_default();
        assert_eq!(json["objects"][0]["kind"], "Node");
        assert_eq!(json["objects"][1]["changes"][0]["action"], "delete");
    }

    #[tokio::test]
    async fn only_services_of_the_owned_class_are_planned() {
        let fake = answering_load_balancer();
        let provider = FakeProvider(fake.clone());
        let classed = |name: &str, class: Option<&str>| {
            let mut service = (*lb_service(None, false)).clone();
            service.metadata.name = Some(name.to_owned());
            if let Some(spec) = service.spec.as_mut() {
                spec.load_balancer_class = class.map(str::to_owned);
            }
            Arc::new(service)
        };
        let services = [
            classed("classless", None),
            classed("ours", Some("example.com/hcloud")),
            classed("other", Some("example.com/other")),
        ];
        let planned = |plan: &ClusterPlan| -> Vec<String> {
            plan.objects
                .iter()
                .filter(|o| o.kind == "Service")
                .map(|o| o.name.clone())
                .collect()
        };
        let unset = run(&provider, &[], &services, &PlannedControllers::default()).await;
        assert_eq!(planned(&unset), ["default/classless"]);
        let owning = PlannedControllers {
            load_balancer_class: OwnedClass::named("example.com/hcloud"),
            ..PlannedControllers::default()
        };
        let set = run(&provider, &[], &services, &owning).await;
        assert_eq!(planned(&set), ["default/ours"], "{}", set.render_text());
        assert!(writes(&fake).is_empty());
    }
}
