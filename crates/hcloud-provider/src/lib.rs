//! Hetzner Cloud implementation of the provider-neutral `cloud-provider` traits.
//!
//! Instances (InstancesV2) are implemented for cloud servers: providerIDs `hcloud://ID`,
//! lookup by providerID then by node name, labels, addresses and shutdown state as the official
//! Hetzner CCM reports them. Every lookup goes through one shared [`ServerCache`], which keeps
//! the API cost of bursts and periodic refreshes at one paginated listing. Robot dedicated
//! servers (`hrobot://N`, legacy `hcloud://bm-N`, or a name only Robot has) are handled when
//! [`ProviderSettings::robot`] enables them and [`HcloudProvider::with_robot`] is given a
//! [`RobotApi`] (see [`robot`]): one cached Robot list answers every lookup, and load
//! balancers make their Nodes IP targets. With Robot off, such Nodes are left untouched.
//!
//! Routes ([`HcloudRoutes`]) are offered when a network is configured and
//! [`ProviderSettings::routes_enabled`] is set: pod CIDRs become routes of that network whose
//! gateway is the target server's private IP there.
//!
//! Load balancers ([`HcloudLoadBalancers`]) are offered when
//! [`ProviderSettings::load_balancers`] is set: one Hetzner load balancer per Service, named,
//! labelled and annotated as the official Hetzner CCM does it (see [`load_balancers`]).
//!
//! Events and metrics follow the official CCM: the provider's own events carry the component
//! `hcloud-cloud-controller-manager` and are written once `CloudProvider::initialize` has run
//! ([`Events`]); [`HcloudProvider::register_metrics`] registers
//! `cloud_controller_manager_operations_total{op}` (official `op` values, see [`op`]),
//! `cloud_controller_manager_server_cache_requests_total{subsystem,mode,result}` and
//! `cloud_controller_manager_load_balancer_type_cache_requests_total{subsystem,mode,result}`.
//! A NotReady Node without a providerID whose name no server has is still reported to exist
//! while a server has its name or, as at its initialisation, exactly one server has an InternalIP of
//! it as its private IP (see [`HcloudInstances`]).
//!
//! A failed Hetzner Cloud or Robot call becomes the contract's `cloud_provider::Error` through
//! one function, [`errors::categorize`]: the error's kind, code and status decide its category
//! (and so whether and how soon the controllers retry) the same way in every capability.

mod config;
pub mod errors;
pub mod events;
mod instances;
mod lb_type_cache;
pub mod load_balancers;
mod metadata;
pub mod metrics;
pub mod project;
mod provider_id;
pub mod robot;
mod routes;
mod server_cache;
mod snapshot_cache;
#[cfg(test)]
mod test_support;

use std::sync::Arc;

pub use config::{AddressFamily, CacheConfig, CacheMode, InstancesConfig, NetworkRef};
pub use events::{EVENT_COMPONENT, Events};
pub use instances::identify::{NO_MATCHING_SERVER, NODE_NAME_MISMATCH, SEVERAL_MATCHING_SERVERS};
pub use instances::{CLOUD_PROJECT_MISMATCH, HcloudInstances, ProjectCheck, server_key};
pub use lb_type_cache::LoadBalancerTypeCache;
pub use load_balancers::{HcloudLoadBalancers, LoadBalancerSettings};
pub use metadata::{PROVIDED_BY_LABEL, instance_metadata, legacy_zone, node_addresses};
pub use metrics::{Operations, op};
pub use provider_id::{ParseProviderIdError, ProviderId};
pub use robot::{Robot, RobotApi, RobotSettings};
pub use routes::{CLUSTER_CIDR_MISCONFIGURED, HcloudRoutes, RoutesConfig};
pub use server_cache::{
    CacheError, CacheMetrics, RESULT_HIT, RESULT_MISS, SUBSYSTEM_INSTANCES,
    SUBSYSTEM_LOAD_BALANCER, SUBSYSTEM_NONE, SUBSYSTEM_ROUTES, ServerCache, ServerKey,
    ServerSnapshot, StatusCheck,
};

use cloud_provider::{CloudProvider, EventRecorder, Instances, LoadBalancer, Routes};
use k8s_openapi::api::core::v1::{Node, NodeSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use prometheus_client::registry::Registry;
use tokio_util::sync::CancellationToken;

/// The provider name, used as the providerID scheme.
pub const PROVIDER_NAME: &str = "hcloud";

/// Errors while setting the provider up.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `HCLOUD_NETWORK` names a network that does not exist.
    #[error("HCLOUD_NETWORK: network {0} not found")]
    NetworkNotFound(String),
    /// An API call failed.
    #[error("{action}: {source}")]
    Api {
        /// What was attempted.
        action: String,
        /// The cause.
        #[source]
        source: hcloud_api::Error,
    },
}

/// What the provider needs besides an API client.
#[derive(Clone, Debug, Default)]
pub struct ProviderSettings {
    /// `HCLOUD_INSTANCES_ADDRESS_FAMILY`.
    pub address_family: AddressFamily,
    /// `HCLOUD_NETWORK`.
    pub network: Option<NetworkRef>,
    /// `HCLOUD_INSTANCES_ZONE_LABEL_ENABLED`.
    pub zone_label_enabled: bool,
    /// Every age and threshold of the caches, `HCLOUD_SERVER_CACHE_MODE` and
    /// `HCLOUD_SERVER_CACHE_MAX_AGE` among them.
    pub cache: CacheConfig,
    /// Offer the routes capability (`HCLOUD_NETWORK_ROUTES_ENABLED`, whose default is true in
    /// the binary). Only effective with a `network`; the binary also requires a parsable
    /// `--cluster-cidr` (and no Robot support) before setting it. Defaults to false here, so
    /// callers that do not ask for routes get none.
    pub routes_enabled: bool,
    /// Offer the load balancer capability with these defaults (`HCLOUD_LOAD_BALANCERS_*`;
    /// read and checked by the binary's configuration). `None` (the default) offers none, which the
    /// binary sets when `HCLOUD_LOAD_BALANCERS_ENABLED` is false. Load balancers are attached
    /// to `network` when one is set.
    pub load_balancers: Option<LoadBalancerSettings>,
    /// `--cluster-cidr`, parsed (one CIDR, or an IPv4 and an IPv6 one). Routes whose
    /// destination is outside it get a `ClusterCIDRMisconfigured` Warning event on their Node;
    /// empty (the default): no check.
    pub cluster_cidrs: Vec<ipnet::IpNet>,
    /// `ROBOT_ENABLED`, `ROBOT_FORWARD_INTERNAL_IPS`, `ROBOT_RATE_LIMIT_WAIT_TIME` (the cache
    /// age is [`CacheConfig::robot_max_age`]). The Robot client itself is passed to
    /// [`HcloudProvider::with_robot`]. Default: Robot support off.
    pub robot: RobotSettings,
}

/// The Hetzner Cloud provider.
///
/// All capabilities share one [`Events`] handle (writing events only once
/// `CloudProvider::initialize` has run) and one [`Operations`] counter.
#[derive(Clone, Debug)]
pub struct HcloudProvider {
    instances: Arc<HcloudInstances>,
    network_id: Option<i64>,
    routes: Option<Arc<HcloudRoutes>>,
    load_balancers: Option<Arc<HcloudLoadBalancers>>,
    events: Events,
    operations: Operations,
    lb_types: LoadBalancerTypeCache,
    /// The API client's recoveries (see [`hcloud_api::Metrics::recoveries`]).
    recoveries: tokio::sync::watch::Receiver<u64>,
}

impl HcloudProvider {
    /// Build the provider, resolving `HCLOUD_NETWORK` to its ID (one API call when set).
    /// Robot dedicated servers are looked up only through [`HcloudProvider::with_robot`].
    pub async fn new(
        client: hcloud_api::Client,
        settings: ProviderSettings,
    ) -> Result<Self, Error> {
        Self::with_robot(client, settings, None).await
    }

    /// [`HcloudProvider::new`] with Robot dedicated servers asked through `robot` (when
    /// [`ProviderSettings::robot`] enables them; `None` with Robot enabled is the official
    /// CCM's Robot support without credentials: no Robot lookups, load balancer targets from
    /// the Nodes' InternalIPs). Robot is not asked anything here.
    pub async fn with_robot(
        client: hcloud_api::Client,
        settings: ProviderSettings,
        robot: Option<Arc<dyn RobotApi>>,
    ) -> Result<Self, Error> {
        let robot = Robot::new(settings.robot.clone(), robot, &settings.cache);
        let recoveries = client.metrics().recoveries();
        let operations = Operations::new();
        let events = Events::new();
        let project = project::ProjectGuard::default();
        operations.count(op::cloud::NEW_CLOUD);
        let network_id = match &settings.network {
            None => None,
            Some(reference) => Some(resolve_network(&client, reference).await?),
        };
        let config = InstancesConfig {
            address_family: settings.address_family,
            network_id,
            zone_label_enabled: settings.zone_label_enabled,
            cache: settings.cache.clone(),
        };
        let lb_types = LoadBalancerTypeCache::with_config(client.clone(), &settings.cache);
        let cache = ServerCache::new(client.clone(), settings.cache.clone());
        let load_balancers = settings.load_balancers.map(|lb_settings| {
            Arc::new(
                HcloudLoadBalancers::new(client.clone(), lb_settings, network_id)
                    .with_cache_config(&settings.cache)
                    .with_project(project.clone())
                    .with_events(events.clone())
                    .with_operations(operations.clone())
                    .with_lb_type_cache(lb_types.clone())
                    .with_robot(robot.clone())
                    .with_server_cache(cache.with_subsystem(SUBSYSTEM_LOAD_BALANCER)),
            )
        });
        let routes = match network_id {
            Some(id) if settings.routes_enabled => {
                operations.count(op::routes::NEW_ROUTES);
                Some(Arc::new(
                    HcloudRoutes::new(
                        client,
                        cache.clone(),
                        RoutesConfig::new(id).with_cluster_cidrs(settings.cluster_cidrs),
                    )
                    .with_events(events.clone())
                    .with_operations(operations.clone()),
                ))
            }
            _ => None,
        };
        let instances = HcloudInstances::new(cache, config)
            .with_robot(robot)
            .with_project(project)
            .with_events(events.clone())
            .with_operations(operations.clone());
        Ok(Self {
            instances: Arc::new(instances),
            network_id,
            routes,
            load_balancers,
            events,
            operations,
            lb_types,
            recoveries,
        })
    }

    /// The resolved `HCLOUD_NETWORK`.
    pub fn network_id(&self) -> Option<i64> {
        self.network_id
    }

    /// The instances implementation (with its shared cache).
    pub fn hcloud_instances(&self) -> &Arc<HcloudInstances> {
        &self.instances
    }

    /// The routes implementation (sharing the instances' server cache), when a network is
    /// configured and routes are enabled.
    pub fn hcloud_routes(&self) -> Option<&Arc<HcloudRoutes>> {
        self.routes.as_ref()
    }

    /// The load balancer implementation, when [`ProviderSettings::load_balancers`] is set.
    pub fn hcloud_load_balancers(&self) -> Option<&Arc<HcloudLoadBalancers>> {
        self.load_balancers.as_ref()
    }

    /// The event handle shared by every capability.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The `cloud_controller_manager_operations_total` counter shared by every capability.
    pub fn operations(&self) -> &Operations {
        &self.operations
    }

    /// The load balancer type cache (shared with the load balancer capability).
    pub fn lb_type_cache(&self) -> &LoadBalancerTypeCache {
        &self.lb_types
    }

    /// Register the provider's metrics with the official CCM's names and labels:
    /// `cloud_controller_manager_operations_total{op}`,
    /// `cloud_controller_manager_server_cache_requests_total{subsystem,mode,result}` and
    /// `cloud_controller_manager_load_balancer_type_cache_requests_total{subsystem,mode,result}`.
    /// Call once per registry.
    pub fn register_metrics(&self, registry: &mut Registry) {
        self.operations.register(registry);
        self.instances.cache().metrics().register(registry);
        self.lb_types.register(registry);
    }
}

async fn resolve_network(
    client: &hcloud_api::Client,
    reference: &NetworkRef,
) -> Result<i64, Error> {
    match reference {
        NetworkRef::Id(id) => match client.networks().get(*id).await {
            Ok(network) => Ok(network.id),
            // A numeric value may also be a network's name (as the official client tries).
            Err(err) if err.is_not_found() => {
                match client.networks().get_by_name(&id.to_string()).await {
                    Ok(Some(network)) => Ok(network.id),
                    Ok(None) => Err(Error::NetworkNotFound(format!("with ID or name {id}"))),
                    Err(source) => Err(Error::Api {
                        action: format!("HCLOUD_NETWORK: looking up network {id:?} by name"),
                        source,
                    }),
                }
            }
            Err(source) => Err(Error::Api {
                action: format!("HCLOUD_NETWORK: reading network {id}"),
                source,
            }),
        },
        NetworkRef::Name(name) => match client.networks().get_by_name(name).await {
            Ok(Some(network)) => Ok(network.id),
            Ok(None) => Err(Error::NetworkNotFound(format!("named {name:?}"))),
            Err(source) => Err(Error::Api {
                action: format!("HCLOUD_NETWORK: looking up network {name:?}"),
                source,
            }),
        },
    }
}

/// Nodes per page of the project check's listing (as many as a page of the Node cache's).
const PROJECT_CHECK_PAGE: u32 = cloud_provider::runtime::informer::LIST_PAGE_SIZE;

/// Every Node, as the project check reads it (each stripped to what the check compares), listed a page at a time: a
/// large cluster's Nodes are never all held in full at once (at a leader's start, beside the
/// Node cache's own listing).
pub async fn project_nodes(api: &kube::Api<Node>) -> Result<Vec<Node>, kube::Error> {
    let mut nodes = Vec::new();
    let mut params = kube::api::ListParams::default().limit(PROJECT_CHECK_PAGE);
    loop {
        let page = api.list(&params).await?;
        nodes.extend(page.items.into_iter().map(project_node));
        match page.metadata.continue_ {
            Some(token) if !token.is_empty() => params = params.continue_token(&token),
            _ => return Ok(nodes),
        }
    }
}

/// What the project check needs of a Node: its providerID, and the name, UID and resource
/// version of the event it may write about the Node.
fn project_node(node: Node) -> Node {
    let metadata = node.metadata;
    Node {
        metadata: ObjectMeta {
            name: metadata.name,
            uid: metadata.uid,
            resource_version: metadata.resource_version,
            ..ObjectMeta::default()
        },
        spec: node.spec.map(|spec| NodeSpec {
            provider_id: spec.provider_id,
            ..NodeSpec::default()
        }),
        status: None,
    }
}

#[async_trait::async_trait]
impl CloudProvider for HcloudProvider {
    fn provider_name(&self) -> &str {
        PROVIDER_NAME
    }

    /// Start writing the provider's events (component [`EVENT_COMPONENT`], as the official
    /// CCM's recorder). Before this, events are only logged.
    /// Starts the event recorder and, in the background, the project check
    /// ([`HcloudInstances::check_project`]): Node deletions wait until it has compared the
    /// Nodes with the servers the token sees, retried with growing delays while it fails.
    async fn initialize(
        &self,
        client: kube::Client,
        shutdown: CancellationToken,
    ) -> cloud_provider::provider::Result<()> {
        if !self
            .events
            .set_recorder(EventRecorder::new(client.clone(), EVENT_COMPONENT))
        {
            tracing::debug!("provider already initialized; keeping its event recorder");
        }
        let instances = self.instances.clone();
        instances.project().set(project::ProjectState::Checking);
        tokio::spawn(async move {
            let nodes: kube::Api<Node> = kube::Api::all(client);
            let mut delay = std::time::Duration::from_secs(5);
            loop {
                let checked = match project_nodes(&nodes).await {
                    Ok(list) => instances
                        .check_project(&list)
                        .await
                        .map_err(|err| err.to_string()),
                    Err(err) => Err(format!("listing Nodes: {err}")),
                };
                match checked {
                    Ok(found) => {
                        tracing::info!(
                            ?found,
                            "compared the Nodes with the servers the token sees"
                        );
                        return;
                    }
                    Err(err) => tracing::warn!(
                        error = %err,
                        retry_in = ?delay,
                        "could not compare the Nodes with the servers the token sees; Node deletions wait"
                    ),
                }
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    () = tokio::time::sleep(delay) => {}
                }
                delay = (delay * 2).min(std::time::Duration::from_secs(300));
            }
        });
        Ok(())
    }

    fn instances(&self) -> Option<Arc<dyn Instances>> {
        Some(self.instances.clone())
    }

    fn load_balancer(&self) -> Option<Arc<dyn LoadBalancer>> {
        self.load_balancers
            .clone()
            .map(|lbs| lbs as Arc<dyn LoadBalancer>)
    }

    fn routes(&self) -> Option<Arc<dyn Routes>> {
        self.routes.clone().map(|routes| routes as Arc<dyn Routes>)
    }

    /// The API client's recoveries: a success after transient failures of any call.
    fn recoveries(&self) -> Option<tokio::sync::watch::Receiver<u64>> {
        Some(self.recoveries.clone())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::expect_used)] // test code

    use super::*;

    #[test]
    fn the_project_check_keeps_a_nodes_identity_and_provider_id_only() {
        let node: Node = serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "node-1",
                "uid": "u-1",
                "resourceVersion": "7",
                "labels": { "a": "b" },
                "managedFields": [{ "manager": "kubelet", "operation": "Update" }],
            },
            "spec": { "providerID": "hcloud://42", "podCIDR": "10.244.0.0/24" },
            "status": { "addresses": [{ "type": "InternalIP", "address": "10.0.0.2" }] },
        }))
        .expect("a Node");
        let lean = project_node(node.clone());
        assert_eq!(server_key(&lean).ok(), Some(ServerKey::Id(42)));
        assert_eq!(
            cloud_provider::events::object_reference(&lean),
            cloud_provider::events::object_reference(&node),
            "the same event subject"
        );
        assert_eq!(lean.metadata.managed_fields, None);
        assert_eq!(lean.metadata.labels, None);
        assert_eq!(lean.status, None);
        assert_eq!(lean.spec.and_then(|s| s.pod_cidr), None);
    }
}
