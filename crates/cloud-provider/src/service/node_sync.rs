//! The node-driven "update targets" action of one Service.
//!
//! Queued on the Service's own key (never beside a full sync of the same Service), it reads
//! the eligible Nodes when it runs and records them only after the cloud accepted them, so an
//! older plan can never overwrite a newer one and a failed update is never mistaken for done.
//! A Service backing off after a failure does not hold a Node change back: its full sync (which
//! sets the targets) runs at once ([`ServiceReconciler::sync_now_for_nodes`]).

use std::time::Instant;

use k8s_openapi::api::core::v1::Service;

use super::controller::{NODE_SYNC_CONTROLLER, ServiceReconciler, Work};
use super::decisions::{
    EVENT_NO_NODES, EVENT_UPDATED_HOSTS, node_names_for_log, nodes_sufficiently_equal,
    wants_load_balancer,
};
use super::errors::ServiceSyncError;
use crate::events::{EventType, error_chain};
use crate::provider::{Category, Outcome};
use crate::runtime::reconcile::ReconcileError;

impl ServiceReconciler {
    /// A Node change for a Service waiting for a full sync: if the Service is backing off
    /// after a failure, the sync runs now instead of after its backoff, so that the change
    /// reaches its load balancer within moments, as upstream's node sync updates every load
    /// balancer whatever its Service's backoff. The queue takes the Node changes of a batch
    /// together (one sync per load balancer), the failure count is kept (a sync that fails
    /// again backs off further) and the pending retry stays where it was. A Service whose
    /// sync is queued anyway needs nothing, and one that waits for a change of its own (a
    /// user error) goes on waiting.
    pub(super) fn sync_now_for_nodes(&self, key: String) {
        if self.queue.backing_off(&key) {
            tracing::debug!(service = %key, "a Node change while the Service backs off; syncing it now");
            self.queue.add(key);
        }
    }

    /// Set the load balancer's targets to the eligible Nodes, unless they equal the last set
    /// sent (`force` sends them anyway). A Service never synced gets a full sync instead, and so
    /// does one whose load balancer the provider no longer finds (the ensure creates it; a
    /// Service that stopped wanting one meanwhile is left alone).
    pub(super) async fn update_targets(
        &self,
        service: &Service,
        key: &str,
        force: bool,
    ) -> Result<(), ServiceSyncError> {
        if !wants_load_balancer(service, self.class()) {
            return Ok(());
        }
        let started = Instant::now();
        let nodes = self.config.nodes.select(&self.nodes.list());
        let last = self.last_synced_nodes.lock().get(key).cloned();
        let Some(last) = last else {
            // Never synced by this process: only the full sync knows how.
            return self
                .process_create_or_update(std::sync::Arc::new(service.clone()), key)
                .await;
        };
        if !force && nodes_sufficiently_equal(&self.config.nodes.select(&last), &nodes) {
            return Ok(());
        }
        self.service_metrics.loadbalancer_syncs.inc();
        let result = self
            .lb
            .update_load_balancer(self.cluster(), service, &nodes)
            .await;
        self.service_metrics
            .update_host_latency
            .observe(started.elapsed().as_secs_f64());
        let err = match result {
            Ok(Outcome::Done(())) => {
                self.last_synced_nodes
                    .lock()
                    .insert(key.to_owned(), nodes.clone());
                let event = if nodes.is_empty() {
                    EVENT_NO_NODES
                } else {
                    EVENT_UPDATED_HOSTS
                };
                self.event(service, event).await;
                self.service_metrics
                    .nodesync_latency
                    .observe(started.elapsed().as_secs_f64());
                return Ok(());
            }
            Ok(Outcome::ImplementedElsewhere) => {
                self.last_synced_nodes.lock().insert(key.to_owned(), nodes);
                return Ok(());
            }
            Err(err) if err.category() == Category::NotFound => {
                // Not an error of the target update (upstream asks whether the load balancer
                // still exists before it reports one): there is nothing to update. Targets
                // are no longer known to be in place, so they are not recorded.
                self.last_synced_nodes.lock().remove(key);
                let still_wanted = self
                    .cached_service(key)
                    .is_some_and(|current| wants_load_balancer(&current, self.class()));
                if still_wanted {
                    tracing::info!(error = %error_chain(&err), "load balancer not found on a target update; queueing a full sync to create it");
                    self.enqueue(key.to_owned(), Work::Sync);
                } else {
                    tracing::info!(error = %error_chain(&err), "load balancer not found on a target update and the Service no longer wants one; nothing to do");
                }
                return Ok(());
            }
            Err(err) => ServiceSyncError::UpdateLoadBalancer(err),
        };
        self.metrics
            .record_error(NODE_SYNC_CONTROLLER, err.metric_label());
        self.service_metrics.nodesync_errors.inc();
        tracing::warn!(error = %error_chain(&err), "failed to update load balancer hosts");
        let message = format!(
            "Error updating load balancer with new hosts [{}] [node names limited, total number of nodes: {}], error: {}",
            node_names_for_log(&nodes).join(" "),
            nodes.len(),
            error_chain(match &err {
                ServiceSyncError::UpdateLoadBalancer(inner) => inner,
                _ => &err,
            })
        );
        self.recorder
            .publish(
                service,
                EventType::Warning,
                "UpdateLoadBalancerFailed",
                &message,
            )
            .await;
        Err(err)
    }
}
