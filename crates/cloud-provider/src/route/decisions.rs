//! Pure decisions of the route controller: (Nodes, listed routes, cluster CIDRs) → plan.
//!
//! Mirrors `RouteController.reconcile` of `k8s.io/cloud-provider`: a working map of the Nodes
//! that have pod CIDRs or routes, an action per pod CIDR (*keep*, *add*, *update*), the routes to
//! delete, the routes to create and, once the cloud calls are done, the `NetworkUnavailable`
//! condition each Node in the working map should carry.
//!
//! Four additions to upstream's rules: pod CIDRs the cloud cannot route
//! ([`crate::provider::Routes::can_route`], e.g. IPv6 ones in a cloud whose networks route IPv4
//! only) are left out, Nodes the cloud routes no traffic to
//! ([`crate::provider::Routes::routes_node`], e.g. dedicated servers outside the cloud) get no
//! route and one Warning ([`NotRouted`]), a listed route that leads to another instance than the Node's
//! providerID does not serve the Node (see [`decide`]), and a Node that is not initialised yet
//! gets no new route until it is ([`CidrAction::Waiting`]: a Node's pod CIDR often comes before
//! its addresses, and a route made then would fail or point by guess).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;

use ipnet::IpNet;
use k8s_openapi::api::core::v1::{Node, NodeAddress, NodeCondition};

use crate::change::{Change, Planned, Verb, Warning, Write};
use crate::provider::{Route, RouteWrites};
use crate::well_known::TAINT_UNINITIALIZED;

/// Type of the Node condition the route controller owns.
pub const CONDITION_NETWORK_UNAVAILABLE: &str = "NetworkUnavailable";

/// The `NetworkUnavailable` condition to write (without timestamps).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NetworkCondition {
    /// `True` or `False`.
    pub status: &'static str,
    /// `RouteCreated` or `NoRouteCreated`.
    pub reason: &'static str,
    /// Human readable message.
    pub message: &'static str,
}

/// Every pod CIDR of the Node has its route: `NetworkUnavailable=False`.
pub const ROUTE_CREATED: NetworkCondition = NetworkCondition {
    status: "False",
    reason: "RouteCreated",
    message: "RouteController created a route",
};

/// Some pod CIDR lacks its route, or the Node has none: `NetworkUnavailable=True`.
pub const NO_ROUTE_CREATED: NetworkCondition = NetworkCondition {
    status: "True",
    reason: "NoRouteCreated",
    message: "RouteController failed to create a route",
};

/// A Node the cloud routes no traffic to, while this controller had set its condition `True`
/// (e.g. before the Node was initialised and known to be such a Node): `NetworkUnavailable=False`,
/// so that it is not left unavailable by a route that never comes. Otherwise such a Node's
/// condition is left as the CNI sets it.
pub const ROUTE_NOT_SUPPORTED: NetworkCondition = NetworkCondition {
    status: "False",
    reason: REASON_ROUTE_NOT_SUPPORTED,
    message: "RouteController creates no route for this node; its pod traffic is the CNI's",
};

/// Event reason (Warning, once per Node) and condition reason for a Node the cloud routes no
/// traffic to ([`NotRouted`]).
pub const REASON_ROUTE_NOT_SUPPORTED: &str = "RouteNotSupported";

/// A Node with pod CIDRs (or listed routes) that the cloud routes no traffic to
/// ([`crate::provider::Routes::routes_node`] said no): no route is created for it, routes
/// listed for it are deleted as routes of no Node, and one Warning says that its pod traffic
/// needs the CNI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NotRouted {
    /// Name of the Node.
    pub node: String,
    /// Its UID (the controller warns once per Node, by UID).
    pub uid: String,
    /// Its `spec.providerID`.
    pub provider_id: String,
    /// Its pod CIDRs the cloud could otherwise route, as written in the Node spec.
    pub pod_cidrs: Vec<String>,
}

impl NotRouted {
    /// The Warning recorded on the Node (reason [`REASON_ROUTE_NOT_SUPPORTED`]).
    pub fn warning(&self) -> Warning {
        let cidrs = if self.pod_cidrs.is_empty() {
            "its pod CIDRs".to_owned()
        } else {
            format!("its pod CIDR(s) {}", self.pod_cidrs.join(", "))
        };
        Warning::new(
            REASON_ROUTE_NOT_SUPPORTED,
            format!(
                "No cloud route is made for node {} (providerID {:?}): the cloud routes pod traffic only to its own instances, and this node is not one. Pod traffic to {cidrs} needs the CNI (an overlay or the CNI's own routing); NetworkUnavailable is left to the CNI",
                self.node, self.provider_id
            ),
        )
    }
}

/// What happens to one pod CIDR of a Node.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CidrAction {
    /// A listed route already serves it.
    Keep,
    /// No listed route serves it: create one.
    Add,
    /// The listed route has stale node addresses: delete it, then create it again.
    Update,
    /// The pod CIDR does not parse; no route can be created for it (never *keep*).
    Unparsable,
    /// No listed route serves it, but the Node still carries the uninitialized taint: its
    /// addresses, which the route's target is checked against, come with its initialisation, and
    /// its update brings the route. Nothing is created or deleted for it yet.
    Waiting,
}

/// One pod CIDR of a Node in the working map.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PodCidr {
    /// As written in the Node spec.
    pub text: String,
    /// Parsed and truncated to its network address; `None` when unparsable.
    pub cidr: Option<IpNet>,
    /// Action decided for it.
    pub action: CidrAction,
}

/// A Node of the working map: it has pod CIDRs, or at least one listed route targets it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeRoutes {
    /// The Node's pod CIDRs (empty when only routes point at it, and for a Node the cloud
    /// does not route).
    pub pod_cidrs: Vec<PodCidr>,
    /// The cloud routes no traffic to this Node ([`NotRouted`]): its condition is written only
    /// to undo a `True` of this controller ([`ROUTE_NOT_SUPPORTED`]).
    pub not_routed: bool,
}

impl NodeRoutes {
    /// The condition this Node should carry now.
    pub fn wanted_condition(&self) -> NetworkCondition {
        if !self.pod_cidrs.is_empty() && self.pod_cidrs.iter().all(|p| p.action == CidrAction::Keep)
        {
            ROUTE_CREATED
        } else {
            NO_ROUTE_CREATED
        }
    }
}

/// A route to create.
#[derive(Clone, Debug, PartialEq)]
pub struct RouteCreation {
    /// Name of the target Node.
    pub node: String,
    /// The Node UID, handed to the provider as name hint.
    pub name_hint: String,
    /// The route (name empty, not a blackhole, addresses = the Node's `status.addresses`).
    pub route: Route,
}

/// The cloud work of one reconcile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RouteDecision {
    /// Listed routes to delete.
    pub to_delete: Vec<Route>,
    /// Routes to create (for *add* and *update*).
    pub to_create: Vec<RouteCreation>,
    /// Finish all deletions before the first creation (the first listed route has
    /// `enable_node_addresses`, so an *update* deletes and re-creates the same route).
    pub wait_for_deletions: bool,
    /// The working map, by Node name.
    pub nodes: BTreeMap<String, NodeRoutes>,
    /// Pod CIDRs left out because the cloud cannot route them: (Node name, CIDR).
    pub unroutable: Vec<(String, IpNet)>,
    /// Nodes the cloud routes no traffic to, in the order of the Nodes.
    pub not_routed: Vec<NotRouted>,
}

impl NodeRoutes {
    /// Record a successful creation: the pod CIDR becomes *keep*.
    pub fn mark_created(&mut self, cidr: &IpNet) {
        let cidr = cidr.trunc();
        for pod in &mut self.pod_cidrs {
            if pod.cidr == Some(cidr) {
                pod.action = CidrAction::Keep;
            }
        }
    }
}

impl RouteDecision {
    /// What `plan` prints for this decision: the deletions, then each Node's creations and its
    /// condition as they leave it (every creation succeeding), as the controller carries them
    /// out; `writes` names the provider's requests.
    pub fn planned(&self, nodes: &[Arc<Node>], writes: &RouteWrites) -> Planned {
        let mut out = Planned::default();
        out.warnings
            .extend(self.not_routed.iter().map(NotRouted::warning));
        for route in &self.to_delete {
            let via = if route.blackhole || route.target_node.is_empty() {
                "blackhole".to_owned()
            } else {
                format!("via node {}", route.target_node)
            };
            out.changes.push(Change::new(
                Verb::Delete,
                format!("route {} ({via})", route.destination_cidr),
            ));
            out.writes.extend(writes.delete.clone());
        }
        for work in self.node_work(nodes) {
            for creation in &work.creations {
                out.changes.push(Change::new(
                    Verb::Create,
                    format!(
                        "route {} via node {}",
                        creation.route.destination_cidr, creation.node
                    ),
                ));
                out.writes.extend(writes.create.clone());
            }
            let created: Vec<IpNet> = work
                .creations
                .iter()
                .map(|c| c.route.destination_cidr)
                .collect();
            let node = nodes
                .iter()
                .find(|n| n.metadata.name.as_deref() == Some(work.name.as_str()));
            if let Some(condition) = node.and_then(|node| work.condition_after(node, &created)) {
                out.changes.push(
                    Change::new(
                        Verb::Change,
                        format!(
                            "node {} condition {CONDITION_NETWORK_UNAVAILABLE}",
                            work.name
                        ),
                    )
                    .values(
                        None,
                        Some(format!("{} ({})", condition.status, condition.reason)),
                    ),
                );
                out.writes
                    .push(Write::kube("patch", "nodes/status", &work.name));
            }
        }
        out
    }
}

impl RouteDecision {
    /// Record a successful creation: the pod CIDR becomes *keep*.
    pub fn mark_created(&mut self, node: &str, cidr: &IpNet) {
        if let Some(entry) = self.nodes.get_mut(node) {
            entry.mark_created(cidr);
        }
    }

    /// The work of each Node after the deletions: its creations, then its condition, so a
    /// Node's condition is written as soon as its own routes are in place rather than after
    /// the last route of the pass. Only Nodes that are both listed and in the working map,
    /// in the order of `nodes`.
    pub fn node_work(&self, nodes: &[Arc<Node>]) -> Vec<NodeWork> {
        let mut creations: BTreeMap<&str, Vec<RouteCreation>> = BTreeMap::new();
        for creation in &self.to_create {
            creations
                .entry(creation.node.as_str())
                .or_default()
                .push(creation.clone());
        }
        nodes
            .iter()
            .filter_map(|node| {
                let name = node.metadata.name.as_deref()?;
                let routes = self.nodes.get(name)?;
                Some(NodeWork {
                    name: name.to_owned(),
                    routes: routes.clone(),
                    creations: creations.remove(name).unwrap_or_default(),
                })
            })
            .collect()
    }
}

/// One Node's share of a pass (see [`RouteDecision::node_work`]). Owned, so that a stream of
/// them can be driven from a `Send` future. It names the Node rather than holding the listed
/// copy: a pass over 1000 Nodes takes minutes, and holding every listed copy while the cache
/// moves on would keep two versions of each Node in memory.
#[derive(Clone, Debug)]
pub struct NodeWork {
    /// Name of the Node.
    pub name: String,
    /// Its entry of the working map.
    pub routes: NodeRoutes,
    /// Its routes to create.
    pub creations: Vec<RouteCreation>,
}

impl NodeWork {
    /// The condition to write on `node` (its current version) once the creations of `created`
    /// succeeded (the others failed), or `None` when the Node already carries it.
    pub fn condition_after(&self, node: &Node, created: &[IpNet]) -> Option<NetworkCondition> {
        let mut routes = self.routes.clone();
        for cidr in created {
            routes.mark_created(cidr);
        }
        condition_update(node, &routes)
    }
}

/// The Node's pod CIDRs: `spec.podCIDRs`, or `spec.podCIDR` when the list is empty.
pub fn pod_cidrs(node: &Node) -> Vec<String> {
    let Some(spec) = node.spec.as_ref() else {
        return Vec::new();
    };
    match (&spec.pod_cidrs, &spec.pod_cidr) {
        (Some(list), _) if !list.is_empty() => list.clone(),
        (_, Some(single)) if !single.is_empty() => vec![single.clone()],
        _ => Vec::new(),
    }
}

fn node_addresses(node: &Node) -> &[NodeAddress] {
    node.status
        .as_ref()
        .and_then(|s| s.addresses.as_deref())
        .unwrap_or_default()
}

/// Whether the route controller owns a route to `cidr`: its first or its last address lies
/// inside one of the cluster CIDRs.
pub fn is_responsible_for(cluster_cidrs: &[IpNet], cidr: &IpNet) -> bool {
    let first: IpAddr = cidr.network();
    let last: IpAddr = cidr.broadcast();
    cluster_cidrs
        .iter()
        .any(|cluster| cluster.contains(&first) || cluster.contains(&last))
}

/// Address lists are equal when they have the same length and every entry of `a` occurs in `b`
/// (order-insensitive, as upstream compares them).
pub fn addresses_equal(a: &[NodeAddress], b: &[NodeAddress]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// Whether `route` leads to another instance than `provider_id` (the Node's): only when both
/// are known.
fn leads_elsewhere(route: &Route, provider_id: &str) -> bool {
    !route.target_provider_id.is_empty()
        && !provider_id.is_empty()
        && route.target_provider_id != provider_id
}

fn action_for(
    routes: &[&Route],
    cidr: &IpNet,
    addresses: &[NodeAddress],
    provider_id: &str,
) -> CidrAction {
    routes
        .iter()
        .find(|r| r.destination_cidr.trunc() == *cidr)
        .map_or(CidrAction::Add, |r| {
            if leads_elsewhere(r, provider_id) {
                CidrAction::Add
            } else if !r.enable_node_addresses
                || addresses_equal(addresses, &r.target_node_addresses)
            {
                CidrAction::Keep
            } else {
                CidrAction::Update
            }
        })
}

/// Compute the plan of one reconcile.
///
/// * For each Node with pod CIDRs, per CIDR: a listed route with the same target Node and
///   destination ⇒ *keep* (*update* when that route has `enable_node_addresses` and its addresses
///   are not set-equal to the Node's); none ⇒ *add*. Unparsable pod CIDRs are logged by the
///   caller and never *keep*. Pod CIDRs that `can_route` refuses are left out (listed in
///   [`RouteDecision::unroutable`]); a Node with no other pod CIDR is treated as one without pod
///   CIDRs.
/// * A listed route whose `target_provider_id` differs from the Node's `spec.providerID` (both
///   known) leads to another instance, e.g. a server merely named like the Node: *add*, so the
///   creation replaces it.
/// * Delete every listed route the controller owns ([`is_responsible_for`]) that is a
///   blackhole, or has no *keep* (Node, CIDR) pair: routes of vanished Nodes, of Nodes without
///   that CIDR, of an empty target and routes marked *update*. Routes outside the cluster CIDRs
///   are never touched.
/// * Create a route for every *add* and *update*, named by the Node UID.
/// * A Node that `routes_node` refuses gets no route ([`NotRouted`]); routes listed for it are
///   deleted like those of a Node without that CIDR.
pub fn decide(
    nodes: &[Arc<Node>],
    routes: &[Route],
    cluster_cidrs: &[IpNet],
    can_route: &dyn Fn(&IpNet) -> bool,
    routes_node: &dyn Fn(&Node) -> bool,
) -> RouteDecision {
    let mut by_target: BTreeMap<&str, Vec<&Route>> = BTreeMap::new();
    for route in routes {
        if !route.target_node.is_empty() {
            by_target
                .entry(route.target_node.as_str())
                .or_default()
                .push(route);
        }
    }
    let mut working: BTreeMap<String, NodeRoutes> = by_target
        .keys()
        .map(|name| ((*name).to_owned(), NodeRoutes::default()))
        .collect();

    let mut to_create = Vec::new();
    let mut unroutable = Vec::new();
    let mut not_routed = Vec::new();
    // Destinations a Node wants but no listed route serves it (action Add).
    let mut added: Vec<IpNet> = Vec::new();
    for node in nodes {
        let Some(name) = node.metadata.name.as_deref() else {
            continue;
        };
        let mut cidrs = pod_cidrs(node);
        cidrs.retain(|text| match text.parse::<IpNet>() {
            Ok(cidr) if !can_route(&cidr) => {
                unroutable.push((name.to_owned(), cidr.trunc()));
                false
            }
            _ => true,
        });
        let provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .unwrap_or_default();
        if (!cidrs.is_empty() || working.contains_key(name)) && !routes_node(node) {
            working.entry(name.to_owned()).or_default().not_routed = true;
            not_routed.push(NotRouted {
                node: name.to_owned(),
                uid: node.metadata.uid.clone().unwrap_or_default(),
                provider_id: provider_id.to_owned(),
                pod_cidrs: cidrs,
            });
            continue;
        }
        if cidrs.is_empty() {
            continue;
        }
        let addresses = node_addresses(node);
        let targeting = by_target.get(name).map(Vec::as_slice).unwrap_or_default();
        let uninitialized = node
            .spec
            .as_ref()
            .and_then(|s| s.taints.as_ref())
            .is_some_and(|t| t.iter().any(|t| t.key == TAINT_UNINITIALIZED));
        let entry = working.entry(name.to_owned()).or_default();
        for text in cidrs {
            if entry.pod_cidrs.iter().any(|p| p.text == text) {
                continue;
            }
            let cidr = text.parse::<IpNet>().ok().map(|c| c.trunc());
            let action = match &cidr {
                Some(cidr) => match action_for(targeting, cidr, addresses, provider_id) {
                    CidrAction::Add if uninitialized => CidrAction::Waiting,
                    action => action,
                },
                None => CidrAction::Unparsable,
            };
            if let (Some(cidr), CidrAction::Add) = (cidr, action) {
                added.push(cidr);
            }
            if let (Some(cidr), CidrAction::Add | CidrAction::Update) = (cidr, action) {
                to_create.push(RouteCreation {
                    node: name.to_owned(),
                    name_hint: node.metadata.uid.clone().unwrap_or_default(),
                    route: Route {
                        name: String::new(),
                        target_node: name.to_owned(),
                        target_provider_id: provider_id.to_owned(),
                        destination_cidr: cidr,
                        blackhole: false,
                        enable_node_addresses: false,
                        target_node_addresses: addresses.to_vec(),
                    },
                });
            }
            entry.pod_cidrs.push(PodCidr { text, cidr, action });
        }
    }

    // A listed route for a destination that a Node wants, but which seems to point elsewhere
    // (another target or instance, or a blackhole), is not deleted: the creation for that Node replaces it
    // (providers replace a route of the same destination, as the Hetzner one does). Deleting it
    // first would cut the Node's pod traffic between the delete and the create — and for
    // nothing when the mismatch is only apparent, e.g. a provider that could not map the
    // route's gateway to the Node (a restart lost that knowledge, or a server listing was
    // partial). This deviates from the upstream controller on purpose.
    let to_delete = routes
        .iter()
        .filter(|route| is_responsible_for(cluster_cidrs, &route.destination_cidr))
        .filter(|route| route.blackhole || !is_kept(&working, route))
        .filter(|route| !added.contains(&route.destination_cidr.trunc()))
        .cloned()
        .collect();

    RouteDecision {
        to_delete,
        to_create,
        wait_for_deletions: routes.first().is_some_and(|r| r.enable_node_addresses),
        nodes: working,
        unroutable,
        not_routed,
    }
}

fn is_kept(working: &BTreeMap<String, NodeRoutes>, route: &Route) -> bool {
    let cidr = route.destination_cidr.trunc();
    working.get(&route.target_node).is_some_and(|entry| {
        entry
            .pod_cidrs
            .iter()
            .any(|p| p.cidr == Some(cidr) && p.action == CidrAction::Keep)
    })
}

/// The Node's current `NetworkUnavailable` condition.
pub fn network_condition(node: &Node) -> Option<&NodeCondition> {
    node.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .and_then(|c| c.iter().find(|c| c.type_ == CONDITION_NETWORK_UNAVAILABLE))
}

/// The condition to write on `node`, or `None` when its status **and** reason already match.
/// A Node the cloud does not route gets [`ROUTE_NOT_SUPPORTED`] only when it carries this
/// controller's `True` ([`NO_ROUTE_CREATED`]), and nothing otherwise.
pub fn condition_update(node: &Node, entry: &NodeRoutes) -> Option<NetworkCondition> {
    let current = network_condition(node);
    if entry.not_routed {
        let ours = current.is_some_and(|c| {
            c.status == NO_ROUTE_CREATED.status
                && c.reason.as_deref() == Some(NO_ROUTE_CREATED.reason)
        });
        return ours.then_some(ROUTE_NOT_SUPPORTED);
    }
    let wanted = entry.wanted_condition();
    let matches = current
        .is_some_and(|c| c.status == wanted.status && c.reason.as_deref() == Some(wanted.reason));
    (!matches).then_some(wanted)
}

/// Why `--cluster-cidr` is unusable for the route controller.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ClusterCidrError {
    /// A comma-separated part does not parse (this includes an empty value and spaces).
    #[error("invalid cluster CIDR {0:?}")]
    Invalid(String),
    /// More than two CIDRs.
    #[error("at most two cluster CIDRs are allowed, got {0}")]
    TooMany(usize),
    /// Two CIDRs of one IP family.
    #[error("two cluster CIDRs must be of different IP families")]
    SameFamily,
}

/// Parse `--cluster-cidr` as the upstream start-up check does: split on commas (no trimming),
/// every part must parse, at most two, and two must be of different families.
pub fn parse_cluster_cidrs(value: &str) -> Result<Vec<IpNet>, ClusterCidrError> {
    let cidrs = value
        .split(',')
        .map(|part| {
            part.parse::<IpNet>()
                .map_err(|_| ClusterCidrError::Invalid(part.to_owned()))
        })
        .collect::<Result<Vec<_>, _>>()?;
    match cidrs.as_slice() {
        [_] => Ok(cidrs),
        [a, b]
            if matches!(
                (a, b),
                (IpNet::V4(_), IpNet::V4(_)) | (IpNet::V6(_), IpNet::V6(_))
            ) =>
        {
            Err(ClusterCidrError::SameFamily)
        }
        [_, _] => Ok(cidrs),
        _ => Err(ClusterCidrError::TooMany(cidrs.len())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The condition writes after the cloud calls: only Nodes that are both listed and in the
    /// working map; Nodes with neither pod CIDRs nor routes are untouched.
    fn condition_writes(
        nodes: &[Arc<Node>],
        plan: &RouteDecision,
    ) -> Vec<(String, NetworkCondition)> {
        nodes
            .iter()
            .filter_map(|node| {
                let name = node.metadata.name.as_deref()?;
                let entry = plan.nodes.get(name)?;
                condition_update(node, entry).map(|c| (name.to_owned(), c))
            })
            .collect()
    }

    use crate::node::test_support::addr;
    use k8s_openapi::api::core::v1::{NodeSpec, NodeStatus};

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn cluster() -> Vec<IpNet> {
        vec![net("10.244.0.0/16")]
    }

    /// The plan of a cloud that can route every pod CIDR.
    fn decide(nodes: &[Arc<Node>], routes: &[Route], cluster_cidrs: &[IpNet]) -> RouteDecision {
        super::decide(nodes, routes, cluster_cidrs, &|_| true, &|_| true)
    }

    fn node(name: &str, cidrs: &[&str], addresses: Vec<NodeAddress>) -> Arc<Node> {
        let mut node = Node::default();
        node.metadata.name = Some(name.into());
        node.metadata.uid = Some(format!("uid-{name}"));
        node.spec = Some(NodeSpec {
            pod_cidrs: (!cidrs.is_empty()).then(|| cidrs.iter().map(|c| (*c).into()).collect()),
            ..NodeSpec::default()
        });
        node.status = Some(NodeStatus {
            addresses: Some(addresses),
            ..NodeStatus::default()
        });
        Arc::new(node)
    }

    fn with_condition(node: &Arc<Node>, status: &str, reason: &str) -> Arc<Node> {
        let mut node = (**node).clone();
        node.status
            .get_or_insert_default()
            .conditions
            .get_or_insert_default()
            .push(NodeCondition {
                type_: CONDITION_NETWORK_UNAVAILABLE.into(),
                status: status.into(),
                reason: Some(reason.into()),
                ..NodeCondition::default()
            });
        Arc::new(node)
    }

    fn route(target: &str, cidr: &str) -> Route {
        Route {
            name: format!("r-{target}-{cidr}"),
            target_node: target.into(),
            target_provider_id: String::new(),
            destination_cidr: net(cidr),
            blackhole: false,
            enable_node_addresses: false,
            target_node_addresses: vec![],
        }
    }

    fn deleted(plan: &RouteDecision) -> Vec<(String, String)> {
        plan.to_delete
            .iter()
            .map(|r| (r.target_node.clone(), r.destination_cidr.to_string()))
            .collect()
    }

    fn created(plan: &RouteDecision) -> Vec<(String, String)> {
        plan.to_create
            .iter()
            .map(|c| (c.node.clone(), c.route.destination_cidr.to_string()))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn ownership_by_first_or_last_address() {
        let cases = [
            // (cluster CIDRs, route CIDR, ours)
            (vec!["10.244.0.0/16"], "10.244.1.0/24", true),
            (vec!["10.244.0.0/16"], "10.244.0.0/16", true),
            // Wider than the cluster CIDR and starting inside it: first address inside.
            (vec!["10.244.0.0/16"], "10.244.0.0/15", true),
            // Starting before the cluster CIDR and ending inside it: only the last address.
            (vec!["10.245.0.0/16"], "10.244.0.0/15", true),
            // Containing the cluster CIDR strictly inside: neither end inside.
            (vec!["10.244.0.0/16"], "10.0.0.0/8", false),
            (vec!["10.244.0.0/16"], "192.168.0.0/24", false),
            (vec!["10.244.0.0/16"], "10.245.0.0/24", false),
            // Dual stack: any cluster CIDR counts; families never mix.
            (
                vec!["10.244.0.0/16", "fd00:10::/56"],
                "fd00:10:0:1::/64",
                true,
            ),
            (vec!["10.244.0.0/16"], "fd00:10:0:1::/64", false),
            (vec!["fd00:10::/56"], "10.244.1.0/24", false),
            // Host bits in the route CIDR do not matter.
            (vec!["10.244.0.0/16"], "10.244.1.7/24", true),
            (vec![], "10.244.1.0/24", false),
        ];
        for (clusters, cidr, want) in cases {
            let clusters: Vec<IpNet> = clusters.iter().map(|c| net(c)).collect();
            assert_eq!(
                is_responsible_for(&clusters, &net(cidr)),
                want,
                "{clusters:?} {cidr}"
            );
        }
    }

    #[test]
    fn a_node_not_initialised_yet_waits_for_its_route_and_keeps_the_ones_it_has() {
        let taint = |node: &Arc<Node>| {
            let mut node = (**node).clone();
            node.spec.get_or_insert_default().taints =
                Some(vec![k8s_openapi::api::core::v1::Taint {
                    key: TAINT_UNINITIALIZED.into(),
                    value: Some("true".into()),
                    effect: "NoSchedule".into(),
                    time_added: None,
                }]);
            Arc::new(node)
        };
        // The pod CIDR came before the addresses: no route yet, no delete, the condition says so.
        let fresh = taint(&node("a", &["10.244.1.0/24"], vec![]));
        let plan = decide(std::slice::from_ref(&fresh), &[], &cluster());
        assert!(
            plan.to_create.is_empty() && plan.to_delete.is_empty(),
            "{plan:?}"
        );
        assert_eq!(plan.nodes["a"].pod_cidrs[0].action, CidrAction::Waiting);
        assert_eq!(plan.nodes["a"].wanted_condition(), NO_ROUTE_CREATED);
        // A route it already has is kept (a re-registered Node does not lose its pod traffic).
        let plan = decide(&[fresh], &[route("a", "10.244.1.0/24")], &cluster());
        assert!(
            plan.to_create.is_empty() && plan.to_delete.is_empty(),
            "{plan:?}"
        );
        assert_eq!(plan.nodes["a"].pod_cidrs[0].action, CidrAction::Keep);
        // Initialised: the route is made.
        let plan = decide(&[node("a", &["10.244.1.0/24"], vec![])], &[], &cluster());
        assert_eq!(plan.to_create.len(), 1, "{plan:?}");
    }

    #[test]
    fn addresses_compare_as_sets() {
        let a = vec![addr("InternalIP", "10.0.0.2"), addr("Hostname", "n")];
        let b = vec![addr("Hostname", "n"), addr("InternalIP", "10.0.0.2")];
        assert!(addresses_equal(&a, &b));
        assert!(addresses_equal(&[], &[]));
        assert!(!addresses_equal(&a, &a[..1]));
        assert!(!addresses_equal(
            &a,
            &[addr("InternalIP", "10.0.0.3"), addr("Hostname", "n")]
        ));
        // Same address, other type: different.
        assert!(!addresses_equal(
            &[addr("InternalIP", "10.0.0.2")],
            &[addr("ExternalIP", "10.0.0.2")]
        ));
    }

    #[test]
    fn pod_cidrs_fall_back_to_the_single_field() {
        let mut n = Node::default();
        assert!(pod_cidrs(&n).is_empty());
        n.spec = Some(NodeSpec {
            pod_cidr: Some("10.244.1.0/24".into()),
            ..NodeSpec::default()
        });
        assert_eq!(pod_cidrs(&n), vec!["10.244.1.0/24"]);
        n.spec.as_mut().unwrap().pod_cidrs = Some(vec!["10.244.2.0/24".into(), "fd00::/64".into()]);
        assert_eq!(pod_cidrs(&n), vec!["10.244.2.0/24", "fd00::/64"]);
        n.spec.as_mut().unwrap().pod_cidr = Some(String::new());
        n.spec.as_mut().unwrap().pod_cidrs = Some(vec![]);
        assert!(pod_cidrs(&n).is_empty());
    }

    #[test]
    fn missing_routes_are_created_with_target_addresses_and_uid_hint() {
        let addresses = vec![addr("InternalIP", "10.0.0.2"), addr("Hostname", "a")];
        let nodes = vec![node("a", &["10.244.1.0/24"], addresses.clone())];
        let plan = decide(&nodes, &[], &cluster());
        assert!(plan.to_delete.is_empty());
        assert!(!plan.wait_for_deletions);
        assert_eq!(
            plan.to_create,
            vec![RouteCreation {
                node: "a".into(),
                name_hint: "uid-a".into(),
                route: Route {
                    name: String::new(),
                    target_node: "a".into(),
                    target_provider_id: String::new(),
                    destination_cidr: net("10.244.1.0/24"),
                    blackhole: false,
                    enable_node_addresses: false,
                    target_node_addresses: addresses,
                },
            }]
        );
        assert_eq!(plan.nodes["a"].pod_cidrs[0].action, CidrAction::Add);
    }

    #[test]
    fn plan_table() {
        let a_addrs = vec![addr("InternalIP", "10.0.0.2")];
        let nodes = vec![
            node("a", &["10.244.1.0/24"], a_addrs.clone()),
            node("dual", &["10.244.2.0/24", "fd00:10:0:2::/64"], vec![]),
            node("bare", &[], vec![]),
        ];
        let cluster = vec![net("10.244.0.0/16"), net("fd00:10::/56")];
        struct Case {
            what: &'static str,
            routes: Vec<Route>,
            delete: Vec<(String, String)>,
            create: Vec<(String, String)>,
        }
        let blackhole = Route {
            blackhole: true,
            ..route("a", "10.244.1.0/24")
        };
        let cases = vec![
            Case {
                what: "everything in place",
                routes: vec![
                    route("a", "10.244.1.0/24"),
                    route("dual", "10.244.2.0/24"),
                    route("dual", "fd00:10:0:2::/64"),
                ],
                delete: vec![],
                create: vec![],
            },
            Case {
                what: "missing second family",
                routes: vec![route("a", "10.244.1.0/24"), route("dual", "10.244.2.0/24")],
                delete: vec![],
                create: pairs(&[("dual", "fd00:10:0:2::/64")]),
            },
            Case {
                what: "route for a vanished node is deleted",
                routes: vec![
                    route("a", "10.244.1.0/24"),
                    route("dual", "10.244.2.0/24"),
                    route("dual", "fd00:10:0:2::/64"),
                    route("ghost", "10.244.9.0/24"),
                ],
                delete: pairs(&[("ghost", "10.244.9.0/24")]),
                create: vec![],
            },
            Case {
                what: "routes outside the cluster CIDRs are never touched",
                routes: vec![
                    route("a", "10.244.1.0/24"),
                    route("dual", "10.244.2.0/24"),
                    route("dual", "fd00:10:0:2::/64"),
                    route("ghost", "192.168.0.0/24"),
                    route("a", "172.16.0.0/24"),
                    Route {
                        blackhole: true,
                        ..route("", "10.0.0.0/8")
                    },
                ],
                delete: vec![],
                create: vec![],
            },
            Case {
                what: "wrong CIDR for a known node, empty target, node without CIDRs",
                routes: vec![
                    route("a", "10.244.7.0/24"),
                    route("", "10.244.8.0/24"),
                    route("bare", "10.244.3.0/24"),
                ],
                delete: pairs(&[
                    ("a", "10.244.7.0/24"),
                    ("", "10.244.8.0/24"),
                    ("bare", "10.244.3.0/24"),
                ]),
                create: pairs(&[
                    ("a", "10.244.1.0/24"),
                    ("dual", "10.244.2.0/24"),
                    ("dual", "fd00:10:0:2::/64"),
                ]),
            },
            Case {
                what: "route to a CIDR a node wants but another target: replaced by the create, not deleted first",
                routes: vec![route("dual", "10.244.1.0/24")],
                delete: vec![],
                create: pairs(&[
                    ("a", "10.244.1.0/24"),
                    ("dual", "10.244.2.0/24"),
                    ("dual", "fd00:10:0:2::/64"),
                ]),
            },
            Case {
                what: "an owned blackhole is deleted (and counts as keep this cycle)",
                routes: vec![
                    blackhole.clone(),
                    route("dual", "10.244.2.0/24"),
                    route("dual", "fd00:10:0:2::/64"),
                ],
                delete: pairs(&[("a", "10.244.1.0/24")]),
                create: vec![],
            },
            Case {
                what: "a blackhole without target for a CIDR a node wants: replaced, not deleted first",
                routes: vec![
                    Route {
                        target_node: String::new(),
                        blackhole: true,
                        ..route("a", "10.244.1.0/24")
                    },
                    route("dual", "10.244.2.0/24"),
                    route("dual", "fd00:10:0:2::/64"),
                ],
                delete: vec![],
                create: pairs(&[("a", "10.244.1.0/24")]),
            },
            Case {
                what: "stale addresses only matter with enable_node_addresses",
                routes: vec![
                    Route {
                        target_node_addresses: vec![addr("InternalIP", "10.0.0.9")],
                        ..route("a", "10.244.1.0/24")
                    },
                    route("dual", "10.244.2.0/24"),
                    route("dual", "fd00:10:0:2::/64"),
                ],
                delete: vec![],
                create: vec![],
            },
            Case {
                what: "stale addresses with enable_node_addresses: update",
                routes: vec![
                    Route {
                        enable_node_addresses: true,
                        target_node_addresses: vec![addr("InternalIP", "10.0.0.9")],
                        ..route("a", "10.244.1.0/24")
                    },
                    route("dual", "10.244.2.0/24"),
                    route("dual", "fd00:10:0:2::/64"),
                ],
                delete: pairs(&[("a", "10.244.1.0/24")]),
                create: pairs(&[("a", "10.244.1.0/24")]),
            },
            Case {
                what: "current addresses with enable_node_addresses: keep",
                routes: vec![
                    Route {
                        enable_node_addresses: true,
                        target_node_addresses: a_addrs.clone(),
                        ..route("a", "10.244.1.0/24")
                    },
                    route("dual", "10.244.2.0/24"),
                    route("dual", "fd00:10:0:2::/64"),
                ],
                delete: vec![],
                create: vec![],
            },
        ];
        for case in cases {
            let plan = decide(&nodes, &case.routes, &cluster);
            assert_eq!(deleted(&plan), case.delete, "{}: deletions", case.what);
            assert_eq!(created(&plan), case.create, "{}: creations", case.what);
        }
    }

    #[test]
    fn pod_cidrs_the_cloud_cannot_route_are_left_out() {
        let nodes = vec![
            node("dual", &["10.244.2.0/24", "fd00:10:0:2::/64"], vec![]),
            node("v6", &["fd00:10:0:3::/64"], vec![]),
        ];
        let cluster = vec![net("10.244.0.0/16"), net("fd00:10::/56")];
        let ipv4_only = |cidr: &IpNet| matches!(cidr, IpNet::V4(_));
        let mut planned = super::decide(&nodes, &[], &cluster, &ipv4_only, &|_| true);
        assert_eq!(created(&planned), pairs(&[("dual", "10.244.2.0/24")]));
        assert_eq!(
            planned.unroutable,
            vec![
                ("dual".to_owned(), net("fd00:10:0:2::/64")),
                ("v6".to_owned(), net("fd00:10:0:3::/64")),
            ]
        );
        // The IPv4 route alone makes the network available; a Node with only unroutable pod
        // CIDRs is left alone, as one without pod CIDRs.
        let names: Vec<&str> = planned.nodes.keys().map(String::as_str).collect();
        assert_eq!(names, ["dual"]);
        planned.mark_created("dual", &net("10.244.2.0/24"));
        assert_eq!(planned.nodes["dual"].wanted_condition(), ROUTE_CREATED);
        assert_eq!(
            condition_writes(&nodes, &planned),
            vec![("dual".to_owned(), ROUTE_CREATED)]
        );

        // Once in place, the IPv4 route is kept and nothing else is asked for.
        let routes = vec![route("dual", "10.244.2.0/24")];
        let kept = super::decide(&nodes, &routes, &cluster, &ipv4_only, &|_| true);
        assert!(kept.to_create.is_empty() && kept.to_delete.is_empty());
        assert_eq!(kept.nodes["dual"].wanted_condition(), ROUTE_CREATED);
    }

    #[test]
    fn nodes_the_cloud_does_not_route_get_no_route_and_no_stuck_condition() {
        let dedicated = |name: &str, provider_id: &str, cidrs: &[&str]| {
            let mut n = (*node(name, cidrs, vec![])).clone();
            n.spec.get_or_insert_default().provider_id = Some(provider_id.into());
            Arc::new(n)
        };
        // Robot-like providerIDs are the ones the (test) cloud does not route.
        let routes_node = |n: &Node| {
            let id = n.spec.as_ref().and_then(|s| s.provider_id.as_deref());
            !id.is_some_and(|id| id.starts_with("hrobot://") || id.starts_with("hcloud://bm-"))
        };
        struct Case {
            what: &'static str,
            node: Arc<Node>,
            listed: Vec<Route>,
            create: Vec<(String, String)>,
            delete: Vec<(String, String)>,
            condition: Option<NetworkCondition>,
            warned: bool,
        }
        let d = dedicated("dedi", "hrobot://321", &["10.244.7.0/24"]);
        let cases = vec![
            Case {
                what: "a dedicated Node with a pod CIDR: no route, a Warning, no condition",
                node: d.clone(),
                listed: vec![],
                create: vec![],
                delete: vec![],
                condition: None,
                warned: true,
            },
            Case {
                what: "the legacy providerID is a dedicated Node too",
                node: dedicated("dedi", "hcloud://bm-321", &["10.244.7.0/24"]),
                listed: vec![],
                create: vec![],
                delete: vec![],
                condition: None,
                warned: true,
            },
            Case {
                what: "our True (written before the Node was known as dedicated) is undone",
                node: with_condition(&d, "True", NO_ROUTE_CREATED.reason),
                listed: vec![],
                create: vec![],
                delete: vec![],
                condition: Some(ROUTE_NOT_SUPPORTED),
                warned: true,
            },
            Case {
                what: "the CNI's condition is left as it is, True or False",
                node: with_condition(&d, "True", "CalicoIsDown"),
                listed: vec![],
                create: vec![],
                delete: vec![],
                condition: None,
                warned: true,
            },
            Case {
                what: "our undone condition is not written again",
                node: with_condition(&d, "False", REASON_ROUTE_NOT_SUPPORTED),
                listed: vec![],
                create: vec![],
                delete: vec![],
                condition: None,
                warned: true,
            },
            Case {
                what: "a listed route to it serves no Node and is deleted",
                node: d.clone(),
                listed: vec![route("dedi", "10.244.7.0/24")],
                create: vec![],
                delete: pairs(&[("dedi", "10.244.7.0/24")]),
                condition: None,
                warned: true,
            },
            Case {
                what: "a dedicated Node without a pod CIDR or route is left alone",
                node: dedicated("dedi", "hrobot://321", &[]),
                listed: vec![],
                create: vec![],
                delete: vec![],
                condition: None,
                warned: false,
            },
            Case {
                what: "a cloud Node beside them is routed as before",
                node: dedicated("cloud", "hcloud://5", &["10.244.8.0/24"]),
                listed: vec![],
                create: pairs(&[("cloud", "10.244.8.0/24")]),
                delete: vec![],
                condition: Some(NO_ROUTE_CREATED),
                warned: false,
            },
        ];
        for case in cases {
            let nodes = vec![case.node.clone()];
            let plan = super::decide(&nodes, &case.listed, &cluster(), &|_| true, &routes_node);
            assert_eq!(created(&plan), case.create, "{}: creations", case.what);
            assert_eq!(deleted(&plan), case.delete, "{}: deletions", case.what);
            assert_eq!(
                condition_writes(&nodes, &plan).first().map(|(_, c)| *c),
                case.condition,
                "{}: condition",
                case.what
            );
            assert_eq!(!plan.not_routed.is_empty(), case.warned, "{}", case.what);
            // `plan` shows the skipped Node as the Warning the controller records.
            let planned = plan.planned(&nodes, &RouteWrites::default());
            assert_eq!(
                planned.warnings.len(),
                usize::from(case.warned),
                "{}",
                case.what
            );
        }
        let plan = super::decide(
            std::slice::from_ref(&d),
            &[],
            &cluster(),
            &|_| true,
            &routes_node,
        );
        let warning = plan.not_routed[0].warning();
        assert_eq!(warning.reason, "RouteNotSupported");
        assert!(
            warning.message.contains("dedi")
                && warning.message.contains("hrobot://321")
                && warning.message.contains("10.244.7.0/24")
                && warning.message.contains("CNI"),
            "{}",
            warning.message
        );
        assert_eq!(plan.not_routed[0].uid, "uid-dedi");
    }

    #[test]
    fn a_route_to_another_instance_than_the_nodes_is_replaced() {
        let mut a = (*node("a", &["10.244.1.0/24"], vec![])).clone();
        a.spec.get_or_insert_default().provider_id = Some("hcloud://2".into());
        let nodes = vec![Arc::new(a)];
        let to = |provider_id: &str| Route {
            target_provider_id: provider_id.into(),
            ..route("a", "10.244.1.0/24")
        };
        // Leads to server 1, which has the Node's name: created over, not deleted first.
        let other = decide(&nodes, &[to("hcloud://1")], &cluster());
        assert_eq!(created(&other), pairs(&[("a", "10.244.1.0/24")]));
        assert_eq!(other.to_create[0].route.target_provider_id, "hcloud://2");
        assert!(other.to_delete.is_empty());
        assert_eq!(other.nodes["a"].wanted_condition(), NO_ROUTE_CREATED);
        // The Node's own instance, or an instance the provider does not name: kept.
        for listed in [to("hcloud://2"), to("")] {
            let kept = decide(&nodes, &[listed], &cluster());
            assert!(kept.to_create.is_empty() && kept.to_delete.is_empty());
        }
        // A Node without providerID is matched by name only.
        let unnamed = vec![node("a", &["10.244.1.0/24"], vec![])];
        assert!(
            decide(&unnamed, &[to("hcloud://1")], &cluster())
                .to_create
                .is_empty()
        );
    }

    #[test]
    fn wait_for_deletions_follows_the_first_listed_route() {
        let nodes = vec![node("a", &["10.244.1.0/24"], vec![])];
        let enabled = Route {
            enable_node_addresses: true,
            ..route("ghost", "10.244.9.0/24")
        };
        assert!(decide(&nodes, std::slice::from_ref(&enabled), &cluster()).wait_for_deletions);
        assert!(
            !decide(&nodes, &[route("x", "10.244.5.0/24"), enabled], &cluster()).wait_for_deletions
        );
        assert!(!decide(&nodes, &[], &cluster()).wait_for_deletions);
    }

    #[test]
    fn unparsable_pod_cidrs_are_ignored_but_never_keep() {
        let nodes = vec![node("a", &["not-a-cidr", "10.244.1.0/24"], vec![])];
        let routes = vec![route("a", "10.244.1.0/24")];
        let plan = decide(&nodes, &routes, &cluster());
        assert!(plan.to_delete.is_empty());
        assert!(plan.to_create.is_empty());
        assert_eq!(plan.nodes["a"].pod_cidrs[0].action, CidrAction::Unparsable);
        assert_eq!(plan.nodes["a"].pod_cidrs[1].action, CidrAction::Keep);
        assert_eq!(plan.nodes["a"].wanted_condition(), NO_ROUTE_CREATED);
    }

    /// A Node with a pod CIDR, one with neither CIDR nor route, one with only a route, and a
    /// route of a Node that does not exist.
    fn mixed_nodes_and_routes() -> (Vec<Arc<Node>>, Vec<Route>) {
        let nodes = vec![
            node("a", &["10.244.1.0/24"], vec![]),
            node("bare", &[], vec![]),
            node("routed", &[], vec![]),
        ];
        let routes = vec![
            route("routed", "10.244.3.0/24"),
            route("ghost", "10.244.9.0/24"),
        ];
        (nodes, routes)
    }

    #[test]
    fn working_map_holds_nodes_with_cidrs_or_routes() {
        let (nodes, routes) = mixed_nodes_and_routes();
        let plan = decide(&nodes, &routes, &cluster());
        let names: Vec<&str> = plan.nodes.keys().map(String::as_str).collect();
        assert_eq!(names, vec!["a", "ghost", "routed"]);
        assert!(plan.nodes["routed"].pod_cidrs.is_empty());
    }

    #[test]
    fn wanted_condition_table() {
        let entry = |actions: &[CidrAction]| NodeRoutes {
            pod_cidrs: actions
                .iter()
                .map(|a| PodCidr {
                    text: String::new(),
                    cidr: None,
                    action: *a,
                })
                .collect(),
            not_routed: false,
        };
        use CidrAction::*;
        let cases = [
            (entry(&[]), NO_ROUTE_CREATED),
            (entry(&[Keep]), ROUTE_CREATED),
            (entry(&[Keep, Keep]), ROUTE_CREATED),
            (entry(&[Keep, Add]), NO_ROUTE_CREATED),
            (entry(&[Update]), NO_ROUTE_CREATED),
            (entry(&[Unparsable]), NO_ROUTE_CREATED),
        ];
        for (e, want) in cases {
            assert_eq!(e.wanted_condition(), want, "{e:?}");
        }
        assert_eq!(ROUTE_CREATED.message, "RouteController created a route");
        assert_eq!(
            NO_ROUTE_CREATED.message,
            "RouteController failed to create a route"
        );
    }

    #[test]
    fn successful_creation_turns_the_cidr_into_keep() {
        let nodes = vec![node("a", &["10.244.1.0/24", "10.244.2.0/24"], vec![])];
        let mut plan = decide(&nodes, &[], &cluster());
        assert_eq!(plan.nodes["a"].wanted_condition(), NO_ROUTE_CREATED);
        plan.mark_created("a", &net("10.244.1.0/24"));
        assert_eq!(plan.nodes["a"].wanted_condition(), NO_ROUTE_CREATED);
        plan.mark_created("a", &net("10.244.2.0/24"));
        assert_eq!(plan.nodes["a"].wanted_condition(), ROUTE_CREATED);
        plan.mark_created("unknown", &net("10.244.2.0/24"));
    }

    #[test]
    fn node_work_groups_creations_and_gives_each_node_its_condition() {
        let nodes = vec![
            node("two", &["10.244.1.0/24", "10.244.2.0/24"], vec![]),
            with_condition(
                &node("done", &["10.244.3.0/24"], vec![]),
                "False",
                "RouteCreated",
            ),
            node("bare", &[], vec![]),
            node("routed", &[], vec![]),
        ];
        let routes = vec![
            route("done", "10.244.3.0/24"),
            route("routed", "10.244.4.0/24"),
            route("ghost", "10.244.9.0/24"),
        ];
        let plan = decide(&nodes, &routes, &cluster());
        let work = plan.node_work(&nodes);
        let names: Vec<&str> = work.iter().map(|w| w.name.as_str()).collect();
        let node_of = |w: &NodeWork| -> Arc<Node> {
            let listed = nodes
                .iter()
                .find(|n| n.metadata.name.as_ref() == Some(&w.name));
            listed.unwrap().clone()
        };
        // Listed Nodes of the working map only, in listing order.
        assert_eq!(names, ["two", "done", "routed"]);
        let cidrs: Vec<IpNet> = work[0]
            .creations
            .iter()
            .map(|c| c.route.destination_cidr)
            .collect();
        assert_eq!(cidrs, [net("10.244.1.0/24"), net("10.244.2.0/24")]);
        assert!(work[1].creations.is_empty() && work[2].creations.is_empty());

        let two = &work[0];
        let two_node = node_of(two);
        assert_eq!(two.condition_after(&two_node, &[]), Some(NO_ROUTE_CREATED));
        assert_eq!(
            two.condition_after(&two_node, &[net("10.244.1.0/24")]),
            Some(NO_ROUTE_CREATED),
            "one of two routes failed"
        );
        assert_eq!(
            two.condition_after(&two_node, &[net("10.244.2.0/24"), net("10.244.1.0/24")]),
            Some(ROUTE_CREATED)
        );
        assert_eq!(
            work[1].condition_after(&node_of(&work[1]), &[]),
            None,
            "already written"
        );
        assert_eq!(
            work[2].condition_after(&node_of(&work[2]), &[]),
            Some(NO_ROUTE_CREATED)
        );
        // The Node's current version decides: written meanwhile (by another pass), no write.
        let written = with_condition(&node("two", &[], vec![]), "False", "RouteCreated");
        let all = [net("10.244.2.0/24"), net("10.244.1.0/24")];
        assert_eq!(two.condition_after(&written, &all), None);

        // With every creation done, the same writes as every Node's condition update.
        let mut marked = plan.clone();
        for c in &plan.to_create {
            marked.mark_created(&c.node, &c.route.destination_cidr);
        }
        let per_node: Vec<(String, NetworkCondition)> = work
            .iter()
            .filter_map(|w| {
                let created: Vec<IpNet> = w
                    .creations
                    .iter()
                    .map(|c| c.route.destination_cidr)
                    .collect();
                w.condition_after(&node_of(w), &created)
                    .map(|c| (w.name.clone(), c))
            })
            .collect();
        assert_eq!(per_node, condition_writes(&nodes, &marked));
    }

    #[test]
    fn condition_writes_skip_only_when_status_and_reason_match() {
        let a = node("a", &["10.244.1.0/24"], vec![]);
        let routes = vec![route("a", "10.244.1.0/24")];
        let cases = [
            (a.clone(), Some(ROUTE_CREATED)),
            (with_condition(&a, "False", "RouteCreated"), None),
            // Same status, other reason (e.g. written by a CNI): rewritten.
            (
                with_condition(&a, "False", "CalicoIsUp"),
                Some(ROUTE_CREATED),
            ),
            (
                with_condition(&a, "True", "NoRouteCreated"),
                Some(ROUTE_CREATED),
            ),
        ];
        for (n, want) in cases {
            let nodes = vec![n];
            let plan = decide(&nodes, &routes, &cluster());
            let writes = condition_writes(&nodes, &plan);
            assert_eq!(
                writes,
                want.map(|c| ("a".to_owned(), c))
                    .into_iter()
                    .collect::<Vec<_>>(),
                "{:?}",
                network_condition(&nodes[0])
            );
        }
    }

    #[test]
    fn condition_writes_cover_only_listed_nodes_in_the_working_map() {
        let (nodes, routes) = mixed_nodes_and_routes();
        let plan = decide(&nodes, &routes, &cluster());
        let writes = condition_writes(&nodes, &plan);
        assert_eq!(
            writes,
            vec![
                ("a".to_owned(), NO_ROUTE_CREATED),
                ("routed".to_owned(), NO_ROUTE_CREATED),
            ]
        );
    }

    #[test]
    fn cluster_cidr_flag_parsing() {
        assert_eq!(
            parse_cluster_cidrs("10.244.0.0/16"),
            Ok(vec![net("10.244.0.0/16")])
        );
        assert_eq!(
            parse_cluster_cidrs("10.244.0.0/16,fd00:10::/56"),
            Ok(vec![net("10.244.0.0/16"), net("fd00:10::/56")])
        );
        for bad in [
            "",
            "10.244.0.0/16, fd00:10::/56",
            "10.244.0.0",
            "x",
            "10.244.0.0/16,",
        ] {
            assert!(
                matches!(parse_cluster_cidrs(bad), Err(ClusterCidrError::Invalid(_))),
                "{bad:?}"
            );
        }
        assert_eq!(
            parse_cluster_cidrs("10.244.0.0/16,10.245.0.0/16"),
            Err(ClusterCidrError::SameFamily)
        );
        assert_eq!(
            parse_cluster_cidrs("10.244.0.0/16,fd00::/56,10.1.0.0/16"),
            Err(ClusterCidrError::TooMany(3))
        );
    }
}
