//! Integration tests of the node and node-lifecycle controllers against a real kube-apiserver.
//!
//! Every test runs its controllers against a private control plane, because the controllers act
//! on every Node of the cluster.

// Test helpers outside `#[test]` functions fail loudly, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod node_controller;
mod node_lifecycle;
mod route_controller;
mod service_controller;
mod support;

use std::sync::Arc;

use cloud_provider::{Metrics, NodeCache};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube_harness::ControlPlane;
use tokio_util::sync::{CancellationToken, DropGuard};

/// A private control plane with a running shared Node reflector.
pub(crate) struct Env {
    pub client: Client,
    pub cache: NodeCache,
    pub metrics: Metrics,
    pub fake: Arc<support::FakeInstances>,
    pub shutdown: CancellationToken,
    _stop: DropGuard,
    _plane: ControlPlane,
}

impl Env {
    pub async fn start() -> Env {
        let plane = ControlPlane::start().await.expect("control plane");
        let client = plane.client().await.expect("client");
        let shutdown = CancellationToken::new();
        let cache = NodeCache::spawn(client.clone(), shutdown.clone());
        Env {
            client,
            cache,
            metrics: Metrics::new(),
            fake: support::FakeInstances::new(),
            _stop: shutdown.clone().drop_guard(),
            shutdown,
            _plane: plane,
        }
    }

    /// Wait until the shared cache holds `node` at (at least) this version, so a controller
    /// started now sees it as it is.
    pub async fn wait_cached(&self, node: &Node) {
        let name = node.metadata.name.clone().unwrap_or_default();
        let version = node.metadata.resource_version.clone();
        support::eventually(
            "node in cache",
            std::time::Duration::from_secs(20),
            || async {
                let cached = self.cache.get(&name)?;
                (cached.metadata.resource_version == version).then_some(())
            },
        )
        .await;
    }
}
