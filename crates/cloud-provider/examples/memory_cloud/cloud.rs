//! An in-memory cloud, and its provider: what a cloud implements to get a cloud controller
//! manager from the framework.
//!
//! The cloud keeps instances, load balancers and routes in maps behind one lock. Its console
//! ([`MemoryCloud::add_instance`], [`MemoryCloud::delete_instance`], ...) is what an operator
//! of a real cloud would do by hand; the trait implementations below are what the controllers
//! call. A real provider makes API calls where this one reads and writes the maps, and has to
//! answer the same questions: which instance is behind a Node, does it still exist, which
//! address does a Service's load balancer have.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_trait::async_trait;
use cloud_provider::provider::{Error, InstanceMetadata, Result};
use cloud_provider::well_known::address_type;
use cloud_provider::{CloudProvider, Instances, LoadBalancer, Outcome, Route, Routes};
use ipnet::IpNet;
use k8s_openapi::api::core::v1::{
    LoadBalancerIngress, LoadBalancerStatus, Node, NodeAddress, Service,
};

/// The providerID scheme: the instance `web-1` is `memory://web-1`.
pub const PROVIDER_NAME: &str = "memory";

/// The `memory://` prefix of every providerID of this cloud.
pub const PROVIDER_ID_PREFIX: &str = "memory://";

/// One virtual machine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    /// The instance's name, which is also its ID and the name of its Node.
    pub name: String,
    /// For `node.kubernetes.io/instance-type`.
    pub instance_type: String,
    /// For `topology.kubernetes.io/zone`.
    pub zone: String,
    /// For `topology.kubernetes.io/region`.
    pub region: String,
    /// The instance's address in the cloud network.
    pub internal_ip: Ipv4Addr,
    /// Powered off (it still exists).
    pub shut_down: bool,
}

impl Instance {
    /// A running `mem-small` instance in zone `mem-1a` of region `mem-1`.
    pub fn new(name: &str, internal_ip: Ipv4Addr) -> Self {
        Self {
            name: name.to_owned(),
            instance_type: "mem-small".to_owned(),
            zone: "mem-1a".to_owned(),
            region: "mem-1".to_owned(),
            internal_ip,
            shut_down: false,
        }
    }

    /// `memory://<name>`.
    pub fn provider_id(&self) -> String {
        format!("{PROVIDER_ID_PREFIX}{}", self.name)
    }
}

/// A load balancer as the cloud keeps it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoadBalancerRecord {
    /// [`LoadBalancer::get_load_balancer_name`] of its Service.
    pub name: String,
    /// The address it answers on: the Service's `status.loadBalancer.ingress`.
    pub ingress_ip: Ipv4Addr,
    /// The names of the Nodes it forwards to, sorted.
    pub targets: Vec<String>,
    /// `(port, nodePort)` of every Service port: it forwards `port` to `nodePort` on every
    /// target.
    pub ports: Vec<(i32, i32)>,
}

/// A route of the cloud network.
#[derive(Clone, Debug)]
struct StoredRoute {
    cluster: String,
    name: String,
    target_node: String,
    target_provider_id: String,
}

#[derive(Debug, Default)]
struct State {
    instances: BTreeMap<String, Instance>,
    load_balancers: BTreeMap<String, LoadBalancerRecord>,
    /// By destination: one route per destination, as in most cloud networks.
    routes: BTreeMap<IpNet, StoredRoute>,
    /// Ingress addresses handed out so far (from 203.0.113.0/24, a documentation range).
    ingress_ips: u8,
}

/// The in-memory cloud, and its [`CloudProvider`]. Clones share the cloud.
#[derive(Clone, Debug, Default)]
pub struct MemoryCloud {
    state: Arc<Mutex<State>>,
}

impl MemoryCloud {
    fn state(&self) -> MutexGuard<'_, State> {
        // Every change below is a single map operation: a panic cannot leave half of one.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Create (or replace) an instance.
    pub fn add_instance(&self, instance: Instance) {
        self.state()
            .instances
            .insert(instance.name.clone(), instance);
    }

    /// Power an instance off (`true`) or on; `false` when there is no such instance.
    pub fn set_shut_down(&self, name: &str, shut_down: bool) -> bool {
        self.state()
            .instances
            .get_mut(name)
            .map(|instance| instance.shut_down = shut_down)
            .is_some()
    }

    /// Delete an instance; `false` when there was none.
    pub fn delete_instance(&self, name: &str) -> bool {
        self.state().instances.remove(name).is_some()
    }

    /// Every instance, by name.
    pub fn list_instances(&self) -> Vec<Instance> {
        self.state().instances.values().cloned().collect()
    }

    /// Every load balancer, by name.
    pub fn list_load_balancers(&self) -> Vec<LoadBalancerRecord> {
        self.state().load_balancers.values().cloned().collect()
    }

    /// The routes of `cluster`, as [`Routes::list_routes`] lists them.
    pub fn list_routes_of(&self, cluster: &str) -> Vec<Route> {
        let state = self.state();
        state
            .routes
            .iter()
            .filter(|(_, route)| route.cluster == cluster)
            .map(|(destination, route)| Route {
                name: route.name.clone(),
                target_node: route.target_node.clone(),
                target_provider_id: route.target_provider_id.clone(),
                destination_cidr: *destination,
                // The instance the route leads to is gone: the route leads nowhere.
                blackhole: route
                    .target_provider_id
                    .strip_prefix(PROVIDER_ID_PREFIX)
                    .is_none_or(|name| !state.instances.contains_key(name)),
                enable_node_addresses: false,
                target_node_addresses: Vec::new(),
            })
            .collect()
    }

    /// The instance behind `node`: found by its providerID when it has one (the framework's
    /// advice), else by the Node's name.
    fn instance(&self, node: &Node) -> Result<Option<Instance>> {
        let name = instance_name(node)?;
        Ok(self.state().instances.get(&name).cloned())
    }

    /// Like [`MemoryCloud::instance`], and "instance not found" when there is none.
    fn existing_instance(&self, node: &Node) -> Result<Instance> {
        self.instance(node)?.ok_or_else(Error::instance_not_found)
    }
}

/// The instance name of `node`: from `spec.providerID` (`memory://<name>`), else its name.
fn instance_name(node: &Node) -> Result<String> {
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|spec| spec.provider_id.as_deref());
    match provider_id.filter(|id| !id.is_empty()) {
        Some(id) => id
            .strip_prefix(PROVIDER_ID_PREFIX)
            .filter(|name| !name.is_empty())
            .map(str::to_owned)
            .ok_or_else(|| {
                Error::invalid_input(format!(
                    "spec.providerID {id:?} is not of the form {PROVIDER_ID_PREFIX}<name>"
                ))
            }),
        None => Ok(node.metadata.name.clone().unwrap_or_default()),
    }
}

/// The node controller initialises Nodes from [`Instances::instance_metadata`] and refreshes
/// their addresses; the node lifecycle controller deletes a NotReady Node once
/// [`Instances::instance_exists`] says `false`, and taints it while
/// [`Instances::instance_shutdown`] says `true`.
#[async_trait]
impl Instances for MemoryCloud {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        // The maps are the cloud itself, so a miss is a fresh confirmation: the Node goes.
        // A provider reading a cache or a partial listing must answer `Err` instead.
        Ok(self.instance(node)?.is_some())
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        Ok(self.existing_instance(node)?.shut_down)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        let instance = self.existing_instance(node)?;
        Ok(Some(InstanceMetadata {
            provider_id: instance.provider_id(),
            instance_type: instance.instance_type.clone(),
            node_addresses: vec![
                NodeAddress {
                    type_: address_type::INTERNAL_IP.to_owned(),
                    address: instance.internal_ip.to_string(),
                },
                NodeAddress {
                    type_: address_type::HOSTNAME.to_owned(),
                    address: instance.name.clone(),
                },
            ],
            zone: instance.zone,
            region: instance.region,
            additional_labels: BTreeMap::new(),
            warnings: Vec::new(),
        }))
    }
}

/// The ingress status of a load balancer.
fn status(ip: Ipv4Addr) -> LoadBalancerStatus {
    LoadBalancerStatus {
        ingress: Some(vec![LoadBalancerIngress {
            ip: Some(ip.to_string()),
            ..LoadBalancerIngress::default()
        }]),
    }
}

/// `(port, nodePort)` of every port of `service`; every port needs a nodePort, since the load
/// balancer forwards to the Nodes.
fn ports(service: &Service) -> Result<Vec<(i32, i32)>> {
    let ports = service
        .spec
        .as_ref()
        .and_then(|spec| spec.ports.as_deref())
        .unwrap_or_default();
    ports
        .iter()
        .enumerate()
        .map(|(i, port)| match port.node_port {
            Some(node_port) => Ok((port.port, node_port)),
            None => Err(Error::invalid_input(format!(
                "spec.ports[{i}].nodePort is not set: the load balancer forwards to NodePorts"
            ))),
        })
        .collect()
}

/// The names of `nodes`, sorted.
fn names(nodes: &[Arc<Node>]) -> Vec<String> {
    let mut names: Vec<String> = nodes
        .iter()
        .filter_map(|node| node.metadata.name.clone())
        .collect();
    names.sort();
    names
}

/// The service controller calls these for every Service of type LoadBalancer it owns: ensure
/// on a change of the Service, update when the eligible Nodes change, delete when the Service
/// goes (its finalizer holds the Service until then).
#[async_trait]
impl LoadBalancer for MemoryCloud {
    async fn get_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Option<LoadBalancerStatus>> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let state = self.state();
        Ok(state
            .load_balancers
            .get(&name)
            .map(|lb| status(lb.ingress_ip)))
    }

    async fn ensure_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Outcome<LoadBalancerStatus>> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let ports = ports(service)?;
        let mut state = self.state();
        let ingress_ip = match state.load_balancers.get(&name) {
            Some(existing) => existing.ingress_ip,
            None => {
                // Refused, not a user error: the Service is fine, the cloud is full; the
                // controller retries with a growing delay.
                let next = state
                    .ingress_ips
                    .checked_add(1)
                    .filter(|n| *n < 255)
                    .ok_or_else(|| Error::rejected("no free ingress address left"))?;
                state.ingress_ips = next;
                Ipv4Addr::new(203, 0, 113, next)
            }
        };
        let record = LoadBalancerRecord {
            name: name.clone(),
            ingress_ip,
            targets: names(nodes),
            ports,
        };
        state.load_balancers.insert(name, record);
        Ok(Outcome::Done(status(ingress_ip)))
    }

    async fn update_load_balancer(
        &self,
        cluster_name: &str,
        service: &Service,
        nodes: &[Arc<Node>],
    ) -> Result<Outcome<()>> {
        let name = self.get_load_balancer_name(cluster_name, service);
        let mut state = self.state();
        let lb = state
            .load_balancers
            .get_mut(&name)
            .ok_or_else(|| Error::not_found_msg(format!("load balancer {name:?}")))?;
        lb.targets = names(nodes);
        Ok(Outcome::Done(()))
    }

    async fn ensure_load_balancer_deleted(
        &self,
        cluster_name: &str,
        service: &Service,
    ) -> Result<Outcome<()>> {
        let name = self.get_load_balancer_name(cluster_name, service);
        self.state().load_balancers.remove(&name);
        Ok(Outcome::Done(()))
    }
}

/// The route controller lists the cluster's routes every period, creates one for every pod
/// CIDR of a Node that has none (then sets the Node's `NetworkUnavailable` to `False`) and
/// deletes the routes within the cluster CIDRs that lead to no Node.
#[async_trait]
impl Routes for MemoryCloud {
    async fn list_routes(&self, cluster_name: &str) -> Result<Vec<Route>> {
        Ok(self.list_routes_of(cluster_name))
    }

    async fn create_route(&self, cluster_name: &str, name_hint: &str, route: &Route) -> Result<()> {
        let instance = route
            .target_provider_id
            .strip_prefix(PROVIDER_ID_PREFIX)
            .ok_or_else(|| {
                Error::rejected(format!(
                    "Node {} has no {PROVIDER_ID_PREFIX} providerID (yet)",
                    route.target_node
                ))
            })?;
        let mut state = self.state();
        if !state.instances.contains_key(instance) {
            return Err(Error::not_found_msg(format!("instance {instance:?}")));
        }
        let stored = StoredRoute {
            cluster: cluster_name.to_owned(),
            name: format!("{cluster_name}-{name_hint}"),
            target_node: route.target_node.clone(),
            target_provider_id: route.target_provider_id.clone(),
        };
        state.routes.insert(route.destination_cidr, stored);
        Ok(())
    }

    async fn delete_route(&self, _cluster_name: &str, route: &Route) -> Result<()> {
        let mut state = self.state();
        // Deleting a route that is gone already is done; a route replaced meanwhile stays.
        if state
            .routes
            .get(&route.destination_cidr)
            .is_some_and(|stored| stored.name == route.name)
        {
            state.routes.remove(&route.destination_cidr);
        }
        Ok(())
    }
}

/// What the controllers ask first: which capabilities the cloud has. Each one present starts
/// its controllers ([`Instances`]: node and node lifecycle, [`LoadBalancer`]: service,
/// [`Routes`]: route).
impl CloudProvider for MemoryCloud {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    fn instances(&self) -> Option<Arc<dyn Instances>> {
        Some(Arc::new(self.clone()))
    }

    fn load_balancer(&self) -> Option<Arc<dyn LoadBalancer>> {
        Some(Arc::new(self.clone()))
    }

    fn routes(&self) -> Option<Arc<dyn Routes>> {
        Some(Arc::new(self.clone()))
    }
}
