//! Pure decisions of the service controller: which Services it handles, when a change needs a
//! new ensure, which Nodes back a load balancer and when a status must be written.

use std::collections::BTreeMap;
use std::sync::Arc;

use k8s_openapi::api::core::v1::{LoadBalancerIngress, LoadBalancerStatus, Node, Service};

use super::class::OwnedClass;
use crate::change::{Change, Verb, Warning, Write};

/// The finalizer that keeps a Service until its load balancer is gone.
pub const LOAD_BALANCER_CLEANUP_FINALIZER: &str = "service.kubernetes.io/load-balancer-cleanup";
/// Node label excluding the Node from load balancer backends (unless it parses as false).
pub const LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS: &str =
    "node.kubernetes.io/exclude-from-external-load-balancers";
/// Taint the cluster autoscaler puts on a Node it is about to delete.
pub const TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER: &str = "ToBeDeletedByClusterAutoscaler";
/// `spec.type` of Services that want a load balancer.
pub const SERVICE_TYPE_LOAD_BALANCER: &str = "LoadBalancer";
/// Most node names written into an `UpdateLoadBalancerFailed` event.
pub const MAX_NODE_NAMES_TO_LOG: usize = 20;

/// The queue key of a Service: `namespace/name`.
pub fn service_key(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

/// `spec.type` (empty when unset).
pub(super) fn service_type(service: &Service) -> &str {
    service
        .spec
        .as_ref()
        .and_then(|s| s.type_.as_deref())
        .unwrap_or_default()
}

/// `spec.type == LoadBalancer` and the `spec.loadBalancerClass` this controller owns (upstream:
/// no class; any other class means another implementation owns the Service).
pub fn wants_load_balancer(service: &Service, class: &OwnedClass) -> bool {
    class.owns(service) && service_type(service) == SERVICE_TYPE_LOAD_BALANCER
}

/// Whether the Service carries [`LOAD_BALANCER_CLEANUP_FINALIZER`].
pub fn has_finalizer(service: &Service) -> bool {
    service
        .metadata
        .finalizers
        .as_ref()
        .is_some_and(|f| f.iter().any(|f| f == LOAD_BALANCER_CLEANUP_FINALIZER))
}

/// Has the finalizer and (is being deleted or is no longer of type LoadBalancer), and is not
/// of a class another implementation owns ([`OwnedClass::may_touch`]: such a Service's
/// finalizer is that implementation's).
pub fn needs_cleanup(service: &Service, class: &OwnedClass) -> bool {
    has_finalizer(service)
        && class.may_touch(service)
        && (service.metadata.deletion_timestamp.is_some()
            || service_type(service) != SERVICE_TYPE_LOAD_BALANCER)
}

/// Whether an Add of `service` is queued.
pub fn should_enqueue_added(service: &Service, class: &OwnedClass) -> bool {
    wants_load_balancer(service, class) || needs_cleanup(service, class)
}

/// Whether an Update from `old` to `new` is queued.
pub fn should_enqueue_updated(old: &Service, new: &Service, class: &OwnedClass) -> bool {
    needs_update(old, new, class) || needs_cleanup(new, class)
}

/// Whether the two ports are the same for a load balancer: name, protocol, port, nodePort,
/// targetPort and appProtocol.
fn port_equal_for_lb(
    x: &k8s_openapi::api::core::v1::ServicePort,
    y: &k8s_openapi::api::core::v1::ServicePort,
) -> bool {
    x.name.as_deref().unwrap_or_default() == y.name.as_deref().unwrap_or_default()
        && x.protocol.as_deref().unwrap_or_default() == y.protocol.as_deref().unwrap_or_default()
        && x.port == y.port
        && x.node_port.unwrap_or_default() == y.node_port.unwrap_or_default()
        && x.target_port == y.target_port
        && x.app_protocol == y.app_protocol
}

/// `needsUpdate(old, new)` of the upstream controller: whether a Service change needs a new
/// `EnsureLoadBalancer`. Labels, class, allocateLoadBalancerNodePorts and status never do
/// (the class only through "wants", which it decides with the type).
pub fn needs_update(old: &Service, new: &Service, class: &OwnedClass) -> bool {
    let (old_wants, new_wants) = (
        wants_load_balancer(old, class),
        wants_load_balancer(new, class),
    );
    if !old_wants && !new_wants {
        return false;
    }
    if old_wants != new_wants {
        return true;
    }
    let default_spec = Default::default();
    let o = old.spec.as_ref().unwrap_or(&default_spec);
    let n = new.spec.as_ref().unwrap_or(&default_spec);
    let s = |v: &Option<String>| v.as_deref().unwrap_or_default().to_owned();
    if o.load_balancer_source_ranges != n.load_balancer_source_ranges {
        return true;
    }
    let (op, np) = (
        o.ports.as_deref().unwrap_or_default(),
        n.ports.as_deref().unwrap_or_default(),
    );
    if op.len() != np.len() || op.iter().zip(np).any(|(x, y)| !port_equal_for_lb(x, y)) {
        return true;
    }
    s(&o.session_affinity) != s(&n.session_affinity)
        || o.session_affinity_config != n.session_affinity_config
        || s(&o.load_balancer_ip) != s(&n.load_balancer_ip)
        || o.external_ips.as_deref().unwrap_or_default()
            != n.external_ips.as_deref().unwrap_or_default()
        || old.metadata.annotations != new.metadata.annotations
        || old.metadata.uid != new.metadata.uid
        || s(&o.external_traffic_policy) != s(&n.external_traffic_policy)
        || o.health_check_node_port.unwrap_or_default()
            != n.health_check_node_port.unwrap_or_default()
        || o.ip_families.as_ref().map_or(0, Vec::len) != n.ip_families.as_ref().map_or(0, Vec::len)
}

/// The exclusion verdict: `false` when the exclusion label is present and does not parse as
/// false (unparsable values, including "", exclude).
pub fn node_included(node: &Node) -> bool {
    match node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS))
    {
        None => true,
        Some(value) => crate::go::parse_bool(value) == Some(false),
    }
}

fn node_untainted(node: &Node) -> bool {
    !node
        .spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| {
            t.iter()
                .any(|t| t.key == TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER)
        })
}

/// Whether `node` backs load balancers as upstream decides: not being deleted, not excluded by
/// label, not tainted by the cluster autoscaler. Readiness, schedulability and other taints are
/// ignored.
pub fn node_eligible(node: &Node) -> bool {
    node.metadata.deletion_timestamp.is_none() && node_included(node) && node_untainted(node)
}

fn cordoned(node: &Node) -> bool {
    node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true)
}

/// Which Nodes back load balancers: upstream's [`node_eligible`] (the default), and, opt-in,
/// no cordoned Node.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NodeFilter {
    /// Beyond upstream: a cordoned Node (`spec.unschedulable`, as `kubectl cordon` and
    /// `kubectl drain` set it) leaves every load balancer, so a drain takes the Node out of
    /// rotation before its pods stop; uncordoned, it is a target again.
    pub exclude_cordoned: bool,
}

impl NodeFilter {
    /// Whether `node` backs load balancers.
    pub fn eligible(self, node: &Node) -> bool {
        node_eligible(node) && !(self.exclude_cordoned && cordoned(node))
    }

    /// The eligible Nodes, sorted by name.
    pub fn select(self, nodes: &[Arc<Node>]) -> Vec<Arc<Node>> {
        let mut selected: Vec<Arc<Node>> =
            nodes.iter().filter(|n| self.eligible(n)).cloned().collect();
        selected.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
        selected
    }

    /// Whether a Node update changes anything the load balancers depend on: its eligibility
    /// (exclusion label, the cluster autoscaler's `ToBeDeletedByClusterAutoscaler` taint, a
    /// deletion timestamp, and when excluded a cordon) or `spec.providerID`. Readiness, other
    /// taints and other labels do not.
    pub fn update_needs_sync(self, old: &Node, new: &Node) -> bool {
        self.eligible(old) != self.eligible(new) || provider_id(old) != provider_id(new)
    }
}

fn provider_id(node: &Node) -> &str {
    node.spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default()
}

/// Node sets are equal when they hold the same names with the same providerIDs.
pub fn nodes_sufficiently_equal(old: &[Arc<Node>], new: &[Arc<Node>]) -> bool {
    let distill = |nodes: &[Arc<Node>]| -> BTreeMap<String, String> {
        nodes
            .iter()
            .map(|n| {
                (
                    n.metadata.name.clone().unwrap_or_default(),
                    provider_id(n).to_owned(),
                )
            })
            .collect()
    };
    old.len() == new.len() && distill(old) == distill(new)
}

/// At most [`MAX_NODE_NAMES_TO_LOG`] node names.
pub fn node_names_for_log(nodes: &[Arc<Node>]) -> Vec<String> {
    nodes
        .iter()
        .take(MAX_NODE_NAMES_TO_LOG)
        .map(|n| n.metadata.name.clone().unwrap_or_default())
        .collect()
}

fn ingress(status: Option<&LoadBalancerStatus>) -> &[LoadBalancerIngress] {
    status
        .and_then(|s| s.ingress.as_deref())
        .unwrap_or_default()
}

/// The Service's current `status.loadBalancer`, if any.
pub fn current_status(service: &Service) -> Option<&LoadBalancerStatus> {
    service.status.as_ref()?.load_balancer.as_ref()
}

/// Semantic, order-sensitive equality of the ingress lists (absent and empty are equal).
///
/// An absent `ipMode` counts as `VIP`, which is what Kubernetes assumes for it: a status
/// written without it (by an older CCM, or stored by an apiserver before 1.30, which dropped
/// the field) means the same as one that says `VIP`. Rewriting it would change nothing but
/// cost a write.
pub fn load_balancer_status_equal(
    old: Option<&LoadBalancerStatus>,
    new: Option<&LoadBalancerStatus>,
) -> bool {
    let (old, new) = (ingress(old), ingress(new));
    let mode = |i: &LoadBalancerIngress| i.ip_mode.clone().unwrap_or_else(|| "VIP".to_owned());
    old.len() == new.len()
        && old.iter().zip(new).all(|(a, b)| {
            let (mut a, mut b) = (a.clone(), b.clone());
            (a.ip_mode, b.ip_mode) = (Some(mode(&a)), Some(mode(&b)));
            a == b
        })
}

/// Strategic-merge patch (for `services/status`) adding the cleanup finalizer.
pub fn add_finalizer_patch() -> serde_json::Value {
    serde_json::json!({ "metadata": { "finalizers": [LOAD_BALANCER_CLEANUP_FINALIZER] } })
}

/// Strategic-merge patch (for `services/status`) removing the cleanup finalizer and keeping
/// every other one.
pub fn remove_finalizer_patch() -> serde_json::Value {
    serde_json::json!({
        "metadata": { "$deleteFromPrimitiveList/finalizers": [LOAD_BALANCER_CLEANUP_FINALIZER] }
    })
}

/// Strategic-merge patch (for `services/status`) setting `status.loadBalancer.ingress`; an
/// empty status clears it.
pub fn status_patch(new: &LoadBalancerStatus) -> serde_json::Value {
    let ingress = match new.ingress.as_deref() {
        Some(list) if !list.is_empty() => serde_json::json!(list),
        _ => serde_json::Value::Null,
    };
    serde_json::json!({ "status": { "loadBalancer": { "ingress": ingress } } })
}

/// What the service controller does with one Service, decided from the Service alone; the
/// provider decides the rest (what its load balancer needs). The controller carries it out,
/// `plan` prints it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceDecision {
    /// Delete the load balancer (the Service no longer wants one, or is being deleted), else
    /// ensure it.
    pub clean_up: bool,
    /// The cleanup finalizer is added (before ensuring) or removed (after the load balancer is
    /// gone); `None`: it is as it should be.
    pub finalizer: Option<Verb>,
}

impl ServiceDecision {
    /// The decision for `service`; `None` when the Service is of a class another
    /// implementation owns ([`OwnedClass::may_touch`]): nothing of it is touched.
    pub fn of(service: &Service, class: &OwnedClass) -> Option<Self> {
        if !class.may_touch(service) {
            return None;
        }
        let clean_up = !wants_load_balancer(service, class) || needs_cleanup(service, class);
        let finalizer = match (clean_up, has_finalizer(service)) {
            (false, false) => Some(Verb::Add),
            (true, true) => Some(Verb::Remove),
            _ => None,
        };
        Some(Self {
            clean_up,
            finalizer,
        })
    }
}

/// An event of the service controller, with upstream's reason and message.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServiceEvent {
    /// A Warning (else a Normal event).
    pub warning: bool,
    /// The event reason.
    pub reason: &'static str,
    /// The event message.
    pub message: &'static str,
}

impl ServiceEvent {
    const fn normal(reason: &'static str, message: &'static str) -> Self {
        Self {
            warning: false,
            reason,
            message,
        }
    }

    /// As `plan` prints a Warning.
    pub fn as_warning(&self) -> Warning {
        Warning::new(self.reason, self.message)
    }
}

/// Before a load balancer is ensured.
pub const EVENT_ENSURING: ServiceEvent =
    ServiceEvent::normal("EnsuringLoadBalancer", "Ensuring load balancer");
/// Once it is ensured.
pub const EVENT_ENSURED: ServiceEvent =
    ServiceEvent::normal("EnsuredLoadBalancer", "Ensured load balancer");
/// Before a load balancer is deleted.
pub const EVENT_DELETING: ServiceEvent =
    ServiceEvent::normal("DeletingLoadBalancer", "Deleting load balancer");
/// Once it is deleted.
pub const EVENT_DELETED: ServiceEvent =
    ServiceEvent::normal("DeletedLoadBalancer", "Deleted load balancer");
/// Once the node sync updated a load balancer's targets.
pub const EVENT_UPDATED_HOSTS: ServiceEvent = ServiceEvent::normal(
    "UpdatedLoadBalancer",
    "Updated load balancer with new hosts",
);
/// The upstream Warning for a load balancer without a Node to send traffic to.
pub const EVENT_NO_NODES: ServiceEvent = ServiceEvent {
    warning: true,
    reason: "UnAvailableLoadBalancer",
    message: "There are no available nodes for LoadBalancer",
};

/// One step of a Service's sync, in the order the controller takes them ([`ServiceDecision::steps`]):
/// the controller executes each, `plan` prints each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ServiceStep {
    /// Record an event.
    Event(ServiceEvent),
    /// Add the cleanup finalizer (before any cloud call: the Service cannot vanish while its
    /// load balancer exists) or remove it (once the load balancer is gone).
    Finalizer(Verb),
    /// Ensure the load balancer with the selected Nodes; it gives the status.
    EnsureLoadBalancer,
    /// Delete the load balancer, if the provider has one (with [`EVENT_DELETING`] first).
    DeleteLoadBalancer,
    /// Write the status the load balancer step gave (an empty one after a deletion), if it
    /// differs from the stored one.
    WriteStatus,
}

impl ServiceDecision {
    /// The steps of the sync, given whether any Node is selected for the load balancer.
    pub fn steps(&self, no_nodes: bool) -> Vec<ServiceStep> {
        let mut steps = Vec::new();
        if self.clean_up {
            steps.push(ServiceStep::DeleteLoadBalancer);
            if self.finalizer == Some(Verb::Remove) {
                steps.push(ServiceStep::Finalizer(Verb::Remove));
            }
            steps.push(ServiceStep::Event(EVENT_DELETED));
        } else {
            steps.push(ServiceStep::Event(EVENT_ENSURING));
            if self.finalizer == Some(Verb::Add) {
                steps.push(ServiceStep::Finalizer(Verb::Add));
            }
            if no_nodes {
                steps.push(ServiceStep::Event(EVENT_NO_NODES));
            }
            steps.push(ServiceStep::EnsureLoadBalancer);
            steps.push(ServiceStep::Event(EVENT_ENSURED));
        }
        steps.push(ServiceStep::WriteStatus);
        steps
    }
}

/// The change of the cleanup finalizer (added or removed) and its write.
pub fn finalizer_change(service: &Service, verb: Verb) -> (Change, Write) {
    (
        Change::new(verb, format!("finalizer {LOAD_BALANCER_CLEANUP_FINALIZER}")),
        status_write(service),
    )
}

/// The write of a patch of `services/status` of `service` (finalizers and the status).
pub fn status_write(service: &Service) -> Write {
    Write::kube("patch", "services/status", &service_key(service))
}

/// The ingress addresses for people: `192.0.2.1, 2001:db8::1`, or `(none)`.
pub fn ingress_text(status: Option<&LoadBalancerStatus>) -> String {
    let list: Vec<String> = ingress(status)
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

/// The status change from the Service's current status to `new`, and its write; `None` when
/// they are equal ([`load_balancer_status_equal`]).
pub fn status_change(service: &Service, new: &LoadBalancerStatus) -> Option<(Change, Write)> {
    let current = current_status(service);
    if load_balancer_status_equal(current, Some(new)) {
        return None;
    }
    Some((
        Change::new(Verb::Change, "status.loadBalancer.ingress")
            .values(Some(ingress_text(current)), Some(ingress_text(Some(new)))),
        status_write(service),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::core::v1::{
        ClientIPConfig, NodeSpec, ServicePort, ServiceSpec, SessionAffinityConfig, Taint,
    };
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

    fn svc(type_: &str) -> Service {
        let mut s = Service::default();
        s.metadata.name = Some("web".into());
        s.metadata.namespace = Some("default".into());
        s.metadata.uid = Some("uid-1".into());
        s.spec = Some(ServiceSpec {
            type_: Some(type_.into()),
            ports: Some(vec![ServicePort {
                name: Some("http".into()),
                port: 80,
                protocol: Some("TCP".into()),
                node_port: Some(30080),
                target_port: Some(IntOrString::Int(8080)),
                ..ServicePort::default()
            }]),
            ..ServiceSpec::default()
        });
        s
    }

    fn lb() -> Service {
        svc("LoadBalancer")
    }

    fn with_finalizer(mut s: Service) -> Service {
        s.metadata.finalizers = Some(vec![
            "other/finalizer".into(),
            LOAD_BALANCER_CLEANUP_FINALIZER.into(),
        ]);
        s
    }

    fn deleting(mut s: Service) -> Service {
        s.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        s
    }

    fn classed(mut s: Service) -> Service {
        s.spec.get_or_insert_default().load_balancer_class = Some("example.com/other".into());
        s
    }

    fn spec(s: &mut Service) -> &mut ServiceSpec {
        s.spec.get_or_insert_default()
    }

    /// The class the tests' second controller owns; `classed` gives Services another one.
    const OURS: &str = "example.com/hcloud";

    fn unset() -> OwnedClass {
        OwnedClass::default()
    }

    fn set() -> OwnedClass {
        OwnedClass::named(OURS)
    }

    fn ours(mut s: Service) -> Service {
        s.spec.get_or_insert_default().load_balancer_class = Some(OURS.into());
        s
    }

    #[test]
    fn wants_load_balancer_table() {
        // (case, service, wanted with the class unset, wanted with OURS)
        let cases = [
            ("LoadBalancer", lb(), true, false),
            ("ClusterIP", svc("ClusterIP"), false, false),
            ("NodePort", svc("NodePort"), false, false),
            ("no spec", Service::default(), false, false),
            ("LoadBalancer of another class", classed(lb()), false, false),
            ("LoadBalancer of our class", ours(lb()), false, true),
        ];
        for (name, s, when_unset, when_set) in cases {
            assert_eq!(wants_load_balancer(&s, &unset()), when_unset, "{name}");
            assert_eq!(wants_load_balancer(&s, &set()), when_set, "{name}, set");
        }
    }

    #[test]
    fn needs_cleanup_table() {
        // (case, service, cleanup with the class unset, cleanup with OURS)
        let cases = [
            ("LB without finalizer", lb(), false, false),
            ("LB with finalizer", with_finalizer(lb()), false, false),
            (
                "deleting LB with finalizer",
                deleting(with_finalizer(lb())),
                true,
                false,
            ),
            (
                "deleting LB without finalizer",
                deleting(lb()),
                false,
                false,
            ),
            (
                "ClusterIP with finalizer (the class left with the type)",
                with_finalizer(svc("ClusterIP")),
                true,
                true,
            ),
            (
                "other class LB with finalizer, not deleting",
                with_finalizer(classed(lb())),
                false,
                false,
            ),
            (
                "other class LB with finalizer, deleting: its finalizer is not ours",
                deleting(with_finalizer(classed(lb()))),
                false,
                false,
            ),
            (
                "other class LB deleting, no finalizer",
                deleting(classed(lb())),
                false,
                false,
            ),
            (
                "our class LB with finalizer, deleting",
                deleting(with_finalizer(ours(lb()))),
                false,
                true,
            ),
            (
                "our class LB with finalizer, not deleting",
                with_finalizer(ours(lb())),
                false,
                false,
            ),
        ];
        for (name, s, when_unset, when_set) in cases {
            assert_eq!(needs_cleanup(&s, &unset()), when_unset, "{name}");
            assert_eq!(needs_cleanup(&s, &set()), when_set, "{name}, set");
        }
    }

    #[test]
    fn enqueue_on_add_table() {
        let (u, c) = (&unset(), &set());
        assert!(should_enqueue_added(&lb(), u));
        assert!(!should_enqueue_added(&svc("ClusterIP"), u));
        assert!(!should_enqueue_added(&classed(lb()), u));
        assert!(!should_enqueue_added(&with_finalizer(classed(lb())), u));
        assert!(!should_enqueue_added(
            &deleting(with_finalizer(classed(lb()))),
            u
        ));
        assert!(should_enqueue_added(&with_finalizer(svc("NodePort")), u));
        // With a class: only that class, and Services that left type LoadBalancer.
        assert!(should_enqueue_added(&ours(lb()), c));
        assert!(!should_enqueue_added(&lb(), c));
        assert!(!should_enqueue_added(&deleting(with_finalizer(lb())), c));
        assert!(!should_enqueue_added(&classed(lb()), c));
        assert!(should_enqueue_added(
            &deleting(with_finalizer(ours(lb()))),
            c
        ));
        assert!(should_enqueue_added(&with_finalizer(svc("NodePort")), c));
    }

    #[test]
    fn steps_table() {
        use ServiceStep::{DeleteLoadBalancer, EnsureLoadBalancer, Event, Finalizer, WriteStatus};
        let decision = |clean_up, finalizer| ServiceDecision {
            clean_up,
            finalizer,
        };
        // (decision, no Nodes selected, steps in order)
        let cases = [
            (
                decision(false, Some(Verb::Add)),
                false,
                vec![
                    Event(EVENT_ENSURING),
                    Finalizer(Verb::Add),
                    EnsureLoadBalancer,
                    Event(EVENT_ENSURED),
                    WriteStatus,
                ],
            ),
            (
                decision(false, None),
                true,
                vec![
                    Event(EVENT_ENSURING),
                    Event(EVENT_NO_NODES),
                    EnsureLoadBalancer,
                    Event(EVENT_ENSURED),
                    WriteStatus,
                ],
            ),
            // The finalizer goes only once the load balancer is gone; the Nodes do not matter.
            (
                decision(true, Some(Verb::Remove)),
                true,
                vec![
                    DeleteLoadBalancer,
                    Finalizer(Verb::Remove),
                    Event(EVENT_DELETED),
                    WriteStatus,
                ],
            ),
            (
                decision(true, None),
                false,
                vec![DeleteLoadBalancer, Event(EVENT_DELETED), WriteStatus],
            ),
        ];
        for (decision, no_nodes, want) in cases {
            assert_eq!(decision.steps(no_nodes), want, "{decision:?} {no_nodes}");
        }
    }

    #[test]
    fn service_decision_table() {
        let decide = |s: &Service, class: &OwnedClass| {
            ServiceDecision::of(s, class).map(|d| (d.clean_up, d.finalizer))
        };
        let ensure_add = Some((false, Some(Verb::Add)));
        let ensure = Some((false, None));
        let clean_remove = Some((true, Some(Verb::Remove)));
        let clean = Some((true, None));
        // (case, service, class, decision); `None`: the Service is not touched.
        let cases = [
            ("new LB, unset", lb(), unset(), ensure_add),
            (
                "LB with finalizer, unset",
                with_finalizer(lb()),
                unset(),
                ensure,
            ),
            (
                "deleting LB, unset",
                deleting(with_finalizer(lb())),
                unset(),
                clean_remove,
            ),
            (
                "left type LB",
                with_finalizer(svc("ClusterIP")),
                unset(),
                clean_remove,
            ),
            (
                "left type LB, no finalizer",
                svc("ClusterIP"),
                unset(),
                clean,
            ),
            (
                "other class, unset",
                with_finalizer(classed(lb())),
                unset(),
                None,
            ),
            (
                "other class deleting, unset",
                deleting(with_finalizer(classed(lb()))),
                unset(),
                None,
            ),
            ("our class, unset", ours(lb()), unset(), None),
            ("new LB of our class", ours(lb()), set(), ensure_add),
            (
                "deleting LB of our class",
                deleting(with_finalizer(ours(lb()))),
                set(),
                clean_remove,
            ),
            ("LB without class, set", with_finalizer(lb()), set(), None),
            (
                "deleting LB without class, set",
                deleting(with_finalizer(lb())),
                set(),
                None,
            ),
            (
                "other class, set",
                with_finalizer(classed(lb())),
                set(),
                None,
            ),
            (
                "left type LB, set (its class went with the type)",
                with_finalizer(svc("ClusterIP")),
                set(),
                clean_remove,
            ),
        ];
        for (name, s, class, want) in cases {
            assert_eq!(decide(&s, &class), want, "{name}");
        }
    }

    #[test]
    fn needs_update_follows_the_owned_class() {
        let c = &set();
        // Our class: changes matter, as for class-less Services when unset.
        let old = ours(lb());
        let mut new = old.clone();
        new.metadata
            .annotations
            .get_or_insert_default()
            .insert("a".into(), "b".into());
        assert!(needs_update(&old, &new, c));
        assert!(!needs_update(&old, &new, &unset()));
        // Class-less Services are not ours when a class is set.
        let old = lb();
        let mut new = old.clone();
        new.metadata
            .annotations
            .get_or_insert_default()
            .insert("a".into(), "b".into());
        assert!(!needs_update(&old, &new, c));
        // Leaving the type, or coming back with our class, flips "wants".
        assert!(needs_update(&ours(lb()), &svc("ClusterIP"), c));
        assert!(needs_update(&svc("ClusterIP"), &ours(lb()), c));
        assert!(!needs_update(&svc("ClusterIP"), &classed(lb()), c));
        // A class change the watch saw in one step (the type change between was missed).
        assert!(needs_update(&ours(lb()), &classed(lb()), c));
    }

    #[test]
    fn needs_update_table() {
        type Mutate = fn(&mut Service);
        let cases: Vec<(&str, Mutate, bool)> = vec![
            ("identical (resync)", |_| {}, false),
            (
                "label",
                |s| {
                    s.metadata
                        .labels
                        .get_or_insert_default()
                        .insert("a".into(), "b".into());
                },
                false,
            ),
            (
                "annotation",
                |s| {
                    s.metadata
                        .annotations
                        .get_or_insert_default()
                        .insert("a".into(), "b".into());
                },
                true,
            ),
            ("uid", |s| s.metadata.uid = Some("uid-2".into()), true),
            (
                "status",
                |s| {
                    s.status.get_or_insert_default().load_balancer = Some(LoadBalancerStatus {
                        ingress: Some(vec![LoadBalancerIngress {
                            ip: Some("1.2.3.4".into()),
                            ..Default::default()
                        }]),
                    });
                },
                false,
            ),
            (
                "source ranges",
                |s| spec(s).load_balancer_source_ranges = Some(vec!["10.0.0.0/8".into()]),
                true,
            ),
            (
                "port added",
                |s| {
                    spec(s).ports.get_or_insert_default().push(ServicePort {
                        port: 443,
                        ..Default::default()
                    });
                },
                true,
            ),
            (
                "port name",
                |s| spec(s).ports.get_or_insert_default()[0].name = Some("web".into()),
                true,
            ),
            (
                "port protocol",
                |s| spec(s).ports.get_or_insert_default()[0].protocol = Some("UDP".into()),
                true,
            ),
            (
                "port number",
                |s| spec(s).ports.get_or_insert_default()[0].port = 81,
                true,
            ),
            (
                "node port",
                |s| spec(s).ports.get_or_insert_default()[0].node_port = Some(30081),
                true,
            ),
            (
                "target port",
                |s| {
                    spec(s).ports.get_or_insert_default()[0].target_port =
                        Some(IntOrString::String("http".into()));
                },
                true,
            ),
            (
                "app protocol",
                |s| spec(s).ports.get_or_insert_default()[0].app_protocol = Some("h2c".into()),
                true,
            ),
            (
                "session affinity",
                |s| spec(s).session_affinity = Some("ClientIP".into()),
                true,
            ),
            (
                "session affinity None is the default",
                |s| spec(s).session_affinity = Some(String::new()),
                false,
            ),
            (
                "session affinity config",
                |s| {
                    spec(s).session_affinity_config = Some(SessionAffinityConfig {
                        client_ip: Some(ClientIPConfig {
                            timeout_seconds: Some(60),
                        }),
                    });
                },
                true,
            ),
            (
                "loadBalancerIP",
                |s| spec(s).load_balancer_ip = Some("1.2.3.4".into()),
                true,
            ),
            (
                "external IPs",
                |s| spec(s).external_ips = Some(vec!["1.1.1.1".into()]),
                true,
            ),
            (
                "external traffic policy",
                |s| spec(s).external_traffic_policy = Some("Local".into()),
                true,
            ),
            (
                "health check node port",
                |s| spec(s).health_check_node_port = Some(32000),
                true,
            ),
            (
                "ip families count",
                |s| spec(s).ip_families = Some(vec!["IPv4".into()]),
                true,
            ),
            (
                "allocateLoadBalancerNodePorts",
                |s| spec(s).allocate_load_balancer_node_ports = Some(false),
                false,
            ),
            (
                "clusterIP",
                |s| spec(s).cluster_ip = Some("10.0.0.9".into()),
                false,
            ),
            (
                "type flips away",
                |s| spec(s).type_ = Some("ClusterIP".into()),
                true,
            ),
            (
                "class set (wants flips)",
                |s| spec(s).load_balancer_class = Some("x".into()),
                true,
            ),
        ];
        for (name, mutate, want) in cases {
            let old = lb();
            let mut new = old.clone();
            mutate(&mut new);
            assert_eq!(needs_update(&old, &new, &unset()), want, "{name}");
        }
    }

    #[test]
    fn needs_update_ignores_services_not_wanting_lbs() {
        let old = svc("ClusterIP");
        let mut new = old.clone();
        new.metadata
            .annotations
            .get_or_insert_default()
            .insert("a".into(), "b".into());
        assert!(!needs_update(&old, &new, &unset()));
        // A class-bearing LB is not wanted: its changes are ignored.
        let old = classed(lb());
        let mut new = old.clone();
        new.metadata
            .annotations
            .get_or_insert_default()
            .insert("a".into(), "b".into());
        assert!(!needs_update(&old, &new, &unset()));
        assert!(
            needs_update(&svc("ClusterIP"), &lb(), &unset()),
            "type flips to LB"
        );
    }

    #[test]
    fn external_ips_are_order_sensitive_and_ip_families_count_only() {
        let mut old = lb();
        spec(&mut old).external_ips = Some(vec!["1.1.1.1".into(), "2.2.2.2".into()]);
        spec(&mut old).ip_families = Some(vec!["IPv4".into()]);
        let mut new = old.clone();
        spec(&mut new).external_ips = Some(vec!["2.2.2.2".into(), "1.1.1.1".into()]);
        assert!(needs_update(&old, &new, &unset()));
        let mut new = old.clone();
        spec(&mut new).ip_families = Some(vec!["IPv6".into()]);
        assert!(
            !needs_update(&old, &new, &unset()),
            "same count of ipFamilies"
        );
    }

    fn node(name: &str) -> Node {
        let mut n = Node::default();
        n.metadata.name = Some(name.into());
        n.spec = Some(NodeSpec {
            provider_id: Some(format!("fake://{name}")),
            ..NodeSpec::default()
        });
        n
    }

    fn labelled(mut n: Node, value: &str) -> Node {
        n.metadata.labels.get_or_insert_default().insert(
            LABEL_EXCLUDE_FROM_EXTERNAL_LOAD_BALANCERS.into(),
            value.into(),
        );
        n
    }

    fn tainted(mut n: Node, key: &str) -> Node {
        n.spec.get_or_insert_default().taints = Some(vec![Taint {
            key: key.into(),
            effect: "NoSchedule".into(),
            ..Taint::default()
        }]);
        n
    }

    #[test]
    fn node_eligibility_table() {
        let mut deleted = node("n");
        deleted.metadata.deletion_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH));
        let mut not_ready = node("n");
        not_ready.status = Some(k8s_openapi::api::core::v1::NodeStatus {
            conditions: Some(vec![k8s_openapi::api::core::v1::NodeCondition {
                type_: "Ready".into(),
                status: "False".into(),
                ..Default::default()
            }]),
            ..Default::default()
        });
        let mut unschedulable = node("n");
        unschedulable.spec.get_or_insert_default().unschedulable = Some(true);
        let cases = [
            ("plain", node("n"), true),
            ("being deleted", deleted, false),
            ("exclusion label true", labelled(node("n"), "true"), false),
            ("exclusion label empty", labelled(node("n"), ""), false),
            (
                "exclusion label unparsable",
                labelled(node("n"), "yes"),
                false,
            ),
            ("exclusion label false", labelled(node("n"), "false"), true),
            ("exclusion label 0", labelled(node("n"), "0"), true),
            ("exclusion label F", labelled(node("n"), "F"), true),
            (
                "autoscaler taint",
                tainted(node("n"), TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER),
                false,
            ),
            (
                "uninitialized taint",
                tainted(node("n"), crate::well_known::TAINT_UNINITIALIZED),
                true,
            ),
            ("not ready", not_ready, true),
            ("unschedulable", unschedulable.clone(), true),
            ("no conditions", node("n"), true),
        ];
        for (name, n, want) in cases {
            assert_eq!(node_eligible(&n), want, "{name}");
            assert_eq!(NodeFilter::default().eligible(&n), want, "{name}");
        }
        // Opt-in: a cordoned Node leaves too; nothing else changes.
        let drain = NodeFilter {
            exclude_cordoned: true,
        };
        assert!(!drain.eligible(&unschedulable));
        assert!(drain.eligible(&node("n")));
        let mut uncordoned = node("n");
        uncordoned.spec.get_or_insert_default().unschedulable = Some(false);
        assert!(drain.eligible(&uncordoned));
        assert!(drain.update_needs_sync(&node("n"), &unschedulable));
        assert!(drain.update_needs_sync(&unschedulable, &uncordoned));
        assert!(!NodeFilter::default().update_needs_sync(&node("n"), &unschedulable));
    }

    #[test]
    fn select_nodes_filters_and_sorts() {
        let nodes = vec![
            Arc::new(node("c")),
            Arc::new(labelled(node("b"), "true")),
            Arc::new(node("a")),
        ];
        let names: Vec<_> = NodeFilter::default()
            .select(&nodes)
            .iter()
            .map(|n| n.metadata.name.clone().unwrap_or_default())
            .collect();
        assert_eq!(names, ["a", "c"]);
    }

    #[test]
    fn node_update_needs_sync_table() {
        let mut other_pid = node("n");
        other_pid.spec.get_or_insert_default().provider_id = Some("fake://other".into());
        let mut other_label = node("n");
        other_label
            .metadata
            .labels
            .get_or_insert_default()
            .insert("role".into(), "x".into());
        let cases = [
            ("unchanged", node("n"), node("n"), false),
            ("excluded", node("n"), labelled(node("n"), "true"), true),
            (
                "unparsable -> true: same verdict",
                labelled(node("n"), "x"),
                labelled(node("n"), "true"),
                false,
            ),
            (
                "label false is no change",
                node("n"),
                labelled(node("n"), "false"),
                false,
            ),
            ("provider ID", node("n"), other_pid, true),
            ("other label", node("n"), other_label, false),
            (
                "autoscaler taint excludes the node",
                node("n"),
                tainted(node("n"), TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER),
                true,
            ),
            (
                "autoscaler taint removed",
                tainted(node("n"), TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER),
                node("n"),
                true,
            ),
            (
                "other taint",
                node("n"),
                tainted(node("n"), "dedicated"),
                false,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(
                NodeFilter::default().update_needs_sync(&old, &new),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn node_set_equality_by_names_and_provider_ids() {
        let set = |nodes: Vec<Node>| nodes.into_iter().map(Arc::new).collect::<Vec<_>>();
        let mut a_other = node("a");
        a_other.spec.get_or_insert_default().provider_id = Some("fake://x".into());
        let mut a_labelled = node("a");
        a_labelled
            .metadata
            .labels
            .get_or_insert_default()
            .insert("k".into(), "v".into());
        let cases = [
            (
                "same",
                set(vec![node("a"), node("b")]),
                set(vec![node("b"), node("a")]),
                true,
            ),
            ("empty", set(vec![]), set(vec![]), true),
            (
                "added",
                set(vec![node("a")]),
                set(vec![node("a"), node("b")]),
                false,
            ),
            ("renamed", set(vec![node("a")]), set(vec![node("b")]), false),
            (
                "provider ID",
                set(vec![node("a")]),
                set(vec![a_other]),
                false,
            ),
            (
                "other fields ignored",
                set(vec![node("a")]),
                set(vec![a_labelled]),
                true,
            ),
            (
                "duplicate names",
                set(vec![node("a"), node("a")]),
                set(vec![node("a")]),
                false,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(nodes_sufficiently_equal(&old, &new), want, "{name}");
        }
    }

    #[test]
    fn node_names_are_limited() {
        let nodes: Vec<_> = (0..30).map(|i| Arc::new(node(&format!("n{i}")))).collect();
        assert_eq!(node_names_for_log(&nodes).len(), MAX_NODE_NAMES_TO_LOG);
    }

    #[test]
    fn status_equality_table() {
        let ing = |ip: &str| LoadBalancerIngress {
            ip: Some(ip.into()),
            ..Default::default()
        };
        let st = |ips: &[&str]| LoadBalancerStatus {
            ingress: Some(ips.iter().map(|i| ing(i)).collect()),
        };
        let host = LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                hostname: Some("lb.example".into()),
                ..Default::default()
            }]),
        };
        let empty = LoadBalancerStatus { ingress: None };
        let with_mode = |mode: &str| LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some("1.1.1.1".into()),
                ip_mode: Some(mode.into()),
                ..Default::default()
            }]),
        };
        let (vip, proxy) = (with_mode("VIP"), with_mode("Proxy"));
        let cases = [
            ("both absent", None, None, true),
            ("absent vs empty", None, Some(&empty), true),
            ("absent vs empty list", None, Some(&st(&[])), true),
            (
                "same",
                Some(&st(&["1.1.1.1"])),
                Some(&st(&["1.1.1.1"])),
                true,
            ),
            (
                "different ip",
                Some(&st(&["1.1.1.1"])),
                Some(&st(&["1.1.1.2"])),
                false,
            ),
            (
                "order matters",
                Some(&st(&["1.1.1.1", "2.2.2.2"])),
                Some(&st(&["2.2.2.2", "1.1.1.1"])),
                false,
            ),
            ("hostname", Some(&st(&[])), Some(&host), false),
            ("absent vs set", None, Some(&host), false),
            (
                "no ipMode is VIP",
                Some(&st(&["1.1.1.1"])),
                Some(&vip),
                true,
            ),
            (
                "no ipMode is not Proxy",
                Some(&st(&["1.1.1.1"])),
                Some(&proxy),
                false,
            ),
        ];
        for (name, old, new, want) in cases {
            assert_eq!(load_balancer_status_equal(old, new), want, "{name}");
        }
    }

    #[test]
    fn patches() {
        assert_eq!(
            add_finalizer_patch(),
            serde_json::json!({"metadata": {"finalizers": [LOAD_BALANCER_CLEANUP_FINALIZER]}})
        );
        assert_eq!(
            remove_finalizer_patch(),
            serde_json::json!({"metadata": {"$deleteFromPrimitiveList/finalizers": [LOAD_BALANCER_CLEANUP_FINALIZER]}})
        );
        let status = LoadBalancerStatus {
            ingress: Some(vec![LoadBalancerIngress {
                ip: Some("1.2.3.4".into()),
                ..Default::default()
            }]),
        };
        assert_eq!(
            status_patch(&status),
            serde_json::json!({"status": {"loadBalancer": {"ingress": [{"ip": "1.2.3.4"}]}}})
        );
        assert_eq!(
            status_patch(&LoadBalancerStatus::default()),
            serde_json::json!({"status": {"loadBalancer": {"ingress": null}}})
        );
    }

    #[test]
    fn keys_and_finalizers() {
        assert_eq!(service_key(&lb()), "default/web");
        assert!(has_finalizer(&with_finalizer(lb())));
        assert!(!has_finalizer(&lb()));
    }
}
