//! Integration tests of the controllers against a real kube-apiserver.
//!
//! The whole test binary shares one control plane. Each test has a scope of its own
//! ([`Env`]): its Nodes carry [`SCOPE_LABEL`] with the test's id and are named with it, its
//! Services live in a namespace of that name, and its controllers watch through that scope, so
//! they never see another test's objects.

// Test helpers outside `#[test]` functions fail loudly, like the tests themselves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod example_provider;
mod node_controller;
mod node_lifecycle;
mod route_controller;
mod service_controller;
mod support;

use std::sync::Arc;

use cloud_provider::{Metrics, NodeCache, WatchScope};
use k8s_openapi::api::core::v1::Node;
use kube::Client;
use kube::core::Selector;
use kube_harness::{ControlPlane, ensure_namespace, unique_name};
use tokio_util::sync::{CancellationToken, DropGuard};

/// The label on every Node a test creates, valued with the test's id.
pub const SCOPE_LABEL: &str = "integration.test/scope";

/// One test's scope on the shared control plane, with a running Node cache of that scope.
pub(crate) struct Env {
    pub client: Client,
    pub cache: NodeCache,
    pub metrics: Metrics,
    pub fake: Arc<support::FakeInstances>,
    pub shutdown: CancellationToken,
    /// The test's id: the value of its Nodes' [`SCOPE_LABEL`], the suffix of their names and
    /// the name of its namespace.
    pub id: String,
    /// What the test's controllers watch.
    pub scope: WatchScope,
    _stop: DropGuard,
}

impl Env {
    pub async fn start() -> Env {
        let plane = ControlPlane::shared().expect("control plane");
        let client = plane.client().await.expect("client");
        let id = unique_name("it");
        ensure_namespace(&client, &id).await.expect("namespace");
        let scope = WatchScope::all()
            .in_namespace(id.clone())
            .with_labels(Selector::from_iter([(SCOPE_LABEL.to_owned(), id.clone())]));
        let shutdown = CancellationToken::new();
        let cache = NodeCache::spawn_scoped(client.clone(), shutdown.clone(), &scope);
        Env {
            client,
            cache,
            metrics: Metrics::new(),
            fake: support::FakeInstances::new(),
            _stop: shutdown.clone().drop_guard(),
            shutdown,
            id,
            scope,
        }
    }

    /// `prefix` made unique to this test: the name of one of its Nodes.
    pub fn name(&self, prefix: &str) -> String {
        format!("{prefix}-{}", self.id)
    }

    /// The test's namespace.
    pub fn namespace(&self) -> &str {
        &self.id
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
