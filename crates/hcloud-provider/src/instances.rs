//! The instances capability (InstancesV2) for Hetzner Cloud servers.

use std::sync::Arc;

use async_trait::async_trait;
use cloud_provider::provider::Result;
use cloud_provider::{Error, InstanceMetadata, Instances};
use hcloud_api::models::{Server, ServerStatus};
use k8s_openapi::api::core::v1::Node;

use crate::config::InstancesConfig;
use crate::events::Events;
use crate::metadata::instance_metadata;
use crate::metrics::{Operations, op};
use crate::provider_id::ProviderId;
use crate::server_cache::{SUBSYSTEM_INSTANCES, ServerCache, ServerKey};

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
        }
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

    async fn find(&self, node: &Node) -> Result<Arc<Server>> {
        let key = server_key(node)?;
        match self.cache.get(&key).await {
            Ok(Some(server)) => Ok(server),
            Ok(None) => Err(Error::InstanceNotFound),
            Err(err) => Err(Error::api(format!("looking up {key}"), err)),
        }
    }
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
            "Node has providerID hrobot://{number}: Robot dedicated servers are not handled by this cloud-controller-manager yet; the Node is left as it is"
        ))),
        Err(err) => Err(Error::InvalidInput(err.to_string())),
    }
}

#[async_trait]
impl Instances for HcloudInstances {
    async fn instance_exists(&self, node: &Node) -> Result<bool> {
        self.operations.count(op::instances::INSTANCE_EXISTS);
        let key = server_key(node)?;
        self.cache
            .confirm_exists(&key)
            .await
            .map_err(|err| Error::api(format!("checking whether {key} exists"), err))
    }

    async fn instance_shutdown(&self, node: &Node) -> Result<bool> {
        self.operations.count(op::instances::INSTANCE_SHUTDOWN);
        let key = server_key(node)?;
        let server = match self.cache.get_for_status(&key).await {
            Ok(Some(server)) => server,
            Ok(None) => return Err(Error::InstanceNotFound),
            Err(err) => return Err(Error::api(format!("looking up {key}"), err)),
        };
        Ok(server.status == ServerStatus::Off)
    }

    async fn instance_metadata(&self, node: &Node) -> Result<Option<InstanceMetadata>> {
        self.operations.count(op::instances::INSTANCE_METADATA);
        let server = self.find(node).await?;
        Ok(Some(instance_metadata(&server, &self.config)))
    }
}
