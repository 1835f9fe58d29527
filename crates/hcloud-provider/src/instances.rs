//! The instances capability (InstancesV2) for Hetzner Cloud servers, and Robot dedicated
//! servers when Robot support is on (`robot_nodes`); which server is a Node's is decided in
//! [`identify`].

pub mod identify;
mod robot_nodes;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use cloud_provider::provider::Result;
use cloud_provider::{Error, InstanceMetadata, Instances};
use hcloud_api::models::{Server, ServerStatus};
use k8s_openapi::api::core::v1::Node;
use k8s_openapi::jiff::Timestamp;

use crate::config::{CacheMode, InstancesConfig};
use crate::errors::categorize;
use crate::events::Events;
use crate::metadata::instance_metadata;
use crate::metrics::{Operations, op};
use crate::project::{ProjectGuard, ProjectState};
use crate::provider_id::ProviderId;
use crate::robot::Robot;
use crate::server_cache::{SUBSYSTEM_INSTANCES, ServerCache, ServerKey, StatusCheck};

/// Hetzner Cloud servers as Kubernetes instances.
///
/// Every call is counted in `cloud_controller_manager_operations_total` with the official
/// `hcloud/instancesv2.*` op values (see [`op::instances`]).
#[derive(Clone, Debug)]
pub struct HcloudInstances {
    cache: ServerCache,
    config: InstancesConfig,
    operations: Operations,
    events: Events,
    /// Whether the token's project holds the cluster's servers (see
    /// [`HcloudInstances::check_project`]).
    project: ProjectGuard,
    /// Robot dedicated servers (off unless given with [`HcloudInstances::with_robot`]).
    robot: Robot,
}

/// The event reason when the token sees none of the cluster's servers.
pub const CLOUD_PROJECT_MISMATCH: &str = "CloudProjectMismatch";

/// What [`HcloudInstances::check_project`] found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProjectCheck {
    /// No Node has an `hcloud://` providerID: nothing to compare.
    NoCloudNodes,
    /// This many of the cloud Nodes' servers are visible (at least one).
    Seen {
        /// Servers of cloud Nodes the token sees.
        seen: usize,
        /// Nodes with an `hcloud://` providerID.
        nodes: usize,
    },
    /// The token sees none of the cloud Nodes' servers: Node deletions are held.
    Mismatch {
        /// Nodes with an `hcloud://` providerID.
        nodes: usize,
    },
    /// The listing showed none of the cloud Nodes' servers, but while the check ran a lookup
    /// saw a Node's server through the token (a Node initialised meanwhile): no mismatch.
    SeenMeanwhile {
        /// Nodes with an `hcloud://` providerID.
        nodes: usize,
    },
}

/// The Nodes with an `hcloud://` providerID and their server IDs.
fn cloud_node_ids(nodes: &[Node]) -> Vec<(i64, &Node)> {
    nodes
        .iter()
        .filter_map(|node| match server_key(node) {
            Ok(ServerKey::Id(id)) => Some((id, node)),
            _ => None,
        })
        .collect()
}

impl HcloudInstances {
    /// Instances answered from `cache` (its lookups counted under `subsystem="instances_v2"`)
    /// with `config`, counting into a fresh (unregistered) [`Operations`] and writing no events
    /// until given a handle.
    pub fn new(cache: ServerCache, config: InstancesConfig) -> Self {
        Self {
            cache: cache.with_subsystem(SUBSYSTEM_INSTANCES),
            config,
            operations: Operations::default(),
            events: Events::default(),
            project: ProjectGuard::default(),
            robot: Robot::default(),
        }
    }

    /// Answer for Robot Nodes through `robot` (the provider's shared Robot).
    #[must_use]
    pub fn with_robot(mut self, robot: Robot) -> Self {
        self.robot = robot;
        self
    }

    /// Share `project` (the provider's guard) instead of a private one.
    #[must_use]
    pub fn with_project(mut self, project: ProjectGuard) -> Self {
        self.project = project;
        self
    }

    /// Count operations into `operations` (the provider's shared handle).
    #[must_use]
    pub fn with_operations(mut self, operations: Operations) -> Self {
        self.operations = operations;
        self
    }

    /// Write events through `events` (the provider's shared handle).
    #[must_use]
    pub fn with_events(mut self, events: Events) -> Self {
        self.events = events;
        self
    }

    /// Compare the cluster's Nodes with the servers the token sees (one listing of all
    /// servers, shared with the cache): when Nodes carry `hcloud://` providerIDs and not one of
    /// their servers is visible, the token belongs to another project (a bad rotation, a copy
    /// from another cluster). Every "not found" would then delete a Node, so no Node is deleted
    /// until one of their servers is seen again; the mismatch is logged and reported as a
    /// `CloudProjectMismatch` Warning on the first such Node. Deletions wait while the check
    /// runs; a failed check holds them until it is retried successfully.
    pub async fn check_project(&self, nodes: &[Node]) -> Result<ProjectCheck> {
        let ids = cloud_node_ids(nodes);
        if ids.is_empty() {
            self.project.set(ProjectState::Confirmed);
            return Ok(ProjectCheck::NoCloudNodes);
        }
        let snapshot = self
            .cache
            .all_servers_for_status()
            .await
            .map_err(|err| categorize("listing servers to compare with the Nodes", err))?;
        let seen = ids
            .iter()
            .filter(|(id, _)| snapshot.servers.iter().any(|s| s.id == *id))
            .count();
        if seen > 0 {
            self.project.set(ProjectState::Confirmed);
            return Ok(ProjectCheck::Seen {
                seen,
                nodes: ids.len(),
            });
        }
        if !self.project.mismatch_unless_confirmed() {
            return Ok(ProjectCheck::SeenMeanwhile { nodes: ids.len() });
        }
        let message = format!(
            "the API token sees none of the servers of the {} Nodes with an hcloud:// providerID: it may belong to another project. No Node is deleted and no load balancer created until one of their servers is seen again; check the token (HCLOUD_TOKEN)",
            ids.len()
        );
        tracing::error!("{message}");
        if let Some((_, first)) = ids
            .iter()
            .min_by_key(|(_, node)| node.metadata.name.as_deref().unwrap_or_default())
        {
            self.events
                .warn(*first, CLOUD_PROJECT_MISMATCH, &message)
                .await;
        }
        Ok(ProjectCheck::Mismatch { nodes: ids.len() })
    }

    /// [`HcloudInstances::check_project`] for a token that is not in use yet (`candidate`, a
    /// client with the new token, e.g. read again from its file): one listing of all servers
    /// through it, compared with the Nodes. Nothing else changes: the guard, the cache and the
    /// token in use stay as they are, so a token of another project can be refused before any
    /// request is made with it.
    pub async fn check_token(
        candidate: &hcloud_api::Client,
        nodes: &[Node],
    ) -> Result<ProjectCheck> {
        let ids = cloud_node_ids(nodes);
        if ids.is_empty() {
            return Ok(ProjectCheck::NoCloudNodes);
        }
        let servers = candidate
            .servers()
            .list_all(&hcloud_api::ListServersParams::default())
            .await
            .map_err(|err| categorize("listing servers with the new token", err))?;
        let seen = ids
            .iter()
            .filter(|(id, _)| servers.iter().any(|s| s.id == *id))
            .count();
        Ok(if seen > 0 {
            ProjectCheck::Seen {
                seen,
                nodes: ids.len(),
            }
        } else {
            ProjectCheck::Mismatch { nodes: ids.len() }
        })
    }

    /// The project guard this capability reports to.
    pub fn project(&self) -> &ProjectGuard {
        &self.project
    }

    /// A cloud Node's server was seen: the token's project is the cluster's.
    fn project_seen(&self) {
        if self.project.confirm() {
            tracing::info!(
                "a cloud Node's server is visible again: Node deletions and load balancer creations resume"
            );
        }
    }

    /// The server named `name`, else the one with an InternalIP of the Node as its private IP,
    /// from a listing of all servers no older than the status max age (no request of its own),
    /// or, when that listing is older than the Node and does not have it, from a listing made
    /// since (shared with the Node's initialisation). In cache modes `one`/`off` only the name is looked up.
    async fn find_unidentified(
        &self,
        node: &Node,
        name: &ServerKey,
    ) -> Result<Option<Arc<Server>>> {
        if self.cache.config().mode != CacheMode::All {
            return self
                .cache
                .get_for_status(name)
                .await
                .map_err(|err| categorize(format!("looking up {name}"), err));
        }
        let snapshot = self.cache.all_servers_for_status().await.map_err(|err| {
            categorize(
                format!("looking for {name} or a server with the Node's InternalIP"),
                err,
            )
        })?;
        let ServerKey::Name(wanted) = name else {
            return Ok(None);
        };
        if let Some(server) = server_of(node, wanted, &snapshot.servers, self.config.network_id) {
            return Ok(Some(server));
        }
        // A listing older than the Node may predate its server (a Node joining now, checked
        // before the listing made for its initialisation): a listing made since the Node was
        // created decides, shared with those lookups. A Node that is no cloud server costs
        // it once; later checks find the listing newer than the Node.
        let Some(since_created) = time_since_creation(node) else {
            return Ok(None);
        };
        if snapshot.age < since_created {
            return Ok(None);
        }
        let newer = self
            .cache
            .all_servers_within(since_created)
            .await
            .map_err(|err| categorize(format!("looking for {name} in a newer listing"), err))?;
        Ok(server_of(
            node,
            wanted,
            &newer.servers,
            self.config.network_id,
        ))
    }

    /// The shared server cache.
    pub fn cache(&self) -> &ServerCache {
        &self.cache
    }

    /// The operations counter.
    pub fn operations(&self) -> &Operations {
        &self.operations
    }

    /// The event handle.
    pub fn events(&self) -> &Events {
        &self.events
    }

    /// The status check of the shared cache (mode `all` only).
    async fn status_check(&self) -> Result<Option<StatusCheck>> {
        if self.cache.config().mode != CacheMode::All {
            return Ok(None);
        }
        self.cache
            .status_check()
            .await
            .map(Some)
            .map_err(|err| categorize("checking which servers are not running", err))
    }

    /// The metadata of a Node that no Robot server claims: the cloud server of its
    /// providerID (trusted; a differing name is a Warning of the metadata), or for a Node
    /// without one the server of its name, else of its InternalIP ([`identify`]).
    async fn cloud_metadata(&self, node: &Node) -> Result<InstanceMetadata> {
        let key = server_key(node)?;
        let found = self
            .cache
            .get(&key)
            .await
            .map_err(|err| categorize(format!("looking up {key}"), err))?;
        let server = match (found, &key) {
            (Some(server), _) => server,
            (None, ServerKey::Id(_)) => return Err(Error::instance_not_found()),
            (None, ServerKey::Name(_)) => match self.match_internal_ip(node).await? {
                identify::Matched::Cloud(server) => server,
                identify::Matched::Robot(server) => {
                    return Ok(self.robot_metadata_of(node, &server).await);
                }
            },
        };
        // A Node's server seen through the token (a Node initialised or refreshed): the
        // project is the cluster's, also after a start-up check that found every cloud Node's
        // server gone at that moment.
        self.project_seen();
        let mut metadata = instance_metadata(&server, &self.config);
        if let ServerKey::Id(id) = key {
            metadata.warnings.extend(identify::name_mismatch(
                node,
                ProviderId::Cloud(id),
                &server.name,
            ));
        }
        Ok(metadata)
    }

    /// The one server with an InternalIP of `node` (no providerID, no server of its name),
    /// from the lists the caches keep: the listing of every cloud server (mode `all` only),
    /// no older than the Node so that it has the Node's server (one listing answers a burst of
    /// joining Nodes, later lookups reuse it), and the Robot list when Robot can be asked.
    /// No server, or several, is "instance not found" with the Warning that says why.
    async fn match_internal_ip(&self, node: &Node) -> Result<identify::Matched> {
        let cloud = if self.cache.config().mode == CacheMode::All {
            let max_age = time_since_creation(node).map_or(self.cache.config().max_age, |since| {
                since.min(self.cache.config().max_age)
            });
            let listing = self
                .cache
                .all_servers_within(max_age)
                .await
                .map_err(|err| {
                    categorize(
                        "listing servers to find one with the Node's InternalIP",
                        err,
                    )
                })?;
            Some(listing.servers)
        } else {
            None
        };
        let robot = if self.robot.has_client() {
            Some(self.robot.servers().await.map_err(|err| {
                categorize(
                    "listing Robot servers to find one with the Node's InternalIP",
                    err,
                )
            })?)
        } else {
            None
        };
        let matched = identify::match_internal_ip(
            node,
            cloud.as_deref(),
            self.config.network_id,
            robot.as_ref().map_or(&[][..], |list| list.as_slice()),
        )
        .map_err(|warning| Error::instance_not_found().with_warning(warning))?;
        let (kind, name) = match &matched {
            identify::Matched::Cloud(server) => ("cloud", server.name.as_str()),
            identify::Matched::Robot(server) => ("Robot", server.server_name.as_str()),
        };
        tracing::info!(
            node = node.metadata.name.as_deref().unwrap_or_default(),
            server = name,
            kind,
            "no server is named like the Node, but this one has its InternalIP"
        );
        Ok(matched)
    }
}

/// The server named `wanted`, else the one server with an InternalIP of the Node as its
/// private IP: the rule the Node's initialisation follows ([`identify::match_internal_ip`]),
/// so that existence and shutdown checks find the server it would be initialised with, and
/// none when it would stay uninitialised.
fn server_of(
    node: &Node,
    wanted: &str,
    servers: &[Arc<Server>],
    network: Option<i64>,
) -> Option<Arc<Server>> {
    if let Some(server) = servers.iter().find(|s| s.name == wanted) {
        return Some(server.clone());
    }
    match identify::match_internal_ip(node, Some(servers), network, &[]) {
        Ok(identify::Matched::Cloud(server)) => Some(server),
        _ => None,
    }
}

/// How long ago the Node was created (`None` without a creation time): a listing younger
/// than this started after the Node registered, so after its server was created.
fn time_since_creation(node: &Node) -> Option<Duration> {
    let created = node.metadata.creation_timestamp.as_ref()?;
    // Zero for a creation time ahead of this clock.
    Some(Duration::try_from(Timestamp::now().duration_since(created.0)).unwrap_or_default())
}

/// How to find the server behind `node`: its providerID, else its name.
pub fn server_key(node: &Node) -> Result<ServerKey> {
    let provider_id = node
        .spec
        .as_ref()
        .and_then(|s| s.provider_id.as_deref())
        .unwrap_or_default();
    if provider_id.is_empty() {
        let name = node.metadata.name.clone().unwrap_or_default();
        return Ok(ServerKey::Name(name));
    }
    match ProviderId::parse(provider_id) {
        Ok(ProviderId::Cloud(id)) => Ok(ServerKey::Id(id)),
        Ok(ProviderId::Robot(number)) => Err(Error::other(format!(
            "Node has providerID hrobot://{number}: a Robot dedicated server, and Robot support is off (ROBOT_ENABLED); the Node is left as it is"
        ))),
        Err(err) => Err(Error::invalid_input(err.to_string())),
    }
}

#[async_trait]
impl Instances for HcloudInstances {
    /// More than one lookup coming: the first lists rather than reads its server alone.
    fn expect_lookups(&self, nodes: usize) {
        if nodes > 1 {
            self.cache.expect_many();
        }
    }

    /// Only a Node with an `hcloud://` providerID can be reported gone, and only on the API's
    /// own "not found" for its server. A Node without a providerID exists while a server has
    /// its name or, by the rule of its initialisation, is the one server with an InternalIP of
    /// it as its private IP (routes allow Node names that differ from server names); otherwise it may be no cloud server at all (a dedicated or
    /// on-premises machine, another cloud) and is never deleted: the answer is an error that
    /// says so, found in the shared listing without a request of its own (once a listing newer
    /// than the Node exists: a listing older than the Node may predate its server, and a
    /// Node joining in a burst is not reported before the burst's listing has looked).
    ///
    /// With cache mode `all`, the status check runs first (two requests per status period):
    /// when servers changed, the listing is refreshed before answering, so a deleted server is
    /// asked for directly (and confirmed gone by the API's own "not found") within about a
    /// status period. While the project check holds deletions (see
    /// [`HcloudInstances::check_project`]) a server that is not found is an error, not gone.
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        self.operations.count(op::instances::INSTANCE_EXISTS);
        if let Some(answer) = self.robot_exists(node).await {
            return answer;
        }
        let key = server_key(node)?;
        self.status_check().await?;
        if let ServerKey::Name(name) = &key {
            return match self.find_unidentified(node, &key).await? {
                Some(_) => Ok(true),
                None => Err(Error::rejected(format!(
                    "no server of this project is named {name:?} or is the one with the Node's InternalIP as its private IP, and the Node has no providerID: it may not be a cloud server (dedicated, on-premises, another cloud), so it is never deleted"
                ))),
            };
        }
        let exists = self
            .cache
            .confirm_exists(&key)
            .await
            .map_err(|err| categorize(format!("checking whether {key} exists"), err))?;
        if exists {
            self.project_seen();
        } else if self.project.holds_deletions() {
            return Err(Error::rejected(format!(
                "the API answers that {key} does not exist, but the token has not been seen to belong to the cluster's project (see the CloudProjectMismatch event): the Node is kept"
            )));
        }
        Ok(exists)
    }

    /// With cache mode `all`, the answer comes from the status check (servers that are not
    /// running, checked every status period): a server is shut down when it is `off` there.
    /// The server itself is found through the listing (for a Node without a providerID, by
    /// its name or its InternalIP, as for its existence).
    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        self.operations.count(op::instances::INSTANCE_SHUTDOWN);
        if let Some(answer) = self.robot_shutdown(node).await {
            return answer;
        }
        let key = server_key(node)?;
        let check = self.status_check().await?;
        let server = match &key {
            ServerKey::Name(_) => self.find_unidentified(node, &key).await?,
            ServerKey::Id(_) => self
                .cache
                .get_for_status(&key)
                .await
                .map_err(|err| categorize(format!("looking up {key}"), err))?,
        };
        let Some(server) = server else {
            return Err(Error::instance_not_found());
        };
        Ok(match check {
            // The status check is younger than the listing (or as young): it decides.
            Some(check) => check.is_off(server.id),
            None => server.status == ServerStatus::Off,
        })
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        self.operations.count(op::instances::INSTANCE_METADATA);
        if let Some(answer) = self.robot_metadata(node).await {
            return answer;
        }
        self.cloud_metadata(node).await.map(Some)
    }
}
