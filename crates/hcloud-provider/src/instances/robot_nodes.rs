//! Robot dedicated servers as instances (see [`crate::robot`]).
//!
//! A Node is a Robot Node when its providerID is `hrobot://N` (or the legacy `hcloud://bm-N`,
//! never rewritten), or, without a providerID, when Robot lists a server of the Node's name
//! (with a Robot client only), or when its InternalIP is the `server_ip` of exactly one server
//! (see [`super::identify`]). A name that both a cloud server and a Robot server have is an
//! error and an `InstanceLookupFailed` Warning. The providerID is trusted: the server it
//! numbers is the Node's whatever its Robot name; a name that differs from the Node's is a
//! `NodeNameMismatch` Warning when the Node is initialised, never a failure or a deletion.
//!
//! Existence is answered from the cached list; "gone" only from a list whose request went out
//! after the question, so an error, the rate limit or an old list never delete a Node.

use cloud_provider::provider::Result;
use cloud_provider::{Error, InstanceMetadata};
use hcloud_api::robot::RobotServer;
use k8s_openapi::api::core::v1::Node;

use super::HcloudInstances;
use super::identify::name_mismatch;
use crate::errors::categorize;
use crate::metrics::op;
use crate::provider_id::ProviderId;
use crate::robot::{
    INSTANCE_LOOKUP_FAILED, MISCONFIGURED_INTERNAL_IP, find_number, robot_instance_metadata,
    robot_number,
};
use crate::server_cache::{CacheError, ServerKey};

/// Which API answers for a Node.
enum Target {
    /// The cloud (the instances' own path).
    Cloud,
    /// Robot, by the server number of the providerID.
    Number(u64),
    /// Robot: the Node has no providerID and this Robot server has its name.
    Named(RobotServer),
}

fn node_name(node: &Node) -> &str {
    node.metadata.name.as_deref().unwrap_or_default()
}

impl HcloudInstances {
    /// Which API answers for `node` (reads the Robot list only for a Node without a
    /// providerID, with a Robot client).
    async fn robot_target(&self, node: &Node) -> Result<Target> {
        let name = node_name(node);
        if let Some(number) = robot_number(node) {
            if !self.robot.enabled() {
                // The cloud path says that Robot support is off.
                return Ok(Target::Cloud);
            }
            if !self.robot.has_client() {
                return Err(categorize(
                    format!("looking up Robot server {number} of Node {name:?}"),
                    CacheError::RobotNotConfigured,
                ));
            }
            return Ok(Target::Number(number));
        }
        let has_provider_id = node
            .spec
            .as_ref()
            .and_then(|s| s.provider_id.as_deref())
            .is_some_and(|id| !id.is_empty());
        if has_provider_id || !self.robot.has_client() {
            return Ok(Target::Cloud);
        }
        self.operations
            .count(op::instances::GET_ROBOT_SERVER_BY_NAME);
        let robot =
            self.robot.by_name(name).await.map_err(|err| {
                categorize(format!("looking up a Robot server named {name:?}"), err)
            })?;
        let Some(server) = robot else {
            return Ok(Target::Cloud);
        };
        let key = ServerKey::Name(name.to_owned());
        let cloud = self
            .cache
            .get(&key)
            .await
            .map_err(|err| categorize(format!("looking up {key}"), err))?;
        if let Some(cloud) = cloud {
            let message = format!(
                "Node {name} has no providerID, and both the cloud server {} and the Robot server {} have its name: it cannot be told which one it is. Rename one of them or set the Node's providerID",
                cloud.id, server.server_number
            );
            self.events
                .warn(node, INSTANCE_LOOKUP_FAILED, &message)
                .await;
            return Err(Error::rejected(message));
        }
        Ok(Target::Named(server))
    }

    /// The Robot server numbered `number` (the Node's providerID), from the cached list.
    async fn robot_server(&self, number: u64) -> Result<RobotServer> {
        self.operations.count(op::instances::GET_ROBOT_SERVER_BY_ID);
        let found = self
            .robot
            .by_number(number)
            .await
            .map_err(|err| categorize(format!("looking up Robot server {number}"), err))?;
        found.ok_or_else(Error::instance_not_found)
    }

    /// `Some` Robot server of `node` when it is a Robot Node (from the cached list).
    async fn node_robot_server(&self, node: &Node) -> Option<Result<RobotServer>> {
        match self.robot_target(node).await {
            Ok(Target::Cloud) => None,
            Ok(Target::Named(server)) => Some(Ok(server)),
            Ok(Target::Number(number)) => Some(self.robot_server(number).await),
            Err(err) => Some(Err(err)),
        }
    }

    /// `Some` answer of `instance_exists` when `node` is a Robot Node.
    pub(super) async fn robot_exists(&self, node: &Node) -> Option<Result<bool>> {
        let number = match self.robot_target(node).await {
            Ok(Target::Cloud) => return None,
            Ok(Target::Named(_)) => return Some(Ok(true)),
            Ok(Target::Number(number)) => number,
            Err(err) => return Some(Err(err)),
        };
        Some(self.robot_number_exists(node, number).await)
    }

    /// Whether Robot lists server `number` (under any name: the providerID is trusted); "no"
    /// only from a list requested after this question.
    async fn robot_number_exists(&self, node: &Node, number: u64) -> Result<bool> {
        self.operations.count(op::instances::GET_ROBOT_SERVER_BY_ID);
        let name = node_name(node);
        let failed = |err| {
            categorize(
                format!("checking whether Robot server {number} exists"),
                err,
            )
        };
        let since = self.robot.moment();
        let listed = self.robot.servers().await.map_err(failed)?;
        if find_number(&listed, number).is_some() {
            return Ok(true);
        }
        let listed = self.robot.servers_after(since).await.map_err(failed)?;
        match find_number(&listed, number) {
            Some(_) => Ok(true),
            None => {
                tracing::info!(
                    node = name,
                    server_number = number,
                    "Robot lists no server with the number of the Node's providerID"
                );
                Ok(false)
            }
        }
    }

    /// `Some` answer of `instance_shutdown` when `node` is a Robot Node: its power state
    /// (`GET /reset/N`, never cached) is `shut off`.
    pub(super) async fn robot_shutdown(&self, node: &Node) -> Option<Result<bool>> {
        let server = match self.node_robot_server(node).await? {
            Ok(server) => server,
            Err(err) => return Some(Err(err)),
        };
        let number = server.server_number;
        Some(
            self.robot
                .reset(number)
                .await
                .map(|reset| reset.is_shut_off())
                .map_err(|err| {
                    categorize(
                        format!("reading the power state of Robot server {number}"),
                        err,
                    )
                }),
        )
    }

    /// `Some` answer of `instance_metadata` when `node` is a Robot Node; the InternalIPs it
    /// does not keep are `MisconfiguredInternalIP` Warnings, and a server of the Node's
    /// providerID named otherwise than the Node a `NodeNameMismatch` Warning of the metadata.
    pub(super) async fn robot_metadata(
        &self,
        node: &Node,
    ) -> Option<Result<Option<InstanceMetadata>>> {
        let server = match self.node_robot_server(node).await? {
            Ok(server) => server,
            Err(err) => return Some(Err(err)),
        };
        let mut metadata = self.robot_metadata_of(node, &server).await;
        if robot_number(node).is_some() {
            let number = i64::try_from(server.server_number).unwrap_or(i64::MAX);
            metadata.warnings.extend(name_mismatch(
                node,
                ProviderId::Robot(number),
                &server.server_name,
            ));
        }
        Some(Ok(Some(metadata)))
    }

    /// The metadata of `node` as the Robot server `server`; the InternalIPs it does not keep
    /// are `MisconfiguredInternalIP` Warnings.
    pub(super) async fn robot_metadata_of(
        &self,
        node: &Node,
        server: &RobotServer,
    ) -> InstanceMetadata {
        let (metadata, warnings) = robot_instance_metadata(
            server,
            self.config.address_family,
            self.robot.settings(),
            node,
        );
        for warning in warnings {
            self.events
                .warn(node, MISCONFIGURED_INTERNAL_IP, &warning)
                .await;
        }
        metadata
    }
}
