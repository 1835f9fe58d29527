//! The invariants, as pure functions of what the cluster and the cloud hold.
//!
//! Checked all the time (by the runner's watchers):
//! - [`NODE_DELETED_WITH_SERVER`]: no Node is deleted (by anyone but the runner) while its
//!   server exists;
//! - [`TWO_LOAD_BALANCERS`]: never two load balancers carry one Service's UID label.
//!
//! Checked after the faults stop, until they all hold at once (within 60 s):
//! [`convergence_problems`]: each LoadBalancer Service has one load balancer whose server
//! targets are its eligible Nodes and whose address is in the Service's status; the network's
//! routes in the cluster CIDR are the Nodes' pod CIDRs via their servers' private IPs; no load
//! balancer without its Service; no Service stuck with a deletion timestamp; every Node
//! initialised and backed by an existing server.

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use k8s_openapi::api::core::v1::{Node, Service};
use serde_json::Value;

use crate::schedule::EXCLUDE_LABEL;

/// Invariant: no Node deleted while its server exists.
pub const NODE_DELETED_WITH_SERVER: &str = "no Node deleted while its server exists";
/// Invariant: never two load balancers for one Service.
pub const TWO_LOAD_BALANCERS: &str = "never two load balancers for one Service";
/// Invariant: everything converges within the limit after the faults stop.
pub const CONVERGENCE: &str = "converged within 60 s after the faults stopped";
/// Invariant: no secret in anything the run produced.
pub const NO_SECRETS: &str = "no API token or Robot password in logs, events, metrics, errors";

/// The label the CCM puts on its load balancers.
pub const SERVICE_UID_LABEL: &str = "hcloud-ccm/service-uid";
const UNINITIALIZED_TAINT: &str = "node.cloudprovider.kubernetes.io/uninitialized";
const AUTOSCALER_TAINT: &str = "ToBeDeletedByClusterAutoscaler";
const NODE_SELECTOR: &str = "load-balancer.hetzner.cloud/node-selector";

/// The cluster CIDR the runner gives the CCM (`--cluster-cidr`); pod CIDRs come from it.
pub const CLUSTER_CIDR: (Ipv4Addr, u8) = (Ipv4Addr::new(10, 244, 0, 0), 16);

/// What the checks look at.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Every Node.
    pub nodes: Vec<Node>,
    /// Every Service of the runner's namespace.
    pub services: Vec<Service>,
    /// The simulator's state (`/_admin/state`).
    pub cloud: Value,
    /// The ID of the cluster's network.
    pub network: i64,
}

fn array<'a>(value: &'a Value, key: &str) -> impl Iterator<Item = &'a Value> {
    value[key].as_array().into_iter().flatten()
}

/// The server ID in a Node's `hcloud://ID` providerID.
pub fn server_id(node: &Node) -> Option<i64> {
    node.spec
        .as_ref()?
        .provider_id
        .as_deref()?
        .strip_prefix("hcloud://")?
        .parse()
        .ok()
}

fn name_of(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

/// The server a Node stands for: by providerID, else by name (not initialised yet).
pub fn server_of<'a>(node: &Node, cloud: &'a Value) -> Option<&'a Value> {
    let id = server_id(node);
    array(cloud, "servers").find(|s| match id {
        Some(id) => s["id"].as_i64() == Some(id),
        None => s["name"].as_str() == Some(name_of(node)),
    })
}

/// A violation of [`NODE_DELETED_WITH_SERVER`] for this just deleted Node, if its server
/// still exists.
pub fn node_deletion_violation(node: &Node, cloud: &Value) -> Option<String> {
    let server = server_of(node, cloud)?;
    Some(format!(
        "Node {} was deleted while its server {} (id {}) exists with status {}",
        name_of(node),
        server["name"].as_str().unwrap_or_default(),
        server["id"],
        server["status"].as_str().unwrap_or_default()
    ))
}

fn uid_of(lb: &Value) -> Option<&str> {
    lb["labels"][SERVICE_UID_LABEL].as_str()
}

/// Service UIDs carried by more than one load balancer, with those load balancers' names.
pub fn duplicate_load_balancers(cloud: &Value) -> BTreeMap<String, Vec<String>> {
    let mut by_uid: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for lb in array(cloud, "load_balancers") {
        if let Some(uid) = uid_of(lb) {
            by_uid.entry(uid.to_owned()).or_default().push(format!(
                "{} (id {})",
                lb["name"].as_str().unwrap_or_default(),
                lb["id"]
            ));
        }
    }
    by_uid.retain(|_, lbs| lbs.len() > 1);
    by_uid
}

fn parse_cidr(cidr: &str) -> Option<(Ipv4Addr, u8)> {
    let (ip, len) = cidr.split_once('/')?;
    Some((ip.parse().ok()?, len.parse().ok()?))
}

fn in_cluster_cidr(cidr: &str) -> bool {
    let Some((ip, len)) = parse_cidr(cidr) else {
        return false;
    };
    let (net, net_len) = CLUSTER_CIDR;
    let mask = u32::MAX.checked_shl(32 - u32::from(net_len)).unwrap_or(0);
    len >= net_len && u32::from(ip) & mask == u32::from(net)
}

fn has_taint(node: &Node, key: &str) -> bool {
    node.spec
        .as_ref()
        .and_then(|s| s.taints.as_ref())
        .is_some_and(|t| t.iter().any(|t| t.key == key))
}

/// Whether the Node backs load balancers (not being deleted, not excluded by the label, not
/// about to be removed by the cluster autoscaler); the `node-selector` annotation is applied
/// separately.
pub fn eligible(node: &Node) -> bool {
    let excluded = node
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(EXCLUDE_LABEL))
        .is_some_and(|v| !matches!(v.as_str(), "false" | "0" | "f" | "F" | "FALSE" | "False"));
    node.metadata.deletion_timestamp.is_none() && !excluded && !has_taint(node, AUTOSCALER_TAINT)
}

/// `key=value[,key=value]` selectors (the only form the generator writes).
fn selector_matches(selector: &str, node: &Node) -> bool {
    let labels = node.metadata.labels.clone().unwrap_or_default();
    selector.split(',').all(|term| match term.split_once('=') {
        Some((k, v)) => labels.get(k.trim()).map(String::as_str) == Some(v.trim()),
        None => false,
    })
}

/// The server IDs a Service's load balancer must target.
pub fn expected_targets(service: &Service, nodes: &[Node]) -> BTreeSet<i64> {
    let selector = service
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(NODE_SELECTOR))
        .filter(|s| !s.is_empty());
    nodes
        .iter()
        .filter(|n| eligible(n))
        .filter(|n| selector.is_none_or(|s| selector_matches(s, n)))
        .filter_map(server_id)
        .collect()
}

fn wants_load_balancer(service: &Service) -> bool {
    service.spec.as_ref().and_then(|s| s.type_.as_deref()) == Some("LoadBalancer")
}

fn service_name(service: &Service) -> String {
    format!(
        "{}/{}",
        service.metadata.namespace.as_deref().unwrap_or_default(),
        service.metadata.name.as_deref().unwrap_or_default()
    )
}

fn ingress_ips(service: &Service) -> BTreeSet<String> {
    service
        .status
        .as_ref()
        .and_then(|s| s.load_balancer.as_ref())
        .and_then(|l| l.ingress.as_ref())
        .into_iter()
        .flatten()
        .filter_map(|i| i.ip.clone())
        .collect()
}

fn server_targets(lb: &Value) -> BTreeSet<i64> {
    array(lb, "targets")
        .filter(|t| t["type"] == "server")
        .filter_map(|t| t["server"]["id"].as_i64())
        .collect()
}

fn private_ip(server: &Value, network: i64) -> Option<&str> {
    array(server, "private_net")
        .find(|p| p["network"].as_i64() == Some(network))
        .and_then(|p| p["ip"].as_str())
}

/// Everything that keeps the snapshot from being converged, one line each; empty when it is.
pub fn convergence_problems(snapshot: &Snapshot) -> Vec<String> {
    let mut problems = Vec::new();
    let cloud = &snapshot.cloud;
    let lbs: Vec<&Value> = array(cloud, "load_balancers").collect();

    for node in &snapshot.nodes {
        let name = name_of(node);
        // A Node without providerID whose server is gone (deleted before the CCM initialised
        // it) looks like a machine outside the cloud (dedicated, on-premises), which the CCM
        // never deletes: it stays uninitialised, and that is converged.
        let foreign = server_id(node).is_none() && server_of(node, cloud).is_none();
        if !foreign && (server_id(node).is_none() || has_taint(node, UNINITIALIZED_TAINT)) {
            problems.push(format!("Node {name} is not initialised"));
        }
        if server_id(node).is_some() && server_of(node, cloud).is_none() {
            problems.push(format!(
                "Node {name} stays although its server (id {:?}) is gone",
                server_id(node).unwrap_or_default()
            ));
        }
    }

    let mut live_uids = BTreeSet::new();
    for service in &snapshot.services {
        let name = service_name(service);
        if service.metadata.deletion_timestamp.is_some() {
            problems.push(format!("Service {name} is stuck with a deletion timestamp"));
            continue;
        }
        if !wants_load_balancer(service) {
            continue;
        }
        let uid = service.metadata.uid.clone().unwrap_or_default();
        live_uids.insert(uid.clone());
        let mine: Vec<&&Value> = lbs.iter().filter(|lb| uid_of(lb) == Some(&uid)).collect();
        let [lb] = mine.as_slice() else {
            problems.push(format!(
                "Service {name} has {} load balancers, not one",
                mine.len()
            ));
            continue;
        };
        let want = expected_targets(service, &snapshot.nodes);
        let have = server_targets(lb);
        if want != have {
            problems.push(format!(
                "load balancer {} of Service {name} targets servers {have:?}, its eligible Nodes are servers {want:?}",
                lb["name"].as_str().unwrap_or_default()
            ));
        }
        let ipv4 = lb["public_net"]["ipv4"]["ip"].as_str().unwrap_or_default();
        if ipv4.is_empty() || !ingress_ips(service).contains(ipv4) {
            problems.push(format!(
                "Service {name}'s status ingress {:?} lacks its load balancer's address {ipv4:?}",
                ingress_ips(service)
            ));
        }
    }
    for lb in &lbs {
        if !uid_of(lb).is_some_and(|uid| live_uids.contains(uid)) {
            problems.push(format!(
                "load balancer {} (id {}, Service UID {:?}) has no Service",
                lb["name"].as_str().unwrap_or_default(),
                lb["id"],
                uid_of(lb)
            ));
        }
    }

    let mut want_routes = BTreeSet::new();
    for node in &snapshot.nodes {
        let Some(cidr) = node.spec.as_ref().and_then(|s| s.pod_cidr.as_deref()) else {
            continue;
        };
        if parse_cidr(cidr).is_none() {
            continue;
        }
        // No server, no route (see above).
        if server_id(node).is_none() && server_of(node, cloud).is_none() {
            continue;
        }
        let gateway = server_of(node, cloud)
            .and_then(|s| private_ip(s, snapshot.network))
            .unwrap_or("<no private IP>");
        want_routes.insert((cidr.to_owned(), gateway.to_owned()));
    }
    let have_routes: BTreeSet<(String, String)> = array(cloud, "networks")
        .filter(|n| n["id"].as_i64() == Some(snapshot.network))
        .flat_map(|n| array(n, "routes"))
        .filter_map(|r| {
            Some((
                r["destination"].as_str()?.to_owned(),
                r["gateway"].as_str()?.to_owned(),
            ))
        })
        .filter(|(destination, _)| in_cluster_cidr(destination))
        .collect();
    for missing in want_routes.difference(&have_routes) {
        problems.push(format!("route {} via {} is missing", missing.0, missing.1));
    }
    for extra in have_routes.difference(&want_routes) {
        problems.push(format!(
            "route {} via {} matches no Node's pod CIDR",
            extra.0, extra.1
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn node(name: &str, id: Option<i64>, cidr: &str, labels: Value) -> Node {
        let mut spec = json!({"podCIDR": cidr, "podCIDRs": [cidr]});
        if let Some(id) = id {
            spec["providerID"] = json!(format!("hcloud://{id}"));
        }
        serde_json::from_value(json!({
            "metadata": {"name": name, "labels": labels},
            "spec": spec,
        }))
        .unwrap()
    }

    fn service(name: &str, uid: &str, annotations: Value, ingress: &str) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": "chaos", "uid": uid, "annotations": annotations},
            "spec": {"type": "LoadBalancer"},
            "status": {"loadBalancer": {"ingress": [{"ip": ingress}]}},
        }))
        .unwrap()
    }

    fn lb(id: i64, uid: &str, targets: &[i64], ip: &str) -> Value {
        json!({
            "id": id, "name": format!("lb-{id}"),
            "labels": {SERVICE_UID_LABEL: uid},
            "public_net": {"ipv4": {"ip": ip}},
            "targets": targets.iter().map(|t| json!({"type": "server", "server": {"id": t}})).collect::<Vec<_>>(),
        })
    }

    fn server(id: i64, name: &str, ip: &str) -> Value {
        json!({"id": id, "name": name, "status": "running", "private_net": [{"network": 7, "ip": ip}]})
    }

    /// Two Nodes (one selected by `chaos/lb=yes`), two Services (one selecting), converged.
    fn converged() -> Snapshot {
        Snapshot {
            nodes: vec![
                node("a", Some(1), "10.244.1.0/24", json!({"chaos/lb": "yes"})),
                node("b", Some(2), "10.244.2.0/24", json!({})),
            ],
            services: vec![
                service("all", "u1", json!({}), "198.51.100.1"),
                service(
                    "some",
                    "u2",
                    json!({NODE_SELECTOR: "chaos/lb=yes"}),
                    "198.51.100.2",
                ),
            ],
            cloud: json!({
                "servers": [server(1, "a", "10.0.0.2"), server(2, "b", "10.0.0.3")],
                "load_balancers": [lb(10, "u1", &[1, 2], "198.51.100.1"), lb(11, "u2", &[1], "198.51.100.2")],
                "networks": [{"id": 7, "routes": [
                    {"destination": "10.244.1.0/24", "gateway": "10.0.0.2"},
                    {"destination": "10.244.2.0/24", "gateway": "10.0.0.3"},
                    {"destination": "10.100.0.0/24", "gateway": "10.0.0.9"},
                ]}],
            }),
            network: 7,
        }
    }

    #[test]
    fn a_converged_snapshot_has_no_problem() {
        assert_eq!(convergence_problems(&converged()), Vec::<String>::new());
    }

    /// A Node whose server was deleted before it was initialised cannot be told apart from a
    /// machine outside the cloud, which the CCM never deletes: converged as it is.
    #[test]
    fn a_node_of_no_cloud_server_may_stay_uninitialised() {
        let mut snapshot = converged();
        snapshot
            .nodes
            .push(node("gone-early", None, "10.244.4.0/24", json!({})));
        assert_eq!(convergence_problems(&snapshot), Vec::<String>::new());
    }

    #[test]
    fn each_kind_of_divergence_is_named() {
        type Change = Box<dyn Fn(&mut Snapshot)>;
        let cases: Vec<(&str, Change)> = vec![
            (
                "targets servers {1}, its eligible Nodes are servers {1, 2}",
                Box::new(|s| {
                    s.cloud["load_balancers"][0]["targets"] =
                        json!([{"type": "server", "server": {"id": 1}}])
                }),
            ),
            (
                "Node b stays although its server",
                Box::new(|s| s.cloud["servers"] = json!([server(1, "a", "10.0.0.2")])),
            ),
            (
                "has no Service",
                Box::new(|s| {
                    s.services.remove(0);
                }),
            ),
            (
                "Service chaos/all has 2 load balancers",
                Box::new(|s| {
                    s.cloud["load_balancers"].as_array_mut().unwrap().push(lb(
                        12,
                        "u1",
                        &[1, 2],
                        "x",
                    ))
                }),
            ),
            (
                "stuck with a deletion timestamp",
                Box::new(|s| {
                    s.services[0].metadata.deletion_timestamp =
                        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                            k8s_openapi::jiff::Timestamp::now(),
                        ))
                }),
            ),
            (
                "route 10.244.2.0/24 via 10.0.0.3 is missing",
                Box::new(|s| {
                    s.cloud["networks"][0]["routes"]
                        .as_array_mut()
                        .unwrap()
                        .remove(1);
                }),
            ),
            (
                "route 10.244.9.0/24 via 10.0.0.3 matches no Node",
                Box::new(|s| {
                    s.cloud["networks"][0]["routes"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"destination": "10.244.9.0/24", "gateway": "10.0.0.3"}))
                }),
            ),
            (
                "Node c is not initialised",
                Box::new(|s| {
                    s.nodes.push(node("c", None, "10.244.3.0/24", json!({})));
                    s.cloud["servers"]
                        .as_array_mut()
                        .unwrap()
                        .push(json!({"id": 3, "name": "c", "private_net": []}));
                }),
            ),
            (
                "lacks its load balancer's address",
                Box::new(|s| s.services[1].status = None),
            ),
        ];
        for (want, change) in cases {
            let mut snapshot = converged();
            change(&mut snapshot);
            let problems = convergence_problems(&snapshot);
            assert!(
                problems.iter().any(|p| p.contains(want)),
                "{want:?} not in {problems:#?}"
            );
        }
    }

    #[test]
    fn excluded_nodes_are_no_targets() {
        let mut snapshot = converged();
        snapshot.nodes[1]
            .metadata
            .labels
            .get_or_insert_default()
            .insert(EXCLUDE_LABEL.into(), "true".into());
        let problems = convergence_problems(&snapshot);
        assert!(
            problems[0].contains("its eligible Nodes are servers {1}"),
            "{problems:?}"
        );
        snapshot.nodes[1]
            .metadata
            .labels
            .get_or_insert_default()
            .insert(EXCLUDE_LABEL.into(), "false".into());
        assert!(convergence_problems(&snapshot).is_empty());
    }

    #[test]
    fn duplicates_and_deleted_nodes() {
        let mut cloud = converged().cloud;
        assert!(duplicate_load_balancers(&cloud).is_empty());
        cloud["load_balancers"]
            .as_array_mut()
            .unwrap()
            .push(lb(12, "u2", &[], ""));
        let dups = duplicate_load_balancers(&cloud);
        assert_eq!(dups.len(), 1);
        assert_eq!(dups["u2"].len(), 2);

        let gone = node("b", Some(2), "10.244.2.0/24", json!({}));
        let violation = node_deletion_violation(&gone, &cloud).unwrap();
        assert!(violation.contains("server b (id 2) exists"), "{violation}");
        cloud["servers"] = json!([server(1, "a", "10.0.0.2")]);
        assert_eq!(node_deletion_violation(&gone, &cloud), None);
        // Not initialised yet: found by name.
        let unnamed = node("a", None, "10.244.1.0/24", json!({}));
        assert!(node_deletion_violation(&unnamed, &cloud).is_some());
    }
}
