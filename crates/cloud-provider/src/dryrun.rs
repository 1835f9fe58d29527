//! Dry runs: what the controllers would change right now, without changing anything.
//!
//! [`plan`] takes one snapshot of the cluster (Nodes, Services) and asks the provider only
//! read-only questions (instance metadata, existence, shutdown state, the routes list and
//! [`LoadBalancer::plan_load_balancer`]). It feeds the answers to the same decision functions the
//! controllers run ([`crate::node::decisions`], [`crate::nodelifecycle::decide`],
//! [`crate::service::decisions`], [`crate::route::decisions::plan`]) and collects what they would
//! write as a [`ClusterPlan`]. Nothing here writes to Kubernetes or to the cloud, and no event is
//! recorded.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{LoadBalancerStatus, Node, NodeAddress, Service, Taint};
use serde::Serialize;

use crate::events::error_chain;
use crate::node::addresses::{current_addresses, desired_addresses};
use crate::node::decisions::{is_uninitialized, plan_initialization, reconcile_labels};
use crate::nodelifecycle::decisions::TaintChange;
use crate::nodelifecycle::{LifecycleAction, decide};
use crate::provider::{CloudProvider, InstanceMetadata, Instances, LoadBalancer, Routes};
use crate::route::decisions as route_decisions;
use crate::service::decisions::{
    LOAD_BALANCER_CLEANUP_FINALIZER, current_status, has_finalizer, load_balancer_status_equal,
    needs_cleanup, select_nodes, service_key, should_enqueue_added, wants_load_balancer,
};
use crate::well_known::{TAINT_SHUTDOWN, TAINT_UNINITIALIZED};

/// What kind of change a line of the plan is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Action {
    /// Something is added (a label, a taint, a finalizer, a route).
    Add,
    /// A value changes.
    Change,
    /// Something is removed from an object (a taint, a finalizer).
    Remove,
    /// A cloud resource is created.
    Create,
    /// An object or a cloud resource is deleted.
    Delete,
}

impl Action {
    fn symbol(self) -> char {
        match self {
            Self::Add | Self::Create => '+',
            Self::Change => '~',
            Self::Remove | Self::Delete => '-',
        }
    }
}

/// One change a controller would make.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Change {
    /// Add, change, remove, create or delete.
    pub action: Action,
    /// What changes, e.g. `label topology.kubernetes.io/region` or `load balancer`.
    pub target: String,
    /// The current value, when there is one worth showing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
    /// The new value, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to: Option<String>,
}

impl Change {
    fn new(action: Action, target: impl Into<String>) -> Self {
        Self {
            action,
            target: target.into(),
            from: None,
            to: None,
        }
    }

    fn values(mut self, from: Option<String>, to: Option<String>) -> Self {
        self.from = from;
        self.to = to;
        self
    }
}

/// A Warning the controllers would record on the object.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Warning {
    /// The event reason.
    pub reason: String,
    /// The event message.
    pub message: String,
}

/// The plan for one object (a Node, a Service) or for the routes of the cluster.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ObjectPlan {
    /// `Node`, `Service` or `Routes`.
    pub kind: String,
    /// Node name, `namespace/name` of a Service, or the cluster name for routes.
    pub name: String,
    /// What would change, in order.
    pub changes: Vec<Change>,
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
                let verb = match change.action {
                    Action::Create => "create ",
                    Action::Delete => "delete ",
                    Action::Add | Action::Change | Action::Remove => "",
                };
                let _ = write!(out, "  {} {verb}{}", change.action.symbol(), change.target);
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
pub struct DryRunOptions {
    /// `--cluster-name`.
    pub cluster_name: String,
    /// The cloud node controller runs (initialization, labels, addresses).
    pub node: bool,
    /// The cloud node lifecycle controller runs (Node deletion, shutdown taint).
    pub node_lifecycle: bool,
    /// The service controller runs.
    pub service: bool,
    /// The route controller runs, with these cluster CIDRs.
    pub routes: Option<Vec<IpNet>>,
}

impl Default for DryRunOptions {
    fn default() -> Self {
        Self {
            cluster_name: "kubernetes".to_owned(),
            node: true,
            node_lifecycle: true,
            service: true,
            routes: None,
        }
    }
}

/// What the controllers would change for `nodes` and `services`, asking `provider` reads only.
pub async fn plan(
    provider: &dyn CloudProvider,
    nodes: &[Arc<Node>],
    services: &[Arc<Service>],
    options: &DryRunOptions,
) -> ClusterPlan {
    let mut out = ClusterPlan::default();
    let mut nodes: Vec<Arc<Node>> = nodes.to_vec();
    nodes.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));

    match provider.instances() {
        Some(instances) if options.node || options.node_lifecycle => {
            for node in &nodes {
                let mut object = ObjectPlan::new("Node", name_of(node));
                let deleted = options.node_lifecycle
                    && plan_lifecycle(instances.as_ref(), node, &mut object).await;
                // A Node that goes away needs no labels or addresses (and its metadata
                // lookup fails: its server is gone).
                if options.node && !deleted {
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
                let targets = select_nodes(&nodes);
                let mut services: Vec<&Arc<Service>> = services.iter().collect();
                services.sort_by_key(|s| service_key(s));
                for service in services {
                    if !should_enqueue_added(service) {
                        continue;
                    }
                    let object =
                        plan_service(lb.as_ref(), &options.cluster_name, service, &targets).await;
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

fn taint_text(taint: &Taint) -> String {
    match taint.value.as_deref() {
        Some(value) if !value.is_empty() => format!("{}={}:{}", taint.key, value, taint.effect),
        _ => format!("{}:{}", taint.key, taint.effect),
    }
}

fn addresses_text(addresses: &[NodeAddress]) -> String {
    if addresses.is_empty() {
        return "(none)".to_owned();
    }
    addresses
        .iter()
        .map(|a| format!("{}={}", a.type_, a.address))
        .collect::<Vec<_>>()
        .join(", ")
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
            object.errors.push(format!(
                "failed to get instance metadata: {}",
                error_chain(&err)
            ));
            None
        }
    }
}

fn address_change(node: &Node, cloud: &[NodeAddress], object: &mut ObjectPlan) {
    match desired_addresses(node, cloud) {
        Ok(Some(wanted)) => {
            object
                .changes
                .push(Change::new(Action::Change, "status.addresses").values(
                    Some(addresses_text(current_addresses(node))),
                    Some(addresses_text(&wanted)),
                ))
        }
        Ok(None) => {}
        Err(err) => object
            .errors
            .push(format!("failed to reconcile node addresses: {err}")),
    }
}

/// The cloud node controller: initialization of a tainted Node, else the GA labels and the
/// periodic address refresh.
async fn plan_node(instances: &dyn Instances, node: &Node, object: &mut ObjectPlan) {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    let label_change = |key: &str, value: &str| {
        Change::new(
            if labels.contains_key(key) {
                Action::Change
            } else {
                Action::Add
            },
            format!("label {key}"),
        )
        .values(labels.get(key).cloned(), Some(value.to_owned()))
    };

    if !is_uninitialized(node) {
        for (key, value) in reconcile_labels(node) {
            object.changes.push(label_change(&key, &value));
        }
        if let Some(metadata) = metadata(instances, node, object).await {
            address_change(node, &metadata.node_addresses, object);
        }
        return;
    }

    let Some(metadata) = metadata(instances, node, object).await else {
        if object.errors.is_empty() {
            object.warnings.push(Warning {
                reason: "NoMetadata".to_owned(),
                message: "the cloud has no metadata for this Node yet; it stays uninitialized"
                    .to_owned(),
            });
        }
        return;
    };
    let init = match plan_initialization(node, &metadata) {
        Ok(init) => init,
        Err(err) => {
            object
                .errors
                .push(format!("failed to initialize node: {err}"));
            return;
        }
    };
    if let Some(provider_id) = &init.provider_id {
        object.changes.push(
            Change::new(Action::Add, "spec.providerID").values(None, Some(provider_id.clone())),
        );
    }
    for (key, value) in &init.labels {
        object.changes.push(label_change(key, value));
    }
    for taint in crate::node::decisions::taints(node) {
        if taint.key == TAINT_UNINITIALIZED {
            object.changes.push(Change::new(
                Action::Remove,
                format!("taint {}", taint_text(taint)),
            ));
        }
    }
    // The controller writes the addresses onto the initialized Node.
    let mut initialized = node.clone();
    if let Some(spec) = initialized.spec.as_mut() {
        spec.taints = Some(init.taints.clone());
        if init.provider_id.is_some() {
            spec.provider_id = init.provider_id.clone();
        }
    }
    address_change(&initialized, &metadata.node_addresses, object);
}

/// The cloud node lifecycle controller; whether it would delete the Node.
async fn plan_lifecycle(instances: &dyn Instances, node: &Node, object: &mut ObjectPlan) -> bool {
    let change = match decide(node, instances).await {
        Ok(LifecycleAction::Nothing) => return false,
        Ok(LifecycleAction::DeleteNode) => {
            object
                .changes
                .push(Change::new(Action::Delete, "node").values(
                    None,
                    Some("its instance no longer exists in the cloud".to_owned()),
                ));
            return true;
        }
        Ok(LifecycleAction::ChangeTaint(TaintChange::AddShutdown)) => Action::Add,
        Ok(LifecycleAction::ChangeTaint(TaintChange::RemoveShutdown)) => Action::Remove,
        Err(err) => {
            object.errors.push(error_chain(&err));
            return false;
        }
    };
    object.changes.push(Change::new(
        change,
        format!("taint {TAINT_SHUTDOWN}:NoSchedule"),
    ));
    false
}

fn ingress_text(status: Option<&LoadBalancerStatus>) -> String {
    let list: Vec<String> = status
        .and_then(|s| s.ingress.as_deref())
        .unwrap_or_default()
        .iter()
        .map(|i| {
            i.ip.clone()
                .or_else(|| i.hostname.clone())
                .unwrap_or_default()
        })
        .collect();
    if list.is_empty() {
        "(none)".to_owned()
    } else {
        list.join(", ")
    }
}

/// The service controller, for one Service it would act on.
async fn plan_service(
    lb: &dyn LoadBalancer,
    cluster_name: &str,
    service: &Service,
    nodes: &[Arc<Node>],
) -> ObjectPlan {
    let mut object = ObjectPlan::new("Service", service_key(service));
    let current = current_status(service);
    if !wants_load_balancer(service) || needs_cleanup(service) {
        match lb.get_load_balancer(cluster_name, service).await {
            Ok(Some(_)) => object.changes.push(Change::new(
                Action::Delete,
                format!(
                    "load balancer {:?}",
                    lb.get_load_balancer_name(cluster_name, service)
                ),
            )),
            Ok(None) => {}
            Err(err) => {
                object.errors.push(format!(
                    "failed to look up the load balancer: {}",
                    error_chain(&err)
                ));
                return object;
            }
        }
        if has_finalizer(service) {
            object.changes.push(Change::new(
                Action::Remove,
                format!("finalizer {LOAD_BALANCER_CLEANUP_FINALIZER}"),
            ));
        }
        if !load_balancer_status_equal(current, None) {
            object.changes.push(
                Change::new(Action::Change, "status.loadBalancer.ingress")
                    .values(Some(ingress_text(current)), Some("(none)".to_owned())),
            );
        }
        return object;
    }

    if !has_finalizer(service) {
        object.changes.push(Change::new(
            Action::Add,
            format!("finalizer {LOAD_BALANCER_CLEANUP_FINALIZER}"),
        ));
    }
    match lb.plan_load_balancer(cluster_name, service, nodes).await {
        Ok(planned) => {
            for line in planned.changes {
                let change = if let Some(what) = line.strip_prefix("create ") {
                    Change::new(Action::Create, what)
                } else if let Some(what) = line.strip_prefix("delete ") {
                    Change::new(Action::Delete, what)
                } else {
                    Change::new(Action::Change, line)
                };
                object.changes.push(change);
            }
            object.warnings.extend(
                planned
                    .warnings
                    .into_iter()
                    .map(|(reason, message)| Warning { reason, message }),
            );
            match planned.status {
                Some(status) if !load_balancer_status_equal(current, Some(&status)) => {
                    object.changes.push(
                        Change::new(Action::Change, "status.loadBalancer.ingress").values(
                            Some(ingress_text(current)),
                            Some(ingress_text(Some(&status))),
                        ),
                    );
                }
                Some(_) => {}
                None => object.changes.push(
                    Change::new(Action::Change, "status.loadBalancer.ingress").values(
                        Some(ingress_text(current)),
                        Some("the load balancer's addresses, once it has them".to_owned()),
                    ),
                ),
            }
        }
        Err(err) if err.is_not_implemented() => object
            .errors
            .push("the provider cannot plan load balancers".to_owned()),
        Err(err) => object.errors.push(format!(
            "ensuring the load balancer would fail: {}",
            error_chain(&err)
        )),
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
    let mut planned = route_decisions::plan(nodes, &listed, cluster_cidrs, &|cidr| {
        routes.can_route(cidr)
    });
    for route in &planned.to_delete {
        let via = if route.blackhole || route.target_node.is_empty() {
            "blackhole".to_owned()
        } else {
            format!("via node {}", route.target_node)
        };
        object.changes.push(Change::new(
            Action::Delete,
            format!("route {} ({via})", route.destination_cidr),
        ));
    }
    let creations = planned.to_create.clone();
    for creation in &creations {
        object.changes.push(Change::new(
            Action::Create,
            format!(
                "route {} via node {}",
                creation.route.destination_cidr, creation.node
            ),
        ));
        planned.mark_created(&creation.node, &creation.route.destination_cidr);
    }
    let mut conditions: BTreeMap<String, String> = BTreeMap::new();
    for (node, condition) in route_decisions::condition_writes(nodes, &planned) {
        conditions.insert(node, format!("{} ({})", condition.status, condition.reason));
    }
    for (node, condition) in conditions {
        object.changes.push(
            Change::new(
                Action::Change,
                format!(
                    "node {node} condition {}",
                    route_decisions::CONDITION_NETWORK_UNAVAILABLE
                ),
            )
            .values(None, Some(condition)),
        );
    }
    object
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::{Error, LoadBalancerPlan, Outcome, Result, Route};
    use async_trait::async_trait;
    use k8s_openapi::api::core::v1::{
        LoadBalancerIngress, NodeCondition, NodeSpec, NodeStatus, ServiceSpec, ServiceStatus,
    };
    use std::sync::Mutex;

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
            self.calls
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(what.to_owned());
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
                return Err(Error::instance_not_found());
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

    fn options() -> DryRunOptions {
        DryRunOptions {
            routes: Some(vec!["10.244.0.0/16".parse().unwrap_or_default()]),
            ..DryRunOptions::default()
        }
    }

    fn writes(fake: &Fake) -> Vec<String> {
        fake.calls
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
        let plan = plan(
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
        let calls = fake.calls.lock().unwrap_or_else(|p| p.into_inner()).clone();
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
                    "change algorithm round_robin -> least_connections".to_owned(),
                    "add target server 7".to_owned(),
                ],
                warnings: vec![("MaxTargetsReached".to_owned(), "too many".to_owned())],
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
        let plan = plan(&provider, &nodes, &[lb_service(None, false)], &options()).await;
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
                &Change::new(Action::Add, "spec.providerID")
                    .values(None, Some("fake://new".into()))
            ),
            "{text}"
        );
        assert!(
            new.changes
                .iter()
                .any(|c| c.action == Action::Remove && c.target.contains(TAINT_UNINITIALIZED))
        );
        assert!(
            new.changes
                .iter()
                .any(|c| c.target == "label topology.kubernetes.io/zone"
                    && c.to.as_deref() == Some("zone-a"))
        );
        let off = find("Node", "off");
        assert_eq!(off.changes[0].action, Action::Add, "{text}");
        assert!(off.changes[0].target.contains(TAINT_SHUTDOWN));
        let gone = find("Node", "gone");
        assert!(
            gone.changes
                .iter()
                .any(|c| c.action == Action::Delete && c.target == "node"),
            "{text}"
        );

        let web = find("Service", "default/web");
        assert_eq!(web.changes.len(), 4, "{text}");
        assert_eq!(web.changes[0].action, Action::Add);
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
                .any(|c| c.action == Action::Delete && c.target.contains("10.244.9.0/24")),
            "{text}"
        );
        assert!(
            routes
                .changes
                .iter()
                .any(|c| c.action == Action::Create
                    && c.target.contains("10.244.3.0/24 via node new"))
        );
        assert!(plan.change_count() > 8);
        assert!(text.contains("Plan: "), "{text}");
        assert!(writes(&fake).is_empty(), "{:?}", writes(&fake));
    }

    #[tokio::test]
    async fn failures_are_errors_and_a_removed_load_balancer_is_a_delete() {
        let fake = Arc::new(Fake {
            lb_plan: Some(LoadBalancerPlan {
                status: Some(status("192.0.2.1")),
                ..LoadBalancerPlan::default()
            }),
            ..Fake::default()
        });
        // Tainted Node whose server the fake does not know: metadata fails.
        let nodes = vec![node("lost", "True", vec![uninitialized()], None)];
        let mut cluster_ip = (*lb_service(Some("192.0.2.1"), true)).clone();
        if let Some(spec) = cluster_ip.spec.as_mut() {
            spec.type_ = Some("ClusterIP".to_owned());
        }
        let provider = FakeProvider(fake.clone());
        let plan = plan(&provider, &nodes, &[Arc::new(cluster_ip)], &options()).await;
        assert_eq!(plan.error_count(), 1, "{}", plan.render_text());
        let web = &plan
            .objects
            .iter()
            .find(|o| o.kind == "Service")
            .cloned()
            .unwrap_or_default();
        let actions: Vec<Action> = web.changes.iter().map(|c| c.action).collect();
        assert_eq!(actions, [Action::Delete, Action::Remove, Action::Change]);
        assert!(writes(&fake).is_empty());
        let json = serde_json::to_value(&plan).unwrap_or_default();
        assert_eq!(json["objects"][0]["kind"], "Node");
        assert_eq!(json["objects"][1]["changes"][0]["action"], "delete");
    }
}
