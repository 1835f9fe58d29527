//! Which objects the framework's watches see: everything by default, or a namespace and a
//! label selector a library user chooses.

use kube::core::{NamespaceResourceScope, Selector};
use kube::runtime::watcher;
use kube::{Api, Client, Resource};

/// The objects a watch of the framework sees: the Node watch of [`crate::NodeCache`] and the
/// Service watch of the [`crate::ServiceController`] (through
/// [`crate::ServiceControllerConfig::scope`]).
///
/// The default, [`WatchScope::all`], is every object of the kind in every namespace: what a
/// cloud-controller-manager needs, and what the `hcloud-ccm` binary always uses (it has no
/// flag for a scope). A library user may narrow it, for example to run several sets of
/// controllers against one cluster, each on Nodes and Services of its own; this crate's
/// integration tests do that on one shared control plane, one scope per test.
///
/// - [`WatchScope::with_labels`]: only objects whose labels match the selector, sent to the
///   apiserver with every list and watch (a selector the apiserver rejects, say a value with
///   a space, makes the watch fail and shows in the health checks like any failing watch).
/// - [`WatchScope::in_namespace`]: only objects in that namespace. It applies to namespaced
///   kinds (Services); Nodes belong to no namespace and are scoped by their labels only.
///
/// A narrowed controller acts as if the objects outside its scope did not exist, which is
/// only safe when the scopes also divide the cloud: load balancers target only the Nodes in
/// scope, the lifecycle controller's deletion brake counts only the Nodes in scope, and the
/// route controller deletes a route of its cluster whose Node is outside the scope as it
/// would a route of a deleted Node. Give each scope its own cluster name (or cloud project).
/// Controllers read Nodes only through the [`crate::NodeCache`] they are given, so a scoped
/// cache scopes them all; writes go to the objects read from it, by name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WatchScope {
    namespace: Option<String>,
    labels: Selector,
}

impl WatchScope {
    /// Every object, in every namespace (the default).
    pub fn all() -> Self {
        Self::default()
    }

    /// Only objects in `namespace` (namespaced kinds only; Nodes are not affected).
    #[must_use]
    pub fn in_namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Only objects whose labels match `labels`, e.g.
    /// `Selector::from_iter([("example.com/shard", "a")])`.
    #[must_use]
    pub fn with_labels(mut self, labels: Selector) -> Self {
        self.labels = labels;
        self
    }

    /// The namespace, if the scope is narrowed to one.
    pub fn namespace(&self) -> Option<&str> {
        self.namespace.as_deref()
    }

    /// The label selector (empty: every object).
    pub fn labels(&self) -> &Selector {
        &self.labels
    }

    /// An API handle for the namespaced kind `K` in this scope's namespace, or in all of them.
    pub fn namespaced_api<K>(&self, client: Client) -> Api<K>
    where
        K: Resource<Scope = NamespaceResourceScope, DynamicType = ()>,
    {
        match &self.namespace {
            Some(namespace) => Api::namespaced(client, namespace),
            None => Api::all(client),
        }
    }

    /// Restrict `config` to this scope's labels (unchanged when the scope selects all).
    pub fn watcher_config(&self, config: watcher::Config) -> watcher::Config {
        if self.labels.selects_all() {
            config
        } else {
            config.labels_from(&self.labels)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_scope_watches_everything_and_a_narrowed_one_sends_its_selector() {
        let all = WatchScope::default();
        assert_eq!(all, WatchScope::all());
        assert_eq!(all.namespace(), None);
        assert_eq!(
            all.watcher_config(watcher::Config::default())
                .label_selector,
            None
        );

        let shard = WatchScope::all()
            .in_namespace("team-a")
            .with_labels(Selector::from_iter([("example.com/shard", "a")]));
        assert_eq!(shard.namespace(), Some("team-a"));
        let config = shard.watcher_config(watcher::Config::default().page_size(7));
        assert_eq!(
            config.label_selector.as_deref(),
            Some("example.com/shard=a")
        );
        assert_eq!(config.page_size, Some(7), "the rest of the config is kept");
    }
}
